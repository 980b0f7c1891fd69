"""The sources a recipe can name (generators, existing stores, the ingests), and the helpers of
its `picking` output. Each source is `function(context, **parameters) -> xr.Dataset`, with
`context` the build's `seisctf.recipes.context.BuildContext` (its secret, storage options, URL
resolution, and for ingest sources the store they write, `context.source_url`); `recipe.SOURCES`
names them. """

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xarray as xr

from seisctf import keys, storage
from seisctf.errors import InvalidInput
from seisctf.recipes.context import BuildContext

# --- sources ------------------------------------------------------------------------------------


def synthetic_global(
    context: BuildContext,
    *,
    sensors: int = 2048,
    duration_s: float = 3000.0,
    sampling_rate_hz: float = 1.0,
    seed: int | None = None,
) -> xr.Dataset:
    """The offline global wavefield (`seisctf.recipes.synth.global_wavefield`), seed from the
    secret."""
    from seisctf.recipes.synth.global_wavefield import synthesize_global

    if seed is None:
        seed = keys.derive_seed(context.require_secret("source.synthetic_global"), "synth/global")
    return synthesize_global(
        n_sensors=sensors, duration_s=duration_s, sampling_rate_hz=sampling_rate_hz, seed=seed
    )


def synthetic_das(context: BuildContext, *, seed: int | None = None, **options: Any) -> xr.Dataset:
    """The offline ocean-bottom DAS record (`das_wavefield.synthetic_das_record`): ten
    realisations, one per guarded slot of the recipe's CTF layout (`splits.ctf.layout`, default
    `das`); seed from the secret."""
    from seisctf.pipeline.bundles.das_wavefield import synthetic_das_record

    if seed is None:
        seed = keys.derive_seed(context.require_secret("source.synthetic_das"), "synth/das")
    return synthetic_das_record(layout=context.layout or "das", seed=seed, **options)


# Parameters of the `synthetic_crustal` source besides `sensors`, `perturbation_std`, `medium`,
# `seed` (schema in recipe.py).
CRUSTAL_COUNTS = ("parametric", "initial_conditions")
CRUSTAL_POSITIVE = (
    "sensor_spacing_m",
    "sampling_rate_hz",
    "duration_s",
    "spacing_m",
    "depth_m",
    "correlation_length_m",
)


def synthetic_crustal(
    context: BuildContext,
    *,
    sensors: int = 94 * 94,
    sampling_rate_hz: float = 100.0,
    duration_s: float | None = None,
    medium: str = "von_karman",
    seed: int | None = None,
    **options: Any,
) -> xr.Dataset:
    """The crustal surface wavefields (`seisctf.recipes.synth.crustal.sweep.crustal_store`): a
    square grid of `sensors`; the duration is the recipe's CTF layout's (`splits.ctf.layout`,
    default `crustal`) at the rate unless given; seed from the secret."""
    from seisctf.pipeline.bundles.layouts import load_layout
    from seisctf.recipes.synth.crustal.sweep import crustal_store, isqrt_sensors

    if seed is None:
        seed = keys.derive_seed(context.require_secret("source.synthetic_crustal"), "synth/crustal")
    if duration_s is None:
        duration_s = load_layout(context.layout or "crustal").required_steps / sampling_rate_hz
    return crustal_store(
        seed=seed,
        grid=isqrt_sensors(sensors),
        sampling_rate_hz=sampling_rate_hz,
        duration_s=duration_s,
        medium_kind=medium,
        **options,
    )


def existing_store(context: BuildContext, *, url: str) -> xr.Dataset:
    """A complete seisctf store, opened lazily."""
    return storage.open_dataset(context.resolve(url), context.storage_options)


def _report_problems(context: BuildContext, problems: list[str]) -> None:
    if not context.quiet:
        for problem in problems:
            print(f"problem: {problem}")


def waveform_archive(
    context: BuildContext,
    *,
    sources: list[str],
    inventory: list[str] = (),
    store: str | None = None,
    **options: Any,
) -> xr.Dataset:
    """`seisctf ingest waveforms` of `sources` (paths, globs, folders, fsspec URLs) into the
    continuous waveform store at `context.source_url`, opened lazily."""
    from seisctf.recipes.ingest.waveforms import ingest_waveforms

    report = ingest_waveforms(
        [context.resolve(item) for item in sources],
        context.source_url,
        inventories=[context.resolve(item) for item in inventory],
        storage_options=context.storage_options,
        quiet=context.quiet,
        **options,
    )
    _report_problems(context, report.problems)
    return storage.open_dataset(context.source_url, context.storage_options)


def das_files(
    context: BuildContext, *, sources: list[str], store: str | None = None, **options: Any
) -> xr.Dataset:
    """`seisctf ingest das` of `sources` into the DAS store at `context.source_url`, opened."""
    from seisctf.recipes.ingest.das_files import ingest_das

    report = ingest_das(
        [context.resolve(item) for item in sources],
        context.source_url,
        storage_options=context.storage_options,
        quiet=context.quiet,
        **options,
    )
    _report_problems(context, report.problems)
    return storage.open_dataset(context.source_url, context.storage_options)


_SEISBENCH_REQUEST = "seisctf_recipe_seisbench"  # attr: the ingest's requested rate


def seisbench_dataset(
    context: BuildContext, *, path: str, rate: float | None = None, store: str | None = None
) -> xr.Dataset:
    """`seisctf ingest seisbench` of the dataset folder `path` into the event-window store at
    `context.source_url`, opened. Skipped when that store is complete, was made from the same
    files (sha256) and asked for the same rate."""
    from seisctf.catalogs import event_windows as ew
    from seisctf.catalogs.seisbench_format import _files, ingest_seisbench

    folder = Path(context.resolve(path))
    url = context.source_url
    _, metadata_paths, waveform_paths = _files(folder)
    inputs = [
        ew.input_entry(file)
        for file in (*metadata_paths, *waveform_paths, folder / "chunks")
        if file.is_file()
    ]
    try:
        attrs = storage.read_attrs(url, context.storage_options)
    except InvalidInput:
        attrs = {}
    request = {"rate": rate}
    if attrs.get("inputs") != inputs or attrs.get(_SEISBENCH_REQUEST) != request:
        ingest_seisbench(
            str(folder),
            url,
            rate=rate,
            storage_options=context.storage_options,
            quiet=context.quiet,
        )
        storage.finish_group(url, {_SEISBENCH_REQUEST: request}, context.storage_options)
    return storage.open_dataset(url, context.storage_options)


def source_store_url(data: Mapping[str, Any], context: BuildContext) -> str:
    """Where an ingest source writes: its `store:`; for a SeisBench source feeding a `picking`
    output, that output's URL (ingested and split in place); else the private output (the
    bundle's truth, else the store, else the picking store) + `.source.zarr`."""
    ((name, values),) = data["source"].items()
    outputs = data["outputs"]
    if (values or {}).get("store"):
        return context.resolve(values["store"])
    if name == "seisbench" and "picking" in outputs:
        return context.resolve(outputs["picking"]["url"])
    private = (
        outputs.get("ctf_bundle", {}).get("truth")
        or outputs.get("store", {}).get("url")
        or outputs["picking"]["url"]
    )
    return context.resolve(private).rstrip("/") + ".source.zarr"


# --- picking output helpers -------------------------------------------------------------------


def split_options(values: Mapping[str, Any]):
    """`outputs.picking.split` → checked `splits.SplitOptions` (InvalidInput if inconsistent)."""
    from seisctf.pipeline.splits import SplitOptions

    options = dict(values)
    for key in ("fractions", "budgets"):
        if key in options:
            options[key] = tuple(options[key])
    return SplitOptions(**options).checked()


def _copy_store(source: str, target: str, context: BuildContext) -> None:
    """A byte copy of the store at `source` (any fsspec URL) to `target`, replacing it, with
    its Parquet catalogue (an event-window store's, `catalogs/NAME.parquet` beside it)."""
    import fsspec

    def mapper(url: str):
        return fsspec.get_mapper(url, **(storage.options_for(url, context.storage_options) or {}))

    origin, destination = mapper(source), mapper(target)
    if destination.fs.exists(destination.root):
        destination.fs.rm(destination.root, recursive=True)
    for key in origin:
        destination[key] = origin[key]
    if storage.read_attrs(source, context.storage_options).get("catalog"):
        # An event-window store's Parquet catalogue lives beside it, named after it.
        from seisctf.catalogs import event_windows

        catalog = event_windows.read_catalog(source, context.storage_options)
        event_windows.write_catalog(catalog, target, context.storage_options)
        attrs = {"catalog": event_windows.relative_catalog_path(target)}
        storage.finish_group(target, attrs, context.storage_options)
