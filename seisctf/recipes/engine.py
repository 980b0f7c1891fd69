"""`seisctf build RECIPE.yaml`: a declarative dataset recipe run on the active Dask cluster.

A recipe names a source, a chain of transforms applied to every variable with a time dim,
splits, and outputs (docs/recipes.md has the format and an example). Everything is validated
before any work (`recipe_schema`). Each output gets `ATTR_PROVENANCE`: the parts of the recipe
it depends on (secret and seeds withheld), package versions, a hash of the inputs, and a
fingerprint of all of that; an output whose complete store already carries the same fingerprint
is not rewritten, so re-running a recipe is a no-op and changing one parameter rewrites only the
outputs it affects. Chunks come from the data's shape and the recipe, never from the cluster.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.errors import InvalidInput
from seisctf.pipeline.transforms.rechunk import rechunk_for_store
from seisctf.recipes.checkpoint import remove_checkpoints, write_checkpoint
from seisctf.recipes.context import BuildContext
from seisctf.recipes.schema import (
    NUMBER,
    POSITIVE,
    POSITIVE_INT,
    SECONDS_WINDOW,
    URL,
    RecipeText,
    document_schema,
    parameters,
    read_recipe,
)
from seisctf.recipes.sources import (
    CRUSTAL_COUNTS,
    CRUSTAL_POSITIVE,
    _copy_store,
    source_store_url,
    split_options,
)

WITHHELD = "[withheld]"
SHIPPED = Path(__file__).resolve().parent / "shipped"  # recipes shipped in the package


@dataclass(frozen=True)
class Step:
    """A source, transform or output usable in a recipe: its import path and parameter schema.
    `seeded` transforms take `seed` (from the recipe, else derived from the secret) and
    `variable` (the variable they are applied to)."""

    target: str  # "module:function"
    schema: Mapping[str, Any]
    seeded: bool = False
    # Needs a whole-trace statistic of its input (a level, a mean): its input is checkpointed
    # to a scratch store first, so what feeds it runs once (see `apply_transforms`).
    two_pass: bool = False
    # Streams chunk by chunk at disk-read speed (taper, channel selection): recomputing it
    # costs less than a checkpoint's write and read, so it does not call for one.
    cheap: bool = False
    # "module:function" giving the samples of time (a slice) over which the transform takes
    # each trace's RMS, for its data and parameters; the checkpoint sums them as it writes and
    # the function then takes `trace_rms` (see `_checkpoint`).
    level_window: str | None = None
    # Turns the recipe's parameters into the function's (e.g. opens a store it names).
    prepare: Callable[[BuildContext, dict[str, Any]], dict[str, Any]] | None = None
    # A source that ingests files into a store (`BuildContext.source_url`) and opens it: run
    # first, since every output's provenance hashes the inputs the ingest recorded.
    ingest: bool = False

    def function(self) -> Callable[..., Any]:
        return _resolve(self.target)


def _resolve(target: str) -> Callable[..., Any]:
    """The function a "module:function" string names."""
    import importlib

    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


_LEVEL = {"snr_db": NUMBER, "rms_fraction": POSITIVE}
_SEED = {"seed": {"type": "integer", "minimum": 0}}
# false: the causal filter (forward only), see filters.py.
_ZERO_PHASE = {"zero_phase": {"type": "boolean"}}

SOURCES: dict[str, Step] = {
    "synthetic_global": Step(
        "seisctf.recipes.sources:synthetic_global",
        parameters(
            {
                "sensors": POSITIVE_INT,
                "duration_s": POSITIVE,
                "sampling_rate_hz": POSITIVE,
                **_SEED,
            }
        ),
    ),
    "synthetic_das": Step(
        "seisctf.recipes.sources:synthetic_das",
        parameters(
            {
                "channels": {"type": "integer", "minimum": 2},
                "channel_spacing_m": POSITIVE,
                "gauge_length_m": POSITIVE,
                "depth_profile": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2},
                },
                "sampling_rate_hz": POSITIVE,
                "ctf_rate_hz": POSITIVE,
                "earthquakes": {"type": "boolean"},
                "noise_rms": {"type": "number", "minimum": 0},
                **_SEED,
            }
        ),
    ),
    "synthetic_crustal": Step(
        "seisctf.recipes.sources:synthetic_crustal",
        parameters(
            {
                "sensors": POSITIVE_INT,
                **{name: {"type": "integer", "minimum": 0} for name in CRUSTAL_COUNTS},
                **{name: POSITIVE for name in CRUSTAL_POSITIVE},
                "perturbation_std": {"type": "number", "minimum": 0},
                "medium": {"enum": ["von_karman", "gaussian"]},
                **_SEED,
            }
        ),
    ),
    "store": Step("seisctf.recipes.sources:existing_store", parameters({"url": URL}, ("url",))),
}

# Ingest sources: the existing ingests into a store (`store:`, else next to the outputs, see
# `source_store_url`), then opened. The ingests are idempotent: a re-run re-hashes the inputs
# and writes nothing when they are unchanged.
_PATHS = {"type": "array", "items": URL, "minItems": 1}
_INGEST_STORE = {"store": URL, "block_samples": POSITIVE_INT}
SOURCES["waveform_archive"] = Step(
    "seisctf.recipes.sources:waveform_archive",
    parameters(
        {
            "sources": _PATHS,
            "inventory": {"type": "array", "items": URL},
            "rate": POSITIVE,
            "strict": {"type": "boolean"},
            "remove_response": {"enum": ["VEL", "DISP", "ACC"]},
            "pre_filt": {
                "anyOf": [
                    {"const": "auto"},
                    {"type": "null"},
                    {"type": "array", "items": POSITIVE, "minItems": 4, "maxItems": 4},
                ]
            },
            "water_level": {"type": ["number", "null"]},
            **_INGEST_STORE,
        },
        ("sources",),
    ),
    ingest=True,
)
SOURCES["das_files"] = Step(
    "seisctf.recipes.sources:das_files",
    parameters({"sources": _PATHS, "strict": {"type": "boolean"}, **_INGEST_STORE}, ("sources",)),
    ingest=True,
)
SOURCES["seisbench"] = Step(
    "seisctf.recipes.sources:seisbench_dataset",
    parameters({"path": URL, "rate": POSITIVE, "store": URL}, ("path",)),
    ingest=True,
)

TRANSFORMS: dict[str, Step] = {
    "butterworth": Step(
        "seisctf.pipeline.transforms.filters:butterworth",
        parameters(
            {
                "freqmin": POSITIVE,
                "freqmax": POSITIVE,
                "order": POSITIVE_INT,
                "tolerance": POSITIVE,
                **_ZERO_PHASE,
            }
        ),
    ),
    "detrend": Step(
        "seisctf.pipeline.transforms.filters:detrend",
        parameters({"kind": {"enum": ["constant", "linear"]}}),
    ),
    "taper": Step(
        "seisctf.pipeline.transforms.filters:taper",
        parameters({"max_percentage": {"type": "number", "minimum": 0, "maximum": 0.5}}),
    ),
    "decimate": Step(
        "seisctf.pipeline.transforms.filters:decimate",
        parameters({"factor": POSITIVE_INT, "tolerance": POSITIVE, **_ZERO_PHASE}, ("factor",)),
    ),
    "resample": Step(
        "seisctf.pipeline.transforms.filters:resample",
        parameters(
            {"sampling_rate": POSITIVE, "tolerance": POSITIVE, **_ZERO_PHASE}, ("sampling_rate",)
        ),
    ),
    "normalise": Step(
        "seisctf.pipeline.transforms.filters:normalise",
        parameters(
            {
                "method": {"enum": ["demean", "std", "peak"]},
                "windows": {"type": "array", "items": SECONDS_WINDOW},
            }
        ),
    ),
    "add_gaussian_noise": Step(
        "seisctf.pipeline.transforms.noise:add_gaussian_noise",
        parameters({**_LEVEL, "rms_window": SECONDS_WINDOW, **_SEED}),
        seeded=True,
        level_window="seisctf.pipeline.transforms.noise:gaussian_level_window",
    ),
    "add_coloured_noise": Step(
        "seisctf.pipeline.transforms.noise:add_coloured_noise",
        parameters(
            {
                "frequencies": {"type": "array", "items": NUMBER, "minItems": 2},
                "amplitudes": {"type": "array", "items": NUMBER, "minItems": 2},
                "numtaps": POSITIVE_INT,
                **_LEVEL,
                **_SEED,
            },
            ("frequencies", "amplitudes"),
        ),
        seeded=True,
    ),
}


def _open_noise_windows(context: BuildContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """`noise_store: URL` (an event-window store: `waveforms(trace, channel, sample)` with a
    `trace_category` coord) → the `noise` windows `add_real_noise` takes."""
    url = context.resolve(arguments.pop("noise_store"))
    store = storage.open_dataset(url, context.storage_options)
    if "waveforms" not in store:
        raise InvalidInput(url, "is not an event-window store (no `waveforms` variable)")
    windows = store["waveforms"]
    channel = arguments.pop("channel", None)
    if channel is not None:  # data without a channel dim takes one channel of the windows
        try:
            windows = (
                windows.isel(channel=channel)
                if isinstance(channel, int)
                else windows.sel(channel=channel)
            )
        except (KeyError, IndexError, ValueError) as error:
            raise InvalidInput(url, f"no channel {channel!r} ({error})") from None
    return {**arguments, "noise": windows}


TRANSFORMS["add_real_noise"] = Step(
    "seisctf.pipeline.transforms.noise:add_real_noise",
    parameters(
        {
            "noise_store": URL,
            "channel": {"type": ["string", "integer"]},
            **_LEVEL,
            "scale": POSITIVE,
            **_SEED,
        },
        ("noise_store",),
    ),
    seeded=True,
    prepare=_open_noise_windows,
)

# DAS transforms (pipeline/transforms/das_channels.py): on variables with `time` and `distance`.
TRANSFORMS["select_channels"] = Step(
    "seisctf.pipeline.transforms.das_channels:select_channels",
    parameters({"distance_min_m": NUMBER, "distance_max_m": NUMBER, "step": POSITIVE_INT}),
)
TRANSFORMS["spatial_decimate"] = Step(
    "seisctf.pipeline.transforms.das_channels:spatial_decimate",
    parameters({"factor": POSITIVE_INT, "tolerance": POSITIVE}, ("factor",)),
)
TRANSFORMS["convert_quantity"] = Step(
    "seisctf.pipeline.transforms.das_channels:convert_quantity",
    parameters({"to": {"enum": ["strain", "strain_rate"]}}, ("to",)),
)

# Transforms that take a whole-trace statistic of their input, and transforms cheap to redo.
for _name in ("detrend", "normalise", "add_gaussian_noise", "add_coloured_noise", "add_real_noise"):
    TRANSFORMS[_name] = replace(TRANSFORMS[_name], two_pass=True)
_DAS_CHEAP = ("select_channels", "spatial_decimate", "convert_quantity")
for _name in ("taper", "decimate", "resample", *_DAS_CHEAP):
    TRANSFORMS[_name] = replace(TRANSFORMS[_name], cheap=True)

OUTPUTS: dict[str, Mapping[str, Any]] = {
    "store": parameters(
        {
            "url": URL,
            "chunks": {"type": "object", "additionalProperties": POSITIVE_INT},
        },
        ("url",),
    ),
    "ctf_bundle": parameters({"public": URL, "truth": URL}, ("public", "truth")),
    # An event-window store split for picking (`seisctf split`), with its leakage audit.
    "picking": parameters(
        {
            "url": URL,
            "split": parameters(
                {
                    "strategy": {"enum": ["source-clusters", "station-disjoint", "event", "time"]},
                    "seed": {"type": "integer", "minimum": 0},
                    "fractions": {"type": "array", "items": NUMBER, "minItems": 3, "maxItems": 3},
                    "buffer_km": {"type": "number", "minimum": 0},
                    "n_clusters": POSITIVE_INT,
                    "test_clusters": POSITIVE_INT,
                    "dev_fraction": NUMBER,
                    "budgets": {"type": "array", "items": POSITIVE_INT},
                    "draws": POSITIVE_INT,
                },
                ("strategy",),
            ),
            "audit": URL,
        },
        ("url", "split"),
    ),
}
# Sources whose data is an event-window store (what `picking` takes).
EVENT_WINDOW_SOURCES = ("seisbench", "store")


# --- running ------------------------------------------------------------------------------------


def validate(recipe: RecipeText) -> None:
    """Check the whole recipe before any work; raise InvalidInput naming the line."""
    data = recipe.data
    recipe.check(document_schema(list(SOURCES), list(TRANSFORMS), list(OUTPUTS)), data, ())
    if data.get("secret") is not None:
        try:
            keys.checked_secret(data["secret"], "secret")
        except InvalidInput as error:
            raise recipe.error(("secret",), error.problem) from None
    ((source_name, source_parameters),) = data["source"].items()
    recipe.check(SOURCES[source_name].schema, source_parameters or {}, ("source", source_name))
    for index, step in enumerate(data.get("transforms") or []):
        ((name, values),) = step.items()
        recipe.check(TRANSFORMS[name].schema, values or {}, ("transforms", index, name))
    for name, values in data["outputs"].items():
        recipe.check(OUTPUTS[name], values or {}, ("outputs", name))
    if "picking" in data["outputs"]:
        if source_name not in EVENT_WINDOW_SOURCES:
            raise recipe.error(
                ("outputs", "picking"),
                f"needs an event-window source (one of {list(EVENT_WINDOW_SOURCES)}), "
                f"not {source_name!r}",
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
    if "ctf_bundle" in data["outputs"]:
        layout = ((data.get("splits") or {}).get("ctf") or {}).get("layout", "seismo")
        from seisctf.pipeline.bundles.layouts import load_layout

        try:
            load_layout(layout)
        except InvalidInput as error:
            raise recipe.error(
                ("splits", "ctf", "layout"), f"{layout!r}: {error.problem}"
            ) from None


def load(source: str | Path, text: str | None = None) -> RecipeText:
    """Read and validate a recipe (a path, or `text` reported as `source`)."""
    recipe = read_recipe(source, text)
    validate(recipe)
    return recipe


def shipped(name: str) -> Path:
    """A recipe shipped with seisctf (e.g. "demo-global")."""
    return SHIPPED / f"{name}.yaml"


def _withhold(value: Any) -> Any:
    """A copy with every `secret` and `seed` value replaced by WITHHELD."""
    if isinstance(value, dict):
        return {
            key: WITHHELD if key in ("secret", "seed") else _withhold(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_withhold(item) for item in value]
    return value


def _seeds(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [item if key == "seed" else _seeds(item) for key, item in value.items()]
    if isinstance(value, list):
        return [_seeds(item) for item in value]
    return []


def versions() -> dict[str, str]:
    """Versions of the packages a build's bytes depend on."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("seisctf", "numpy", "scipy", "dask", "xarray", "zarr", "numcodecs"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def input_hash(context: BuildContext, source: Mapping[str, Any]) -> str:
    """sha256 of what the source reads: a store's metadata documents and its chunk listing
    (names and sizes); for generators, their parameters (part of the recipe already)."""
    ((name, values),) = source.items()
    digest = hashlib.sha256(name.encode())
    if SOURCES[name].ingest and context.source_url:
        # The ingest's own record of its inputs: path, size and sha256 of every file.
        attrs = storage.read_attrs(context.source_url, context.storage_options)
        recorded = {key: attrs.get(key) for key in ("inputs", "ingest_fingerprint")}
        digest.update(json.dumps(recorded, sort_keys=True).encode())
    elif name == "store":
        import fsspec

        url = context.resolve(values["url"])
        mapper = fsspec.get_mapper(url, **(storage.options_for(url, context.storage_options) or {}))
        listing = sorted(mapper.fs.find(mapper.root, detail=True).items())
        for path, info in listing:
            relative = path[len(mapper.root) :]
            digest.update(f"{relative}\0{info.get('size')}\0".encode())
            if relative.endswith("zarr.json"):
                digest.update(mapper.fs.cat_file(path))
    return digest.hexdigest()


def provenance(
    recipe: RecipeText,
    context: BuildContext,
    parts: tuple[str, ...],
    output: str,
    resolved: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance attr of one output: the recipe parts it depends on (secret and seeds
    withheld), versions, input hash, the public parameters of the secret's KDF
    (`keys.KDF_PARAMETERS`) and a fingerprint of them all. Seeds and secret enter the
    fingerprint only through `_keyed_seeds`, so testing a guess of either costs a scrypt."""
    data = recipe.data
    depends = {key: data[key] for key in ("name", *parts) if key in data}
    depends["output"] = {output: data["outputs"][output]}
    record = {
        "recipe": _withhold(depends),
        "versions": versions(),
        "input_sha256": input_hash(context, data["source"]),
        "key_derivation": dict(keys.KDF_PARAMETERS),
        **({"resolved": dict(resolved)} if resolved else {}),
    }
    keyed = _keyed_seeds(context.secret, json.dumps(_seeds(depends), sort_keys=True))
    canonical = json.dumps({**record, "seeds": keyed}, sort_keys=True).encode()
    return {**record, "fingerprint": hashlib.sha256(canonical).hexdigest()}


def _keyed_seeds(secret: str | None, seeds_json: str) -> str:
    """Hex HMAC-SHA256 of a recipe's seed values keyed by the secret's derived
    "provenance/seeds" key; without a secret, the seed values themselves go through the KDF
    (explicit seeds are withheld too, and a small integer is easy to guess)."""
    if secret:
        key = keys.derive_bytes(secret, "provenance/seeds")
        return hmac.new(key, seeds_json.encode(), hashlib.sha256).hexdigest()
    return keys.derive_bytes(seeds_json, "provenance/seeds").hex()


def _up_to_date(url: str, fingerprint: str, context: BuildContext) -> bool:
    try:
        attrs = storage.read_attrs(url, context.storage_options)
    except InvalidInput:
        return False
    return (attrs.get(cv.ATTR_PROVENANCE) or {}).get("fingerprint") == fingerprint


def _time_variables(dataset: xr.Dataset):
    """(name, variable) of each data variable with a time dim, the dataset's sampling rate on
    it (stores keep the rate on the dataset; transforms read it from the variable)."""
    for variable, array in dataset.data_vars.items():
        if cv.TIME not in array.dims:
            continue
        if cv.ATTR_SAMPLING_RATE not in array.attrs and cv.ATTR_SAMPLING_RATE in dataset.attrs:
            array = array.assign_attrs(
                {cv.ATTR_SAMPLING_RATE: dataset.attrs[cv.ATTR_SAMPLING_RATE]}
            )
        yield variable, array


def _checkpoint(
    dataset: xr.Dataset,
    recipe: RecipeText,
    context: BuildContext,
    index: int,
    spec: Step,
    stored_dtypes: Mapping[str, np.dtype],
) -> tuple[xr.Dataset, dict[str, Any]]:
    """(`dataset` checkpointed to scratch and reopened, {variable: trace RMS} for a transform
    with a `level_window`, summed from the chunks as they are written). A variable stored as
    floats is checkpointed in its stored dtype (what the build would round it to anyway)."""
    ((name, values),) = recipe.data["transforms"][index].items()
    windows = {}
    for variable, array in _time_variables(dataset) if spec.level_window else ():
        try:
            windows[variable] = _resolve(spec.level_window)(array, **(values or {}))
        except InvalidInput as error:
            raise recipe.error(("transforms", index, name), str(error)) from None
    dtypes = {
        variable: stored
        for variable, stored in stored_dtypes.items()
        if variable in dataset.data_vars and stored.kind == "f"
    }
    url = f"{context.scratch}/before-transforms-{index}.zarr"
    context.checkpoints.append(url)
    label = f"checkpoint before transforms[{index}]"
    return write_checkpoint(
        dataset, url, context.storage_options, windows, dtypes, label, context.quiet
    )


def apply_transforms(
    dataset: xr.Dataset, recipe: RecipeText, context: BuildContext, *, stored: bool = False
) -> xr.Dataset:
    """Every transform of the recipe, in order, on every data variable with a time dim.
    Transforms compute in float64; each variable keeps its stored float dtype (a float32 store
    stays float32). A two-pass transform (a level, a mean) reads its input twice: when that
    input is a store read through cheap transforms only (`stored`), it is re-read; otherwise
    (a generator, a filter, noise) it is checkpointed to a scratch store first, in the stored
    dtype, with the transform's level summed by the tasks that write it where it has a
    `level_window`. Measured on 2 workers (benchmarks/RESULTS.md): such a checkpoint costs less
    than filtering twice."""
    stored_dtypes = {name: array.dtype for name, array in dataset.data_vars.items()}
    for index, step in enumerate(recipe.data.get("transforms") or []):
        ((name, values),) = step.items()
        spec = TRANSFORMS[name]
        function = spec.function()
        levels: dict[str, Any] = {}
        if spec.two_pass and not stored and context.scratch:
            dataset, levels = _checkpoint(dataset, recipe, context, index, spec, stored_dtypes)
            stored = True
        stored = stored and spec.cheap
        changed = {}
        for variable, array in _time_variables(dataset):
            arguments = dict(values or {})
            if spec.seeded:
                if "seed" not in arguments:
                    arguments["seed"] = keys.derive_seed(
                        context.require_secret(f"transforms[{index}].{name}"),
                        f"transforms/{index}/{name}",
                    )
                arguments["variable"] = str(variable)
            if variable in levels:
                arguments["trace_rms"] = levels[variable]
            try:
                if spec.prepare:
                    arguments = spec.prepare(context, arguments)
                changed[variable] = function(array, **arguments)
            except InvalidInput as error:
                raise recipe.error(("transforms", index, name), str(error)) from None
        dataset = _replace_time_variables(dataset, changed)
    restored = {
        name: array.astype(stored_dtypes[name])
        for name, array in dataset.data_vars.items()
        if name in stored_dtypes
        and array.dtype != stored_dtypes[name]
        and stored_dtypes[name].kind == "f"
    }
    return dataset.assign(restored) if restored else dataset


def _replace_time_variables(dataset: xr.Dataset, changed: Mapping[str, xr.DataArray]) -> xr.Dataset:
    """The dataset with its transformed variables (and their time axis, if resampling changed
    it), keeping the dataset's attrs with the new sampling rate."""
    if not changed:
        return dataset
    sample = next(iter(changed.values()))
    untouched = dataset.drop_vars(list(changed))
    resized = [dim for dim in sample.dims if sample.sizes[dim] != dataset.sizes.get(dim)]
    if resized:  # resampling along time, channel selection along distance, ...
        untouched = untouched.drop_dims(resized, errors="ignore")
    # A transform may rename its variable (strain -> strain_rate: DAS variables are named
    # after their quantity).
    renamed = {
        (array.name if array.name in cv.DAS_QUANTITIES else name): array
        for name, array in changed.items()
    }
    result = untouched.assign(renamed)
    result.attrs = dict(dataset.attrs)
    for key in (cv.ATTR_SAMPLING_RATE, cv.ATTR_QUANTITY, cv.ATTR_UNITS, cv.ATTR_CHANNEL_SPACING):
        if key in sample.attrs and (key in dataset.attrs or key == cv.ATTR_SAMPLING_RATE):
            result.attrs[key] = sample.attrs[key]
    return result


def build(recipe: RecipeText, context: BuildContext) -> BuildContext:
    """Run a validated recipe: source → transforms → outputs (skipping up-to-date outputs)."""
    data = recipe.data
    context.secret = data.get("secret") or context.secret
    context.layout = ((data.get("splits") or {}).get("ctf") or {}).get("layout")
    outputs = data["outputs"]
    ((source_name, source_values),) = data["source"].items()
    source_step = SOURCES[source_name]
    source_function = source_step.function()
    opened: dict[str, xr.Dataset] = {}

    def open_source() -> xr.Dataset:
        if "source" in opened:
            return opened["source"]
        try:
            result = source_function(context, **(source_values or {}))
        except InvalidInput as error:
            raise recipe.error(("source", source_name), str(error)) from None
        if source_step.ingest:  # a store: open it once
            opened["source"] = result
        return result

    def dataset() -> xr.Dataset:
        stored = source_name == "store" or source_step.ingest
        return apply_transforms(open_source(), recipe, context, stored=stored)

    if source_step.ingest:
        # Ingest first (a no-op when up to date): the outputs' provenance hashes its inputs.
        context.source_url = source_store_url(data, context)
        open_source()
    elif source_name == "store":
        context.source_url = context.resolve(source_values["url"])
    # Checkpoints hold data before noise: private, so next to the truth when there is one.
    private = (
        outputs.get("ctf_bundle", {}).get("truth")
        or outputs.get("store", {}).get("url")
        or outputs.get("picking", {}).get("url")
    )
    context.scratch = context.resolve(private).rstrip("/") + ".checkpoints"
    try:
        _write_outputs(recipe, context, dataset)
    finally:
        # The scratch folder is this build's own (named after its private output); also removed
        # when this run made no checkpoint, since an interrupted earlier run may have left one.
        remove_checkpoints(
            [*context.checkpoints, *([context.scratch] if context.scratch else [])],
            context.storage_options,
        )
        context.checkpoints.clear()
    return context


def _write_outputs(recipe: RecipeText, context: BuildContext, dataset) -> None:
    outputs = recipe.data["outputs"]

    store_url = None
    if "store" in outputs:
        spec = outputs["store"]
        store_url = context.resolve(spec["url"])
        record = provenance(recipe, context, ("source", "transforms"), "store")
        if _up_to_date(store_url, record["fingerprint"], context):
            context.skipped.append(store_url)
        else:
            result = rechunk_for_store(dataset(), spec.get("chunks"))
            result = result.assign_attrs({cv.ATTR_PROVENANCE: record})
            storage.write_dataset(
                result, store_url, context.storage_options, label="build store", quiet=context.quiet
            )
            context.written.append(store_url)
    if "ctf_bundle" in outputs:
        _build_bundle(recipe, context, dataset, store_url)
    if "picking" in outputs:
        _build_picking(recipe, context)


def _build_picking(recipe: RecipeText, context: BuildContext) -> None:
    """The event-window store at `picking.url` (the source's, copied unless it is the same
    store) split in place by `seisctf.pipeline.splits` with the recipe's options; the leakage
    audit also written as JSON to `picking.audit`."""
    import fsspec

    from seisctf.pipeline.splits import ATTR_SPLIT_AUDIT, split_store

    spec = recipe.data["outputs"]["picking"]
    url = context.resolve(spec["url"])
    record = provenance(recipe, context, ("source",), "picking")
    if _up_to_date(url, record["fingerprint"], context):
        context.skipped.append(url)
    else:
        try:
            if url.rstrip("/") != context.source_url.rstrip("/"):
                _copy_store(context.source_url, url, context)
            split_store(
                url, split_options(spec["split"]), context.storage_options, quiet=context.quiet
            )
        except InvalidInput as error:
            raise recipe.error(("outputs", "picking"), str(error)) from None
        storage.finish_group(url, {cv.ATTR_PROVENANCE: record}, context.storage_options)
        context.written.append(url)
    if spec.get("audit"):
        audit_url = context.resolve(spec["audit"])
        audit = storage.read_attrs(url, context.storage_options)[ATTR_SPLIT_AUDIT]
        options = storage.options_for(audit_url, context.storage_options) or {}
        with fsspec.open(audit_url, "w", **options) as handle:
            handle.write(json.dumps(audit, indent=2))


def _build_bundle(recipe, context, dataset, store_url) -> None:
    from seisctf.pipeline.bundles.layouts import load_layout
    from seisctf.pipeline.bundles.segments import build_bundle, write_bundle

    spec = recipe.data["outputs"]["ctf_bundle"]
    public, truth = context.resolve(spec["public"]), context.resolve(spec["truth"])
    layout = load_layout(((recipe.data.get("splits") or {}).get("ctf") or {}).get("layout"))
    parts = ("source", "transforms", "splits")
    # The layout's values, not only its name: a layout file may change under the same name.
    record = provenance(recipe, context, parts, "ctf_bundle", {"layout": layout.as_dict()})
    if all(_up_to_date(url, record["fingerprint"], context) for url in (public, truth)):
        context.skipped.extend([public, truth])
        return
    from seisctf.pipeline.bundles.archive_wavefield import wavefield_for_tasks

    secret, generated = keys.resolve_secret(context.secret)
    # The bundle reads the store just written (the chain runs once), else the lazy chain.
    source = storage.open_dataset(store_url, context.storage_options) if store_url else dataset()
    what = store_url or recipe.where
    # A wavefield store as it is; a DAS or waveform store cut into guarded segments first.
    wavefield, public_attrs, truth_attrs = wavefield_for_tasks(
        source, layout, what=what, quiet=context.quiet
    )
    bundle = build_bundle(wavefield, layout, secret, what=what)
    write_bundle(
        bundle,
        public,
        truth,
        secret,
        keep_secret=generated,
        storage_options=context.storage_options,
        quiet=context.quiet,
        attrs={cv.ATTR_PROVENANCE: record, **public_attrs},
        truth_attrs=truth_attrs,
    )
    context.written.extend([public, truth])


def build_file(
    path: str | Path,
    *,
    workdir: str | Path = ".",
    storage_options: storage.StorageOptions | None = None,
    secret: str | None = None,
    quiet: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> BuildContext:
    """Validate and run the recipe at `path` (`overrides`: top-level keys replaced, e.g. by the
    demo's command-line options; validated like the file)."""
    recipe = read_recipe(path)
    if overrides:
        data = copy.deepcopy(recipe.data)
        data.update(overrides)
        recipe = RecipeText(data=data, text=recipe.text, where=recipe.where, lines=recipe.lines)
    validate(recipe)
    context = BuildContext(
        workdir=Path(workdir), storage_options=storage_options, secret=secret, quiet=quiet
    )
    return build(recipe, context)
