"""Bounded-memory rechunking: same values, any layout, on a memory-limited cluster."""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import dask_client
from seisctf.location import StoreLocation
from seisctf.signal.rechunk import rechunk, rechunk_method

# 700 MiB workers. A worker's heap grows to about where it starts to spill and keeps those pages
# (counted as unmanaged memory), so what decides a restart is the room between the spill and
# pause fractions and the nanny's 95 %. The embedded fractions (spill 0.85, pause 0.9,
# seisctf.worker_memory.EMBEDDED_MEMORY_FRACTIONS, chosen for streaming chains) leave 35 MiB of it
# here; workers peaked at 596-637 MiB of the 665 MiB terminate line (6 runs) and one was restarted
# on the CI machine. A user who turns arrays bigger than a worker around on small workers sets
# lower fractions, as here: peaks 471-496 MiB (4 runs, 2026-12-03). Values the user sets are kept.
# (At 500 MiB with the embedded fractions the nanny restarted a worker in 3 of 8 runs.)
WORKER_LIMIT = 700 * 2**20
SMALL_WORKER_FRACTIONS = {
    "distributed.worker.memory.spill": 0.65,
    "distributed.worker.memory.pause": 0.75,
}


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
    with (
        dask.config.set(SMALL_WORKER_FRACTIONS),
        dask_client(n_workers=2, memory_limit=WORKER_LIMIT, quiet=True) as client,
    ):
        workers = client.run(os.getpid)  # a worker lost and restarted by its nanny changes it
        fractions = client.run(
            lambda dask_worker: (
                dask_worker.memory_manager.memory_spill_fraction,
                dask_worker.memory_manager.memory_pause_fraction,
            )
        )
        user = tuple(SMALL_WORKER_FRACTIONS.values())
        assert set(fractions.values()) == {user}  # the user's, not the embedded ones
        assert rechunk_method() == "tasks"
        rows = rechunk(source, {cv.TIME: 384, cv.SENSOR: n_sensor})  # 12 MiB rows
        storage.write_dataset(rows, StoreLocation(url), quiet=True)
        assert len(workers) == 2 and client.run(os.getpid) == workers
    written = storage.open_dataset(StoreLocation(url))[cv.WAVEFIELD_VAR]
    assert written.chunks == ((384,) * 64, (n_sensor,))
    stored = storage.open_group(StoreLocation(url))[cv.WAVEFIELD_VAR]
    expected = source[cv.WAVEFIELD_VAR].data
    # The whole array, a quarter of the sensors at a time (192 MiB a side), bit for bit.
    quarter = n_sensor // 4
    for start in range(0, n_sensor, quarter):
        part = slice(start, start + quarter)
        want = expected[:, part].compute(scheduler="threads")
        got = stored[:, part]
        assert got.dtype == want.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), part
