"""A store's record of its inputs (`input_manifest`'s table) read in ranges of rows by tasks and
joined there with a run's listing: a resume or an `--append` holds per range a summary (its
first path, its file count, the stations it withdraws), never the record or the listing of every
file, however many files the store already holds. What a format's record is (its columns, which
of its files are served from it, how a range's scan is merged) is a `RecordKind`: `WAVEFORMS`
here, `das_record.DAS` for DAS stores.

The record's rows are in path order; range i holds rows i x ROWS_PER_RANGE onwards, and every
path of the run from its first path to the next range's goes with it (the first range takes
what comes before, the last what comes after). Rounds, each a task per range where the ranges
are kept:

1. `read_rows`: the range's rows (its files, and the rows of each other dimension: traces,
   problems, header positions, patches; each found by bisection of its sorted file column: a
   range reads O(its rows) of the table).
2. `_joined`: the listing's batches cut to the range's paths; for an append the recorded files
   too (it adds to them: each must still be there, stat'ed here where the listing has not);
   which recorded files are as recorded (`input_manifest.served`), and the stations whose
   header position is at a file that is not (`input_manifest.lost_stations`; DAS: none).
3. `_todo`: with every range's lost stations (a station's position is recorded at its first
   file only, which may be in another range), the rows taken from the record and the files to
   scan.
4. The files to scan, in the scan's batches across the ranges (`scan_table.scan_files`, each
   kept on the host that read it, `input_cache`).
5. `_merged`: the range's scan in path order, equal to a scan of every file of it
   (`input_manifest.scanned`); an append's recorded files checked unchanged (sha256); then cut
   into partitions of at most the scan's batch size (`_part`).

A store written before the table (its inputs in the attr `inputs`: paths, sizes, hashes, no
scan) is one range, read by the client with the store's attrs; every file is scanned again.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import dask
import numpy as np

from seisctf.cluster import kept, shared
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.scan_table import ScanTable
from seisctf.formats.shared import input_locality, input_manifest, resumable
from seisctf.formats.shared.input_manifest import InputStats, RecordedInputs
from seisctf.formats.shared.partition_tasks import Each
from seisctf.location import StoreLocation

# Rows of the record a range task reads (a multiple of the table's chunk length): 10^7 files
# are 153 ranges.
ROWS_PER_RANGE = 4 * input_manifest.ROWS_PER_CHUNK


class RecordKind(Protocol):
    """A format's record of its inputs, as the join uses it (`WAVEFORMS`, `das_record.DAS`)."""

    scan_label: str  # the progress line of the scan of the files not served

    def is_table(self, table: Any) -> bool:
        """Whether a finished inputs table is this format's."""
        ...

    def legacy(self, group: Any) -> Any | None:
        """The record a store written before the table keeps in its attrs (or None)."""
        ...

    def file_columns(self) -> dict[str, str]:
        """{dimension: its sorted column of file indices} of the table's other dimensions."""
        ...

    def from_columns(self, values: dict[str, np.ndarray]) -> Any:
        """The record of a table's columns (or of a range of them, file indices from 0)."""
        ...

    def paths(self, record: Any) -> Sequence[str]: ...

    def served(self, record: Any, stats: InputStats) -> np.ndarray:
        """(file,) bool: whether each recorded file is listed with the recorded size and
        `modified`."""
        ...

    def lost(self, record: Any, served: np.ndarray) -> frozenset[str]:
        """What the range withdraws from every range (waveforms: stations)."""
        ...

    def withdrawn(self, record: Any, served: np.ndarray, lost: frozenset[str]) -> np.ndarray:
        """Indices of the recorded files whose scan is taken from the record."""
        ...

    def check_present(self, record: Any, stats: InputStats, url: str) -> None: ...

    def merged(
        self, record: Any, stats: InputStats, taken: np.ndarray, fresh: Sequence[Any],
        url: str, append: bool,
    ) -> Any:  # fmt: skip
        """The range's scan in path order (`fresh`: the scans of the others, in order); an
        append's recorded files checked unchanged."""
        ...

    def rows(self, scan: Any, first: int, stop: int) -> Any:
        """Files first..stop-1 of a range's scan."""
        ...

    def files(self, record: Any, start: int, stop: int) -> Any:
        """The record of its files start..stop-1."""
        ...


@dataclass(frozen=True)
class Record:
    """Where a store records its inputs: its table group and file count, or (a store written
    before the table) the record of its attr, read with the store's attrs."""

    table: str | None
    files: int
    legacy: Any | None = None


def record_of(store: StoreLocation, kind: RecordKind | None = None) -> Record | None:
    """The record of the inputs of the store at `store` (its size, not its rows) if it is of
    `kind` (default `WAVEFORMS`), or None: no store there, or none recorded."""
    kind = kind or WAVEFORMS
    try:
        group = resumable.open_store(store)
    except InvalidInput:
        return None
    table = input_manifest.finished_table(group)
    if table is not None:
        if not kind.is_table(table):
            return None
        return Record(input_manifest.table_name(group), int(table.attrs[input_manifest.ATTR_FILES]))
    legacy = kind.legacy(group)
    return None if legacy is None else Record(None, len(kind.paths(legacy)), legacy)


def read_rows(kind: RecordKind, store: StoreLocation, name: str, start: int, stop: int) -> Any:
    """Rows `start`..`stop`-1 of the inputs table `name` of the store at `store`: their files
    and the rows of the table's other dimensions that belong to them (file indices from 0)."""
    table = resumable.open_store(store)[name]
    columns = kind.file_columns()
    found = {dim: _bounds(table[column], start, stop) for dim, column in columns.items()}
    found[input_manifest.FILE] = slice(start, stop)
    values = {}
    for name_, array in table.arrays():
        dimension = (array.metadata.dimension_names or ("",))[0]
        values[name_] = np.asarray(array[found.get(dimension, slice(None))])
    for column in columns.values():
        values[column] = values[column] - start
    return kind.from_columns(values)


class _WaveformRecord:
    """A waveform store's record (`input_manifest.RecordedInputs`)."""

    scan_label = "scan"

    def is_table(self, table: Any) -> bool:
        return "trace_file" in table

    def legacy(self, group: Any) -> RecordedInputs | None:
        return input_manifest.recorded_in(group)

    def file_columns(self) -> dict[str, str]:
        return {input_manifest.TRACE: "trace_file", input_manifest.PROBLEM: "problem_file",
                input_manifest.POSITION: "position_file"}  # fmt: skip

    def from_columns(self, values: dict[str, np.ndarray]) -> RecordedInputs:
        return input_manifest.from_columns(values)

    def paths(self, record: RecordedInputs) -> Sequence[str]:
        return record.scans.paths

    def served(self, record: RecordedInputs, stats: InputStats) -> np.ndarray:
        return input_manifest.served(record, stats)

    def lost(self, record: RecordedInputs, served: np.ndarray) -> frozenset[str]:
        return frozenset(input_manifest.lost_stations(record, served))

    def withdrawn(
        self, record: RecordedInputs, served: np.ndarray, lost: frozenset[str]
    ) -> np.ndarray:
        return input_manifest.withdrawn(record, served, lost)

    def check_present(self, record: RecordedInputs, stats: InputStats, url: str) -> None:
        input_manifest.check_present(record.scans.paths, stats, url)

    def merged(
        self, record: RecordedInputs, stats: InputStats, taken: np.ndarray,
        fresh: Sequence[ScanTable], url: str, append: bool,
    ) -> ScanTable:  # fmt: skip
        table = input_manifest.scanned(
            stats.paths, stats, record, lambda others: ScanTable.joined(fresh, others), taken=taken
        )
        if append:
            input_manifest.check_unchanged(record, table, url)
        return table

    def rows(self, scan: ScanTable, first: int, stop: int) -> ScanTable:
        if first == 0 and stop == len(scan.paths):
            return scan
        return input_manifest.rows_of(scan, first, stop)

    def files(self, record: RecordedInputs, start: int, stop: int) -> RecordedInputs:
        return record.files(start, stop)


WAVEFORMS: RecordKind = _WaveformRecord()


class _Column:
    """A sorted 1-d zarr array as a sequence for `bisect`: each chunk read once, when needed."""

    def __init__(self, array: Any) -> None:
        self.array, self.chunk = array, int(array.chunks[0])
        self.read: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def __getitem__(self, index: int) -> int:
        number = index // self.chunk
        if number not in self.read:
            first = number * self.chunk
            self.read[number] = np.asarray(self.array[first : first + self.chunk])
        return int(self.read[number][index - number * self.chunk])


def _bounds(array: Any, start: int, stop: int) -> slice:
    """The rows of the sorted column `array` holding values start..stop-1."""
    column = _Column(array)
    return slice(bisect.bisect_left(column, start), bisect.bisect_left(column, stop))


# --- the join, range by range ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Joined:
    """A range's rows (`record`), the run's files in it (`stats`, path order), whether each
    recorded file is as recorded (`served`), and what it withdraws from the others (`lost`)."""

    record: Any
    stats: InputStats
    served: np.ndarray
    lost: frozenset[str]


@dataclass(frozen=True, eq=False)
class _Todo:
    """A range's join, the record's file indices it takes (`taken`) and the paths to scan."""

    joined: _Joined
    taken: np.ndarray
    paths: tuple[str, ...]


@dataclass(frozen=True)
class JoinedScan:
    """A run's scan in partitions (kept) with their `InputStats`; for an append, per partition
    the record of its recorded files (`records`, kept where its range is: what moves to the
    partition's worker is the partition's record, not its range's)."""

    parts: list[Any]
    stats: list[Any]
    records: list[Any] | None = None

    def part_records(self) -> list[Any]:
        """Per partition, the record of its files (kept)."""
        if self.records is None:
            raise ValueError("a join without append keeps no record")
        return self.records


def joined_scan(
    record: Record,
    store: StoreLocation,
    batches: Sequence[Any],
    scan: Callable[..., Any],
    append: bool,
    each: Each,
    quiet: bool,
    kind: RecordKind | None = None,
) -> JoinedScan:
    """The scan of the run's files (`batches`: its listing, `InputStats` in path order, kept;
    with `append`, the store's recorded files too) taking the record's scan of every file as
    recorded and scanning the others (module doc), in partitions; `kind`: the record's format
    (default `WAVEFORMS`)."""
    kind = kind or WAVEFORMS
    url, options = store.url, store.storage_options
    ranges = _ranges(kind, record, store)
    firsts = each(functools.partial(_first_path, kind), ranges)
    bounds = list(zip([None, *firsts[1:]], [*firsts[1:], None], strict=True))
    ends = each(_ends, batches)
    pieces = [
        [batch for batch, (first, last) in zip(batches, ends, strict=True)
         if first is not None and _meets(first, last, low, high)]
        for low, high in bounds
    ]  # fmt: skip
    joins = each(
        functools.partial(_joined, kind, url, options, append), ranges, bounds, pieces, keep=True
    )
    summaries = each(_summary, joins)
    lost = frozenset().union(*(stations for _, stations in summaries))  # (stations: small)
    todos = each(functools.partial(_todo, kind), joins, [lost] * len(joins), keep=True)
    counts = each(_todo_count, todos)
    fresh = _scans(todos, counts, scan, options, kind.scan_label, quiet)
    merged = each(functools.partial(_merged, kind, url, append), todos, fresh, keep=True)
    size = resumable.batch_size(sum(files for files, _ in summaries))
    cuts = [
        (index, first, min(first + size, files))
        for index, (files, _) in enumerate(summaries)
        for first in range(0, files, size)
    ] or [(0, 0, 0)]
    parts = kept([dask.delayed(kind.rows)(merged[i], a, b) for i, a, b in cuts], "", True)
    stats = kept([dask.delayed(_part_stats)(todos[i], a, b) for i, a, b in cuts], "", True)
    if not append:
        return JoinedScan(parts, stats)
    records = [dask.delayed(_part_record)(kind, todos[i], a, b) for i, a, b in cuts]
    return JoinedScan(parts, stats, kept(records, "", True))


def _ranges(kind: RecordKind, record: Record, store: StoreLocation) -> list[Any]:
    """The record's ranges of rows, read by tasks and kept (module doc)."""
    if record.table is None:
        return [shared(record.legacy)]
    files, size = record.files, ROWS_PER_RANGE
    tasks = [
        dask.delayed(read_rows)(kind, store, record.table, start, min(start + size, files))
        for start in range(0, max(files, 1), size)
    ]
    return kept(tasks, "", True)


def _first_path(kind: RecordKind, record: Any) -> str | None:
    paths = kind.paths(record)
    return paths[0] if paths else None


def _ends(stats: InputStats) -> tuple[str | None, str | None]:
    return (stats.paths[0], stats.paths[-1]) if stats.paths else (None, None)


def _meets(first: str, last: str, low: str | None, high: str | None) -> bool:
    """Whether paths first..last (sorted) reach the range [low, high) (None: unbounded)."""
    return (high is None or first < high) and (low is None or last >= low)


def _within(paths: Sequence[str], low: str | None, high: str | None) -> slice:
    begin = 0 if low is None else bisect.bisect_left(paths, low)
    return slice(begin, len(paths) if high is None else bisect.bisect_left(paths, high))


def _joined(
    kind: RecordKind,
    url: str,
    storage_options: dict | None,
    append: bool,
    record: Any,
    bounds: tuple[str | None, str | None],
    batches: Sequence[InputStats],
) -> _Joined:
    cut = [(batch, _within(batch.paths, *bounds)) for batch in batches]
    listed = InputStats(
        tuple(path for batch, piece in cut for path in batch.paths[piece]),
        np.concatenate([batch.sizes[piece] for batch, piece in cut] or [np.zeros(0, np.int64)]),
        np.concatenate(
            [batch.modified[piece] for batch, piece in cut] or [np.zeros(0, input_manifest.TEXT)]
        ),
    )
    stats = _with_recorded(listed, kind.paths(record), storage_options) if append else listed
    if append:
        kind.check_present(record, stats, url)
    served = kind.served(record, stats)
    return _Joined(record, stats, served, kind.lost(record, served))


def _with_recorded(
    listed: InputStats, recorded: Sequence[str], storage_options: dict | None
) -> InputStats:
    """`listed` and the `recorded` files it does not list (their stats taken now), path
    order."""
    have = set(listed.paths)
    others = [path for path in recorded if path not in have]
    if not others:
        return listed
    added = input_manifest.file_stats(others, storage_options)
    paths = np.array(listed.paths + added.paths, dtype=object)
    order = np.argsort(paths, kind="stable")
    return InputStats(
        tuple(paths[order].tolist()),
        np.concatenate([listed.sizes, added.sizes])[order],
        np.concatenate([listed.modified, added.modified])[order],
    )


def _summary(joined: _Joined) -> tuple[int, frozenset[str]]:
    return len(joined.stats.paths), joined.lost


def _todo(kind: RecordKind, joined: _Joined, lost: frozenset[str]) -> _Todo:
    taken = kind.withdrawn(joined.record, joined.served, lost)
    paths = kind.paths(joined.record)
    recorded = {paths[i] for i in taken.tolist()}
    return _Todo(joined, taken, tuple(p for p in joined.stats.paths if p not in recorded))


def _todo_count(todo: _Todo) -> int:
    return len(todo.paths)


def _scans(
    todos: Sequence[Any],
    counts: Sequence[int],
    scan: Callable[..., Any],
    storage_options: dict | None,
    label: str,
    quiet: bool,
) -> list[list[Any]]:
    """Per range, the scans (kept) of its files to scan, in batches of the scan's size over
    all ranges, placed in path order over the hosts (`input_locality.in_path_order`)."""
    size = resumable.batch_size(sum(counts))
    slices = [(i, a, min(a + size, n)) for i, n in enumerate(counts) for a in range(0, n, size)]

    def make(index: int) -> Any:
        number, first, stop = slices[index]
        return dask.delayed(_scan_slice)(scan, todos[number], first, stop, storage_options)

    place = input_locality.in_path_order(make, len(slices))
    tables = kept([place(index) for index in range(len(slices))], label, quiet)
    found: list[list[Any]] = [[] for _ in todos]
    for (number, _, _), table in zip(slices, tables, strict=True):
        found[number].append(table)
    return found


def _scan_slice(
    scan: Callable[..., Any], todo: _Todo, first: int, stop: int, options: dict | None
) -> Any:
    return scan(list(todo.paths[first:stop]), options)


def _merged(kind: RecordKind, url: str, append: bool, todo: _Todo, fresh: Sequence[Any]) -> Any:
    joined = todo.joined
    return kind.merged(joined.record, joined.stats, todo.taken, fresh, url, append)


def _part_stats(todo: _Todo, first: int, stop: int) -> InputStats:
    stats = todo.joined.stats
    return dataclasses.replace(
        stats,
        paths=stats.paths[first:stop],
        sizes=stats.sizes[first:stop],
        modified=stats.modified[first:stop],
    )


def _part_record(kind: RecordKind, todo: _Todo, first: int, stop: int) -> Any:
    """The record of the recorded files among the range's files first..stop-1 (an append's
    range lists every recorded file: they are the record's rows between two bisections)."""
    record, paths = todo.joined.record, todo.joined.stats.paths
    recorded = kind.paths(record)

    def row(index: int) -> int:
        return len(recorded) if index >= len(paths) else bisect.bisect_left(recorded, paths[index])

    return kind.files(record, row(first), row(stop))
