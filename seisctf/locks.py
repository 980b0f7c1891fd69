"""Writer locks: one command at a time writes an output (a store, bundle, database or site).

A writer holds a lease, a small JSON object beside its output, `<parent>/.<name>.seisctf-lock`:
outside the output (a rewrite replaces a store whole), hidden (ingests skip hidden files), and a
file, not a zarr node. The lease is created only where none exists, by `O_CREAT|O_EXCL` on a
local disk and by a PUT with `If-None-Match: *` on S3, so of two writers exactly one gets it; the
other is refused at once (InvalidInput naming the holder). The lease records the holder (host,
pid, pid namespace, command), when it started and when it expires; the holder renews it every
`lease_s / 4` seconds from a daemon thread and removes it when done, also on an error or
Ctrl-C. A lease past its expiry, or one whose holder was a process of this host that no longer
runs, is stale: the next writer takes it over by a conditional replace (S3: `If-Match` on the
ETag it read; local disk: `os.replace` under a guard file made with `O_EXCL`), so of two writers
taking over one stale lease one wins. `force_unlock` replaces any lease: the user says its
holder is gone.

A SQLite database takes many appenders at once (its transactions serialise them): each holds a
shared lease, `<parent>/.<name>.seisctf-share.<token>`. An appender is refused while the lease
of an exclusive writer is held, and an exclusive writer while a live shared lease exists. Each
side creates its own lease before it looks for the other's, so two of them racing never both
proceed.

Other fsspec file systems than local disks and S3 get the same leases written without a
condition: a lock there is a warning between honest writers, not a guarantee.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from seisctf.errors import InvalidInput, Message
from seisctf.location import StoreLocation
from seisctf.lock_objects import (
    LOCK_SUFFIX,
    SHARE_SUFFIX,
    LocalObjects,
    Objects,
    lock_location,
    normalized,
)

LEASE_S = 120.0  # a lease's life; a crashed holder's lease is free this long after its last renewal
LEASE_FORMAT = 1
Notify = Callable[[Message], None]  # a take-over, its parameters written `{name}`


@dataclass(frozen=True)
class Output:
    """An output a command writes: where (a local path, or a URL with the storage options its
    lock is written with), and whether its writers share it."""

    location: StoreLocation
    shared: bool = False


@dataclass(frozen=True)
class Lease:
    """The holder of an output's lock, as its lock object records it (times: Unix seconds)."""

    output: str
    host: str
    pid: int
    pid_namespace: str
    command: str
    started: float
    expires: float
    token: str

    def to_bytes(self) -> bytes:
        record = {
            "seisctf_lock": LEASE_FORMAT,
            "output": self.output,
            "host": self.host,
            "pid": self.pid,
            "pid_namespace": self.pid_namespace,
            "command": self.command,
            "started": _stamp(self.started),
            "renewed": _stamp(time.time()),
            "expires": _stamp(self.expires),
            "token": self.token,
        }
        return json.dumps(record, indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Lease | None:
        """The lease a lock object holds, or None if it does not read as one."""
        try:
            record = json.loads(data)
            return cls(
                output=str(record["output"]),
                host=str(record["host"]),
                pid=int(record["pid"]),
                pid_namespace=str(record.get("pid_namespace", "")),
                command=str(record["command"]),
                started=datetime.fromisoformat(record["started"]).timestamp(),
                expires=datetime.fromisoformat(record["expires"]).timestamp(),
                token=str(record["token"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def describe(self) -> str:
        return (
            f"{self.command} (pid {self.pid} on host {self.host}) since {_iso(self.started)}, "
            f"lease expiring {_iso(self.expires)}"
        )

    def stale(self, now: float) -> bool:
        """Past its expiry, or held by a process of this host (and pid namespace) that is gone."""
        if now > self.expires:
            return True
        here = self.host == socket.gethostname() and self.pid_namespace == _pid_namespace()
        return here and not _running(self.pid)


def _iso(seconds: float) -> str:
    """A time in messages: UTC, to the second."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamp(seconds: float) -> str:
    """A time in a lease: UTC, to the millisecond (a test's lease may last under a second)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _pid_namespace() -> str:
    """This process's pid namespace (Linux), so a pid is judged only where it means something."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def new_lease(output: str, command: str, lease_s: float = LEASE_S) -> Lease:
    """A lease of `output` for this process, expiring `lease_s` seconds from now."""
    now = time.time()
    return Lease(
        output=output,
        host=socket.gethostname(),
        pid=os.getpid(),
        pid_namespace=_pid_namespace(),
        command=command,
        started=now,
        expires=now + lease_s,
        token=secrets.token_hex(8),
    )


# --- taking, renewing and giving back leases ------------------------------------------------


@dataclass(frozen=True)
class Terms:
    """How a command takes its locks: the command named in its leases, whether to replace any
    lease (`force_unlock`), the leases' life, and where take-overs are said."""

    command: str
    force_unlock: bool
    lease_s: float
    notify: Notify


@dataclass
class Held:
    """A lease this process holds: where its lock object is, and the version it last wrote."""

    objects: Objects
    path: str
    lease: Lease
    version: str
    made_folders: list[str]


FORCE = ("force_unlock",)  # the parameter a refusal or a take-over names
UNREADABLE = "a writer whose lock object does not read as a lease"


def _refusal(output: str, lock: str, holder: Lease | None) -> InvalidInput:
    who = holder.describe() if holder else UNREADABLE
    expiry = " (or wait until its lease expires)" if holder else ""
    return InvalidInput(
        output,
        f"another command is writing it: {who} (lock {lock}); wait for it to finish, or, if it "
        f"is no longer running, re-run with {{force_unlock}}{expiry}",
        parameters=FORCE,
    )


def _take_exclusive(output: Output, terms: Terms) -> Held:
    """The output's lock object, created; or a stale one (any, with `force_unlock`) replaced;
    then no live shared lease may remain. Refused (InvalidInput naming the holder) otherwise."""
    objects, name, lock, made = lock_location(output.location)
    lease = new_lease(name, terms.command, terms.lease_s)
    force = terms.force_unlock
    for _ in range(10):
        version = _create(objects, lock, lease, name)
        if version is not None:
            break
        found = objects.read(lock)
        if found is None:
            continue  # removed meanwhile: try to create it again
        holder = Lease.from_bytes(found[0])
        if holder is not None and holder.token == lease.token:
            version = found[1]  # this process's own create, retried after a lost answer
            break
        if not force and (holder is None or not holder.stale(time.time())):
            _remove_folders(made)
            raise _refusal(name, lock, holder)
        version = objects.replace(lock, lease.to_bytes(), found[1])
        if version is not None:
            terms.notify(_taken_over(name, holder, force))
            break
    else:
        _remove_folders(made)
        raise InvalidInput(name, f"its writer lock {lock} keeps changing; re-run the command")
    held = Held(objects, lock, lease, version, made)
    try:
        _clear_shares(held, force, terms.notify)
    except BaseException:
        _release(held)
        raise
    return held


def _create(objects: Objects, path: str, lease: Lease, output: str) -> str | None:
    """`objects.create` of the lease; a local disk's refusal (a read-only folder, a path
    through a file) is bad input naming the output. An object store's error is left to the
    command, which judges it (`seisctf.s3.storage_mistake`)."""
    try:
        return objects.create(path, lease.to_bytes())
    except OSError as error:
        if not isinstance(objects, LocalObjects):
            raise
        raise InvalidInput(
            output, f"cannot create its writer lock {path} ({error.strerror or error})"
        ) from None


def _taken_over(output: str, holder: Lease | None, force: bool) -> Message:
    who = holder.describe() if holder else UNREADABLE
    if force:
        return Message(
            f"removed the writer lock of {output} held by {who} ({{force_unlock}})", FORCE
        )
    return Message(f"took over the stale writer lock of {output} from {who}")


def _clear_shares(held: Held, force: bool, notify: Notify) -> None:
    """After taking an exclusive lease: refuse while a live shared lease exists (its holder
    appends to the output); remove stale ones (and, with `force`, all)."""
    share_prefix = held.path.removesuffix(LOCK_SUFFIX) + SHARE_SUFFIX
    for share in held.objects.names(share_prefix):
        found = held.objects.read(share)
        if found is None:
            continue
        holder = Lease.from_bytes(found[0])
        if force or holder is None or holder.stale(time.time()):
            if held.objects.delete(share, found[1]) and force:
                notify(_taken_over(held.lease.output, holder, force))
            continue
        raise _refusal(held.lease.output, share, holder)


def _take_shared(output: Output, terms: Terms) -> Held:
    """A shared lease of its own beside the output; refused (InvalidInput naming the holder)
    if a live exclusive lease exists then, which `force_unlock` removes."""
    objects, name, lock, made = lock_location(output.location)
    lease = new_lease(name, terms.command, terms.lease_s)
    force = terms.force_unlock
    share = lock.removesuffix(LOCK_SUFFIX) + SHARE_SUFFIX + lease.token
    version = _create(objects, share, lease, name)
    if version is None:
        raise InvalidInput(name, f"its shared writer lock {share} exists already; re-run")
    held = Held(objects, share, lease, version, made)
    found = objects.read(lock)
    holder = None if found is None else Lease.from_bytes(found[0])
    if found is not None and not force and (holder is None or not holder.stale(time.time())):
        _release(held)
        raise _refusal(name, lock, holder)
    if found is not None and force and objects.delete(lock, found[1]):
        terms.notify(_taken_over(name, holder, force))
    return held


def _renew(held: Held, lease_s: float) -> bool:
    """Push the lease's expiry `lease_s` from now; False if another writer has replaced it."""
    renewed = replace(held.lease, expires=time.time() + lease_s)
    version = held.objects.replace(held.path, renewed.to_bytes(), held.version)
    if version is None:
        return False
    held.lease, held.version = renewed, version
    return True


def _release(held: Held) -> None:
    """Remove the lease if it is still this process's, then the folders made for it if empty."""
    with contextlib.suppress(Exception):  # a lease left behind expires by itself
        held.objects.delete(held.path, held.version)
    _remove_folders(held.made_folders)


def _remove_folders(folders: Sequence[str]) -> None:
    for folder in folders:  # deepest first
        with contextlib.suppress(OSError):
            os.rmdir(folder)


class Renewer(threading.Thread):
    """Renews the leases every `lease_s / 4` seconds until stopped. A lease another writer has
    replaced (this process stalled past its expiry) is lost: the main thread is interrupted,
    and `holding` turns that into InvalidInput saying why."""

    def __init__(self, held: Sequence[Held], lease_s: float) -> None:
        super().__init__(name="seisctf-lock-renewer", daemon=True)
        self.held, self.lease_s = held, lease_s
        self.stopped = threading.Event()
        self.lost: Held | None = None

    def run(self) -> None:
        while not self.stopped.wait(self.lease_s / 4):
            for held in self.held:
                try:
                    kept = _renew(held, self.lease_s)
                except Exception:  # noqa: BLE001 - storage that does not answer: next time
                    continue
                if not kept and not self.stopped.is_set():
                    self.lost = held
                    # A real SIGINT to the main thread: it also ends a wait in progress there.
                    main = threading.main_thread().ident
                    assert main is not None  # the main thread has started
                    signal.pthread_kill(main, signal.SIGINT)
                    return

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join()


def _lost(held: Held) -> InvalidInput:
    return InvalidInput(
        held.lease.output,
        f"another command took over its writer lock {held.path} while this one was stalled "
        "past the lease's expiry; stopped, so that the two do not mix their writes: re-run",
    )


def _notify_stderr(message: Message) -> None:
    print(f"seisctf: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def holding(
    outputs: Sequence[Output],
    *,
    command: str,
    force_unlock: bool = False,
    lease_s: float = LEASE_S,
    notify: Notify = _notify_stderr,
) -> Iterator[list[Held]]:
    """Hold the writer locks of `outputs` while the block runs (module doc): refused at once
    (InvalidInput naming the holder) when another command holds one, nothing taken then; a stale
    lock is taken over, and with `force_unlock` any (`notify` says so). `command` names the
    holder in the lease ("seisctf ingest waveforms"). Removed when the block ends, however."""
    terms = Terms(command, force_unlock, lease_s, notify)
    held: list[Held] = []
    renewer = Renewer(held, lease_s)
    try:
        for output in _distinct(outputs):
            take = _take_shared if output.shared else _take_exclusive
            held.append(take(output, terms))
        renewer.start()
        try:
            yield held
        finally:
            renewer.stop()
        if renewer.lost is not None:  # its interrupt was ignored (or came after the block)
            raise _lost(renewer.lost)
    except (KeyboardInterrupt, SystemExit):  # a SIGINT handler of a library may exit instead
        if renewer.lost is None:
            raise
        raise _lost(renewer.lost) from None
    finally:
        for one in reversed(held):
            _release(one)


def _distinct(outputs: Sequence[Output]) -> list[Output]:
    """One output per URL (exclusive if any of its mentions is), in a fixed order."""
    by_url: dict[str, Output] = {}
    for output in outputs:
        url = normalized(output.location.url)
        known = by_url.get(url)
        shared = output.shared and (known is None or known.shared)
        by_url[url] = Output(output.location.with_url(url), shared)
    return [by_url[url] for url in sorted(by_url)]
