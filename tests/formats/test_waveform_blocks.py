"""Unit tests of `formats.obspy_archive.waveform_blocks`: merging traces of mixed sample types on
the grid against obspy's float64 merge, and how block tasks are cut into runs."""

from __future__ import annotations

import numpy as np
import obspy
from hypothesis import given, settings
from hypothesis import strategies as st
from obspy_merge import obspy_merged

from seisctf.formats.obspy_archive.placed_traces import (
    PlacedTraces,
    block_intervals,
    run_pairs,
    run_spans,
    run_table,
    runs_of,
)
from seisctf.formats.obspy_archive.scan_table import ScanTable
from seisctf.formats.obspy_archive.waveform_blocks import (
    RUN_MAX_BLOCKS,
    RUN_TASKS,
    BlockTask,
    merged_block,
    merged_rows,
    merged_rows_by_channel,
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


@st.composite
def _channel_pieces(draw) -> list[tuple[str, int, np.ndarray]]:
    """Traces of up to three channels: runs of pieces mostly back to back (day files), some
    with a gap or an overlap between two, in any order, int32 or float32."""
    traces = []
    for channel in draw(st.lists(st.sampled_from(["HHE", "HHN", "HHZ"]), min_size=1, max_size=3,
                                 unique=True)):  # fmt: skip
        first = draw(st.integers(-50, 400))
        for _ in range(draw(st.integers(1, 5))):
            length = draw(st.integers(1, 60))
            dtype = draw(st.sampled_from([np.int32, np.int32, np.float32]))
            values = np.arange(first, first + length) * 7 % 1000 - 500
            traces.append((channel, first, values.astype(dtype)))
            first += length + draw(st.sampled_from([0, 0, 0, 0, 3, -2, -length]))
    return draw(st.permutations(traces))


@settings(max_examples=300, deadline=None)
@given(_channel_pieces(), st.integers(-50, 700), st.integers(1, 300))
def test_channels_merge_as_obspy_merges_them(traces, first, length):
    """Blocks cut from the rows (`merged_block`) equal those cut from obspy's merge of the same
    traces, NaN in gaps, for any block; the rows of a channel are in order and never overlap,
    and `merged_rows_by_channel` gives them all."""
    channels = ("HHE", "HHN", "HHZ")
    task = BlockTask("XX.AAA.00", 0, 0, first, first + length, (), channels, START_NS, RATE, False)
    rows = merged_rows(traces, task)
    types = {channel: {s.dtype for c, _, s in traces if c == channel} for channel, *_ in traces}
    same_type = [(c, f, s if len(types[c]) == 1 else s.astype(np.float32)) for c, f, s in traces]
    reference = []
    for channel in {c for c, _, _ in same_type}:
        merged = obspy_merged([(f, s) for c, f, s in same_type if c == channel])
        if merged is not None:
            reference.append((channels.index(channel), *merged))
    assert {row for row, *_ in rows} == {row for row, *_ in reference}
    np.testing.assert_array_equal(merged_block(rows, task), merged_block(reference, task))
    by_channel = merged_rows_by_channel(rows, channels)
    for row in {row for row, *_ in rows}:
        spans = [(f, f + len(s)) for r, f, s in rows if r == row]
        assert all(stop <= start for (_, stop), (start, _) in zip(spans, spans[1:], strict=False))
        assert [(f, f + len(s)) for f, s in by_channel[channels[row]]] == spans


def _placed(spans: list[tuple[int, int, int]]) -> PlacedTraces:
    """Traces (station index, first grid index, samples) as the plan holds them."""
    n = len(spans)
    stations = tuple(f"XX.S{i}" for i in range(4))
    traces = {
        "file": np.arange(n),
        "station": np.array([s for s, _, _ in spans], np.int32),
        "channel": np.zeros(n, np.int32),
        "start_ns": np.zeros(n, np.int64),
        "sampling_rate": np.full(n, RATE),
        "npts": np.array([k for *_, k in spans]),
    }
    paths = tuple(f"f{i:03d}" for i in range(n))
    digests, readable = np.zeros((n, 32), np.uint8), np.ones(n, bool)
    scans = ScanTable(
        paths, np.zeros(n, np.int64), digests, readable, traces, stations, ("HHZ",), ()
    )
    first = np.array([f for _, f, _ in spans], dtype=np.int64)
    return PlacedTraces(scans, np.arange(n), first, traces["npts"].astype(np.int64),
                        np.zeros(n), np.zeros(n, bool))  # fmt: skip


def _expected_runs(spans, n_time, block, length, only=None):
    """Runs as the ingest cut them when it made one task per block: every (station, block) a
    trace's samples touch, station-major, cut where the station changes, a block is skipped, or
    `length` blocks are reached."""
    wanted = set()
    for station, first, n in spans:
        lo, hi = max(first, 0), min(first + n, n_time) - 1
        wanted |= {(station, b) for b in range(lo // block, hi // block + 1)}
    if only is not None:
        wanted = {(s, b) for s, b in wanted if any(a <= b <= z for a, z in only.get(s, []))}
    runs: list[list[tuple[int, int]]] = []
    for station, b in sorted(wanted):
        last = runs[-1][-1] if runs else None
        if last is None or last[0] != station or last[1] + 1 != b or len(runs[-1]) >= length:
            runs.append([])
        runs[-1].append((station, b))
    return runs


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 3), st.integers(-50, 2000), st.integers(0, 400)),
                   min_size=1, max_size=30),
    only=st.one_of(st.none(), st.dictionaries(st.integers(0, 3), st.lists(
        st.tuples(st.integers(0, 25), st.integers(0, 25)).map(sorted).map(tuple), max_size=3))),
)  # fmt: skip
def test_run_table_cuts_the_blocks_traces_touch_as_one_task_per_block_would(spans, only):
    n_time, block = 2100, 100
    placed = _placed(spans)
    stations = placed.scans.station_ids
    table = run_table(placed, stations, n_time, block, RUN_TASKS, RUN_MAX_BLOCKS, only)
    blocks = len({b for run in _expected_runs(spans, n_time, block, 10**9, only) for b in run})
    length = max(1, min(RUN_MAX_BLOCKS, -(-blocks // RUN_TASKS)))
    expected = _expected_runs(spans, n_time, block, length, only)
    assert [table.blocks_of(n) for n in range(len(table))] == expected
    for n, run in enumerate(expected):  # each run reads exactly the traces overlapping it
        lo, hi = run[0][1] * block, min((run[-1][1] + 1) * block, n_time)
        overlapping = [i for i, (s, f, k) in enumerate(spans)
                       if s == run[0][0] and max(f, 0) < hi and min(f + k, n_time) > lo
                       and max(f, 0) // block <= (min(f + k, n_time) - 1) // block]  # fmt: skip
        assert table.traces_of(n).tolist() == overlapping


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 3), st.integers(-50, 2000), st.integers(0, 400)),
                   min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 29), max_size=5),
    only=st.one_of(st.none(), st.dictionaries(st.integers(0, 3), st.lists(
        st.tuples(st.integers(0, 25), st.integers(0, 25)).map(sorted).map(tuple), max_size=3))),
)  # fmt: skip
def test_runs_from_partitions_of_the_traces_are_the_runs_of_all(spans, cuts, only):
    """Each partition of consecutive traces gives only its block intervals and, given the runs,
    its (trace, run) pairs: the runs and the traces each reads are those of all the traces."""
    n_time, block = 2100, 100
    whole = _placed(spans)
    stations = whole.scans.station_ids
    expected = run_table(whole, stations, n_time, block, RUN_TASKS, RUN_MAX_BLOCKS, only)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(spans)}), len(spans)]
    parts = [_placed(spans[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    intervals = [block_intervals(part, stations, n_time, block) for part in parts]
    spans_ = run_spans(intervals, n_time, block, RUN_TASKS, RUN_MAX_BLOCKS, only)
    found = [run_pairs(part, stations, n_time, block, spans_) for part in parts]
    traces = np.concatenate([t + offset for (t, _), offset in zip(found, bounds, strict=False)])
    runs = np.concatenate([r for _, r in found])
    order = np.lexsort((traces, runs))
    table = runs_of(spans_, (traces[order], runs[order]), n_time, block)
    for name in ("station", "first_block", "blocks", "traces", "trace_start"):
        np.testing.assert_array_equal(getattr(table, name), getattr(expected, name), name)
