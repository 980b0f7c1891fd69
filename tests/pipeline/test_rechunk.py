"""Bounded-memory rechunking: same values, any layout, on a memory-limited cluster."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import dask_client
from seisctf.recipes.rechunk import rechunk, rechunk_method

# 700 MiB: at 500 MiB (about 150 MiB of it the idle process), with the embedded workers' one
# malloc arena and 16 MiB mmap threshold (seisctf.cluster.EMBEDDED_ENVIRON), the nanny
# restarted a worker past 95 % of its limit in 3 of 8 runs on an idle machine (the values were
# still right; returning free heap pages with malloc_trim every 200 ms did not prevent it).
# With glibc's defaults 5 of 5 passed, but the filter chain benchmark then ran at 0.57x of
# scipy instead of 0.8x (one run, 2026-12-03). 6 of 6 passed at 700 MiB.
WORKER_LIMIT = 700 * 2**20


def _wavefield(n_time: int, n_sensor: int, chunks: tuple[int, int]) -> xr.Dataset:
    values = da.random.default_rng(11).standard_normal(
        (n_time, n_sensor), chunks=chunks, dtype=np.float32
    )
    return xr.Dataset({cv.WAVEFIELD_VAR: ((cv.TIME, cv.SENSOR), values)})


def test_rechunk_without_cluster_keeps_values():
    dataset = _wavefield(500, 70, (37, 70))
    assert rechunk_method() == "tasks"
    turned = rechunk(dataset, {cv.TIME: 500, cv.SENSOR: 9})
    assert turned[cv.WAVEFIELD_VAR].chunks == ((500,), (9,) * 7 + (7,))
    np.testing.assert_array_equal(turned[cv.WAVEFIELD_VAR].values, dataset[cv.WAVEFIELD_VAR].values)


def test_time_to_trace_contiguous_bigger_than_a_worker(tmp_path):
    """768 MiB of float32 from time-contiguous chunks (every time step of 128 sensors) to rows of
    all sensors, through two workers limited to 700 MiB each (about 150 MiB of which is the
    idle process), written to a store: every value's bits equal, the same worker processes
    (addresses and process ids) before and after."""
    n_time, n_sensor = 24_576, 8192  # 768 MiB float32
    source = _wavefield(n_time, n_sensor, (n_time, 128))  # time-contiguous: 12 MiB chunks
    url = str(tmp_path / "rows.zarr")
    with dask_client(n_workers=2, memory_limit=WORKER_LIMIT, quiet=True) as client:
        workers = client.run(os.getpid)  # a worker lost and restarted by its nanny changes it
        assert rechunk_method() == "tasks"
        rows = rechunk(source, {cv.TIME: 384, cv.SENSOR: n_sensor})  # 12 MiB rows
        storage.write_dataset(rows, url, quiet=True)
        assert len(workers) == 2 and client.run(os.getpid) == workers
    written = storage.open_dataset(url)[cv.WAVEFIELD_VAR]
    assert written.chunks == ((384,) * 64, (n_sensor,))
    stored = storage.open_group(url, None)[cv.WAVEFIELD_VAR]
    expected = source[cv.WAVEFIELD_VAR].data
    # The whole array, a quarter of the sensors at a time (192 MiB a side), bit for bit.
    quarter = n_sensor // 4
    for start in range(0, n_sensor, quarter):
        part = slice(start, start + quarter)
        want = expected[:, part].compute(scheduler="threads")
        got = stored[:, part]
        assert got.dtype == want.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), part
