"""The stations' metadata of a waveform plan, merged where the partitions are: on the workers.

Round 1 of the plan (`partition_plan.accept`) leaves in each partition the inventory's metadata
of its stations, the stations the inventory knows and its files' header positions (`Holding`).
Merge 3 of them (the station metadata, `station_metadata_of`) runs in pieces of
STATIONS_PER_PIECE consecutive stations of the plan, each a task of its own taking the holdings
of the partitions whose stations overlap its own (each partition's summary gives its first and
last station: `Holding.span`). A piece (`StationPiece`: {station: metadata} and the problem
lines of the stations' positions) stays where it was made, kept on a worker on a cluster; the
client receives its coordinates ((station, 3) float64) and problem lines alone, and the store's
`station_attrs` are written from the pieces by tasks (`station_attrs`). The client never holds
every station's metadata: with 1,112 stations it grew ~6 KB a station while it did.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.formats.obspy_archive.scan_table import first_of_each, positions_by_station
from seisctf.formats.obspy_archive.station_positions import (
    Position,
    header_metadata,
    inventory_disagreements,
)
from seisctf.formats.obspy_archive.waveform_plan import STATIONS_PER_PIECE
from seisctf.formats.shared.partition_tasks import Each

# The coordinates of a station's metadata, in the order of `WaveformPlan.coordinates`' columns.
COORDINATE_NAMES = ("latitude", "longitude", "elevation")


@dataclass(frozen=True)
class Holding:
    """What a partition holds of its stations' metadata: the inventory's ({station: metadata},
    `inventory_checks.findings`; empty without one), the stations the inventory knows and its
    files' header positions (`ScanTable.header_positions`)."""

    metadata: dict[str, dict[str, Any]]
    known: frozenset[str]
    header_positions: tuple[tuple[str, str, float, float, float], ...]

    def span(self) -> tuple[str, str] | None:
        """(first, last) station id it holds anything of, None if nothing."""
        names = [*self.metadata, *self.known, *(position[0] for position in self.header_positions)]
        return (min(names), max(names)) if names else None


def holding_of(part: Any) -> Holding:
    """The `Holding` of a partition after round 1 (`partition_plan.Accepted`)."""
    return Holding(part.metadata or {}, part.known, part.scans.header_positions)


def positions_of(parts: Sequence[Any]) -> dict[str, list[Position]]:
    """{station: header positions, each at its first file} of all `parts` (each with
    `header_positions`), in path order."""
    return positions_by_station(first_of_each(
        position for part in parts for position in part.header_positions
    ))  # fmt: skip


def station_metadata_of(
    parts: Sequence[Holding], stations: Sequence[str], channels: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Merge 3's station metadata of `stations` (in their order): the inventory's where it knows
    the station, else the coordinates of its files' headers, and the problem lines of positions
    that disagree. `parts`: the holdings of (at least) every partition holding any of them."""
    positions = positions_of(parts)
    known = frozenset().union(*(part.known for part in parts))
    inventory: dict[str, dict[str, Any]] = {}
    for part in parts:
        for station, meta in part.metadata.items():
            entry = inventory.setdefault(station, {**meta, "channels": {}})
            entry["channels"].update(meta["channels"])
    metadata, problems = {}, []
    for station in stations:
        found = positions.get(station, [])
        held = inventory.get(station)
        of_channels = {} if held is None else {
            **held, "channels": {c: held["channels"][c] for c in channels if c in held["channels"]}
        }  # fmt: skip
        if station in known:
            metadata[station] = of_channels
            problems += inventory_disagreements(station, of_channels, found)
            continue
        coordinates, disagreements = header_metadata(station, found)
        metadata[station] = {**of_channels, **coordinates}
        problems += disagreements
    return metadata, problems


@dataclass(frozen=True)
class StationPiece:
    """The metadata of consecutive stations of a plan ({station: coordinates (degrees, m) and
    per-channel metadata}, `station_metadata_of`, in station order) and the problem lines of
    their positions."""

    metadata: dict[str, dict[str, Any]]
    problems: tuple[str, ...]


def station_piece(
    channels: Sequence[str], stations: Sequence[str], holdings: Sequence[Holding]
) -> StationPiece:
    """The `StationPiece` of `stations` from the `holdings` overlapping them."""
    metadata, problems = station_metadata_of(holdings, stations, channels)
    return StationPiece(metadata, tuple(problems))


def piece_outline(piece: StationPiece) -> tuple[np.ndarray, tuple[str, ...]]:
    """What the client keeps of a piece: its stations' coordinates ((station, 3) float64,
    COORDINATE_NAMES, NaN where unknown) and its problem lines."""
    rows = [[meta.get(name, math.nan) for name in COORDINATE_NAMES]
            for meta in piece.metadata.values()]  # fmt: skip
    return np.array(rows, dtype=np.float64).reshape(-1, 3), piece.problems


def station_pieces(
    each: Each,
    holdings: list[Any],
    spans: Sequence[tuple[str, str] | None],
    stations: Sequence[str],
    channels: Sequence[str],
) -> tuple[list[Any], np.ndarray, list[str]]:
    """Merge 3 in pieces of STATIONS_PER_PIECE of the (sorted) `stations`, run by `each`
    (`partition_tasks`) where the pieces are kept: the pieces (`StationPiece`, or handles), the
    coordinates ((station, 3) float64) and the problem lines, in station order. `holdings`:
    each partition's `Holding` (or a handle), `spans` their `Holding.span`."""
    groups = [tuple(stations[first:stop]) for first, stop in piece_bounds(len(stations))]
    routed = [
        [held for held, span in zip(holdings, spans, strict=True)
         if span is not None and span[0] <= group[-1] and group[0] <= span[1]]
        for group in groups
    ]  # fmt: skip
    pieces = each(functools.partial(station_piece, channels), groups, routed, keep=True)
    outlines = each(piece_outline, pieces)
    coordinates = np.concatenate([rows for rows, _ in outlines] or [np.zeros((0, 3))])
    return pieces, coordinates, [line for _, lines in outlines for line in lines]


def piece_bounds(n_station: int) -> list[tuple[int, int]]:
    """(first, stop) rows of the plan's stations of each piece."""
    return [(first, min(first + STATIONS_PER_PIECE, n_station))
            for first in range(0, n_station, STATIONS_PER_PIECE)]  # fmt: skip


def pieces_of(pieces: Sequence[Any], first: int, stop: int) -> list[Any]:
    """The pieces holding the stations of rows [first, stop) of the plan."""
    return list(pieces[first // STATIONS_PER_PIECE : (stop - 1) // STATIONS_PER_PIECE + 1])


def metadata_at(pieces: Sequence[StationPiece], stations: Sequence[str]) -> list[dict[str, Any]]:
    """The metadata of each of `stations` ({} where none) from the `pieces` holding them."""
    return [next((piece.metadata[station] for piece in pieces if station in piece.metadata), {})
            for station in stations]  # fmt: skip
