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

Merge (obspy `Stream.merge(method=1, interpolation_samples=0)`, on traces already on the grid): of
two overlapping traces the one that starts later wins the overlap (ties: the later end, then the
later file path, then record order), except that a trace lying wholly inside another is dropped
where the other has data. Resampling (only with `rate`): obspy `Trace.resample` — FFT
(Fourier) resampling with a Hann window in the frequency domain, which cuts the spectrum at the new
Nyquist frequency (the anti-alias filter) — of each contiguous trace, before merging.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
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
    make_plan,
    needs_resampling,
    place_trace,
    read_inventories,
    scan_file,
    station_id,
)

DATA_VAR = "data"
COVERAGE_VAR = "coverage"
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


@dataclass(frozen=True)
class IngestReport:
    """What an ingest wrote: the plan, coverage (station, block) and every problem found."""

    plan: WaveformPlan
    coverage: np.ndarray
    problems: tuple[str, ...]
    up_to_date: bool = False


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


def read_block_traces(task: BlockTask) -> tuple[list[Any], list[str]]:
    """The station's traces of the task's files, on the grid; problems of unreadable files."""
    import obspy

    traces, problems = [], []
    for path, channels in task.reads:
        try:
            stream = obspy.read(path)
        except Exception as error:  # noqa: BLE001 - a file that scanned but does not decode
            problems.append(f"{path}: cannot decode its samples ({error})")
            continue
        for trace in stream:
            if station_id(trace.stats) != task.station or trace.stats.channel not in channels:
                continue
            if trace.stats.npts and trace.stats.sampling_rate > 0:
                traces.append(on_grid(trace, task.start_ns, task.sampling_rate, task.resample)[0])
    return traces, problems


def merged_block(traces: Sequence[Any], task: BlockTask) -> np.ndarray:
    """(channel, time) float32 samples of the block: merged traces, NaN in gaps."""
    import obspy

    values = np.full((len(task.channels), task.stop - task.first), np.nan, dtype=np.float32)
    stream = obspy.Stream(list(traces)).merge(method=1, interpolation_samples=0)
    for trace in stream:
        position = (trace.stats.starttime.ns - task.start_ns) * task.sampling_rate / NS_PER_S
        first = round(position)
        samples = np.ma.filled(np.ma.asarray(trace.data, dtype=np.float64), np.nan)
        lo, hi = max(first, task.first), min(first + len(samples), task.stop)
        if lo < hi:
            row = task.channels.index(trace.stats.channel)
            values[row, lo - task.first : hi - task.first] = samples[lo - first : hi - first]
    return values


def ingest_block(task: BlockTask, url: str, storage_options: dict | None) -> tuple[float, list]:
    """Read, merge and write one (station, time block) chunk: (coverage fraction, problems)."""
    traces, problems = read_block_traces(task)
    values = merged_block(traces, task)
    if traces:
        group = storage.open_group(url, storage_options, mode="r+")
        group[DATA_VAR][task.station_index, :, task.first : task.stop] = values
    return float(np.isfinite(values).mean()), problems


def block_tasks(plan: WaveformPlan, resample: bool) -> list[BlockTask]:
    """One task per (station, time block), station-major."""
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
        )
        for index, station in enumerate(plan.stations)
        for block in range(plan.n_blocks)
    ]


def scan_with_hash(path: str) -> tuple[FileScan, dict[str, Any]]:
    """Header scan of one file and its manifest entry (path, size in bytes, sha256)."""
    entry = {"path": path, "size": os.path.getsize(path), "sha256": file_sha256(path)}
    return scan_file(path), entry


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


def create_store(plan: WaveformPlan, url: str, storage_options: dict | None) -> None:
    """The empty store (arrays and coordinates, no attrs, no completion marker)."""
    group = storage.open_group(url, storage_options, mode="w")
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


def write_coverage(
    plan: WaveformPlan, coverage: np.ndarray, url: str, storage_options: dict | None
) -> None:
    group = storage.open_group(url, storage_options, mode="r+")
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
        group = storage.open_group(url, storage_options)
    except InvalidInput:
        return None
    attrs = dict(group.attrs)
    return attrs if attrs.get(cv.ATTR_COMPLETE) else None


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
) -> IngestReport:
    """Ingest waveform files (paths, globs, folders) into the continuous store at `url`.

    Bad inputs are reported by name in the report and the store's `ingest_problems`; with
    `strict` any of them is InvalidInput (and no store is marked complete). A complete store
    made from the same inputs (by hash), inventories, rate and block size is left as it is.
    """
    import dask

    paths = expand_sources(sources)
    inventory = read_inventories(inventories) if inventories else None
    scanned = compute(
        *[dask.delayed(scan_with_hash)(path) for path in paths], label="scan", quiet=quiet
    )
    plan = make_plan([scan for scan, _ in scanned], inventory, rate, block_samples)
    fail_if_strict(strict, plan.problems)
    inputs = [entry for _, entry in scanned]
    fingerprint = ingest_fingerprint(inputs, inventories, rate, block_samples)
    existing = finished_store_attrs(url, storage_options)
    if existing and existing.get(ATTR_FINGERPRINT) == fingerprint:
        coverage = np.asarray(storage.open_group(url, storage_options)[COVERAGE_VAR][:])
        return IngestReport(plan, coverage, tuple(existing["ingest_problems"]), up_to_date=True)
    create_store(plan, url, storage_options)
    tasks = block_tasks(plan, resample=rate is not None)
    results = compute(
        *[dask.delayed(ingest_block)(task, url, storage_options) for task in tasks],
        label="ingest waveforms",
        quiet=quiet,
    )
    coverage = np.array([fraction for fraction, _ in results], dtype=np.float32)
    coverage = coverage.reshape(len(plan.stations), plan.n_blocks)
    decode_problems = sorted({p for _, found in results for p in found})
    problems = (*plan.problems, *decode_problems)
    fail_if_strict(strict, decode_problems)
    write_coverage(plan, coverage, url, storage_options)
    attrs = store_attrs(plan, problems, inputs, rate is not None)
    attrs[ATTR_FINGERPRINT] = fingerprint
    storage.finish_group(url, attrs, storage_options)
    return IngestReport(plan, coverage, problems)
