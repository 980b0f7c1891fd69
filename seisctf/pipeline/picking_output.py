"""The `picking` recipe output, registered in `OUTPUTS`: an event-window store (the source's,
copied unless it is the same store) split in place for picking (`splits.split_store`), with
its leakage audit also written as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.build.provenance import provenance, up_to_date
from seisctf.catalogs import event_windows
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.options import Location, option
from seisctf.pipeline.splits import ATTR_SPLIT_AUDIT, SplitOptions, split_store
from seisctf.plugins.context import BuildContext
from seisctf.plugins.schema import RecipeText
from seisctf.registry import INGESTS, OUTPUTS


def event_window_sources() -> tuple[str, ...]:
    """Sources whose data is an event-window store (what `picking` takes)."""
    return (*(entry.name for entry in INGESTS.entries() if entry.event_windows), "store")


def split_options(values: Mapping[str, Any]) -> SplitOptions:
    """`outputs.picking.split` → checked `splits.SplitOptions` (InvalidInput if inconsistent)."""
    options = dict(values)
    for key in ("fractions", "budgets"):
        if key in options:
            options[key] = tuple(options[key])
    return SplitOptions(**options).checked()


def check_picking(recipe: RecipeText) -> None:
    """A picking output takes an event-window source as it is (no transforms) and consistent
    split options; InvalidInput naming the line otherwise."""
    data = recipe.data
    ((source_name, _),) = data["source"].items()
    sources = event_window_sources()
    if source_name not in sources:
        raise recipe.error(
            ("outputs", "picking"),
            f"needs an event-window source (one of {list(sources)}), not {source_name!r}",
        )
    if data.get("transforms"):
        raise recipe.error(
            ("transforms",),
            "picking takes the event windows as they are: transforms apply to time series",
        )
    try:
        split_options(data["outputs"]["picking"]["split"])
    except InvalidInput as error:
        raise recipe.error(("outputs", "picking", "split"), error.problem) from None


def copy_store(source: StoreLocation, target: StoreLocation) -> None:
    """A byte copy of the store at `source` (any fsspec URL) to `target`, replacing it, with
    its Parquet catalogue (an event-window store's: inside it, or beside it for a store of an
    earlier version; the copy's is inside)."""

    def mapper(location: StoreLocation):
        return fsspec.get_mapper(location.url, **(location.options or {}))

    origin, destination = mapper(source), mapper(target)
    if destination.fs.exists(destination.root):
        destination.fs.rm(destination.root, recursive=True)
    for key in origin:
        destination[key] = origin[key]
    if storage.read_attrs(source).get("catalog"):
        # Copied with the bytes when inside the store; an earlier version's kept it beside.
        event_windows.write_catalog(event_windows.read_catalog(source), target)
        storage.finish_group(target, {"catalog": event_windows.CATALOG_PATH})


@dataclass(frozen=True, kw_only=True)
class PickingOptions:
    """A recipe's options of the `picking` output."""

    url: Location = option(help="the event-window store split for picking (private)")
    split: SplitOptions = option(help="the split's options (`seisctf split`'s)")
    audit: Location = option(None, "the leakage audit, also written as JSON here")


@OUTPUTS.register(
    "picking",
    options=PickingOptions,
    private="url",
    check=check_picking,
)
def picking_output(
    recipe: RecipeText, context: BuildContext, dataset: Callable[[], xr.Dataset]
) -> None:
    """An event-window store split for picking (`seisctf split`), with its leakage audit.

    The store at `picking.url` (the source's, copied unless it is the same store) is split in
    place with the recipe's options; the audit is also written as JSON to `picking.audit`."""
    spec = recipe.data["outputs"]["picking"]
    url = context.resolve(spec["url"])
    store = context.location(url)
    record = provenance(recipe, context, ("source",), "picking")
    if up_to_date(url, record["fingerprint"], context):
        context.report.skipped.append(url)
    else:
        try:
            source_url = context.require_source_url()
            if url.rstrip("/") != source_url.rstrip("/"):
                copy_store(context.location(source_url), store)
            split_store(store, split_options(spec["split"]), quiet=context.quiet)
        except InvalidInput as error:
            raise recipe.error(("outputs", "picking"), str(error)) from None
        storage.finish_group(store, {cv.ATTR_PROVENANCE: record})
        context.report.written.append(url)
    if spec.get("audit"):
        audit_file = context.location(context.resolve(spec["audit"]))
        audit = storage.read_attrs(store)[ATTR_SPLIT_AUDIT]
        with fsspec.open(audit_file.url, "w", **(audit_file.options or {})) as handle:
            handle.write(json.dumps(audit, indent=2))
