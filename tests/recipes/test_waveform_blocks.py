"""Unit tests of `seisctf.recipes.ingest.waveform_blocks`: merging traces of mixed sample types on
the grid against obspy's float64 merge, and how block tasks are cut into runs."""

from __future__ import annotations

import numpy as np
import obspy

from seisctf.recipes.ingest.waveform_blocks import (
    RUN_TASKS,
    BlockTask,
    block_runs,
    merged_block,
    merged_rows,
)

START_NS = obspy.UTCDateTime("2024-01-01").ns
RATE = 10.0


def _task(first: int, stop: int, station_index: int = 0, block: int = 0) -> BlockTask:
    return BlockTask("XX.AAA.00", station_index, block, first, stop, (), ("HHE", "HHZ"),
                     START_NS, RATE, False)  # fmt: skip


def test_int32_and_float_traces_of_a_channel_merge_like_obspy_in_float64():
    rng = np.random.default_rng(3)
    counts = rng.integers(-(2**26), 2**26, 300).astype(np.int32)  # beyond float32's 2**24
    values = (rng.standard_normal(200) * 1e5).astype(np.float32)
    later = rng.integers(-100, 100, 50).astype(np.int32)
    traces = [("HHZ", 0, counts), ("HHZ", 250, values), ("HHE", 10, later)]
    rows = merged_rows(traces, _task(0, 600))
    block = merged_block(rows, _task(0, 600))
    assert block.dtype == np.float32

    expected = np.full((2, 600), np.nan, dtype=np.float32)
    stream = obspy.Stream()
    for channel, first, samples in traces:
        start = obspy.UTCDateTime(ns=START_NS + round(first * 1e9 / RATE))
        header = {"network": "XX", "station": "AAA", "location": "00", "channel": channel,
                  "sampling_rate": RATE, "starttime": start}  # fmt: skip
        stream += obspy.Trace(samples.astype(np.float64), header)
    stream.merge(method=1, interpolation_samples=0)
    for trace in stream:
        first = round((trace.stats.starttime.ns - START_NS) * RATE / 1e9)
        row = ("HHE", "HHZ").index(trace.stats.channel)
        data = np.ma.filled(np.ma.asarray(trace.data, dtype=np.float64), np.nan)
        expected[row, first : first + len(data)] = data.astype(np.float32)
    np.testing.assert_array_equal(block, expected)
    np.testing.assert_array_equal(block[1, 250:450], values)  # the later trace wins the overlap
    # An int32-only channel stays int32 until the block is filled; each block cuts its part.
    assert dict((row, samples.dtype) for row, _, samples in rows)[0] == np.int32
    np.testing.assert_array_equal(merged_block(rows, _task(280, 320)), expected[:, 280:320])


def test_runs_are_consecutive_blocks_of_one_station_and_about_run_tasks_in_all():
    tasks = [_task(b * 10, b * 10 + 10, station_index=s, block=b)
             for s in range(3) for b in range(40) if (s, b) != (1, 7)]  # fmt: skip
    runs = block_runs(tasks)
    assert [t for run in runs for t in run.tasks] == tasks
    length = -(-len(tasks) // RUN_TASKS)
    for run in runs:
        assert len(run.tasks) <= length
        assert len({t.station_index for t in run.tasks}) == 1
        assert [t.block for t in run.tasks] == list(
            range(run.tasks[0].block, run.tasks[0].block + len(run.tasks))
        )
    fewest = -(-len(tasks) // length)  # RUN_TASKS or one less
    assert RUN_TASKS - 1 <= fewest <= len(runs) <= fewest + 3 + 1  # station ends, the hole
    assert runs[0].key == "000000-00000000"
    one_station = block_runs([_task(0, 10, block=b) for b in range(7)])
    assert [len(run.tasks) for run in one_station] == [1] * 7
