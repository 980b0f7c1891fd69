"""Local copies of DAS inputs: DASCore opens files by path, and a recording is GBs, so it is
streamed to a local file in pieces, never held in memory.

The scan reads each input once (`fetched`): a URL, or a local file on another file system than
the input cache's, is copied while its sha256 is computed into the host's input cache
(`input_cache.spool`, under the ingest's run), where the block tasks then find it
(`input_cache.kept_path`): each byte is read from storage once where the copy fits the host's
cache. A local file on the cache's file system is hashed where it is and read there again by
the block tasks (a copy would cost what that read costs).

A block task (`staged`) opens the host's kept copy if there is one, else the local file itself,
else fetches the URL again: into the host's cache (for the run's other blocks on that host)
where it fits, else into a per-process copy (`_RemoteCache`, least recently used out beyond
`$SEISCTF_DAS_CACHE_BYTES`), checked against the scan's sha256.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from seisctf.errors import InvalidInput
from seisctf.formats.shared import input_cache
from seisctf.formats.shared.input_listing import is_url
from seisctf.location import StoreLocation

PIECE_BYTES = 2**22  # read and hashed at a time


def _opened(source: StoreLocation) -> Any:
    """The input `source` opened for reading bytes (a local file, or fsspec's file of a URL)."""
    if not is_url(source.url):
        return open(source.url, "rb")
    import fsspec

    return fsspec.open(source.url, "rb", **(source.options or {})).open()


def _size(handle: Any) -> int:
    """The size (bytes) of an opened input: fsspec's `size`, else its file's."""
    size = getattr(handle, "size", None)
    return int(size) if size is not None else os.fstat(handle.fileno()).st_size


def _copy(source: BinaryIO, out: BinaryIO | None) -> tuple[str, int]:
    """Read `source` to its end, writing each piece to `out` (None: nowhere): (hex sha256,
    bytes read)."""
    digest, size = hashlib.sha256(), 0
    for piece in iter(lambda: source.read(PIECE_BYTES), b""):
        digest.update(piece)
        if out is not None:
            out.write(piece)
        size += len(piece)
    return digest.hexdigest(), size


def _kept_copy(input_file: StoreLocation, run: str) -> tuple[str, str, int] | None:
    """(kept path, hex sha256, size) of `input_file` copied into this host's input cache for
    `run`, or None where the cache keeps nothing of it (nothing read then). OSError if it
    cannot be read."""
    with _opened(input_file) as source:
        temporary = input_cache.spool(run, _size(source), source=input_file.url)
        if temporary is None:
            return None
        try:
            with open(temporary, "wb") as out:
                sha256, size = _copy(source, out)
            return str(input_cache.commit(temporary, sha256)), sha256, size
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


_FOLDER: list[str] = []  # this process's folder of copies and links, made when first needed
_FOLDER_LOCK = threading.Lock()


def _process_folder() -> str:
    """A temporary folder of this process's own, removed when it exits."""
    with _FOLDER_LOCK:
        if not _FOLDER:
            _FOLDER.append(tempfile.mkdtemp(prefix="seisctf-das-"))
            atexit.register(shutil.rmtree, _FOLDER[0], True)
        return _FOLDER[0]


def named_like(local: str, source: str) -> str:
    """`local` (a kept copy, named by its sha256) under a name with the extension of `source`:
    DASCore tries the formats of a file's extension first when it identifies one. A symbolic
    link in this process's folder, or `local` itself when the extensions agree."""
    suffix = os.path.splitext(source.rstrip("/"))[1]
    if os.path.splitext(local)[1] == suffix:
        return local
    link = os.path.join(_process_folder(), os.path.basename(local) + suffix)
    if os.path.realpath(link) != os.path.realpath(local) or not os.path.exists(link):
        temporary = f"{link}.{threading.get_ident()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        os.symlink(local, temporary)
        os.replace(temporary, link)  # a link to a copy of a cleared run is replaced
    return link


class _RemoteCache:
    """Local copies of remote inputs for DASCore, per process: least recently used out beyond
    `max_bytes` (never a copy in use). Keys hold the copy's sha256: a re-fetched, changed
    object is a new key."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        # (url, sha256) -> (local path, size), least recently used first
        self.items: collections.OrderedDict = collections.OrderedDict()
        self.in_use: collections.Counter = collections.Counter()
        self.lock = threading.Lock()

    def acquire(self, input_file: StoreLocation) -> tuple[str, str]:
        """The key (url, sha256) of a fresh or cached copy of `input_file`, marked in use;
        OSError if it cannot be fetched."""
        url = input_file.url
        with self.lock:
            key = next((k for k in self.items if k[0] == url), None)
            if key is not None:
                self.items.move_to_end(key)
                self.in_use[key] += 1
                return key
        handle, local = tempfile.mkstemp(dir=_process_folder(), suffix=os.path.splitext(url)[1])
        with os.fdopen(handle, "wb") as out, _opened(input_file) as source:
            sha256, size = _copy(source, out)
        key = (url, sha256)
        with self.lock:
            if key in self.items:  # fetched meanwhile by another thread
                os.remove(local)
            else:
                self.items[key] = (local, size)
            self.in_use[key] += 1
        return key

    def path(self, key: tuple[str, str]) -> str:
        return self.items[key][0]

    def size(self, key: tuple[str, str]) -> int:
        return self.items[key][1]

    def release(self, key: tuple[str, str], drop: bool = False) -> None:
        """Done with the copy (`drop`: delete it when idle: it is stale)."""
        with self.lock:
            self.in_use[key] -= 1
            idle = [k for k in self.items if not self.in_use[k]]
            stale = [key] if drop and key in idle else []
            while stale or (idle and sum(n for _, n in self.items.values()) > self.max_bytes):
                victim = stale.pop() if stale else idle[0]
                idle.remove(victim)
                with contextlib.suppress(OSError):
                    os.remove(self.items.pop(victim)[0])


_REMOTE = _RemoteCache(max_bytes=int(os.environ.get("SEISCTF_DAS_CACHE_BYTES", 4 * 2**30)))


@contextlib.contextmanager
def _remote_copy(input_file: StoreLocation) -> Iterator[tuple[str, str, int]]:
    """(local path, hex sha256, size) of this process's copy of `input_file`, in use meanwhile;
    a copy whose sha256 the caller refuses (InvalidInput) is dropped. OSError if it cannot be
    fetched."""
    key = _REMOTE.acquire(input_file)
    drop = False
    try:
        yield _REMOTE.path(key), key[1], _REMOTE.size(key)
    except InvalidInput:
        drop = True
        raise
    finally:
        _REMOTE.release(key, drop=drop)


@contextlib.contextmanager
def fetched(input_file: StoreLocation, cache_run: str = "") -> Iterator[tuple[str, str, int]]:
    """(local path, hex sha256, size) of `input_file`, read once (module doc): the host's kept
    copy for `cache_run` where it fits, else the local file itself (hashed) or this process's
    copy of a URL. A file that cannot be read is InvalidInput naming it."""
    path = input_file.url
    with contextlib.ExitStack() as stack:
        try:
            found = _kept_copy(input_file, cache_run)
            if found is None and not is_url(path):
                with open(path, "rb") as source:
                    found = (path, *_copy(source, None))
            if found is None:
                found = stack.enter_context(_remote_copy(input_file))
        except OSError as error:
            raise InvalidInput(path, f"cannot read the file ({error})") from None
        yield found


@contextlib.contextmanager
def staged(input_file: StoreLocation, sha256: str, size: int, cache_run: str = "") -> Iterator[str]:
    """A local path DASCore can open for `input_file`, whose scan found `sha256` and `size`
    (module doc): the host's kept copy, the local file, or a fresh copy of a URL. An input
    gone, unreachable or changed since the scan is InvalidInput: a re-run resumes."""
    path = input_file.url
    kept = input_cache.kept_path(sha256, size, cache_run)
    if kept is not None:
        yield str(kept)
        return
    if not is_url(path):
        if not os.path.exists(path):
            raise InvalidInput(path, "gone since the scan; re-run to resume")
        yield path
        return
    with contextlib.ExitStack() as stack:
        try:
            fresh = _kept_copy(input_file, cache_run)
            found = fresh or stack.enter_context(_remote_copy(input_file))
        except OSError as error:
            raise InvalidInput(path, f"cannot fetch it ({error}); re-run to resume") from None
        if found[1] != sha256:
            if fresh is not None:  # kept under its own digest: of no use to this run
                Path(fresh[0]).unlink(missing_ok=True)
            raise InvalidInput(path, "changed since the scan (sha256 differs); re-run")
        yield found[0]
