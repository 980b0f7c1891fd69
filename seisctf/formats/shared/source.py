"""What the ingest recipe sources share: where an ingest writes (`source_store_url`), their
common options' types, and opening the store once it is written.

An ingest source (a `seisctf.registry.Ingest`, registered in `INGESTS`) is
`function(context: BuildContext, **options) -> xr.Dataset`: it ingests into
`context.source_url`, which the engine sets with `source_store_url` before calling it (the
recipe's `store:` option is the engine's, never passed on), and returns the store, opened. The
ingests are idempotent: a re-run writes nothing when the inputs are unchanged (by their hashes;
a waveform store's re-run hashes only the files whose size or modification differ from its
`inputs` table, `input_manifest`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.options import Location, spec
from seisctf.plugins.context import BuildContext
from seisctf.registry import INGESTS

if TYPE_CHECKING:  # an annotation only: the ingest's client need not import xarray
    import xarray as xr

# Options the ingests' options dataclasses share (every ingest also takes `store`, where it
# writes: `registry.INGESTS`' common option, `source_store_url`).
# Inputs of an ingest: paths, globs, folders or fsspec URLs, at least one.
InputPaths = Annotated[
    list[Location], spec("input files: paths, globs, folders or fsspec URLs", min_items=1)
]
# Station inventories (StationXML or any format obspy reads): paths or URLs.
Inventories = Annotated[list[Location], spec("station inventories (any obspy format)")]
# A resumable ingest's block: time samples a chunk and a task.
BlockSamples = Annotated[int, spec("time samples a chunk and a task", minimum=1)]
# A bad input is an error, not a problem reported.
Strict = Annotated[bool, spec("any bad input is an error (else a problem, skipped)")]


def source_store_url(data: Mapping[str, Any], context: BuildContext) -> str:
    """Where an ingest source writes: its `store:`; for an event-window source (property
    `event_windows`: SeisBench, STEAD, QuakeML) feeding a `picking` output, that output's URL
    (ingested and split in place); else the private output (the bundle's truth, else the store,
    else the picking store) + `.source.zarr`."""
    ((name, values),) = data["source"].items()
    outputs = data["outputs"]
    if (values or {}).get("store"):
        return context.resolve(values["store"])
    if "picking" in outputs and name in INGESTS and INGESTS[name].event_windows:
        return context.resolve(outputs["picking"]["url"])
    private = (
        outputs.get("ctf_bundle", {}).get("truth")
        or outputs.get("store", {}).get("url")
        or outputs["picking"]["url"]
    )
    return context.resolve(private).rstrip("/") + ".source.zarr"


def opened_source(context: BuildContext, problems: Sequence[str] = ()) -> xr.Dataset:
    """The store at `context.source_url`, opened lazily, after printing the ingest's problems
    (unless quiet)."""
    if not context.quiet:
        for problem in problems:
            print(f"problem: {problem}")
    return storage.open_dataset(context.location(context.require_source_url()))


def ingest_unless_done(
    context: BuildContext,
    name: str,
    inputs: Sequence[Mapping[str, Any]],
    request: Mapping[str, Any],
    ingest: Callable[[], Any],
) -> None:
    """Run `ingest` (which writes the store at `context.source_url`) unless that store is
    complete, was made from the same `inputs` (its `inputs` attr: path, size, sha256 of each
    file) and asked for the same `request` (recorded in the attr `seisctf_recipe_NAME`)."""
    store = context.location(context.require_source_url())
    try:
        attrs = storage.read_attrs(store)
    except InvalidInput:
        attrs = {}
    key = f"seisctf_recipe_{name}"
    if attrs.get("inputs") != list(inputs) or attrs.get(key) != dict(request):
        ingest()
        storage.finish_group(store, {key: dict(request)})
