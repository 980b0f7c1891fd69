"""Dask arrays over regularly chunked arrays, built in memory that does not grow with the chunks.

`dask.array.from_array` (and xarray's `open_dataset(chunks=...)` over it) keeps, per axis, the
start of every chunk as a Python int and hashes every chunk size into the array's name; xarray
also walks every chunk boundary to compare it with the stored chunks. Opening one array of 10^7
chunks along time took 4.8 s and 770 MB that way. Here a chunk's slices are computed from its
index (`RegularSlices`), the name comes from the caller's token, and the only per-chunk
structure left is the one Dask needs, its tuple of chunk sizes per axis (8 bytes a chunk along
each axis: a 552 × 301,000-chunk store holds 301,552 of them).

The graph is one Blockwise layer of `getter(source, slices)` tasks with `source` inlined, as
`from_array(..., inline_array=True)` builds it: nothing is built per chunk until a selection is
computed, and every chunk read is then a root task the scheduler queues with its consumers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from dask.base import normalize_token, tokenize
from dask.blockwise import blockwise
from dask.highlevelgraph import HighLevelGraph
from dask.layers import ArrayBlockwiseDep

if TYPE_CHECKING:  # imported where used: `storage` imports this module, and an ingest's
    # client needs neither dask.array nor xarray (0.5 s of its start)
    import dask.array as da
    import xarray as xr


def chunks_along_axes(shape: tuple[int, ...], chunk_shape: tuple[int, ...]) -> int:
    """How many chunks the grid has along its axes together (a × b chunks count a + b): the
    length of its Dask chunk tuples."""
    return sum(-(-int(n) // max(1, int(c))) for n, c in zip(shape, chunk_shape, strict=True))


class RegularSlices(ArrayBlockwiseDep):
    """The slices of chunk `index` in a grid of `chunk_shape` over `shape` (the last chunk of
    an axis holds the remainder), computed on demand: Dask's `ArraySliceDep` stores every
    chunk's start, and ships them with every graph that reads a chunk."""

    def __init__(self, shape: tuple[int, ...], chunk_shape: tuple[int, ...]):
        self.shape = tuple(int(n) for n in shape)
        self.chunk_shape = tuple(
            max(1, min(int(c), n)) for c, n in zip(chunk_shape, self.shape, strict=True)
        )
        self.numblocks = tuple(
            max(1, -(-n // c)) for n, c in zip(self.shape, self.chunk_shape, strict=True)
        )
        self.produces_tasks = False

    def __getitem__(self, index: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(
            slice(i * c, min((i + 1) * c, n))
            for i, c, n in zip(index, self.chunk_shape, self.shape, strict=True)
        )

    def dask_chunks(self) -> tuple[tuple[int, ...], ...]:
        """Dask's chunk sizes per axis (`(0,)` along an empty axis)."""
        sizes = []
        for n, c in zip(self.shape, self.chunk_shape, strict=True):
            whole, rest = divmod(n, c)
            sizes.append((c,) * whole + ((rest,) if rest else ()) or (0,))
        return tuple(sizes)

    def __repr__(self) -> str:
        return f"RegularSlices(shape={self.shape}, chunk_shape={self.chunk_shape})"


@normalize_token.register(RegularSlices)
def _token_of_slices(slices: RegularSlices) -> tuple:
    return "RegularSlices", slices.shape, slices.chunk_shape


def regular_array(
    source: Any, chunk_shape: tuple[int, ...], name: str, meta: Any = None
) -> da.Array:
    """A Dask array of `source` (anything sliceable with a tuple of slices, with `shape` and
    `dtype`) in chunks of `chunk_shape`, named `name` (unique to the source's contents)."""
    import dask.array as da
    from dask.array.core import getter

    shape = tuple(int(n) for n in source.shape)
    axes = tuple(range(len(shape)))
    slices = RegularSlices(shape, chunk_shape)
    layer = blockwise(
        getter, name, axes, source, None, slices, axes, numblocks={}, _data_producer=True
    )
    graph = HighLevelGraph.from_collections(name, layer)
    return da.Array(graph, name, slices.dask_chunks(), dtype=source.dtype, meta=meta)


def stored_chunk_shape(variable: xr.Variable) -> tuple[int, ...]:
    """The chunk shape its backend prefers (`encoding["preferred_chunks"]`, the zarr chunks),
    whole axes where it names none: the chunks `open_dataset(chunks={})` gives."""
    preferred = variable.encoding.get("preferred_chunks") or {}
    return tuple(int(preferred.get(dim, n)) for dim, n in variable.sizes.items())


def with_dask_variables(ds: xr.Dataset, token: str) -> xr.Dataset:
    """`ds` (opened lazily without Dask: `chunks=None, cache=False`) with every variable not
    in memory as a Dask array in its stored chunks, as `chunks={}` gives them; named
    `open_dataset-{variable}-{token}` (`token`: unique to the store's contents)."""
    from xarray.core.indexing import ImplicitToExplicitIndexingAdapter, OuterIndexer

    replaced: dict[str, xr.Variable] = {}
    for name, variable in ds.variables.items():
        if variable._in_memory or variable.ndim == 0:
            continue
        source = ImplicitToExplicitIndexingAdapter(variable._data, OuterIndexer)
        array = regular_array(
            source,
            stored_chunk_shape(variable),
            f"open_dataset-{name}-{tokenize(token, name)}",
            meta=np.ndarray,
        )
        # xarray types `data` as its own duck-array protocols, which dask's Array (a duck array
        # at run time) does not declare.
        replaced[str(name)] = variable.copy(deep=False, data=array)  # type: ignore[arg-type]
    coords = {name: replaced[name] for name in ds.coords if name in replaced}
    data = {name: replaced[name] for name in ds.data_vars if name in replaced}
    return ds.assign_coords(coords).assign(data)
