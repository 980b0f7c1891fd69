"""`seisctf build`'s checks of its recipe, before any cluster starts: the recipe valid (its
schema, its sources, transforms and outputs, its URLs spelt as URLs), every local output
writable (`local_outputs.check_writable`), and a synthetic source's data within the room
of where it goes (`_output_size.refuse_oversize`: `--yes-really-large` writes anyway)."""

from __future__ import annotations

import argparse

from seisctf.build.cluster_file import recipe_cluster
from seisctf.cli._checks import local_path
from seisctf.cli._output_size import refuse_oversize
from seisctf.local_outputs import check_writable
from seisctf.plugins.schema import read_recipe
from seisctf.synth.output_sizes import SIZES, source_size


def check_recipe(args: argparse.Namespace) -> None:
    """InvalidInput for a recipe that is invalid, an output that cannot be written, or a
    synthesis that cannot fit; keeps the recipe's `cluster:` section (`args.recipe_cluster`) and
    what it writes (`args.recipe_outputs`)."""
    # The engine loads the registries (every generator): imported once the verb is known.
    from seisctf.build.engine import layout_name, output_urls, validate

    recipe = read_recipe(args.recipe)
    args.recipe_cluster = recipe_cluster(recipe)
    layout = validate(recipe)
    outputs = args.recipe_outputs = output_urls(recipe, args.workdir)  # the locks' outputs
    for url in outputs:
        if (path := local_path(url)) is not None:
            check_writable(path, f"{args.recipe}: output {url}")
    ((source, options),) = recipe.data["source"].items()
    if source in SIZES:
        size = source_size(source, options or {}, layout if layout_name(recipe.data) else None)
        refuse_oversize([size], outputs[0], args, what=f"the recipe's {source} source")
