"""Fault injection for the reliability tests: seisctf commands run as subprocesses on a real Dask
cluster the test started; a scheduler plugin kills a process (a worker, the command, the S3
server) at the moment the first of the job's tasks finishes; stores compared object by object.

The kill happens inside the scheduler, at the task event itself. The test's own waits (for the
plugin's report, for idle workers) poll the cluster until a condition holds, with generous
deadlines: they synchronise on what the cluster reports, never on elapsed time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import cloudpickle
import zarr
from distributed.diagnostics.plugin import SchedulerPlugin

# The scheduler and workers cannot import this module: functions run there go by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

T = TypeVar("T")
N_WORKERS = 2  # of the fixtures' restarting cluster
SECRET = "reliability-secret-long-enough-to-use"
# Deadlines for a loaded 2-core machine: generous; a wait returns as soon as its condition holds.
RUN_TIMEOUT_S = 600.0
EVENT_TIMEOUT_S = 300.0
PARTIAL_SUFFIX = ".partial"  # zarr's local atomic writes: `<key>.<uuid>.partial`, then a rename


def seisctf_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "seisctf.cli", *args]


def start(command: Sequence[str]) -> subprocess.Popen:
    """Start a command with its output captured (small: commands run with `--quiet`)."""
    return subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen, timeout_s: float = RUN_TIMEOUT_S) -> tuple[int, str, str]:
    """Wait for a started command: (exit code, stdout, stderr)."""
    out, err = process.communicate(timeout=timeout_s)
    return process.returncode, out, err


def run(command: Sequence[str]) -> tuple[int, str, str]:
    return finish(start(command))


def wait_for(
    condition: Callable[[], T | None],
    what: str,
    timeout_s: float = EVENT_TIMEOUT_S,
    interval_s: float = 0.02,
) -> T:
    """Poll `condition` until it returns something other than None or False; return that."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value is not None and value is not False:
            return value
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@dataclass(frozen=True)
class Inputs:
    """Inputs of the jobs (`fault_fixtures.job_inputs`)."""

    archive: Path
    das: Path
    recipe: Path
    truth: Path
    submissions: tuple[Path, ...]


# --- the scheduler's view ----------------------------------------------------------------------


class KillOnFinished(SchedulerPlugin):
    """A scheduler plugin that SIGKILLs a process at a task event, inside the scheduler (no
    polling delay): when the `after`-th task whose key prefix starts with `prefix` has finished.
    The process killed is `pid`, or (with `worker_pids`) the process of a worker running another
    such task at that moment (the plugin waits for a finish with one running), another worker
    than the one that just finished if possible. With `while_running` it waits for such a finish
    to kill `pid` too (whether one runs when the first finishes is a race)."""

    name = "seisctf-kill-on-finished"

    def __init__(
        self,
        prefix: str,
        *,
        after: int = 1,
        pid: int | None = None,
        worker_pids: Mapping[str, int] | None = None,
        while_running: bool = False,
    ):
        self.prefix, self.after, self.pid = prefix, after, pid
        self.while_running = while_running
        self.worker_pids = dict(worker_pids or {})
        self.finished = 0
        self.fired: dict[str, Any] | None = None

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def _running(self) -> dict[str, int]:
        """Tasks of the prefix processing, per worker address."""
        return {
            address: count
            for address, worker in self.scheduler.workers.items()
            if (count := sum(t.prefix.name.startswith(self.prefix) for t in worker.processing))
        }

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if self.fired is not None or (start, finish) != ("processing", "memory"):
            return
        task = self.scheduler.tasks.get(key)
        if task is None or not task.prefix.name.startswith(self.prefix):
            return
        self.finished += 1
        if self.finished < self.after:
            return
        running = self._running()
        if not running and (self.worker_pids or self.while_running):
            return
        target, address = self.pid, None
        if self.worker_pids:
            others = [a for a in running if a != kwargs.get("worker")] or list(running)
            address = max(others, key=running.get)
            target = self.worker_pids[address]
        if target is None:
            return
        os.kill(target, signal.SIGKILL)
        self.fired = {"pid": target, "worker": address, "done": self.finished, "running": running}


def _plugin_state(dask_scheduler: Any, name: str) -> dict[str, Any] | None:
    return dask_scheduler.plugins[name].fired


def worker_pids(client: Any) -> dict[str, int]:
    return client.run(os.getpid)


@contextlib.contextmanager
def kill_on_finished(client: Any, plugin: KillOnFinished) -> Iterator[Callable[..., dict]]:
    """Install `plugin` on the scheduler for the block; yields `fired(process=None)`, which
    waits until the plugin has killed and returns what it did (pid, worker, tasks done and
    running then), failing at once if `process` ends before that."""
    client.register_plugin(plugin)

    def fired(process: subprocess.Popen | None = None) -> dict[str, Any]:
        def state() -> dict[str, Any] | None:
            found = client.run_on_scheduler(_plugin_state, name=plugin.name)
            if found is None and process is not None and process.poll() is not None:
                raise AssertionError(f"the command ended before the kill: {finish(process)}")
            return found

        return wait_for(state, f"the kill after {plugin.after} finished {plugin.prefix!r} task(s)")

    try:
        yield fired
    finally:
        client.unregister_scheduler_plugin(plugin.name)


def _executing(dask_worker: Any) -> int:
    return len(dask_worker.state.executing)


def wait_until_idle(client: Any, n_workers: int) -> None:
    """Wait for `n_workers` workers that run nothing (tasks of a killed client included: a
    worker finishes the task it is executing even when nobody wants its result)."""
    client.wait_for_workers(n_workers, timeout=EVENT_TIMEOUT_S)

    def idle() -> bool:
        try:
            return not any(client.run(_executing).values())
        except OSError:  # a worker is restarting
            return False

    wait_for(idle, "idle workers")


# --- stores ------------------------------------------------------------------------------------


def store_objects(root: Path) -> dict[str, str]:
    """sha256 of every object of a local store (chunks, array and group metadata), by key;
    leftovers of a killed atomic write (`*.partial`, never read by zarr) are not objects."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(PARTIAL_SUFFIX)
    }


def remote_objects(filesystem: Any, prefix: str) -> dict[str, str]:
    """sha256 of every object below `prefix` of an fsspec filesystem, by key below it."""
    filesystem.invalidate_cache()
    root = prefix.split("://", 1)[-1].rstrip("/")
    return {
        name[len(root) + 1 :]: hashlib.sha256(filesystem.cat_file(name)).hexdigest()
        for name in sorted(filesystem.find(root))
        if name != root
    }


def decode_every_chunk(url: str, storage_options: Mapping[str, Any] | None = None) -> int:
    """Read every array of a zarr group whole (each stored chunk decoded); the element count."""
    group = zarr.open_group(url, mode="r", storage_options=storage_options, use_consolidated=False)
    count = 0
    for _, array in group.arrays():
        count += array[...].size
    return count


def is_marked_complete(url: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    from seisctf import conventions as cv

    try:
        group = zarr.open_group(url, mode="r", storage_options=storage_options)
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        return False
    return bool(group.attrs.get(cv.ATTR_COMPLETE))
