"""STEAD and QuakeML as recipe sources (`source: {stead: …}`, `source: {quakeml: …}`): the store a
recipe ingests equals the one `seisctf ingest stead|quakeml` writes, feeds a `picking` output,
and a re-run writes nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from catalogs.test_event_windows import write_stead
from test_quakeml import continuous_dataset, write_catalog

from seisctf import conventions as cv
from seisctf import storage
from seisctf.build import engine as recipes
from seisctf.catalogs.event_windows import read_catalog
from seisctf.cli import main
from seisctf.cluster import dask_client
from seisctf.location import StoreLocation
from seisctf.registry import INGESTS, Ingest

# Attrs only a recipe's ingest records (what it asked for, and the fingerprint of its inputs).
RECIPE_ATTRS = ("seisctf_recipe_stead", cv.ATTR_PROVENANCE, "ingest_fingerprint")


@pytest.fixture(scope="module")
def scheduler(dask_cluster_one_worker) -> str:
    return dask_cluster_one_worker.address


def build(text: str, workdir: Path, scheduler: str) -> recipes.BuildContext:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "recipe.yaml"
    path.write_text(text)
    with dask_client(scheduler, quiet=True):
        return recipes.build_file(path, workdir=workdir, quiet=True)


def cli(*args: str, scheduler: str) -> None:
    assert main([*args, "--scheduler", scheduler, "--quiet"]) == 0


def assert_same_store(built: Path, reference: Path) -> None:
    """Same variables, coordinates, attrs (but a recipe's own) and Parquet catalogue."""
    ours, theirs = xr.open_zarr(str(built)), xr.open_zarr(str(reference))
    assert ours.attrs[cv.ATTR_COMPLETE] is True
    assert set(ours.variables) == set(theirs.variables)
    for name in theirs.variables:
        np.testing.assert_array_equal(ours[name].values, theirs[name].values)
    mine = {k: v for k, v in ours.attrs.items() if k not in RECIPE_ATTRS}
    assert mine == {k: v for k, v in theirs.attrs.items() if k not in RECIPE_ATTRS}
    pd.testing.assert_frame_equal(
        read_catalog(StoreLocation(built)), read_catalog(StoreLocation(reference))
    )


def test_ingest_sources_are_registered_with_their_commands():
    commands = {entry.name: entry.command for entry in INGESTS.entries()}
    assert commands == {
        "waveform_archive": "waveforms",
        "das_files": "das",
        "seisbench": "seisbench",
        "stead": "stead",
        "quakeml": "quakeml",
    }
    for entry in INGESTS.entries():
        assert isinstance(entry, Ingest) and callable(entry.cli) and entry.help
        assert entry.options["properties"]["store"]["format"] == "seisctf-location"
        assert entry.options["additionalProperties"] is False


def test_stead_source_equals_ingest_stead_and_reruns_are_no_ops(tmp_path, scheduler):
    hdf5, csv, _ = write_stead(tmp_path / "stead")
    reference = tmp_path / "reference/windows.zarr"
    cli("ingest", "stead", str(hdf5), str(csv), "--out", str(reference), scheduler=scheduler)
    recipe = (
        f"recipe: 1\nsource:\n  stead:\n    hdf5: {hdf5}\n    csv: {csv}\n"
        "    store: windows.zarr\noutputs:\n  picking:\n    url: picking.zarr\n"
        "    split: {strategy: event, seed: 1}\n"
    )
    work = tmp_path / "work"
    context = build(recipe, work, scheduler)
    assert context.written == [str(work / "picking.zarr")]
    assert_same_store(work / "windows.zarr", reference)
    picking = storage.open_dataset(StoreLocation(work / "picking.zarr"))
    assert picking.attrs[cv.ATTR_SPLIT]["strategy"] == "event"
    again = build(recipe, work, scheduler)
    assert again.written == [] and again.skipped == [str(work / "picking.zarr")]


def test_quakeml_source_equals_ingest_quakeml_and_reruns_are_no_ops(tmp_path, scheduler):
    root = tmp_path / "inputs"
    root.mkdir()
    storage.write_dataset(continuous_dataset(), StoreLocation(root / "continuous.zarr"), quiet=True)
    write_catalog(root / "catalog.xml")
    reference = tmp_path / "reference/windows.zarr"
    cli(
        "ingest", "quakeml", str(root / "catalog.xml"), "--archive", str(root / "continuous.zarr"),
        "--out", str(reference), "--window", "30", "--pre-arrival", "5", scheduler=scheduler,
    )  # fmt: skip
    recipe = (
        f"recipe: 1\nsource:\n  quakeml:\n    catalog: {root / 'catalog.xml'}\n"
        f"    archive: [{root / 'continuous.zarr'}]\n    window_s: 30\n    pre_arrival_s: 5\n"
        "    store: windows.zarr\noutputs:\n  picking:\n    url: picking.zarr\n"
        "    split: {strategy: event, seed: 1}\n"
    )
    work = tmp_path / "work"
    context = build(recipe, work, scheduler)
    assert context.written == [str(work / "picking.zarr")]
    assert_same_store(work / "windows.zarr", reference)
    again = build(recipe, work, scheduler)
    assert again.written == [] and again.skipped == [str(work / "picking.zarr")]
