"""Regions of stored 2-D Dask arrays, assembled inside the task that uses them.

A reduction that must see regions whose shape depends on the data's shape only (so results never
depend on how an array happens to be chunked) would, the Dask way, rechunk first: a task and a
copy per step. Instead, `Stored.cover` names the stored blocks that cover a region and where each
piece goes; one task receives those blocks, `assemble`s the region and reduces it at once. Each
stored block is still read by one task, which feeds every region that needs it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import dask.array as da
import numpy as np
from dask._task_spec import Task, TaskRef, parse_input
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

Span = tuple[int, int]  # [start, stop) along one axis
Cover = tuple[list["Piece"], list[Any]]  # pieces, and the block (Delayed, or computed) of each


@dataclass(frozen=True)
class Piece:
    """Part `source` of stored block `block`, going to `target` of the region (both as
    ((row start, row stop), (column start, column stop)))."""

    block: tuple[int, int]
    source: tuple[Span, Span]
    target: tuple[Span, Span]


def _edges(chunks: Sequence[int]) -> list[int]:
    return [0, *accumulate(chunks)]


def pieces(chunks: tuple[Sequence[int], Sequence[int]], rows: Span, cols: Span) -> list[Piece]:
    """The pieces of the stored blocks (of a 2-D array chunked `chunks`) that cover the region
    rows × cols, in block order."""
    found = []
    row_edges, col_edges = _edges(chunks[0]), _edges(chunks[1])
    for i in range(len(chunks[0])):
        r0, r1 = max(rows[0], row_edges[i]), min(rows[1], row_edges[i + 1])
        if r0 >= r1:
            continue
        for j in range(len(chunks[1])):
            c0, c1 = max(cols[0], col_edges[j]), min(cols[1], col_edges[j + 1])
            if c0 >= c1:
                continue
            row0, col0 = row_edges[i], col_edges[j]
            source = ((r0 - row0, r1 - row0), (c0 - col0, c1 - col0))
            target = ((r0 - rows[0], r1 - rows[0]), (c0 - cols[0], c1 - cols[0]))
            found.append(Piece((i, j), source, target))
    return found


def restrict(cover: Cover, rows: Span, cols: Span) -> Cover:
    """The part of a region's `cover` that covers its sub-region rows × cols (in the region's
    coordinates), with targets relative to that sub-region."""
    kept: list[Piece] = []
    blocks: list[Any] = []
    for piece, block in zip(*cover, strict=True):
        (target_rows, target_cols), (source_rows, source_cols) = piece.target, piece.source
        r0, r1 = max(rows[0], target_rows[0]), min(rows[1], target_rows[1])
        c0, c1 = max(cols[0], target_cols[0]), min(cols[1], target_cols[1])
        if r0 >= r1 or c0 >= c1:
            continue
        row_shift, col_shift = source_rows[0] - target_rows[0], source_cols[0] - target_cols[0]
        source = ((r0 + row_shift, r1 + row_shift), (c0 + col_shift, c1 + col_shift))
        target = ((r0 - rows[0], r1 - rows[0]), (c0 - cols[0], c1 - cols[0]))
        kept.append(Piece(piece.block, source, target))
        blocks.append(block)
    return kept, blocks


def _slices(spans: tuple[Span, Span]) -> tuple[slice, slice]:
    return slice(*spans[0]), slice(*spans[1])


@dataclass(frozen=True)
class Stored:
    """A 2-D Dask array as stored (its dtype, its chunks), with one Delayed per block."""

    array: da.Array
    blocks: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.array.ndim != 2:
            raise ValueError(f"Stored needs a 2-D array, got shape {self.array.shape}")
        object.__setattr__(self, "blocks", self.array.to_delayed(optimize_graph=False))

    @property
    def shape(self) -> tuple[int, int]:
        return self.array.shape

    def cover(self, rows: Span, cols: Span | None = None) -> Cover:
        """Pieces covering rows × cols (all columns by default), and the Delayed block of each."""
        found = pieces(self.array.chunks, rows, cols or (0, self.array.shape[1]))
        return found, [self.blocks[piece.block] for piece in found]


def assemble(
    shape: tuple[int, int], cover: Cover, dtype: Any, out: np.ndarray | None = None
) -> np.ndarray:
    """The region of `shape` from its computed cover, as a new C-ordered array of `dtype` (or
    written into `out`)."""
    values = np.empty(shape, dtype=dtype) if out is None else out
    for piece, block in zip(*cover, strict=True):
        values[_slices(piece.target)] = np.asarray(block)[_slices(piece.source)]
    return values


def subtract(values: np.ndarray, cover: Cover) -> None:
    """values −= the region of `cover`, in place, piece by piece."""
    for piece, block in zip(*cover, strict=True):
        target = values[_slices(piece.target)]
        np.subtract(target, np.asarray(block)[_slices(piece.source)], out=target)


def named(function: Callable[..., Any], label: str, *args: Any) -> Any:
    """Delayed `function(*args)` whose task key starts with `label` (legible task streams).

    `args` may hold Delayed values inside lists, tuples and dicts (a `Cover`'s blocks). The task
    is built directly (one `Task`, its dependencies found by one walk over `args`) rather than
    by `dask.delayed`, whose traversal and tokenizing cost about a millisecond a task: a
    scoring graph has a few tasks per stored chunk, so on a 10 GB bundle that was seconds of
    graph building before the first task ran. The key is pure: equal arguments (Delayed by
    key, other values by `repr`, functions by name) give the same key."""
    dependencies: dict[Any, Delayed] = {}
    parts: list[str] = [label, _name_of(function)]
    refs = tuple(_references(arg, dependencies, parts) for arg in args)
    key = f"{label}-{hashlib.sha1(chr(0).join(parts).encode()).hexdigest()}"
    task = Task(key, function, *(parse_input(ref) for ref in refs))
    # dask's DaskCollection protocol types `__dask_scheduler__` as a staticmethod object, which no
    # collection's attribute matches: Delayed objects are collections all the same.
    graph = HighLevelGraph.from_collections(key, {key: task}, list(dependencies.values()))  # type: ignore[arg-type]
    return Delayed(key, graph)


def _name_of(function: Any) -> str:
    module = getattr(function, "__module__", None) or type(function).__module__
    return f"{module}.{getattr(function, '__qualname__', None) or repr(function)}"


def _references(value: Any, dependencies: dict[Any, Delayed], parts: list[str]) -> Any:
    """`value` with each Delayed replaced by a reference to its key (collected in
    `dependencies`); the text naming `value` appended to `parts`."""
    if isinstance(value, Delayed):
        dependencies[value.key] = value
        parts.append(f"key:{value.key!r}")
        return TaskRef(value.key)
    if isinstance(value, list | tuple):
        parts.append(f"{type(value).__name__}[{len(value)}]")
        return type(value)(_references(item, dependencies, parts) for item in value)
    if isinstance(value, dict):
        parts.append(f"dict{list(value)!r}")
        return {key: _references(item, dependencies, parts) for key, item in value.items()}
    if callable(value):
        parts.append(_name_of(value))
        return value
    if isinstance(value, np.ndarray):
        parts.append(tokenize(value))
        return value
    parts.append(repr(value))
    return value


def tree_sum(parts: list) -> Any:
    """Delayed pairwise sum of `parts` in a fixed order (the result never depends on which worker
    adds what)."""
    while len(parts) > 1:
        parts = [
            named(np.add, "add", parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return parts[0]


def tiles(shape: tuple[int, int], tile: tuple[int, int]) -> list[tuple[Span, Span]]:
    """Row-major tiles of `tile` (the last ones cut) covering `shape`."""
    return [
        ((r, min(r + tile[0], shape[0])), (c, min(c + tile[1], shape[1])))
        for r in range(0, shape[0], tile[0])
        for c in range(0, shape[1], tile[1])
    ]
