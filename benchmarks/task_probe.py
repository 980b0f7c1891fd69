"""A Dask scheduler plugin that records every task a scheduler runs: its key prefix and when its
computation started and stopped on its worker (wall clock, `time.time()` seconds).

    dask scheduler --preload task_probe        # (this folder on PYTHONPATH)

then, from any client of that scheduler, `client.run_on_scheduler(task_probe_summary)` (this
module is on the scheduler's path) returns {prefix: {"tasks", "first_start", "last_stop",
"compute_s"}}. Used by `scale_ingest.py` for the task count and the time before the first
task of each run.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "seisctf-task-probe"


class TaskProbe(SchedulerPlugin):
    """Per key prefix: tasks finished, first compute start, last compute stop and the sum of
    compute durations (seconds)."""

    name = NAME

    def __init__(self) -> None:
        self.prefixes: dict[str, dict[str, float]] = {}

    def transition(self, key, start, finish, *args, stimulus_id: str = "", **kwargs) -> None:
        if finish not in ("memory", "erred"):
            return
        times = [
            (float(item["start"]), float(item["stop"]))
            for item in kwargs.get("startstops", ())
            if item.get("action") == "compute"
        ]
        prefix = key_prefix(key)
        entry = self.prefixes.setdefault(
            prefix, {"tasks": 0, "first_start": float("inf"), "last_stop": 0.0, "compute_s": 0.0}
        )
        entry["tasks"] += 1
        for began, ended in times:
            entry["first_start"] = min(entry["first_start"], began)
            entry["last_stop"] = max(entry["last_stop"], ended)
            entry["compute_s"] += ended - began


def key_prefix(key: Any) -> str:
    """`ingest_block` of `ingest_block-<token>-<run>`, `scan_files` of a delayed call's key."""
    name = key[0] if isinstance(key, tuple) else key
    return str(name).split("-", 1)[0]


def dask_setup(scheduler: Any) -> None:
    """Preload entry point: install the probe."""
    scheduler.add_plugin(TaskProbe())


def task_probe_summary(dask_scheduler: Any) -> dict[str, dict[str, float]]:
    """What the probe recorded (`client.run_on_scheduler(task_probe_summary)`), then cleared."""
    probe = dask_scheduler.plugins[NAME]
    found, probe.prefixes = probe.prefixes, {}
    return found
