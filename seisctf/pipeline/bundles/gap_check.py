"""The gap check behind `guarded_segments`, in bounded waves: per trace and slot, whether the
slot is usable (`slot_leads`), and the run of ten consecutive slots where the most traces are
usable throughout (`usable_run`; the earliest among equals).

The client holds one wave of slots at a time (at most `WAVE_VALUES` (trace, slot) leads, and the
coverage of the wave's blocks) and the best run so far (a bool per trace, the leads of its ten
slots); each Dask graph reads at most `GRAPH_SAMPLES` samples. Neither grows with the record's
length or its chunk count.

With the store's coverage (the ingest's fraction of finite samples per block of `block_samples`:
coverage(station, block) of a station's own channels, a channel it lacks being NaN throughout; a
DAS store's coverage(block) of every channel) a slot is unusable for a trace when a block holding
one of the slot's samples from `max_lead` on has coverage 0, none finite: a usable slot's samples
are finite from its lead (at most `max_lead`) to its end. Such (trace, slot)s are not read: Dask
reads the traces with another slot in each run of slots where any trace has one, so a sparse
store costs its coverage and its written chunks, not its declared chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import dask.array as da
import numpy as np
import xarray as xr
from dask.core import flatten

from seisctf import conventions as cv
from seisctf.cluster import compute

# (trace, slot) values a wave holds: 4 MiB of int64 leads (about 20 MiB with their checks).
WAVE_VALUES = 2**19
# Coverage values a window holds (a bool each: 8 MiB), read a row of chunks at a time.
COVERAGE_VALUES = 2**23
# Samples one Dask graph reads: 1,024 chunks of 2**18 samples.
GRAPH_SAMPLES = 2**28
# Time chunk of a slot's raw samples (store's rate), in the gap check and the segments' filters:
# 2 MiB of float64.
TIME_CHUNK_SAMPLES = 2**18


def stations_per_chunk(n_samples: int, time_chunk_samples: int) -> int:
    """Stations in one chunk of a slot of `n_samples` raw samples cut in chunks of
    `time_chunk_samples`: enough to hold about `time_chunk_samples` samples (1 when the slot is
    that long). Short slots of many stations would otherwise be thousands of tiny tasks: the
    scheduler's ~1 ms each, not the filters, set the time."""
    return max(1, time_chunk_samples // max(1, min(n_samples, time_chunk_samples)))


def slot_leads(
    data: xr.DataArray, slot_samples: int, max_lead: int = 0, trace_dim: str = cv.STATION
) -> da.Array:
    """Lazy int (trace, slot) over consecutive slots of `slot_samples` raw samples: the index of
    the trace's first finite sample in the slot when it is at most `max_lead` and every sample
    from it on is finite (the slot is usable), else -1."""
    n_slots = data.sizes[cv.TIME] // slot_samples
    finite = da.isfinite(data.transpose(trace_dim, cv.TIME).data[:, : n_slots * slot_samples])
    per_chunk = slot_samples * max(1, TIME_CHUNK_SAMPLES // slot_samples)
    stations = stations_per_chunk(finite.shape[1], TIME_CHUNK_SAMPLES)
    finite = finite.rechunk({0: stations, 1: per_chunk})
    finite = finite.reshape(finite.shape[0], n_slots, slot_samples)
    head = finite[:, :, : max_lead + 1]
    lead = head.argmax(axis=2)  # the first finite sample of the head (0 if none)
    usable = head.any(axis=2) & (finite.sum(axis=2) == slot_samples - lead)
    return da.where(usable, lead, -1)


class BlockCoverage:
    """A record's coverage: `values` (trace, block), or (block,) for every trace, lazy: the
    fraction of finite samples of each block of `block_samples` samples. Read on this process
    as the waves ask, a window to the end of a column of its chunks at a time (at most
    `COVERAGE_VALUES` values), one row of chunks after the other: each stored chunk is decoded
    about once, one or two at a time, and kept as a bool."""

    def __init__(self, values: xr.DataArray, block_samples: int) -> None:
        self.values, self.block_samples = values, block_samples
        self.first, self.read = 0, np.zeros((0,), dtype=bool)
        chunks = values.chunks or tuple((n,) for n in values.shape)
        self.column_ends = np.cumsum(chunks[-1])
        self.row_ends = np.cumsum(chunks[0]) if values.ndim == 2 else np.ones(1, dtype=np.int64)

    def empty(self, n_trace: int, first: int, end: int) -> np.ndarray:
        """Bool (trace, block) of blocks first … end − 1: no finite sample."""
        if not (self.first <= first and end <= self.first + self.read.shape[-1]):
            blocks = self.values.dims[-1]
            column_end = int(self.column_ends[np.searchsorted(self.column_ends, first, "right")])
            most = COVERAGE_VALUES // int(self.row_ends[-1])
            stop = max(end, first + min(column_end - first, most))
            window = self.values.isel({blocks: slice(first, stop)})
            self.first = first
            if window.ndim == 1:
                self.read = np.asarray(window.compute(scheduler="synchronous").values) == 0
            else:
                self.read = np.zeros(window.shape, dtype=bool)
                starts = np.r_[0, self.row_ends[:-1]]
                for row_first, row_end in zip(starts, self.row_ends, strict=True):
                    part = window.isel({window.dims[0]: slice(row_first, row_end)})
                    values = part.compute(scheduler="synchronous").values
                    self.read[row_first:row_end] = np.asarray(values) == 0
        empty = self.read[..., first - self.first : end - self.first]
        return np.broadcast_to(empty, (n_trace, end - first))


def store_coverage(store: xr.Dataset, data: xr.DataArray, trace_dim: str) -> BlockCoverage | None:
    """The store's `coverage` of `data(trace_dim, time)` as the ingest writes it (one value per
    block of attr `block_samples` samples of the record, per trace or for all), else None."""
    block_samples = int(store.attrs.get("block_samples") or 0)
    if "coverage" not in store.data_vars or block_samples <= 0:
        return None
    values = store["coverage"]
    n_blocks = -(-data.sizes[cv.TIME] // block_samples)
    traces = values.dims[:-1]
    if values.sizes[values.dims[-1]] != n_blocks or traces not in ((), (trace_dim,)):
        return None
    if traces and values.sizes[trace_dim] != data.sizes[trace_dim]:
        return None
    return BlockCoverage(values, block_samples)


def slot_blocks(
    coverage: BlockCoverage, first: int, end: int, slot_samples: int, max_lead: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per slot first … end − 1, the first and last block holding its samples from
    `max_lead` on."""
    starts = np.arange(first, end, dtype=np.int64) * slot_samples
    low = (starts + max_lead) // coverage.block_samples
    return low, (starts + slot_samples - 1) // coverage.block_samples


def dead_slots(
    coverage: BlockCoverage, n_trace: int, first: int, end: int, slot_samples: int, max_lead: int
) -> np.ndarray:
    """Bool (trace, slot) of slots first … end − 1: a block holding one of the slot's samples
    from `max_lead` on has no finite sample (module doc: the slot is not usable)."""
    low, high = slot_blocks(coverage, first, end, slot_samples, max_lead)
    empty = coverage.empty(n_trace, int(low[0]), int(high[-1]) + 1)
    counts = np.concatenate([np.zeros((n_trace, 1), dtype=np.int64), empty.cumsum(axis=1)], axis=1)
    return counts[:, high - low[0] + 1] > counts[:, low - low[0]]


def all_dead(
    coverage: BlockCoverage, n_trace: int, first: int, end: int, slot_samples: int, max_lead: int
) -> bool:
    """Every slot first … end − 1 of every trace lies on empty blocks alone (the check of a
    wave of a sparse record's empty time: its coverage, nothing allocated per slot)."""
    low = (first * slot_samples + max_lead) // coverage.block_samples
    high = (end * slot_samples - 1) // coverage.block_samples
    return bool(coverage.empty(n_trace, low, high + 1).all())


def detached(part: xr.DataArray) -> xr.DataArray:
    """`part`, a selection of a store-wide Dask array, over a graph of its own tasks alone.
    Optimising a graph with a reduction lists every key of every layer below it (Dask's
    `HighLevelGraph.cull`), on the client or the scheduler: 290 MB for an argmax over three
    chunks of a store of 10^6. Culling the selection's graph alone costs its own chunks."""
    array = part.data
    if not isinstance(array, da.Array):
        return part
    graph = array.dask.cull(set(flatten(array.__dask_keys__())))
    own = da.Array(dict(graph), array.name, array.chunks, meta=array._meta)
    return part.copy(deep=False, data=own)


@dataclass(frozen=True)
class Piece:
    """Traces `rows` over slots first … end − 1 of the record: one lazy `slot_leads`."""

    rows: np.ndarray
    first: int
    end: int


def live_pieces(live: np.ndarray, first: int, slot_samples: int) -> Iterator[Piece]:
    """Pieces covering every True of `live` (trace, slot; slots from `first`): each run of
    consecutive slots where some trace is live, its live traces in groups reading at most
    `GRAPH_SAMPLES` samples."""
    columns = np.flatnonzero(live.any(axis=0))
    if not columns.size:
        return
    breaks = np.flatnonzero(np.diff(columns) > 1)
    for run in np.split(columns, breaks + 1):
        start, stop = int(run[0]), int(run[-1]) + 1
        rows = np.flatnonzero(live[:, start:stop].any(axis=1))
        per_piece = max(1, GRAPH_SAMPLES // ((stop - start) * slot_samples))
        for group in range(0, rows.size, per_piece):
            yield Piece(rows[group : group + per_piece], first + start, first + stop)


class BestRun:
    """The run of `n_segments` consecutive slots where the most traces are usable throughout
    (the earliest among equals), fed the leads of consecutive waves of slots."""

    def __init__(self, n_trace: int, n_segments: int) -> None:
        self.n_segments = n_segments
        self.tail = np.zeros((n_trace, 0), dtype=np.int64)  # the last n_segments − 1 slots
        self.first_slot, self.count = -1, -1
        self.complete = np.zeros(n_trace, dtype=bool)
        self.leads = np.full((n_trace, n_segments), -1, dtype=np.int64)

    def add(self, first: int, leads: np.ndarray) -> None:
        """Leads (trace, slot) of slots first, first + 1, … following those added before."""
        window = np.concatenate([self.tail, leads], axis=1)
        window_first = first - self.tail.shape[1]
        n_runs = window.shape[1] - self.n_segments + 1
        if n_runs > 0:
            gaps = np.concatenate(
                [np.zeros((window.shape[0], 1), dtype=np.int64), (window < 0).cumsum(axis=1)],
                axis=1,
            )
            complete = gaps[:, self.n_segments :] == gaps[:, :n_runs]
            counts = complete.sum(axis=0)
            best = int(np.argmax(counts))
            if counts[best] > self.count:
                self.first_slot, self.count = window_first + best, int(counts[best])
                self.complete = complete[:, best].copy()
                self.leads = window[:, best : best + self.n_segments].copy()
        self.tail = window[:, max(0, window.shape[1] - self.n_segments + 1) :].copy()

    def add_unusable(self, first: int, n_slots: int) -> None:
        """As `add` of `n_slots` slots from `first` usable for no trace, without their leads:
        every run that holds one has no complete trace."""
        n_trace, kept = self.tail.shape[0], self.tail.shape[1]
        fill = np.full((n_trace, min(n_slots, self.n_segments)), -1, dtype=np.int64)
        window = np.concatenate([self.tail, fill], axis=1)
        if self.count < 0 and kept + n_slots >= self.n_segments:
            self.first_slot, self.count = first - kept, 0
            self.complete = np.zeros(n_trace, dtype=bool)
            self.leads = window[:, : self.n_segments].copy()
        self.tail = window[:, max(0, window.shape[1] - self.n_segments + 1) :].copy()


def usable_run(
    data: xr.DataArray,
    slot_samples: int,
    max_lead: int,
    trace_dim: str,
    n_segments: int,
    coverage: BlockCoverage | None = None,
    quiet: bool = False,
) -> BestRun:
    """The gap check of `data(trace_dim, time)` (module doc): the best run of `n_segments`
    slots (`first_slot`, `complete`: bool per trace, `leads` (trace, n_segments)). The record
    must hold at least `n_segments` slots."""
    n_trace, n_slots = data.sizes[trace_dim], data.sizes[cv.TIME] // slot_samples
    per_wave = max(1, min(WAVE_VALUES // max(1, n_trace), GRAPH_SAMPLES // slot_samples))
    best = BestRun(n_trace, n_segments)
    for first in range(0, n_slots, per_wave):
        end = min(first + per_wave, n_slots)
        if coverage is not None and all_dead(coverage, n_trace, first, end, slot_samples, max_lead):
            best.add_unusable(first, end - first)
            continue
        leads = np.full((n_trace, end - first), -1, dtype=np.int64)
        live = np.ones(leads.shape, dtype=bool)
        if coverage is not None:
            live = ~dead_slots(coverage, n_trace, first, end, slot_samples, max_lead)
        pieces = list(live_pieces(live, first, slot_samples))
        label = "gap check" if per_wave >= n_slots else f"gap check (slots {first}–{end - 1})"
        for batch in batches(pieces, slot_samples):
            results = compute(
                *(
                    slot_leads(
                        detached(
                            data.isel(
                                {
                                    trace_dim: piece.rows,
                                    cv.TIME: slice(
                                        piece.first * slot_samples, piece.end * slot_samples
                                    ),
                                }
                            )
                        ),
                        slot_samples,
                        max_lead,
                        trace_dim,
                    )
                    for piece in batch
                ),
                label=label,
                quiet=quiet,
            )
            for piece, values in zip(batch, results, strict=True):
                leads[piece.rows, piece.first - first : piece.end - first] = values
        best.add(first, leads)
    return best


def batches(pieces: list[Piece], slot_samples: int) -> Iterator[list[Piece]]:
    """Consecutive pieces in groups reading at most `GRAPH_SAMPLES` samples (one graph each)."""
    batch: list[Piece] = []
    samples = 0
    for piece in pieces:
        size = piece.rows.size * (piece.end - piece.first) * slot_samples
        if batch and samples + size > GRAPH_SAMPLES:
            yield batch
            batch, samples = [], 0
        batch.append(piece)
        samples += size
    if batch:
        yield batch
