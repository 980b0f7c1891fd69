"""The traces of a plain miniSEED 2 file from its record headers, read with numpy in one pass:
what obspy's header-only read gives (`waveform_files.scan_file`), without its Python objects of
each record and trace (0.5 ms of a small day file's 0.65 ms scan).

"Plain" is what archives hold: big-endian fixed-length records, each with blockette 1000 (and
at most a 1001 beside it), one network, station, location, channel and quality code, one rate,
samples in every record, no time correction to apply and a data encoding of one sample type.
Anything else (little-endian, multiplexed or compressed files, other blockettes, ASCII records,
leap seconds, a cut last record) returns None and the file is read by obspy as before.

Records are joined into traces by obspy's own rule (`obspy/io/mseed/src/obspy-readbuffer.c`,
libmseed's times in integer microseconds): a record continues the trace when its start is the
trace's end plus one sample period within half a period; else a new trace begins.
"""

from __future__ import annotations

import functools

import numpy as np

from seisctf.catalogs.seed_ids import station_id
from seisctf.formats.obspy_archive.trace_header import TraceHeader

HEADER_BYTES = 64  # the fixed header (48 bytes), blockette 1000 (8) and room for 1001 (8)
MICROSECONDS = 1_000_000  # libmseed's HPTMODULUS: its times are integer microseconds
# Data encodings by obspy's sample type: records of two types never join one trace.
SAMPLE_TYPES = ({1, 3, 10, 11}, {4}, {5})  # integers (16/32-bit, STEIM1/2), float32, float64
QUALITY_CODES = b"DRQM"


@functools.cache
def _header_dtype(order: str) -> np.dtype:
    """The fixed header and the two blockette places after it (bytes 48 and 56: type, next
    blockette's offset, 4 bytes of content), in byte order `order` ('>' or '<')."""
    return np.dtype([
        ("sequence", "S6"), ("quality", "S1"), ("reserved", "S1"), ("station", "S5"),
        ("location", "S2"), ("channel", "S3"), ("network", "S2"), ("year", order + "u2"),
        ("day", order + "u2"), ("hour", "u1"), ("minute", "u1"), ("second", "u1"),
        ("unused", "u1"), ("fract", order + "u2"), ("samples", order + "u2"),
        ("factor", order + "i2"), ("multiplier", order + "i2"), ("activity", "u1"),
        ("io", "u1"), ("data_quality", "u1"), ("blockettes", "u1"),
        ("correction", order + "i4"), ("data_offset", order + "u2"),
        ("first_blockette", order + "u2"),
        ("type_48", order + "u2"), ("next_48", order + "u2"), ("content_48", "u1", (4,)),
        ("type_56", order + "u2"), ("next_56", order + "u2"), ("content_56", "u1", (4,)),
    ])  # fmt: skip


def _blockettes(headers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each record's blockette 1000 content (4 bytes: encoding, word order, record length
    exponent), its blockette 1001 microseconds (0 without one), whether its blockettes are
    1000 alone or 1000 and 1001 at bytes 48 and 56, in either order)."""
    alone = (headers["blockettes"] == 1) & (headers["type_48"] == 1000) & (headers["next_48"] == 0)
    pair = (headers["blockettes"] == 2) & (headers["next_48"] == 56) & (headers["next_56"] == 0)
    first_1000 = pair & (headers["type_48"] == 1000) & (headers["type_56"] == 1001)
    first_1001 = pair & (headers["type_48"] == 1001) & (headers["type_56"] == 1000)
    b1000 = np.where(first_1001[:, None], headers["content_56"], headers["content_48"])
    b1001 = np.where(first_1001[:, None], headers["content_48"], headers["content_56"])
    microseconds = np.where(first_1000 | first_1001, b1001[:, 1].view(np.int8), 0)
    return b1000, microseconds.astype(np.int64), alone | first_1000 | first_1001


def _is_big_endian(first: bytes) -> bool:
    """Whether the first record's year and day are valid read big-endian and not little-endian
    (as libmseed decides the byte order). Little-endian files are left to obspy: its reader
    parses their first record's time big-endian too and warns of the fractional seconds it then
    finds, a warning the scan reports as the file's problem."""
    valid = []
    for order in (">", "<"):
        year, day = np.frombuffer(first[20:24], dtype=order + "u2")
        valid.append(1900 <= year <= 2100 and 1 <= day <= 366)
    return valid == [True, False]


def _record_length(first: bytes, order: str) -> int | None:
    """The first record's length (bytes) from its blockette 1000, None without one."""
    header = np.frombuffer(first[:HEADER_BYTES], dtype=_header_dtype(order))
    b1000, _, known = _blockettes(header)
    exponent = int(b1000[0, 2])
    return 2**exponent if known[0] and 8 <= exponent <= 16 else None


def nominal_rate(factor: int, multiplier: int) -> float:
    """Samples a second from a record's rate factor and multiplier (libmseed's
    `ms_nomsamprate`, in the same double arithmetic)."""
    rate = 0.0
    if factor > 0:
        rate = float(factor)
    elif factor < 0:
        rate = -1.0 / float(factor)
    if multiplier > 0:
        rate = rate * float(multiplier)
    elif multiplier < 0:
        rate = -1.0 * (rate / float(multiplier))
    return rate


def _code(value: bytes) -> str | None:
    """A header code as libmseed cleans it (spaces removed), None unless printable ASCII with
    spaces only after it."""
    if any(byte < 32 or byte > 126 for byte in value):
        return None
    text = value.decode("ascii").rstrip(" ")
    return None if " " in text else text


def _is_plain(headers: np.ndarray, b1000: np.ndarray, known: np.ndarray, exponent: int) -> bool:
    """Every record has valid header fields, blockettes 1000 (content `b1000`) and at most 1001
    (`known`), and the same codes, record length, rate and sample type."""
    first = headers[0]
    sequence = np.frombuffer(headers["sequence"].tobytes(), np.uint8).reshape(-1, 6)
    quality = np.frombuffer(headers["quality"].tobytes(), np.uint8)
    encodings = set(np.unique(b1000[:, 0]).tolist())
    checks = [
        ((sequence >= ord("0")) & (sequence <= ord("9"))).all(),  # obspy: digits only
        np.logical_or.reduce([quality == code for code in QUALITY_CODES]).all(),
        (headers["reserved"] == b" ").all(),
        (headers["first_blockette"] == 48).all(),
        known.all(),
        (b1000[:, 2] == exponent).all(),
        (b1000[:, 1] == 1).all(),  # big-endian data words: obspy warns of any other
        (headers["data_offset"] >= 48 + 8 * headers["blockettes"].astype(int)).all(),  # past them
        (headers["data_offset"] <= 2**exponent).all(),
        (headers["hour"] <= 23).all(),
        (headers["minute"] <= 59).all(),
        (headers["second"] <= 59).all(),  # a leap second: obspy's reading
        (headers["fract"] <= 9999).all(),
        (headers["day"] >= 1).all(),
        (headers["day"] <= 365 + _leap(headers["year"])).all(),
        (headers["correction"] == 0).all(),
        (headers["samples"] > 0).all(),
        any(encodings <= kind for kind in SAMPLE_TYPES),
    ]
    for name in ("quality", "station", "location", "channel", "network", "factor", "multiplier"):
        checks.append((headers[name] == first[name]).all())
    return all(bool(check) for check in checks)


def _leap(year: np.ndarray) -> np.ndarray:
    year = year.astype(np.int64)
    return ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)


def _starts_us(headers: np.ndarray, microseconds: np.ndarray) -> np.ndarray:
    """Each record's first sample, integer microseconds since 1970 (libmseed's
    `ms_btime2hptime` and blockette 1001's `microseconds`)."""
    years = headers["year"].astype(np.int64) - 1970
    days = years.astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
    days += headers["day"].astype(np.int64) - 1
    seconds = (
        days * 86_400
        + headers["hour"].astype(np.int64) * 3_600
        + headers["minute"].astype(np.int64) * 60
        + headers["second"].astype(np.int64)
    )
    return seconds * MICROSECONDS + headers["fract"].astype(np.int64) * 100 + microseconds


def plain_traces(path: str, data: bytes) -> tuple[TraceHeader, ...] | None:
    """The traces of the plain miniSEED 2 file `path` whose bytes are `data`, as obspy's
    header-only read gives them; None if the file is not plain (module doc)."""
    if len(data) < HEADER_BYTES:
        return None
    order = ">"
    length = _record_length(data[:HEADER_BYTES], order) if _is_big_endian(data) else None
    if length is None or len(data) % length:
        return None
    headers = np.ndarray((len(data) // length,), _header_dtype(order), data, 0, (length,))
    b1000, microseconds, known = _blockettes(headers)
    if not _is_plain(headers, b1000, known, length.bit_length() - 1):
        return None
    first = headers[0]
    codes = [_code(first[name]) for name in ("network", "station", "location", "channel")]
    rate = nominal_rate(int(first["factor"]), int(first["multiplier"]))
    if any(code is None for code in codes) or not codes[1] or rate <= 0:
        return None
    network, station, location, channel = (str(code) for code in codes)
    starts = _starts_us(headers, microseconds)
    samples = headers["samples"].astype(np.int64)
    # libmseed's record end (`msr_endtime`) and obspy's join of a record to the trace before it.
    spans = (((samples - 1).astype(np.float64) / rate * MICROSECONDS) + 0.5).astype(np.int64)
    period = int(MICROSECONDS / rate)
    tolerance = int(0.5 * period)
    gaps = starts[1:] - (starts[:-1] + spans[:-1]) - period
    breaks = np.flatnonzero((gaps > tolerance) | (gaps < -tolerance)) + 1
    bounds = np.concatenate([[0], breaks, [len(headers)]])
    npts = np.add.reduceat(samples, bounds[:-1])
    station_code = station_id(network, station, location)
    return tuple(
        TraceHeader(path, station_code, channel, int(starts[begin]) * 1000, rate, int(count))
        for begin, count in zip(bounds[:-1].tolist(), npts.tolist(), strict=True)
    )
