"""The scale benchmarks' Dask cluster: an external `dask scheduler` with the task probe
(`task_probe`) and `dask worker` processes of one thread each (no nanny; the embedded cluster's
malloc and spill settings), as a user's cluster runs them; and where a section's runs get one
(`Clusters`: fresh for each run, or one per worker count kept for every run)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from scale_report import TreeSampler

from seisctf.worker_memory import EMBEDDED_ENVIRON, PRE_SPAWN_ENVIRON, worker_memory_limit

HERE = Path(__file__).resolve().parent
N_WORKERS = 2
# Spill and pause fractions of the embedded workers (`seisctf.cluster`), as dask config.
WORKER_CONFIG = {
    "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL": "0.85",
    "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE": "0.9",
}


class Cluster:
    """`dask scheduler` (task probe preloaded) and `n_workers` `dask worker`s, as processes of
    this one: started on entering, terminated (by their ids) on leaving."""

    def __init__(self, workdir: Path, n_workers: int = N_WORKERS):
        self.n_workers = n_workers
        self.file = workdir / "scheduler.json"
        self.processes: list[subprocess.Popen] = []
        self.log = open(workdir / "cluster.log", "a")  # noqa: SIM115 - closed in __exit__

    def _start(self, *argv: str, env: dict[str, str]) -> subprocess.Popen:
        command = [str(Path(sys.executable).with_name("dask")), *argv]
        process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.processes.append(process)
        return process

    def __enter__(self) -> Cluster:

        try:
            return self._launch()
        except BaseException:
            self.__exit__()
            raise

    def _launch(self) -> Cluster:
        from distributed import Client

        self.file.unlink(missing_ok=True)
        path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env = {**os.environ, "PYTHONPATH": path, **WORKER_CONFIG}
        self.scheduler = self._start(
            "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
            "--scheduler-file", str(self.file), "--preload", "task_probe", "--preload",
            "seisctf.cluster", env=env,
        )  # fmt: skip
        while not self.file.exists():
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole
        worker_env = {
            **env,
            **{key: str(value) for key, value in {**PRE_SPAWN_ENVIRON, **EMBEDDED_ENVIRON}.items()},
        }
        self.workers = [
            self._start(
                "worker",
                "--scheduler-file",
                str(self.file),
                "--nthreads",
                "1",
                "--no-nanny",
                "--memory-limit",
                str(worker_memory_limit(self.n_workers)),
                "--no-dashboard",
                "--preload",
                "seisctf.cluster",
                env=worker_env,
            )  # fmt: skip
            for _ in range(self.n_workers)
        ]
        self.client = Client(scheduler_file=str(self.file))
        self.client.wait_for_workers(self.n_workers, timeout=120)
        self.address = self.client.scheduler.address
        return self

    def now(self) -> float:
        """The scheduler's clock now, the one the task probe's times are read on."""
        from task_probe import task_probe_now

        return self.client.run_on_scheduler(task_probe_now)

    def probe(self) -> dict[str, dict[str, float]]:
        """The task probe's record since the last call (and clear it)."""
        from task_probe import task_probe_summary

        return self.client.run_on_scheduler(task_probe_summary)

    def samplers(self) -> list[TreeSampler]:
        """RSS samplers of the scheduler and of each worker (roles by process)."""
        return [TreeSampler(self.scheduler.pid, roles={self.scheduler.pid: "scheduler"})] + [
            TreeSampler(worker.pid, roles={worker.pid: f"worker {index}"})
            for index, worker in enumerate(self.workers, 1)
        ]

    def __exit__(self, *exc) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close()
        # One at a time, workers first (one stopping with its scheduler waited up to 30 s).
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.log.close()


class Clusters:
    """The clusters a section's runs attach to: a fresh `Cluster` for each run, or (not
    `fresh`) one per worker count, started at its first run and stopped on leaving, each in a
    folder of its own under `workdir`."""

    def __init__(self, workdir: Path, fresh: bool):
        self.workdir, self.fresh = workdir, fresh
        self.kept: dict[int, Cluster] = {}
        self.stack = contextlib.ExitStack()

    @contextlib.contextmanager
    def of(self, workers: int = N_WORKERS) -> Iterator[Cluster]:
        if self.fresh:
            with Cluster(self.workdir, workers) as cluster:
                yield cluster
            return
        if workers not in self.kept:
            folder = self.workdir / f"cluster_{workers}w"
            folder.mkdir(exist_ok=True)
            self.kept[workers] = self.stack.enter_context(Cluster(folder, workers))
        yield self.kept[workers]

    def __enter__(self) -> Clusters:
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()
