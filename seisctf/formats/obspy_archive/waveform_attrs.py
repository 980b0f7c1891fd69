"""The attrs of a continuous waveform store and of its `data` variable.

`data` carries CF's `units` (UDUNITS spelling) of the stored samples: `count` (digitizer counts)
without response removal, or the corrected unit after it (`m s-1` for VEL of a seismometer,
`Pa` for an infrasound channel, whose response obspy applies as it is). Where the store's
channels differ in unit (response removal of a seismometer and a microphone), no single unit
is true of the variable: `units` is left out and its `comment` says where each channel's unit is
(`channel_metadata[station][channel]["units"]`, StationXML's spelling).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dask
import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.formats.obspy_archive import resampling
from seisctf.formats.obspy_archive.overlap_conflicts import files_not_stored
from seisctf.formats.obspy_archive.response import corrected_units
from seisctf.formats.obspy_archive.scan_table import ScanTable
from seisctf.formats.obspy_archive.station_pieces import (
    StationPiece,
    metadata_at,
    piece_bounds,
    pieces_of,
)
from seisctf.formats.obspy_archive.waveform_plan import WaveformPlan
from seisctf.formats.shared.resumable import iso_time

if TYPE_CHECKING:
    from seisctf.formats.obspy_archive.placed_traces import PlacedTraces

MERGE_RULE = (
    "obspy Stream.merge(method=1, interpolation_samples=0) on grid-aligned traces, in order of "
    "start, end, file path and record: in an overlap the trace that ends later wins from its "
    "start; a trace that ends no later than the data before it (contained, or a second copy "
    "of the same span: the file whose path sorts first wins) only fills that data's gaps, and "
    "is dropped whole if any sample differs"
)
RESAMPLING = resampling.METHOD
COUNTS = "count"  # UDUNITS' dimensionless count: samples as the digitizer recorded them
# StationXML unit names (upper case) -> UDUNITS spellings, which CF's `units` attr asks for.
CF_UNITS = {
    "COUNTS": COUNTS,
    "COUNT": COUNTS,
    "M": "m",
    "M/S": "m s-1",
    "M/S**2": "m s-2",
    "PA": "Pa",
    "V": "V",
}
MIXED_UNITS = "the channels' units differ: see the attr channel_metadata[station][channel].units"


def _json_float(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def json_clean(value: Any) -> Any:
    """NaN -> None, recursively, so attrs are strict JSON."""
    if isinstance(value, dict):
        return {key: json_clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_clean(item) for item in value]
    if isinstance(value, float):
        return _json_float(value)
    return value


def channel_metadata(
    station_metadata: dict[str, Any], response_removed: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """One station's `channel_metadata` entry: per channel the inventory's metadata (of the
    plan's `station_metadata[station]`) with `units` of the stored samples: the sensitivity's
    output unit (counts) or, with response removal, the corrected unit."""
    found: dict[str, dict[str, Any]] = {}
    for channel, entry in station_metadata.get("channels", {}).items():
        units = entry.get("output_units")
        if response_removed is not None:
            units = corrected_units(response_removed["output"], entry.get("input_units"))
        found[channel] = {**entry, "units": units}
    return found


def stored_units(
    pieces: Sequence[StationPiece],
    stations: Sequence[str],
    own: Sequence[tuple[str, ...]],
    response_removed: dict[str, Any] | None,
) -> set[str | None]:
    """The units (CF spelling) of the stored samples of `stations`' `own` channels, from their
    metadata in `pieces` (`station_pieces`; a task where the pieces are kept)."""
    units: set[str | None] = set()
    for meta, channels in zip(metadata_at(pieces, stations), own, strict=True):
        metadata = channel_metadata(meta, response_removed)
        for channel in channels:
            given = metadata.get(channel, {}).get("units")
            if given is None and response_removed is None:
                given = COUNTS  # no inventory: the files' samples, digitizer counts
            units.add(CF_UNITS.get(str(given).upper(), given))
    return units


def data_attrs(plan: WaveformPlan, response_removed: dict[str, Any] | None) -> dict[str, str]:
    """CF attrs of `data`: `units` of the stored samples (module doc), or a `comment` where
    the channels' units differ (`stored_units` of each piece of the stations' metadata, a task
    where it is kept)."""
    own = plan.station_channels()
    tasks = []
    for first, stop in piece_bounds(len(plan.stations)):
        stations = plan.stations[first:stop]
        tasks.append(dask.delayed(stored_units)(
            pieces_of(plan.station_metadata, first, stop), stations,
            [own[station] for station in stations], response_removed,
        ))  # fmt: skip
    units: set[str | None] = set().union(*compute(*tasks, quiet=True))
    if len(units) == 1:
        (unit,) = units
        if unit is not None:
            return {"units": unit}
    return {"comment": MIXED_UNITS}


def samples_stored(
    scans: ScanTable,
    placed: PlacedTraces,
    stations: Sequence[str],
    lost: set[tuple],
    not_stored_before: set[str],
) -> np.ndarray:
    """Per file of `scans` (one partition; bool): whether the store holds samples of it (the
    `inputs` table's `samples_stored`, `input_manifest`). False for unreadable or rejected files
    (no trace of them is `placed`), files whose every trace lost overlaps with other values
    (`lost`: ((station index of `stations`, block), path, channel)), and those an appended-to
    store said so of (`not_stored_before`: paths)."""
    kept = np.zeros(len(scans.paths), dtype=bool)
    kept[placed.files()] = True
    not_stored = {path for path, stored in zip(scans.paths, kept.tolist(), strict=True)
                  if not stored}  # fmt: skip
    mine = {item for item in lost if item[1] in set(scans.paths)} if lost else set()
    if mine:  # (a set of every trace's key only then: an archive has 10^6 traces)
        lost_keys = {(path, stations[index[0]], channel) for index, path, channel in mine}
        traces = ((p.header.path, p.header.station, p.header.channel) for p in placed)
        not_stored |= files_not_stored(traces, lost_keys)
    not_stored |= not_stored_before
    return np.array([path not in not_stored for path in scans.paths], dtype=bool)


def store_attrs(
    plan: WaveformPlan,
    problems: Mapping[str, Any],
    resample: bool,
    response_removed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The store's root attrs (`problems`: the attrs of its problem lines,
    `problem_lines.problem_attrs`); its inputs are a table beside the data (`input_manifest`),
    and its per-station attrs arrays of the group `station_attrs` (`station_attrs`), not
    attrs."""
    return json_clean(
        {
            cv.ATTR_START_TIME: iso_time(plan.start_ns),
            "start_time_ns": plan.start_ns,
            cv.ATTR_SAMPLING_RATE: plan.sampling_rate,
            "block_samples": plan.block_samples,
            **problems,
            "merge_rule": MERGE_RULE,
            "resampling": RESAMPLING if resample else None,
            "response_removed": response_removed,
        }
    )
