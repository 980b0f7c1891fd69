"""The coverage array of a resumable ingest, written by tasks from the runs' records, so that
the client never holds it: 4 bytes a (station, block) is 660 MB for 552 stations over 25 years
at 100 Hz, however few of those blocks hold data.

The array is created with the chunks zarr chooses for its shape (those of an array written
whole, so a store's bytes do not depend on who wrote it); a task fills chunk after chunk: an
append's kept coverage (`resumable.BASE_VAR`) or zeros, then the fractions of the records of
the runs whose blocks fall there (`RunCells`: which run wrote which cell, the client giving
each task the runs of its chunk alone). An append's kept coverage is made the same way from
the old `coverage`, grown (`write_base`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from seisctf import storage
from seisctf.cluster import compute, compute_in_waves
from seisctf.formats.shared.resumable import BASE_VAR, PROGRESS_VAR, open_store, read_records
from seisctf.location import StoreLocation

Region = tuple[slice, ...]
# Chunks a task writes (one after the other: it holds one chunk's values at a time). zarr's
# chunks of a float32 coverage are up to ~1.5 MB: 552 stations over 25 years are 440 of them,
# 28 tasks, each opening the store once.
CHUNKS_PER_TASK = 16
# A coverage of at most this many cells (16 MiB of float32) is written whole by one task (for
# `ingest waveforms`, the one finishing the store): a small store's ingest pays no task round
# for it.
SMALL_CELLS = 2**22


class RunCells(Protocol):
    """Which run wrote which cell of the coverage, and where in its record."""

    def part(self, region: Region) -> RunCells:
        """The runs with cells in `region` alone (what the task of `region` carries)."""
        ...

    def within(self, region: Region) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """(run number, entry of its record's lists, index in `region` along each axis) of
        every cell of `region` a run wrote (int64 arrays of one length)."""
        ...


@dataclass(frozen=True)
class StationRuns:
    """Runs of consecutive blocks of one station (`ingest waveforms`): run `numbers[i]` wrote
    blocks `first_block[i]` to `first_block[i] + blocks[i] - 1` of station `station[i]`, its
    record's entry k being block `first_block[i] + k`. Rows in station order."""

    numbers: np.ndarray
    station: np.ndarray
    first_block: np.ndarray
    blocks: np.ndarray

    @classmethod
    def of_table(cls, table: Any) -> StationRuns:
        """The runs of a run table (`placed_traces.RunTable`: run i is row i of its `station`,
        `first_block` and `blocks`), station-major."""
        columns = (np.asarray(getattr(table, name), dtype=np.int64)
                   for name in ("station", "first_block", "blocks"))  # fmt: skip
        return cls(np.arange(len(table.station), dtype=np.int64), *columns)

    def part(self, region: Region) -> StationRuns:
        rows, columns = region
        low, high = np.searchsorted(self.station, (rows.start, rows.stop))
        ends = self.first_block[low:high] + self.blocks[low:high]
        keep = low + np.flatnonzero(
            (self.first_block[low:high] < columns.stop) & (ends > columns.start)
        )
        return StationRuns(*(a[keep] for a in (self.numbers, self.station, self.first_block,
                                               self.blocks)))  # fmt: skip

    def within(self, region: Region) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        rows, columns = region
        first = np.maximum(self.first_block, columns.start)
        stop = np.minimum(self.first_block + self.blocks, columns.stop)
        counts = np.maximum(stop - first, 0)
        run = np.repeat(np.arange(len(counts)), counts)
        block = np.repeat(first, counts) + _ramps(counts)
        entry = block - self.first_block[run]
        return self.numbers[run], entry, (self.station[run] - rows.start, block - columns.start)


@dataclass(frozen=True)
class SpanRuns:
    """Runs of `run_blocks` consecutive blocks of spans of touched blocks (`ingest das`): span
    i is blocks `starts[i]` to `starts[i] + lengths[i] - 1`, the blocks of all spans numbered
    in order (`before[i]`: those of the spans before i); block ordinal n is entry n %
    run_blocks of run n // run_blocks."""

    starts: np.ndarray
    lengths: np.ndarray
    before: np.ndarray
    run_blocks: int

    def part(self, region: Region) -> SpanRuns:
        (blocks,) = region
        keep = np.flatnonzero((self.starts < blocks.stop) & (self.starts + self.lengths >
                                                              blocks.start))  # fmt: skip
        return SpanRuns(self.starts[keep], self.lengths[keep], self.before[keep], self.run_blocks)

    def within(self, region: Region) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        (blocks,) = region
        first = np.maximum(self.starts, blocks.start)
        counts = np.maximum(np.minimum(self.starts + self.lengths, blocks.stop) - first, 0)
        span = np.repeat(np.arange(len(counts)), counts)
        block = np.repeat(first, counts) + _ramps(counts)
        ordinal = self.before[span] + block - self.starts[span]
        return ordinal // self.run_blocks, ordinal % self.run_blocks, (block - blocks.start,)


def _ramps(counts: np.ndarray) -> np.ndarray:
    """0, 1, …, counts[i] - 1 for each i, concatenated."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - starts


@dataclass(frozen=True)
class Growth:
    """How an append's old coverage grows into its kept coverage: each station's old last,
    partial block (`last`, of `old_length` valid time samples, now `new_length`) keeps its
    valid samples over the grown length: recovered exactly from the float32 fraction with the
    station's `rows` (channels its coverage counts; at most 3 x 2**18 samples)."""

    last: int
    old_length: int
    new_length: int
    rows: np.ndarray  # (station,) int64

    def apply(self, values: np.ndarray, region: Region) -> None:
        rows, columns = region
        if not columns.start <= self.last < columns.stop:
            return
        counted = self.rows[rows]
        column = values[:, self.last - columns.start]
        valid = np.round(column.astype(np.float64) * counted * self.old_length)
        values[:, self.last - columns.start] = valid / (counted * self.new_length)


@dataclass(frozen=True)
class Coverage:
    """The coverage array `name` (float32, NaN fill; `dims`, `attrs`) of `shape` to write at
    `store` from the records of `runs`: in each chunk the kept coverage of an append
    (`BASE_VAR`, when the store has it) or 0, then each cell a run wrote, its record's fraction
    (the progress array holds every run's record)."""

    store: StoreLocation
    name: str
    shape: tuple[int, ...]
    dims: tuple[str, ...]
    runs: RunCells
    attrs: Mapping[str, Any] | None = None

    @property
    def small(self) -> bool:
        """Whether one task writes it whole (`SMALL_CELLS`)."""
        return math.prod(self.shape) <= SMALL_CELLS

    def write_here(self) -> None:
        """(Re)create the array and write it whole, chunk after chunk, in this process (a
        task's)."""
        chunks, has_base = _create(self.store, self.name, self.shape, self.dims,
                                   dict(self.attrs or {}), with_base=True)  # fmt: skip
        fill = functools.partial(_fill_from_records, has_base=has_base)
        parts = [(region, self.runs.part(region)) for region in _regions(self.shape, chunks)]
        _write_regions(self.store, self.name, parts, fill)

    def write_by_tasks(self, quiet: bool = True) -> None:
        """(Re)create the array in a task, then write it by tasks of `CHUNKS_PER_TASK` chunks,
        each given the runs of its chunks alone."""
        import dask

        create = dask.delayed(_create)(self.store, self.name, self.shape, self.dims,
                                       dict(self.attrs or {}), with_base=True)  # fmt: skip
        chunks, has_base = compute(create, quiet=True)[0]
        groups = _grouped(_regions(self.shape, chunks))
        fill = functools.partial(_fill_from_records, has_base=has_base)
        compute_in_waves(
            lambda index: dask.delayed(_write_regions)(
                self.store, self.name, [(r, self.runs.part(r)) for r in groups[index]], fill
            ),
            len(groups),
            label="coverage",
            quiet=quiet,
        )


def write_coverage(coverage: Coverage, quiet: bool = True) -> None:
    """Write `coverage`: by one task when it is small, else by tasks of `CHUNKS_PER_TASK`
    chunks."""
    import dask

    if coverage.small:
        compute(dask.delayed(_write_here)(coverage), quiet=True)
    else:
        coverage.write_by_tasks(quiet)


def _write_here(coverage: Coverage) -> None:
    coverage.write_here()


def write_base(
    store: StoreLocation, old_name: str, shape: tuple[int, ...], growth: Growth | None = None
) -> None:
    """An append's kept coverage (`BASE_VAR`, of the grown `shape`) from the store's old
    coverage `old_name`, by tasks of `CHUNKS_PER_TASK` chunks: the old values, zeros beyond
    them, `growth` applied (waveforms' old last blocks)."""
    import dask

    fill = functools.partial(_fill_from_old, old_name=old_name, growth=growth)
    if math.prod(shape) <= SMALL_CELLS:  # one task
        compute(dask.delayed(_base_here)(store, shape, fill), quiet=True)
        return
    create = dask.delayed(_create)(store, BASE_VAR, shape, None, {}, with_base=False)
    chunks, _ = compute(create, quiet=True)[0]
    tasks = [
        dask.delayed(_write_regions)(store, BASE_VAR, [(region, None) for region in group], fill)
        for group in _grouped(_regions(shape, chunks))
    ]
    compute(*tasks, quiet=True)


def _base_here(store: StoreLocation, shape: tuple[int, ...], fill: Callable) -> None:
    """`write_base` of a small coverage in one task."""
    chunks, _ = _create(store, BASE_VAR, shape, None, {}, with_base=False)
    _write_regions(store, BASE_VAR, [(region, None) for region in _regions(shape, chunks)], fill)


def coverage_array(store: StoreLocation, name: str) -> Any:
    """The store's coverage array `name` (zarr, read as it is indexed), opened alone: not the
    group's root metadata."""
    import zarr

    return zarr.open_array(storage.join(store.url, name), mode="r",
                           storage_options=store.options)  # fmt: skip


def _create(
    store: StoreLocation,
    name: str,
    shape: tuple[int, ...],
    dims: tuple[str, ...] | None,
    attrs: dict[str, Any],
    with_base: bool,
) -> tuple[tuple[int, ...], bool]:
    """Replace the array `name` by an empty float32 one of zarr's chunks for `shape`; (its
    chunks, whether the store keeps an append's coverage)."""
    group = open_store(store, mode="r+")
    if name in group:
        del group[name]
    array = group.create_array(
        name, shape=shape, dtype="float32", fill_value=np.nan, dimension_names=dims
    )
    if attrs:
        array.attrs.update(attrs)
    return tuple(array.chunks), with_base and BASE_VAR in group


def _regions(shape: tuple[int, ...], chunks: tuple[int, ...]) -> list[Region]:
    """The chunks of an array of `shape`, as regions, in chunk order."""
    axes = [
        [slice(s, min(s + c, n)) for s in range(0, n, c)]
        for n, c in zip(shape, chunks, strict=True)
    ]
    return [tuple(region) for region in itertools.product(*axes)]


def _grouped(regions: list[Region]) -> list[list[Region]]:
    """`regions` in consecutive groups of `CHUNKS_PER_TASK`."""
    return [regions[i : i + CHUNKS_PER_TASK] for i in range(0, len(regions), CHUNKS_PER_TASK)]


def _write_regions(
    store: StoreLocation,
    name: str,
    regions: Sequence[tuple[Region, RunCells | None]],
    fill: Callable[[Any, Region, Any], np.ndarray],
) -> None:
    """Write `fill(group, region, runs)` to each `region` (a whole chunk) of the array `name`,
    one after the other."""
    group = open_store(store, mode="r+")
    array = group[name]
    for region, runs in regions:
        array[region] = fill(group, region, runs)


def _fill_from_records(group: Any, region: Region, runs: RunCells, has_base: bool) -> np.ndarray:
    """A chunk of the coverage: the kept coverage or 0, then the runs' fractions."""
    shape = tuple(s.stop - s.start for s in region)
    values = np.asarray(group[BASE_VAR][region]) if has_base else np.zeros(shape, np.float32)
    numbers, entries, cells = runs.within(region)
    if len(numbers):
        wanted = np.unique(numbers)
        records = read_records(group[PROGRESS_VAR], wanted.tolist())
        missing = [int(n) for n in wanted if int(n) not in records]
        if missing:
            raise RuntimeError(f"coverage: runs {missing[:10]} have no record")
        values[cells] = [records[int(n)]["coverage"][int(k)]
                         for n, k in zip(numbers, entries, strict=True)]  # fmt: skip
    return values


def _fill_from_old(
    group: Any, region: Region, _: Any, old_name: str, growth: Growth | None
) -> np.ndarray:
    """A chunk of an append's kept coverage: the old coverage where it was, zeros beyond."""
    values = np.zeros(tuple(s.stop - s.start for s in region), np.float32)
    old = group[old_name]
    inside = tuple(slice(s.start, min(s.stop, n)) for s, n in zip(region, old.shape, strict=True))
    if all(s.stop > s.start for s in inside):
        values[tuple(slice(0, s.stop - s.start) for s in inside)] = old[inside]
    if growth is not None:
        growth.apply(values, region)
    return values
