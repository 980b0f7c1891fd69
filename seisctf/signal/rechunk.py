"""Changing a store's layout (time-contiguous for filtering, trace-contiguous for scoring) in
bounded memory.

rechunker does not support zarr v3, so this uses Dask's own task-based rechunk: it plans
intermediate stages so that no task holds more than `block_size_limit` bytes, and on a cluster the
workers spill what waits to disk (tests/pipeline/test_rechunk.py turns 768 MiB around through two
workers of 700 MiB). Dask's peer-to-peer rechunk would stream through disk too, but its barrier
tasks do not survive xarray's `to_zarr(compute=False)`, which turns the graph into a Delayed
(dask 2026.8: "lost dependencies"). Values are copied, never recomputed: the result is the same
array for any chunking and any number of workers.
"""

from __future__ import annotations

from collections.abc import Mapping

import xarray as xr

from seisctf import conventions as cv

DEFAULT_BLOCK_BYTES = 16 * 2**20


def rechunk_method() -> str:
    """The rechunk method used: "tasks" (see the module docstring for why not "p2p")."""
    return "tasks"


def rechunk_array(
    data: xr.DataArray, chunks: Mapping[str, int], *, block_size_limit: int = DEFAULT_BLOCK_BYTES
) -> xr.DataArray:
    """`data` with chunks `chunks` (dim → length; dims not named keep theirs), bounded memory."""
    dask_array = data.data
    target = tuple(
        chunks.get(str(dim), dask_array.chunks[axis]) for axis, dim in enumerate(data.dims)
    )
    rechunked = dask_array.rechunk(
        target, method=rechunk_method(), block_size_limit=block_size_limit
    )
    return data.copy(data=rechunked)


def rechunk(
    dataset: xr.Dataset, chunks: Mapping[str, int], *, block_size_limit: int = DEFAULT_BLOCK_BYTES
) -> xr.Dataset:
    """Every Dask-backed data variable of `dataset` rechunked along the named dims."""
    changed = {
        name: rechunk_array(array, chunks, block_size_limit=block_size_limit)
        for name, array in dataset.data_vars.items()
        if array.chunks is not None and any(dim in chunks for dim in array.dims)
    }
    return dataset.assign(changed)


def rechunk_for_store(dataset: xr.Dataset, chunks: Mapping[str, int] | None) -> xr.Dataset:
    """Chunks of the output: the recipe's, else `time_space_chunks` of each variable's (time,
    last other dim) shape and 1 along the rest; rechunked in bounded memory."""
    rechunked = {}
    for name, array in dataset.data_vars.items():
        if array.chunks is None:
            continue
        if chunks:
            target = {dim: size for dim, size in chunks.items() if dim in array.dims}
        elif cv.TIME in array.dims and array.ndim >= 2:
            space = [str(dim) for dim in array.dims if dim != cv.TIME][-1]
            time_chunk, space_chunk = cv.time_space_chunks(array.sizes[cv.TIME], array.sizes[space])
            others = {str(dim): 1 for dim in array.dims if dim not in (cv.TIME, space)}
            target = {cv.TIME: time_chunk, space: space_chunk, **others}
        else:
            continue
        rechunked[name] = rechunk_array(array, target)
    return dataset.assign(rechunked)
