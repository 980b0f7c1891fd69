"""A waveform store's inputs table (`input_manifest`) written where the scan's partitions are
(`table_pieces`): each partition's rows made into a piece where it is kept, its trace codes
renumbered into the table's station and channel lists (the partitions' lists merged in order,
as `ScanTable.joined` merges them) and each station's header position kept at its first file
only (as `scan_table.first_of_each` keeps it over the whole scan)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import dask
import numpy as np

from seisctf.cluster import compute
from seisctf.formats.obspy_archive.placed_traces import PlacedTraces
from seisctf.formats.obspy_archive.scan_table import ScanTable
from seisctf.formats.obspy_archive.waveform_attrs import samples_stored
from seisctf.formats.shared import input_manifest, table_pieces
from seisctf.formats.shared.input_manifest import FILE, InputStats
from seisctf.formats.shared.partition_tasks import Each
from seisctf.formats.shared.resumable import open_store
from seisctf.formats.shared.table_pieces import Piece
from seisctf.location import StoreLocation

# Columns of the table's lookup lists, written whole (not per piece).
LOOKUPS = ("station_ids", "channel_codes")
FILE_COLUMNS = {input_manifest.TRACE: "trace_file", input_manifest.PROBLEM: "problem_file",
                input_manifest.POSITION: "position_file"}  # fmt: skip


def write_table(
    store: StoreLocation,
    name: str,
    parts: Sequence[Any],
    stats: Sequence[Any],
    each: Each,
    placed: Sequence[Any] | None = None,
    stored_args: tuple[Sequence[str], set] | None = None,
    not_stored: Sequence[Any] | None = None,
    stored: Sequence[Any] | None = None,
) -> None:
    """Write the inputs table group `name` of the store at `store` from the scan's `parts`
    (`ScanTable`s, kept) and their `stats` (`InputStats`: one a partition, or one of every
    file), with `samples_stored` from each partition's `placed` traces, `stored_args`
    (stations, lost) and the paths an appended-to store holds no sample of (`not_stored`, a set
    a partition; `waveform_attrs.samples_stored`), or as given (`stored`: a bool array a
    partition); all true without either. The attr `inputs` of an older store goes when the
    table is the one it uses."""
    compute(dask.delayed(_forget_listed_inputs)(store, name), quiet=True)
    summaries = each(_summary, parts)
    stations = tuple(dict.fromkeys(s for ids, _, _, _ in summaries for s in ids))
    channels = tuple(dict.fromkeys(c for _, codes, _, _ in summaries for c in codes))
    seen: set[str] = set()
    dropped, file_starts = [], np.cumsum([0] + [files for _, _, _, files in summaries]).tolist()
    for _, _, keys, _ in summaries:
        dropped.append(frozenset(key for key in keys if key in seen))
        seen.update(keys)
    if len(stats) != len(parts):  # one for every file: each partition cuts its own
        stats = [stats[0]] * len(parts)
    n = len(parts)
    pieces = each(
        _Piece(stations, channels, stored_args),
        parts,
        stats,
        file_starts[:-1],
        placed if placed is not None else [None] * n,
        not_stored if not_stored is not None else [None] * n,
        stored if stored is not None else [None] * n,
        dropped,
        keep=True,
    )
    whole = {
        "station_ids": ("station_id", np.asarray(stations, dtype=input_manifest.TEXT)),
        "channel_codes": ("channel_code", np.asarray(channels, dtype=input_manifest.TEXT)),
    }
    table_pieces.write_pieces(store, name, pieces, each, FILE_COLUMNS, whole)


def _forget_listed_inputs(store: StoreLocation, name: str) -> None:
    """Remove the attr listing the inputs of an older store if `name` is its table (an
    append's table goes beside the one in use: the attr goes at `input_manifest.drop_table`)."""
    group = open_store(store, mode="r+")
    if input_manifest.OLD_ATTR in group.attrs and name == input_manifest.table_name(group):
        del group.attrs[input_manifest.OLD_ATTR]


def _position_key(position: tuple) -> str:
    station, _path, *where = position
    return repr((station, *where))


def _summary(part: ScanTable) -> tuple[tuple[str, ...], tuple[str, ...], list[str], int]:
    """(station ids, channel codes, header position keys, file count) of a partition."""
    keys = [_position_key(p) for p in part.header_positions]
    return tuple(part.station_ids), tuple(part.channel_codes), keys, len(part.paths)


def write_samples_stored(
    store: StoreLocation,
    name: str,
    parts: Sequence[Any],
    placed: Sequence[Any],
    stored_args: tuple[Sequence[str], set],
    each: Each,
) -> None:
    """Rewrite the column `samples_stored` alone of the finished table group `name` (written by
    `write_table` from the same `parts`), from each partition's `placed` traces and
    `stored_args` (stations, lost): what a fresh ingest's finish changes in the table it wrote
    when it made the store."""
    pieces = each(_StoredPiece(stored_args), parts, placed, keep=True)
    table_pieces.write_pieces(store, name, pieces, each, {}, into_existing=True)


def _stored(
    stored_args: tuple[Sequence[str], set] | None,
    part: ScanTable,
    placed: PlacedTraces | None,
    not_stored: set[str] | None,
) -> np.ndarray:
    """(file,) bool: `waveform_attrs.samples_stored` of the partition; all true without
    `stored_args` or `placed`."""
    if stored_args is None or placed is None:
        return np.ones(len(part.paths), dtype=bool)
    stations, lost = stored_args
    return samples_stored(part, placed, stations, lost, not_stored or set())


@dataclasses.dataclass(frozen=True)
class _StoredPiece:
    stored_args: tuple[Sequence[str], set]

    def __call__(self, part: ScanTable, placed: PlacedTraces) -> Piece:
        return Piece({"samples_stored": (FILE, _stored(self.stored_args, part, placed, None))})


@dataclasses.dataclass(frozen=True)
class _Piece:
    """Maker of a partition's piece of the table (module doc)."""

    stations: tuple[str, ...]
    channels: tuple[str, ...]
    stored_args: tuple[Sequence[str], set] | None

    def __call__(
        self,
        part: ScanTable,
        stats: InputStats,
        file_start: int,
        placed: PlacedTraces | None,
        not_stored: set[str] | None,
        stored: np.ndarray | None,
        dropped: frozenset[str],
    ) -> Piece:
        n = len(part.paths)
        if len(stats.paths) != n or (n and stats.paths[0] != part.paths[0]):
            stats = _cut_stats(stats, file_start, file_start + n)
        if stats.paths != part.paths:
            raise ValueError("stats and scans of different files")
        if stored is None:
            stored = _stored(self.stored_args, part, placed, not_stored)
        if dropped:
            positions = tuple(p for p in part.header_positions if _position_key(p) not in dropped)
            part = dataclasses.replace(part, header_positions=positions)
        made = input_manifest.table_columns(part, stats.modified, stored)
        columns = {name: (dim, make()) for name, (dim, make) in made.items() if name not in LOOKUPS}
        recoded = (
            ("trace_station", part.station_ids, self.stations),
            ("trace_channel", part.channel_codes, self.channels),
        )
        for column, names, joined in recoded:
            index = {name: code for code, name in enumerate(joined)}
            lookup = np.array([index[name] for name in names], dtype=np.int32)
            dim, codes = columns[column]
            columns[column] = (dim, lookup[codes].astype(codes.dtype) if len(codes) else codes)
        return Piece(columns)


def _cut_stats(stats: InputStats, start: int, stop: int) -> InputStats:
    return InputStats(stats.paths[start:stop], stats.sizes[start:stop], stats.modified[start:stop])
