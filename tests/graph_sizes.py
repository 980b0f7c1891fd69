"""A Dask scheduler preload for tests: the number of tasks of each graph the scheduler receives,
one line per graph appended to the file `$GRAPH_SIZES_FILE` names (a test reads them with
`read_sizes`). Load it with `dask scheduler --preload graph_sizes`, the tests' folder on
PYTHONPATH."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

SIZES_FILE_ENV = "GRAPH_SIZES_FILE"


class GraphSizes(SchedulerPlugin):
    """Appends the number of new tasks of each graph to `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def update_graph(self, scheduler: Any, *, tasks: list, **kwargs: Any) -> None:
        with open(self.path, "a") as sizes:
            sizes.write(f"{len(tasks)}\n")


def read_sizes(path: Path) -> list[int]:
    """The graph sizes a preloaded scheduler wrote to `path`, in order."""
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def dask_setup(scheduler: Any) -> None:
    scheduler.add_plugin(GraphSizes(Path(os.environ[SIZES_FILE_ENV])), name="graph-sizes")
