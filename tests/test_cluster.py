"""Cluster layer: an embedded LocalCluster of processes, or an existing `dask scheduler`."""

from __future__ import annotations

import os

import dask.array as da

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
    assert "dashboard http://" in capsys.readouterr().err


def test_existing_scheduler_by_argument_and_environment(dask_cluster, monkeypatch):
    with dask_client(dask_cluster.address, quiet=True) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        assert len(_worker_pids(client)) == 2
        assert compute(da.arange(10, chunks=3).sum(), quiet=True)[0] == 45
    monkeypatch.setenv(SCHEDULER_ENV, dask_cluster.address)
    with dask_client(quiet=True) as client:
        assert client.scheduler.address == dask_cluster.address
