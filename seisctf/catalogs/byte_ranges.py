"""Byte ranges of stored objects for the window reader: S3 objects over presigned URLs, several
at once without a thread each (`SignedRanges`), and local files by `os.pread` on kept file
descriptors (`LocalRanges`). Both answer `read_many(paths, starts, ends)` with fsspec's
`cat_ranges` conventions: the bytes of each range, or in its place the OSError it ended in.

`SignedRanges(fs)` reads byte ranges of the objects of an s3fs filesystem `fs`: s3fs signs a URL
per object (the store's credentials; renewed after half its `SIGNED_URL_SECONDS`, and at once
when the server answers 403), and the GETs go out on this thread's keep-alive connections of
the standard library's `http.client`. A batch of ranges is sent whole, one request per
connection on up to `READ_CONNECTIONS` connections, before the first answer is read, so the
server works on them together while this process waits once; no botocore request, no event
loop and no thread per read (a GET costs the loader about half the CPU of urllib3's,
benchmarks/RESULTS.md "Training reads").

Failures: a dropped connection (a keep-alive one the server closed, a restart) and answers
500/502/503 are retried on a fresh connection, `RETRIES` times with a growing pause; 404 is
FileNotFoundError; anything else an OSError naming the object, the range and the status.

Connections belong to the thread and process that opened them (a forked worker makes its own).
HTTPS connections check certificates as s3fs's own client does (`tls_context`): the
filesystem's `client_kwargs["verify"]` (False, or a CA bundle's path), else botocore's
`ca_bundle` setting (`AWS_CA_BUNDLE`, the profile's config), else `REQUESTS_CA_BUNDLE`, else
botocore's default bundle.

`LocalRanges()` keeps up to `OPEN_FILES` files open (least recently used closed first), so a
window costs one `pread`, not an open, a seek, a read and a close. A file replaced while open
is read as it was when opened: open a new reader on a store that was rewritten.
"""

from __future__ import annotations

import http.client
import os
import ssl
import threading
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

SIGNED_URL_SECONDS = 3600
READ_CONNECTIONS = 16  # GETs in flight at once per thread (a batch's windows)
RETRIES = 3
RETRY_PAUSE_S = 0.2  # before the second retry, doubling after
TIMEOUT_S = 60.0
RETRY_STATUSES = (500, 502, 503)
OPEN_FILES = 64

Place = tuple[str, int, int | None]  # object path, start, end (fsspec's cat_ranges)


class SignedRanges:
    """Byte ranges of the objects of s3fs filesystem `fs` over presigned URLs (module doc).
    `CONNECTION_CLASS` (default: http.client's, by the URL's scheme) makes each connection."""

    CONNECTION_CLASS: Any = None

    def __init__(self, fs) -> None:
        self._fs = fs
        self._urls: dict[str, tuple[str, float]] = {}  # path: (path?query, when to renew)
        self._endpoint = ("", "")  # scheme, host:port
        self._lock = threading.Lock()
        self._local = threading.local()
        self._tls: ssl.SSLContext | None = None  # made on the first HTTPS connection

    def read(self, path: str, start: int, end: int | None) -> bytes:
        """Bytes [start, end) of object `path`, end None: to its end; start < 0 and end None: its
        last -start bytes."""
        (outcome,) = self.read_many([path], [start], [end])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def read_many(self, paths: list[str], starts: list, ends: list) -> list:
        """The bytes of each (path, start, end), or in its place the OSError its read ended in;
        sent `READ_CONNECTIONS` at a time, each group's requests all out before any answer."""
        places = list(zip(paths, starts, ends, strict=True))
        results: list = []
        for first in range(0, len(places), READ_CONNECTIONS):
            group = places[first : first + READ_CONNECTIONS]
            self._target(group[0][0])  # signed first: the endpoint to connect to
            connections = [self._connection(k) for k in range(len(group))]
            failures = [self._send(*pair) for pair in zip(connections, group, strict=True)]
            for connection, place, failure in zip(connections, group, failures, strict=True):
                answer = failure or self._answer(connection)
                results.append(self._settle(connection, place, answer))
        return results

    def _target(self, path: str, renew: bool = False) -> str:
        """Path and query of the presigned URL of `path`, signed when missing, old or `renew`."""
        with self._lock:
            target, renew_at = self._urls.get(path, ("", 0.0))
            if renew or time.monotonic() >= renew_at:
                url = urlsplit(self._fs.sign(path, expiration=SIGNED_URL_SECONDS))
                self._endpoint = (url.scheme, url.netloc)
                target = f"{url.path}?{url.query}"
                self._urls[path] = (target, time.monotonic() + SIGNED_URL_SECONDS / 2)
            return target

    def _connection(self, k: int) -> http.client.HTTPConnection:
        """This thread's connection number `k` to the store's endpoint (made when missing; it
        connects when first used)."""
        pools = getattr(self._local, "pools", None)
        if pools is None:
            pools = self._local.pools = {}
        connections = pools.setdefault(self._endpoint, [])
        while len(connections) <= k:
            connections.append(self._new_connection(*self._endpoint))
        return connections[k]

    def _new_connection(self, scheme: str, host: str) -> http.client.HTTPConnection:
        if self.CONNECTION_CLASS is not None:
            return self.CONNECTION_CLASS(host, timeout=TIMEOUT_S)
        if scheme == "https":
            if self._tls is None:
                self._tls = tls_context(self._fs)
            return http.client.HTTPSConnection(host, timeout=TIMEOUT_S, context=self._tls)
        return http.client.HTTPConnection(host, timeout=TIMEOUT_S)

    def _send(
        self, connection: http.client.HTTPConnection, place: Place, renew=False
    ) -> Exception | None:
        """Send the GET of `place` on `connection`; the error (the connection closed) when that
        failed."""
        path, start, end = place
        target = self._target(path, renew)
        if end is None:  # to the object's end; a negative start: its last -start bytes
            span = f"bytes={start}" if start < 0 else f"bytes={start}-"
        else:
            span = f"bytes={start}-{end - 1}"
        try:
            connection.request("GET", target, headers={"Range": span})
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            return error
        return None

    @staticmethod
    def _answer(connection: http.client.HTTPConnection) -> tuple[int, bytes] | Exception:
        """(status, body) of the request sent on `connection`; the error (the connection
        closed) when the connection failed."""
        try:
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            return error

    def _settle(
        self, connection: http.client.HTTPConnection, place: Place, answer
    ) -> bytes | OSError:
        """The bytes of `place` from its `answer` ((status, body) or the connection's error),
        after retries (module doc), or the error."""
        path, start, end = place
        for attempt in range(RETRIES + 1):
            status = answer[0] if isinstance(answer, tuple) else None
            if status == 206:
                return answer[1]
            if status == 200:  # the whole object: a server that ignores ranges
                return answer[1][start:end]
            if status == 404:
                return FileNotFoundError(path)
            retry = status is None or status in RETRY_STATUSES or (status == 403 and not attempt)
            if not retry or attempt == RETRIES:
                break
            if attempt and status != 403:
                time.sleep(RETRY_PAUSE_S * 2 ** (attempt - 1))
            failure = self._send(connection, place, renew=status == 403)
            answer = failure or self._answer(connection)
        what = f"the connection failed: {answer!r}" if status is None else f"HTTP {status}"
        return OSError(f"{path}: GET bytes {start}…{end} answered {what}")


def tls_context(fs) -> ssl.SSLContext:
    """The TLS context of s3fs filesystem `fs`'s own botocore client: certificates checked
    against the bundle its settings name (module doc), or not at all when `verify` is False."""
    from botocore.httpsession import create_urllib3_context, get_cert_path

    verify = (getattr(fs, "client_kwargs", None) or {}).get("verify")
    session = getattr(fs, "session", None)
    if verify is None and session is not None:
        verify = session.get_config_variable("ca_bundle")
    if verify is None:
        verify = os.environ.get("REQUESTS_CA_BUNDLE", True)
    context = create_urllib3_context()
    if verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    context.check_hostname = True
    bundle = get_cert_path(verify)
    try:
        if os.path.isdir(bundle):
            context.load_verify_locations(capath=bundle)
        else:
            context.load_verify_locations(cafile=bundle)
    except (OSError, ssl.SSLError) as error:
        raise OSError(f"CA bundle {bundle!r} (s3fs verify or AWS_CA_BUNDLE): {error}") from error
    return context


class LocalRanges:
    """Byte ranges of local files by `os.pread` on up to `OPEN_FILES` kept descriptors (module
    doc). Thread-safe; descriptors are this process's (a forked worker opens its own)."""

    def __init__(self) -> None:
        self._files: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def read_many(self, paths: list[str], starts: list, ends: list) -> list:
        """The bytes of each (path, start, end), or in its place the OSError its read ended in
        (FileNotFoundError for a missing file)."""
        results: list = []
        for path, start, end in zip(paths, starts, ends, strict=True):
            try:
                results.append(self._read(path, start, end))
            except OSError as error:
                results.append(error)
        return results

    def _read(self, path: str, start: int, end: int | None) -> bytes:
        descriptor = self._descriptor(path)
        if start < 0 or end is None:
            size = os.fstat(descriptor).st_size
            start = max(size + start, 0) if start < 0 else start
            end = size if end is None else end
        data = os.pread(descriptor, end - start, start)
        if len(data) != end - start:
            raise OSError(f"{path}: {len(data)} bytes at {start}, expected {end - start}")
        return data

    def _descriptor(self, path: str) -> int:
        with self._lock:
            if self._pid != os.getpid():  # inherited through fork: this process opens its own
                for inherited in self._files.values():
                    os.close(inherited)
                self._files, self._pid = OrderedDict(), os.getpid()
            descriptor = self._files.get(path)
            if descriptor is not None:
                self._files.move_to_end(path)
                return descriptor
            descriptor = self._files[path] = os.open(path, os.O_RDONLY)
            while len(self._files) > OPEN_FILES:
                os.close(self._files.popitem(last=False)[1])
            return descriptor

    def close(self) -> None:
        """Close every kept descriptor."""
        with self._lock:
            while self._files:
                os.close(self._files.popitem()[1])

    def __del__(self) -> None:
        # At interpreter shutdown `os` may already be torn down: nothing is left to close then.
        try:
            if getattr(self, "_pid", None) == os.getpid():
                self.close()
        except (AttributeError, TypeError, OSError):
            pass
