"""Scratch checkpoints of a recipe build: data a two-pass transform reads twice, written once.

A transform that needs a whole-trace statistic of its input (a noise level, a mean) would make
Dask either compute everything upstream twice or hold all of it until the statistic is known.
A checkpoint writes that input to a scratch store (uncompressed, in the dtype each variable will
be stored in) and reopens it lazily. Per-trace levels (sums of squares over a window of time)
are summed by the same task that writes a chunk, from the values it wrote: each block is made,
written and summed in one task, so no block waits in a worker's memory for a second consumer
and nothing spills. For that, the checkpoint's chunks start at multiples of the level blocks
(`trace_levels.RMS_BLOCK_SAMPLES`) along time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dask.array as da
import numpy as np
import xarray as xr
from dask.base import tokenize

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import compute
from seisctf.location import StoreLocation
from seisctf.signal.rechunk import rechunk_array
from seisctf.signal.trace_levels import (
    RMS_BLOCK_SAMPLES,
    chunk_level_sums,
    level_blocks,
    rms_from_sums,
)


def checkpoint_chunks(array: xr.DataArray) -> dict[str, int]:
    """Chunks of a variable in a checkpoint: along time a multiple of `RMS_BLOCK_SAMPLES` (or
    the whole trace if shorter) near `time_space_chunks`' rows, the last other dim cut to keep
    a chunk near `conventions.TARGET_CHUNK_BYTES` at the variable's item size, 1 along the
    rest; a variable without time keeps the regular chunks its first chunks give."""
    if cv.TIME not in array.dims:
        assert array.chunks is not None  # a Dask-backed variable: the lazy ones are
        return {str(dim): sizes[0] for dim, sizes in zip(array.dims, array.chunks, strict=True)}
    n_time = array.sizes[cv.TIME]
    if array.ndim == 1:
        return {cv.TIME: n_time}
    space = [str(dim) for dim in array.dims if dim != cv.TIME][-1]
    rows, _ = cv.time_space_chunks(n_time, array.sizes[space], array.dtype.itemsize)
    time_chunk = min(n_time, max(1, rows // RMS_BLOCK_SAMPLES) * RMS_BLOCK_SAMPLES)
    space_chunk = max(
        1, min(array.sizes[space], cv.TARGET_CHUNK_BYTES // (time_chunk * array.dtype.itemsize))
    )
    others = {str(dim): 1 for dim in array.dims if dim not in (cv.TIME, space)}
    return {cv.TIME: time_chunk, space: space_chunk, **others}


def _write_chunk(
    block: np.ndarray,
    target,
    time_axis: int | None,
    window: tuple[int, int],
    block_info: dict | None = None,
) -> np.ndarray:
    """Write `block` (rounded to the target's dtype, C order) to its place in zarr array
    `target`; return the level sums of what was written over `window` (samples along time)."""
    assert block_info is not None  # given by map_blocks
    location = block_info[0]["array-location"]
    stored = np.ascontiguousarray(block, dtype=target.dtype)
    target[tuple(slice(start, stop) for start, stop in location)] = stored
    if time_axis is None:
        return np.empty((0,) * block.ndim + (2,), dtype=np.float64)
    return chunk_level_sums(stored, time_axis, location[time_axis][0], window)


def _sums_chunks(values: da.Array, time_axis: int | None, window: tuple[int, int]):
    """Output chunks of `_write_chunk` over `values`: level blocks per chunk along time."""
    if time_axis is None:
        return tuple((0,) * len(sizes) for sizes in values.chunks) + ((2,),)
    per_chunk, start = [], 0
    for size in values.chunks[time_axis]:
        first, stop = max(window[0], start), min(window[1], start + size)
        per_chunk.append(len(level_blocks(first, stop)))
        start += size
    return tuple(
        tuple(per_chunk) if axis == time_axis else sizes for axis, sizes in enumerate(values.chunks)
    ) + ((2,),)


def write_checkpoint(
    dataset: xr.Dataset,
    store: StoreLocation,
    level_windows: Mapping[str, slice] | None = None,
    dtypes: Mapping[str, np.dtype] | None = None,
    label: str = "checkpoint",
    quiet: bool = False,
) -> tuple[xr.Dataset, dict[str, np.ndarray]]:
    """(`dataset` written to `store` and reopened lazily, {name: per-trace RMS}) in one pass.

    `level_windows` maps variable names (with a time dim) to the samples of time (a slice) whose
    per-trace RMS is wanted: `trace_levels.rms_from_sums` of the `trace_levels.trace_sums` of
    the values stored, bit for bit. `dtypes`: the dtype a variable is checkpointed in (default
    its own). The store's chunks are `checkpoint_chunks`; it is marked complete only once every
    chunk is written."""
    windows = dict(level_windows or {})
    dtypes = dict(dtypes or {})
    attrs = dict(dataset.attrs)
    dataset = dataset.copy()
    dataset.attrs = {}
    # Lazy coordinates are computed now: only data variables go through the chunk writer.
    for name, coordinate in dataset.coords.items():
        if coordinate.chunks is not None:
            dataset[name] = coordinate.compute()
    lazy = [
        str(name)
        for name, array in dataset.data_vars.items()
        if array.chunks is not None or name in windows
    ]
    for name in lazy:
        array = dataset[name].chunk() if dataset[name].chunks is None else dataset[name]
        array = array.astype(dtypes.get(name, array.dtype))
        dataset[name] = rechunk_array(array, checkpoint_chunks(array))
    for name in dataset.variables:
        dataset[name].encoding.pop("chunks", None)
    # Metadata (and numpy-backed variables) only: the lazy ones are written below.
    storage.start_dataset(dataset, store, {name: {"compressors": None} for name in lazy})
    group = storage.open_group(store, mode="r+")
    sums = {}
    for name in lazy:
        values = dataset[name].data
        time_axis = dataset[name].get_axis_num(cv.TIME) if name in windows else None
        n_time = dataset.sizes.get(cv.TIME, 0)
        window = windows[name].indices(n_time)[:2] if name in windows else (0, 0)
        sums[name] = values.map_blocks(
            _write_chunk,
            storage.group_array(group, name, store.url),
            time_axis,
            window,
            chunks=_sums_chunks(values, time_axis, window),
            new_axis=values.ndim,
            dtype=np.float64,
            meta=np.empty((0,) * (values.ndim + 1)),
            name=f"write-checkpoint-{tokenize(store.url, name, values.name, window)}",
        )
    computed = dict(zip(sums, compute(*sums.values(), label=label, quiet=quiet), strict=True))
    storage.finish_group(store, attrs)
    levels = {
        name: rms_from_sums(computed[name], dataset[name].get_axis_num(cv.TIME)) for name in windows
    }
    return storage.open_dataset(store), levels


def remove_checkpoints(scratch: Sequence[StoreLocation]) -> None:
    """Delete the scratch stores or folders at `scratch` (those that exist)."""
    for location in scratch:
        filesystem, path = location.filesystem()
        if filesystem.exists(path):
            filesystem.rm(path, recursive=True)
