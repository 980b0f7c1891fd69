"""A Dask scheduler preload for tests: every task that reaches the scheduler, pickled as
distributed pickles it for a worker, appended to a file the test reads (`$GRAPH_PROBE_FILE`).

The test then searches those bytes (what a worker would receive, and what any plugin, dump or
log of the cluster could see) for a secret. Load it with `dask scheduler --preload graph_probe`,
or for an embedded cluster with `DASK_DISTRIBUTED__SCHEDULER__PRELOAD=graph_probe` (the tests'
folder on PYTHONPATH). Each record is an 8-byte little-endian length, then the pickle."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

PROBE_FILE_ENV = "GRAPH_PROBE_FILE"


class PickledTasks(SchedulerPlugin):
    """Appends each new task's pickled run_spec to `path` as the scheduler receives it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def update_graph(self, scheduler: Any, *, tasks: list, **kwargs: Any) -> None:
        with open(self.path, "ab") as records:
            for key in tasks:
                state = scheduler.tasks.get(key)
                if state is None or state.run_spec is None:
                    continue
                pickled = dumps(state.run_spec)
                records.write(struct.pack("<Q", len(pickled)) + pickled)


def read_records(path: Path) -> list[bytes]:
    """The pickled tasks a probe wrote to `path`, in order."""
    data = path.read_bytes() if path.exists() else b""
    records, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        records.append(data[offset + 8 : offset + 8 + length])
        offset += 8 + length
    return records


def dask_setup(scheduler: Any) -> None:
    scheduler.add_plugin(PickledTasks(Path(os.environ[PROBE_FILE_ENV])), name="graph-probe")
