"""One waveform file: its bytes -> obspy's traces and what is wrong with the file.

- Compressed files: obspy decompresses gzip and bzip2 only when the file name ends in `.gz` or
  `.bz2`, and the ingest hands obspy bytes, not names: `decompressed` recognises both by their
  magic bytes (a file `obspy.read` opens, the ingest reads too); zip and tar obspy recognises by
  content itself. A file that decompresses to more than `MAX_DECOMPRESSED_BYTES` is refused.
- `scan_file` reads headers only (`headonly=True`) and, for miniSEED, walks the record headers
  to find a truncated last record (obspy drops it without a word); SAC header coordinates
  (`stla`, `stlo`, `stel`) come with the headers.
- Warnings of the readers (libmseed's diagnostics, header faults) are problems of the file
  (`read_warnings`), not lines on a worker's stderr.
"""

from __future__ import annotations

import bz2
import gzip
import io
import math
import re
import struct
import tarfile
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.catalogs.seed_ids import station_id
from seisctf.formats.obspy_archive.mseed_headers import HeaderSegment, read_segments
from seisctf.formats.obspy_archive.read_warnings import collected_warnings, warning_problems
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.shared.input_listing import read_input
from seisctf.location import StoreLocation

# A compressed file that would hold more than this is refused (a compression bomb would take a
# worker's memory): 2 GiB, 8 days of three 100 Hz channels of float32.
MAX_DECOMPRESSED_BYTES = 2**31
_GZIP_MAGIC, _BZIP2_MAGIC = b"\x1f\x8b", b"BZh"
# obspy's miniSEED reader hands libmseed its logging callbacks through a process-wide setting
# for each call: two threads reading at once (a Dask worker with several threads) can leave
# libmseed calling a callback already freed, and the process dies of a segmentation fault on
# damaged files (seen 3 times in 6 runs of 4 threads over obspy's damaged test files).
_OBSPY_READS = threading.Lock()


@dataclass(frozen=True, slots=True)
class FileScan:
    """What the header scan of one file found: its traces, its problems (text), and the
    station coordinates its headers give ((station, latitude, longitude (degrees), elevation
    (m, NaN if absent)), one per station and position)."""

    path: str
    headers: tuple[TraceHeader, ...] = ()
    problems: tuple[str, ...] = ()
    readable: bool = True
    coordinates: tuple[tuple[str, float, float, float], ...] = ()


def decompressed(raw: bytes) -> bytes:
    """The bytes of a gzip or bzip2 file decompressed (every member/stream), any other bytes
    as they are. Raises ValueError for a damaged or oversized compressed file."""
    opened: io.BufferedIOBase
    if raw.startswith(_GZIP_MAGIC):
        kind, opened = "gzip", gzip.GzipFile(fileobj=io.BytesIO(raw))
    elif raw.startswith(_BZIP2_MAGIC):
        kind, opened = "bzip2", bz2.BZ2File(io.BytesIO(raw))
    else:
        return raw
    try:
        with opened:
            data = opened.read(MAX_DECOMPRESSED_BYTES + 1)
    except (OSError, EOFError, ValueError) as error:
        raise ValueError(f"a damaged {kind} file: {error}") from None
    if len(data) > MAX_DECOMPRESSED_BYTES:
        raise ValueError(f"a {kind} file holding more than {MAX_DECOMPRESSED_BYTES} bytes")
    return data


def read_stream(data: bytes, headonly: bool = False) -> Any:
    """`obspy.read` of a file's (decompressed) bytes. Plain miniSEED goes straight to obspy's
    miniSEED reader (`obspy.io.mseed.core._read_mseed`, what `obspy.read` calls for it): the
    same traces without the plugin look-up through package metadata, 2-3 ms a call, a quarter
    of a 20 Hz day file's decoding. Other formats are recognised as `obspy.read` does
    (`waveform_format`), then read by `obspy.read` with that format; zip and tar by
    `obspy.read` itself. One read at a time per process (`_OBSPY_READS`).
    The miniSEED reader is given the bytes as a read-only int8 array, which it decodes as they
    are: from a file object it copies them twice first (three times the file in memory; a
    100 Hz day file decoded in 25 ms instead of 80, its headers in 1 ms instead of 5). libmseed
    does not write into its buffer (tests/formats/test_waveform_reading.py checks the bytes)."""
    import obspy
    from obspy.io.mseed.core import _read_mseed

    with _OBSPY_READS:
        if is_mseed(data):
            return _read_mseed(np.frombuffer(data, dtype=np.int8), headonly=headonly)
        if tarfile.is_tarfile(io.BytesIO(data)) or zipfile.is_zipfile(io.BytesIO(data)):
            return obspy.read(io.BytesIO(data), headonly=headonly)  # obspy unpacks them
        with tempfile.NamedTemporaryFile(prefix="obspy-", suffix=".tmp") as file:
            file.write(data)
            file.flush()
            name = waveform_format(file.name)
            if name is None:  # obspy.read's words, as `obspy_error` expects them
                raise TypeError(f"Unknown format for file {file.name}")
            return obspy.read(file.name, format=name, headonly=headonly)


def is_mseed(data: bytes) -> bool:
    """obspy's `_is_mseed` of a file's bytes, without the copy of them it makes of a BytesIO
    (`getbuffer`, for its size): a buffered reader over them has none."""
    from obspy.io.mseed.core import _is_mseed

    return bool(_is_mseed(io.BufferedReader(io.BytesIO(data))))


_IS_FORMAT: dict[str, Any] = {}


def waveform_format(path: str) -> str | None:
    """The first of obspy's waveform formats, in the order `obspy.read` tries them, whose
    `isFormat` recognises the file at `path`; None if none does. Each `isFormat` is loaded
    once: `obspy.read` looks every format's package up again on each call (its metadata
    parsed ~30 times, 66 ms for a file that is not miniSEED, half of a scan of the benchmark
    archive, whose damaged files are 2 % of it)."""
    from obspy.core.util.base import ENTRY_POINTS
    from obspy.core.util.misc import buffered_load_entry_point

    for name, entry_point in ENTRY_POINTS["waveform"].items():
        if name not in _IS_FORMAT:
            group = f"obspy.plugin.waveform.{name}"
            _IS_FORMAT[name] = buffered_load_entry_point(entry_point.dist.name, group, "isFormat")
        if _IS_FORMAT[name](path):
            return name
    return None


def read_file(path: str, raw: bytes, headonly: bool = False) -> tuple[Any, bytes, list]:
    """(obspy stream, decompressed bytes, warnings caught [(category, message)]) of the file
    `path` whose bytes are `raw`. Raises what obspy raises for a file it cannot read."""
    with collected_warnings() as caught:
        try:
            data = decompressed(raw)
        except ValueError as damaged:
            try:  # two magic bytes by chance (a SAC header's first float): the file as it is
                return read_stream(raw, headonly=headonly), raw, caught
            except Exception:  # noqa: BLE001 - not that either: the compressed file's fault
                raise damaged from None
        stream = read_stream(data, headonly=headonly)
    return stream, data, [warning for warning in caught if not _misread_fraction(warning, data)]


# obspy parses a little-endian miniSEED file's first record time big-endian first and warns of
# the fractional seconds it finds there before it tries little-endian (`_get_record_information`
# in obspy/io/mseed/util.py): said of a sound file, such a warning is no problem of it.
_FRACTION_WARNING = re.compile(r"^Record contains a fractional seconds \(\.0001 secs\) of (\d+)")


def _misread_fraction(warning: tuple[type, str], data: bytes) -> bool:
    """Whether `warning` is obspy's of a little-endian first record's fractional seconds read
    big-endian, the record's own being valid (at most 9999 ten-thousandths)."""
    found = _FRACTION_WARNING.match(warning[1])
    if found is None or len(data) < 48:
        return False
    # libmseed's test of a byte order: the first record's year and day valid when read in it
    big, little = (_valid_year_day(*struct.unpack(order + "HH", data[20:24])) for order in "><")
    (misread,), (fraction,) = (struct.unpack(order + "H", data[28:30]) for order in "><")
    return little and not big and fraction <= 9999 and int(found.group(1)) == misread


def _valid_year_day(year: int, day: int) -> bool:
    return 1900 <= year <= 2100 and 1 <= day <= 366


def mseed_truncation(raw: bytes) -> str | None:
    """Walk a miniSEED file's record headers: a problem text if its last record is cut short
    (or a record header is unreadable), else None."""
    from obspy.io.mseed.util import get_record_information

    size = len(raw)
    offset = 0
    handle = io.BytesIO(raw)
    while offset < size:
        try:
            length = int(get_record_information(handle, offset)["record_length"])
        except Exception as error:  # noqa: BLE001 - any failure is a damaged record
            return f"truncated or damaged record at byte {offset} of {size} ({error})"
        if length <= 0 or offset + length > size:
            return (
                f"truncated: the record at byte {offset} needs {length} bytes, "
                f"only {size - offset} remain (its samples are not ingested)"
            )
        offset += length
    return None


def _records_fill(segments: list[HeaderSegment], size: int) -> bool:
    """Whether the records libmseed decoded (count × length per trace) make up the whole file:
    then no record is cut short, and the slow record-by-record walk is not needed."""
    held = [segment.record_bytes for segment in segments]
    return None not in held and sum(held) == size  # type: ignore[arg-type]


def _segment(trace: Any) -> HeaderSegment:
    """What the scan keeps of an obspy trace read headers only."""
    stats = trace.stats
    try:
        record_bytes = int(stats.mseed.number_of_records) * int(stats.mseed.record_length)
    except (AttributeError, KeyError, TypeError, ValueError):
        record_bytes = None
    return HeaderSegment(
        stats.network, stats.station, stats.location, stats.channel, int(stats.starttime.ns),
        float(stats.sampling_rate), int(stats.npts), record_bytes, header_coordinates(stats),
    )  # fmt: skip


def read_header_segments(
    path: str, raw: bytes, lean: bool = True
) -> tuple[list[HeaderSegment], bytes, list, bool]:
    """(the file's traces read headers only, its decompressed bytes, the warnings caught,
    whether it is miniSEED) of the file `path` whose bytes are `raw`: plain miniSEED by
    `mseed_headers.read_segments` (`lean`) where it answers, else by obspy (`read_file`). Raises
    what obspy raises for a file it cannot read."""
    plain = not raw.startswith((_GZIP_MAGIC, _BZIP2_MAGIC))
    mseed = plain and is_mseed(raw)  # a plain file's bytes are the ones obspy reads
    if lean and mseed:
        with _OBSPY_READS:
            segments = read_segments(raw)
        if segments is not None:
            return segments, raw, [], True
    stream, data, caught = read_file(path, raw, headonly=True)
    return [_segment(trace) for trace in stream], data, caught, mseed if plain else is_mseed(data)


# obspy reads bytes through a temporary file (`/tmp/obspy-otzphda0.tmp`) and names it in errors.
_OBSPY_TEMPORARY = re.compile(r"\S*obspy-[^\s/]*\.tmp")
_UNKNOWN_FORMAT = re.compile(r"^Unknown format for file \S+$")
# obspy's InternalMSEEDError: this line, then libmseed's messages one a line.
_LIBMSEED_ERRORS = re.compile(r"^Encountered \d+ error\(s\) during a call to (\S+):$")


def obspy_error(error: Exception, path: str) -> str:
    """An obspy error about the bytes of `path` in one line, naming `path` (not obspy's
    temporary file): its first line, or libmseed's own messages after obspy's "Encountered N
    error(s) during a call to readMSEEDBuffer():"; "Unknown format …" says what it means."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    message = lines[0] if lines else type(error).__name__
    called = _LIBMSEED_ERRORS.match(message)
    if called and len(lines) > 1:
        message = f"{called.group(1)}: " + "; ".join(lines[1:])
    if _UNKNOWN_FORMAT.match(message):
        return "no obspy reader knows its format (miniSEED, SAC, GSE2, SEG-Y, …)"
    return _OBSPY_TEMPORARY.sub(path, message)


def header_coordinates(stats: Any) -> tuple[float, float, float] | None:
    """(latitude, longitude (degrees), elevation (m, NaN if absent)) from a SAC header's
    `stla`, `stlo`, `stel` (obspy leaves out SAC's undefined -12345); None without them.
    SAC holds them as float32: each is the shortest decimal that float32 reads back (33.61216,
    not 33.612159729003906)."""
    sac = stats.get("sac") or {}
    if "stla" not in sac or "stlo" not in sac:
        return None
    latitude, longitude, elevation = (
        float(str(np.float32(value)))
        for value in (sac["stla"], sac["stlo"], sac.get("stel", math.nan))
    )
    return latitude, longitude, elevation


def _on_earth(latitude: float, longitude: float) -> bool:
    return abs(latitude) <= 90 and -180 <= longitude <= 360


def scan_file(path: str, raw: bytes | None = None, lean: bool = True) -> FileScan:
    """Read one file's headers (any format obspy reads, gzip or bzip2 compressed too) from its
    bytes `raw` (read from `path` if not given); never raises for bad content. `lean=False`:
    every file through obspy's traces (`read_header_segments`; the same scan)."""
    if raw is None:
        raw = read_input(StoreLocation(path))
    try:
        segments, data, caught, mseed = read_header_segments(path, raw, lean)
    except Exception as error:  # noqa: BLE001 - obspy raises many types for bad files
        message = "an empty file (0 bytes)" if not raw else obspy_error(error, path)
        return FileScan(path, problems=(f"{path}: unreadable ({message})",), readable=False)
    problems = []
    truncation = None
    if mseed and not _records_fill(segments, len(data)):
        truncation = mseed_truncation(data)
        if truncation:
            problems.append(f"{path}: {truncation}")
    problems += warning_problems(path, caught, truncated=truncation is not None)
    kept = [segment for segment in segments if segment.npts > 0 and segment.sampling_rate > 0]
    headers = tuple(
        TraceHeader(
            path,
            station_id(segment.network, segment.station, segment.location),
            segment.channel,
            segment.start_ns,
            segment.sampling_rate,
            segment.npts,
        )
        for segment in kept
    )
    if not headers:
        problems.append(f"{path}: holds no samples")
    coordinates: dict[str, tuple] = {}  # by their text: NaN elevations compare equal
    for segment, header in zip(kept, headers, strict=True):
        found = segment.coordinates
        if found is not None and not _on_earth(*found[:2]):
            problems.append(
                f"{path}: {segment.id}: SAC header coordinates stla={found[0]:g}, "
                f"stlo={found[1]:g} are no position on Earth; not used"
            )
        elif found is not None:
            coordinates.setdefault(repr((header.station, *found)), (header.station, *found))
    return FileScan(
        path, headers, tuple(dict.fromkeys(problems)), True, tuple(coordinates.values())
    )
