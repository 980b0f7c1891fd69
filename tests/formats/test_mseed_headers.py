"""`formats.obspy_archive.mseed_headers`: the scan's miniSEED header read without obspy's
`Trace` objects gives the scan obspy's own header-only read gives (`scan_file(lean=False)`), and
its segments are the traces `obspy.read(headonly=True)` makes: on every file obspy ships for its
tests (its bizarre and damaged miniSEED files included), and on generated files of any rate,
record length, encoding and byte order, with gaps, overlaps, several channels, records out of
order, cut short or with a flipped byte."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import obspy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf.formats.obspy_archive.mseed_headers import read_segments
from seisctf.formats.obspy_archive.waveform_files import is_mseed, scan_file

OBSPY_TEST_FILES = sorted(
    path
    for path in Path(obspy.__file__).parent.glob("**/tests/data/**/*")
    if path.is_file() and path.stat().st_size < 20_000_000
)
ENCODINGS = {"STEIM1": np.int32, "STEIM2": np.int32, "INT32": np.int32, "FLOAT32": np.float32,
             "FLOAT64": np.float64, "INT16": np.int16}  # fmt: skip


def both_scans(name: str, raw: bytes) -> tuple[str, str]:
    """repr of the scan by `mseed_headers` (where it answers) and by obspy's traces (repr: a
    NaN elevation compares unequal to itself)."""
    return repr(scan_file(name, raw)), repr(scan_file(name, raw, lean=False))


def obspy_segments(raw: bytes) -> list[tuple]:
    """What obspy's header-only miniSEED read (the reader `obspy.read` calls for the format)
    says of each trace, as `HeaderSegment` holds it."""
    from obspy.io.mseed.core import _read_mseed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stream = _read_mseed(io.BytesIO(raw), headonly=True)
    return [
        (tr.stats.network, tr.stats.station, tr.stats.location, tr.stats.channel,
         tr.stats.starttime.ns, tr.stats.sampling_rate, tr.stats.npts,
         tr.stats.mseed.number_of_records * tr.stats.mseed.record_length)
        for tr in stream
    ]  # fmt: skip


def lean_segments(raw: bytes) -> list[tuple] | None:
    found = read_segments(raw)
    if found is None:
        return None
    return [
        (s.network, s.station, s.location, s.channel, s.start_ns, s.sampling_rate, s.npts,
         s.record_bytes)
        for s in found
    ]  # fmt: skip


def test_every_file_obspy_ships_scans_as_obspys_read_scans_it():
    answered, left = 0, 0
    for path in OBSPY_TEST_FILES:
        raw = path.read_bytes()
        lean, through_obspy = both_scans(str(path), raw)
        assert lean == through_obspy, path
        if raw and is_mseed(raw):
            segments = lean_segments(raw)
            if segments is None:
                left += 1
            else:
                answered += 1
                assert segments == obspy_segments(raw), path
    # Most miniSEED files are read without obspy's traces; its bizarre ones are left to it.
    assert answered >= 80 and left >= 5, (answered, left)


@st.composite
def mseed_files(draw) -> bytes:
    """A miniSEED file obspy writes: 1-3 channels of 1-3 traces each (gaps, overlaps, back to
    back), any of 8 rates, record lengths 256-4096, six encodings, either byte order; then its
    records possibly reordered, the file cut short or a byte of it flipped."""
    rate = draw(st.sampled_from([0.1, 1.0, 3.0, 7.0, 20.0, 40.0, 100.0, 200.0]))
    encoding = draw(st.sampled_from(sorted(ENCODINGS)))
    record_length = draw(st.sampled_from([256, 512, 1024, 4096]))
    traces = []
    for channel in draw(st.lists(st.sampled_from(["HHZ", "HHN", "BHE"]), min_size=1,
                                 max_size=3, unique=True)):  # fmt: skip
        start = obspy.UTCDateTime(2024, 1, 1) + draw(st.integers(0, 10**6)) / 1000
        for _ in range(draw(st.integers(1, 3))):
            npts = draw(st.integers(1, 3000))
            values = np.arange(npts) * draw(st.integers(1, 9)) % 2000 - 1000
            trace = obspy.Trace(values.astype(ENCODINGS[encoding]))
            trace.stats.update(dict(network="XA", station=draw(st.sampled_from(["S1", "LONG5"])),
                                    location=draw(st.sampled_from(["", "00"])), channel=channel,
                                    sampling_rate=rate, starttime=start))  # fmt: skip
            traces.append(trace)
            step = draw(st.sampled_from([npts, npts, npts + 5, npts - 3, npts // 2]))
            start = start + step / rate
    buffer = io.BytesIO()
    obspy.Stream(traces).write(buffer, format="MSEED", encoding=encoding, reclen=record_length,
                               byteorder=draw(st.sampled_from([">", "<"])))  # fmt: skip
    raw = bytearray(buffer.getvalue())
    records = [raw[i : i + record_length] for i in range(0, len(raw), record_length)]
    change = draw(st.sampled_from(["none", "none", "reorder", "cut", "flip"]))
    if change == "reorder" and len(records) > 1:
        order = draw(st.permutations(range(len(records))))
        raw = bytearray(b"".join(records[i] for i in order))
    elif change == "cut":
        raw = raw[: draw(st.integers(1, len(raw) - 1))]
    elif change == "flip":
        at = draw(st.integers(0, len(raw) - 1))
        raw[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mseed_files())
def test_generated_files_scan_as_obspys_read_scans_them(raw):
    lean, through_obspy = both_scans("generated.mseed", raw)
    assert lean == through_obspy
    segments = lean_segments(raw) if is_mseed(raw) else None
    if segments is not None:
        assert segments == obspy_segments(raw)


@pytest.mark.parametrize("rate", [0.1, 100.0])
def test_a_plain_day_file_is_read_without_obspys_traces(rate):
    """The common file (one channel, in order, whole) is one obspy reads the same: a guard
    that the lean read is used at all."""
    npts = int(86_400 * rate)
    trace = obspy.Trace((np.arange(npts) % 1000).astype(np.int32))
    start = obspy.UTCDateTime(2024, 3, 1)
    trace.stats.update(dict(network="XA", station="S0001", location="00", channel="HHZ",
                            sampling_rate=rate, starttime=start))  # fmt: skip
    buffer = io.BytesIO()
    trace.write(buffer, format="MSEED", encoding="STEIM2", reclen=4096)
    raw = buffer.getvalue()
    assert lean_segments(raw) == obspy_segments(raw)
    (segment,) = read_segments(raw) or []
    assert (segment.start_ns, segment.npts, segment.record_bytes) == (start.ns, npts, len(raw))


@pytest.mark.parametrize("encoding", [19, 2])
def test_a_later_trace_in_an_encoding_obspy_cannot_name_is_left_to_obspy(encoding):
    """obspy fails on a file whose second trace starts with a record in an encoding it does not
    map (the first record's checks pass): the lean read leaves it to obspy, which says so."""
    first = obspy.Trace(np.arange(300, dtype=np.int32))
    first.stats.sampling_rate = 100.0
    second = first.copy()
    second.stats.starttime += 100  # a gap: the second record starts a trace of its own
    buffer = io.BytesIO()
    obspy.Stream([first, second]).write(buffer, format="MSEED", encoding="STEIM2", reclen=512)
    raw = bytearray(buffer.getvalue())
    raw[512 + 52] = encoding  # the second record's blockette 1000 encoding (it starts at 48)
    assert read_segments(bytes(raw)) is None
    lean, through_obspy = both_scans("two.mseed", bytes(raw))
    assert lean == through_obspy
    assert "unreadable" in lean
