"""A Dask scheduler plugin that records, per key prefix, how many tasks a scheduler ran, when it
sent the first of them to a worker and when it got the last one's result, and their compute time.

    dask scheduler --preload task_probe        # (this folder on PYTHONPATH)

then, from any client of that scheduler, `client.run_on_scheduler(task_probe_now)` just before
the work starts (its start on the scheduler's clock) and `client.run_on_scheduler(
task_probe_summary)` after it returns {prefix: {"tasks", "first_start", "last_stop",
"compute_s"}}. Used by `scale_ingest.py` for the task count and the time before the first task
of each run.

One clock for every time: the scheduler's (`time.time()` in its process), read when a task
changes state there. Workers' own compute start and stop times (`startstops`) are the worker's
clock shifted by its estimate of the scheduler's, from heartbeats: on a loaded machine that
estimate is off by up to a heartbeat's round trip, and times taken from it came before the
run's start or a phase's end came before its start (negative durations). `compute_s` is
the only worker-side figure: each task's stop minus its start, both read on one worker's clock.
"""

from __future__ import annotations

import time
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "seisctf-task-probe"


class TaskProbe(SchedulerPlugin):
    """Per key prefix: tasks finished; the scheduler's time when it sent the first to a worker
    (`first_start`) and when it took the last one's result or error (`last_stop`), seconds on
    its `time.time()` clock; the sum of the tasks' compute durations on their workers
    (`compute_s`, seconds)."""

    name = NAME

    def __init__(self) -> None:
        self.prefixes: dict[str, dict[str, float]] = {}

    def transition(self, key, start, finish, *args, stimulus_id: str = "", **kwargs) -> None:
        if finish == "processing":
            entry = self._entry(key)
            entry["first_start"] = min(entry["first_start"], time.time())
        elif start == "processing" and finish in ("memory", "erred"):
            entry = self._entry(key)
            entry["tasks"] += 1
            entry["last_stop"] = max(entry["last_stop"], time.time())
            entry["compute_s"] += compute_seconds(kwargs.get("startstops", ()))

    def _entry(self, key: Any) -> dict[str, float]:
        return self.prefixes.setdefault(
            key_prefix(key),
            {"tasks": 0, "first_start": float("inf"), "last_stop": 0.0, "compute_s": 0.0},
        )


def compute_seconds(startstops: Any) -> float:
    """Seconds a task computed: its `compute` spans' stop minus start (each span read on one
    worker's clock; a span its clock stepped back across counts 0, not less)."""
    return sum(
        max(0.0, float(item["stop"]) - float(item["start"]))
        for item in startstops
        if item.get("action") == "compute"
    )


def key_prefix(key: Any) -> str:
    """`ingest_block` of `ingest_block-<token>-<run>`, `scan_files` of a delayed call's key."""
    name = key[0] if isinstance(key, tuple) else key
    return str(name).split("-", 1)[0]


def dask_setup(scheduler: Any) -> None:
    """Preload entry point: install the probe."""
    scheduler.add_plugin(TaskProbe())


def task_probe_now(dask_scheduler: Any) -> float:
    """The scheduler's clock now (`time.time()` there): a run's start, on the clock of
    `task_probe_summary`'s times (`client.run_on_scheduler(task_probe_now)` just before it)."""
    return time.time()


def task_probe_summary(dask_scheduler: Any) -> dict[str, dict[str, float]]:
    """What the probe recorded (`client.run_on_scheduler(task_probe_summary)`), then cleared."""
    probe = dask_scheduler.plugins[NAME]
    found, probe.prefixes = probe.prefixes, {}
    return found
