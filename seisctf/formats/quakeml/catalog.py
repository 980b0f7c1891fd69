"""An event catalogue with picks (QuakeML or any obspy-readable format) as tables, and the event
and noise windows it defines on a continuous waveform store.

Tables (pandas, one row per event / per pick):

- events: `source_id` (the event's resource id), `source_origin_time_ns`, `source_latitude_deg`,
  `source_longitude_deg`, `source_depth_km`, `source_magnitude`, `source_magnitude_type`
  (preferred origin and magnitude, else the first);
- picks: `source_id`, `station` (the store's station id, `seed_ids`), `phase` (`P` or `S`),
  `time_ns`, `evaluation_mode`. A pick's phase is its `phase_hint`, else the phase of the
  arrival of the event's origin that refers to it; only phases starting with a capital `P` or
  `S` (`P`, `Pg`, `Pn`, `S`, `Sg`, …: first arrivals of each kind) count; for every (event,
  station, phase) the earliest pick is kept.

Windows (`plan_windows`), on the store's sample grid (sample i at start + i / rate), all of
`window_samples` samples:

- an event window per (event, picked station): it starts `pre_arrival_s` before the station's
  first pick (P, else S) at the nearest grid sample; arrival samples are fractional,
  `(pick time − window start) × rate`, NaN when the arrival lies outside the window;
- noise windows from pick-free periods: the station's record is tiled by windows from the
  store's first sample; a tile is free when it starts at least one window length after, and ends
  at least one window length before, every pick at that station and every origin time of the
  catalogue, and (when the store has `coverage`) lies in blocks without gaps in the station's
  own channels. Of a station's free tiles, `noise_windows` evenly spaced ones are kept (no
  randomness); fewer free tiles than asked is a problem saying how many candidates were
  rejected near picks and how many for gaps (`shortfall`). Tiles are counted and found a
  bounded span of the record at a time (`noise_tiles`).

A window that does not lie wholly inside the record is not cut and is reported as a problem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from seisctf.catalogs.noise_tiles import TileCounts, TileGrid, count_tiles, free_starts
from seisctf.catalogs.seed_ids import normalised, split_station, station_id
from seisctf.errors import InvalidInput

NS_PER_S = 1_000_000_000
EARTHQUAKE = "earthquake_local"
NOISE = "noise"
EVENT_COLUMNS = (
    "source_id",
    "source_origin_time_ns",
    "source_latitude_deg",
    "source_longitude_deg",
    "source_depth_km",
    "source_magnitude",
    "source_magnitude_type",
)
PICK_COLUMNS = ("source_id", "network", "station_code", "location", "phase", "time_ns", "mode")
# Component letters in the order windows keep them: vertical first, then north/1, east/2.
COMPONENT_PREFERENCE = "ZN1E2"


def read_catalog(path: str):
    """The obspy Catalog in `path` (QuakeML or any format obspy reads); bad input names it."""
    import obspy

    try:
        return obspy.read_events(str(path))
    except FileNotFoundError:
        raise InvalidInput(str(path), "catalogue file not found") from None
    except Exception as error:  # obspy raises many kinds for unreadable files
        raise InvalidInput(
            str(path), f"not an event catalogue obspy can read ({type(error).__name__}: {error})"
        ) from None


def _float(value) -> float:
    return math.nan if value is None else float(value)


def _phase(hint: str | None) -> str | None:
    if hint and hint[0] in "PS":
        return hint[0]
    return None


def catalog_tables(catalog, what: str = "catalogue") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(events, picks) of an obspy Catalog; an event without an origin is bad input."""
    events, picks = [], []
    for event in catalog:
        source_id = str(event.resource_id)
        origin = event.preferred_origin() or (event.origins[0] if event.origins else None)
        if origin is None:
            raise InvalidInput(what, f"event {source_id} has no origin")
        magnitude = event.preferred_magnitude() or (
            event.magnitudes[0] if event.magnitudes else None
        )
        events.append(
            (
                source_id,
                origin.time.ns,
                _float(origin.latitude),
                _float(origin.longitude),
                _float(origin.depth) / 1000.0,
                _float(magnitude.mag) if magnitude else math.nan,
                (magnitude.magnitude_type or "") if magnitude else "",
            )
        )
        arrival_phase = {
            str(arrival.pick_id): arrival.phase for arrival in origin.arrivals if arrival.pick_id
        }
        for pick in event.picks:
            phase = _phase(pick.phase_hint) or _phase(arrival_phase.get(str(pick.resource_id)))
            if phase is None:
                continue
            wid = pick.waveform_id
            picks.append(
                (
                    source_id,
                    wid.network_code or "",
                    wid.station_code or "",
                    wid.location_code or "",
                    phase,
                    pick.time.ns,
                    pick.evaluation_mode or "",
                )
            )
    events_table = pd.DataFrame(events, columns=list(EVENT_COLUMNS))
    if events_table["source_id"].duplicated().any():
        duplicated = events_table.loc[events_table["source_id"].duplicated(), "source_id"]
        raise InvalidInput(what, f"event ids repeat: {', '.join(duplicated.unique()[:5])}")
    return events_table, pd.DataFrame(picks, columns=list(PICK_COLUMNS))


def match_stations(picks: pd.DataFrame, stations: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """Give each pick the store's station id (`seed_ids`: `NET.STA`, `NET.STA.LOC`; a store's
    older `NET.STA.` matches too); a pick without a location code matches the station's only
    location. Returns the matched picks (column `station`: the id as the store spells it,
    earliest per event, station and phase) and a problem per unmatched station."""
    known = {normalised(station): station for station in stations}
    by_code: dict[str, list[str]] = {}
    for station in stations:
        network, code, _ = split_station(station)
        by_code.setdefault(station_id(network, code), []).append(station)
    ids: list[str | None] = []
    problems: list[str] = []
    for network, code, location in picks[["network", "station_code", "location"]].itertuples(
        index=False
    ):
        exact = station_id(network, code, location)
        candidates = by_code.get(station_id(network, code), [])
        if exact in known:
            ids.append(known[exact])
        elif not location and len(candidates) == 1:
            ids.append(candidates[0])
        else:
            ids.append(None)
            problem = f"picks at {exact}: station not in the waveform store"
            if problem not in problems:
                problems.append(problem)
    # pandas-stubs leave None (a missing value) out of what a column is made of; pandas takes it.
    matched = picks.assign(station=ids).dropna(subset=["station"])  # type: ignore[arg-type]
    matched = matched.sort_values(["source_id", "station", "phase", "time_ns"], kind="stable")
    matched = matched.drop_duplicates(["source_id", "station", "phase"], keep="first")
    return matched.reset_index(drop=True), problems


@dataclass(frozen=True)
class StoreGrid:
    """What window planning needs of a continuous store: its grid and per-station gaps."""

    stations: tuple[str, ...]
    channels: tuple[str, ...]
    start_ns: int
    sampling_rate: float
    n_time: int
    # coverage(station, block) (any 2-D array whose slices read as numpy: a zarr array is read
    # a slice at a time) and its block length, or None when the store has none.
    coverage: Any = None
    block_samples: int | None = None
    # Per station: the channel codes it has (the store's `station_channels`), else all.
    station_channels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Said after a shortfall of noise windows: why the coverage may not be the station's.
    coverage_note: str = ""

    def sample_of(self, time_ns: Any) -> np.ndarray:
        """Fractional grid position of times (ns): a number, an array or a Series of them."""
        return (np.asarray(time_ns, dtype=np.int64) - self.start_ns) * (
            self.sampling_rate / NS_PER_S
        )

    def time_ns_of(self, index: int) -> int:
        return self.start_ns + round(index * NS_PER_S / self.sampling_rate)


def component_order(channels: Sequence[str]) -> str:
    """The components (last letters of channel codes) in window order: Z, N/1, E/2, others."""
    letters = sorted({code[-1] for code in channels})
    rank = {letter: i for i, letter in enumerate(COMPONENT_PREFERENCE)}
    return "".join(sorted(letters, key=lambda c: (rank.get(c, len(rank)), c)))


def station_channel_rows(grid: StoreGrid, components: str) -> dict[str, tuple[str, list[int]]]:
    """Per station: (band code, store channel index per component, -1 where missing). The band
    (the first two letters, e.g. `HH`) is the one with the most components at the station
    (ties: the alphabetically first)."""
    index = {code: i for i, code in enumerate(grid.channels)}
    result = {}
    for station in grid.stations:
        codes = grid.station_channels.get(station) or grid.channels
        bands: dict[str, dict[str, str]] = {}
        for code in sorted(codes):
            bands.setdefault(code[:-1], {}).setdefault(code[-1], code)
        if not bands:
            result[station] = ("", [-1] * len(components))
            continue
        band = min(bands, key=lambda b: (-len(bands[b]), b))
        rows = [index.get(bands[band].get(c, ""), -1) for c in components]
        result[station] = (band, rows)
    return result


@dataclass(frozen=True)
class WindowPlan:
    """Windows to cut, one row each (sorted by station, then start), and the problems found.
    Columns: station, start_index, category, source_id, p_sample, s_sample, p_status, s_status."""

    windows: pd.DataFrame
    window_samples: int
    problems: tuple[str, ...]


def _inside(grid: StoreGrid, start: int, window_samples: int) -> bool:
    return start >= 0 and start + window_samples <= grid.n_time


def event_windows(
    picks: pd.DataFrame, grid: StoreGrid, window_samples: int, pre_arrival_s: float
) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    pre_samples = pre_arrival_s * grid.sampling_rate
    for (source_id, station), group in picks.groupby(["source_id", "station"], sort=True):
        by_phase = {row.phase: row for row in group.itertuples(index=False)}
        first = by_phase.get("P") or by_phase["S"]  # every pick is a P or an S
        start = math.floor(float(grid.sample_of(first.time_ns)) - pre_samples + 0.5)
        if not _inside(grid, start, window_samples):
            problems.append(
                f"event {source_id} at {station}: window from sample {start} is outside the "
                f"record (0 … {grid.n_time})"
            )
            continue
        arrival = {}
        for phase in "PS":
            pick = by_phase.get(phase)
            sample = math.nan if pick is None else float(grid.sample_of(pick.time_ns)) - start
            if not 0 <= sample < window_samples:
                sample = math.nan
            arrival[phase] = (sample, "" if pick is None or math.isnan(sample) else pick.mode)
        rows.append(
            {
                "station": station,
                "start_index": start,
                "category": EARTHQUAKE,
                "source_id": source_id,
                "p_sample": arrival["P"][0],
                "s_sample": arrival["S"][0],
                "p_status": arrival["P"][1],
                "s_status": arrival["S"][1],
            }
        )
    return rows, problems


def shortfall(
    station: str, counts: TileCounts, asked: int, grid: StoreGrid, window_samples: int
) -> str:
    """The problem line when the station has fewer than `asked` free tiles, saying why."""
    found = f"{station}: {counts.n_free} pick-free window(s), {asked} asked for"
    if counts.candidates == 0:
        return (
            f"{found}: the record ({grid.n_time} samples) is shorter than one window "
            f"({window_samples} samples)"
        )
    gaps = ""
    if grid.coverage is not None and grid.block_samples:
        gaps = (
            f", {counts.with_gaps} more in time blocks with gaps in the station's channels "
            f"(coverage < 1 in blocks of {grid.block_samples} samples)"
            + (grid.coverage_note if counts.with_gaps else "")
        )
    return (
        f"{found}: of {counts.candidates} candidate window(s) (the record tiled from its "
        f"first sample), {counts.near_picks} lie within one window length of a pick or an "
        f"origin time{gaps}"
    )


def noise_windows(
    picks: pd.DataFrame,
    origin_ns: np.ndarray,
    grid: StoreGrid,
    window_samples: int,
    per_station: int,
) -> tuple[list[dict], list[str]]:
    """Per station, `per_station` evenly spaced free tiles (`noise_tiles`: counted, then found,
    a bounded span of the record at a time)."""
    rows: list[dict] = []
    problems: list[str] = []
    if per_station <= 0:
        return rows, problems
    tiles = TileGrid(grid.n_time, window_samples, grid.coverage, grid.block_samples)
    origins = np.sort(grid.sample_of(origin_ns))
    busy = [
        (np.sort(grid.sample_of(picks.loc[picks["station"] == station, "time_ns"])), origins)
        for station in grid.stations
    ]
    for station_index, counts in enumerate(count_tiles(tiles, busy)):
        station = grid.stations[station_index]
        if counts.n_free < per_station:
            problems.append(shortfall(station, counts, per_station, grid, window_samples))
        if counts.n_free == 0:
            continue
        chosen = np.unique(np.round(np.linspace(0, counts.n_free - 1, per_station)).astype(int))
        for start in free_starts(tiles, station_index, busy[station_index], counts, chosen):
            rows.append(
                {
                    "station": station,
                    "start_index": int(start),
                    "category": NOISE,
                    "source_id": "",
                    "p_sample": math.nan,
                    "s_sample": math.nan,
                    "p_status": "",
                    "s_status": "",
                }
            )
    return rows, problems


def check_window(window_s: float, pre_arrival_s: float) -> None:
    if not window_s > 0:
        raise InvalidInput("window_s", f"must be a positive number of seconds, got {window_s}")
    if not 0 <= pre_arrival_s < window_s:
        raise InvalidInput("pre_arrival_s", f"{pre_arrival_s} s must be in [0, {window_s}) s")


def plan_windows(
    events: pd.DataFrame,
    picks: pd.DataFrame,
    grid: StoreGrid,
    *,
    window_s: float,
    pre_arrival_s: float,
    noise_per_station: int,
) -> WindowPlan:
    """Event windows at every picked station of every event, and noise windows (module doc)."""
    check_window(window_s, pre_arrival_s)
    window_samples = round(window_s * grid.sampling_rate)
    if window_samples < 1:
        raise InvalidInput("window_s", f"{window_s} s is less than one sample")
    matched, problems = match_stations(picks, grid.stations)
    unknown = set(matched["source_id"]) - set(events["source_id"])
    if unknown:
        raise InvalidInput("catalogue", f"picks of unknown events {sorted(unknown)[:5]}")
    quake_rows, quake_problems = event_windows(matched, grid, window_samples, pre_arrival_s)
    noise_rows, noise_problems = noise_windows(
        matched,
        events["source_origin_time_ns"].to_numpy(),
        grid,
        window_samples,
        noise_per_station,
    )
    windows = pd.DataFrame(
        quake_rows + noise_rows,
        columns=[
            "station",
            "start_index",
            "category",
            "source_id",
            "p_sample",
            "s_sample",
            "p_status",
            "s_status",
        ],
    )
    windows = windows.sort_values(["station", "start_index", "source_id"], kind="stable")
    return WindowPlan(
        windows.reset_index(drop=True),
        window_samples,
        tuple(problems + quake_problems + noise_problems),
    )
