"""`xr.open_dataset(url, engine="seisctf")`: the event-window store through its fast reader.

An xarray backend (registered in pyproject.toml under `xarray.backends`) whose `open_dataset`
is `event_windows.open_event_windows`: the same Dataset, `waveforms` lazily indexed (read
through TensorStore for local stores), the per-trace coordinates in memory. Users who only know
xarray get the batch reads of the training loop without importing seisctf.

    ds = xr.open_dataset("stead.zarr", engine="seisctf")
    ds = xr.open_dataset("s3://bucket/stead.zarr", engine="seisctf",
                         storage_options={"endpoint_url": ..., "key": ..., "secret": ...})

`guess_can_open` answers from a local store's metadata alone (its `waveforms/zarr.json` says
dims trace, channel, sample): guessing never contacts object storage, so a remote store is
opened by naming the engine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import xarray as xr
from xarray.backends import BackendEntrypoint

from seisctf import conventions as cv
from seisctf.catalogs.event_windows import open_event_windows


def local_store_path(filename_or_obj: Any) -> Path | None:
    """The local folder a path or `file://` URL names; None for any other URL or object."""
    if not isinstance(filename_or_obj, str | os.PathLike):
        return None
    text = os.fspath(filename_or_obj)
    if isinstance(text, bytes):
        return None
    if text.startswith("file://"):
        return Path(text.removeprefix("file://"))
    return None if "://" in text else Path(text)


def has_event_window_layout(path: Path) -> bool:
    """Whether the local folder `path` holds a zarr v3 array `waveforms` with dims (trace,
    channel, sample): the event-window layout (docs/contract.md, "Event-window store")."""
    metadata = path / cv.EVENT_WINDOWS_VAR / "zarr.json"
    try:
        document = json.loads(metadata.read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(document, dict)
        and document.get("node_type") == "array"
        and tuple(document.get("dimension_names") or ()) == cv.EVENT_WINDOWS_DIMS
    )


class SeisctfBackendEntrypoint(BackendEntrypoint):
    """Event-window stores (zarr v3, local or any fsspec URL) opened by `open_event_windows`."""

    description = (
        "seisctf event-window stores (zarr v3 waveforms(trace, channel, sample)): random "
        "batches of windows read through TensorStore"
    )
    url = "docs/contract.md#event-window-store"  # in the project's repository
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "storage_options")

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> xr.Dataset:
        """The complete event-window store at `filename_or_obj` (a path or fsspec URL) as
        `open_event_windows` opens it; `storage_options` as fsspec takes them (S3: endpoint_url,
        key, secret). An incomplete store, or one without the layout, is InvalidInput."""
        url = str(os.fspath(filename_or_obj))
        dataset = open_event_windows(url, storage_options)
        if drop_variables is not None:
            names = [drop_variables] if isinstance(drop_variables, str) else list(drop_variables)
            dataset = dataset.drop_vars(names, errors="ignore")
        return dataset

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        path = local_store_path(filename_or_obj)
        return path is not None and has_event_window_layout(path)
