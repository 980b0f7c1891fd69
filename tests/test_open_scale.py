"""Opening a store costs its metadata, not its chunks: a waveform store declared at 552 stations ×
25 years at 100 Hz (1.7e8 chunks, two of them written) opens through `seisctf.open_store` and
through `seisctf ingest quakeml`, whose windows and selections equal numpy of what was written
(NaN elsewhere) and read only their own chunks; an array declaring absurdly many chunks along
its axes is still refused with exit 3 (`storage.check_declared_sizes`)."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import obspy
import pytest
import xarray as xr
import zarr
from obspy.core.event import Catalog, Event, Origin, Pick, WaveformStreamID

import seisctf
from seisctf import chunk_grid, storage
from seisctf import conventions as cv

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

from scale_open import (  # noqa: E402  (the stores the benchmark measures)
    BLOCK_SAMPLES,
    CHANNELS,
    NETWORK_25_YEARS,
    RATE_HZ,
    create_network_store,
)

N_STATION, N_TIME = NETWORK_25_YEARS.n_station, NETWORK_25_YEARS.n_time
START = obspy.UTCDateTime("2000-01-01T00:00:00")
# Written: XX.S0017's samples around the boundary of its time chunks 12,344 and 12,345.
STATION_ROW = 17
WRITTEN = slice(12_345 * BLOCK_SAMPLES - 300, 12_345 * BLOCK_SAMPLES + 300)


def station_id(row: int) -> str:
    return f"XX.S{row:04d}.00"


@pytest.fixture(scope="module")
def long_store(tmp_path_factory) -> tuple[str, np.ndarray]:
    """(url, written values (channel, sample)) of the 552-station, 25-year store."""
    url = str(tmp_path_factory.mktemp("scale") / "network-25y.zarr")
    create_network_store(url, N_STATION, N_TIME, BLOCK_SAMPLES)
    values = np.random.default_rng(38).standard_normal((3, 600)).astype(np.float32) * 1e3
    zarr.open_group(url, mode="r+")[cv.WAVEFORM_VAR][STATION_ROW, :, WRITTEN] = values
    return url, values


def time_of(index: int) -> np.datetime64:
    return np.datetime64(START.ns + round(index * 1e9 / RATE_HZ), "ns")


def test_the_store_is_declared_at_the_network_size(long_store):
    url, _ = long_store
    data = zarr.open_group(url)[cv.WAVEFORM_VAR]
    assert N_TIME == 25 * 365.25 * 86_400 * 100 == 78_894_000_000
    n_chunks = N_STATION * math.ceil(N_TIME / BLOCK_SAMPLES)
    assert n_chunks == 552 * 300_957 == 166_128_264  # over the former 2**26-chunk limit
    assert math.prod(data.cdata_shape) == n_chunks
    assert storage.check_declared_sizes(data, url) is data
    chunk_files = [p for p in Path(url, cv.WAVEFORM_VAR).rglob("*") if p.is_file()]
    assert len(chunk_files) == 1 + 2  # zarr.json and the two chunks written


def test_open_store_selects_what_was_written(long_store):
    url, values = long_store
    start = time.perf_counter()
    ds = seisctf.open_store(url)
    assert time.perf_counter() - start < 10  # 0.2 s on an idle machine
    assert ds.sizes == {"station": N_STATION, "channel": 3, "time": N_TIME}
    assert ds.data.data.npartitions == 166_128_264
    assert ds.time[-1].values == time_of(N_TIME - 1)

    first, stop = WRITTEN.start - 500, WRITTEN.stop + 500  # 500 NaN samples either side
    part = ds.data.sel(
        station=station_id(STATION_ROW), time=slice(time_of(first), time_of(stop - 1))
    )
    # Only the two chunks the span covers are read: the graph Dask runs (culled, unfused) has
    # their reads alone.
    with dask.config.set({"optimization.fuse.active": False}):
        (optimised,) = dask.optimize(part.data)
    reads = [key for key in dict(optimised.__dask_graph__()) if "open_dataset-data" in key[0]]
    assert sorted(key[1:] for key in reads) == [(STATION_ROW, 0, 12_344), (STATION_ROW, 0, 12_345)]

    expected = np.full((3, stop - first), np.nan, dtype=np.float32)
    expected[:, 500:-500] = values
    np.testing.assert_array_equal(part.values, expected)  # NaN where NaN
    np.testing.assert_array_equal(part.time.values, [time_of(i) for i in range(first, stop)])

    tail = ds.data.isel(station=-1, time=slice(-1000, None)).load()  # the last, partial chunk
    assert tail.shape == (3, 1000) and np.isnan(tail.values).all()


def write_catalog(path: Path, pick_index: int) -> None:
    """One event with a P pick at XX.S0017.00 HHZ at sample `pick_index`."""
    pick_time = obspy.UTCDateTime(ns=START.ns + round(pick_index * 1e9 / RATE_HZ))
    event = Event()
    event.origins.append(Origin(time=pick_time - 5, latitude=0.0, longitude=0.0, depth=1e4))
    waveform = WaveformStreamID("XX", f"S{STATION_ROW:04d}", "00", "HHZ")
    event.picks.append(Pick(time=pick_time, waveform_id=waveform, phase_hint="P"))
    Catalog([event]).write(str(path), format="QUAKEML")


def quakeml_command(catalog: Path, store: str, out: Path, scheduler: str) -> list[str]:
    return [sys.executable, "-m", "seisctf.cli", "ingest", "quakeml", str(catalog),
            "--archive", store, "--out", str(out), "--window", "10", "--pre-arrival", "2",
            "--noise-windows", "0", "--scheduler", scheduler, "--quiet"]  # fmt: skip


def test_ingest_quakeml_cuts_a_window_from_the_long_store(long_store, tmp_path, dask_cluster):
    url, values = long_store
    pick_index = WRITTEN.start + 100
    write_catalog(tmp_path / "catalog.xml", pick_index)
    out = tmp_path / "windows.zarr"
    command = quakeml_command(tmp_path / "catalog.xml", url, out, dask_cluster.address)
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr

    windows = xr.open_zarr(out)
    # The window: 2 s before the pick, 10 s long, from sample WRITTEN.start - 100; its
    # channels in the store's component order (e.g. "ZNE").
    rows = [CHANNELS.index(f"HH{letter}") for letter in windows.attrs[cv.ATTR_COMPONENT_ORDER]]
    expected = np.full((3, 1000), np.nan, dtype=np.float32)
    expected[:, 100:700] = values[rows]
    np.testing.assert_array_equal(windows[cv.EVENT_WINDOWS_VAR].values, expected[np.newaxis])


def test_absurd_chunk_counts_are_still_refused(tmp_path, dask_cluster):
    """A store of 2 stations declaring 2**25 one-sample chunks along time (its Dask chunk sizes
    and their sums would take gigabytes): exit 3, naming the array, nothing written."""
    url = str(tmp_path / "absurd.zarr")
    create_network_store(url, 2, storage.MAX_CHUNKS_ALONG_AXES, 1)
    write_catalog(tmp_path / "catalog.xml", 10)
    out = tmp_path / "windows.zarr"
    command = quakeml_command(tmp_path / "catalog.xml", url, out, dask_cluster.address)
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    assert f"{url}/data: metadata declares shape (2, 3, 33554432)" in run.stderr
    assert "33554435 chunks along its axes" in run.stderr
    assert "Traceback" not in run.stderr and not out.exists()


@pytest.mark.parametrize(
    ("shape", "chunk_shape"),
    [((10, 3, 1000), (1, 3, 256)), ((7, 5), (3, 2)), ((0, 4), (2, 2)), ((5,), (8,))],
)
def test_regular_array_equals_dask_from_array(shape, chunk_shape):
    values = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    ours = chunk_grid.regular_array(values, chunk_shape, "regular-test")
    reference = da.from_array(values, chunks=chunk_shape)
    assert ours.chunks == reference.chunks
    assert chunk_grid.chunks_along_axes(shape, chunk_shape) == sum(map(len, ours.chunks)) - sum(
        n == 0 for n in shape
    )
    np.testing.assert_array_equal(ours.compute(), values)
    np.testing.assert_array_equal(ours[..., 1:-1].compute(), values[..., 1:-1])
