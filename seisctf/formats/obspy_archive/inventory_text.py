"""What a StationXML inventory holds for a station, as text for the ingest's messages: when a
trace's station, location code, channel or time is not in the inventory, the message says what
the inventory has instead (`NET.STA.LOC.CHA from START to END`, …)."""

from __future__ import annotations

from typing import Any

from seisctf.catalogs.seed_ids import seed_id

# At most this many channel epochs are listed (then how many there are in all).
LISTED = 5


def _when(time: Any) -> str:
    return "open" if time is None else time.strftime("%Y-%m-%dT%H:%M:%S")


def inventory_holds(inventory: Any, network: str, code: str, channel: str | None = None) -> str:
    """The channel epochs the inventory has for station `code` (its network `network` first,
    then any other), only those of `channel` if it has any: "IM.I59H1..BDF from
    2020-05-06T00:00:00 to open, …"; a station without channels as "NET.STA (no channels) from
    … to …"; "" if the inventory has no station `code`."""
    entries: list[tuple[bool, str]] = []
    for net in inventory.select(station=code):
        for station in net:
            epoch = f"from {_when(station.start_date)} to {_when(station.end_date)}"
            if not station.channels:
                entries.append((net.code != network, f"{net.code}.{station.code} (no channels) "
                                                     f"{epoch}"))  # fmt: skip
            chosen = [ch for ch in station if ch.code == channel] or list(station)
            entries += [
                (net.code != network, seed_id(net.code, station.code, ch.location_code, ch.code)
                                      + f" from {_when(ch.start_date)} to {_when(ch.end_date)}")
                for ch in chosen
            ]  # fmt: skip
    listed = list(dict.fromkeys(text for _, text in sorted(entries)))
    more = f", … ({len(listed)} in all)" if len(listed) > LISTED else ""
    return ", ".join(listed[:LISTED]) + more
