"""Block functions that need a halo of neighbouring samples along one axis.

`dask.array.map_overlap` cuts each neighbour's edge in a task of its own and joins it to the
block in another: a second copy of every block, and every input block (converted to float64
first) waits in memory until both neighbours have taken their edges. Here each output block is
one task that receives the input blocks it touches as they are (float32 stays float32 until
then), writes the region [start − left, stop + right) into one float64 array, applies the
function and returns the block's own part. At the array's ends there is no halo (boundary
"none"): the function sees the true edge there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from dask._task_spec import List, Task, TaskRef
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph


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


def _halo_task(
    function: Callable[..., np.ndarray],
    blocks: list[np.ndarray],
    has_previous: bool,
    axis: int,
    depth: tuple[int, int],
    kwargs: dict[str, Any],
) -> np.ndarray:
    """function(region) cut back to the middle block; `blocks` = [previous?, block, next?]."""
    block = blocks[1 if has_previous else 0]
    left, right = depth
    n = block.shape[axis]
    shape = list(block.shape)
    shape[axis] = left + n + right
    region = np.empty(shape, dtype=np.float64)
    if left:
        region[_along(axis, block.ndim, slice(0, left))] = blocks[0][
            _along(axis, block.ndim, slice(blocks[0].shape[axis] - left, None))
        ]
    region[_along(axis, block.ndim, slice(left, left + n))] = block
    if right:
        region[_along(axis, block.ndim, slice(left + n, None))] = blocks[-1][
            _along(axis, block.ndim, slice(0, right))
        ]
    result = function(region, **kwargs)
    return result[_along(axis, block.ndim, slice(left, left + n))]


def map_halo(
    function: Callable[..., np.ndarray],
    values: da.Array,
    axis: int,
    depth: tuple[int, int],
    **kwargs: Any,
) -> da.Array:
    """float64 array like `values`, block i = function(region i)[its own samples], where region
    i is block i extended by `depth` = (left, right) samples of its neighbours along `axis`
    (none past the array's ends), as float64. `function` maps a float64 region to an array of
    the same shape. Every chunk along `axis` must hold at least max(depth) samples (see
    `with_min_chunks`) unless there is one chunk."""
    sizes = values.chunks[axis]
    n_blocks = len(sizes)
    if n_blocks > 1 and min(sizes) < max(depth):
        raise ValueError(f"chunks {sizes} along axis {axis} are shorter than the halo {depth}")
    token = tokenize(function, values.name, axis, depth, kwargs)
    name = f"{getattr(function, '__name__', 'halo')}-halo-{token}"
    layer = {}
    for index in np.ndindex(values.numblocks):
        position = index[axis]
        neighbours = [
            (values.name, *index[:axis], other, *index[axis + 1 :])
            for other in (position - 1, position, position + 1)
            if 0 <= other < n_blocks
        ]
        block_depth = (
            depth[0] if position > 0 else 0,
            depth[1] if position < n_blocks - 1 else 0,
        )
        key = (name, *index)
        layer[key] = Task(
            key,
            _halo_task,
            function,
            List(*(TaskRef(neighbour) for neighbour in neighbours)),
            position > 0,
            axis,
            block_depth,
            kwargs,
        )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[values])
    return da.Array(graph, name, values.chunks, dtype=np.float64, meta=np.empty((0,) * values.ndim))
