"""`seisctf build RECIPE.yaml`: a declarative dataset recipe run on the active Dask cluster.

A recipe names a source, a chain of transforms applied to every variable with a time dim,
splits, and outputs (docs/recipes.md has the format and an example). Everything is validated
before any work (`schema`). The engine reads the registries (`seisctf.registry`): sources are
the `store` source, the ingests (`INGESTS`) and the synthetic sources (`SYNTHS`); transforms are
`TRANSFORMS` (`transform_chain`); outputs are the `store` output and `OUTPUTS`. Each output gets
`ATTR_PROVENANCE` (`provenance`); an output whose complete store already carries the same
fingerprint is not rewritten, so re-running a recipe is a no-op and changing one parameter
rewrites only the outputs it affects. Chunks come from the data's shape and the recipe, never
from the cluster. The recipe's CTF layout is parsed once and travels in the `BuildContext`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import xarray as xr

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.build.checkpoint import remove_checkpoints
from seisctf.build.provenance import WITHHELD as WITHHELD
from seisctf.build.provenance import provenance, up_to_date
from seisctf.build.transform_chain import apply_transforms
from seisctf.errors import InvalidInput
from seisctf.formats.shared.source import source_store_url
from seisctf.options import (
    Location,
    is_location,
    option,
    options_from_signature,
    options_schema,
    spec,
)
from seisctf.plugins.context import BuildContext, BuildReport
from seisctf.plugins.layouts import Layout, load_layout
from seisctf.plugins.schema import RecipeText, describe, document_schema, read_recipe
from seisctf.registry import INGESTS, OUTPUTS, SYNTHS, TRANSFORMS, Ingest, Plugin
from seisctf.signal.rechunk import rechunk_for_store

SHIPPED = Path(__file__).resolve().parent / "shipped"  # recipes shipped in the package


def existing_store(
    context: BuildContext, *, url: Annotated[Location, spec("a complete seisctf store")]
) -> xr.Dataset:
    """A complete seisctf store, opened lazily."""
    return storage.open_dataset(context.location(context.resolve(url)))


@dataclass(frozen=True, kw_only=True)
class StoreOutputOptions:
    """A recipe's options of the `store` output."""

    url: Location = option(help="the store written")
    chunks: dict[str, int] = option(
        None,
        "chunk length a dim, samples",
        schema={"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
    )


_STORE_SOURCE_OPTIONS = options_from_signature(existing_store)
STORE_SOURCE = Plugin(
    "store",
    existing_store,
    options_schema(_STORE_SOURCE_OPTIONS),
    options_type=_STORE_SOURCE_OPTIONS,
)
STORE_OUTPUT = options_schema(StoreOutputOptions)


class Sources(Mapping[str, Plugin]):
    """The sources a recipe can name: `store`, then the ingests, then the synthetic sources."""

    def __getitem__(self, name: str) -> Plugin:
        if name == "store":
            return STORE_SOURCE
        if name in INGESTS:
            return INGESTS[name]
        if name in SYNTHS:
            return SYNTHS[name]
        raise InvalidInput("source", f"unknown source {name!r}; known: {', '.join(self)}")

    def __iter__(self) -> Iterator[str]:
        return iter(["store", *INGESTS, *SYNTHS])

    def __len__(self) -> int:
        return 1 + len(INGESTS) + len(SYNTHS)


SOURCES = Sources()


def output_names() -> list[str]:
    """The outputs a recipe can name: `store`, then the registered ones."""
    return ["store", *OUTPUTS]


def layout_name(data: Mapping[str, Any]) -> str | None:
    return ((data.get("splits") or {}).get("ctf") or {}).get("layout")


def validate(recipe: RecipeText) -> Layout | None:
    """Check the whole recipe before any work; raise InvalidInput naming the line. Returns
    the recipe's CTF layout, parsed (None when it names none)."""
    data = recipe.data
    recipe.check(document_schema(list(SOURCES), list(TRANSFORMS), output_names()), data, ())
    if "secret" in data:
        raise recipe.error(
            ("secret",),
            "a recipe file is made to be shared, so a secret never lives in one: give it with "
            f"--secret or ${keys.SECRET_ENV} (without either, the build draws one and keeps it "
            "with its truth)",
        )
    ((source_name, source_options),) = data["source"].items()
    recipe.check(SOURCES[source_name].options, source_options or {}, ("source", source_name))
    for index, step in enumerate(data.get("transforms") or []):
        ((name, values),) = step.items()
        recipe.check(TRANSFORMS[name].options, values or {}, ("transforms", index, name))
    for name, values in data["outputs"].items():
        schema = STORE_OUTPUT if name == "store" else OUTPUTS[name].options
        recipe.check(schema, values or {}, ("outputs", name))
        check = None if name == "store" else OUTPUTS[name].check
        if check is not None:
            check(recipe)
    name = layout_name(data)
    if name is None and "ctf_bundle" not in data["outputs"]:
        return None
    try:
        return load_layout(name)
    except InvalidInput as error:
        shown = name or "seismo"
        raise recipe.error(("splits", "ctf", "layout"), f"{shown!r}: {error.problem}") from None


def load(source: str | Path, text: str | None = None) -> RecipeText:
    """Read and validate a recipe (a path, or `text` reported as `source`)."""
    recipe = read_recipe(source, text)
    validate(recipe)
    return recipe


def shipped(name: str) -> Path:
    """A recipe shipped with seisctf (e.g. "demo-global")."""
    return SHIPPED / f"{name}.yaml"


def _private_url(outputs: Mapping[str, Any]) -> str:
    """The build's private output (checkpoints go next to it): a withheld truth, else the
    store, else another output's."""
    first = min(
        outputs, key=lambda name: (name == "store" or not OUTPUTS[name].withheld, name != "store")
    )
    return outputs[first]["url" if first == "store" else OUTPUTS[first].private]


def build(recipe: RecipeText, context: BuildContext) -> BuildReport:
    """Run a validated recipe: source → transforms → outputs (skipping up-to-date outputs).
    Returns `context.report`, filled in."""
    data = recipe.data
    if context.layout is None and layout_name(data):
        context = replace(context, layout=load_layout(layout_name(data)))
    ((source_name, source_options),) = data["source"].items()
    source = SOURCES[source_name]
    opened: dict[str, xr.Dataset] = {}

    def open_source() -> xr.Dataset:
        if "source" in opened:
            return opened["source"]
        options = dict(source_options or {})
        if isinstance(source, Ingest):
            options.pop("store", None)  # where it writes: context.source_url
        try:
            result = source.function(context, **options)
        except InvalidInput as error:
            location = ("source", source_name)
            # The recipe's line names the source: a source that names itself is not named twice.
            problem = error.problem if error.what == describe(location) else str(error)
            raise recipe.error(location, problem) from None
        if isinstance(source, Ingest):  # a store: open it once
            opened["source"] = result
        return result

    def dataset() -> xr.Dataset:
        stored = source_name == "store" or isinstance(source, Ingest)
        return apply_transforms(open_source(), recipe, context, stored=stored)

    if isinstance(source, Ingest):
        # Ingest first (a no-op when up to date): the outputs' provenance hashes its inputs.
        context = replace(context, source_url=source_store_url(data, context))
        open_source()
    elif source_name == "store":
        context = replace(context, source_url=context.resolve(source_options["url"]))
    # Checkpoints hold data before noise: private, so next to the truth when there is one.
    scratch_url = context.resolve(_private_url(data["outputs"])).rstrip("/") + ".checkpoints"
    context = replace(context, scratch=scratch_url)
    report = context.report
    try:
        _write_outputs(recipe, context, dataset)
    finally:
        # The scratch folder is this build's own (named after its private output); also removed
        # when this run made no checkpoint, since an interrupted earlier run may have left one.
        scratch = [*report.checkpoints, scratch_url]
        remove_checkpoints([context.location(url) for url in scratch])
        report.checkpoints.clear()
    return report


def _write_outputs(recipe: RecipeText, context: BuildContext, dataset) -> None:
    """The `store` output first (the others read it rather than recompute the chain), then the
    registered outputs the recipe names, in name order."""
    outputs = recipe.data["outputs"]
    if "store" in outputs:
        spec = outputs["store"]
        store_url = context.resolve(spec["url"])
        record = provenance(recipe, context, ("source", "transforms"), "store")
        if up_to_date(store_url, record["fingerprint"], context):
            context.report.skipped.append(store_url)
        else:
            result = rechunk_for_store(dataset(), spec.get("chunks"))
            result = result.assign_attrs({cv.ATTR_PROVENANCE: record})
            storage.write_dataset(
                result, context.location(store_url), label="build store", quiet=context.quiet
            )
            context.report.written.append(store_url)
        context.report.store_output = store_url
    for name in OUTPUTS:
        if name in outputs:
            OUTPUTS[name].function(recipe, context, dataset)


def build_file(
    path: str | Path,
    *,
    workdir: str | Path = ".",
    storage_options: storage.StorageOptions | None = None,
    secret: str | None = None,
    quiet: bool = False,
    overrides: Mapping[str, Any] | None = None,
    public_truth: bool = False,
) -> BuildContext:
    """Validate and run the recipe at `path` (`overrides`: top-level keys replaced, e.g. by the
    demo's command-line options; validated like the file). The secret is `keys.resolve_secret`'s:
    `secret`, else $SEISCTF_SECRET, else the one this build drew before (kept in its truth
    group, so a re-run is up to date), else a fresh one. `public_truth`: accept a source whose
    truth anyone can regenerate (`--public-truth`; its bundle is stamped so)."""
    recipe = read_recipe(path)
    if overrides:
        data = copy.deepcopy(recipe.data)
        data.update(overrides)
        recipe = RecipeText(data=data, text=recipe.text, where=recipe.where, lines=recipe.lines)
    layout = validate(recipe)
    context = BuildContext(
        workdir=Path(workdir),
        storage_options=storage_options,
        quiet=quiet,
        layout=layout if layout_name(recipe.data) else None,
        public_truth=public_truth,
    )
    if secret or keys.secret_from_env() or needs_secret(recipe.data):
        resolved = keys.resolve_secret(secret, kept=_kept_secret(recipe, context))
        context = replace(context, secret=resolved)
    build(recipe, context)
    return context


def output_urls(recipe: RecipeText, workdir: str | Path = ".") -> list[str]:
    """What a validated `recipe` writes, resolved against `workdir`: every URL option of its
    outputs and, for an ingest source, the store it ingests into (`seisctf build` checks them
    and holds their writer locks)."""
    data, context = recipe.data, BuildContext(workdir=Path(workdir))
    written = []
    for name, values in data["outputs"].items():
        schema = STORE_OUTPUT if name == "store" else OUTPUTS[name].options
        for key, option_schema in schema.get("properties", {}).items():
            if is_location(option_schema) and (values or {}).get(key):
                written.append(context.resolve(values[key]))
    ((source_name, _),) = data["source"].items()
    if isinstance(SOURCES[source_name], Ingest):
        written.append(source_store_url(data, context))
    return written


def needs_secret(data: Mapping[str, Any]) -> bool:
    """Whether a recipe's outputs depend on a secret: a generator source or a seeded transform
    without its own `seed:`, or a withheld output (a bundle's noise and commitment salt). Without
    one given, only such a build draws a secret: the others stay up to date on a re-run."""
    ((source_name, source_options),) = data["source"].items()
    if source_name in SYNTHS and "seed" not in (source_options or {}):
        return True
    for step in data.get("transforms") or []:
        ((name, values),) = step.items()
        if TRANSFORMS[name].seeded and "seed" not in (values or {}):
            return True
    return any(name != "store" and OUTPUTS[name].withheld for name in data["outputs"])


def _kept_secret(recipe: RecipeText, context: BuildContext) -> str | None:
    """The secret an earlier run of this build drew and kept in its withheld output (None when
    there is none, or it has no kept secret)."""
    outputs = recipe.data["outputs"]
    for name in OUTPUTS:
        if name in outputs and OUTPUTS[name].withheld:
            url = context.resolve(outputs[name][OUTPUTS[name].private])
            try:
                return storage.read_attrs(context.location(url)).get(cv.ATTR_CTF_SECRET)
            except InvalidInput:
                return None
    return None
