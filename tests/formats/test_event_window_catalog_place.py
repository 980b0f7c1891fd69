"""Where an event-window store keeps its Parquet catalogue: inside the store
(`STORE/catalog.parquet`), named in the command's output, so a store moved on its own keeps it;
stores of earlier versions, whose catalogue lies beside them in `catalogs/NAME.parquet`, are
still read (and `seisctf split` moves theirs inside)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows as ew
from seisctf.location import StoreLocation

N_TRACES = 12


def seisctf_cli(*args: str, scheduler: str, returncode: int = 0) -> subprocess.CompletedProcess:
    """`seisctf ARGS --scheduler S --quiet` as a user runs it, with its exit code."""
    command = [sys.executable, "-m", "seisctf.cli", *args, "--scheduler", scheduler, "--quiet"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == returncode, run.stdout + run.stderr
    assert "Warning" not in run.stderr, run.stderr  # e.g. zarr's about the catalogue file
    return run


def write_seisbench(folder: Path) -> list[str]:
    """A SeisBench dataset written by SeisBench's WaveformDataWriter: its traces' own names
    (`trace_name_original`; the writer names them by their block)."""
    import seisbench.data as sbd

    rng = np.random.default_rng(2)
    folder.mkdir(parents=True)
    with sbd.WaveformDataWriter(folder / "metadata.csv", folder / "waveforms.hdf5") as writer:
        writer.data_format = {"dimension_order": "CW", "component_order": "ZNE", "unit": "counts"}
        for i in range(N_TRACES):
            meta = {
                "trace_name": f"XX.S{i % 4}_{i:03d}",
                "trace_sampling_rate_hz": 100.0,
                "station_network_code": "XX",
                "station_code": f"S{i % 4}",
                "station_latitude_deg": 40.0 + i % 4,
                "station_longitude_deg": 10.0,
                "source_id": f"ev{i // 2}",
                "source_latitude_deg": 41.0 + i // 2,
                "source_longitude_deg": 11.0,
                "trace_p_arrival_sample": int(rng.integers(20, 60)),
            }
            writer.add_trace(meta, rng.normal(size=(3, 300)).astype(np.float32))
    return [f"XX.S{i % 4}_{i:03d}" for i in range(N_TRACES)]


def write_stead(folder: Path) -> tuple[Path, Path]:
    """STEAD's layout: data/<trace_name> (6000, E N Z) float32, plus the CSV."""
    rng = np.random.default_rng(3)
    folder.mkdir(parents=True)
    names = [f"ST{i:02d}.TA_20061103{i:04d}_EV" for i in range(4)]
    hdf5, csv = folder / "merged.hdf5", folder / "merged.csv"
    with h5py.File(hdf5, "w") as file:
        for name in names:
            file.create_dataset(f"data/{name}", data=rng.normal(size=(6000, 3)).astype("f4"))
    rows = [{"network_code": "TA", "receiver_code": name[:4], "trace_category": "earthquake_local",
             "trace_name": name} for name in names]  # fmt: skip
    pd.DataFrame(rows).to_csv(csv, index=False)
    return hdf5, csv


def only_entry(folder: Path) -> Path:
    """The folder's one entry (the store): nothing of the store lies beside it."""
    [entry] = list(folder.iterdir())
    return entry


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, dask_cluster) -> tuple[Path, list[str], str]:
    """`seisctf ingest seisbench` into a folder of its own: (store, trace names, stdout)."""
    root = tmp_path_factory.mktemp("ingested")
    names = write_seisbench(root / "sb")
    out = root / "stores" / "windows.zarr"
    out.parent.mkdir()
    run = seisctf_cli("ingest", "seisbench", str(root / "sb"), "--out", str(out),
                      scheduler=dask_cluster.address)  # fmt: skip
    return out, names, run.stdout


def test_seisbench_catalogue_is_inside_the_store_and_travels_with_it(
    ingested, tmp_path, dask_cluster
):
    out, names, stdout = ingested
    parent = out.parent
    assert f"catalogue: {out}/catalog.parquet" in stdout.splitlines()
    assert (out / "catalog.parquet").is_file() and only_entry(parent) == out
    store = xr.open_zarr(str(out), chunks=None)  # zarr and xarray leave the file alone
    assert store.attrs["catalog"] == "catalog.parquet"
    catalogue = pd.read_parquet(out / "catalog.parquet")
    assert catalogue["trace_name_original"].tolist() == names
    assert catalogue[cv.TRACE_NAME].tolist() == store[cv.TRACE_NAME].values.tolist()
    # The store alone, moved to a folder of its own: split and read as before.
    copy = tmp_path / "stores" / "windows.zarr"  # the store alone, in a folder
    shutil.copytree(out, copy)
    moved = tmp_path / "elsewhere" / "renamed.zarr"
    moved.parent.mkdir()
    shutil.move(copy, moved)
    shutil.rmtree(copy.parent)
    seisctf_cli("split", str(moved), "--strategy", "event", "--seed", "1",
                scheduler=dask_cluster.address)  # fmt: skip
    assert only_entry(moved.parent) == moved
    split = xr.open_zarr(str(moved), chunks=None)
    catalogue = ew.read_catalog(StoreLocation(moved))
    assert catalogue[cv.SPLIT_VAR].tolist() == split[cv.SPLIT_VAR].values.tolist()
    assert set(catalogue[cv.SPLIT_VAR]) <= set(cv.SPLIT_VALUES) and len(catalogue) == N_TRACES
    windows = ew.open_event_windows(str(moved))[cv.EVENT_WINDOWS_VAR].isel(trace=[3, 0]).values
    np.testing.assert_array_equal(windows, split[cv.EVENT_WINDOWS_VAR].isel(trace=[3, 0]).values)


def test_stead_catalogue_is_inside_the_store(tmp_path, dask_cluster):
    hdf5, csv = write_stead(tmp_path / "stead")
    parent = tmp_path / "stores"
    parent.mkdir()
    out = parent / "stead.zarr"
    run = seisctf_cli("ingest", "stead", str(hdf5), str(csv), "--out", str(out),
                      scheduler=dask_cluster.address)  # fmt: skip
    assert f"catalogue: {out}/catalog.parquet" in run.stdout.splitlines()
    assert only_entry(parent) == out
    assert (
        ew.read_catalog(StoreLocation(out))[cv.TRACE_NAME].tolist()
        == pd.read_csv(csv)["trace_name"].tolist()
    )


def make_earlier_version(store: Path) -> Path:
    """Lay the store out as earlier versions did: its catalogue beside it, in
    `catalogs/NAME.parquet`, and the attr `catalog` saying so."""
    legacy = store.parent / cv.CATALOGS_DIR / f"{store.name.removesuffix('.zarr')}.parquet"
    legacy.parent.mkdir()
    shutil.move(store / "catalog.parquet", legacy)
    storage.finish_group(StoreLocation(store), {"catalog": f"../{cv.CATALOGS_DIR}/{legacy.name}"})
    return legacy


def test_stores_of_earlier_versions_keep_their_catalogue_beside_them(
    ingested, tmp_path, dask_cluster
):
    source, names, _ = ingested
    out = tmp_path / "stores" / "old.zarr"
    shutil.copytree(source, out)
    legacy = make_earlier_version(out)
    assert not (out / "catalog.parquet").exists()
    assert ew.find_catalog(StoreLocation(out)).url == str(legacy)
    assert ew.read_catalog(StoreLocation(out))["trace_name_original"].tolist() == names
    # `seisctf split` reads it there and writes the split catalogue inside the store
    seisctf_cli("split", str(out), "--strategy", "event", "--seed", "2",
                scheduler=dask_cluster.address)  # fmt: skip
    assert xr.open_zarr(str(out), chunks=None).attrs["catalog"] == "catalog.parquet"
    inside = pd.read_parquet(out / "catalog.parquet")
    assert inside[cv.SPLIT_VAR].tolist() == (
        xr.open_zarr(str(out), chunks=None)[cv.SPLIT_VAR].values.tolist()
    )
    assert cv.SPLIT_VAR not in pd.read_parquet(legacy).columns  # left as it was


@pytest.mark.parametrize(
    "damage, problem",
    [(Path.unlink, "no Parquet catalogue there"),
     (lambda path: path.write_text("trace_name\n"), "not a readable Parquet catalogue")],
    ids=["missing", "not-parquet"],
)  # fmt: skip
def test_split_refuses_a_store_without_a_readable_catalogue(
    ingested, tmp_path, dask_cluster, damage, problem
):
    store = tmp_path / "damaged.zarr"
    shutil.copytree(ingested[0], store)
    damage(store / "catalog.parquet")
    run = seisctf_cli("split", str(store), "--strategy", "event", scheduler=dask_cluster.address,
                      returncode=3)  # fmt: skip
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"seisctf: invalid input: {store}/catalog.parquet: {problem}"), last
    assert "Traceback" not in run.stderr
    after = xr.open_zarr(str(store), chunks=None)  # untouched: still complete, no split
    assert after.attrs[cv.ATTR_COMPLETE] is True and cv.SPLIT_VAR not in after


@pytest.mark.parametrize(
    "store, relative, expected",
    [
        ("/data/w.zarr", "catalog.parquet", "/data/w.zarr/catalog.parquet"),
        ("/data/w.zarr/", "../catalogs/w.parquet", "/data/catalogs/w.parquet"),
        ("s3://b/w/stead.zarr", "../catalogs/stead.parquet", "s3://b/w/catalogs/stead.parquet"),
        ("s3://b/stead.zarr", "catalog.parquet", "s3://b/stead.zarr/catalog.parquet"),
        ("rel/x.zarr", "../catalogs/x.parquet", "rel/catalogs/x.parquet"),
    ],
)
def test_catalogue_paths_resolve_against_the_store(store, relative, expected):
    assert ew.catalog_url(store, relative) == expected
