"""The stores' ISO 8601 times (`resumable.iso_time`) against obspy's UTCDateTime."""

from hypothesis import given, settings
from hypothesis import strategies as st
from obspy import UTCDateTime

from seisctf.formats.shared.resumable import iso_time

NS_PER_S = 10**9


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_iso_time_reads_back_as_the_same_nanosecond_in_obspy(ns):
    text = iso_time(ns)
    assert text.endswith("Z")
    whole, _, fraction = text[:-1].partition(".")
    assert whole == UTCDateTime(ns=ns - ns % NS_PER_S).strftime("%Y-%m-%dT%H:%M:%S")
    assert fraction == f"{ns % NS_PER_S:09d}".rstrip("0")  # only the digits needed
    # obspy parses text to microseconds only: the whole seconds by obspy, the digits by hand
    assert UTCDateTime(whole + "Z").ns + int(fraction.ljust(9, "0") or 0) == ns


def test_iso_time_of_a_whole_second_has_no_fraction():
    assert iso_time(1514764800 * NS_PER_S) == "2018-01-01T00:00:00Z"
    assert iso_time(1514764800 * NS_PER_S + 19_500_000) == "2018-01-01T00:00:00.0195Z"
