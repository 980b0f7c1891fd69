"""One (station, time block) of a waveform ingest: read its files, merge them on the grid.

`decode_file` decodes one file (obspy), removes the instrument response of each trace if asked
(`response`), resamples it if needed (`resampling`)
and puts it on the grid, as float32;
`merged_rows` merges a block's traces as obspy's `Stream.merge(method=1, interpolation_samples=0)`
merges them (`trace_merge`: each channel's rows are pieces of its decoded traces, no sample
copied); `merged_block` cuts the block out. Two caches per worker process
keep decoded files and merged file sets, so a day file is decoded (and deconvolved) once per
worker, not once per block of it.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.catalogs.seed_ids import stats_station_id
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive import resampling
from seisctf.formats.obspy_archive.non_finite import finite_pieces, non_finite_problem
from seisctf.formats.obspy_archive.overlap_conflicts import Piece, conflict_problems, find_conflicts
from seisctf.formats.obspy_archive.read_warnings import collected_warnings, warning_problems
from seisctf.formats.obspy_archive.resampling import rate_ratio, resampled_length
from seisctf.formats.obspy_archive.response import (
    ResponseRemoval,
    remove_response,
    response_problem,
)
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.obspy_archive.trace_merge import merged_channel
from seisctf.formats.obspy_archive.waveform_files import obspy_error, read_file
from seisctf.formats.obspy_archive.waveform_plan import (
    NS_PER_S,
    needs_resampling,
    place_trace,
)
from seisctf.formats.shared import input_cache
from seisctf.formats.shared.input_listing import read_input
from seisctf.location import StoreLocation


@dataclass(frozen=True)
class BlockTask:
    """One (station, time block): the files to read (path, channels) and where the block sits."""

    station: str
    station_index: int
    block: int
    first: int
    stop: int
    reads: tuple[tuple[str, tuple[str, ...]], ...]
    channels: tuple[str, ...]
    start_ns: int
    sampling_rate: float
    resample: bool
    digests: tuple[str, ...] = ()  # sha256 of each file read (the decode caches' key)
    removal: ResponseRemoval | None = None
    inventory_sha256: str = ""  # of the inventories (the decode caches' key, with removal)
    own_rows: tuple[int, ...] = ()  # rows of `channels` the station has (empty: all)

    def time_of(self, index: int) -> Any:
        """The obspy UTCDateTime of grid sample `index`."""
        from obspy import UTCDateTime

        return UTCDateTime(ns=grid_time_ns(self.start_ns, index, self.sampling_rate))

    def own(self, values: np.ndarray) -> np.ndarray:
        """The rows of a block (channel, time) of the station's own channels: what its
        coverage counts."""
        return values[list(self.own_rows)] if self.own_rows else values


def grid_time_ns(start_ns: int, index: int, rate: float) -> int:
    """Nanoseconds of grid sample `index` (rounded to the nanosecond)."""
    return start_ns + round(index * NS_PER_S / rate)


def trace_header(trace: Any, path: str = "") -> TraceHeader:
    """The header of an obspy trace (`trace_header.TraceHeader`)."""
    stats = trace.stats
    return TraceHeader(path, stats_station_id(stats), stats.channel, stats.starttime.ns,
                       float(stats.sampling_rate), int(stats.npts))  # fmt: skip


def on_grid(
    samples: np.ndarray, offset: int, header: TraceHeader, task: BlockTask
) -> tuple[np.ndarray, int] | None:
    """Samples `offset`… of the trace `header` (one run of its finite samples), resampled (in
    float64, `resampling.resample_run`, in step with the whole trace) if the whole trace needs
    it, and the grid index of the first: the trace starts at its nearest grid sample (no
    interpolation); None for a trace that needs resampling and has no ratio (the plan reported
    it). int32 counts stay int32 (they become float32 where the block is filled, without a pass
    and a copy of their own); anything else is float32."""
    rate = task.sampling_rate
    first = place_trace(header, task.start_ns, rate, resample=False).first_index
    if task.resample and needs_resampling(header, rate):
        ratio = rate_ratio(header.npts, header.sampling_rate, rate)
        if ratio is None:
            return None
        samples, index = resampling.resample_run(samples, offset, *ratio)
        # None past the whole trace's end (the plan's extent of the trace).
        samples = samples[: max(0, resampled_length(header.npts, *ratio) - index)]
        return _stored_type(samples), first + index
    return _stored_type(samples), first + offset


def _stored_type(samples: np.ndarray) -> np.ndarray:
    """int32 counts as they are, anything else as float32."""
    samples = np.asarray(samples)
    if samples.dtype.kind in "iu" and samples.dtype.itemsize > 4:
        samples = samples.astype(np.float64)  # via float64 as before (two roundings)
    if samples.dtype != np.int32:
        samples = samples.astype(np.float32)
    return samples


def decode_file(
    input_file: StoreLocation,
    channels: Sequence[str],
    task: BlockTask,
    inventory: Any = None,
    digest: str = "",
) -> tuple[tuple[tuple[str, int, np.ndarray], ...], tuple[str, ...]]:
    """The station's traces of one file (`input_file`; only `channels`), cut at non-finite samples
    (`non_finite`), response removed if the task says so, resampled if needed and on the grid:
    ((channel, first grid index, float32 samples), …) in file order, and the file's problems
    (undecodable, non-finite samples in any of the station's traces, no response, warnings of
    the reader or of the correction: `read_warnings`). The file's bytes come from this host's
    copy of the scan's read where one is kept (`input_cache`, by the scan's hex sha256
    `digest`), else from storage."""
    path = input_file.url
    raw = input_cache.read(digest) if digest else None
    try:
        raw = read_input(input_file) if raw is None else raw
    except OSError as error:  # gone or unreadable since the scan: fatal, a re-run resumes
        raise InvalidInput(path, f"cannot read the file ({error}); re-run to resume") from None
    try:
        stream, _, caught = read_file(path, raw)
    except Exception as error:  # noqa: BLE001 - a file that scanned but does not decode
        return (), (f"{path}: cannot decode its samples ({obspy_error(error, path)})",)
    with collected_warnings() as corrections:
        traces, problems = _station_traces(stream, path, channels, task, inventory)
    # A cut last record is the scan's problem line already (`waveform_files.scan_file`).
    warned = warning_problems(path, [*caught, *corrections], truncated=True)
    return traces, (*problems, *warned)


def _station_traces(
    stream: Any, path: str, channels: Sequence[str], task: BlockTask, inventory: Any
) -> tuple[tuple[tuple[str, int, np.ndarray], ...], tuple[str, ...]]:
    """`decode_file`'s work on the decoded `stream` of `path`."""
    traces, problems, non_finite = [], [], []
    for trace in stream:
        stats = trace.stats
        if stats_station_id(stats) != task.station or not (stats.npts and stats.sampling_rate > 0):
            continue
        # Counted in every channel, whichever a block reads: one line per file and station.
        pieces, bad, first_bad, beyond = finite_pieces(trace)
        if bad:
            when = stats.starttime + first_bad / stats.sampling_rate
            non_finite.append((trace.id, bad, when, beyond))
        if stats.channel not in channels:
            continue
        header = trace_header(trace, path)
        if task.removal is not None:
            problem = response_problem(path, trace.id, stats.starttime, inventory)
            try:
                pieces = [] if problem else [
                    (offset, remove_response(piece, inventory, task.removal))
                    for offset, piece in pieces
                ]  # fmt: skip
            except Exception as error:  # noqa: BLE001 - evalresp fails in many ways
                problem = (f"{path}: {trace.id} at {stats.starttime}: cannot remove the "
                           f"response ({error}); trace not ingested")  # fmt: skip
            if problem is not None:
                problems.append(problem)
                continue
        for offset, piece in pieces:
            placed = on_grid(np.asarray(piece.data), offset, header, task)
            if placed is not None:
                traces.append((stats.channel, placed[1], placed[0]))
    problem = non_finite_problem(path, non_finite)
    return tuple(traces), (*([problem] if problem else []), *problems)


def merged_rows(
    traces: Sequence[tuple[str, int, np.ndarray]], task: BlockTask
) -> list[tuple[int, int, np.ndarray]]:
    """The merged traces as (channel row, first grid index, samples: int32 or float32), rows of
    one channel in order and never overlapping, none in a gap: obspy's
    `Stream.merge(method=1, interpolation_samples=0)` of each channel's traces, as pieces of
    them (`trace_merge.merged_channel`: views, no sample copied; `merged_block` cuts each block
    from them). Merging the int32 counts or the float32 values gives the stored values (a
    channel whose files differ in type is merged in float32, as obspy merges only one
    type)."""
    types: dict[str, set] = {}
    for channel, _, samples in traces:
        types.setdefault(channel, set()).add(samples.dtype)
    by_channel: dict[str, list[tuple[int, np.ndarray]]] = {}
    for channel, first, samples in traces:
        same = samples if len(types[channel]) == 1 else samples.astype(np.float32)
        by_channel.setdefault(channel, []).append((first, same))
    return [
        (task.channels.index(channel), first, samples)
        for channel, pieces in by_channel.items()
        for first, samples in merged_channel(pieces)
    ]


def merged_rows_by_channel(
    rows: Sequence[tuple[int, int, np.ndarray]], channels: Sequence[str]
) -> dict[str, list[tuple[int, np.ndarray]]]:
    """{channel: [(first grid index, samples), …]}: `rows` by channel, in order (what
    `overlap_conflicts` reads the kept copy from)."""
    by_channel: dict[str, list[tuple[int, np.ndarray]]] = {}
    for row, first, samples in rows:
        by_channel.setdefault(channels[row], []).append((first, samples))
    return by_channel


def merged_block(rows: Sequence[tuple[int, int, np.ndarray]], task: BlockTask) -> np.ndarray:
    """(channel, time) float32 samples of the block: the merged rows, NaN in gaps."""
    values = np.full((len(task.channels), task.stop - task.first), np.nan, dtype=np.float32)
    for row, first, samples in rows:
        lo, hi = max(first, task.first), min(first + len(samples), task.stop)
        if lo < hi:
            values[row, lo - task.first : hi - task.first] = samples[lo - first : hi - first]
    return values


class _Cache:
    """Per worker process, least recently used first out, at most `entries` and `max_bytes`
    of numpy arrays in all. Keys hold content hashes: a changed file is never served. Threads
    asking for the same key while it is being made wait for it (made once)."""

    def __init__(self, entries: int, max_bytes: int):
        self.entries, self.max_bytes = entries, max_bytes
        self.items: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()
        self.making: dict[Any, threading.Lock] = {}

    def get(self, key: Any, make: Any) -> Any:
        with self.lock:
            making = self.making.setdefault(key, threading.Lock())
        with making:
            with self.lock:
                if key in self.items:
                    self.items.move_to_end(key)
                    return self.items[key][0]
            value = make()
            size = sum(samples.nbytes for *_, samples in value[0])
            with self.lock:
                self.making.pop(key, None)
                if size <= self.max_bytes:
                    self.items[key] = (value, size)
                    while len(self.items) > self.entries or (
                        sum(n for _, n in self.items.values()) > self.max_bytes
                    ):
                        self.items.popitem(last=False)
            return value


# Consecutive blocks of a station mostly read the same day files: each file is decoded (and
# deconvolved) once per worker, and each set of files merged once, not once per block. 256 MiB
# each: a 100 Hz day of 3 channels is 104 MB of float32.
_DECODED = _Cache(entries=12, max_bytes=2**28)
_MERGED = _Cache(entries=3, max_bytes=2**28)


def station_rows(
    task: BlockTask, store: StoreLocation, inventory: Any = None
) -> tuple[list, list[str], list[tuple[str, str]]]:
    """Merged rows of the task's files (read with the storage options of the output `store`;
    from the per-process caches if read before), problems (the files', then overlaps with
    other values: `overlap_conflicts`), and the (path, channel) of the files' channels none of
    whose samples are stored. Cached per output store too: another ingest reads its files
    itself."""
    context = (store.url, task.station, task.start_ns, task.sampling_rate, task.resample,
               task.removal, task.inventory_sha256)  # fmt: skip
    cacheable = bool(task.digests) and all(task.digests)

    def decoded(path: str, channels: tuple[str, ...], digest: str) -> tuple:
        make = lambda: decode_file(store.with_url(path), channels, task, inventory, digest)  # noqa: E731
        return _DECODED.get((context, path, digest, channels), make) if cacheable else make()

    def merge() -> tuple[list, list[str], list[tuple[str, str]]]:
        digests = task.digests if cacheable else ("",) * len(task.reads)
        files = [
            decoded(path, chans, digest)
            for (path, chans), digest in zip(task.reads, digests, strict=True)
        ]
        traces = [trace for found, _ in files for trace in found]
        rows = merged_rows(traces, task)
        conflicts, lost = find_conflicts(
            [
                Piece(path, *trace)
                for (path, _), (found, _) in zip(task.reads, files, strict=True)
                for trace in found
            ],
            merged_rows_by_channel(rows, task.channels),
        )
        problems = [p for _, problems in files for p in problems]
        problems += conflict_problems(conflicts, task.station, task.time_of)
        return rows, problems, sorted(lost)

    if not cacheable:
        return merge()
    return _MERGED.get((context, task.reads, task.digests, task.channels), merge)


# Runs: a worker holds the decoded files of the run it works on, so splitting a file's blocks
# between workers decodes that file twice. Runs are as long as a station's blocks allow, down
# to what gives about RUN_TASKS tasks in all (parallelism for few stations), and at most
# RUN_MAX_BLOCKS (2**25 samples at the default block size: 3.9 days at 100 Hz).
RUN_TASKS = 16
RUN_MAX_BLOCKS = 128


@dataclass(frozen=True)
class RunSettings:
    """What every block task of an ingest shares (`BlockTask`'s fields of the same names)."""

    channels: tuple[str, ...]
    start_ns: int
    sampling_rate: float
    resample: bool
    block_samples: int
    n_time: int
    removal: ResponseRemoval | None = None
    inventory_sha256: str = ""


def run_key(station_index: int, first_block: int) -> str:
    """A run's key, `station index-first block` (zero-padded: Dask orders equal-priority tasks
    by key)."""
    return f"{station_index:06d}-{first_block:08d}"


class BlockRun:
    """Consecutive blocks of one station, for one Dask task: `number` (its progress record),
    the station, its first block and block count, and the traces it reads, (path, channel,
    first grid index, samples on the grid, file sha256) each; the worker makes its
    `BlockTask`s (`tasks`). A plain class, not a dataclass or tuple: Dask walks those field by
    field when they are call arguments; this it passes as it is."""

    __slots__ = ("blocks", "first_block", "number", "own_rows", "settings", "station",
                 "station_index", "traces")  # fmt: skip

    def __init__(
        self,
        number: int,
        station: str,
        station_index: int,
        first_block: int,
        blocks: int,
        traces: Sequence[tuple[str, str, int, int, str]],
        settings: RunSettings,
        own_rows: tuple[int, ...] = (),
    ):
        self.number, self.station, self.station_index = number, station, station_index
        self.first_block, self.blocks, self.traces = first_block, blocks, tuple(traces)
        self.settings, self.own_rows = settings, own_rows

    @property
    def key(self) -> str:
        """`station index-first block` (`run_key`)."""
        return run_key(self.station_index, self.first_block)

    def tasks(self) -> list[BlockTask]:
        """One `BlockTask` per block: the files whose traces overlap it (path, its channels
        there), sorted by path, with their sha256."""
        settings = self.settings
        found = []
        for block in range(self.first_block, self.first_block + self.blocks):
            first = block * settings.block_samples
            stop = min(first + settings.block_samples, settings.n_time)
            files: dict[str, set[str]] = {}
            digests: dict[str, str] = {}
            for path, channel, trace_first, n_samples, digest in self.traces:
                if trace_first < stop and trace_first + n_samples > first:
                    files.setdefault(path, set()).add(channel)
                    digests[path] = digest
            reads = tuple((path, tuple(sorted(chans))) for path, chans in sorted(files.items()))
            found.append(
                BlockTask(
                    self.station,
                    self.station_index,
                    block,
                    first,
                    stop,
                    reads,
                    settings.channels,
                    settings.start_ns,
                    settings.sampling_rate,
                    settings.resample,
                    tuple(digests[path] for path, _ in reads),
                    settings.removal,
                    settings.inventory_sha256,
                    self.own_rows,
                )  # fmt: skip
            )
        return found
