"""The `ctf_bundle` recipe output, registered in `OUTPUTS`: the recipe's data (the `store`
output just written, else the lazy chain) made into a CTF bundle for the build's parsed layout,
public and truth written with their provenance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import xarray as xr

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.build.provenance import provenance, up_to_date
from seisctf.options import Location, option
from seisctf.pipeline.bundles.archive_wavefield import wavefield_for_tasks
from seisctf.pipeline.bundles.public_truth import truth_stamp
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.plugins.context import BuildContext
from seisctf.plugins.layouts import load_layout
from seisctf.plugins.schema import RecipeText
from seisctf.registry import OUTPUTS


@dataclass(frozen=True, kw_only=True)
class CtfBundleOptions:
    """A recipe's options of the `ctf_bundle` output."""

    public: Location = option(help="the bundle's public group")
    truth: Location = option(help="the bundle's withheld truth (private)")


@OUTPUTS.register(
    "ctf_bundle",
    options=CtfBundleOptions,
    private="truth",
    withheld=True,
)
def ctf_bundle_output(
    recipe: RecipeText, context: BuildContext, dataset: Callable[[], xr.Dataset]
) -> None:
    """A CTF bundle: its public group at `public`, its withheld truth at `truth`.

    A wavefield store is taken as it is; a DAS or waveform store is cut into guarded segments
    first (`archive_wavefield.wavefield_for_tasks`). Skipped when both groups carry this
    build's fingerprint."""
    spec = recipe.data["outputs"]["ctf_bundle"]
    public, truth = context.resolve(spec["public"]), context.resolve(spec["truth"])
    layout = context.layout or load_layout(None)
    parts = ("source", "transforms", "splits")
    # The layout's values, not only its name: a layout file may change under the same name.
    record = provenance(recipe, context, parts, "ctf_bundle", {"layout": layout.as_dict()})
    if all(up_to_date(url, record["fingerprint"], context) for url in (public, truth)):
        context.report.skipped.extend([public, truth])
        return
    secret = context.secret or keys.resolve_secret(None)
    stamp = truth_stamp(
        {cv.ATTR_PROVENANCE: record}, secret, allowed=context.public_truth, what=recipe.where
    )
    # The bundle reads the store just written (the chain runs once), else the lazy chain.
    store_url = context.report.store_output
    source = storage.open_dataset(context.location(store_url)) if store_url else dataset()
    what = store_url or recipe.where
    wavefield, public_attrs, truth_attrs = wavefield_for_tasks(
        source, layout, what=what, quiet=context.quiet
    )
    bundle = build_bundle(wavefield, layout, secret.value, what=what)
    write_bundle(
        bundle,
        context.location(public),
        context.location(truth),
        secret.value,
        keep_secret=secret.drawn or secret.origin == "kept",
        quiet=context.quiet,
        attrs={cv.ATTR_PROVENANCE: record, **public_attrs},
        truth_attrs=truth_attrs,
        manifest_stamp=stamp,
    )
    context.report.written.extend([public, truth])
