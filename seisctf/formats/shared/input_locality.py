"""Block tasks sent to the host that keeps their input files, on a cluster of several hosts.

A scan task keeps the files it read on its own host (`input_cache`); a block task that runs on
another host reads them from storage again. `in_path_order` sends consecutive scan batches to
one host, so that the files one block run reads (a station's channels) are kept together.
`run_placement` asks every host once which of the current run's files it keeps; `near_inputs`
and `near_partitions` (by the files of a task's scan partitions) build each task under a Dask
annotation naming the workers of the host that keeps most of its input bytes (`Placement`); a
waveform run also names a worker of each other host keeping some of its files, which it asks
for them (`input_cache.from_peers`), and a DAS block reads another host's pieces there.

Those workers only (`allow_other_workers=False`): with other workers allowed, distributed's
work stealing may move a queued task to an idle worker of another host, which reads storage
again. A host whose workers all leave must not hold its tasks back: `LooseWhenGone`, a
scheduler plugin registered once on the scheduler (`add_loose_when_gone`), lets a task placed
here that has no running worker left (state `no-worker`) run on any worker (it reads storage,
as without a cache). Where the plugin cannot be registered (a scheduler without seisctf),
tasks are placed with other workers allowed, as a preference. With one host (every worker
shares one cache), no run or no distributed client, tasks are built as they are.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from seisctf.cluster import active_client
from seisctf.formats.shared import input_cache

Task = TypeVar("Task")
# Seconds to wait for the workers' answers; without them, tasks go where the scheduler puts them.
ANSWER_TIMEOUT_S = 30
# The annotation marking tasks `LooseWhenGone` may send anywhere once their host is gone.
PLACED = "seisctf_placed"
PLUGIN_NAME = "seisctf-loose-when-gone"


class Placement:
    """Where the current run's tasks go on a cluster of several hosts: `hosts` {host's cache:
    its workers}, `where` {file's hex sha256: {host: bytes kept there}}, `strict`: only the
    host's workers (`LooseWhenGone` registered), else a preference."""

    def __init__(
        self, hosts: Mapping[str, list[str]], where: Mapping[str, Mapping[str, int]], strict: bool
    ):
        self.hosts, self.where, self.strict = hosts, where, strict

    def host_of(self, digests: Iterable[str]) -> str | None:
        """The host keeping most bytes of the files `digests`; None if none keeps any."""
        held: collections.Counter = collections.Counter()
        for digest in set(digests):
            held.update(self.where.get(digest, {}))
        return max(held, key=lambda name: (held[name], name)) if held else None

    def annotations(self, host: str | None) -> dict[str, Any]:
        """`dask.annotate` arguments sending a task to `host`'s workers ({}: anywhere)."""
        if host is None:
            return {}
        if self.strict:
            return {"workers": self.hosts[host], "allow_other_workers": False, PLACED: True}
        return {"workers": self.hosts[host], "allow_other_workers": True}

    def built(self, make_task: Callable[[int], Task], index: int, host: str | None) -> Task:
        """`make_task(index)` built under `annotations(host)`."""
        import dask

        with dask.annotate(**self.annotations(host)):
            return make_task(index)


def run_placement() -> Placement | None:
    """The `Placement` of the current run's tasks (registering `LooseWhenGone`; each host's
    first worker asked which of the run's files it keeps, `input_cache.held`): None with no
    run, no distributed client or one host."""
    run, client = input_cache.current_run(), active_client()
    if not run or client is None:
        return None
    hosts = _workers_by_host(client)
    if len(hosts) < 2:
        return None
    host_of = {worker: host for host, workers in hosts.items() for worker in workers}
    where: dict[str, dict[str, int]] = collections.defaultdict(dict)  # digest -> host -> bytes
    asked = [workers[0] for workers in hosts.values()]  # one a host
    for worker, files in _ask(client, input_cache.held, run, workers=asked):
        for digest, size in files.items():
            where[digest][host_of[worker]] = size
    return Placement(hosts, where, strict=_registered(client))


def near_inputs(
    make_task: Callable[[int], Task], inputs_of: Callable[[int], Iterable[str]]
) -> Callable[[int], Task]:
    """`make_task` (index -> a Dask collection, as `cluster.compute_in_waves` takes it), each
    task built for the host keeping most bytes of its input files (`inputs_of(index)`: their
    hex sha256; `Placement`)."""
    placement = run_placement()
    if placement is None:
        return make_task
    return lambda index: placement.built(make_task, index, placement.host_of(inputs_of(index)))


def near_partitions(
    make_task: Callable[..., Task],
    weights_of: Callable[[int], Iterable[tuple[int, int]]],
    digests_of_parts: Callable[[], Sequence[Iterable[str]]],
) -> Callable[[int], Task]:
    """`make_task` (index, peers -> a Dask collection) whose task `index` reads the partitions
    `weights_of(index)` gives as (partition, weight): built for the host keeping most files of
    the partitions of most weight (`digests_of_parts()`: each partition's files' hex sha256,
    asked only on a cluster of several hosts), `peers` a worker of each other host keeping
    some (`input_cache.from_peers`: the task asks them for those files, not storage)."""
    placement = run_placement()
    if placement is None:
        return lambda index: make_task(index, ())
    part_host = [placement.host_of(digests) for digests in digests_of_parts()]

    def placed(index: int) -> Task:
        held: collections.Counter = collections.Counter()
        for part, weight in weights_of(index):
            if part_host[part] is not None:
                held[part_host[part]] += weight
        host = max(held, key=lambda name: (held[name], name)) if held else None
        peers = tuple(placement.hosts[other][0] for other in sorted(held) if other != host)
        return placement.built(lambda i: make_task(i, peers), index, host)

    return placed


def in_path_order(make_task: Callable[[int], Task], count: int) -> Callable[[int], Task]:
    """`make_task` for `count` scan tasks of consecutive path batches: task i built for the
    workers of host i x hosts // count (`Placement`: not stolen by another host), so that
    neighbouring paths (a station's channels and days, in an SDS tree) are kept on one host,
    where the block runs that read them together then go (`near_partitions`). With one host,
    no run or no distributed client, tasks are built as they are."""
    placement = run_placement()
    if placement is None:
        return make_task
    hosts = sorted(placement.hosts)
    return lambda index: placement.built(make_task, index, hosts[index * len(hosts) // count])


def _registered(client: Any) -> bool:
    """Whether `LooseWhenGone` is (now) registered on the client's scheduler."""
    with contextlib.suppress(Exception):  # a scheduler that cannot load it: place loosely
        client.run_on_scheduler(add_loose_when_gone)
        return True
    return False


def add_loose_when_gone(dask_scheduler: Any) -> None:
    """Register `LooseWhenGone` (once) on `dask_scheduler` (run there: `run_on_scheduler`): a
    task annotated PLACED that enters state `no-worker` (none of its workers is running) gets
    other workers allowed and is scheduled again, on any worker."""
    import asyncio

    from distributed.diagnostics.plugin import SchedulerPlugin

    class LooseWhenGone(SchedulerPlugin):
        def transition(self, key: Any, start: str, finish: str, *args: Any, **kw: Any) -> None:
            task = dask_scheduler.tasks.get(key)
            if finish != "no-worker" or task is None or not task.annotations.get(PLACED):
                return
            task.loose_restrictions = True
            # Not from within a transition: once the scheduler's current ones are done.
            asyncio.get_running_loop().call_soon(retry, key)

    def retry(key: Any) -> None:
        task = dask_scheduler.tasks.get(key)
        if task is not None and task.state == "no-worker":
            dask_scheduler.transitions({key: "processing"}, f"{PLUGIN_NAME}-{key}")

    dask_scheduler.add_plugin(LooseWhenGone(), name=PLUGIN_NAME, idempotent=True)


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
