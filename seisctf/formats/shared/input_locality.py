"""Block tasks sent to the host that keeps their input files, on a cluster of several hosts.

A scan task keeps the files it read on its own host (`input_cache`); a block task that runs on
another host reads them from storage again. `in_path_order` sends consecutive scan batches to
one host, so that the files one block run reads (a station's channels) are kept together.
`near_inputs` asks every worker once which of the current run's files its host keeps, and
builds each task under a Dask annotation naming the workers of the host that keeps most of its
input bytes, other workers allowed: a busy or lost host does not hold a task back (a task that
runs elsewhere reads storage, as without a cache). With one host (every worker shares one
cache), no run or no distributed client, tasks are built as they are.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from seisctf.cluster import active_client
from seisctf.formats.shared import input_cache

Task = TypeVar("Task")
# Seconds to wait for the workers' answers; without them, tasks go where the scheduler puts them.
ANSWER_TIMEOUT_S = 30


def near_inputs(
    make_task: Callable[[int], Task], inputs_of: Callable[[int], Iterable[str]]
) -> Callable[[int], Task]:
    """`make_task` (index -> a Dask collection, as `cluster.compute_in_waves` takes it), each
    task built under `dask.annotate(workers=…, allow_other_workers=True)` for the host keeping
    most bytes of its input files (`inputs_of(index)`: their hex sha256)."""
    run, client = input_cache.current_run(), active_client()
    if not run or client is None:
        return make_task
    workers_of = _workers_by_host(client)
    if len(workers_of) < 2:
        return make_task
    host_of = {worker: host for host, workers in workers_of.items() for worker in workers}
    asked = [workers[0] for workers in workers_of.values()]  # one a host
    where: dict[str, dict[str, int]] = collections.defaultdict(dict)  # digest -> host -> bytes
    for worker, files in _ask(client, input_cache.held, run, workers=asked):
        for digest, size in files.items():
            where[digest][host_of[worker]] = size

    def placed(index: int) -> Task:
        import dask

        held: collections.Counter = collections.Counter()
        for digest in set(inputs_of(index)):
            held.update(where.get(digest, {}))
        if not held:
            return make_task(index)
        host = max(held, key=lambda name: (held[name], name))
        with dask.annotate(workers=workers_of[host], allow_other_workers=True):
            return make_task(index)

    return placed


def near_partitions(
    make_task: Callable[[int], Task],
    weights_of: Callable[[int], Iterable[tuple[int, int]]],
    parts: Sequence[Any],
) -> Callable[[int], Task]:
    """`make_task` (as `near_inputs` takes it) whose task `index` reads the kept partitions
    (`cluster.kept`: `parts`) `weights_of(index)` gives as (partition, weight): built under an
    annotation naming the workers of the host holding the partitions of most weight (the host
    whose scan read their files, and keeps them), other workers allowed."""
    run, client = input_cache.current_run(), active_client()
    if not run or client is None:
        return make_task
    workers_of = _workers_by_host(client)
    if len(workers_of) < 2:
        return make_task
    host_of = {worker: host for host, workers in workers_of.items() for worker in workers}
    keys = [[future.key for future in client.futures_of(part)][:1] for part in parts]
    try:
        holders = client.who_has([key for found in keys for key in found])
    except (OSError, TimeoutError):
        return make_task
    part_host = [next((host_of[w] for k in found for w in holders.get(k, ()) if w in host_of),
                      None) for found in keys]  # fmt: skip

    def placed(index: int) -> Task:
        import dask

        held: collections.Counter = collections.Counter()
        for part, weight in weights_of(index):
            if part_host[part] is not None:
                held[part_host[part]] += weight
        if not held:
            return make_task(index)
        host = max(held, key=lambda name: (held[name], name))
        with dask.annotate(workers=workers_of[host], allow_other_workers=True):
            return make_task(index)

    return placed


def in_path_order(make_task: Callable[[int], Task], count: int) -> Callable[[int], Task]:
    """`make_task` for `count` scan tasks of consecutive path batches: task i built under an
    annotation naming the workers of host i x hosts // count (other workers allowed), so that
    neighbouring paths (a station's channels and days, in an SDS tree) are kept on one host,
    where the block runs that read them together then go (`near_inputs`). With one host, no
    run or no distributed client, tasks are built as they are."""
    run, client = input_cache.current_run(), active_client()
    if not run or client is None:
        return make_task
    workers_of = _workers_by_host(client)
    if len(workers_of) < 2:
        return make_task
    hosts = sorted(workers_of)

    def placed(index: int) -> Task:
        import dask

        host = hosts[index * len(hosts) // count]
        with dask.annotate(workers=workers_of[host], allow_other_workers=True):
            return make_task(index)

    return placed


def _workers_by_host(client: Any) -> dict[str, list[str]]:
    """{host's cache (`input_cache.host_cache`): its workers' addresses, sorted}."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for worker, host in _ask(client, input_cache.host_cache):
        found[host].append(worker)
    return {host: sorted(workers) for host, workers in found.items()}


def _ask(client: Any, function: Callable[..., Any], *args: Any, workers: Any = None) -> list:
    """[(worker, answer)] of `client.run(function, *args)` on `workers` (default all) that
    answered in time; none if the call fails (placing tasks is an optimisation only)."""
    try:
        answers = client.run(function, *args, workers=workers, on_error="return",
                             callback_timeout=ANSWER_TIMEOUT_S)  # fmt: skip
    except (OSError, TimeoutError):
        return []
    return [(w, a) for w, a in sorted(answers.items()) if not isinstance(a, BaseException)]
