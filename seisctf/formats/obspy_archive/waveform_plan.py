"""The plan of a waveform ingest: which files hold which traces, and the store they fill.

`waveform_files.scan_file` reads each file's headers (the scan, `scan_table`); the plan
(`partition_plan.make_plan`, from the pieces here) checks them against the StationXML
inventories and lays out the store's time grid:

- grid start: the earliest accepted trace start; every trace is placed at the nearest grid sample
  (its offset, less than half a sample, is recorded per station, never interpolated away);
- a trace at another rate (or whose rate drifts by half a sample or more over its length) needs
  `--rate`, and is then resampled to the grid's rate in its task;
- time blocks of `block_samples` samples (default 2**18: 1 station × all channels × 2**18 float32
  = 3 MiB per chunk for three channels, 43.7 min at 100 Hz); chunks depend on the data only.

All times are integer nanoseconds (`UTCDateTime.ns`), so grid arithmetic is exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seisctf.catalogs.seed_ids import channel_id, split_station
from seisctf.formats.obspy_archive.inventory_index import InventoryIndex
from seisctf.formats.obspy_archive.inventory_text import inventory_holds
from seisctf.formats.obspy_archive.placed_traces import PlacedTrace
from seisctf.formats.obspy_archive.resampling import MAX_RATE_FACTOR, rate_ratio, resampled_length
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.shared.block_grid import BlockGrid
from seisctf.formats.shared.problem_parts import ProblemLines

DEFAULT_BLOCK_SAMPLES = 2**18
# Stations of a piece of the plan's station metadata (kept on a worker; `partition_plan`) and of
# a chunk of the store's group `station_attrs` (`station_attrs.ROWS_PER_CHUNK`).
STATIONS_PER_PIECE = 2**10
NS_PER_S = 1_000_000_000
# Relative difference of two sampling rates taken as equal (beyond it the drift test decides).
RATE_RTOL = 1e-9


@dataclass(frozen=True)
class WaveformPlan(BlockGrid):
    """The store's layout (time blocks of `block_samples`: `BlockGrid`), the problems found (in
    order, kept with the partitions that found them: `problem_parts.ProblemLines`),
    and per station its coordinates (`coordinates`: (station, 3) float64, latitude, longitude
    (degrees), elevation (m), NaN where unknown), its own channel codes and its traces' offsets
    from their grid samples. The stations' metadata (`station_metadata`) is in pieces of
    STATIONS_PER_PIECE stations, in station order: each a `StationPiece` here, or on a cluster
    a handle of one kept on a worker (the client holds no station's metadata). The traces stay
    with their partitions (`partition_plan`)."""

    stations: tuple[str, ...]
    channels: tuple[str, ...]
    sampling_rate: float
    start_ns: int
    n_time: int
    block_samples: int
    problems: ProblemLines
    station_metadata: tuple[Any, ...] = ()
    coordinates: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)), compare=False)
    own_channels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    offsets: dict[str, list[float]] = field(default_factory=dict)

    def station_channels(self) -> dict[str, tuple[str, ...]]:
        """{station: its own channel codes, sorted}: those any of its traces has (a store of
        mixed channel sets holds every code for every station, NaN where a station has none)."""
        return {station: self.own_channels.get(station, ()) for station in self.stations}

    def blocks_to_rewrite(
        self,
        new_spans: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
        counted: dict[str, list[str]] | None,
    ) -> dict[int, list[tuple[int, int]]]:
        """{station index: [(first, last block)]}: the blocks an append must (re)write: those
        the new files' traces touch (`new_spans`: per partition, `trace_blocks` of its new
        traces), and every block of a station whose own channels are not those its stored
        coverage counts (`counted`: its attr `station_channels`; None, every channel of the
        store, for a store ingested before that attr): its coverage changes everywhere."""
        spans: dict[int, list[tuple[int, int]]] = {}
        for stations, firsts, lasts in new_spans:
            for station, first, last in zip(
                stations.tolist(), firsts.tolist(), lasts.tolist(), strict=True
            ):
                if last >= first:
                    spans.setdefault(station, []).append((first, last))
        for index, (station, own) in enumerate(self.station_channels().items()):
            before = self.channels if counted is None else tuple(counted.get(station, ()))
            if before != own:
                spans[index] = [(0, self.n_blocks - 1)]
        return spans


def unknown_station(station: str, inventory: Any) -> str:
    """The start of the problem line of a station the inventory does not know at its location
    code: what the inventory has for the station code instead, if anything (the line goes on
    with `coordinates_source`)."""
    network, code, location = split_station(station)
    holds = inventory_holds(inventory, network, code)
    if not holds:
        return f"{station}: unknown station (not in the inventory); "
    missing = f"{network}.{code}"
    if inventory.select(network=network, station=code).networks:
        missing += f" at location code '{location}'"
    return f"{station}: unknown station: the inventory has no {missing} (it has {holds}); "


def coordinates_source(header_path: str | None) -> str:
    """Where a station's coordinates come from: the file whose SAC header gives them (the
    first, by path), else nowhere (NaN)."""
    source = f"from the SAC header of {header_path}" if header_path else "NaN"
    return f"coordinates are {source}"


def check_against_inventory(header: TraceHeader, index: InventoryIndex) -> str | None:
    """A problem text if the inventory knows the station but contradicts the header (channel
    absent at that time, other sampling rate); None if consistent or the station is unknown."""
    if not index.knows(header.station):
        return None
    span = index.span(header.station, header.start_ns)
    consistent = (header.station, header.channel, span, header.sampling_rate)
    if consistent in index.consistent:
        return None
    from obspy import UTCDateTime

    network, code, _ = split_station(header.station)
    when = UTCDateTime(ns=header.start_ns)
    channels = _channels(index.channels_at(header.station, header.channel, when))
    if not channels:
        holds = inventory_holds(index.inventory, network, code, header.channel)
        return (
            f"{header.path}: {channel_id(header.station, header.channel)} at {when} is not in the "
            f"inventory (channel or epoch contradicts it; it has {holds}); trace not ingested"
        )
    for channel in channels:
        if channel.sample_rate and not _same_rate(channel.sample_rate, header.sampling_rate):
            return (
                f"{header.path}: {channel_id(header.station, header.channel)} sampled at "
                f"{header.sampling_rate} Hz, the inventory says {channel.sample_rate} Hz; "
                "trace not ingested"
            )
    index.consistent.add(consistent)
    return None


def _channels(inventory: Any) -> list[Any]:
    return [ch for net in inventory for sta in net for ch in sta]


def _same_rate(a: float, b: float) -> bool:
    return abs(a - b) <= RATE_RTOL * max(abs(a), abs(b))


def _float_or_nan(value: Any) -> float:
    return float(value) if value is not None else math.nan


def station_metadata(
    station: str, channels: Sequence[str], index: InventoryIndex
) -> dict[str, Any]:
    """Coordinates (degrees, m) and per-channel orientation (degrees) and sensitivity of a
    station from the inventory (its first epoch holding each channel); NaN/absent if unknown."""
    found = _channels(index.station(station))
    first = found[0] if found else None
    meta: dict[str, Any] = {
        "latitude": _float_or_nan(first.latitude) if first else math.nan,
        "longitude": _float_or_nan(first.longitude) if first else math.nan,
        "elevation": _float_or_nan(first.elevation) if first else math.nan,
        "channels": {},
    }
    for chan in channels:
        match = [c for c in found if c.code == chan]
        if not match:
            continue
        channel = match[0]
        entry: dict[str, Any] = {
            "azimuth": _float_or_nan(channel.azimuth),
            "dip": _float_or_nan(channel.dip),
            "sample_rate": _float_or_nan(channel.sample_rate),
        }
        sensitivity = getattr(channel.response, "instrument_sensitivity", None)
        if sensitivity is not None:
            entry["sensitivity"] = _float_or_nan(sensitivity.value)
            entry["sensitivity_frequency"] = _float_or_nan(sensitivity.frequency)
            entry["input_units"] = sensitivity.input_units
            entry["output_units"] = sensitivity.output_units
        meta["channels"][chan] = entry
    return meta


def resampled_npts(header: TraceHeader, target: float) -> int:
    """Samples of the trace resampled to `target` Hz (`resampling.resampled_length` with its
    `rate_ratio`); its own count if it has no ratio (the plan does not ingest it)."""
    ratio = rate_ratio(header.npts, header.sampling_rate, target)
    return resampled_length(header.npts, *ratio) if ratio else header.npts


def no_ratio_problem(header: TraceHeader, rate: float) -> str | None:
    """A problem text if the trace needs resampling to `rate` Hz and has no polyphase ratio
    (`resampling.rate_ratio`), else None."""
    from obspy import UTCDateTime

    if not needs_resampling(header, rate) or rate_ratio(header.npts, header.sampling_rate, rate):
        return None
    return (
        f"{header.path}: {channel_id(header.station, header.channel)} at "
        f"{UTCDateTime(ns=header.start_ns)}: "
        f"cannot resample {header.sampling_rate} Hz to {rate} Hz (no ratio up/down with up, down "
        f"<= {MAX_RATE_FACTOR} keeps its {header.npts} samples within half a sample of the "
        "grid); trace not ingested"
    )


def place_trace(header: TraceHeader, start_ns: int, rate: float, resample: bool) -> PlacedTrace:
    """Put a trace on the grid (start `start_ns`, `rate` Hz): nearest grid sample, offset."""
    position = (header.start_ns - start_ns) * rate / NS_PER_S
    first = math.floor(position + 0.5)
    offset_s = (position - first) / rate
    n_samples = resampled_npts(header, rate) if resample else header.npts
    return PlacedTrace(header, first, n_samples, offset_s, resample)


def drift_samples(header: TraceHeader, rate: float) -> float:
    """How far (in grid samples) the trace's last sample lands from its grid sample when the
    trace is laid on a `rate` Hz grid sample by sample."""
    return abs((header.npts - 1) * (rate / header.sampling_rate - 1.0))


def needs_resampling(header: TraceHeader, rate: float) -> bool:
    return not _same_rate(header.sampling_rate, rate) and drift_samples(header, rate) >= 0.5
