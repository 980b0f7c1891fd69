"""Cluster layer: an embedded LocalCluster of processes, or an existing `dask scheduler`."""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import time
import urllib.request

import dask.array as da
import pytest

from seisctf.cluster import SCHEDULER_ENV, compute, dask_client, machine_workers


def _worker_pids(client) -> set[int]:
    return set(client.run(os.getpid).values())


def test_embedded_local_cluster_of_worker_processes(capsys):
    with dask_client() as client:
        info = client.scheduler_info()["workers"]
        assert len(info) == machine_workers()
        assert os.getpid() not in _worker_pids(client)
        assert all(worker["memory_limit"] > 0 for worker in info.values())
        total = compute(da.ones((1000, 100), chunks=(100, 100)).sum(), quiet=True)[0]
        assert total == 100_000
        # The printed link is the dashboard's page.
        link = client.dashboard_link
        assert f"; dashboard {link}\n" in capsys.readouterr().err
        with urllib.request.urlopen(link, timeout=30) as page:
            assert page.status == 200 and b"bokeh" in page.read().lower()
        # Nothing of distributed's runs inside this process's garbage collections, where a
        # Ctrl-C would be swallowed ("Exception ignored in ... _gc_callback").
        assert not [hook for hook in gc.callbacks if "distributed" in hook.__module__]


def test_existing_scheduler_by_argument_and_environment(dask_cluster, monkeypatch):
    with dask_client(dask_cluster.address, quiet=True) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        assert len(_worker_pids(client)) == 2
        assert compute(da.arange(10, chunks=3).sum(), quiet=True)[0] == 45
    monkeypatch.setenv(SCHEDULER_ENV, dask_cluster.address)
    with dask_client(quiet=True) as client:
        assert client.scheduler.address == dask_cluster.address


def test_background_start_preloads_worker_modules_and_compute_waits():
    """The CLI's way: the cluster starts in a thread while the caller goes on; `compute` waits
    for it; workers fork from a server that imported the preloaded modules; results are the
    same as without a cluster."""
    from seisctf import cluster

    values = da.random.default_rng(3).standard_normal((400, 300), chunks=(70, 90))
    expected = compute((values**2).sum(), quiet=True)[0]  # no client: threaded scheduler
    with dask_client(quiet=True, preload=("seisctf.scoring.ctf",), background=True) as handle:
        assert handle is None
        assert compute((values**2).sum(), quiet=True)[0] == expected
        client = cluster.active_client()
        assert client is not None and os.getpid() not in _worker_pids(client)
        assert all(client.run(lambda: "seisctf.scoring.ctf" in __import__("sys").modules).values())
        assert set(
            client.run(lambda: __import__("os").environ["OPENBLAS_NUM_THREADS"]).values()
        ) == {"1"}
    assert cluster.active_client() is None


def test_background_start_failure_reaches_the_caller():
    import pytest

    with pytest.raises(Exception, match="no_such_module|No module|failed to start"):
        with dask_client(quiet=True, preload=("seisctf.no_such_module",), background=True):
            compute(da.ones(3, chunks=1).sum(), quiet=True)


def _thresholds(dask_worker) -> tuple[float, float]:
    manager = dask_worker.memory_manager
    return manager.memory_spill_fraction, manager.memory_pause_fraction


def test_embedded_workers_spill_late_unless_the_user_configured_otherwise():
    import dask

    with dask_client(n_workers=1, memory_limit="400MiB", quiet=True) as client:
        assert set(client.run(_thresholds).values()) == {(0.85, 0.9)}
    with dask.config.set({"distributed.worker.memory.spill": 0.6}):
        with dask_client(n_workers=1, memory_limit="400MiB", quiet=True) as client:
            assert set(client.run(_thresholds).values()) == {(0.6, 0.9)}


def test_compute_in_waves_keeps_order_and_holds_one_wave(dask_cluster, capfd):
    """10 tasks in waves of 3: the results in task order, each wave built only after every task
    of the one before ran, and when a wave starts the scheduler holds at most the previous
    wave (its 3 tasks and the one gathering their results; their release is asynchronous),
    never an earlier one; one progress line per wave."""
    import time

    import dask

    from seisctf.cluster import compute_in_waves

    built_at: dict[int, float] = {}
    held: list[int] = []

    def make_task(index: int):
        built_at[index] = time.time()
        return dask.delayed(lambda i: (i * i, time.time()))(index, dask_key_name=f"square-{index}")

    with dask_client(dask_cluster.address, quiet=True) as client:

        def make_and_count(index: int):
            if index % 3 == 0:
                held.append(
                    client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
                )
            return make_task(index)

        results = compute_in_waves(make_and_count, 10, label="squares", wave_tasks=3)
        assert [square for square, _ in results] == [index**2 for index in range(10)]
        ran_at = [when for _, when in results]
        for first in (3, 6, 9):  # a wave is built after the previous one ran
            assert min(built_at[i] for i in range(first, min(first + 3, 10))) > max(
                ran_at[first - 3 : first]
            )
        assert len(held) == 4 and max(held) <= 4, held
        one_wave = compute_in_waves(make_task, 3, label="one", wave_tasks=3)
        assert [square for square, _ in one_wave] == [0, 1, 4]
    err = capfd.readouterr().err
    assert all(f"squares (wave {wave} of 4)" in err for wave in range(1, 5)), err
    assert "one:" in err and "one (wave" not in err, err


RELEASE_PROBE = """
import psutil
from seisctf.cluster import release_free_memory
rss = lambda: psutil.Process().memory_info().rss
blocks = [bytes(2000) for _ in range(100_000)]  # 200 MB of C heap (above pymalloc's 512 B)
kept = blocks[::64]  # one in 64 stays: the heap's top cannot shrink
del blocks
before = rss()
release_free_memory()
print(before, rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_free_memory_gives_freed_heap_pages_back():
    """Freed blocks between live ones stay resident until `release_free_memory` (a fresh
    process: nothing else's allocations)."""
    found = subprocess.run(
        [sys.executable, "-c", RELEASE_PROBE], check=True, capture_output=True, text=True
    )
    before, after = map(int, found.stdout.split())
    assert before - after > 150 * 2**20, (before, after)


@pytest.mark.parametrize("cluster", ["embedded", "configured"])
def test_a_killed_command_leaves_no_process_of_its_cluster(cluster, tmp_path):
    """SIGKILL of a command while its cluster works (no handler runs, no cluster is closed):
    its workers, nannies' processes and fork server are gone within seconds, for the embedded
    cluster and for a LocalCluster of worker processes from a `--cluster` file alike."""
    import psutil

    command = [sys.executable, "-m", "seisctf.cli", "synth", "global", "--sensors", "2048"]
    command += ["--duration", "3600", "--out", str(tmp_path / "w.zarr")]
    if cluster == "configured":
        config = tmp_path / "local.yaml"
        config.write_text(
            "class: distributed.LocalCluster\noptions: {n_workers: 2, threads_per_worker: 1, "
            "dashboard_address: '127.0.0.1:0'}\n"
        )
        command += ["--cluster", str(config)]
    log = tmp_path / "stderr.txt"
    with open(log, "w") as stderr:
        process = subprocess.Popen(command, stderr=stderr)
    try:
        deadline = time.monotonic() + 120
        while "dask: " not in log.read_text():  # printed once the workers are up
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        started = psutil.Process(process.pid).children(recursive=True)
        # Two workers, and the fork server or resource tracker they started from.
        assert len(started) >= 3, [p.cmdline() for p in started]
    finally:
        process.kill()
        process.wait()
    _, alive = psutil.wait_procs(started, timeout=15)
    for left in alive:
        with contextlib.suppress(psutil.Error):
            left.kill()
    assert alive == [], [p.cmdline() for p in alive]
