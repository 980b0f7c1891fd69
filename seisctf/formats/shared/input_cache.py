"""Input files kept on the workers' hosts between an ingest's scan and its block tasks, so that
each input byte is read from storage once.

The plan needs every file's headers before any block is written, so a file is read twice: by
the scan task (`scan_table.scan_files`: sha256 and header parse) and by the block tasks that
decode it (`waveform_blocks.decode_file`). The scan task holds the whole file anyway; it keeps
a copy here (`keep`), named by its sha256, and the decode reads that copy (`read`) instead of
storage. A copy is served only if its bytes hash to its name, so a file of any run on the host
serves, and a damaged copy never does. A file kept on another host is asked of that host where
the task names it (`from_peers`: a waveform run whose files the scan kept on two hosts). A file
that was not kept (over the budget, too little free disk, removed meanwhile) is read from
storage again: the same bytes (the scan's hash), only slower.

A DAS recording (GBs) is not held in memory: its scan streams it into a file of the cache
(`spool`, then `commit` under its sha256) and the block tasks open that copy by path
(`kept_path`: its size is checked, not its hash, since each task reads a part of it).

Where: `$SEISCTF_INPUT_CACHE_DIR`, else dask's `temporary-directory` (config), else the
system's temporary folder, on each worker's host (read from the worker's own environment), in
`seisctf-input-cache/`: the workers of one host share it. Each ingest run (`cache_run`) has a
folder of its own there, so concurrent ingests keep apart and each clears only its own files:
on every worker when the run ends, whether it succeeded or failed (`clear_everywhere`). Run
folders untouched for a day (a killed ingest's) are removed when a run first keeps a file on
that host.

How much: `$SEISCTF_INPUT_CACHE_BYTES` per run and host (a byte count: `20000000000`, `20GB`,
`16GiB`; 0: no cache), by default DEFAULT_FREE_FRACTION of the space free there when the run
began on that host; and a file is kept only if RESERVE_FRACTION of the file system's usable size
(used plus free) stays free after it, whatever the budget. Local input files on the cache's own
file system are not copied (reading them again costs what reading the copy would).

Files are written whole under a temporary name and then renamed: a reader sees a whole copy or
none. The host's workers count the bytes kept by a run in one ledger file under an exclusive
lock (POSIX `flock`).
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import functools
import hashlib
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from seisctf.cluster import active_client
from seisctf.errors import InvalidInput

DIR_ENV = "SEISCTF_INPUT_CACHE_DIR"
BYTES_ENV = "SEISCTF_INPUT_CACHE_BYTES"
FOLDER = "seisctf-input-cache"
# Budget by default: a quarter of the free space, leaving the rest to what else the host writes
# meanwhile (a local output store is about as large as its inputs).
DEFAULT_FREE_FRACTION = 0.25
# Never keep a file that would leave less than this share of the file system free.
RESERVE_FRACTION = 0.05
# Run folders untouched for this long are a killed run's (seconds).
STALE_S = 24 * 3600
LEDGER = ".ledger"  # "budget used" in bytes, of the run on this host
TEMPORARY_PREFIX = ".part-"
# Seconds to wait for the workers to clear a run; a worker that does not answer keeps its
# files until the next run on its host sweeps them (STALE_S).
CLEAR_TIMEOUT_S = 30

# The cache run of the ingest going on in this (client) process (`cache_run`).
_RUN: contextvars.ContextVar[str] = contextvars.ContextVar("input_cache_run", default="")
# Workers of other hosts that `read` may ask for a file (`from_peers`), in a task.
_PEERS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("peers", default=())
# Seconds to wait for a peer's answer; without it, the file is read from storage.
PEER_TIMEOUT_S = 60


def cache_root() -> Path:
    """This host's cache folder (module doc), from this process's environment and dask config."""
    import dask

    given = os.environ.get(DIR_ENV, "").strip()
    if given and ("://" in given or not os.path.isabs(given)):  # a mistyped URL is no folder
        raise InvalidInput(DIR_ENV, f"expected an absolute local folder, got {given!r}")
    base = given or dask.config.get("temporary-directory", None)
    return Path(base or tempfile.gettempdir()) / FOLDER


def budget_bytes(root: Path) -> int:
    """Bytes a run may keep under `root` on this host: `$SEISCTF_INPUT_CACHE_BYTES`, else
    DEFAULT_FREE_FRACTION of the free space there now."""
    given = os.environ.get(BYTES_ENV, "").strip()
    if given:
        from dask.utils import parse_bytes

        try:
            budget = parse_bytes(given)
        except ValueError:
            budget = -1
        if budget < 0:
            raise InvalidInput(
                BYTES_ENV, f"expected a size in bytes (0 for no cache, e.g. 20GB), not {given!r}"
            )
        return budget
    return int(DEFAULT_FREE_FRACTION * shutil.disk_usage(_existing(root)).free)


def _existing(path: Path) -> Path:
    """`path` or its nearest existing ancestor (whose file system it will be on)."""
    return next((p for p in (path, *path.parents) if p.exists()), Path("/"))


# --- the client's side: a run --------------------------------------------------------------


def cache_run(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` (an ingest's entry point) run with an input-cache run of its own (`keeping`
    and `current_run` within it), whose files are cleared from every worker when it returns or
    raises. A bad `$SEISCTF_INPUT_CACHE_BYTES` here is refused before any work."""

    @functools.wraps(function)
    def with_cache_run(*args: Any, **kwargs: Any) -> Any:
        budget_bytes(cache_root())  # refuses a bad folder or budget now, not in a task
        run = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(6)}"
        token = _RUN.set(run)
        try:
            return function(*args, **kwargs)
        finally:
            _RUN.reset(token)
            clear_everywhere(run)

    return with_cache_run


def current_run() -> str:
    """The cache run of the ingest going on in this process ("": none)."""
    return _RUN.get()


def keeping(scan: Callable[..., Any]) -> Callable[..., Any]:
    """A scan task function (`scan_table.scan_files`) that keeps its files for the current run
    (`cache_run=`); `scan` itself outside a run."""
    run = current_run()
    return functools.partial(scan, cache_run=run) if run else scan


def clear_everywhere(run: str) -> None:
    """Remove the run's files from every worker's host and from this one. Best effort: a host
    that cannot be reached keeps them until its next run sweeps them (STALE_S)."""
    client = active_client()
    if client is not None:
        # Anything here (a cluster shutting down, a dead worker) must not replace the ingest's
        # own result or error.
        with contextlib.suppress(Exception):
            client.run(clear, run, on_error="ignore", callback_timeout=CLEAR_TIMEOUT_S)
    clear(run)


# --- a worker's side: keep, read, clear ----------------------------------------------------


def keep(run: str, digest: str, raw: bytes, source: str = "") -> bool:
    """Keep `raw` (a file's bytes, hex sha256 `digest`, read from `source`) for `run` on this
    host if it fits; whether it is kept. Nothing for no run or a zero budget."""
    if not run:
        return False
    root = cache_root()  # read once a call: dask's config and the environment, 4 µs
    if _same_file_system(source, root):  # first: most files of a local archive stop here
        return False
    if (root / run / digest).exists():
        return True
    temporary = _spool_under(root, run, len(raw))
    if temporary is None:
        return False
    try:
        temporary.write_bytes(raw)
        commit(temporary, digest)
    except OSError:  # the disk filled up meanwhile: the decode reads storage
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return False
    return True


def spool(run: str, size: int, source: str = "") -> Path | None:
    """A new empty file in the run's folder on this host to write a file of `size` bytes read
    from `source` into, its bytes counted against the run's budget; None where nothing is kept
    (no run, a zero or spent budget, too little free disk, a local `source` on the cache's own
    file system). Its name is temporary: `commit` it once whole (or remove it). For readers
    that stream a file too large to hold in memory (DAS recordings)."""
    if not run:
        return None
    root = cache_root()
    return None if _same_file_system(source, root) else _spool_under(root, run, size)


def _spool_under(root: Path, run: str, size: int) -> Path | None:
    """`spool` in the cache folder `root` of a source on another file system."""
    folder = _run_folder(root, run)
    if folder is None or not _reserve(folder, size):
        return None
    try:
        handle, temporary = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=folder)
    except OSError:  # the folder went (the run was cleared)
        return None
    os.close(handle)
    return Path(temporary)


def commit(temporary: Path, digest: str) -> Path:
    """The whole file `temporary` (`spool`) kept under its hex sha256 `digest`: its path."""
    target = temporary.parent / digest
    os.replace(temporary, target)
    return target


def kept_path(digest: str, size: int, run: str = "") -> Path | None:
    """The path of a copy of the file of hex sha256 `digest` and `size` bytes kept on this host
    (by `run` first, else by any run), or None: for readers that open a path and read parts of
    the file (DASCore). Its size is checked, its bytes are not hashed (copies are renamed into
    place whole; hashing a file of GBs for each part read would read it whole each time)."""
    root = cache_root()
    try:
        folders = [entry.name for entry in os.scandir(root) if entry.is_dir()]
    except OSError:
        return None
    for folder in sorted(folders, key=lambda name: name != run):
        path = root / folder / digest
        try:
            if path.stat().st_size == size:
                return path
        except OSError:
            continue
    return None


def read(digest: str) -> bytes | None:
    """The bytes of the file of hex sha256 `digest` kept on this host by any run, else by the
    hosts of the workers `from_peers` names (sent by them, not read from storage), checked
    against the digest; None if none keeps it."""
    raw = read_here(digest)
    return raw if raw is not None or not _PEERS.get() else _read_from_peers(digest)


@contextlib.contextmanager
def from_peers(workers: Sequence[str]) -> Iterator[None]:
    """Within: `read` asks `workers` (a worker of each other host keeping files of the task
    running here: `input_locality.near_partitions`) for a file this host does not keep."""
    token = _PEERS.set(tuple(workers))
    try:
        yield
    finally:
        _PEERS.reset(token)


def _read_from_peers(digest: str) -> bytes | None:
    """The file's bytes as the first of the `from_peers` workers keeping it sends them (through
    the scheduler, `Client.run`); None if none does or answers."""
    from distributed import get_client

    try:
        answers = get_client().run(read_here, digest, workers=list(_PEERS.get()),
                                   on_error="return", callback_timeout=PEER_TIMEOUT_S)  # fmt: skip
    except Exception:  # noqa: BLE001 - a peer gone or slow: the caller reads storage
        return None
    found = [raw for raw in answers.values() if isinstance(raw, bytes)]
    return next((raw for raw in found if hashlib.sha256(raw).hexdigest() == digest), None)


def read_here(digest: str) -> bytes | None:
    """The bytes of the file of hex sha256 `digest` kept on this host by any run, checked
    against the digest; None if none is kept (or a copy does not match: it is removed)."""
    root = cache_root()
    try:
        folders = [entry.path for entry in os.scandir(root) if entry.is_dir()]
    except OSError:
        return None
    for folder in folders:
        path = os.path.join(folder, digest)
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        if hashlib.sha256(raw).hexdigest() == digest:
            return raw
        with contextlib.suppress(OSError):
            os.unlink(path)
    return None


def clear(run: str) -> None:
    """Remove the run's folder on this host."""
    shutil.rmtree(cache_root() / run, ignore_errors=True)


def host_cache() -> str:
    """This host's cache: host name and cache folder (workers that give the same share it)."""
    return f"{socket.gethostname()}:{cache_root()}"


def held(run: str) -> dict[str, int]:
    """{hex sha256: bytes} of the files the run keeps on this host (`input_locality` asks)."""
    try:
        with os.scandir(cache_root() / run) as entries:
            return {
                entry.name: entry.stat().st_size
                for entry in entries
                if entry.is_file() and not entry.name.startswith(".")
            }
    except OSError:
        return {}


def _same_file_system(source: str, root: Path) -> bool:
    """Whether `source` is a local file on the file system of `root`."""
    if not source or "://" in source:
        return False
    try:
        return os.stat(source).st_dev == _device(str(root))
    except OSError:
        return False


@functools.lru_cache(maxsize=16)
def _device(root: str) -> int:
    """The file system (`st_dev`) the cache folder `root` is or will be on, asked once a
    process: a scan asks for every file it reads (a local archive of 10^5 files)."""
    return os.stat(_existing(Path(root))).st_dev


def _run_folder(root: Path, run: str) -> Path | None:
    """The run's folder on this host, made (and stale run folders swept) by the first to ask;
    None where it cannot be made."""
    folder = root / run
    try:
        root.mkdir(parents=True, exist_ok=True)
        folder.mkdir()
    except FileExistsError:
        return folder
    except OSError:
        return None
    _sweep(root, keep_name=run)
    return folder


def _sweep(root: Path, keep_name: str) -> None:
    """Remove run folders under `root` untouched for STALE_S (not `keep_name`)."""
    cutoff = time.time() - STALE_S
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):  # removed meanwhile by another worker
                if entry.name != keep_name and entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)


def _reserve(folder: Path, size: int) -> bool:
    """Count `size` more bytes kept by the run on this host if they fit its budget (set by the
    first file) and leave RESERVE_FRACTION of the disk free; whether they were counted."""
    with _locked(folder / LEDGER) as ledger:
        text = ledger.read()
        budget, used = map(int, text.split()) if text else (budget_bytes(folder.parent), 0)
        disk = shutil.disk_usage(folder)
        if used + size > budget or disk.free - size < RESERVE_FRACTION * _usable(disk):
            if not text:
                ledger.write(f"{budget} {used}")
            return False
        ledger.seek(0)
        ledger.write(f"{budget} {used + size}")
        ledger.truncate()
    return True


def _usable(disk: Any) -> int:
    """Bytes of a file system (`shutil.disk_usage`) an unprivileged writer can fill: what is
    used plus what is free to it. Blocks reserved for root, or held back by the volume's host,
    are no one's to keep files in: a reserve counted from the raw total refuses to keep
    anything on a volume whose reserved part is large."""
    return int(disk.used + disk.free)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[Any]:
    """`path` opened for reading and writing (made if absent), under an exclusive lock."""
    with os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
