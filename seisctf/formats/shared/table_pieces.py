"""An inputs table (`input_manifest`, `das_inputs`) written by tasks where its partitions are.

Each partition's rows are made into a `Piece` where the partition is kept: its columns, file
indices counted from its own first file. The table's arrays are then made at their whole
lengths (chunks of `input_manifest.ROWS_PER_CHUNK` rows), and each chunk of each dimension is
written by one task from the slices of the pieces it spans, each slice cut where its piece is.
No task holds more than one chunk of rows beyond the partition it cuts, and no worker the whole
table (before, one task joined every partition's scan and wrote the table: at 10^7 files, GBs
on one worker). The group's attr `files` is written last, after every chunk: a table without
it is unfinished and not used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from seisctf.cluster import compute, kept
from seisctf.formats.shared.input_manifest import (
    ATTR_FILES,
    FILE,
    ROWS_PER_CHUNK,
    create_column,
    write_column,
)
from seisctf.formats.shared.partition_tasks import Each
from seisctf.formats.shared.resumable import open_store
from seisctf.location import StoreLocation


@dataclass(frozen=True, eq=False)
class Piece:
    """A partition's rows of a table: {column: (dimension, 1-d values)}; the columns named in
    `file_columns` (of `write_pieces`) hold file indices from the partition's first file."""

    columns: dict[str, tuple[str, np.ndarray]]

    def shape(self) -> tuple[dict[str, int], dict[str, tuple[str, str]]]:
        """({dimension: rows}, {column: (dimension, dtype string)})."""
        rows: dict[str, int] = {}
        for dim, values in self.columns.values():
            if rows.setdefault(dim, len(values)) != len(values):
                raise ValueError(f"columns of dimension {dim} of different lengths")
        rows.setdefault(FILE, 0)
        return rows, {name: (dim, _dtype(values)) for name, (dim, values) in self.columns.items()}


def _dtype(values: np.ndarray) -> str:
    return "U" if values.dtype.kind in "OTU" else values.dtype.str


def _shape(piece: Piece) -> tuple[dict[str, int], dict[str, tuple[str, str]]]:
    return piece.shape()


def write_pieces(
    store: StoreLocation,
    name: str,
    pieces: Sequence[Any],
    each: Each,
    file_columns: Mapping[str, str],
    whole: Mapping[str, tuple[str, np.ndarray]] | None = None,
    into_existing: bool = False,
    marked: bool = True,
) -> None:
    """Write (replacing any) the table group `name` of the store at `store` from `pieces`
    (`Piece`s, or handles of them kept where they were made; in file order), then its attr
    `files`. `file_columns`: {dimension: its column of file indices} (offset here by each
    piece's first file); `whole`: columns written as given ({column: (dimension, values)}: the
    small lookup lists every piece shares). `into_existing`: the pieces' columns are arrays
    of the finished table `name` already, of the same lengths: only their chunks are
    written. `marked=False`: no attr `files` (a group other than a table of files)."""
    shapes = each(_shape, pieces)
    schema = {column: spec for _, columns in shapes for column, spec in columns.items()}
    dims = sorted({dim for dim, _ in schema.values()})
    counts = {dim: [rows.get(dim, 0) for rows, _ in shapes] for dim in dims}
    starts = {dim: np.cumsum([0, *counts[dim]]).tolist() for dim in dims}
    totals = {dim: starts[dim][-1] for dim in dims}
    file_starts = starts.get(FILE, [0] * (len(pieces) + 1))
    rows = ROWS_PER_CHUNK  # (here, for the tasks: the client's setting)
    if into_existing:
        lengths = {column: totals[dim] for column, (dim, _) in schema.items()}
        rows = compute(dask.delayed(_chunk_rows)(store, name, lengths), quiet=True)[0]
    else:
        created = dask.delayed(_create)(store, name, schema, totals, dict(whole or {}), rows)
        compute(created, quiet=True)
    writes = []
    for dim in dims:
        for first in range(0, totals[dim], rows):
            stop = min(first + rows, totals[dim])
            cuts = [
                dask.delayed(_cut)(
                    piece,
                    dim,
                    max(first - start, 0),
                    min(stop, end) - start,
                    file_columns.get(dim),
                    file_start,
                )  # fmt: skip
                for piece, start, end, file_start in zip(
                    pieces, starts[dim], starts[dim][1:], file_starts, strict=False
                )
                if start < stop and end > first
            ]
            writes.append(dask.delayed(_write_chunk)(store, name, first, *cuts))
    done = kept(writes, "", True)
    files = None if into_existing or not marked else totals.get(FILE, 0)
    compute(dask.delayed(_finish)(store, name, files, *done), quiet=True)


def _create(
    store: StoreLocation,
    name: str,
    schema: dict[str, tuple[str, str]],
    totals: dict[str, int],
    whole: dict[str, tuple[str, np.ndarray]],
    rows: int,
) -> None:
    group = open_store(store, mode="r+")
    if name in group:
        del group[name]
    table = group.create_group(name)
    for column, (dim, dtype) in schema.items():
        create_column(table, column, dim, totals[dim], np.dtype(dtype), rows)
    for column, (dim, values) in whole.items():
        write_column(table, column, dim, values, rows)


def _cut(
    piece: Piece, dim: str, low: int, high: int, file_column: str | None, file_start: int
) -> dict[str, np.ndarray]:
    """The piece's rows low..high-1 of `dim`'s columns, file indices made the table's."""
    found = {}
    for column, (column_dim, values) in piece.columns.items():
        if column_dim == dim:
            cut = values[low:high]
            found[column] = cut + file_start if column == file_column else cut
    return found


def _write_chunk(store: StoreLocation, name: str, first: int, *cuts: dict[str, np.ndarray]) -> int:
    """Write the rows from `first` of the columns `cuts` hold (one chunk's, in order)."""
    table = open_store(store, mode="r+")[name]
    for column in cuts[0]:
        values = np.concatenate([cut[column] for cut in cuts])
        table[column][first : first + len(values)] = values
    return first


def _chunk_rows(store: StoreLocation, name: str, lengths: dict[str, int]) -> int:
    """The chunk length of the columns `lengths` names ({column: rows}) of the finished table
    `name`, checked: one for all of them, and each column of its length."""
    table = open_store(store)[name]
    arrays = {column: table[column] for column in lengths}
    chunks = {int(array.chunks[0]) for array in arrays.values()}
    same = all(arrays[column].shape[0] == rows for column, rows in lengths.items())
    if ATTR_FILES not in table.attrs or not same or len(chunks) != 1:
        raise ValueError(f"table {name}: its columns {list(lengths)} are not these pieces'")
    return chunks.pop()


def _finish(store: StoreLocation, name: str, files: int | None, *_written: int) -> None:
    if files is not None:
        open_store(store, mode="r+")[name].attrs[ATTR_FILES] = files
