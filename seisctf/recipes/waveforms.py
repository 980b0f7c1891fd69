"""Raw seismogram archives (any obspy format: miniSEED, SAC, …) -> one continuous waveform store.

Store layout (zarr v3 group; `xarray.open_zarr` opens it lazily):

- `data(station, channel, time)` float32, NaN where no sample was recorded; chunks
  (1, all channels, `block_samples`) with `block_samples` = 2**18 by default (3 MiB for three
  channels): a function of the data only, so any number of workers writes the same bytes;
- `station` (`NET.STA.LOC`) with `latitude`, `longitude` (degrees), `elevation` (m) from StationXML
  (NaN without it); `channel` (channel codes, e.g. `BHZ`);
- `coverage(station, block)` float32: fraction of valid (non-NaN) samples of the station's block
  (all channels), one block per time chunk;
- attrs `start_time` (ISO 8601, the first grid sample), `start_time_ns`, `sampling_rate` (Hz):
  sample i is at start_time + i / sampling_rate (no time coordinate is stored: it would be as
  large as the data); `time_offsets_s` (per station: the offsets of its traces' starts from their
  grid sample, trace minus grid, in seconds); `channel_metadata` (per station and channel:
  azimuth, dip (degrees), sensitivity, its frequency and units); `ingest_problems` (every bad
  input, by name); `inputs` (path, size, sha256 of every file); `merge_rule`, `resampling`.

Work: a header scan (one Dask task per file, `waveform_plan.scan_file`), the plan
(`waveform_plan.make_plan`), then one Dask task per (station, time block) that reads the files of
its block, merges, fills gaps with NaN, resamples if asked, and writes exactly its chunk. The
completion marker and consolidated metadata are written last (`storage.finish_group`).
Resume: each block task marks its (station, block) in `ingest_progress` right after its chunk;
a re-run of the same ingest (same fingerprint) on an unfinished store runs only the unmarked
blocks, so an interrupted ingest finishes with the bytes of an uninterrupted one.

Append (`append=True`): the store's own inputs are re-scanned (each must hash as recorded) with
the new files; the grid (start, rate, block size), stations and channels must stay. The store is
marked incomplete first, `data` grows along `time`, and only the blocks new files touch plus each
station's last partial block are (re)written; the result equals a one-shot ingest of all files.

Inputs may be fsspec URLs (`s3://bucket/archive/`, with `storage_options`): every file is read
whole into memory (hashed, scanned and decoded from its bytes), local or remote alike.

Merge (obspy `Stream.merge(method=1, interpolation_samples=0)`, on traces already on the grid): of
two overlapping traces the one that starts later wins the overlap (ties: the later end, then the
later file path, then record order), except that a trace lying wholly inside another is dropped
where the other has data. Resampling (only with `rate`): obspy `Trace.resample` — FFT
(Fourier) resampling with a Hann window in the frequency domain, which cuts the spectrum at the new
Nyquist frequency (the anti-alias filter) — of each contiguous trace, before merging.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.recipes.waveform_plan import (
    DEFAULT_BLOCK_SAMPLES,
    NS_PER_S,
    FileScan,
    TraceHeader,
    WaveformPlan,
    expand_sources,
    input_exists,
    make_plan,
    needs_resampling,
    place_trace,
    read_input,
    read_inventories,
    scan_file,
    station_id,
)

DATA_VAR = "data"
COVERAGE_VAR = "coverage"
# Per-(station, block) progress of an unfinished ingest (one chunk per element): "" until the
# block's task has written its chunk, then JSON {"coverage": fraction, "problems": [...]}. Its
# attr `ingest_fingerprint` says which ingest it belongs to. Deleted when the store is finished.
PROGRESS_VAR = "ingest_progress"
STATION = "station"
CHANNEL = "channel"
BLOCK = "block"
ELEVATION = "elevation"
ATTR_FINGERPRINT = "ingest_fingerprint"
MERGE_RULE = (
    "obspy Stream.merge(method=1, interpolation_samples=0) on grid-aligned traces: in an overlap "
    "the later-starting trace wins; a trace contained in another is dropped where it has data"
)
RESAMPLING = (
    "obspy Trace.resample (FFT, Hann window in frequency: spectrum cut at the new Nyquist) "
    "per contiguous trace, only where the rate differs from sampling_rate"
)


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
    digests: tuple[str, ...] = ()  # sha256 of each file read (the merged-rows cache key)


@dataclass(frozen=True)
class IngestReport:
    """What an ingest wrote: the plan, coverage (station, block) and every problem found."""

    plan: WaveformPlan
    coverage: np.ndarray
    problems: tuple[str, ...]
    up_to_date: bool = False


def open_store(url: str, storage_options: dict | None, mode: str = "r") -> Any:
    """The store's group, ignoring consolidated metadata (stale while an append runs, and
    absent before the store is finished)."""
    import zarr

    if mode == "r":
        try:
            return zarr.open_group(
                str(url),
                mode="r",
                storage_options=storage.options_for(url, storage_options),
                use_consolidated=False,
            )
        except (FileNotFoundError, zarr.errors.GroupNotFoundError) as error:
            raise InvalidInput(str(url), f"no zarr group found there ({error})") from None
    group = storage.open_group(url, storage_options, mode=mode)
    if mode == "w":
        return group
    return zarr.open_group(group.store, mode=mode, zarr_format=3, use_consolidated=False)


def grid_time_ns(start_ns: int, index: int, rate: float) -> int:
    """Nanoseconds of grid sample `index` (rounded to the nanosecond)."""
    return start_ns + round(index * NS_PER_S / rate)


def iso_time(ns: int) -> str:
    """ISO 8601 UTC with only the fractional digits needed: `2018-01-01T00:00:00.0195Z`."""
    from obspy import UTCDateTime

    whole = UTCDateTime(ns=ns - ns % NS_PER_S).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{ns % NS_PER_S:09d}".rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


def on_grid(trace: Any, start_ns: int, rate: float, resample: bool) -> tuple[Any, int]:
    """A float64 copy of `trace` resampled if needed and moved to its nearest grid sample
    (no interpolation), and that sample's grid index."""
    from obspy import UTCDateTime

    trace = trace.copy()
    trace.data = np.asarray(trace.data, dtype=np.float64)
    trace.stats.calib = 1.0  # data stay in counts; merge refuses differing calibration factors
    stats = trace.stats
    header = TraceHeader("", station_id(stats), stats.channel, stats.starttime.ns,
                         float(stats.sampling_rate), int(stats.npts))  # fmt: skip
    if resample and needs_resampling(header, rate):
        trace.resample(rate, window="hann", no_filter=True)
    placed = place_trace(header, start_ns, rate, resample=False)
    trace.stats.sampling_rate = rate
    trace.stats.starttime = UTCDateTime(ns=grid_time_ns(start_ns, placed.first_index, rate))
    return trace, placed.first_index


def read_block_traces(
    task: BlockTask, storage_options: dict | None = None
) -> tuple[list[Any], list[str]]:
    """The station's traces of the task's files, on the grid; problems of unreadable files."""
    import obspy

    traces, problems = [], []
    for path, channels in task.reads:
        try:
            raw = read_input(path, storage_options)
        except OSError as error:  # gone or unreadable since the scan: fatal, a re-run resumes
            raise InvalidInput(path, f"cannot read the file ({error}); re-run to resume") from None
        try:
            stream = obspy.read(io.BytesIO(raw))
        except Exception as error:  # noqa: BLE001 - a file that scanned but does not decode
            problems.append(f"{path}: cannot decode its samples ({error})")
            continue
        for trace in stream:
            if station_id(trace.stats) != task.station or trace.stats.channel not in channels:
                continue
            if trace.stats.npts and trace.stats.sampling_rate > 0:
                traces.append(on_grid(trace, task.start_ns, task.sampling_rate, task.resample)[0])
    return traces, problems


def merged_rows(traces: Sequence[Any], task: BlockTask) -> list[tuple[int, int, np.ndarray]]:
    """The merged traces as (channel row, first grid index, float32 samples with NaN gaps)."""
    import obspy

    rows = []
    stream = obspy.Stream(list(traces)).merge(method=1, interpolation_samples=0)
    for trace in stream:
        position = (trace.stats.starttime.ns - task.start_ns) * task.sampling_rate / NS_PER_S
        samples = np.ma.filled(np.ma.asarray(trace.data, dtype=np.float64), np.nan)
        row = task.channels.index(trace.stats.channel)
        rows.append((row, round(position), samples.astype(np.float32)))
    return rows


def merged_block(rows: Sequence[tuple[int, int, np.ndarray]], task: BlockTask) -> np.ndarray:
    """(channel, time) float32 samples of the block: the merged rows, NaN in gaps."""
    values = np.full((len(task.channels), task.stop - task.first), np.nan, dtype=np.float32)
    for row, first, samples in rows:
        lo, hi = max(first, task.first), min(first + len(samples), task.stop)
        if lo < hi:
            values[row, lo - task.first : hi - task.first] = samples[lo - first : hi - first]
    return values


# Per worker process: the merged rows of the last few file sets read (consecutive blocks of a
# station mostly read the same day files: decoded and merged once, not once per block). Keyed
# by output store, content (sha256 of every file) and grid: a changed file is never served.
_MERGED: collections.OrderedDict = collections.OrderedDict()
_MERGED_ENTRIES = 3
_MERGED_MAX_BYTES = 2**28  # in all entries together (a 100 Hz day of 3 channels: 104 MB)


def station_rows(task: BlockTask, url: str, storage_options: dict | None) -> tuple[list, list[str]]:
    """Merged rows of the task's files (from the per-process cache if read before), problems."""
    key = (url, task.station, task.reads, task.digests, task.channels, task.start_ns,
           task.sampling_rate, task.resample)  # fmt: skip
    cacheable = bool(task.digests) and all(task.digests)
    if cacheable and key in _MERGED:
        _MERGED.move_to_end(key)
        return _MERGED[key]
    traces, problems = read_block_traces(task, storage_options)
    found = (merged_rows(traces, task), problems)
    if cacheable and _rows_bytes(found) <= _MERGED_MAX_BYTES:
        _MERGED[key] = found
        while (
            len(_MERGED) > _MERGED_ENTRIES
            or sum(_rows_bytes(entry) for entry in _MERGED.values()) > _MERGED_MAX_BYTES
        ):
            _MERGED.popitem(last=False)
    return found


def _rows_bytes(entry: tuple[list, list[str]]) -> int:
    return sum(samples.nbytes for _, _, samples in entry[0])


def ingest_block(task: BlockTask, url: str, storage_options: dict | None) -> tuple[float, list]:
    """Read, merge and write one (station, time block) chunk: (coverage fraction, problems)."""
    rows, problems = station_rows(task, url, storage_options)
    values = merged_block(rows, task)
    group = open_store(url, storage_options, mode="r+")
    if rows:
        group[DATA_VAR][task.station_index, :, task.first : task.stop] = values
    fraction = float(np.isfinite(values).mean())
    # Only after the chunk: a block marked done is whole (a re-run skips it).
    done = json.dumps({"coverage": fraction, "problems": problems})
    group[PROGRESS_VAR][task.station_index, task.block] = done
    return fraction, problems


def block_tasks(
    plan: WaveformPlan, resample: bool, digests: dict[str, str] | None = None
) -> list[BlockTask]:
    """One task per (station, time block), station-major. `digests`: sha256 by path."""
    reads = plan.reads_by_block()
    return [
        BlockTask(
            station,
            index,
            block,
            *plan.block_span(block),
            reads.get((station, block), ()),
            plan.channels,
            plan.start_ns,
            plan.sampling_rate,
            resample,
            tuple((digests or {}).get(path, "") for path, _ in reads.get((station, block), ())),
        )
        for index, station in enumerate(plan.stations)
        for block in range(plan.n_blocks)
    ]


def scan_with_hash(
    path: str, storage_options: dict | None = None
) -> tuple[FileScan, dict[str, Any]]:
    """Header scan of one file (local or fsspec URL) and its manifest entry (path, size in
    bytes, sha256)."""
    try:
        raw = read_input(path, storage_options)
    except OSError as error:
        raise InvalidInput(path, f"cannot read the file ({error})") from None
    entry = {"path": path, "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    return scan_file(path, raw), entry


def _json_float(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _json_clean(value: Any) -> Any:
    """NaN -> None, recursively, so attrs are strict JSON."""
    if isinstance(value, dict):
        return {key: _json_clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_clean(item) for item in value]
    if isinstance(value, float):
        return _json_float(value)
    return value


def station_offsets(plan: WaveformPlan) -> dict[str, list[float]]:
    """Per station: the distinct offsets (s, trace start minus its grid sample) of its traces."""
    offsets: dict[str, set[float]] = {station: set() for station in plan.stations}
    for placed in plan.traces:
        offsets[placed.header.station].add(round(placed.offset_s, 9))
    return {station: sorted(values) for station, values in offsets.items()}


def _coordinate(plan: WaveformPlan, name: str) -> np.ndarray:
    return np.array(
        [plan.station_metadata.get(s, {}).get(name, math.nan) for s in plan.stations],
        dtype=np.float64,
    )


def create_store(
    plan: WaveformPlan, url: str, storage_options: dict | None, fingerprint: str
) -> None:
    """The empty store (arrays, coordinates and the progress array; no attrs, no marker)."""
    group = open_store(url, storage_options, mode="w")
    n_station, n_channel = len(plan.stations), len(plan.channels)
    coordinates = {"coordinates": f"{cv.LATITUDE} {cv.LONGITUDE} {ELEVATION}"}
    data = group.create_array(
        DATA_VAR,
        shape=(n_station, n_channel, plan.n_time),
        chunks=(1, n_channel, plan.block_samples),
        dtype="float32",
        fill_value=np.nan,
        dimension_names=(STATION, CHANNEL, cv.TIME),
    )
    data.attrs.update(coordinates)
    for name, values, dim in (
        (STATION, np.array(plan.stations, dtype=object), STATION),
        (CHANNEL, np.array(plan.channels, dtype=object), CHANNEL),
        (cv.LATITUDE, _coordinate(plan, "latitude"), STATION),
        (cv.LONGITUDE, _coordinate(plan, "longitude"), STATION),
        (ELEVATION, _coordinate(plan, "elevation"), STATION),
    ):
        dtype = str if values.dtype == object else values.dtype  # variable-length UTF-8
        array = group.create_array(name, shape=values.shape, dtype=dtype, dimension_names=(dim,))
        array[:] = values
    # Last, in one metadata write: a store that has it (with this fingerprint) can be resumed.
    group.create_array(
        PROGRESS_VAR,
        shape=(len(plan.stations), plan.n_blocks),
        chunks=(1, 1),
        dtype=str,
        fill_value="",
        dimension_names=(STATION, BLOCK),
        attributes={ATTR_FINGERPRINT: fingerprint},
    )


def write_coverage(
    plan: WaveformPlan, coverage: np.ndarray, url: str, storage_options: dict | None
) -> None:
    group = open_store(url, storage_options, mode="r+")
    array = group.create_array(
        COVERAGE_VAR,
        shape=coverage.shape,
        dtype="float32",
        fill_value=np.nan,
        dimension_names=(STATION, BLOCK),
    )
    array.attrs.update({"coordinates": f"{cv.LATITUDE} {cv.LONGITUDE} {ELEVATION}"})
    array[:] = coverage


def store_attrs(
    plan: WaveformPlan, problems: Sequence[str], inputs: Sequence[dict], resample: bool
) -> dict[str, Any]:
    channel_metadata = {s: m.get("channels", {}) for s, m in plan.station_metadata.items()}
    return _json_clean(
        {
            cv.ATTR_START_TIME: iso_time(plan.start_ns),
            "start_time_ns": plan.start_ns,
            cv.ATTR_SAMPLING_RATE: plan.sampling_rate,
            "block_samples": plan.block_samples,
            "time_offsets_s": station_offsets(plan),
            "channel_metadata": channel_metadata,
            "ingest_problems": list(problems),
            "inputs": list(inputs),
            "merge_rule": MERGE_RULE,
            "resampling": RESAMPLING if resample else None,
        }
    )


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for piece in iter(lambda: handle.read(2**20), b""):
            digest.update(piece)
    return digest.hexdigest()


def ingest_fingerprint(
    inputs: Sequence[dict], inventories: Sequence[str], rate: float | None, block_samples: int
) -> str:
    """SHA-256 of everything that decides the store's bytes: input hashes, inventory hashes,
    rate and block size (paths excluded: moving an archive does not change the data)."""
    from seisctf import __version__

    parts = {
        "inputs": sorted(entry["sha256"] for entry in inputs),
        "inventories": sorted(file_sha256(path) for path in inventories),
        "rate": rate,
        "block_samples": block_samples,
        "version": __version__,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def finished_store_attrs(url: str, storage_options: dict | None) -> dict[str, Any] | None:
    """The attrs of a complete store at `url`, or None (absent or unfinished)."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        return None
    attrs = dict(group.attrs)
    return attrs if attrs.get(cv.ATTR_COMPLETE) else None


def unfinished_progress(
    url: str, storage_options: dict | None, fingerprint: str, plan: WaveformPlan
) -> np.ndarray | None:
    """The progress array (station, block) of an interrupted ingest of the same inputs and
    settings at `url`, or None (no store, a complete one, or another ingest's)."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        return None
    if group.attrs.get(cv.ATTR_COMPLETE) or PROGRESS_VAR not in group:
        return None
    progress = group[PROGRESS_VAR]
    if progress.attrs.get(ATTR_FINGERPRINT) != fingerprint:
        return None
    if progress.shape != (len(plan.stations), plan.n_blocks):
        return None
    return np.asarray(progress[:], dtype=object)


def fail_if_strict(strict: bool, problems: Sequence[str]) -> None:
    if strict and problems:
        raise InvalidInput("--strict", f"{len(problems)} input problem(s): " + "; ".join(problems))


def ingest_waveforms(
    sources: Sequence[str],
    url: str,
    *,
    inventories: Sequence[str] = (),
    rate: float | None = None,
    strict: bool = False,
    storage_options: dict | None = None,
    block_samples: int = DEFAULT_BLOCK_SAMPLES,
    quiet: bool = False,
    append: bool = False,
) -> IngestReport:
    """Ingest waveform files (paths, globs, folders) into the continuous store at `url`.

    Bad inputs are reported by name in the report and the store's `ingest_problems`; with
    `strict` any of them is InvalidInput (and no store is marked complete). A complete store
    made from the same inputs (by hash), inventories, rate and block size is left as it is;
    an interrupted one is resumed: blocks already written (per `ingest_progress`) are skipped.

    `append`: add `sources` to the complete store at `url` (its inputs are re-scanned and must be
    unchanged; its grid, stations and channels stay): the time axis grows, and only the blocks
    the new files touch (and each station's last, partial block) are written. The result equals
    a one-shot ingest of all the files.
    """
    import dask

    paths = expand_sources(sources, storage_options)
    previous = appendable_attrs(url, storage_options) if append else None
    if previous is not None:
        block_samples = int(previous["block_samples"])
        rate = append_rate(previous, rate)
        paths = sorted(set(paths) | set(previous_paths(previous, url, storage_options)))
    inventory = read_inventories(inventories) if inventories else None
    scanned = compute(
        *[dask.delayed(scan_with_hash)(path, storage_options) for path in paths],
        label="scan",
        quiet=quiet,
    )
    inputs = [entry for _, entry in scanned]
    if previous is not None:
        check_unchanged(previous, inputs, url)
    plan = make_plan([scan for scan, _ in scanned], inventory, rate, block_samples)
    if previous is not None:
        check_same_grid(previous, plan, url, storage_options)
    fail_if_strict(strict, plan.problems)
    fingerprint = ingest_fingerprint(inputs, inventories, rate, block_samples)
    existing = finished_store_attrs(url, storage_options)
    if existing and existing.get(ATTR_FINGERPRINT) == fingerprint:
        coverage = np.asarray(open_store(url, storage_options)[COVERAGE_VAR][:])
        return IngestReport(plan, coverage, tuple(existing["ingest_problems"]), up_to_date=True)
    progress = unfinished_progress(url, storage_options, fingerprint, plan)
    if progress is None and previous is not None:
        if not previous.get(cv.ATTR_COMPLETE):
            raise InvalidInput(
                url,
                "an interrupted append of other files is pending: re-run that append, "
                "or ingest all files without --append",
            )
        progress = prepare_append(plan, previous, url, storage_options, fingerprint)
    elif progress is None:
        create_store(plan, url, storage_options, fingerprint)
        progress = np.full((len(plan.stations), plan.n_blocks), "", dtype=object)
    tasks = [
        task
        for task in block_tasks(plan, rate is not None, {e["path"]: e["sha256"] for e in inputs})
        if not progress[task.station_index, task.block]
    ]
    # Keys in station-major order: Dask runs equal-priority tasks by key, so consecutive tasks
    # on a worker are mostly the same station's next block (served by the merged-rows cache).
    token = dask.base.tokenize(url, fingerprint)
    compute(
        *[
            dask.delayed(ingest_block)(
                task,
                url,
                storage_options,
                dask_key_name=f"ingest_block-{token}-{task.station_index:06d}-{task.block:08d}",
            )
            for task in tasks
        ],
        label="ingest waveforms",
        quiet=quiet,
    )
    coverage, decode_problems = collect_progress(url, storage_options)
    problems = (*plan.problems, *decode_problems)
    fail_if_strict(strict, decode_problems)
    group = open_store(url, storage_options, mode="r+")
    if COVERAGE_VAR in group:  # an append replaces it
        del group[COVERAGE_VAR]
    write_coverage(plan, coverage, url, storage_options)
    attrs = store_attrs(plan, problems, inputs, rate is not None)
    attrs[ATTR_FINGERPRINT] = fingerprint
    del group[PROGRESS_VAR]
    storage.finish_group(url, attrs, storage_options)
    return IngestReport(plan, coverage, problems)


def appendable_attrs(url: str, storage_options: dict | None) -> dict[str, Any]:
    """The attrs of the store to append to: complete, or an interrupted append (resumable)."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        raise InvalidInput(url, "--append needs an existing store; ingest without it") from None
    attrs = dict(group.attrs)
    if not attrs.get(cv.ATTR_COMPLETE) and not (PROGRESS_VAR in group and "inputs" in attrs):
        raise InvalidInput(url, "--append needs a complete store (this one is unfinished)")
    return attrs


def append_rate(previous: dict[str, Any], rate: float | None) -> float | None:
    """The `rate` the store was ingested with (None: no resampling); `rate` must agree."""
    used = float(previous[cv.ATTR_SAMPLING_RATE]) if previous.get("resampling") else None
    if rate is not None and rate != used:
        raise InvalidInput("--rate", f"the store was ingested with --rate {used}, not {rate}")
    return used


def previous_paths(previous: dict[str, Any], url: str, storage_options: dict | None) -> list[str]:
    paths = [entry["path"] for entry in previous["inputs"]]
    for path in paths:
        if not input_exists(path, storage_options):
            raise InvalidInput(path, f"ingested into {url} but now missing; cannot append")
    return paths


def check_unchanged(previous: dict[str, Any], inputs: Sequence[dict], url: str) -> None:
    """Every file already in the store must hash as it did (else bad input naming it)."""
    now = {entry["path"]: entry["sha256"] for entry in inputs}
    for entry in previous["inputs"]:
        if now.get(entry["path"]) != entry["sha256"]:
            raise InvalidInput(
                entry["path"],
                f"changed since it was ingested into {url} (sha256 {entry['sha256'][:12]}… "
                f"now {now.get(entry['path'], '?')[:12]}…); ingest without --append to rebuild",
            )


def check_same_grid(
    previous: dict[str, Any], plan: WaveformPlan, url: str, storage_options: dict | None
) -> None:
    """Appended files keep the store's start, rate, stations and channels."""
    group = open_store(url, storage_options)
    stations = [str(s) for s in group[STATION][:]]
    channels = [str(c) for c in group[CHANNEL][:]]
    known = {entry["path"] for entry in previous["inputs"]}
    new = [placed.header for placed in plan.traces if placed.header.path not in known]
    if plan.start_ns != int(previous["start_time_ns"]):
        first = min(new, key=lambda header: header.start_ns).path if new else url
        raise InvalidInput(first, f"starts before the store {url}; ingest without --append")
    if plan.sampling_rate != float(previous[cv.ATTR_SAMPLING_RATE]):
        raise InvalidInput(new[0].path if new else url, f"sampling rate differs from {url}")
    for header in new:
        for kind, name, names in (
            ("station", header.station, stations),
            ("channel", header.channel, channels),
        ):
            if name not in names:
                raise InvalidInput(
                    header.path, f"{kind} {name} is not in {url}; ingest without --append"
                )


def prepare_append(
    plan: WaveformPlan,
    previous: dict[str, Any],
    url: str,
    storage_options: dict | None,
    fingerprint: str,
) -> np.ndarray:
    """Turn the complete store into an unfinished one of the grown plan: completion marker
    off, `data` resized, and progress marking done every old block that is whole and that no
    new file touches (its chunk and coverage stay). Returns the progress (station, block)."""
    group = open_store(url, storage_options, mode="r+")
    group.attrs[cv.ATTR_COMPLETE] = False  # first: from here on the store is being changed
    known = {entry["path"] for entry in previous["inputs"]}
    new_traces = tuple(p for p in plan.traces if p.header.path not in known)
    touched = set(dataclasses.replace(plan, traces=new_traces).reads_by_block())
    old_time = group[DATA_VAR].shape[-1]
    old_coverage = np.asarray(group[COVERAGE_VAR][:])
    progress = np.full((len(plan.stations), plan.n_blocks), "", dtype=object)
    whole_blocks = old_time // plan.block_samples
    for index, station in enumerate(plan.stations):
        for block in range(whole_blocks):
            if (station, block) not in touched:
                done = {"coverage": float(old_coverage[index, block]), "problems": []}
                progress[index, block] = json.dumps(done)
    if PROGRESS_VAR in group:
        del group[PROGRESS_VAR]
    group[DATA_VAR].resize((len(plan.stations), len(plan.channels), plan.n_time))
    # Decode problems of the kept blocks: the old ones that the new plan does not repeat.
    carried = [p for p in previous.get("ingest_problems", []) if p not in plan.problems]
    # The progress array last (an append killed before it is not resumable: re-ingest); killed
    # before its values are in, a resume rewrites every block (same bytes, only slower).
    array = group.create_array(
        PROGRESS_VAR,
        shape=progress.shape,
        chunks=(1, 1),
        dtype=str,
        fill_value="",
        dimension_names=(STATION, BLOCK),
        attributes={ATTR_FINGERPRINT: fingerprint, "carried_problems": carried},
    )
    array[:] = progress.astype(str)
    return progress


def collect_progress(url: str, storage_options: dict | None) -> tuple[np.ndarray, list[str]]:
    """Coverage (station, block) and the sorted decode problems of every finished block."""
    array = open_store(url, storage_options)[PROGRESS_VAR]
    progress = array[:]
    problems: set[str] = set(array.attrs.get("carried_problems", []))
    coverage = np.full(progress.shape, np.nan, dtype=np.float32)
    for index, text in np.ndenumerate(progress):
        done = json.loads(text)
        coverage[index] = done["coverage"]
        problems.update(done["problems"])
    return coverage, sorted(problems)
