"""`seisctf subset STORE --query QUERY --out URL`: a new event-window store of the traces a
query selects, with provenance naming the parent and the query.

Why a copy of the selected windows, not references (docs/contract.md, "Subsets"): zarr v3 has
no reference to another store's chunk (a virtual reference store, kerchunk style, is not a zarr
store that TensorStore, `open_event_windows` or `engine="seisctf"` open, and it breaks when the
parent moves); and copying whole shards would carry every other window of a shard along, so the
subset's `trace` axis would no longer be the selection. So the subset reads exactly its windows
from the parent (their chunks' byte ranges inside the parent's shards; a shard without a
selected window is never read) and writes them packed, in store order, into new shards of the
parent's layout and codec with the event-window writer (`write_event_windows`: whole shards per
task, Parquet catalogue, attrs and the completion marker last). Each window keeps its values
to the bit; the subset is a store of its own (the parent may move or go).

Per-trace values are the parent's rows of the selection (same names, dtypes, coordinates and
variables, `split` included), plus the coordinate `parent_trace_index` (int64: the window's
position in the parent). Attrs: the parent's (minus `split_audit`, which counts the parent's
traces, `layout` and `catalog`, rewritten), `seisctf_version` of this writer, and `subset`
(`SUBSET_KEYS`): the parent URL, the query, the counts, and the parent's version,
fingerprint, catalogue sha256 and inputs where it has them.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows as ew
from seisctf.catalogs.trace_query import select_traces
from seisctf.catalogs.trace_table import read_trace_table
from seisctf.errors import InvalidInput
from seisctf.location import LocationLike, StoreLocation

PARENT_TRACE_INDEX = "parent_trace_index"
ATTR_SUBSET = "subset"
SUBSET_KEYS = (
    "parent",
    "query",
    "parent_traces",
    "traces",
    "parent_seisctf_version",
    "parent_catalog_sha256",
    "parent_fingerprint",
    "parent_inputs",
)
# Parent attrs the subset does not keep as they are: rewritten by the writer, or about the
# parent's traces only.
REWRITTEN_ATTRS = ("layout", "catalog", cv.ATTR_SPLIT_AUDIT, cv.ATTR_COMPLETE)


def location(url: str) -> str:
    """A URL or path in one spelling, to compare two: local paths absolute and resolved."""
    text = str(url).rstrip("/")
    if text.startswith("file://") or "://" not in text:
        return str(Path(text.removeprefix("file://")).resolve())
    scheme, rest = text.split("://", 1)
    return f"{scheme}://{posixpath.normpath(rest)}"


def refuse_overlap(parent: str, out: str) -> None:
    """The output must be neither the parent, nor inside it, nor around it."""
    a, b = location(parent), location(out)
    if a == b or b.startswith(a + "/") or a.startswith(b + "/"):
        raise InvalidInput(out, f"is (or holds, or lies inside) the parent store {parent}")


def refuse_existing(out: StoreLocation, overwrite: bool) -> None:
    """Anything at `out` is refused unless `overwrite`: a subset never replaces data silently."""
    if overwrite:
        return
    fs, path = out.filesystem()
    if fs.exists(path):
        raise InvalidInput(out.url, "exists already; choose another --out or give --overwrite")


def parent_layout(attrs: dict[str, Any], n_channel: int, n_sample: int) -> ew.WindowLayout:
    """The parent's window layout (attr `layout`), else the default for its shape; a parent
    with several windows per chunk gets one window per chunk (the subset packs windows)."""
    recorded = attrs.get("layout")
    if not isinstance(recorded, dict) or not recorded:
        return ew.choose_layout(n_channel, n_sample)
    return ew.WindowLayout(
        chunk_traces=1,
        shard_traces=recorded.get("shard_traces") or None,
        compress=bool(recorded.get("compress", True)),
    )


def catalog_order(parent: StoreLocation, names: list[str]) -> list[str]:
    """`names` in the order of the parent catalogue's columns (the order its writer gave the
    metadata; zarr lists arrays by name), names it lacks after them."""
    try:
        columns = [str(c) for c in ew.read_catalog(parent).columns]
    except InvalidInput:  # no catalogue (a store of an earlier version): zarr's order
        columns = []
    return [c for c in columns if c in names] + [n for n in names if n not in columns]


def read_selected(parent: StoreLocation, indices: np.ndarray) -> np.ndarray:
    """The parent's windows at `indices` (ascending), float32 (trace, channel, sample): zarr
    reads only their chunks (byte ranges of the parent's shards)."""
    group = storage.open_group(parent)
    array = storage.group_array(group, cv.EVENT_WINDOWS_VAR, parent.url)
    return np.asarray(
        array.get_orthogonal_selection((indices, slice(None), slice(None))), dtype=np.float32
    )


def catalog_sha256(parent: StoreLocation) -> str | None:
    """Hex SHA-256 of the parent's Parquet catalogue bytes, None if it has none."""
    fs, path = ew.find_catalog(parent).filesystem()
    if not fs.exists(path):
        return None
    digest = hashlib.sha256()
    with fs.open(path, "rb") as file:
        for block in iter(lambda: file.read(2**22), b""):
            digest.update(block)
    return digest.hexdigest()


def provenance(
    parent: StoreLocation, query: str, opened: xr.Dataset, n_selected: int
) -> dict[str, Any]:
    """The subset's attr `subset` (`SUBSET_KEYS`; None where the parent has no such record)."""
    recorded = opened.attrs.get(cv.ATTR_PROVENANCE) or {}
    return {
        "parent": parent.url,
        "query": str(query),
        "parent_traces": int(opened.sizes[cv.TRACE]),
        "traces": int(n_selected),
        "parent_seisctf_version": opened.attrs.get("seisctf_version"),
        "parent_catalog_sha256": catalog_sha256(parent),
        "parent_fingerprint": recorded.get("fingerprint") if isinstance(recorded, dict) else None,
        "parent_inputs": opened.attrs.get("inputs"),
    }


def subset_dataset(
    parent: StoreLocation, query: str, *, quiet: bool = False
) -> tuple[xr.Dataset, ew.WindowLayout]:
    """The subset as a lazy Dataset (waveforms: one Dask task per output block of whole
    shards) and its layout; the per-trace values in memory. Bad input raises here, before
    anything is written."""
    opened = cv.validate_event_window_store(storage.open_dataset(parent), parent.url)
    table = read_trace_table(opened, quiet=quiet)
    selected = select_traces(table, query, parent.url)
    _, n_channel, n_sample = opened[cv.EVENT_WINDOWS_VAR].shape
    layout = parent_layout(opened.attrs, n_channel, n_sample)
    per_task = ew.task_traces(layout, n_channel, n_sample)
    waveforms = ew.lazy_windows(
        read_selected,
        lambda start, stop: (parent, selected[start:stop]),
        (len(selected), n_channel, n_sample),
        per_task,
        "subset-windows",
    )
    per_trace = opened.drop_vars(cv.EVENT_WINDOWS_VAR).isel({cv.TRACE: selected})
    per_trace = per_trace.compute(scheduler="sync")
    order = catalog_order(parent, [str(name) for name in per_trace.variables])
    subset = xr.Dataset(
        {cv.EVENT_WINDOWS_VAR: (cv.EVENT_WINDOWS_DIMS, waveforms)}
        | {name: per_trace[name].variable for name in order if name in per_trace.data_vars},
        coords={name: per_trace[name].variable for name in order if name in per_trace.coords}
        | {PARENT_TRACE_INDEX: (cv.TRACE, selected)},
    )
    attrs = {k: v for k, v in opened.attrs.items() if k not in REWRITTEN_ATTRS}
    attrs["seisctf_version"] = ew.seisctf_version()
    attrs[ATTR_SUBSET] = provenance(parent, query, opened, len(selected))
    subset.attrs = attrs
    return subset, layout


def subset_event_windows(
    url: LocationLike,
    query: str,
    out: LocationLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    overwrite: bool = False,
    quiet: bool = False,
) -> xr.Dataset:
    """Write the traces of the event-window store at `url` that `query` selects (a pandas
    query on its metadata, `trace_query`) as a new event-window store at `out` (module doc);
    returns the subset as written. `url` and `out`: paths or fsspec URLs with
    `storage_options`, or `StoreLocation`s. Bad input (no store, a bad query, an empty
    selection, `out` the parent or existing without `overwrite`) raises InvalidInput before
    anything is written; an interrupted write is never marked complete."""
    parent = StoreLocation.from_url(url, storage_options)
    target = StoreLocation.from_url(out, storage_options)
    refuse_overlap(parent.url, target.url)
    subset, layout = subset_dataset(parent, query, quiet=quiet)
    refuse_existing(target, overwrite)
    return ew.write_event_windows(
        subset, target, layout=layout, label="subset windows", quiet=quiet
    )
