"""Recipe sources that ingest files (`waveform_archive`, `das_files`, `seisbench`) and the
`picking` output, on real files, each against the `seisctf` command it wraps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import obspy
import pytest
import xarray as xr
from das_vendor_files import write_prodml

from seisctf import conventions as cv
from seisctf.build import engine as recipes
from seisctf.cli import main
from seisctf.cluster import dask_client
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation


@pytest.fixture(scope="module")
def scheduler(dask_cluster_one_worker) -> str:
    return dask_cluster_one_worker.address


def build(path: Path, workdir: Path, scheduler: str) -> recipes.BuildContext:
    with dask_client(scheduler, quiet=True):
        return recipes.build_file(path, workdir=workdir, quiet=True)


def cli(*args: str, scheduler: str) -> None:
    assert main([*args, "--scheduler", scheduler, "--quiet"]) == 0


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def assert_same_data(built: str | Path, reference: str | Path, variable: str) -> None:
    ours, theirs = xr.open_zarr(str(built)), xr.open_zarr(str(reference))
    assert ours.attrs[cv.ATTR_COMPLETE] is True
    np.testing.assert_array_equal(ours[variable].values, theirs[variable].values)
    for name, coord in theirs[variable].coords.items():
        np.testing.assert_array_equal(ours[name].values, coord.values)


def test_waveform_archive_source_equals_ingest_waveforms_and_reruns_are_no_ops(tmp_path, scheduler):
    archive = tmp_path / "archive"
    archive.mkdir()
    rng = np.random.default_rng(3)
    start = obspy.UTCDateTime("2021-03-04T05:06:07")
    for index, station in enumerate(("AAA", "BBB")):
        for channel in ("HHZ", "HHN"):
            trace = obspy.Trace(
                (rng.standard_normal(1000) * 1000).astype(np.int32),
                header={
                    "network": "XX",
                    "station": station,
                    "channel": channel,
                    "sampling_rate": 20.0,
                    "starttime": start + 3 * index,
                },
            )
            trace.write(str(archive / f"{station}.{channel}.mseed"), format="MSEED")
    reference = tmp_path / "reference.zarr"
    cli("ingest", "waveforms", str(archive), "--out", str(reference), scheduler=scheduler)
    recipe = write(
        tmp_path / "recipe.yaml",
        f"recipe: 1\nsource:\n  waveform_archive:\n    sources: ['{archive}/*.mseed']\n"
        "    strict: true\noutputs:\n  store: {url: out/waves.zarr}\n",
    )
    context = build(recipe, tmp_path / "work", scheduler)
    source = tmp_path / "work/out/waves.zarr.source.zarr"
    assert context.written == [str(tmp_path / "work/out/waves.zarr")]
    assert_same_data(source, reference, "data")
    assert_same_data(tmp_path / "work/out/waves.zarr", reference, "data")
    attrs = xr.open_zarr(str(tmp_path / "work/out/waves.zarr")).attrs
    assert recorded_inputs(StoreLocation(source)) == recorded_inputs(StoreLocation(reference))
    assert attrs[cv.ATTR_PROVENANCE]["recipe"]["source"] == {
        "waveform_archive": {"sources": [f"{archive}/*.mseed"], "strict": True}
    }
    again = build(recipe, tmp_path / "work", scheduler)
    assert again.written == [] and again.skipped == [str(tmp_path / "work/out/waves.zarr")]
    # A changed input file changes the input hash: the store is rewritten.
    trace = obspy.read(str(archive / "AAA.HHZ.mseed"))[0]
    trace.data = trace.data + 1
    trace.write(str(archive / "AAA.HHZ.mseed"), format="MSEED")
    changed = build(recipe, tmp_path / "work", scheduler)
    assert changed.written == [str(tmp_path / "work/out/waves.zarr")]


def test_das_files_source_equals_ingest_das(tmp_path, scheduler):
    folder = tmp_path / "das"
    folder.mkdir()
    rng = np.random.default_rng(5)
    start = np.datetime64("2024-01-02T03:04:05", "ns")
    for index in range(2):
        write_prodml(
            folder / f"part{index}.h5",
            rng.standard_normal((200, 8)),
            start + np.timedelta64(4 * index, "s"),
            50.0,
        )
    reference = tmp_path / "reference.zarr"
    cli("ingest", "das", str(folder), "--out", str(reference), scheduler=scheduler)
    recipe = write(
        tmp_path / "recipe.yaml",
        f"recipe: 1\nsource:\n  das_files:\n    sources: ['{folder}']\n"
        "    store: raw/das.zarr\noutputs:\n  store: {url: das.zarr}\n",
    )
    context = build(recipe, tmp_path / "work", scheduler)
    assert context.written == [str(tmp_path / "work/das.zarr")]
    assert_same_data(tmp_path / "work/raw/das.zarr", reference, "strain_rate")
    assert_same_data(tmp_path / "work/das.zarr", reference, "strain_rate")


def test_seisbench_source_with_picking_output_matches_seisctf_split(tmp_path, scheduler):
    from catalogs.test_event_windows import write_seisbench

    dataset = write_seisbench(tmp_path / "sb")
    reference = tmp_path / "reference.zarr"
    cli("ingest", "seisbench", str(dataset), "--out", str(reference), scheduler=scheduler)
    cli(
        "split", str(reference), "--strategy", "station-disjoint", "--seed", "1",
        "--audit", str(tmp_path / "reference-audit.json"), scheduler=scheduler,
    )  # fmt: skip
    recipe = write(
        tmp_path / "recipe.yaml",
        f"recipe: 1\nsource:\n  seisbench:\n    path: {dataset}\noutputs:\n  picking:\n"
        "    url: picking.zarr\n    split: {strategy: station-disjoint, seed: 1}\n"
        "    audit: audit.json\n",
    )
    context = build(recipe, tmp_path / "work", scheduler)
    url = tmp_path / "work/picking.zarr"
    assert context.written == [str(url)]
    for variable in ("waveforms", cv.SPLIT_VAR, cv.SPLIT_CLUSTER_VAR):
        assert_same_data(url, reference, variable)
    audit = json.loads((tmp_path / "work/audit.json").read_text())
    assert audit == json.loads((tmp_path / "reference-audit.json").read_text())
    attrs = xr.open_zarr(str(url)).attrs
    assert attrs[cv.ATTR_SPLIT_AUDIT] == audit
    assert attrs[cv.ATTR_PROVENANCE]["recipe"]["output"]["picking"]["split"]["seed"] == (
        recipes.WITHHELD
    )
    again = build(recipe, tmp_path / "work", scheduler)
    assert again.written == [] and again.skipped == [str(url)]
    # Another strategy re-splits the same ingested store (no re-ingest) into a second store.
    other = write(
        tmp_path / "other.yaml",
        f"recipe: 1\nsource:\n  seisbench:\n    path: {dataset}\n    store: picking.zarr\n"
        "outputs:\n  picking:\n    url: event.zarr\n    split: {strategy: event, seed: 2}\n",
    )
    context = build(other, tmp_path / "work", scheduler)
    assert context.written == [str(tmp_path / "work/event.zarr")]
    assert xr.open_zarr(str(tmp_path / "work/event.zarr")).attrs[cv.ATTR_SPLIT]["strategy"] == (
        "event"
    )
    assert xr.open_zarr(str(url)).attrs[cv.ATTR_SPLIT]["strategy"] == "station-disjoint"
