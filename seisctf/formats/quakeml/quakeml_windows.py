"""An event catalogue with picks + a continuous waveform store (or a raw archive) -> an
event-window store (`seisctf ingest quakeml`, recipe source `quakeml`).

Steps: read the catalogue with obspy (`catalog`: events and picks tables); open
the continuous store, or first ingest the raw archive into a scratch store with
`obspy_archive.waveforms.ingest_waveforms`; plan the windows on the store's grid (event
windows at every picked station, noise windows from pick-free periods); cut them with Dask, one
task per run of whole shards of the output (`seisctf.catalogs.event_windows`' task size), reading
the store's `data` array directly (a window's values are the store's samples, never resampled or
filtered); write with the event-window writer (`write_event_windows`: store, Parquet catalogue,
the problem lines beyond the root attrs' (`problem_lines`, by a task), attrs and completion
marker last).

The event-window store (docs/contract.md, "Event-window store"): `waveforms(trace, channel, sample)`
float32, `channel` = component letters in `component_order` (`Z`, `N`, `E`; from the channel
codes' last letters, of the station's band with the most components: `trace_channel`, e.g. `HH`;
a component the station lacks is NaN); one row per window, sorted by station then start. Per
trace, SeisBench's column names: `trace_name` (`STATION_START`, STATION the store's station id;
unique), `trace_start_time`, `trace_sampling_rate_hz`, `trace_npts`, `trace_category`
(`earthquake_local` or `noise`),
`trace_p_arrival_sample`, `trace_s_arrival_sample` (fractional samples from the window's first
sample, NaN without a pick inside the window), `trace_p_status`, `trace_s_status` (the pick's
evaluation mode), `trace_channel`, `station_network_code`, `station_code`,
`station_location_code`, `station_latitude_deg`, `station_longitude_deg`, `station_elevation_m`,
`source_id` (empty for noise), `source_origin_time`, `source_latitude_deg`,
`source_longitude_deg`, `source_depth_km`, `source_magnitude`, `source_magnitude_type`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs.event_windows import (
    catalog_url,
    choose_layout,
    input_entry,
    task_traces,
    write_event_windows,
)
from seisctf.catalogs.event_windows import event_window_dataset as windows_dataset
from seisctf.catalogs.seed_ids import split_station
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.quakeml import catalog as catalogs
from seisctf.formats.shared.problem_lines import problem_attrs, read_problems, write_problems
from seisctf.formats.shared.resumable import (
    ATTR_FINGERPRINT,
    fingerprint_of,
    iso_time,
    open_store,
)
from seisctf.formats.shared.source import InputPaths, Inventories, opened_source
from seisctf.location import StoreLocation
from seisctf.options import Location, option
from seisctf.plugins.context import BuildContext
from seisctf.registry import INGESTS

DEFAULT_WINDOW_S = 60.0
DEFAULT_PRE_ARRIVAL_S = 10.0
DEFAULT_NOISE_WINDOWS = 1
# Windows of one station whose union spans at most this many samples are read in one slice.
MAX_READ_SPAN = 2**20
# Said after a shortfall of noise windows cut from a store without `station_channels`.
OLD_COVERAGE = (
    "; this store was ingested before `station_channels`: its coverage counts every channel "
    "of the store, so a station without all of them never reaches 1 (ingest the archive "
    "again into a new store)"
)
WINDOW_RULE = (
    "event windows start pre_arrival_s before the station's first pick (P, else S) at the "
    "nearest grid sample; noise windows are tiles of the record from its first sample, one "
    "window length clear of every pick at the station and every origin time, in gap-free blocks"
)


@dataclass(frozen=True)
class QuakemlReport:
    """What the ingest wrote: number of earthquake and noise windows, the problems, and the
    URL of the Parquet catalogue (inside the store)."""

    n_earthquake: int
    n_noise: int
    problems: tuple[str, ...]
    catalog: str


def traces_per_task(n_channel: int, window_samples: int) -> int:
    """Windows cut per Dask task: the event-window writer's task size (whole shards), so its
    rechunk is a no-op."""
    return task_traces(choose_layout(n_channel, window_samples), n_channel, window_samples)


def is_continuous_store(location: StoreLocation) -> bool:
    """True when `location` is a zarr group holding a continuous waveform store."""
    import zarr

    try:
        group = storage.open_group(location)
    except InvalidInput:
        return False
    except (zarr.errors.ContainsArrayError, ValueError, OSError):
        return False
    return cv.WAVEFORM_VAR in group


def ingest_archive(
    archive: Sequence[str], scratch: StoreLocation, inventories: Sequence[str], quiet: bool
) -> list[str]:
    """Ingest raw waveform files into the continuous store `scratch`; returns its problems
    (every one: the report holds the first `cv.ATTR_PROBLEM_LINES`, the store all)."""
    report = ingest_waveforms(archive, scratch, inventories=inventories, quiet=quiet)
    if report.n_problems > len(report.problems):
        return read_problems(open_store(scratch))
    return list(report.problems)


def store_grid(dataset, source: StoreLocation) -> catalogs.StoreGrid:
    """The grid of a continuous store (opened with `storage.open_dataset`). Its coverage stays
    in the store, a zarr array whose slices planning reads as it needs them (the whole array is
    4 bytes a station-block: 660 MB for 552 stations × 25 years at 100 Hz)."""
    url = source.url
    cv.validate_waveform_store(dataset, url)
    attrs = dataset.attrs
    start_ns = attrs.get("start_time_ns")
    if start_ns is None:
        from obspy import UTCDateTime

        start_ns = UTCDateTime(attrs[cv.ATTR_START_TIME]).ns
    coverage, block_samples = None, attrs.get("block_samples")
    if cv.COVERAGE_VAR in dataset and block_samples:
        coverage = storage.open_group(source)[cv.COVERAGE_VAR]
    stations = tuple(str(s) for s in dataset[cv.STATION].values)
    for station in stations:
        split_station(station, url)
    own = attrs.get("station_channels")
    if own is None:  # a store ingested before `station_channels`: the inventory's, else all
        own = {s: list(c) for s, c in (attrs.get("channel_metadata") or {}).items()}
    return catalogs.StoreGrid(
        stations=stations,
        channels=tuple(str(c) for c in dataset[cv.CHANNEL].values),
        start_ns=int(start_ns),
        sampling_rate=cv.sampling_rate_hz(attrs, url),
        n_time=int(dataset.sizes[cv.TIME]),
        coverage=coverage,
        block_samples=int(block_samples) if block_samples else None,
        station_channels={
            station: tuple(channels) for station, channels in own.items() if channels
        },
        coverage_note="" if "station_channels" in attrs else OLD_COVERAGE,
    )


def cut_windows(
    source: StoreLocation,
    station_rows: np.ndarray,
    starts: np.ndarray,
    channel_rows: np.ndarray,
    window_samples: int,
) -> np.ndarray:
    """Windows (trace, component, sample) float32 from the store's `data`: trace i is
    data[station_rows[i], channel_rows[i, c], starts[i] : starts[i] + window_samples], NaN for
    channel row −1. Consecutive windows of one station are read in one slice."""
    data = storage.group_array(storage.open_group(source), cv.WAVEFORM_VAR, source.url)
    n_trace, n_component = channel_rows.shape
    out = np.full((n_trace, n_component, window_samples), np.nan, dtype=np.float32)
    first = 0
    while first < n_trace:
        last = first + 1
        while (
            last < n_trace
            and station_rows[last] == station_rows[first]
            and starts[last] + window_samples - starts[first] <= MAX_READ_SPAN
        ):
            last += 1
        span_start = int(starts[first:last].min())
        span = np.asarray(
            data[
                int(station_rows[first]),
                :,
                span_start : int(starts[first:last].max()) + window_samples,
            ]
        )
        for i in range(first, last):
            offset = int(starts[i]) - span_start
            for c, row in enumerate(channel_rows[i]):
                if row >= 0:
                    out[i, c] = span[row, offset : offset + window_samples]
        first = last
    return out


def windows_array(
    source: StoreLocation,
    station_rows: np.ndarray,
    starts: np.ndarray,
    channel_rows: np.ndarray,
    window_samples: int,
):
    """The lazy `waveforms` array: one Dask task per trace chunk."""
    import dask
    import dask.array as da

    n_trace, n_component = channel_rows.shape
    chunk = traces_per_task(n_component, window_samples)
    token = dask.base.tokenize(source.url, station_rows, starts, channel_rows, window_samples)
    blocks = []
    for first in range(0, n_trace, chunk):
        part = slice(first, min(first + chunk, n_trace))
        task = dask.delayed(cut_windows, pure=True)(
            source,
            station_rows[part],
            starts[part],
            channel_rows[part],
            window_samples,
            dask_key_name=f"cut-windows-{token}-{first}",
        )
        shape = (part.stop - part.start, n_component, window_samples)
        blocks.append(da.from_delayed(task, shape=shape, dtype=np.float32))
    if not blocks:
        return da.zeros((0, n_component, window_samples), dtype=np.float32)
    return da.concatenate(blocks, axis=0)


def unique_names(names: Sequence[str]) -> list[str]:
    """Names made unique by `_2`, `_3`, … on repeats (coincident windows at one station)."""
    seen: dict[str, int] = {}
    result = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        result.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return result


def trace_metadata(
    windows: pd.DataFrame,
    events: pd.DataFrame,
    grid: catalogs.StoreGrid,
    station_coords: dict[str, np.ndarray],
    bands: dict[str, str],
    window_samples: int,
) -> pd.DataFrame:
    """One row per window under SeisBench's column names (module doc)."""
    station_index = {s: i for i, s in enumerate(grid.stations)}
    rows = windows["station"].map(station_index).to_numpy()
    parts = pd.DataFrame([split_station(s) for s in windows["station"]], columns=[0, 1, 2])
    start_times = [iso_time(grid.time_ns_of(int(i))) for i in windows["start_index"]]
    source = windows[["source_id"]].merge(events, on="source_id", how="left")
    origin = [iso_time(int(t)) if not pd.isna(t) else "" for t in source["source_origin_time_ns"]]
    names = unique_names([f"{s}_{t}" for s, t in zip(windows["station"], start_times, strict=True)])
    n = len(windows)
    return pd.DataFrame(
        {
            cv.TRACE_NAME: names,
            "trace_start_time": start_times,
            "trace_sampling_rate_hz": np.full(n, grid.sampling_rate),
            cv.TRACE_NPTS: np.full(n, window_samples, dtype=np.int64),
            cv.TRACE_CATEGORY: windows["category"].to_numpy(),
            cv.P_ARRIVAL_SAMPLE: windows["p_sample"].to_numpy(np.float64),
            cv.S_ARRIVAL_SAMPLE: windows["s_sample"].to_numpy(np.float64),
            "trace_p_status": windows["p_status"].to_numpy(),
            "trace_s_status": windows["s_status"].to_numpy(),
            "trace_channel": [bands[s] for s in windows["station"]],
            cv.NETWORK_CODE: parts[0].fillna("").to_numpy(),
            cv.STATION_CODE: parts[1].fillna("").to_numpy(),
            "station_location_code": parts[2].fillna("").to_numpy(),
            cv.STATION_LATITUDE: station_coords[cv.LATITUDE][rows],
            cv.STATION_LONGITUDE: station_coords[cv.LONGITUDE][rows],
            "station_elevation_m": station_coords[cv.ELEVATION][rows],
            cv.SOURCE_ID: windows["source_id"].to_numpy(),
            "source_origin_time": origin,
            cv.SOURCE_LATITUDE: source["source_latitude_deg"].to_numpy(np.float64),
            cv.SOURCE_LONGITUDE: source["source_longitude_deg"].to_numpy(np.float64),
            "source_depth_km": source["source_depth_km"].to_numpy(np.float64),
            "source_magnitude": source["source_magnitude"].to_numpy(np.float64),
            "source_magnitude_type": source["source_magnitude_type"].fillna("").to_numpy(),
        }
    )


def event_window_dataset(
    plan: catalogs.WindowPlan,
    events: pd.DataFrame,
    grid: catalogs.StoreGrid,
    continuous,
    source: StoreLocation,
):
    """The event-window store as a lazy Dataset (seisctf.catalogs.event_windows' layout) cut
    from the continuous store at `source`."""
    components = catalogs.component_order(grid.channels)
    channel_map = catalogs.station_channel_rows(grid, components)
    windows = plan.windows
    station_index = {s: i for i, s in enumerate(grid.stations)}
    station_rows = windows["station"].map(station_index).to_numpy(dtype=np.int64)
    starts = windows["start_index"].to_numpy(dtype=np.int64)
    channel_rows = np.array([channel_map[s][1] for s in windows["station"]], dtype=np.int64)
    channel_rows = channel_rows.reshape(len(windows), len(components))
    waveforms = windows_array(source, station_rows, starts, channel_rows, plan.window_samples)
    station_coords = {
        name: np.asarray(continuous[name].values, dtype=np.float64)
        if name in continuous.coords
        else np.full(len(grid.stations), math.nan)
        for name in (cv.LATITUDE, cv.LONGITUDE, cv.ELEVATION)
    }
    bands = {s: band for s, (band, _) in channel_map.items()}
    metadata = trace_metadata(windows, events, grid, station_coords, bands, plan.window_samples)
    return windows_dataset(waveforms, metadata, list(components), grid.sampling_rate)


def ingest_quakeml(
    catalog_path: str,
    archive: Sequence[str],
    store: StoreLocation,
    *,
    window_s: float = DEFAULT_WINDOW_S,
    pre_arrival_s: float = DEFAULT_PRE_ARRIVAL_S,
    noise_windows: int = DEFAULT_NOISE_WINDOWS,
    inventories: Sequence[str] = (),
    scratch: str | None = None,
    quiet: bool = False,
) -> QuakemlReport:
    """Cut the event windows of the catalogue at `catalog_path` from `archive` (a continuous
    waveform store URL, or raw waveform files / folders / globs ingested first into `scratch`,
    default a temporary folder; read with the storage options of `store`) and write the
    event-window store at `store`."""
    if noise_windows < 0:
        raise InvalidInput("noise_windows", f"must be ≥ 0, got {noise_windows}")
    catalogs.check_window(window_s, pre_arrival_s)
    events, picks = catalogs.catalog_tables(catalogs.read_catalog(catalog_path), catalog_path)
    if events.empty:
        raise InvalidInput(catalog_path, "the catalogue holds no event")
    if picks.empty:
        raise InvalidInput(catalog_path, "the catalogue holds no P or S pick")
    with contextlib.ExitStack() as stack:
        if len(archive) == 1 and is_continuous_store(store.with_url(archive[0])):
            source, ingest_problems = store.with_url(archive[0]), []
        else:
            if scratch is None:
                folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="seisctf-"))
                scratch = f"{folder}/continuous.zarr"
            source = store.with_url(scratch)
            ingest_problems = ingest_archive(archive, source, inventories, quiet)
        return cut_and_write(
            catalog_path,
            archive,
            store,
            events,
            picks,
            source,
            ingest_problems,
            window_s=window_s,
            pre_arrival_s=pre_arrival_s,
            noise_windows=noise_windows,
            quiet=quiet,
        )


def cut_and_write(
    catalog_path: str,
    archive: Sequence[str],
    store: StoreLocation,
    events: pd.DataFrame,
    picks: pd.DataFrame,
    source: StoreLocation,
    ingest_problems: Sequence[str],
    *,
    window_s: float,
    pre_arrival_s: float,
    noise_windows: int,
    quiet: bool,
) -> QuakemlReport:
    """Plan, cut and write the windows of the continuous store at `source` into `store`."""
    continuous = storage.open_dataset(source)
    grid = store_grid(continuous, source)
    plan = catalogs.plan_windows(
        events,
        picks,
        grid,
        window_s=window_s,
        pre_arrival_s=pre_arrival_s,
        noise_per_station=noise_windows,
    )
    if plan.windows.empty:
        raise InvalidInput(
            catalog_path,
            "no window could be cut: " + "; ".join(plan.problems[:5] or ("no picked station",)),
        )
    dataset = event_window_dataset(plan, events, grid, continuous, source)
    problems = (*ingest_problems, *plan.problems)
    n_earthquake = int((plan.windows["category"] == catalogs.EARTHQUAKE).sum())
    dataset.attrs.update(
        {
            "source_format": "quakeml",
            "window_s": plan.window_samples / grid.sampling_rate,
            "pre_arrival_s": float(pre_arrival_s),
            "noise_windows_per_station": int(noise_windows),
            "window_rule": WINDOW_RULE,
            "event_catalog": input_entry(catalog_path),
            "waveform_source": {
                "archive": [str(a) for a in archive],
                "store_fingerprint": continuous.attrs.get("ingest_fingerprint"),
                "start_time": continuous.attrs.get(cv.ATTR_START_TIME),
            },
            **problem_attrs(problems),  # every line beyond them in the group `problems`
        }
    )
    every_line = functools.partial(write_problems, problems=problems)  # beyond the attrs'
    write_event_windows(dataset, store, label="ingest quakeml", quiet=quiet,
                        before_finish=every_line)  # fmt: skip
    n_noise = len(plan.windows) - n_earthquake
    return QuakemlReport(n_earthquake, n_noise, problems, catalog_url(store.url))


# --- the recipe source ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class QuakemlOptions:
    """A recipe's options of `quakeml`, passed on to `ingest_quakeml` as given (one left out,
    None here, takes its default there)."""

    catalog: Location = option(help="event catalogue with picks (QuakeML or any obspy format)")
    archive: InputPaths = option(help="a continuous store, or raw waveform files")
    window_s: float = option(None, "window length, s", exclusive_minimum=0)
    pre_arrival_s: float = option(None, "window start before the first arrival, s", minimum=0)
    noise_windows: int = option(None, "noise windows a station", minimum=0)
    inventory: Inventories = option(None)


@INGESTS.register(
    "quakeml",
    options=QuakemlOptions,
    command="quakeml",
    cli=ingest_quakeml,
    help="event catalogue with picks (QuakeML or any obspy format) + continuous store or "
    "raw archive -> event-window store",
    event_windows=True,
)
def quakeml(
    context: BuildContext,
    *,
    catalog: str,
    archive: list[str],
    inventory: Sequence[str] = (),
    **options: Any,
) -> xr.Dataset:
    """`seisctf ingest quakeml` of the event catalogue `catalog` and the waveforms `archive` (a
    continuous store, or raw files ingested first into `context.source_url` + `.archive.zarr`,
    a no-op when they are unchanged) into the event-window store at `context.source_url`,
    opened. The windows are cut again on every build; the store's `ingest_fingerprint` (what the
    outputs' provenance hashes) is that of the catalogue, the waveform store and the options."""
    store = context.location(context.require_source_url())
    report = ingest_quakeml(
        context.resolve(catalog),
        [context.resolve(item) for item in archive],
        store,
        inventories=[context.resolve(item) for item in inventory],
        scratch=store.url.rstrip("/") + ".archive.zarr",
        quiet=context.quiet,
        **options,
    )
    attrs = storage.read_attrs(store)
    recorded = {key: attrs[key] for key in ("event_catalog", "waveform_source", "window_rule")}
    request = {"sha256": attrs["event_catalog"]["sha256"], **recorded, **options}
    fingerprint = fingerprint_of(request)
    storage.finish_group(store, {ATTR_FINGERPRINT: fingerprint})
    return opened_source(context, report.problems)
