"""A Dask cluster's configuration read from YAML: a `--cluster` file (or `$SEISCTF_CLUSTER`) or
a recipe's `cluster:` section, with the recipes' safe reader (bounded size, expanded size and
nesting; duplicate keys refused) and their line numbers in errors. The format is
`seisctf.cluster_config`'s."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from seisctf.cluster_config import CLUSTER_SCHEMA, DOTTED_NAME, ClusterConfig
from seisctf.errors import InvalidInput
from seisctf.plugins.schema import Location, RecipeText, parse_yaml, read_text

SHAPE = (
    "a Dask cluster is a mapping with class: (e.g. distributed.LocalCluster) and optionally "
    "options:, and adapt: or scale:"
)


def read_cluster_file(path: str | Path) -> ClusterConfig:
    """The cluster a YAML file describes, checked; InvalidInput naming the file (and line)."""
    where = str(path)
    text = read_text(Path(path), where)
    data, lines = parse_yaml(text, where)
    return cluster_section(RecipeText(data=data, text=text, where=where, lines=lines), data, ())


def recipe_cluster(recipe: RecipeText) -> ClusterConfig | None:
    """The cluster a recipe's `cluster:` section describes (None without one), checked."""
    if recipe.data.get("cluster") is None:
        return None
    return cluster_section(recipe, recipe.data["cluster"], ("cluster",))


def cluster_section(document: RecipeText, value: Any, location: Location) -> ClusterConfig:
    """The cluster `value` (found at `location` of `document`) describes: valid under
    `CLUSTER_SCHEMA`, else InvalidInput naming the line. Errors about the whole description
    name the file (a recipe's: `FILE:LINE` of its `cluster:`), an option's its line."""
    line = document.lines.of(location)
    where = f"{document.where}:{line}" if location else document.where
    if not isinstance(value, dict) or "class" not in value:
        raise InvalidInput(f"{document.where}:{line}", SHAPE)
    named = value["class"]
    if isinstance(named, str) and not re.match(DOTTED_NAME, named):
        raise document.error(
            (*location, "class"),
            f"{named!r} is not a dotted name MODULE.CLASS (e.g. distributed.LocalCluster)",
        )
    document.check(CLUSTER_SCHEMA, value, location)
    option_where = {
        key: f"{document.where}:{document.lines.of((*location, 'options', key))}"
        for key in value.get("options") or {}
    }
    return ClusterConfig.from_mapping(value, where, option_where)
