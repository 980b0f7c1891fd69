"""The inventory's part of a waveform plan, computed where the StationXML is parsed: a worker.

An obspy Inventory takes ~70 KB a station in memory (8 MB of StationXML for 1,100 stations
parsed to a 118 MiB peak), so the client never parses one, nor, on a cluster, reads one: a
worker reads the files' bytes (`InventorySource`, `located_source`) and keeps them for the
tasks to come; one task parses them, checks every scanned trace against them and returns
what the plan needs (`InventoryFindings`: accepted traces, problem lines, station metadata); with
response removal each station's block tasks get its part of the inventory from a task of their
own (`station_inventory`). A worker cuts a source's StationXML into its stations once (the
last two sources kept) and each task parses only the stations it checks (`parsed_stations`,
`stationxml_subsets`: 70 of 1,112 stations in 0.14 s, not all of them in 1.7 s and 118 MiB);
a file in another format is parsed whole, once (`parsed`).
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from seisctf.catalogs.seed_ids import channel_id, split_station
from seisctf.cluster import active_client, compute, kept, shared
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.inventory_index import InventoryIndex
from seisctf.formats.obspy_archive.response import response_problem
from seisctf.formats.obspy_archive.stationxml_subsets import WILDCARDS, Pieces
from seisctf.formats.obspy_archive.waveform_plan import (
    check_against_inventory,
    station_metadata,
    unknown_station,
)
from seisctf.formats.shared.input_listing import is_url, read_input
from seisctf.location import StoreLocation

if TYPE_CHECKING:
    from seisctf.formats.obspy_archive.scan_table import ScanTable

# What an inventory file that cannot be read gets (the same for every way it fails).
EXPECTED = (
    "expected StationXML (or another obspy inventory format) with the coordinates of every "
    "station and channel"
)


@dataclass(frozen=True, eq=False)  # bytes: compared by identity; `sha256` is the key
class InventorySource:
    """The StationXML files of an ingest: their paths (for messages), bytes and sha256 (hex)."""

    paths: tuple[str, ...]
    contents: tuple[bytes, ...]
    sha256: tuple[str, ...]


def read_source(inventories: Sequence[StoreLocation]) -> InventorySource:
    """The bytes and sha256 of each inventory file (local path or fsspec URL), unparsed."""
    contents = []
    for inventory in inventories:
        try:
            contents.append(read_input(inventory))
        except OSError as error:
            raise InvalidInput(
                inventory.url, f"cannot read the inventory ({error}); {EXPECTED}"
            ) from None
    return InventorySource(
        tuple(inventory.url for inventory in inventories),
        tuple(contents),
        tuple(hashlib.sha256(content).hexdigest() for content in contents),
    )


def located_source(inventories: Sequence[StoreLocation]) -> tuple[Any, list[str]]:
    """(the inventory files as an argument of tasks to come, their sha256 (hex)). On a cluster
    a worker reads them and keeps them (the client holds a key: StationXML of 1,100 stations is
    8 MB, and sending it from here pickled a second copy); a file no worker can read is read
    here and sent once (`cluster.shared`). Without one, the `InventorySource` itself. Local
    paths are made absolute first (workers need not share this process's working folder)."""
    import dask

    inventories = [
        inventory if is_url(inventory.url) else inventory.with_url(os.path.abspath(inventory.url))
        for inventory in inventories
    ]
    if active_client() is None:
        source = read_source(inventories)
        return source, list(source.sha256)
    try:
        source = kept([dask.delayed(read_source)(inventories)], quiet=True)[0]
        return source, list(compute(dask.delayed(_sha256)(source), quiet=True)[0])
    except InvalidInput:  # not where the workers are: from here
        read_here = read_source(inventories)
        return shared(read_here), list(read_here.sha256)


def _sha256(source: InventorySource) -> tuple[str, ...]:
    return source.sha256


_PARSED: OrderedDict[tuple[str, ...], Any] = OrderedDict()
_PIECES: OrderedDict[tuple[str, ...], Any] = OrderedDict()
_PARSED_LOCK = threading.Lock()
PARSED_KEPT = 2


def _once(cache: OrderedDict, key: tuple[str, ...], make: Callable[[], Any]) -> Any:
    """`cache[key]`, made by `make()` the first time (the last PARSED_KEPT kept)."""
    with _PARSED_LOCK:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = make()
    with _PARSED_LOCK:
        cache[key] = value
        while len(cache) > PARSED_KEPT:
            cache.popitem(last=False)
    return value


def _read(paths: Sequence[str], contents: Sequence[bytes]) -> Any:
    """The files' contents as one obspy Inventory; a file obspy cannot read is bad input
    naming it."""
    import obspy

    inventory = obspy.Inventory(networks=[])
    for path, content in zip(paths, contents, strict=True):
        try:
            inventory += obspy.read_inventory(io.BytesIO(content))
        except Exception as error:  # noqa: BLE001
            raise InvalidInput(path, f"cannot read the inventory ({error}); {EXPECTED}") from None
    return inventory


def parsed(source: InventorySource) -> Any:
    """The source's files as one obspy Inventory, parsed once per process (the last
    PARSED_KEPT sources kept); a file obspy cannot read is bad input naming it."""
    return _once(_PARSED, source.sha256, lambda: _read(source.paths, source.contents))


def parsed_stations(source: InventorySource, stations: Iterable[str]) -> Any:
    """The source's inventory as every query of the station ids `stations` sees it: each file
    cut to their station codes and parsed (`stationxml_subsets`: a partition's few stations,
    not the network's), its pieces kept once per process; the whole (`parsed`) if a code is a
    pattern or a file is not FDSN StationXML."""
    codes = {split_station(station)[1].upper() for station in stations}
    if any(WILDCARDS & set(code) for code in codes):
        return parsed(source)
    pieces = _once(_PIECES, source.sha256, lambda: [Pieces.of(c) for c in source.contents])
    if any(piece is None for piece in pieces):
        return parsed(source)
    return _read(source.paths, [piece.subset(codes) for piece in pieces])


def station_inventory(source: InventorySource, station: str) -> Any:
    """The inventory's networks/stations/channels of one station id (what its tasks need)."""
    network, code, location = split_station(station)
    inventory = parsed_stations(source, [station])
    return inventory.select(network=network, station=code, location=location)


@dataclass(frozen=True, eq=False)
class InventoryFindings:
    """What the inventory says of a scan: `rows` (int64 rows of the scan's trace columns that
    agree with it), `problems` (a line per trace that contradicts it, in trace order),
    `unknown` ({station it does not know: the start of its problem line, `unknown_station`}),
    `metadata` (per station of the accepted traces: coordinates and per-channel metadata,
    `station_metadata`, over every channel code of the scan) and `known` (the stations it
    holds)."""

    rows: np.ndarray
    problems: tuple[str, ...]
    unknown: dict[str, str]
    metadata: dict[str, dict[str, Any]]
    known: frozenset[str]


def findings(
    scans: ScanTable, source: InventorySource, require_response: bool
) -> InventoryFindings:
    """Check each trace of `scans` against the inventory (`check_against_inventory`; with
    `require_response`, also that it has a usable response: `response_problem`)."""
    from obspy import UTCDateTime

    inventory = parsed_stations(source, scans.station_ids)
    index = InventoryIndex(inventory)
    accepted: list[int] = []
    problems: list[str] = []
    unknown: set[str] = set()
    for row, header in enumerate(scans.headers()):
        contradiction = check_against_inventory(header, index)
        if contradiction is None and require_response:
            seed_id = channel_id(header.station, header.channel)
            when = UTCDateTime(ns=header.start_ns)
            contradiction = response_problem(header.path, seed_id, when, inventory)
        if contradiction:
            problems.append(contradiction)
            continue
        if not index.knows(header.station):
            unknown.add(header.station)
        accepted.append(row)
    rows = np.array(accepted, dtype=np.int64)
    channels = tuple(sorted(scans.channel_codes))
    stations = sorted({scans.station_ids[s] for s in np.unique(scans.traces["station"][rows])})
    return InventoryFindings(
        rows=rows,
        problems=tuple(problems),
        unknown={station: unknown_station(station, inventory) for station in sorted(unknown)},
        metadata={s: station_metadata(s, channels, index) for s in stations},
        known=frozenset(s for s in stations if index.knows(s)),
    )
