"""Where stores live: local paths or any fsspec URL, with storage options; safe, repeatable writes.

Every store seisctf writes is a zarr v3 group. Arrays are written first, on chunk boundaries;
the group's attrs, the completion marker `seisctf_complete` and the consolidated metadata are
written last, so a reader never takes an interrupted write for a whole store. Writing the same
data twice gives the same bytes (mode "w" replaces the store; chunking depends on shapes only).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import zarr
from dask.base import tokenize

from seisctf import chunk_grid, conventions, s3, urls
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

if TYPE_CHECKING:  # imported where used: an ingest's client needs neither dask.array nor
    # xarray, 0.5 s of its start
    import dask.array as da
    import xarray as xr

StorageOptions = s3.StorageOptions
# zarr's modes of opening a group: read, read-write, create or open, create, create if absent.
AccessMode = Literal["r", "r+", "a", "w", "w-"]

# seisctf writes consolidated metadata on purpose (one read opens a store over object storage).
warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


def parse_storage_options(pairs: Sequence[str] | None) -> s3.CredentialedOptions:
    """`["endpoint_url=http://127.0.0.1:8333", "anon=false"]` -> fsspec storage options.

    Values are parsed as JSON where they can be (numbers, booleans, objects), else kept as text.
    A dotted key (`client_kwargs.region_name=x`) builds a nested dict. Credentials (`key=`,
    `secret=`, ...: `s3.CREDENTIAL_OPTIONS`) are held apart, in this process only: no Dask
    task carries them (`s3.CredentialedOptions`).
    """
    options: StorageOptions = {}
    for pair in pairs or ():
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(
                f"{{storage_options}} {pair!r}",
                "expected KEY=VALUE",
                parameters=["storage_options"],
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        target = options
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return s3.CredentialedOptions(options)


def join(url: str, *parts: str) -> str:
    return "/".join([str(url).rstrip("/"), *parts])


def open_group(location: StoreLocation, mode: AccessMode = "r") -> zarr.Group:
    """Open a zarr v3 group; a missing store or a misspelt URL (`urls.checked`) is bad input
    naming the URL."""
    url = urls.checked(location.url)
    try:
        return zarr.open_group(
            url, mode=mode, storage_options=location.options, zarr_format=3 if mode != "r" else None
        )
    except (FileNotFoundError, zarr.errors.GroupNotFoundError) as error:
        bucket, options = s3.bucket_of(url), location.storage_options
        on_s3 = url.startswith(("s3://", "s3a://"))
        if on_s3 and s3.bucket_exists(bucket, options) is False:
            raise InvalidInput(url, s3.no_bucket(bucket, options)) from None
        raise InvalidInput(url, f"no zarr group found there ({error})") from None


def finish_group(location: StoreLocation, attrs: Mapping[str, Any]) -> None:
    """Consolidate a group's metadata, then write its attrs and mark it complete: always last.

    The attrs and the marker go in by one write of the group's `zarr.json` that also holds the
    consolidated metadata (one object: atomic on object stores; on local disks zarr writes a
    temporary file and renames it), so no reader sees a store marked complete without its
    metadata. One write of the attrs, not three: an ingest's attrs list every input file (25 MB
    of JSON at 10^5 files), and each write of them costs ~5x their size in the client's memory."""
    group = open_group(location, mode="r+")
    zarr.consolidate_metadata(group.store)
    consolidated = zarr.open_group(group.store, mode="r+", zarr_format=3, use_consolidated=True)
    update = {key: value for key, value in attrs.items() if key != conventions.ATTR_COMPLETE}
    consolidated.attrs.update({**update, conventions.ATTR_COMPLETE: True})


def require_complete(group: zarr.Group, url: str) -> zarr.Group:
    if not group.attrs.get(conventions.ATTR_COMPLETE, False):
        raise InvalidInput(str(url), "store is incomplete (its writer did not finish); re-run it")
    return group


# Sizes an array's metadata may declare before anything lazy is built over it. Opening costs
# memory per chunk along each axis, not per chunk of the grid (`chunk_grid`): Dask keeps each
# axis's chunk sizes and their running sums, ~80 bytes a chunk once a selection is made, so an
# array of more chunks along its axes together (a grid of a × b chunks counts a + b) would need
# gigabytes to open. A chunk this large cannot be decoded. seisctf's own stores stay far below:
# 552 stations × 25 years at 100 Hz in 2**18-sample chunks is 552 + 1 + 300,957 chunks along
# its axes (1.7e8 chunks in all), chunks are at most tens of MiB.
MAX_CHUNKS_ALONG_AXES = 2**25
MAX_DECLARED_CHUNK_BYTES = 2**31


def check_declared_sizes(array: zarr.Array, what: str) -> zarr.Array:
    """Refuse an array whose metadata declares absurdly many chunks along its axes, or chunks
    of an absurd size."""
    chunks = tuple(array.chunks)
    along_axes = chunk_grid.chunks_along_axes(tuple(array.shape), chunks)
    chunk_bytes = math.prod(getattr(array, "shards", None) or chunks) * array.dtype.itemsize
    if along_axes > MAX_CHUNKS_ALONG_AXES or chunk_bytes > MAX_DECLARED_CHUNK_BYTES:
        raise InvalidInput(
            what,
            f"metadata declares shape {tuple(array.shape)} in chunks {chunks}: {along_axes} "
            f"chunks along its axes, of {chunk_bytes} bytes (limits {MAX_CHUNKS_ALONG_AXES} "
            f"chunks along the axes together, {MAX_DECLARED_CHUNK_BYTES} bytes)",
        )
    return array


def write_dataset(
    dataset: xr.Dataset,
    location: StoreLocation,
    *,
    label: str = "write",
    quiet: bool = False,
    compress: bool = True,
) -> None:
    """Write a (lazy) Dataset as a zarr v3 store, chunk-aligned, attrs and marker last.
    Numeric variables use `conventions.DATA_CODEC`; `compress=False`: no compressor (scratch
    stores, written and read once)."""
    attrs = dict(dataset.attrs)
    dataset = dataset.copy()
    dataset.attrs = {}
    for name in dataset.variables:
        dataset[name].encoding.pop("chunks", None)
    encoding = {
        str(name): {"compressors": conventions.data_compressor() if compress else None}
        for name, variable in dataset.data_vars.items()
        if variable.dtype.kind in "biufc"
    }
    compute(start_dataset(dataset, location, encoding), label=label, quiet=quiet)
    finish_group(location, attrs)


def start_dataset(
    dataset: xr.Dataset, location: StoreLocation, encoding: Mapping[str, Mapping[str, Any]]
) -> Any:
    """Create the zarr v3 store at `location` for `dataset` (replacing one there): its metadata
    and numpy-backed variables now, not marked complete; returns the Delayed that writes the
    Dask-backed ones (compute it, or write their chunks yourself), then call `finish_group`.
    A misspelt URL is bad input (`urls.checked`)."""
    return dataset.to_zarr(
        urls.checked(location.url),
        mode="w",
        compute=False,
        zarr_format=3,
        consolidated=False,
        storage_options=location.options,
        encoding=dict(encoding),
    )


def open_dataset(location: StoreLocation) -> xr.Dataset:
    """Open a complete seisctf store lazily (Dask-backed) with xarray."""
    import xarray as xr

    url = location.url
    group = require_complete(open_group(location), url)
    for name, array in group.arrays():
        check_declared_sizes(array, join(url, name))
    lazy = xr.open_dataset(
        url,
        engine="zarr",
        chunks=None,
        cache=False,
        storage_options=location.options,
        consolidated=True,
        zarr_format=3,
    )
    # Dask arrays in the stored chunks, as `chunks={}, inline_array=True` gives them, without
    # their per-chunk bookkeeping (`chunk_grid`): chunk reads inlined, each a root task the
    # scheduler queues, instead of every read depending on one shared array task and running far
    # ahead of its consumers. The name changes with a local store's modification time, as
    # xarray's does.
    modified = None
    if not location.is_remote:
        with contextlib.suppress(OSError):
            modified = os.path.getmtime(url.removeprefix("file://"))
    opened = chunk_grid.with_dask_variables(lazy, tokenize(url, modified))
    if conventions.STATION_ATTRS_GROUP in group:  # where older stores had them
        opened.attrs.update(station_attrs(group))
    return opened


def station_attrs(
    group: zarr.Group, names: Sequence[str] = conventions.STATION_ATTRS
) -> dict[str, dict[str, Any]]:
    """{name: {station: entry}} of the per-station attrs `names` (`conventions.STATION_ATTRS`)
    of the waveform store `group` (open): from its group `conventions.STATION_ATTRS_GROUP`
    (JSON text a station), else from its root attrs (a store ingested before that group). A
    name the store has neither way is left out."""
    if conventions.STATION_ATTRS_GROUP not in group:
        root = cast(Mapping[str, dict[str, Any]], group.attrs)  # objects keyed by station
        return {name: root[name] for name in names if name in root}
    held = group[conventions.STATION_ATTRS_GROUP]
    if not isinstance(held, zarr.Group):
        raise InvalidInput(conventions.STATION_ATTRS_GROUP, "is an array, not a group")
    ids = np.asarray(group_array(group, conventions.STATION, conventions.STATION)[:])
    stations = [str(station) for station in ids.tolist()]
    return {
        name: dict(zip(stations, map(json.loads, np.asarray(group_array(held, name, name)[:])
                                     .tolist()), strict=True))
        for name in names
        if name in held
    }  # fmt: skip


def write_arrays(
    arrays: Mapping[str, da.Array],
    location: StoreLocation,
    attrs: Mapping[str, Any],
    *,
    chunks: Mapping[str, tuple[int, ...]] | None = None,
    label: str = "write",
    quiet: bool = False,
    finish: bool = True,
) -> None:
    """Write named Dask arrays as arrays of one zarr v3 group (a CTF bundle or submission).

    Each array is rechunked to its zarr chunks (given, or `time_space_chunks` of its shape) so
    every write task owns whole chunks; the group's attrs and completion marker go last (unless
    `finish` is False: the caller then calls `finish_group` once it has all the attrs). Every
    chunk is stored, also one equal to the fill value: a referee refuses missing chunks.
    """
    group = open_group(location, mode="w")
    targets, sources = [], []
    for name, array in arrays.items():
        array_chunks = (chunks or {}).get(name) or conventions.time_space_chunks(
            array.shape[0], array.shape[1], itemsize=array.dtype.itemsize
        )
        target = group.create_array(
            name,
            shape=array.shape,
            chunks=array_chunks,
            dtype=array.dtype,
            fill_value=0,
            compressors=conventions.data_compressor(),
            config={"write_empty_chunks": True},  # every chunk stored: none reads as fill
        )
        targets.append(target)
        sources.append(array.rechunk(array_chunks))
    if sources:
        # dask types the targets as numpy-like arrays; any object taking `[region] = values`
        # is one to `da.store`, zarr's arrays among them.
        import dask.array as da

        writes = da.store(sources, targets, lock=False, compute=False)  # type: ignore[arg-type]
        compute(writes, label=label, quiet=quiet)
    if finish:
        finish_group(location, attrs)


def read_array(location: StoreLocation, name: str) -> da.Array:
    """One array of a zarr group as a Dask array with the stored chunks."""
    import dask.array as da

    group = open_group(location)
    if name not in group:
        raise InvalidInput(f"{location}/{name}", "array not found in the group")
    array = group_array(group, name, f"{location}/{name}")
    return da.from_zarr(check_declared_sizes(array, f"{location}/{name}"))


def group_array(group: zarr.Group, name: str, what: str) -> zarr.Array:
    """The array `name` of `group`; InvalidInput naming `what` when `name` holds a group."""
    array = group[name]
    if not isinstance(array, zarr.Array):
        raise InvalidInput(what, "is a group, not an array")
    return array


def read_attrs(location: StoreLocation) -> dict[str, Any]:
    """The attrs of a complete group."""
    group = require_complete(open_group(location), location.url)
    return dict(group.attrs)
