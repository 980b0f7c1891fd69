"""`SignedRanges`: ranged GETs over presigned URLs on keep-alive connections, against a real
SeaweedFS and a flaky HTTP server (errors, dropped connections) and no server at all; the bytes
compared with the object's own slices."""

from __future__ import annotations

import http.server
import os
import sys
import threading

import pytest
from servers import free_port

from seisctf.catalogs import byte_ranges
from seisctf.catalogs.byte_ranges import LocalRanges, SignedRanges

PLACES = [(0, 10), (5_000, 65_000), (-16, None), (99_990, 100_000)]


def read(ranges: SignedRanges, paths: list[str], places=PLACES) -> list:
    return ranges.read_many(paths, [start for start, _ in places], [end for _, end in places])


def test_ranges_of_s3_objects_and_a_missing_one_in_its_place(s3_server):
    fs = s3_server.filesystem()
    fs.mkdir("ranges")
    blob = os.urandom(100_000)
    fs.pipe("ranges/object", blob)
    ranges = SignedRanges(fs)
    want = [blob[start:end] for start, end in PLACES]
    for _ in range(3):  # again on the kept connections
        assert read(ranges, ["ranges/object"] * 4) == want
    assert ranges.read("ranges/object", 7, 9) == blob[7:9]
    assert ranges.read("ranges/object", 99_000, None) == blob[99_000:]  # to the end
    missing, found = read(ranges, ["ranges/nothing", "ranges/object"], PLACES[:2])
    assert isinstance(missing, FileNotFoundError) and "ranges/nothing" in str(missing)
    assert found == want[1]
    with pytest.raises(FileNotFoundError, match="ranges/nothing"):
        ranges.read("ranges/nothing", 0, 10)


class Flaky(http.server.BaseHTTPRequestHandler):
    """Answers `failures` GETs with 503, then each ranged GET with its bytes of `blob` (206);
    with `drops`, closes each connection after its answer without saying so (a keep-alive
    connection the server dropped: the client's next request on it gets no answer)."""

    protocol_version = "HTTP/1.1"
    blob = b""
    failures = 0
    drops = False

    def do_GET(self):  # noqa: N802 - http.server's name
        cls = type(self)
        if cls.failures:
            cls.failures -= 1
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        first, last = self.headers["Range"].removeprefix("bytes=").split("-")
        body = cls.blob[-int(last) :] if not first else cls.blob[int(first) : int(last) + 1]
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = cls.drops

    def log_message(self, *args):
        pass


class Signer:
    """What SignedRanges takes of an s3fs filesystem: `sign(path, expiration)`."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def sign(self, path: str, expiration: int) -> str:
        return f"{self.endpoint}/{path}?X-Amz-Expires={expiration}"


@pytest.fixture
def flaky(monkeypatch):
    """A `Flaky` server on loopback: its `Signer`."""
    monkeypatch.setattr(byte_ranges, "RETRY_PAUSE_S", 0.01)
    monkeypatch.setattr(Flaky, "blob", os.urandom(100_000))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Signer(f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("failures", [2, byte_ranges.RETRIES + 1])
def test_server_errors_are_retried_then_named(flaky, failures, monkeypatch):
    monkeypatch.setattr(Flaky, "failures", failures)
    (outcome,) = SignedRanges(flaky).read_many(["bucket/key"], [100], [300])
    if failures <= byte_ranges.RETRIES:
        assert outcome == Flaky.blob[100:300]
    else:
        assert isinstance(outcome, OSError) and "bucket/key" in str(outcome)
        assert "HTTP 503" in str(outcome)


def test_dropped_connections_are_opened_again(flaky, monkeypatch):
    monkeypatch.setattr(Flaky, "drops", True)
    ranges = SignedRanges(flaky)
    want = [Flaky.blob[start:end] for start, end in PLACES]
    for _ in range(3):  # each time on connections the server has closed
        assert read(ranges, ["bucket/key"] * 4) == want


def test_no_server_is_an_oserror_naming_the_object(monkeypatch):
    monkeypatch.setattr(byte_ranges, "RETRY_PAUSE_S", 0.01)
    ranges = SignedRanges(Signer(f"http://127.0.0.1:{free_port()}"))
    (failed,) = read(ranges, ["bucket/key"], PLACES[:1])
    assert isinstance(failed, OSError) and not isinstance(failed, FileNotFoundError)
    assert "bucket/key" in str(failed)
    assert "connection failed: ConnectionRefusedError" in str(failed)
    with pytest.raises(OSError, match="bucket/key"):
        ranges.read("bucket/key", 0, 10)


def test_local_ranges_over_more_files_than_kept_open_and_in_a_forked_process(tmp_path, monkeypatch):
    import multiprocessing

    monkeypatch.setattr(byte_ranges, "OPEN_FILES", 2)
    blobs = {tmp_path / f"shard{k}": os.urandom(100_000) for k in range(5)}
    for path, blob in blobs.items():
        path.write_bytes(blob)
    paths = [str(path) for path in blobs for _ in PLACES]
    places = PLACES * len(blobs)
    want = [blob[start:end] for blob in blobs.values() for start, end in PLACES]
    ranges = LocalRanges()
    for _ in range(2):  # the second time, most files were closed to keep two open
        assert read(ranges, paths, places) == want
    assert len(ranges._files) == 2
    missing, found = read(ranges, [str(tmp_path / "nothing"), paths[1]], PLACES[:2])
    assert isinstance(missing, FileNotFoundError) and found == want[1]
    (short,) = ranges.read_many([paths[0]], [99_000], [100_001])
    assert isinstance(short, OSError) and paths[0] in str(short)

    child = multiprocessing.get_context("fork").Process(
        target=lambda: sys.exit(0 if read(ranges, paths, places) == want else 1)
    )
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert read(ranges, paths, places) == want  # the parent's descriptors still work
    ranges.close()
    assert not ranges._files
