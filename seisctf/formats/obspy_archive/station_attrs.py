"""The per-station attrs of a continuous waveform store (`conventions.STATION_ATTRS`:
`time_offsets_s`, `station_channels`, `channel_metadata`), written as arrays beside the data.

The group `station_attrs` holds one array of each name along `station` (text, in the order of
the store's `station`; chunks of ROWS_PER_CHUNK stations), each element the station's entry as
compact JSON (NaN as null). Each chunk is written by a task of its own from its stations'
entries alone, made there from the plan's pieces of station metadata (kept on the workers:
`station_pieces`), so the client never holds or encodes, and zarr never reads or rewrites, every
station's entries at once: the root `zarr.json` stays the same size however many stations (in
the root attrs they were the part of the client's peak that grew with the stations).
`storage.station_attrs` reads them from a store of either layout; `storage.open_dataset` puts
them back in the opened dataset's attrs, where older stores have them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import compute_in_waves
from seisctf.formats.obspy_archive.station_pieces import StationPiece, metadata_at, pieces_of
from seisctf.formats.obspy_archive.waveform_attrs import channel_metadata, json_clean
from seisctf.formats.obspy_archive.waveform_plan import STATIONS_PER_PIECE, WaveformPlan
from seisctf.formats.shared.input_manifest import TEXT
from seisctf.formats.shared.resumable import open_store
from seisctf.location import StoreLocation

ROWS_PER_CHUNK = STATIONS_PER_PIECE  # stations a chunk, and a write task
WAVE_TASKS = 2  # write tasks in the graph at once


def station_entries(
    stations: tuple[str, ...],
    offsets: list[list[float]],
    own: list[tuple[str, ...]],
    pieces: list[StationPiece],
    response_removed: dict[str, Any] | None,
) -> dict[str, list[Any]]:
    """{name: [entry of each of `stations`]} (`conventions.STATION_ATTRS`): their `offsets`
    (s), `own` channel codes and channel metadata (`waveform_attrs.channel_metadata` of their
    metadata in `pieces`: `station_pieces`)."""
    return {
        "time_offsets_s": offsets,
        "station_channels": [list(codes) for codes in own],
        "channel_metadata": [
            channel_metadata(meta, response_removed) for meta in metadata_at(pieces, stations)
        ],  # fmt: skip
    }


def _pieces(n_station: int) -> Iterator[tuple[int, int]]:
    for first in range(0, n_station, ROWS_PER_CHUNK):
        yield first, min(first + ROWS_PER_CHUNK, n_station)


def write_station_attrs(
    store: StoreLocation, plan: WaveformPlan, response_removed: dict[str, Any] | None
) -> None:
    """The group `station_attrs` of the store at `store` (replacing any), one task a chunk of
    ROWS_PER_CHUNK stations, and none of the per-station root attrs an older store had
    (before `storage.finish_group`, whose consolidated metadata then lists the group)."""
    import dask

    group = open_store(store, mode="r+")
    old = [name for name in cv.STATION_ATTRS if name in group.attrs]
    if old:  # an append onto a store ingested before the group: one rewrite of its attrs
        group.attrs.put({k: v for k, v in group.attrs.asdict().items() if k not in old})
    held = group.create_group(cv.STATION_ATTRS_GROUP, overwrite=True)
    n_station = len(plan.stations)
    for name in cv.STATION_ATTRS:
        held.create_array(
            name,
            shape=(n_station,),
            chunks=(min(ROWS_PER_CHUNK, max(n_station, 1)),),
            dtype=str,
            dimension_names=(cv.STATION,),
        )
    chunks = list(_pieces(n_station))

    def task(index: int) -> Any:  # made when its wave is
        first, stop = chunks[index]
        stations = plan.stations[first:stop]
        entries = dask.delayed(station_entries)(
            stations,
            [plan.offsets.get(station, []) for station in stations],
            [plan.own_channels.get(station, ()) for station in stations],
            pieces_of(plan.station_metadata, first, stop),
            response_removed,
        )
        return dask.delayed(_write)(store, first, entries)

    compute_in_waves(task, len(chunks), quiet=True, wave_tasks=WAVE_TASKS)


def _write(store: StoreLocation, first: int, entries: dict[str, list[Any]]) -> None:
    """Write one chunk's stations' `entries` (`station_entries`) from row `first`, as JSON."""
    held = open_store(store, mode="r+")[cv.STATION_ATTRS_GROUP]
    for name, values in entries.items():
        texts = [json.dumps(json_clean(value), separators=(",", ":")) for value in values]
        held[name][first : first + len(texts)] = np.asarray(texts, dtype=TEXT)
