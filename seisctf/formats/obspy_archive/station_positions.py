"""Station coordinates of a waveform store: StationXML's, else the files' own headers'.

SAC files carry their station's position (`stla`, `stlo` in degrees, `stel` in m). Without an
inventory that knows the station, the store takes it from the first file (by path) whose
header gives one; with one, the inventory's is used and a header more than `TOLERANCE_M` away
from it (horizontally, or in elevation) is a problem line, as are two headers of one station
that far apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

TOLERANCE_M = 100.0
EARTH_RADIUS_M = 6_371_000.0

# (path, latitude, longitude (degrees), elevation (m, NaN if absent)) of a file's header.
Position = tuple[str, float, float, float]


def distance_m(a: Position, b: Position) -> float:
    """Great-circle distance (m, on a sphere of EARTH_RADIUS_M) between two positions."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a[1], a[2], b[1], b[2]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + (
        math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))


def apart_m(a: Position, b: Position) -> float | None:
    """How far apart (m) two positions are, horizontally or in elevation (an elevation NaN in
    either is not compared), if more than TOLERANCE_M; else None."""
    horizontal = distance_m(a, b)
    vertical = abs(a[3] - b[3]) if not (math.isnan(a[3]) or math.isnan(b[3])) else 0.0
    far = max(horizontal, vertical)
    return far if far > TOLERANCE_M else None


def _text(position: Position) -> str:
    elevation = "" if math.isnan(position[3]) else f", {position[3]:g} m"
    return f"({position[1]:g}°, {position[2]:g}°{elevation})"


def header_metadata(station: str, found: Sequence[Position]) -> tuple[dict[str, Any], list[str]]:
    """The coordinates of a station no inventory knows, from its files' headers `found` (in
    path order): {"latitude", "longitude", "elevation"} of the first (empty without any), and a
    problem line per header that disagrees with it."""
    if not found:
        return {}, []
    first = found[0]
    problems = []
    for other in found[1:]:
        far = apart_m(first, other)
        if far is not None:
            problems.append(
                f"{other[0]}: its SAC header puts {station} at {_text(other)}, {far:.0f} m from "
                f"{_text(first)} of {first[0]}, which the store uses"
            )
    coordinates = {"latitude": first[1], "longitude": first[2], "elevation": first[3]}
    return coordinates, problems


def inventory_disagreements(
    station: str, metadata: dict[str, Any], found: Sequence[Position]
) -> list[str]:
    """A problem line per header position of `found` more than TOLERANCE_M from the
    inventory's coordinates of the station (`metadata`: latitude, longitude, elevation)."""
    known = ("inventory", metadata["latitude"], metadata["longitude"], metadata["elevation"])
    if math.isnan(known[1]) or math.isnan(known[2]):
        return []
    problems = []
    for position in found:
        far = apart_m(known, position)
        if far is not None:
            problems.append(
                f"{position[0]}: its SAC header puts {station} at {_text(position)}, "
                f"{far:.0f} m from the inventory's {_text(known)}; the store uses the "
                "inventory's"
            )
    return problems
