"""obspy's header-only read of a miniSEED file without a `Trace` per segment.

`obspy.io.mseed.core._read_mseed(headonly=True)` reads a file's record headers into segments
with libmseed (its C `readMSEEDBuffer`), then builds a `Trace` and `Stats` of each segment and
parses the first record's header again in Python (`get_record_information`, its time with
`strptime`). For a small file the Python around the C read is most of the scan's time: 170 µs of
a 0.1 Hz day file's 220, of which the C read is 50 (one process, page cache warm, 2026-12-07).

`read_segments` makes the same calls on the same bytes (so the same segments: one C reader, the
same arguments, the same first-record checks) and keeps, of each segment, what the scan uses
(`HeaderSegment`). Anything unusual is left to obspy's own read, which then says what it says
(None): a warning or an error on the way, a file in obspy's large-file mode, codes that are not
ASCII, an encoding obspy does not map, a rate or sample count from which obspy's `Stats` could
not compute an end time. `tests/formats/test_mseed_headers.py` holds the scans of both reads
equal on every miniSEED file obspy ships and on generated files.
"""

from __future__ import annotations

import ctypes
import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.formats.obspy_archive.read_warnings import collected_warnings

# A segment's codes: network, station, location, channel (obspy strips and decodes them).
_CODES = ("network", "station", "location", "channel")


@dataclass(frozen=True, slots=True)
class HeaderSegment:
    """One trace of a file as its headers give it: codes, first sample (ns since 1970),
    sampling rate (Hz), samples, and the bytes of its records (records × record length; None
    where the format has no records), and SAC header coordinates ((latitude, longitude,
    elevation), or None)."""

    network: str
    station: str
    location: str
    channel: str
    start_ns: int
    sampling_rate: float
    npts: int
    record_bytes: int | None = None
    coordinates: tuple[float, float, float] | None = None

    @property
    def id(self) -> str:
        """`NET.STA.LOC.CHA`, as obspy's `Trace.id`."""
        return f"{self.network}.{self.station}.{self.location}.{self.channel}"


def read_segments(data: bytes) -> list[HeaderSegment] | None:
    """The segments obspy's header-only read gives of the miniSEED bytes `data`, in its order;
    None where obspy's own read must answer (module doc). The caller holds obspy's read lock
    (libmseed's logging is process-wide) and has checked that `data` is miniSEED."""
    from obspy.io.mseed.headers import LIBMSEED_MAX, clibmseed

    with collected_warnings() as caught:
        try:
            records = _data_records(np.frombuffer(data, dtype=np.int8))
            if records is None or len(records[0]) > LIBMSEED_MAX - records[1]:
                return None  # none, or obspy's large-file mode
            buffer = records[0]
            clibmseed.verbose = False
            try:
                found = clibmseed.readMSEEDBuffer(
                    buffer, len(buffer), None, ctypes.c_int8(0), -1, ctypes.c_int8(0),
                    ctypes.c_int8(0), -1, _ALLOCATE,
                )  # fmt: skip
            finally:
                clibmseed.verbose = True
            segments = _walk(found, clibmseed)
        except Exception:  # noqa: BLE001 - obspy's own read raises it again, as it does
            return None
        finally:
            _allocated.clear()
    return None if caught or segments is None else segments


def _data_records(buffer: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(the bytes from the first data record on, the first record's length), as `_read_mseed`
    hands them to libmseed after its checks of the first record (`get_record_information`,
    the encoding); None where those would raise (obspy's read then does)."""
    from obspy.io.mseed import util
    from obspy.io.mseed.headers import ENCODINGS, SEED_CONTROL_HEADERS, VALID_CONTROL_HEADERS

    if len(buffer) < 128:
        return None
    info = util.get_record_information(io.BytesIO(buffer[0:1048576].data))
    if "encoding" in info and info["encoding"] not in ENCODINGS:
        return None
    record_length = info["record_length"]
    if record_length <= 0:
        return None
    offset = 0
    while True:
        head = buffer[offset : offset + 7]
        if len(head) < 7 or (head[:6] - ord("0")).max() > 9:
            return None
        if head[6] not in VALID_CONTROL_HEADERS:
            return None
        if head[6] not in SEED_CONTROL_HEADERS:
            return buffer[offset:], int(record_length)
        offset += record_length


def _walk(found: Any, clibmseed: Any) -> list[HeaderSegment] | None:
    """The segments of libmseed's list of ids `found`, which is freed; None where obspy's
    Trace building would fail (raises where it would warn or fail on a code)."""
    try:
        return _segments(found)
    finally:
        getattr(clibmseed, "lib", clibmseed).lil_free(found)  # not through obspy's logging


def _segments(found: Any) -> list[HeaderSegment] | None:
    from obspy.io.mseed.headers import ENCODINGS

    segments: list[HeaderSegment] = []
    ident = _first(found)
    while ident is not None:
        # obspy warns of codes that are not ASCII (its read answers: a decode error here) and
        # fails on a quality code that is not UTF-8.
        network, station, location, channel = (
            getattr(ident, name).strip().decode("ascii") for name in _CODES
        )
        ident.dataquality.decode()
        segment = _first(ident.firstSegment)
        if segment is None:
            break  # as obspy: an id without segments ends its read
        while segment is not None:
            if segment.encoding not in ENCODINGS or not _has_end_time(segment):
                return None
            segments.append(
                HeaderSegment(
                    network,
                    station,
                    location,
                    channel,
                    start_ns=int(segment.starttime) * 1000,
                    sampling_rate=float(segment.samprate),
                    npts=int(segment.samplecnt),
                    record_bytes=int(segment.recordcnt) * int(segment.reclen),
                )
            )
            segment = _first(segment.next)
        ident = _first(ident.next)
    return segments


def _first(pointer: Any) -> Any:
    """What a libmseed list pointer points to; None for a null pointer."""
    try:
        return pointer.contents
    except ValueError:
        return None


def _has_end_time(segment: object) -> bool:
    """Whether obspy's `Stats` computes the segment's end time without an error (it raises on
    a rate or span that is not finite, and the whole read with it)."""
    rate, npts = float(segment.samprate), int(segment.samplecnt)  # type: ignore[attr-defined]
    if npts < 0 or not math.isfinite(rate):
        return False
    try:
        delta = 1.0 / rate if rate else 0.0
        span = 0.0 if npts == 0 else float(npts - 1) * delta
        int(round(span * 1e9))
    except (OverflowError, ValueError):
        return False
    return True


# Where libmseed may put samples: obspy's allocator (`_read_mseed`'s `allocate_data`), the arrays
# held until the call returns (under obspy's read lock). A header-only read has not been seen to
# ask (none of the files of tests/formats/test_mseed_headers.py); were it to, it gets memory.
_allocated: list[np.ndarray] = []


def _allocate(count: int, sample_type: bytes) -> int:
    from obspy.io.mseed.headers import DATATYPES

    data = np.empty(0) if sample_type == b"\x00" else np.empty(count, DATATYPES[sample_type])
    _allocated.append(data)
    return int(data.ctypes.data)


_ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_longlong, ctypes.c_int, ctypes.c_char)(_allocate)
