"""`xr.open_dataset(url, engine="seisctf")`: the Dataset `open_event_windows` gives, lazily,
local and on S3 (SeaweedFS); its values against the fixture's own NumPy windows; the guess."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import xarray as xr
from conftest import smooth_wavefield
from event_window_fixtures import event_window_dataset

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows as ew
from seisctf.catalogs.xarray_backend import SeisctfBackendEntrypoint
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

SHARD_TRACES = 32


def write_store(url: str, storage_options=None) -> xr.Dataset:
    """The fixture's windows written by seisctf's writer (shards of SHARD_TRACES); returns the
    in-memory Dataset they came from."""
    dataset = event_window_dataset(n_events=60)
    layout = ew.WindowLayout(chunk_traces=1, shard_traces=SHARD_TRACES)
    ew.write_event_windows(dataset, StoreLocation(url, storage_options), layout=layout, quiet=True)
    return dataset


@pytest.fixture(scope="module")
def local_store(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("backend") / "windows.zarr")
    return url, write_store(url)


def assert_same_dataset(opened: xr.Dataset, reference: xr.Dataset, source: xr.Dataset) -> None:
    """`opened` is `reference` (variables, coordinates, attrs, dtypes) and both hold the
    fixture's windows on random batches (unsorted, as a training loop draws them)."""
    assert not opened[cv.EVENT_WINDOWS_VAR].variable._in_memory  # lazily indexed, not loaded
    xr.testing.assert_identical(opened, reference)
    assert list(opened.variables) == list(reference.variables)
    for name, variable in opened.variables.items():
        assert variable.dtype == reference[name].dtype, name
    rng = np.random.default_rng(11)
    n_trace = source.sizes[cv.TRACE]
    for _ in range(3):
        batch = rng.choice(n_trace, 17, replace=False)
        values = opened[cv.EVENT_WINDOWS_VAR].isel(trace=batch).values
        expected = source[cv.EVENT_WINDOWS_VAR].values[batch]
        assert values.dtype == np.float32
        assert values.tobytes() == expected.tobytes()  # bit for bit, the NaN padding included
        names = opened[cv.TRACE_NAME].isel(trace=batch).values.tolist()
        assert names == source[cv.TRACE_NAME].values[batch].tolist()
    sliced = opened[cv.EVENT_WINDOWS_VAR].isel(trace=slice(5, 9), sample=slice(3, 30, 4)).values
    assert sliced.tobytes() == source[cv.EVENT_WINDOWS_VAR].values[5:9, :, 3:30:4].tobytes()


def test_engine_is_registered():
    engines = xr.backends.list_engines()
    assert isinstance(engines["seisctf"], SeisctfBackendEntrypoint)
    entry = engines["seisctf"]
    assert "event-window" in entry.description
    assert entry.open_dataset_parameters == ("filename_or_obj", "drop_variables", "storage_options")


def test_open_dataset_is_open_event_windows(local_store):
    url, source = local_store
    opened = xr.open_dataset(url, engine="seisctf", cache=False)
    assert_same_dataset(opened, ew.open_event_windows(url), source)
    dropped = xr.open_dataset(url, engine="seisctf", drop_variables=[cv.SPLIT_VAR, "nothing"])
    assert cv.EVENT_WINDOWS_VAR in dropped
    chunked = xr.open_dataset(url, engine="seisctf", chunks={})  # xarray's Dask wrapping works
    assert chunked[cv.EVENT_WINDOWS_VAR][3].values.tobytes() == (
        source[cv.EVENT_WINDOWS_VAR].values[3].tobytes()
    )


def test_open_reads_no_window(local_store, tmp_path):
    """Opening reads metadata only: a copy of the store whose waveform shards are gone opens
    the same; its windows read as the fill value (NaN) only when asked for."""
    url, source = local_store
    hollow = tmp_path / "hollow.zarr"
    shutil.copytree(url, hollow)
    shards = [p for p in (hollow / cv.EVENT_WINDOWS_VAR).rglob("*") if p.is_file()]
    shards = [p for p in shards if p.name != "zarr.json"]
    assert len(shards) == -(-source.sizes[cv.TRACE] // SHARD_TRACES)
    for path in shards:
        path.unlink()
    opened = xr.open_dataset(hollow, engine="seisctf")
    assert opened.sizes == source.sizes
    assert (opened[cv.TRACE_NAME].values == ew.open_event_windows(url)[cv.TRACE_NAME].values).all()
    assert np.isnan(opened[cv.EVENT_WINDOWS_VAR].isel(trace=[0, 7]).values).all()


def test_guess_can_open(local_store, tmp_path):
    url, _ = local_store
    entry = SeisctfBackendEntrypoint()
    assert entry.guess_can_open(url)
    assert entry.guess_can_open(f"file://{url}")
    wavefield = str(tmp_path / "wavefield.zarr")
    storage.write_dataset(
        smooth_wavefield(n_time=20, n_sensor=4), StoreLocation(wavefield), quiet=True
    )
    assert not entry.guess_can_open(wavefield)
    assert not entry.guess_can_open(str(tmp_path / "missing.zarr"))
    assert not entry.guess_can_open("s3://bucket/windows.zarr")  # guessing never goes online
    assert not entry.guess_can_open(object())


def test_bad_stores_are_invalid_input(local_store, tmp_path):
    url, _ = local_store
    with pytest.raises(InvalidInput, match="no zarr group"):
        xr.open_dataset(tmp_path / "missing.zarr", engine="seisctf")
    wavefield = str(tmp_path / "wavefield.zarr")
    storage.write_dataset(
        smooth_wavefield(n_time=20, n_sensor=4), StoreLocation(wavefield), quiet=True
    )
    with pytest.raises(InvalidInput, match="waveforms"):
        xr.open_dataset(wavefield, engine="seisctf")
    unfinished = tmp_path / "unfinished.zarr"
    shutil.copytree(url, unfinished)
    storage.open_group(StoreLocation(unfinished), mode="r+").attrs[cv.ATTR_COMPLETE] = False
    with pytest.raises(InvalidInput, match="incomplete"):
        xr.open_dataset(unfinished, engine="seisctf")


def test_open_dataset_on_s3(s3_server, s3_bucket):
    url = f"{s3_bucket}/windows.zarr"
    options = s3_server.storage_options
    source = write_store(url, options)
    opened = xr.open_dataset(url, engine="seisctf", storage_options=options, cache=False)
    assert_same_dataset(opened, ew.open_event_windows(url, options), source)
