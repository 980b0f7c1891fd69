"""A Dask cluster described by configuration: any cluster class by its dotted name, the options it
is built with, and how it scales (`--cluster FILE.yaml`, `$SEISCTF_CLUSTER`, a recipe's `cluster:`
section), in the style of dask's own configuration:

    class: dask_jobqueue.SLURMCluster
    options: {cores: 8, memory: 32GB, queue: normal, walltime: "02:00:00"}
    adapt: {minimum: 0, maximum: 20}      # or scale: 4

`CLUSTER_SCHEMA` is the document's shape (checked, with its lines, where the YAML is read:
`seisctf.recipes.cluster_file`); `ClusterConfig.from_mapping` adds what a schema cannot say;
`cluster_class` imports the class and checks that it is a Dask cluster; `make_cluster` builds it
(an option the class does not take is refused naming its line) and `scale_cluster` scales it or
makes it adaptive. Naming a class runs the code of its module: a cluster file is trusted like a
script. Nothing here imports Dask until a cluster is built.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from seisctf.errors import InvalidInput

# Where a command finds its cluster when no option names one: a scheduler's address, or a
# cluster file (`--scheduler` and `--cluster` win, in that order).
SCHEDULER_ENV = "SEISCTF_SCHEDULER"
CLUSTER_ENV = "SEISCTF_CLUSTER"
DOTTED_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"
# `Cluster.adapt`'s keywords (distributed.deploy.Adaptive): bounds in workers, durations as
# Dask time strings ("1s", "500ms").
ADAPT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "minimum": {"type": "integer", "minimum": 0},
        "maximum": {"type": "integer", "minimum": 1},
        "interval": {"type": "string", "minLength": 1},
        "target_duration": {"type": "string", "minLength": 1},
        "wait_count": {"type": "integer", "minimum": 1},
    },
}
CLUSTER_SCHEMA = {
    "type": "object",
    "required": ["class"],
    "additionalProperties": False,
    "properties": {
        "class": {"type": "string", "pattern": DOTTED_NAME},
        "options": {"type": "object"},
        "adapt": ADAPT_SCHEMA,
        "scale": {"type": "integer", "minimum": 0},
    },
}
# How a constructor names a keyword it does not take (Python's TypeError, dask-jobqueue's
# ValueError).
UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '(?P<name>[^']+)'")
MAX_MESSAGE_CHARS = 400  # of a constructor's own message, quoted in ours


@dataclass(frozen=True)
class ClusterConfig:
    """A checked cluster description. `where`: the file (a recipe's: `FILE:LINE` of its
    `cluster:`) named in errors; `option_where`: `FILE:LINE` of each option."""

    class_path: str
    options: Mapping[str, Any]
    where: str
    adapt: Mapping[str, Any] | None = None
    scale: int | None = None
    option_where: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], where: str, option_where: Mapping[str, str] | None = None
    ) -> ClusterConfig:
        """A config from a mapping already valid under `CLUSTER_SCHEMA`: `adapt` and `scale`
        exclude each other and adaptive bounds are ordered, else InvalidInput naming `where`."""
        adapt, scale = data.get("adapt"), data.get("scale")
        if adapt is not None and scale is not None:
            raise InvalidInput(where, "give either adapt: or scale:, not both")
        if adapt and adapt.get("minimum", 0) > adapt.get("maximum", float("inf")):
            raise InvalidInput(
                where, f"adapt: minimum {adapt['minimum']} is above maximum {adapt['maximum']}"
            )
        return cls(
            class_path=data["class"],
            options=dict(data.get("options") or {}),
            where=where,
            adapt=None if adapt is None else dict(adapt),
            scale=scale,
            option_where=dict(option_where or {}),
        )

    def describe(self) -> str:
        """What the `dask:` line says: `CLASS from FILE, adaptive 0-20 workers`."""
        text = f"{self.class_path} from {self.where}"
        if self.adapt is not None:
            low, high = self.adapt.get("minimum", 0), self.adapt.get("maximum", "any")
            return f"{text}, adaptive {low}-{high} workers"
        if self.scale is not None:
            return f"{text}, {self.scale} workers"
        return text


def cluster_class(config: ClusterConfig) -> type:
    """The class `config` names, imported; InvalidInput naming the file when its module is not
    installed (or fails to import), has no such name, or it is not a Dask cluster class (a
    subclass of `distributed.deploy.Cluster`)."""
    from distributed.deploy import Cluster

    module_name, _, name = config.class_path.rpartition(".")
    shown = f"class {config.class_path}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        if module_name == missing or module_name.startswith(f"{missing}."):
            raise InvalidInput(
                config.where,
                f"{shown}: no module {missing!r} is installed (install the package that "
                "provides it, e.g. dask-jobqueue, dask-kubernetes or coiled)",
            ) from None
        raise InvalidInput(
            config.where, f"{shown}: importing {module_name} failed: {error}"
        ) from None
    except ImportError as error:
        raise InvalidInput(
            config.where, f"{shown}: importing {module_name} failed: {error}"
        ) from None
    found = getattr(module, name, None)
    if found is None:
        raise InvalidInput(config.where, f"{shown}: module {module_name} has no {name!r}")
    if not (isinstance(found, type) and issubclass(found, Cluster)):
        raise InvalidInput(
            config.where,
            f"{shown}: not a Dask cluster class (a subclass of distributed.deploy.Cluster, e.g. "
            "distributed.LocalCluster or dask_jobqueue.SLURMCluster)",
        )
    return found


def make_cluster(config: ClusterConfig) -> Any:
    """The cluster, built with `config.options` (not scaled yet). An option the class (or a
    class it passes options on to, such as LocalCluster's workers) does not take is an
    InvalidInput naming the option's line; a value it refuses (its TypeError or ValueError) one
    naming the file; any other failure to start is raised as it is."""
    klass = cluster_class(config)
    try:
        return klass(**config.options)
    except Exception as error:
        refused = _refused_option(error, config.options)
        if refused is not None:
            raise InvalidInput(
                config.option_where.get(refused, config.where),
                f"options.{refused}: not an option of {config.class_path}",
            ) from None
        if not isinstance(error, TypeError | ValueError):
            raise
        message = " ".join(str(error).split())[:MAX_MESSAGE_CHARS]
        raise InvalidInput(
            config.where,
            f"options: {config.class_path} refused them: {type(error).__name__}: {message}",
        ) from None


def _refused_option(error: BaseException, options: Mapping[str, Any]) -> str | None:
    """The option an error (or an error it was raised from: a worker that failed to start)
    says is an unexpected keyword, if it is one of `options`."""
    seen: BaseException | None = error
    while seen is not None:
        found = UNEXPECTED_KEYWORD.search(str(seen))
        if found and found["name"] in options:
            return found["name"]
        seen = seen.__cause__ or seen.__context__
    return None


def scale_cluster(cluster: Any, config: ClusterConfig) -> None:
    """`cluster.adapt(**adapt)` or `cluster.scale(n)` as `config` asks (else as built)."""
    if config.adapt is not None:
        cluster.adapt(**config.adapt)
    elif config.scale is not None:
        cluster.scale(config.scale)
