"""The miniSEED record-header reader (`mseed_records.plain_traces`) against obspy's header-only
read of the same bytes: any rate, start (to the microsecond), record length, encoding and
trace split (gaps, overlaps, joins within half a sample) that obspy writes big-endian gives
obspy's traces exactly, where obspy finds no problem; files it does not call plain (several
channels, little-endian, a cut or damaged record) are left to obspy (None), and `scan_file`
gives obspy's answer either way."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import obspy
from hypothesis import given, settings
from hypothesis import strategies as st
from obspy import Stream, Trace, UTCDateTime

from seisctf.catalogs.seed_ids import stats_station_id
from seisctf.formats.obspy_archive.mseed_records import nominal_rate, plain_traces
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.obspy_archive.waveform_files import obspy_scan, scan_file

RATES = [0.05, 0.1, 1.0, 3.0, 20.0, 40.0, 50.0, 100.0, 200.0, 250.0, 1000.0]
ENCODINGS = {"STEIM1": np.int32, "STEIM2": np.int32, "INT32": np.int32, "INT16": np.int16,
             "FLOAT32": np.float32, "FLOAT64": np.float64}  # fmt: skip


def obspy_traces(path: str, data: bytes) -> tuple[TraceHeader, ...]:
    """What obspy's header-only read of `data` says, as the scan keeps it (`obspy_scan`, the
    scan's reading of any file that is not plain); it finds no problem in a plain file."""
    scanned = obspy_scan(path, data)
    assert scanned.problems == () and scanned.readable
    stream = obspy.read(io.BytesIO(data), headonly=True)  # and obspy.read says the same
    assert scanned.headers == tuple(
        TraceHeader(path, stats_station_id(tr.stats), tr.stats.channel,
                    int(tr.stats.starttime.ns), float(tr.stats.sampling_rate), int(tr.stats.npts))
        for tr in stream if tr.stats.npts > 0 and tr.stats.sampling_rate > 0
    )  # fmt: skip
    return scanned.headers


def miniseed(traces: list[Trace], encoding: str, reclen: int, byteorder: str) -> bytes:
    out = io.BytesIO()
    Stream(traces).write(out, format="MSEED", encoding=encoding, reclen=reclen,
                         byteorder=byteorder)  # fmt: skip
    return out.getvalue()


def trace(start: UTCDateTime, npts: int, rate: float, dtype, channel: str = "HHZ") -> Trace:
    values = np.random.default_rng(npts).integers(-2000, 2000, npts).astype(dtype)
    header = {"network": "XX", "station": "ABC", "location": "00", "channel": channel,
              "sampling_rate": rate, "starttime": start}  # fmt: skip
    return Trace(values, header=header)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.sampled_from(RATES),
    encoding=st.sampled_from(sorted(ENCODINGS)),
    reclen=st.sampled_from([256, 512, 4096]),
    start_us=st.integers(0, 400 * 86_400 * 10**6),
    npts=st.lists(st.integers(1, 3_000), min_size=1, max_size=3),
    shifts=st.lists(st.sampled_from([0.0, 0.3, -0.3, 0.6, -0.6, 1.0, 5.0, -5.0]), max_size=2),
)
def test_any_file_obspy_writes_gives_obspys_traces(rate, encoding, reclen, start_us, npts, shifts):
    start = UTCDateTime(2023, 1, 1) + start_us / 1e6
    traces = []
    for index, count in enumerate(npts):
        traces.append(trace(start, count, rate, ENCODINGS[encoding]))
        # The next trace: right after this one, or off by a fraction or a few samples.
        shift = shifts[index] if index < len(shifts) else 0.0
        start = start + (count + shift) / rate
    data = miniseed(traces, encoding, reclen, ">")
    found = plain_traces("f.mseed", data)
    assert found is not None  # what obspy writes is plain
    assert found == obspy_traces("f.mseed", data)


def test_a_day_file_is_read_plain_and_the_scan_agrees():
    data = miniseed([trace(UTCDateTime(2024, 2, 29, 0, 0, 0, 5), 86_400, 1.0, np.int32)],
                    "STEIM2", 512, ">")  # fmt: skip
    assert plain_traces("day", data) == obspy_traces("day", data) == scan_file("day", data).headers


def test_files_that_are_not_plain_are_left_to_obspy():
    one = trace(UTCDateTime(2024, 1, 1), 5_000, 40.0, np.int32)
    other = trace(UTCDateTime(2024, 1, 1), 5_000, 40.0, np.int32, channel="HHN")
    two_channels = miniseed([one, other], "STEIM2", 512, ">")
    plain = miniseed([one], "STEIM2", 512, ">")
    little_endian = miniseed([one], "STEIM2", 512, "<")
    cut = plain[:-100]  # the last record cut short
    unknown_quality = bytearray(plain)
    unknown_quality[512 + 6] = ord("X")  # the second record's quality indicator
    for data in (two_channels, cut, little_endian, bytes(unknown_quality), b"", plain[:40]):
        assert plain_traces("f", data) is None
    for data in (two_channels, cut, little_endian):  # the scan reads them with obspy
        assert scan_file("f", data) == obspy_scan("f", data)


def test_every_file_obspy_ships_read_plain_is_as_obspy_reads_it():
    """obspy's own miniSEED test files (real recorders' and damaged ones): each one read plain
    gives obspy's traces and obspy finds no problem in it; the damaged ones are not plain."""
    folder = Path(obspy.__file__).parent / "io" / "mseed" / "tests" / "data"
    plain = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found = plain_traces(str(path), data)
        if found is not None:
            plain += 1
            assert found == obspy_traces(str(path), data), path.name
    assert plain >= 10  # real files are read plain, not only the ones written here


def test_nominal_rate_is_libmseeds_arithmetic():
    # SEED's rules: factor > 0 samples a second, < 0 seconds a sample; the multiplier likewise.
    assert nominal_rate(40, 1) == 40.0
    assert nominal_rate(-10, 1) == 0.1
    assert nominal_rate(1, -3) == 1.0 / 3.0
    assert nominal_rate(-2, -5) == 0.1
    assert nominal_rate(0, 1) == 0.0
