"""Sparse time: blocks no trace touches cost no task, no progress record and no chunk, so two
10-minute files five years apart ingest like two files an hour apart (through the CLI, on a
real scheduler, compared with obspy's own read of the files)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import obspy
import xarray as xr
from distributed import Client, get_task_stream

RATE = 100.0
BLOCK = 2**18  # the default block, as users ingest
FIRST = obspy.UTCDateTime("2019-06-01T00:03:00")
YEAR_S = 365.25 * 86400


def _file(path: Path, start: obspy.UTCDateTime, seed: int) -> Path:
    samples = np.random.default_rng(seed).integers(-2000, 2000, 60_000).astype(np.int32)
    trace = obspy.Trace(samples, {"network": "XX", "station": "GAP", "channel": "HHZ",
                                  "sampling_rate": RATE, "starttime": start})  # fmt: skip
    trace.write(str(path), format="MSEED", encoding="STEIM2")
    return path


def _ingest(files: list[Path], out: Path, scheduler: str) -> list[str]:
    """`seisctf ingest waveforms` of `files` into `out`: the keys of the tasks it ran."""
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "waveforms", *map(str, files),
               "--out", str(out), "--scheduler", scheduler, "--quiet"]  # fmt: skip
    with Client(scheduler) as client, get_task_stream(client) as stream:
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
    return [str(task["key"]) for task in stream.data]


def test_years_between_two_files_cost_no_task_no_record_no_chunk(tmp_path, dask_cluster):
    near = [_file(tmp_path / "a.mseed", FIRST, 1), _file(tmp_path / "b.mseed", FIRST + 3600, 2)]
    far = [near[0], _file(tmp_path / "c.mseed", FIRST + 5 * YEAR_S, 2)]
    tasks_near = _ingest(near, tmp_path / "near.zarr", dask_cluster.address)
    tasks_far = _ingest(far, tmp_path / "far.zarr", dask_cluster.address)

    block_tasks = [k for k in tasks_far if "ingest_block-" in k]
    assert len(block_tasks) == len([k for k in tasks_near if "ingest_block-" in k]) <= 4
    store = tmp_path / "far.zarr"
    ds = xr.open_zarr(str(store), consolidated=True)
    n_blocks = ds.sizes["block"]
    assert n_blocks > 60_000  # five years of 2^18-sample blocks at 100 Hz
    chunks = sorted(p.relative_to(store / "data/c") for p in (store / "data/c").rglob("*"))
    written = {int(p.parts[-1]) for p in chunks if p.parts and len(p.parts) == 3}
    coverage = ds["coverage"].values[0]
    assert set(np.flatnonzero(coverage > 0)) == written and 2 <= len(written) <= 4
    assert not (store / "ingest_progress").exists()

    # The samples are obspy's, where obspy puts them, and NaN between.
    start_ns = int(ds.attrs["start_time_ns"])
    for path in far:
        trace = obspy.read(str(path))[0]
        first = round((trace.stats.starttime.ns - start_ns) * RATE / 1e9)
        block = first // BLOCK
        stored = (
            ds["data"]
            .isel(station=0, channel=0, time=slice(block * BLOCK, first + trace.stats.npts))
            .values
        )
        np.testing.assert_array_equal(stored[first - block * BLOCK :], trace.data.astype("f4"))
        assert np.isnan(stored[: first - block * BLOCK]).all()
