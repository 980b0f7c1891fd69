"""The Dask scheduler's cost per task, measured at 10^4 to 10^5 tasks a graph (issue 23, point 5).

Graphs of N tasks run on an external `dask scheduler` with two single-threaded `dask worker`
processes (as on a real cluster, so the scheduler's memory is its own process's): per N, the
client's graph construction, the submission (graph sent and accepted), the wall time to the
last result, the scheduler's peak RSS, and from these the cost per task. Two graph shapes:

- `independent`: N tasks of a tiny function, gathered as one list (`client.map`-like, as an
  ingest's per-file or per-batch tasks are);
- `blockwise + reduce`: a dask array of N one-element chunks, `+ 1` blockwise, summed by a tree
  reduction (the shape of a store-wide transform and score).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from scale_report import GiB, MiB, ScaleOptions, Section, TreeSampler, fitted_exponent, verdict

WORKERS = 2
# Graph sizes N per shape. The blockwise graph has about 3 N tasks, so its full sizes give
# 10^4, 10^5 and 10^6 tasks. One graph of independent tasks costs more than linearly (30,000
# tasks took 7× the time of 10,000), so that shape stops at 3 × 10^4 and the same tasks in
# waves go to 10^5.
QUICK_SIZES = {
    "independent": (1_000, 3_000),
    "independent, in waves": (1_000, 3_000),
    "blockwise + reduce": (1_000, 3_000),
}
FULL_SIZES = {
    "independent": (10_000, 30_000),
    "independent, in waves": (30_000, 100_000),
    "blockwise + reduce": (3_333, 33_333, 333_333),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dask_command() -> list[str]:
    """The `dask` command of this interpreter's environment."""
    return [str(Path(sys.executable).with_name("dask"))]


@contextlib.contextmanager
def external_cluster(workdir: Path, workers: int = WORKERS) -> Iterator[tuple[str, int]]:
    """A `dask scheduler` and `workers` single-threaded `dask worker`s on loopback, as processes.

    Yields (scheduler address, scheduler pid); every process is stopped at the end."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = _dask_command()
    logs = workdir / "cluster-logs"
    logs.mkdir(parents=True, exist_ok=True)
    quiet = {"stdout": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stderr=(logs / "scheduler.log").open("w"),
        **quiet,
    )
    processes = [scheduler]
    try:
        for index in range(workers):
            processes.append(
                subprocess.Popen(
                    [*dask, "worker", address, "--nthreads", "1", "--no-nanny"]
                    + ["--no-dashboard", "--local-directory", str(workdir / f"worker-{index}")],
                    stderr=(logs / f"worker-{index}.log").open("w"),
                    **quiet,
                )
            )
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address, scheduler.pid
    finally:
        # The workers, then the scheduler: a `dask worker --no-nanny` whose scheduler went first
        # can take 20 s and more.
        for group in (processes[1:], processes[:1]):
            for process in group:
                process.terminate()
            for process in group:
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _independent(n_tasks: int) -> list:
    """N independent tasks (`index + 1`), computed together as seisctf computes its per-file and
    per-block tasks (`compute(*delayed_objects)`), summed here. The function is the standard
    library's, which every process of the cluster can unpickle. (Wrapping them in one more
    delayed, `delayed(sum)(list)`, costs the client time quadratic in N: 37 s at 10^4.)"""
    import operator

    import dask

    return [
        dask.delayed(operator.add)(index, 1, dask_key_name=f"add-{index}")
        for index in range(n_tasks)
    ]


def _blockwise_reduce(n_tasks: int):
    """A dask array of N one-element chunks, + 1, summed by a tree reduction."""
    import dask.array as da

    return (da.arange(n_tasks, chunks=1, dtype="int64") + 1).sum(split_every=32)


def _independent_in_waves(n_tasks: int) -> list:
    """The same N tasks through `seisctf.cluster.compute_in_waves`, as `ingest waveforms` runs
    its block runs: a wave of at most MAX_TASKS_PER_WAVE tasks is built and computed at a time."""
    import operator

    import dask

    from seisctf.cluster import compute_in_waves

    def make_task(index: int):
        return dask.delayed(operator.add)(index, 1, dask_key_name=f"wave-add-{index}")

    return compute_in_waves(make_task, n_tasks, quiet=True)


SHAPES = {
    "independent": _independent,
    "independent, in waves": _independent_in_waves,
    "blockwise + reduce": _blockwise_reduce,
}
# Shapes whose function runs the tasks itself (on the default client) and returns the results.
RUN_THEMSELVES = {"independent, in waves"}


def _expected(n_tasks: int) -> int:
    return n_tasks * (n_tasks + 1) // 2


def _cpu_seconds(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def measure(address: str, scheduler_pid: int, shape: str, n_tasks: int) -> dict[str, float]:
    """One graph of about `n_tasks` tasks through the scheduler at `address`: the client's
    build, submit and wall times, and the scheduler process's CPU seconds and peak RSS."""
    from distributed import Client

    with Client(address, timeout=60) as client:
        runs_itself = shape in RUN_THEMSELVES
        start = time.perf_counter()
        collection = None if runs_itself else SHAPES[shape](n_tasks)
        many = isinstance(collection, list)
        graph_tasks = (
            n_tasks
            if runs_itself
            else len(collection)
            if many
            else len(collection.__dask_graph__())
        )
        built = time.perf_counter()
        cpu_before = _cpu_seconds(scheduler_pid)
        with TreeSampler(scheduler_pid, interval=0.05) as sampler:
            if runs_itself:
                result = sum(SHAPES[shape](n_tasks))
                submitted = float("nan")
            else:
                futures = client.compute(collection)
                submitted = time.perf_counter()
                result = sum(client.gather(futures)) if many else futures.result()
                del futures
            done = time.perf_counter()
        scheduler_cpu = _cpu_seconds(scheduler_pid) - cpu_before
        if result != _expected(n_tasks):
            raise AssertionError(f"{shape} of {n_tasks} tasks gave {result}")
    return {
        "tasks": graph_tasks,
        "build_s": built - start,
        "submit_s": submitted - built,
        "run_s": done - built,
        "scheduler_cpu_s": scheduler_cpu,
        "scheduler_peak_rss": max(sampler.memory.peak_by_pid.values()),
    }


def sections(
    options: ScaleOptions, sizes: dict[str, tuple[int, ...]] | None = None
) -> Iterator[Section]:
    """The table of every shape at its sizes (default: QUICK_SIZES or FULL_SIZES)."""
    sizes = sizes or (QUICK_SIZES if options.quick else FULL_SIZES)
    section = Section(
        "The scheduler's cost per task (`scale_scheduler.py`)",
        [
            "graph",
            "tasks",
            "client build s",
            "submit s",
            "build to result s",
            "µs per task",
            "tasks/s",
            "scheduler CPU µs per task",
            "scheduler peak RSS MiB",
            "scheduler KiB per task",
        ],
    )
    per_task: dict[str, list[tuple[int, float]]] = {}
    with external_cluster(options.workdir / "scheduler-bench") as (address, scheduler_pid):
        idle = TreeSampler(scheduler_pid)
        with idle:
            time.sleep(0.5)
        idle_rss = max(idle.memory.peak_by_pid.values())
        for shape, shape_sizes in sizes.items():
            for n_tasks in shape_sizes:
                figures = measure(address, scheduler_pid, shape, n_tasks)
                tasks = figures["tasks"]
                seconds = figures["build_s"] + figures["run_s"]
                per_task.setdefault(shape, []).append((tasks, seconds))
                grown = max(figures["scheduler_peak_rss"] - idle_rss, 0)
                section.rows.append(
                    [
                        shape,
                        tasks,
                        figures["build_s"],
                        figures["submit_s"],
                        seconds,
                        seconds / tasks * 1e6,
                        tasks / seconds,
                        figures["scheduler_cpu_s"] / tasks * 1e6,
                        figures["scheduler_peak_rss"] / MiB,
                        grown / tasks / 1024,
                    ]
                )
                print(f"  {shape}: {tasks:,} tasks in {seconds:.1f} s", flush=True)
    for shape, points in per_task.items():
        exponent = fitted_exponent([tasks for tasks, _ in points], [s for _, s in points])
        section.goals.append(
            verdict(
                f"{shape}: time grows no faster than the task count (fitted exponent ≤ 1.05)",
                f"{exponent:.2f}",
                exponent <= 1.05,
            )
        )
    section.notes.append(
        f"Scheduler idle RSS {idle_rss / MiB:.0f} MiB; 'KiB per task' is its peak growth over "
        f"idle divided by the tasks. {WORKERS} single-threaded `dask worker` processes, no nanny; "
        f"the scheduler is a separate `dask scheduler` process on loopback. "
        f"At 1 GiB of scheduler memory the KiB per task "
        f"gives the largest graph one scheduler holds ({GiB // 1024:,} KiB / KiB per task)."
    )
    yield section


def main() -> None:
    """One shape at chosen sizes: `scale_scheduler.py "blockwise + reduce" 3333 33333 333333`."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=list(SHAPES))
    parser.add_argument("sizes", type=int, nargs="+", help="N per graph")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as workdir:
        options = ScaleOptions(quick=False, data=Path(workdir), workdir=Path(workdir))
        for section in sections(options, {args.shape: tuple(args.sizes)}):
            print(section.markdown())
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
