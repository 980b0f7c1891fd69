"""A waveform plan's traces as columns, and the runs of time blocks they fill.

`PlacedTraces` holds one row per trace the plan ingests: its row of the scan table
(`scan_table.ScanTable`: path, station, channel, start, rate, samples), the grid index of its
first sample, its samples on the grid, its offset from that grid sample (s) and whether it is
resampled: ~40 bytes a trace, where a Python object per trace took ~350 (an archive has 10^6-10^7
traces). `PlacedTrace` objects are made on demand, one at a time.

`run_table` cuts the (station, time block)s that traces touch into runs (one Dask task each) by
block intervals, never by block: a block no trace touches costs nothing, and a station's five
years of two files cost two short intervals. The runs are those of consecutive blocks of one
station, cut at `length` blocks from each interval's start, numbered station-major.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from seisctf.formats.obspy_archive.scan_table import ScanTable
    from seisctf.formats.obspy_archive.trace_header import TraceHeader


@dataclass(frozen=True, slots=True)
class PlacedTrace:
    """A trace on the grid: grid index of its first sample, samples on the grid after any
    resampling, and the offset (s) of its start from that grid sample (trace minus grid)."""

    header: TraceHeader
    first_index: int
    n_samples: int
    offset_s: float
    resample: bool


@dataclass(frozen=True, eq=False)  # numpy columns: compared by identity
class PlacedTraces:
    """The plan's traces (module doc), in scan-table order; every column of one length."""

    scans: ScanTable
    row: np.ndarray  # (trace,) int64: the trace's row of `scans.traces`
    first_index: np.ndarray  # (trace,) int64: grid index of its first sample
    n_samples: np.ndarray  # (trace,) int64: its samples on the grid (after any resampling)
    offset_s: np.ndarray  # (trace,) float64: its start minus its grid sample's time
    resample: np.ndarray  # (trace,) bool

    def __len__(self) -> int:
        return len(self.row)

    def __iter__(self) -> Iterator[PlacedTrace]:
        headers = self.scans.headers_of(self.row)
        for header, first, n, offset, resample in zip(
            headers,
            self.first_index.tolist(),
            self.n_samples.tolist(),
            self.offset_s.tolist(),
            self.resample.tolist(),
            strict=True,
        ):
            yield PlacedTrace(header, first, n, offset, resample)

    def column(self, name: str) -> np.ndarray:
        """A scan-table trace column (`scan_table.TRACE_COLUMNS`) of these traces."""
        return self.scans.traces[name][self.row]

    def files(self) -> np.ndarray:
        """(trace,) int64: each trace's file (index of `scans.paths`)."""
        return self.column("file")

    def where(self, keep: np.ndarray) -> PlacedTraces:
        """The traces where the bool array `keep` holds."""
        columns = (self.row, self.first_index, self.n_samples, self.offset_s, self.resample)
        return PlacedTraces(self.scans, *(column[keep] for column in columns))

    def of_files_not_in(self, paths: Collection[str]) -> PlacedTraces:
        """The traces of the files whose path is not among `paths` (an append's new files)."""
        known = set(paths)
        old = np.array([path in known for path in self.scans.paths], dtype=bool)
        return self.where(~old[self.files()]) if len(self.row) else self

    def station_index(self, stations: Sequence[str]) -> np.ndarray:
        """(trace,) int64: each trace's station as an index of `stations` (sorted ids)."""
        lookup = np.array([stations.index(s) if s in stations else -1
                           for s in self.scans.station_ids], dtype=np.int64)  # fmt: skip
        return lookup[self.column("station")] if len(self.row) else np.zeros(0, np.int64)

    def channel_names(self) -> np.ndarray:
        """(trace,) object: each trace's channel code."""
        names = np.array(self.scans.channel_codes, dtype=object)
        return names[self.column("channel")] if len(self.row) else np.zeros(0, object)


@dataclass(frozen=True, eq=False)
class RunTable:
    """Runs of consecutive time blocks of one station: `station` (index), `first_block`,
    `blocks` (how many) per run, station-major; the traces each run reads: `traces`
    (indices of the plan's `PlacedTraces`) from `trace_start[run]` to `trace_start[run + 1]`."""

    station: np.ndarray  # (run,) int64
    first_block: np.ndarray  # (run,) int64
    blocks: np.ndarray  # (run,) int64
    traces: np.ndarray  # (run-trace pair,) int64, grouped by run
    trace_start: np.ndarray  # (run + 1,) int64

    def __len__(self) -> int:
        return len(self.station)

    @property
    def n_blocks(self) -> int:
        """Blocks in all runs."""
        return int(self.blocks.sum())

    def blocks_of(self, run: int) -> list[tuple[int, int]]:
        """(station index, block) of each block of `run`, in order."""
        station, first = int(self.station[run]), int(self.first_block[run])
        return [(station, first + k) for k in range(int(self.blocks[run]))]

    def traces_of(self, run: int) -> np.ndarray:
        """Indices (of the plan's traces) of the traces `run` reads, in trace order."""
        return self.traces[self.trace_start[run] : self.trace_start[run + 1]]


def trace_blocks(
    traces: PlacedTraces, stations: Sequence[str], n_time: int, block_samples: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(station index, first block, last block) of each trace (blocks its samples touch on a
    time axis of `n_time`); a trace with no sample on the axis gets last < first."""
    first = np.maximum(traces.first_index, 0)
    last = np.minimum(traces.first_index + traces.n_samples, n_time) - 1
    return traces.station_index(stations), first // block_samples, last // block_samples


def _merged(keys0: np.ndarray, keys1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint intervals [start, end] (inclusive keys) covering intervals [keys0,
    keys1]; adjacent ones (end + 1 == start) merge too."""
    order = np.argsort(keys0, kind="stable")
    starts, ends = keys0[order], keys1[order]
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1] + 1
    heads = np.flatnonzero(new)
    return starts[heads], reach[np.r_[heads[1:] - 1, len(starts) - 1]] if len(heads) else reach


def _intersected(
    starts: np.ndarray, ends: np.ndarray, only: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The parts of sorted disjoint intervals [starts, ends] inside sorted disjoint `only`."""
    kept_starts, kept_ends = [], []
    other_starts, other_ends = only
    j = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        while j < len(other_ends) and other_ends[j] < start:
            j += 1
        k = j
        while k < len(other_starts) and other_starts[k] <= end:
            kept_starts.append(max(start, int(other_starts[k])))
            kept_ends.append(min(end, int(other_ends[k])))
            k += 1
    return np.array(kept_starts, dtype=np.int64), np.array(kept_ends, dtype=np.int64)


def _width(n_time: int, block_samples: int) -> int:
    """Block keys are station-major: station x width + block (width leaves room on both ends)."""
    return max(1, math.ceil(n_time / block_samples)) + 2


def block_intervals(
    traces: PlacedTraces, stations: Sequence[str], n_time: int, block_samples: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint intervals [start, end] of block keys (`_width`) the traces touch: what
    the runs need of one partition of the plan's traces."""
    station, first, last = trace_blocks(traces, stations, n_time, block_samples)
    width = _width(n_time, block_samples)
    on_axis = (last >= first) & (station >= 0)
    return _merged((station * width + first)[on_axis], (station * width + last)[on_axis])


def run_spans(
    intervals: Sequence[tuple[np.ndarray, np.ndarray]],
    n_time: int,
    block_samples: int,
    tasks_wanted: int,
    max_blocks: int,
    only: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) block key of each run (module doc) of the blocks in `intervals` (each
    partition's `block_intervals`), or of those inside `only` ({station index: [(first, last
    block)]}, an append's blocks to rewrite): runs of at most `max_blocks`, down to what gives
    about `tasks_wanted` runs in all."""
    width = _width(n_time, block_samples)
    empty = np.zeros(0, np.int64)
    starts, ends = _merged(np.concatenate([a for a, _ in intervals] or [empty]),
                           np.concatenate([b for _, b in intervals] or [empty]))  # fmt: skip
    if only is not None:
        last_block = width - 3  # spans clipped to the axis: keys never reach another station
        spans = [
            (s * width + max(a, 0), s * width + min(b, last_block))
            for s, pieces in only.items()
            for a, b in pieces
            if max(a, 0) <= min(b, last_block)
        ]
        bounds = np.array(spans, dtype=np.int64).reshape(-1, 2)
        starts, ends = _intersected(starts, ends, _merged(bounds[:, 0], bounds[:, 1]))
    sizes = ends - starts + 1
    length = max(1, min(max_blocks, math.ceil(int(sizes.sum()) / tasks_wanted)))
    pieces = -(-sizes // length)
    run_start = np.repeat(starts, pieces) + length * _counts_within(pieces)
    return run_start, np.minimum(run_start + length - 1, np.repeat(ends, pieces))


def run_pairs(
    traces: PlacedTraces,
    stations: Sequence[str],
    n_time: int,
    block_samples: int,
    spans: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """(trace, run) of each trace and each run (`run_spans`) it reads, run by run and in trace
    order within a run: a trace's blocks are one interval, so its runs are consecutive."""
    run_start, run_end = spans
    station, first, last = trace_blocks(traces, stations, n_time, block_samples)
    width = _width(n_time, block_samples)
    valid = np.flatnonzero((last >= first) & (station >= 0))
    lo = np.searchsorted(run_end, (station * width + first)[valid], side="left")
    hi = np.searchsorted(run_start, (station * width + last)[valid], side="right")
    count = np.maximum(hi - lo, 0)
    pair_trace = np.repeat(valid, count)
    pair_run = np.repeat(lo, count) + _counts_within(count)
    order = np.lexsort((pair_trace, pair_run))
    return pair_trace[order], pair_run[order]


def runs_of(
    spans: tuple[np.ndarray, np.ndarray],
    pairs: tuple[np.ndarray, np.ndarray],
    n_time: int,
    block_samples: int,
) -> RunTable:
    """The `RunTable` of runs `spans` and the (trace, run) `pairs` (`run_pairs`)."""
    run_start, run_end = spans
    pair_trace, pair_run = pairs
    width = _width(n_time, block_samples)
    trace_start = np.searchsorted(pair_run, np.arange(len(run_start) + 1), side="left")
    return RunTable(
        station=run_start // width,
        first_block=run_start % width,
        blocks=run_end - run_start + 1,
        traces=pair_trace,
        trace_start=trace_start.astype(np.int64),
    )


def run_table(
    traces: PlacedTraces,
    stations: Sequence[str],
    n_time: int,
    block_samples: int,
    tasks_wanted: int,
    max_blocks: int,
    only: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> RunTable:
    """The runs (module doc) of the blocks `traces` touch (`run_spans` of one partition, all
    the traces) and the traces each reads."""
    grid = (n_time, block_samples)
    spans = run_spans([block_intervals(traces, stations, *grid)], *grid, tasks_wanted,
                      max_blocks, only)  # fmt: skip
    return runs_of(spans, run_pairs(traces, stations, *grid, spans), *grid)


def _counts_within(counts: np.ndarray) -> np.ndarray:
    """0 … n-1 for each n of `counts`, concatenated (`np.repeat`'s companion)."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - offsets
