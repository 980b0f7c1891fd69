"""One way to get a Dask client, and one way to run a graph on it with progress.

Default: an embedded `LocalCluster` of worker processes sized to the machine (one single-threaded
worker per core, memory split between them). `--scheduler ADDR` or env `SEISCTF_SCHEDULER` attaches
to an existing cluster instead; one that does not answer within `SCHEDULER_TIMEOUT_S` is an
`InvalidInput` naming the address. A `ClusterConfig` (`--cluster FILE.yaml`, see
`seisctf.cluster_config`) builds any Dask cluster class instead, scales it or makes it adaptive,
and closes it at the end. Chunking never depends on the cluster, so results do not either.

Storage credentials the command was given never travel in a graph: the embedded cluster's workers
start with them in their environment (distributed's Nanny `env`, never this process's own), and a
cluster given by address or configured gets none (its workers need their own; a line says so).

Ctrl-C reaches every process of the terminal's process group: embedded workers ignore it (they
fork from a server started with SIGINT ignored, which they inherit) and are shut down by this
process, so the caller sees one `KeyboardInterrupt` and no worker prints a traceback. The embedded
cluster's own shutdown logs (a progress feed cancelled, a heartbeat to a closed scheduler) are
silenced: by then every result or error has reached the caller.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import dask

from seisctf.cluster_config import (
    SCHEDULER_ENV,
    ClusterConfig,
    StartWatch,
    make_cluster,
    scale_cluster,
)
from seisctf.errors import InvalidInput
from seisctf.process_memory import peak_memory_bytes as peak_memory_bytes
from seisctf.process_memory import prepare_process
from seisctf.process_memory import release_free_memory as release_free_memory
from seisctf.process_memory import reset_peak_memory as reset_peak_memory
from seisctf.progress import show_progress
from seisctf.wording import counted
from seisctf.worker_memory import EMBEDDED_MEMORY_FRACTIONS, worker_environ, worker_memory_limit

# Seconds to wait for a scheduler by address (distributed's: 30 s, silent), and before saying so.
SCHEDULER_TIMEOUT_S = 10
SCHEDULER_NOTICE_S = 2.0
# Above this many tasks, a phase of independent tasks runs in waves of this many: the client
# builds, and the scheduler holds, one wave's graph at a time. The scheduler keeps a few KiB per
# task held and the client's graph construction grows faster than linearly in the tasks of one
# compute (docs/scaling.md), so a 50 TB ingest's ~10^6 tasks would not fit in one graph.
MAX_TASKS_PER_WAVE = 20_000

# Dask picks its peer-to-peer rechunk for large rechunks on a distributed cluster; its barrier
# tasks do not survive xarray's `to_zarr(compute=False)`, which turns the graph into a Delayed
# (dask 2026.8: the store's finalize task is cancelled, "lost dependencies"). Task-based rechunks
# work everywhere. A default only: a user's dask config still wins.
dask.config.update_defaults({"array": {"rechunk": {"method": "tasks"}}})
# An embedded cluster still starting in the background (`dask_client(background=True)`).
_starting: Future | None = None


def machine_workers() -> int:
    """Cores this process may use (respecting CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def cluster_workers() -> int:
    """Workers of the active client's cluster now (at least 1); 1 without a client."""
    client = active_client()
    if client is None:
        return 1
    return max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))


def _start_forkserver(modules: Sequence[str], environ: Mapping[str, Any]) -> str:
    """Start multiprocessing's fork server with `modules` imported and return the start method
    for workers: they then fork from a process that paid for the imports once (in parallel with
    the caller's own), instead of each spawning a fresh interpreter that imports everything.
    "spawn" where the platform has no fork server."""
    import multiprocessing
    from multiprocessing import forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    # What the nanny sets before spawning (one BLAS thread per worker, malloc settings): the
    # server must have it before it loads numpy. The nanny sets the same in this process anyway.
    os.environ.update({key: str(value) for key, value in environ.items()})
    multiprocessing.get_context("forkserver").set_forkserver_preload(
        ["distributed", "seisctf.fork_server", *modules]
    )
    # An ignored SIGINT survives exec, Python then leaves it ignored, and the server's children
    # (the workers) get the server's start-up handler back: Ctrl-C never reaches them. Nor does
    # a SIGTERM sent to the command's whole process group (`timeout`, a batch system): the
    # command shuts its workers down (`cli._termination`); killed outright, they left their
    # semaphores to multiprocessing's resource tracker, which warned of them.
    with sigint_ignored(signal.SIGTERM):
        forkserver.ensure_running()
    return "forkserver"


@contextlib.contextmanager
def sigint_ignored(*others: int) -> Iterator[None]:
    """Ctrl-C (SIGINT), and the signals `others`, ignored meanwhile, in this process and in
    processes started meanwhile. Signal handlers belong to the main thread: elsewhere this does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, *others)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _local_cluster(
    n_workers: int,
    memory_limit: int | str,
    quiet: bool,
    preload: Sequence[str],
    method: str,
    environ: Mapping[str, Any],
    credentials: Mapping[str, str],
) -> Any:
    """The embedded cluster (`method`, `environ`: how workers start; `credentials`: environment
    variables each worker process gets, set in it alone)."""
    from distributed import LocalCluster

    for name in ("distributed", "distributed.worker", "distributed.scheduler"):
        logging.getLogger(name).setLevel(logging.ERROR)
    memory = {
        f"distributed.worker.memory.{name}": ours
        for name, (default, ours) in EMBEDDED_MEMORY_FRACTIONS.items()
        if dask.config.get(f"distributed.worker.memory.{name}") == default
    }
    settings = {
        "distributed.worker.multiprocessing-method": method,
        "distributed.nanny.pre-spawn-environ": environ,
        **memory,
    }
    with dask.config.set(settings):
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",  # loopback, a free port
            # The bokeh dashboard (~1 s of start-up and exit) only when its link is printed.
            scheduler_kwargs={"dashboard": not quiet},
            # Workers import what their tasks need while they start, not on their first task,
            # and run this module's `dask_setup`.
            preload=[__name__, *preload],
            env=dict(credentials),
        )
    return cluster


def _local_arguments(
    n_workers: int | None,
    memory_limit: int | str | None,
    quiet: bool,
    preload: Sequence[str],
    credentials: Mapping[str, str] | None = None,
) -> tuple[Any, ...]:
    """`_local_cluster`'s arguments, the machine's defaults filled in and the fork server
    started. Here, not in a thread: only the main thread can have the workers ignore Ctrl-C."""
    n_workers = n_workers or machine_workers()
    memory_limit = memory_limit or worker_memory_limit(n_workers)
    environ = worker_environ()
    method = _start_forkserver(preload, environ)
    return (n_workers, memory_limit, quiet, tuple(preload), method, environ, credentials or {})


def _start_local(*arguments: Any) -> tuple[Any, Any]:
    """The embedded cluster and its client."""
    from distributed import Client

    # Its scheduler, in this process, hooks no logger into full garbage collections: a Ctrl-C
    # landing in one was printed as "Exception ignored" and lost (`prepare_process`).
    cluster = _local_cluster(*arguments)
    try:
        client = Client(cluster)
    except BaseException:
        cluster.close()
        raise
    n_workers, quiet = arguments[0], arguments[2]
    _announce(client, f"embedded LocalCluster, {counted(n_workers, 'worker')}", quiet)
    return cluster, client


@contextlib.contextmanager
def embedded_cluster(
    n_workers: int | None = None,
    memory_limit: int | str | None = None,
    preload: Sequence[str] = (),
    credentials: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """The embedded LocalCluster `dask_client` would start, with no client: yields its
    scheduler address, for `dask_client(address)` (clients come and go, the workers stay and
    no client is active in between); closed at the end. `credentials`: as `dask_client`'s."""
    arguments = _local_arguments(n_workers, memory_limit, True, preload, credentials)
    cluster = _local_cluster(*arguments)
    try:
        yield cluster.scheduler_address
    finally:
        with sigint_ignored(), _distributed_logs_silenced():
            cluster.close()


def configured_cluster(config: ClusterConfig) -> Any:
    """The cluster `config` describes, built (not scaled). A dask-jobqueue cluster's batch jobs
    start their workers as embedded ones start: this module preloaded (`dask_setup`), and the
    environment `worker_environ` (the malloc settings the memory figures depend on) exported."""
    return make_cluster(config, preload=(__name__,), environ=worker_environ())


def _start_configured(config: ClusterConfig, quiet: bool, watch: StartWatch) -> tuple[Any, Any]:
    """The cluster `config` describes, built, scaled or made adaptive, and its client. Built in
    the caller's thread: a refused option is answered before the command does any work (as one
    line: distributed's logs of the failed start are silenced, its error says it all); `watch`
    answers the workers it fails to start later."""
    from distributed import Client

    with _distributed_logs_silenced():
        cluster = configured_cluster(config)
    watch.cluster = cluster
    try:
        scale_cluster(cluster, config)
        client = Client(cluster)
    except BaseException:
        cluster.close()
        raise
    _announce(client, config.describe(), quiet)
    return cluster, client


def _announce(client: Any, where: str, quiet: bool) -> None:
    """`dask: WHERE; dashboard LINK` on stderr, or `…; no dashboard` where the scheduler serves
    none (`dask scheduler --no-dashboard`: the link would be a 404)."""
    if quiet:
        return
    link = client.dashboard_link
    served = "dashboard" in client.scheduler_info().get("services", {}) and _is_page(link)
    print(f"dask: {where}; {f'dashboard {link}' if served else 'no dashboard'}", file=sys.stderr)


def _is_page(url: str) -> bool:
    """Whether an HTTP server has a page at `url`, by one HEAD request (a scheduler started with
    `--no-dashboard` still serves HTTP but answers 404 for the dashboard's page, which answers
    405, being for GET only). A link unreachable from here counts: a browser elsewhere may."""
    import urllib.error
    import urllib.request

    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        no_proxy.open(urllib.request.Request(url, method="HEAD"), timeout=1).close()
    except urllib.error.HTTPError as error:
        return error.code != 404
    except (OSError, ValueError):
        return True
    return True


def _connect(address: str, source: str, quiet: bool) -> Any:
    """A client of the scheduler at `address`, named by `source` (`scheduler`, the option, or
    `$SEISCTF_SCHEDULER`) when it is malformed or does not answer within `SCHEDULER_TIMEOUT_S`
    (an `InvalidInput`); a line on stderr says so when the wait is longer than a moment."""
    from distributed import Client

    remedy = "drop --scheduler" if source == "scheduler" else f"unset {SCHEDULER_ENV}"
    notice = threading.Timer(
        SCHEDULER_NOTICE_S,
        lambda: print(
            f"dask: waiting for the scheduler at {address} (up to {SCHEDULER_TIMEOUT_S} s)",
            file=sys.stderr,
            flush=True,
        ),
    )
    if not quiet:
        notice.start()
    try:
        return Client(address, timeout=f"{SCHEDULER_TIMEOUT_S}s")
    except ValueError as error:  # distributed's word for an address it cannot parse
        _close_unconnected_client()
        raise InvalidInput(
            source, f"{address!r} is not a Dask scheduler address ({error}); {remedy}"
        ) from None
    except OSError as error:  # also TimeoutError: nothing answered in time
        raise InvalidInput(
            source,
            f"no Dask scheduler answers at {address} ({_connect_failure(error)}); start one "
            f"with `dask scheduler` or {remedy}",
        ) from None
    finally:
        notice.cancel()


def _close_unconnected_client() -> None:
    """distributed's Client makes itself the default client, and dask's `scheduler` setting
    "dask.distributed", before it parses the address, and leaves both behind when that fails
    (the next computation in this process would then refuse to run): closing it undoes them."""
    from distributed import default_client

    try:
        client = default_client()
    except ValueError:  # no default client
        return
    if client.status != "running":
        client.close()


def _connect_failure(error: BaseException) -> str:
    """Why a connection failed, in a few words: the system's reason at the root of
    distributed's chain of errors (`connection refused`, `name or service not known`)."""
    reason = f"no answer within {SCHEDULER_TIMEOUT_S} s"
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            reason = (
                f"{seen.strerror[:1].lower()}{seen.strerror[1:]}; tried for {SCHEDULER_TIMEOUT_S} s"
            )
        seen = seen.__cause__ or seen.__context__
    return reason


def _in_background(start, *args) -> Future:
    """Run `start(*args)` in a daemon thread; its result or exception lands in a Future."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(start(*args))
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits
            future.set_exception(error)

    threading.Thread(target=run, name="seisctf-cluster-start", daemon=True).start()
    return future


@contextlib.contextmanager
def dask_client(
    scheduler: str | None = None,
    *,
    cluster: ClusterConfig | None = None,
    n_workers: int | None = None,
    memory_limit: int | str | None = None,
    quiet: bool = False,
    preload: Sequence[str] = (),
    background: bool = False,
    credentials: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """A `distributed.Client` of the given scheduler, else of the `cluster` configured (built
    here and closed at the end), else of `$SEISCTF_SCHEDULER`, else of an embedded LocalCluster.

    `preload`: modules the embedded cluster's workers import as they start. `background=True`:
    the embedded cluster starts in a thread while the caller goes on (imports, opening stores,
    building graphs); `compute` waits for it; the context then yields None. `credentials`:
    environment variables holding the storage credentials the caller was given
    (`seisctf.s3.credentials_environ`): the embedded cluster's workers start with them; any
    other cluster's workers do not get them (a line on stderr says which they need)."""
    global _starting
    prepare_process()  # before the client, and an embedded cluster's scheduler and workers
    address = scheduler or (None if cluster else os.environ.get(SCHEDULER_ENV)) or None
    if address or cluster is not None:
        _credentials_not_sent(credentials or {})
    started: Future = Future()
    # A configured cluster's workers that fail to start are answered, not logged, until it is
    # closed (its batch system may be refused again meanwhile).
    watch = StartWatch(cluster) if cluster is not None and not address else None
    with watch or contextlib.nullcontext():
        if address:
            client = _connect(address, "scheduler" if scheduler else f"${SCHEDULER_ENV}", quiet)
            _announce(client, address, quiet)
            started.set_result((None, client))
        elif watch is not None:
            started.set_result(_start_configured(watch.config, quiet, watch))
        else:
            arguments = _local_arguments(n_workers, memory_limit, quiet, preload, credentials)
            started = _in_background(_start_local, *arguments)
        _starting = started
        try:
            yield None if background else _ready_client(started)
        finally:
            _starting = None
            if watch is not None:
                watch.disarm()  # the shutdown is not interrupted
            _shut_down(started)


def _credentials_not_sent(credentials: Mapping[str, str]) -> None:
    """One line on stderr when credentials were given for a cluster whose workers do not get
    them (they are never sent in a graph), naming the variables its workers need instead."""
    needed = [name for name, value in credentials.items() if value]
    if needed:
        print(
            "seisctf: storage credentials given as options are not sent to this cluster's "
            f"workers; each needs its own: {', '.join(needed)} in its environment, an AWS "
            "profile (storage option profile=NAME) or an instance role (docs/scaling.md)",
            file=sys.stderr,
        )


def _shut_down(started: Future) -> None:
    """Close the client and, if embedded, the cluster (waiting for it to finish starting).
    Ctrl-C is ignored meanwhile: a second one would interrupt the shutdown half-way."""
    with sigint_ignored(), contextlib.suppress(Exception):
        # A failed start was already raised to the caller: then there is nothing to close.
        cluster, client = started.result()
        if cluster is None:
            client.close()
            return
        with _distributed_logs_silenced():
            with contextlib.suppress(Exception):
                client.run(_silence_distributed_logs)  # in the workers, for good
            client.close()
            cluster.close()


def dask_setup(worker: Any) -> None:
    """distributed's preload hook, run by each worker (or scheduler) started with `--preload
    seisctf.cluster`: no debugging record of messages (`prepare_process`); a task's error reaches
    the caller, so a worker does not also log it ("Compute Failed", a dozen lines)."""
    prepare_process()
    memory = logging.getLogger("distributed.worker.memory")
    memory.setLevel(memory.getEffectiveLevel())
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)


def _distributed_loggers() -> list[logging.Logger]:
    """distributed's loggers that exist in this process (levels are set on several)."""
    names = {"distributed", *logging.root.manager.loggerDict}
    return [logging.getLogger(name) for name in names if name.split(".")[0] == "distributed"]


def _silence_distributed_logs() -> None:
    """Only critical messages from distributed's loggers from now on."""
    for logger in _distributed_loggers():
        logger.setLevel(logging.CRITICAL)


@contextlib.contextmanager
def _distributed_logs_silenced() -> Iterator[None]:
    """Only critical messages from distributed's loggers meanwhile; their levels come back."""
    levels = {logger: logger.level for logger in _distributed_loggers()}
    _silence_distributed_logs()
    try:
        yield
    finally:
        for logger, level in levels.items():
            logger.setLevel(level)


def _ready_client(pending: Future) -> Any:
    """The client of the cluster `dask_client` started, once it is up (raises if it failed)."""
    global _starting
    _starting = None
    return pending.result()[1]


def active_client() -> Any | None:
    if _starting is not None:
        return _ready_client(_starting)
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def compute(*collections: Any, label: str = "", quiet: bool = False) -> tuple[Any, ...]:
    """Compute Dask collections on the active client (with their progress on stderr: a bar in a
    terminal, one line elsewhere, see `seisctf.progress`) or, with no client, on the local
    threaded scheduler. Returns the computed values."""
    client = active_client()
    if client is None:
        return dask.compute(*collections)
    from dask.base import unpack_collections

    flat, repack = unpack_collections(*collections, traverse=True)
    if not flat:
        return tuple(repack([]))
    persisted = client.persist(list(flat))
    if not quiet:
        show_progress(persisted, label)
    return tuple(repack(dask.compute(*persisted)))


def kept(tasks: Sequence[Any], label: str = "", quiet: bool = False) -> list[Any]:
    """`tasks` (Dask collections) computed and kept where they were computed (on a cluster, in
    its workers' memory: futures), for tasks to come to take as arguments; locally, computed."""
    client = active_client()
    if client is None or not tasks:
        return list(dask.persist(*tasks))
    persisted = client.persist(list(tasks))
    if not quiet:
        show_progress(persisted, label)
    return persisted


def shared(value: Any) -> Any:
    """`value` as an argument of tasks to come: on a cluster, sent once to a worker (a future:
    graphs hold its key, not its bytes, and workers fetch it from one another); locally, itself.
    One future whatever `value` is: `Client.scatter` sends each item of a list, set or dict as
    a future of its own (a set of 10^5 paths was 10^5 keys, each a dependency of every task
    given it)."""
    client = active_client()
    return value if client is None else client.scatter([value], hash=False)[0]


def compute_in_waves(
    make_task: Callable[[int], Any],
    n_tasks: int,
    *,
    label: str = "",
    quiet: bool = False,
    wave_tasks: int | None = None,
    costs: Sequence[int] | None = None,
    wave_cost: int = 0,
    fold: Callable[[int, list[Any]], None] | None = None,
) -> list[Any]:
    """`[compute(make_task(i)) for i in range(n_tasks)]` for independent tasks, in waves of at
    most `wave_tasks` (default MAX_TASKS_PER_WAVE) and, with `costs` (one per task: e.g. the
    traces it carries, what its graph's bytes grow with), of at most `wave_cost` in all (a task
    costing more is a wave of its own): each wave's tasks are built and computed after the
    previous wave's finished and were released (so the scheduler holds at most two waves, one
    of them being forgotten). One wave (one progress line) when few enough. With `fold`, each
    wave's results go to `fold(its first task's index, results)` and are not kept (returns []).
    A wave's results come to the client as one value (`_wave_results`, a task on a worker)."""
    bounds = wave_bounds(n_tasks, wave_tasks or MAX_TASKS_PER_WAVE, costs, wave_cost)
    results: list[Any] = []
    fold = fold or (lambda _, computed: results.extend(computed))
    for wave, (first, stop) in enumerate(bounds):
        wave_label = label if len(bounds) == 1 else f"{label} (wave {wave + 1} of {len(bounds)})"
        tasks = [make_task(index) for index in range(first, stop)]
        # One key to gather, not one a task: distributed's messages are msgpack, which interns
        # the keys of a map, and CPython's table of interned strings keeps its size after them
        # (0.9 MiB of it stays in the client after a gather of 20,000 keys, 1.8 after 50,000).
        gathered = dask.delayed(_wave_results, pure=False)(*tasks)
        fold(first, compute(gathered, label=wave_label, quiet=quiet)[0])
        del tasks, gathered  # (before the next wave's are built: one wave's graph at a time)
    return results


def _wave_results(*results: Any) -> list[Any]:
    return list(results)


def wave_bounds(
    n_tasks: int, wave_tasks: int, costs: Sequence[int] | None, wave_cost: int
) -> list[tuple[int, int]]:
    """(first, stop) task indices of each wave (`compute_in_waves`); at least one wave."""
    bounds, first, spent = [], 0, 0
    for index in range(n_tasks):
        cost = int(costs[index]) if costs is not None else 0
        full = index - first >= wave_tasks or (costs is not None and spent + cost > wave_cost)
        if full and index > first:
            bounds.append((first, index))
            first, spent = index, 0
        spent += cost
    bounds.append((first, n_tasks))
    return bounds
