"""Scratch checkpoints of a recipe build: data a two-pass transform reads twice, written once.

A transform that needs a whole-trace statistic of its input (a noise level, a mean) would make
Dask either compute everything upstream twice or hold all of it until the statistic is known.
A checkpoint writes that input to a scratch store (float64 as computed, uncompressed, so the
values are exactly those the transform would have seen) and reopens it lazily. Statistics that
can be summed block by block (`level_sums`) are computed in the same pass as the write, so the
data are read back only once, by the transform itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import storage


def _sums_name(variable: str) -> str:
    return f"__level_sums__{variable}"


def write_checkpoint(
    dataset: xr.Dataset,
    url: str,
    storage_options: storage.StorageOptions | None,
    level_sums: Mapping[str, tuple[da.Array, int]] | None = None,
    label: str = "checkpoint",
    quiet: bool = False,
) -> tuple[xr.Dataset, dict[str, np.ndarray]]:
    """(`dataset` written to `url` and reopened lazily, {name: per-trace RMS}) in one pass.

    `level_sums` maps variable names to (lazy `noise.trace_sums` of the variable, its time
    axis). The sums are stored in the checkpoint beside the data, in the same write: Dask then
    makes each block once and feeds it to both (computed as separate collections, graph
    optimisation would fuse the block's tasks into each consumer and make it twice)."""
    from seisctf.pipeline.noise import rms_from_sums

    sums = dict(level_sums or {})
    extra = {}
    for name, (lazy, time_axis) in sums.items():
        dims = [
            f"__level_block__{name}" if axis == time_axis else dim
            for axis, dim in enumerate(dataset[name].dims)
        ]
        # One chunk per time block, holding every trace's few numbers: regular zarr chunks.
        whole = {axis: -1 for axis in range(lazy.ndim) if axis != time_axis}
        extra[_sums_name(name)] = ([*dims, "__sum_count__"], lazy.rechunk(whole))
    storage.write_dataset(
        dataset.assign(extra), url, storage_options, label=label, quiet=quiet, compress=False
    )
    group = storage.open_group(url, storage_options)
    levels = {
        name: rms_from_sums(np.asarray(group[_sums_name(name)][...]), time_axis)
        for name, (_, time_axis) in sums.items()
    }
    reopened = storage.open_dataset(url, storage_options).drop_vars(list(extra))
    return reopened, levels


def remove_checkpoints(urls: Sequence[str], storage_options: storage.StorageOptions | None) -> None:
    """Delete the scratch stores or folders at `urls` (those that exist)."""
    import fsspec

    for url in urls:
        options = storage.options_for(url, storage_options) or {}
        filesystem, path = fsspec.core.url_to_fs(url, **options)
        if filesystem.exists(path):
            filesystem.rm(path, recursive=True)
