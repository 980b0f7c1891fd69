"""A private test network of Linux namespaces: Dask workers that share only the network with
the host, as workers on other machines do.

`private_network` creates a bridge `seisctf-br0` holding 10.231.0.1/24 on the host and, per worker,
a network namespace `seisctf-test-wN` joined to the bridge by a veth pair (10.231.0.1N/24 inside,
with `lo` up). `start_worker` runs `dask worker` in that namespace and in its own mount
namespace, where the given folders (the test run's temporary folders) are hidden under empty
tmpfs mounts and its scratch space is a folder of the first: the worker sees the installed
package (the virtualenv, the source tree, also in a clone under /tmp) but none of the client's
working files. Only the names and addresses made here are ever addressed; everything is removed
afterwards, even when a test fails, and the servers stop with the test run (`servers.
tied_to_this_process`). Needs root, `ip` and `unshare`.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from servers import CLUSTER_CREDENTIALS, free_port, stop_process, tied_to_this_process

SUBNET = ipaddress.ip_network("10.231.0.0/24")
HOST_ADDRESS = "10.231.0.1"
BRIDGE = "seisctf-br0"
NAMESPACE = "seisctf-test-w{n}"
HOST_VETH = "seisctf-v{n}"  # the host end, on the bridge (interface names: at most 15 chars)
# Only one test network at a time on a machine (concurrent test runs share these names).
LOCK_FILE = Path("/run/lock/seisctf-test-network.lock")


def worker_address(n: int) -> str:
    """Worker n's address inside its namespace (n = 1..9): 10.231.0.1N."""
    return f"10.231.0.{10 + n}"


def missing_requirement() -> str | None:
    """Why this machine cannot make the test network (not root, no `ip` or `unshare`, no
    network namespaces), or None."""
    if os.geteuid() != 0:
        return "network and mount namespaces need root"
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "true"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        return f"`unshare --net --mount` fails: {probe.stderr.strip()}"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def subnet_user() -> str | None:
    """An interface or route of this machine, not of the test network, that uses `SUBNET`."""
    for line in _ip("-4", "-o", "addr", "show").stdout.splitlines():
        name, address = line.split()[1], line.split()[3]
        overlaps = ipaddress.ip_interface(address).network.overlaps(SUBNET)
        if overlaps and name != BRIDGE:
            return f"interface {name} has {address}"
    for line in _ip("-4", "route", "show").stdout.splitlines():
        target = line.split()[0]
        if target != "default" and ipaddress.ip_network(target, strict=False).overlaps(SUBNET):
            if f"dev {BRIDGE} " not in f"{line} ":
                return f"route {line.strip()}"
    return None


@dataclass
class PrivateNetwork:
    namespaces: list[str]
    host_address: str = HOST_ADDRESS


def _remove(n_workers: int) -> None:
    """Remove the test network's namespaces, veths and bridge, where they exist."""
    existing = set(_ip("netns", "list").stdout.split())
    for n in range(1, n_workers + 1):
        if NAMESPACE.format(n=n) in existing:
            _ip("netns", "delete", NAMESPACE.format(n=n), check=False)
        _ip("link", "delete", HOST_VETH.format(n=n), check=False)
    _ip("link", "delete", BRIDGE, check=False)


def _add_worker_namespace(n: int) -> str:
    namespace, host_end, inner = NAMESPACE.format(n=n), HOST_VETH.format(n=n), f"seisctf-p{n}"
    _ip("netns", "add", namespace)
    _ip("link", "add", host_end, "type", "veth", "peer", "name", inner)
    _ip("link", "set", host_end, "master", BRIDGE, "up")
    _ip("link", "set", inner, "netns", namespace)
    _ip("-n", namespace, "link", "set", "lo", "up")
    _ip("-n", namespace, "addr", "add", f"{worker_address(n)}/24", "dev", inner)
    _ip("-n", namespace, "link", "set", inner, "up")
    return namespace


@contextlib.contextmanager
def private_network(n_workers: int = 2) -> Iterator[PrivateNetwork]:
    """The bridge and `n_workers` namespaces, removed on exit (and leftovers of an earlier,
    killed run removed first). Raises RuntimeError if another network uses the subnet."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _remove(n_workers)
        user = subnet_user()
        if user is not None:
            raise RuntimeError(f"{SUBNET} is in use here ({user})")
        try:
            _ip("link", "add", BRIDGE, "type", "bridge")
            _ip("addr", "add", f"{HOST_ADDRESS}/24", "dev", BRIDGE)
            _ip("link", "set", BRIDGE, "up")
            network = PrivateNetwork([_add_worker_namespace(n) for n in range(1, n_workers + 1)])
            yield network
        finally:
            _remove(n_workers)


def dask_command() -> str:
    return str(Path(sys.executable).parent / "dask")


def start_scheduler(log: Path) -> tuple[str, subprocess.Popen]:
    """A `dask scheduler` on the bridge address: (its address, its process)."""
    port = free_port()
    with open(log, "ab") as output:
        process = subprocess.Popen(
            tied_to_this_process(
                [dask_command(), "scheduler", "--host", HOST_ADDRESS, "--port", str(port)]
                + ["--no-dashboard"]
            ),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return f"tcp://{HOST_ADDRESS}:{port}", process


def worker_command(n: int, scheduler: str, hidden: Sequence[Path]) -> list[str]:
    """`dask worker` in namespace n with the `hidden` folders covered by empty tmpfs mounts (a
    private mount namespace: the host's mounts are untouched) and its scratch space in the
    first, private to it. Only those folders: a private /tmp would also hide a virtualenv
    under /tmp (a clone there), and the worker would never start."""
    if not hidden:
        raise ValueError("no folder to hide: the worker's private scratch space is made there")
    mounts = " && ".join(f"mount -t tmpfs tmpfs {shlex.quote(str(path))}" for path in hidden)
    worker = [dask_command(), "worker", scheduler, "--host", worker_address(n)]
    worker += ["--nthreads", "1", "--no-dashboard", "--memory-limit", "2GiB"]
    worker += ["--local-directory", str(Path(hidden[0]) / f"dask-worker-{n}")]
    return [
        "ip", "netns", "exec", NAMESPACE.format(n=n),
        "unshare", "--mount", "--propagation", "private",
        "sh", "-c", f'{mounts} && exec "$0" "$@"', *worker,
    ]  # fmt: skip


def start_worker(n: int, scheduler: str, hidden: Sequence[Path], log: Path) -> subprocess.Popen:
    with open(log, "ab") as output:
        return subprocess.Popen(
            tied_to_this_process(worker_command(n, scheduler, hidden)),
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, **CLUSTER_CREDENTIALS},  # a remote worker's own S3 credentials
            start_new_session=True,
        )


def wait_for_workers(scheduler: str, n_workers: int, timeout_s: float = 90.0) -> None:
    """Until `n_workers` workers are connected to the scheduler (RuntimeError after
    `timeout_s`)."""
    from distributed import Client

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with Client(scheduler, timeout="5s") as client:
                client.wait_for_workers(n_workers, timeout=max(1.0, deadline - time.monotonic()))
                return
        except (OSError, TimeoutError):
            time.sleep(0.5)
    raise RuntimeError(f"{n_workers} workers did not join {scheduler} in {timeout_s} s")


@dataclass
class NamespacedCluster:
    scheduler: str
    processes: list[subprocess.Popen]


@contextlib.contextmanager
def namespaced_cluster(
    network: PrivateNetwork, hidden: Sequence[Path], logs: Path
) -> Iterator[NamespacedCluster]:
    """A scheduler on the host's bridge address and one worker per namespace of `network`,
    stopped on exit. `hidden`: the folders the workers must not see (at least one); `logs`: a
    folder of the host for their output (the end of each log is quoted when they do not
    start)."""
    scheduler, process = start_scheduler(logs / "scheduler.log")
    processes = [process]
    try:
        for n in range(1, len(network.namespaces) + 1):
            processes.append(start_worker(n, scheduler, hidden, logs / f"worker-{n}.log"))
        try:
            wait_for_workers(scheduler, len(network.namespaces))
        except RuntimeError as error:
            tails = "\n".join(
                f"{log.name}: {log.read_text(errors='replace')[-1500:]}"
                for log in sorted(logs.glob("*.log"))
            )
            raise RuntimeError(f"{error}\n{tails}") from None
        yield NamespacedCluster(scheduler, processes)
    finally:
        for running in reversed(processes):
            stop_process(running)
