"""One way to get a Dask client, and one way to run a graph on it with progress.

Default: an embedded `LocalCluster` of worker processes sized to the machine (one single-threaded
worker per core, memory split between them). `--scheduler ADDR` or env `SEISCTF_SCHEDULER` attaches
to an existing cluster instead. Chunking never depends on the cluster, so results do not either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import dask

SCHEDULER_ENV = "SEISCTF_SCHEDULER"


def machine_workers() -> int:
    """Cores this process may use (respecting CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def worker_memory_limit(n_workers: int) -> int:
    """Bytes per worker: 80 % of the machine's memory, split evenly."""
    import psutil

    return int(0.8 * psutil.virtual_memory().total / n_workers)


@contextlib.contextmanager
def dask_client(
    scheduler: str | None = None,
    *,
    n_workers: int | None = None,
    memory_limit: int | str | None = None,
    quiet: bool = False,
) -> Iterator[Any]:
    """A `distributed.Client` of the given scheduler, `$SEISCTF_SCHEDULER`, or a LocalCluster."""
    from distributed import Client, LocalCluster

    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    cluster = None
    if address:
        client = Client(address, timeout="30s")
    else:
        n_workers = n_workers or machine_workers()
        for name in ("distributed", "distributed.worker", "distributed.scheduler"):
            logging.getLogger(name).setLevel(logging.ERROR)
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit or worker_memory_limit(n_workers),
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        )
        client = Client(cluster)
    if not quiet:
        where = (
            address or f"embedded LocalCluster, {len(client.scheduler_info()['workers'])} workers"
        )
        print(f"dask: {where}; dashboard {client.dashboard_link}", file=sys.stderr)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def active_client() -> Any | None:
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def compute(*collections: Any, label: str = "", quiet: bool = False) -> tuple[Any, ...]:
    """Compute Dask collections on the active client (with a progress bar on stderr) or, with no
    client, on the local threaded scheduler. Returns the computed values."""
    client = active_client()
    if client is None:
        return dask.compute(*collections)
    from dask.base import unpack_collections

    flat, repack = unpack_collections(*collections, traverse=True)
    if not flat:
        return tuple(repack([]))
    persisted = client.persist(list(flat))
    if not quiet:
        from distributed import progress

        if label:
            print(f"{label}:", file=sys.stderr)
        with contextlib.redirect_stdout(sys.stderr):
            progress(persisted)
        print(file=sys.stderr)
    return tuple(repack(dask.compute(*persisted)))
