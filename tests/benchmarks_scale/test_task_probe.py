"""benchmarks/task_probe.py on a real `dask scheduler` (probe preloaded) and `dask worker`: its
times are the scheduler's, so a worker whose estimate of the scheduler's clock is off (as a
loaded machine's heartbeats leave it, here by an hour and held there) moves no reported time
before the run's start, and no phase ends before it starts."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from servers import start_dask_cluster, stop_dask_cluster

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from task_probe import task_probe_now, task_probe_summary  # noqa: E402

SLEEP_S = 0.3
CLOCK_ERROR_S = 3600.0


@pytest.fixture(scope="module")
def probed_cluster():
    cluster = start_dask_cluster(
        n_workers=1,
        # The probe, and this module's functions (pickled by reference), importable there.
        environment={"PYTHONPATH": os.pathsep.join(map(str, [BENCHMARKS, HERE, HERE.parent]))},
        scheduler_options=["--preload", "task_probe"],
    )
    yield cluster
    stop_dask_cluster(cluster)


def misjudge_the_scheduler_clock(dask_worker) -> None:
    """The worker takes the scheduler's clock to be an hour behind its own and keeps thinking
    so: its heartbeats, which would correct the estimate, stop."""
    dask_worker.periodic_callbacks["heartbeat"].stop()
    dask_worker.scheduler_delay = -CLOCK_ERROR_S


def nap(index: int) -> int:
    time.sleep(SLEEP_S)
    return index


def test_times_are_the_schedulers_and_never_run_backwards(probed_cluster):
    from distributed import Client

    with Client(probed_cluster.address, timeout="10s") as client:
        client.run(misjudge_the_scheduler_clock)
        client.run_on_scheduler(task_probe_summary)  # cleared
        began = client.run_on_scheduler(task_probe_now)
        client_began = time.time()
        naps = client.gather(client.map(nap, range(3), key=[f"nap-{i}" for i in range(3)]))
        ended = time.time()
        summary = client.run_on_scheduler(task_probe_summary)
    assert naps == [0, 1, 2]
    entry = summary["nap"]
    assert entry["tasks"] == 3
    # The scheduler and this process share the machine's clock: the run's start mapped through
    # the scheduler's clock, and this process's own, both precede the first task.
    assert began <= client_began <= entry["first_start"] <= entry["last_stop"] <= ended
    # Three naps in a row on one single-threaded worker: the span holds them all.
    assert entry["last_stop"] - entry["first_start"] >= 3 * SLEEP_S
    assert 3 * SLEEP_S <= entry["compute_s"] <= ended - client_began
