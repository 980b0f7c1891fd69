"""An obspy Inventory indexed by station, for the per-trace checks of a large archive's plan.

`Inventory.select` walks every network, station and channel (fnmatch on each code), so checking
each of N traces against an inventory of S stations that way costs N x S (10^5 day files of
1,100 stations: hours). `InventoryIndex` answers the same questions, with the same result:

- `station(id)`: `inventory.select(network=, station=, location=)` of a station id, computed once
  per station on an inventory cut to the networks and stations whose codes match (codes without
  fnmatch wildcards match by upper-case equality, as obspy's select compares them);
- `channels_at(id, channel, when)`: `station(id).select(channel=, time=when)`, kept per span of
  time between the epoch bounds of that station's networks, stations and channels (inside a span,
  or at one bound, every `is_active(when)` is the same, compared as obspy compares times: the
  nanoseconds rounded to the coarser precision of the two, here in integers, not UTCDateTimes);
- `consistent`: the (station, channel, span, sampling rate) of traces found consistent with it
  (`waveform_plan.check_against_inventory`), so that a day file's check is a few look-ups.
"""

from __future__ import annotations

import copy
from typing import Any

from seisctf.catalogs.seed_ids import split_station

_WILDCARDS = frozenset("*?[")
DEFAULT_PRECISION = 6  # UTCDateTime's, digits after the second


class InventoryIndex:
    """Station-level selections of one inventory, each computed once (module doc)."""

    def __init__(self, inventory: Any):
        self.inventory = inventory
        # (NET, STA) upper-case -> [(network index, station)], in inventory order; and the
        # networks without stations by code (obspy's select keeps those when the code matches).
        self._stations: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        self._empty: dict[str, list[int]] = {}
        for index, network in enumerate(inventory.networks):
            if not network.stations:
                self._empty.setdefault(network.code.upper(), []).append(index)
            for station in network.stations:
                key = (network.code.upper(), station.code.upper())
                self._stations.setdefault(key, []).append((index, station))
        self._selected: dict[str, Any] = {}
        self._bounds: dict[str, list[tuple[int, int]]] = {}
        self._at: dict[tuple, Any] = {}
        self.consistent: set[tuple] = set()

    def station(self, station: str) -> Any:
        """`inventory.select(network, station, location)` of a station id (`seed_ids`)."""
        if station not in self._selected:
            network, code, location = split_station(station)
            source = self.inventory
            if not _WILDCARDS & set(network + code):
                source = self._cut(network.upper(), code.upper())
            self._selected[station] = source.select(
                network=network, station=code, location=location
            )
        return self._selected[station]

    def knows(self, station: str) -> bool:
        """Whether the inventory holds the station at its location code (`knows_station`)."""
        return bool(self.station(station).networks)

    def channels_at(self, station: str, channel: str, when: Any) -> Any:
        """`station(station).select(channel=channel, time=when)` (`when`: UTCDateTime)."""
        key = (station, channel, self.span(station, when.ns, when.precision))
        if key not in self._at:
            self._at[key] = self.station(station).select(channel=channel, time=when)
        return self._at[key]

    def span(self, station: str, when_ns: int, precision: int = DEFAULT_PRECISION) -> tuple:
        """Where the time `when_ns` (ns since the epoch, of a UTCDateTime of `precision`
        digits) is among the station's epoch bounds: (before, after) each, as UTCDateTime's
        `<` and `>` say."""
        bounds = self._bounds.get(station)
        if bounds is None:
            bounds = self._bounds[station] = _epoch_bounds(self.station(station))
        spans = []
        for bound_ns, bound_precision in bounds:
            digits = min(precision, bound_precision) - 9
            lhs, rhs = round(when_ns, digits), round(bound_ns, digits)
            spans.append((lhs < rhs, lhs > rhs))
        return tuple(spans)

    def _cut(self, network: str, code: str) -> Any:
        """The inventory with only the networks coded `network` (upper-case) that hold a station
        coded `code` or no station, each with only those stations; order kept."""
        kept: dict[int, list[Any]] = {index: [] for index in self._empty.get(network, ())}
        for index, station in self._stations.get((network, code), ()):
            kept.setdefault(index, []).append(station)
        networks = []
        for index in sorted(kept):
            cut = copy.copy(self.inventory.networks[index])
            cut.stations = kept[index]
            networks.append(cut)
        inventory = copy.copy(self.inventory)
        inventory.networks = networks
        return inventory


def _epoch_bounds(inventory: Any) -> list[tuple[int, int]]:
    """(ns, precision) of every start and end date of the inventory's networks, stations and
    channels."""
    found = []
    for network in inventory:
        found += [network.start_date, network.end_date]
        for station in network:
            found += [station.start_date, station.end_date]
            for channel in station:
                found += [channel.start_date, channel.end_date]
    return [(bound.ns, bound.precision) for bound in found if bound is not None]
