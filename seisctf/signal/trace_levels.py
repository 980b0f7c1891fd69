"""Per-trace levels (RMS) summed block by block in a fixed order, so that their bits never
depend on how the data are chunked.

A trace's samples are cut into level blocks at multiples of `RMS_BLOCK_SAMPLES` from its first
sample; each block gives [sum of squares, count] of its finite samples, and the blocks are added
in time order. The noise transforms (`pipeline.transforms.noise`) scale their noise by these
levels, and a recipe build's checkpoints (`build.checkpoint`) sum them while they write.
"""

from __future__ import annotations

import itertools
import math

import dask.array as da
import numpy as np

# Time blocks of the per-trace sums: cut at multiples of this many samples from a trace's first
# sample (a constant, so the sums' rounding never depends on how the data happen to be chunked),
# and small enough that no task needs whole traces in memory.
RMS_BLOCK_SAMPLES = 8_192
RMS_BLOCK_BYTES = 8 * 2**20


# Time samples per slab of `block_sums` (its temporaries stay in cache).
_SUM_SLAB_ELEMENTS = 1 << 14


def block_sums(block: np.ndarray, time_axis: int) -> np.ndarray:
    """[sum of squares, count] of the finite samples of each trace of one time block (any real
    dtype, squared in float64), stacked on a new last axis; time length 1. Added strictly in
    time order, one sample after the other, whatever the block's memory layout (a plain sum()
    would not be): slab by slab of time, each slab's rows added to the running total in order.
    NumPy reduces the outer axis of a C-contiguous 2-D array row after row when there are
    several columns (pairwise only along the contiguous axis), so one trace alone takes
    `np.add.accumulate`; a test pins the order."""
    samples = np.moveaxis(block, time_axis, 0)
    n_time, trace_shape = samples.shape[0], samples.shape[1:]
    n_traces = math.prod(trace_shape)
    samples = samples.reshape(n_time, n_traces)
    total = np.zeros(n_traces, dtype=np.float64)
    count = np.zeros(n_traces, dtype=np.int64)
    rows = max(1, _SUM_SLAB_ELEMENTS // max(1, n_traces))
    running = np.empty((rows + 1, n_traces), dtype=np.float64)
    for start in range(0, n_time, rows):
        slab = samples[start : start + rows]
        finite = np.isfinite(slab)
        count += finite.sum(axis=0)
        part = running[: slab.shape[0] + 1]
        part[0] = total
        np.multiply(slab, slab, out=part[1:], dtype=np.float64)
        np.copyto(part[1:], 0.0, where=~finite)
        if n_traces > 1:
            np.add.reduce(part, axis=0, out=total)
        else:
            total[:] = np.add.accumulate(part, axis=0)[-1]
    sums = np.stack([total, count.astype(np.float64)], axis=-1).reshape(*trace_shape, 2)
    return np.expand_dims(sums, time_axis)


def level_blocks(start: int, stop: int) -> list[tuple[int, int]]:
    """The (start, stop) sample ranges of the level blocks covering samples [start, stop) of a
    trace: cut at every multiple of `RMS_BLOCK_SAMPLES` (none if stop <= start)."""
    if stop <= start:
        return []
    edges = [
        start,
        *range((start // RMS_BLOCK_SAMPLES + 1) * RMS_BLOCK_SAMPLES, stop, RMS_BLOCK_SAMPLES),
        stop,
    ]
    return list(itertools.pairwise(edges))


def chunk_level_sums(
    chunk: np.ndarray, time_axis: int, chunk_start: int, window: tuple[int, int]
) -> np.ndarray:
    """`block_sums` of each level block of samples `window` = (start, stop) that falls in this
    chunk (which starts at sample `chunk_start`), stacked in time order along `time_axis`: the
    chunk's share of `trace_sums`. Exact only if no level block crosses the chunk's edges
    (the chunk starts and stops at multiples of `RMS_BLOCK_SAMPLES`, or at the trace's end)."""
    start = max(window[0], chunk_start)
    stop = min(window[1], chunk_start + chunk.shape[time_axis])
    parts = [
        block_sums(
            chunk[(slice(None),) * time_axis + (slice(a - chunk_start, b - chunk_start),)],
            time_axis,
        )
        for a, b in level_blocks(start, stop)
    ]
    if not parts:
        shape = [0 if axis == time_axis else size for axis, size in enumerate(chunk.shape)]
        return np.empty((*shape, 2), dtype=np.float64)
    return np.concatenate(parts, axis=time_axis)


def trace_sums(values: da.Array, time_axis: int, window: slice = slice(None)) -> da.Array:
    """Lazy per-trace [sum of squares, count] of the finite samples of `values` over `window`
    of time, one entry per level block (`level_blocks` of the window: cut at multiples of
    `RMS_BLOCK_SAMPLES` from the first sample): `values`' shape with one sample per block along
    time and a new last axis of 2. `rms_from_sums` of the computed result is the RMS; its bits
    do not depend on `values`' chunks (other axes are cut to keep a block near
    `RMS_BLOCK_BYTES`)."""
    first, end, _ = window.indices(values.shape[time_axis])
    windowed = values[(slice(None),) * time_axis + (slice(first, end),)]
    block_sizes = tuple(stop - start for start, stop in level_blocks(first, end))
    # Other axes keep their chunks (no block then waits for several of the data's) unless a
    # block would get too big.
    other = math.prod(max(c) for axis, c in enumerate(windowed.chunks) if axis != time_axis)
    too_big = RMS_BLOCK_SAMPLES * other * 8 > RMS_BLOCK_BYTES
    blocks = windowed.rechunk(
        {
            axis: block_sizes if axis == time_axis else ("auto" if too_big else c)
            for axis, c in enumerate(windowed.chunks)
        },
        block_size_limit=RMS_BLOCK_BYTES,
    )
    return blocks.map_blocks(
        block_sums,
        time_axis,
        chunks=tuple(
            (1,) * len(c) if axis == time_axis else c for axis, c in enumerate(blocks.chunks)
        )
        + ((2,),),
        new_axis=values.ndim,
        dtype=np.float64,
    )


def rms_from_sums(sums: np.ndarray, time_axis: int) -> np.ndarray:
    """RMS per trace (time length 1; 0 for a trace with no finite sample) from computed
    `trace_sums`, the blocks added in time order."""
    return _combine_sums(sums, time_axis)


def _combine_sums(partials: np.ndarray, time_axis: int) -> np.ndarray:
    """RMS from the blocks' [sum of squares, count], added in time order; time length 1."""
    totals = np.take(np.add.accumulate(partials, axis=time_axis), [-1], axis=time_axis)
    return np.sqrt(totals[..., 0] / np.maximum(totals[..., 1], 1))
