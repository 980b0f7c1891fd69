"""A recipe's chain of transforms (`TRANSFORMS` entries) on every data variable with a time
dim, and where the chain is checkpointed: before a two-pass transform whose input would
otherwise be computed twice (`checkpoint.py`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import keys
from seisctf.build.checkpoint import write_checkpoint
from seisctf.errors import InvalidInput
from seisctf.plugins.context import BuildContext
from seisctf.plugins.schema import RecipeText
from seisctf.registry import TRANSFORMS, Transform


def _time_variables(dataset: xr.Dataset) -> Iterator[tuple[str, xr.DataArray]]:
    """(name, variable) of each data variable with a time dim, the dataset's sampling rate on
    it (stores keep the rate on the dataset; transforms read it from the variable)."""
    for variable, array in dataset.data_vars.items():
        if cv.TIME not in array.dims:
            continue
        if cv.ATTR_SAMPLING_RATE not in array.attrs and cv.ATTR_SAMPLING_RATE in dataset.attrs:
            array = array.assign_attrs(
                {cv.ATTR_SAMPLING_RATE: dataset.attrs[cv.ATTR_SAMPLING_RATE]}
            )
        yield str(variable), array


def _checkpoint(
    dataset: xr.Dataset,
    recipe: RecipeText,
    context: BuildContext,
    index: int,
    entry: Transform,
    stored_dtypes: Mapping[str, np.dtype],
) -> tuple[xr.Dataset, dict[str, Any]]:
    """(`dataset` checkpointed to scratch and reopened, {variable: trace RMS} for a transform
    with a `level_window`, summed from the chunks as they are written). A variable stored as
    floats is checkpointed in its stored dtype (what the build would round it to anyway)."""
    ((name, values),) = recipe.data["transforms"][index].items()
    windows = {}
    level_window = entry.level_window
    variables = _time_variables(dataset) if level_window is not None else ()
    for variable, array in variables:
        assert level_window is not None
        try:
            windows[variable] = level_window(array, **(values or {}))
        except InvalidInput as error:
            raise recipe.error(("transforms", index, name), str(error)) from None
    dtypes = {
        variable: stored
        for variable, stored in stored_dtypes.items()
        if variable in dataset.data_vars and stored.kind == "f"
    }
    url = f"{context.scratch}/before-transforms-{index}.zarr"
    context.report.checkpoints.append(url)
    label = f"checkpoint before transforms[{index}]"
    return write_checkpoint(dataset, context.location(url), windows, dtypes, label, context.quiet)


def apply_transforms(
    dataset: xr.Dataset, recipe: RecipeText, context: BuildContext, *, stored: bool = False
) -> xr.Dataset:
    """Every transform of the recipe, in order, on every data variable with a time dim.
    Transforms compute in float64; each variable keeps its stored float dtype (a float32 store
    stays float32). A two-pass transform (a level, a mean) reads its input twice: when that
    input is a store read through cheap transforms only (`stored`), it is re-read; otherwise
    (a generator, a filter, noise) it is checkpointed to a scratch store first, in the stored
    dtype, with the transform's level summed by the tasks that write it where it has a
    `level_window`: writing the filtered data once and reading it back costs less than
    filtering twice (benchmarks/RESULTS.md, "Pipeline chain")."""
    stored_dtypes = {str(name): array.dtype for name, array in dataset.data_vars.items()}
    for index, step in enumerate(recipe.data.get("transforms") or []):
        ((name, values),) = step.items()
        entry = TRANSFORMS[name]
        levels: dict[str, Any] = {}
        if entry.two_pass and not stored and context.scratch:
            dataset, levels = _checkpoint(dataset, recipe, context, index, entry, stored_dtypes)
            stored = True
        stored = stored and bool(entry.cheap)
        changed = {}
        for variable, array in _time_variables(dataset):
            arguments = dict(values or {})
            if entry.seeded:
                if "seed" not in arguments:
                    arguments["seed"] = keys.derive_seed(
                        context.require_secret(f"transforms[{index}].{name}"),
                        keys.transform_purpose(index, name),
                    )
                arguments["variable"] = str(variable)
            if variable in levels:
                arguments["trace_rms"] = levels[variable]
            try:
                if entry.prepare:
                    arguments = entry.prepare(context, arguments)
                changed[variable] = entry.function(array, **arguments)
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
