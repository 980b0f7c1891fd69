"""Block functions that need a halo of neighbouring samples along one axis.

`dask.array.map_overlap` joins each block to its neighbours' edges in a task of its own: a
second copy of every block, converted to float64 beforehand, while the edge slices (views) keep
whole neighbour blocks alive. Here a small task copies each block's edges out, so a block is
freed once its own task has run and only edges travel between workers; each output block is
one task that receives its block as it is (float32 stays float32 until then) and the
neighbours' edges, writes the region [start − left, stop + right) into one float64 array,
applies the function and returns the block's own part. At the array's ends there is no halo
(boundary "none"): the function sees the true edge there.

The region is laid out with the halo axis last and C-contiguous (one transposing copy), so
each trace is a contiguous row: filters along it then run without strided copies. The block
returned is a view in the input's axis order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from dask._task_spec import Task, TaskRef
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from dask.typing import Key


def merged_chunks(chunks: tuple[int, ...], min_size: int) -> tuple[int, ...]:
    """Chunk sizes made by joining neighbouring `chunks` until each holds >= `min_size` samples
    (one chunk if the axis is shorter). No chunk is split, so the rechunk only concatenates."""
    merged: list[int] = []
    pending = 0
    for size in chunks:
        pending += size
        if pending >= min_size:
            merged.append(pending)
            pending = 0
    if pending:
        if merged:
            merged[-1] += pending
        else:
            merged.append(pending)
    return tuple(merged)


def with_min_chunks(values: da.Array, axis: int, min_size: int) -> da.Array:
    """`values` with its chunks along `axis` joined until each holds >= `min_size` samples."""
    joined = merged_chunks(values.chunks[axis], min_size)
    if joined == values.chunks[axis]:
        return values
    return values.rechunk({axis: joined})


def _along(axis: int, ndim: int, part: slice) -> tuple[slice, ...]:
    index = [slice(None)] * ndim
    index[axis] = part
    return tuple(index)


def _edge(block: np.ndarray, axis: int, part: slice) -> np.ndarray:
    """A copy of `part` of `block` along `axis` (a view would keep the whole block alive)."""
    return block[_along(axis, block.ndim, part)].copy()


def _halo_task(
    function: Callable[..., np.ndarray],
    before: np.ndarray | None,
    block: np.ndarray,
    after: np.ndarray | None,
    axis: int,
    kwargs: dict[str, Any],
) -> np.ndarray:
    """function(before ‖ block ‖ after along `axis`, as float64 with `axis` moved last) cut
    back to `block`'s part, in `block`'s axis order."""
    left = 0 if before is None else before.shape[axis]
    right = 0 if after is None else after.shape[axis]
    n = block.shape[axis]
    shape = [size for position, size in enumerate(block.shape) if position != axis]
    region = np.empty([*shape, left + n + right], dtype=np.float64)
    if before is not None:
        region[..., :left] = np.moveaxis(before, axis, -1)
    region[..., left : left + n] = np.moveaxis(block, axis, -1)
    if after is not None:
        region[..., left + n :] = np.moveaxis(after, axis, -1)
    result = function(region, **kwargs)
    return np.moveaxis(result[..., left : left + n], -1, axis)


def _neighbour(
    layer: dict[Key, Task], kind: str, index: tuple[int, ...], axis: int, offset: int
) -> TaskRef | None:
    """The `kind` edge task of the block `offset` blocks away along `axis`, if there is one."""
    key: Key = (kind, *index[:axis], index[axis] + offset, *index[axis + 1 :])
    return TaskRef(key) if key in layer else None


def map_halo(
    function: Callable[..., np.ndarray],
    values: da.Array,
    axis: int,
    depth: tuple[int, int],
    **kwargs: Any,
) -> da.Array:
    """float64 array like `values`, block i = function(region i)[its own samples], where region
    i is block i extended by `depth` = (left, right) samples of its neighbours along `axis`
    (none past the array's ends), as float64 with `axis` moved last (C-contiguous). `function`
    maps such a region (which it may overwrite) to an array of the same shape, `axis` last
    too. Every chunk along `axis` must hold at least max(depth) samples (see
    `with_min_chunks`) unless there is one chunk."""
    sizes = values.chunks[axis]
    n_blocks = len(sizes)
    if n_blocks > 1 and min(sizes) < max(depth):
        raise ValueError(f"chunks {sizes} along axis {axis} are shorter than the halo {depth}")
    token = tokenize(function, values.name, axis, depth, kwargs)
    name = f"{getattr(function, '__name__', 'halo')}-halo-{token}"
    head, tail = f"halo-head-{token}", f"halo-tail-{token}"
    layer: dict[Key, Task] = {}
    for index in np.ndindex(values.numblocks):
        position = index[axis]
        source = (values.name, *index)
        if position > 0 and depth[1]:  # my first samples: the previous block's right halo
            layer[(head, *index)] = Task(
                (head, *index), _edge, TaskRef(source), axis, slice(0, depth[1])
            )
        if position < n_blocks - 1 and depth[0]:  # my last samples: the next block's left halo
            layer[(tail, *index)] = Task(
                (tail, *index),
                _edge,
                TaskRef(source),
                axis,
                slice(sizes[position] - depth[0], None),
            )
    for index in np.ndindex(values.numblocks):
        key = (name, *index)
        layer[key] = Task(
            key,
            _halo_task,
            function,
            _neighbour(layer, tail, index, axis, -1),
            TaskRef((values.name, *index)),
            _neighbour(layer, head, index, axis, +1),
            axis,
            kwargs,
        )
    # dask's DaskCollection protocol types `__dask_scheduler__` as a staticmethod object, which no
    # collection's attribute matches: its arrays are collections all the same.
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[values])  # type: ignore[list-item]
    return da.Array(graph, name, values.chunks, dtype=np.float64, meta=np.empty((0,) * values.ndim))
