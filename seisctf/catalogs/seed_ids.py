"""SEED ids of stations and channels: the one place they are made and read.

- A channel's id is SEED's `NET.STA.LOC.CHA`, exactly as obspy's `Trace.id` gives it: an empty
  location code leaves two dots (`IM.I59H1..BDF`).
- A station's id (a continuous waveform store's `station`, a CTF bundle's `sensor`) is `NET.STA`
  when its location code is empty and `NET.STA.LOC` otherwise; it never ends in a dot.
- Stores written before this rule hold `NET.STA.` for an empty location code; `split_station`
  reads both forms and `normalised` turns the old one into the new, so ids match either way.

SEED codes hold no dots, so an id splits unambiguously. Stores also carry the codes themselves
(`NETWORK`, `STATION_CODE`, `LOCATION` arrays along `station`), so their readers need not split.
"""

from __future__ import annotations

from typing import Any

from seisctf.errors import InvalidInput

# Per-station code arrays of a continuous waveform store (dimension `station`).
NETWORK = "network"
STATION_CODE = "station_code"
LOCATION = "location"
CODE_ARRAYS = (NETWORK, STATION_CODE, LOCATION)


def station_id(network: str, station: str, location: str = "") -> str:
    """`NET.STA` for an empty location code, else `NET.STA.LOC`."""
    return f"{network}.{station}.{location}" if location else f"{network}.{station}"


def stats_station_id(stats: Any) -> str:
    """The station id of an obspy trace's `stats` (network, station, location codes)."""
    return station_id(stats.network, stats.station, stats.location)


def split_station(station: str, what: str | None = None) -> tuple[str, str, str]:
    """(network, station code, location code) of a station id: `NET.STA`, `NET.STA.LOC`, or the
    old `NET.STA.` (empty location code); anything else is bad input of `what` (the store). The
    network code may be empty (`.STA`: SAC files often carry none); the station code may not."""
    parts = str(station).split(".")
    if len(parts) not in (2, 3) or not parts[1]:
        raise InvalidInput(
            what or str(station),
            f"station id {str(station)!r} is not NET.STA or NET.STA.LOC (SEED network, station "
            "and location codes, which hold no dots)",
        )
    return parts[0], parts[1], parts[2] if len(parts) == 3 else ""


def normalised(station: str) -> str:
    """The id of `station` by the current rule (the old `NET.STA.` becomes `NET.STA`)."""
    return station_id(*split_station(station))


def seed_id(network: str, station: str, location: str, channel: str) -> str:
    """SEED's `NET.STA.LOC.CHA` (`IM.I59H1..BDF` for an empty location code), as obspy's
    `Trace.id`."""
    return f"{network}.{station}.{location}.{channel}"


def channel_id(station: str, channel: str) -> str:
    """SEED's `NET.STA.LOC.CHA` of `channel` at the station id `station`."""
    return seed_id(*split_station(station), channel)
