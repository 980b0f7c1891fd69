"""`formats.obspy_archive.trace_merge` held to obspy's own `Stream.merge(method=1,
interpolation_samples=0)` of the same traces: gaps, overlaps with equal and with other values,
traces inside others, empty ones, int32 and float32; and the merge copies no sample."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from obspy_merge import obspy_merged

from seisctf.formats.obspy_archive.trace_merge import merged_channel


@st.composite
def _pieces(draw) -> list[tuple[int, np.ndarray]]:
    """One channel's traces: back to back, with gaps, overlaps and traces inside others, whose
    values agree with the others where they meet or (`shift`) do not, empty ones too; one
    dtype, in any order."""
    dtype = draw(st.sampled_from([np.int32, np.float32]))
    pieces, first = [], draw(st.integers(-50, 100))
    for _ in range(draw(st.integers(1, 7))):
        length = draw(st.integers(0, 40))
        shift = draw(st.sampled_from([0, 0, 0, 1, 1000]))
        values = (np.arange(first, first + length) * 7 % 1000 - 500 + shift).astype(dtype)
        pieces.append((first, values))
        first += draw(st.sampled_from([length, length, length + 3, length - 2, -length, 1, -5]))
    return draw(st.permutations(pieces))


def laid_out(merged: list[tuple[int, np.ndarray]], first: int, length: int) -> np.ndarray:
    """The merged pieces on grid indices first…first+length-1, float64, NaN where none is;
    checks that they are in order and none overlaps the one before."""
    values = np.full(length, np.nan)
    reach = first
    for start, samples in merged:
        assert start >= reach and len(samples)
        values[start - first : start - first + len(samples)] = samples
        reach = start + len(samples)
    return values


@settings(max_examples=500, deadline=None)
@given(_pieces(), st.sampled_from([10.0, 100.0, 0.1, 40.0, 3.0, 7.0]))
def test_a_channel_merges_as_obspy_merges_it(pieces, rate):
    """The pieces laid on the grid are obspy's merged trace, NaN where obspy masks, from its
    first sample to its last; each is a view of a given trace. Also at rates whose sample
    interval is no whole number of nanoseconds (3 and 7 Hz)."""
    merged, expected = merged_channel(pieces), obspy_merged(pieces, rate)
    if expected is None:
        assert merged == []
        return
    first, samples = expected
    assert merged[0][0] == first
    assert merged[-1][0] + len(merged[-1][1]) == first + len(samples)
    np.testing.assert_array_equal(laid_out(merged, first, len(samples)), samples.astype(float))
    for _, part in merged:
        assert any(np.shares_memory(part, given) for _, given in pieces)


def test_a_trace_inside_another_wins_its_overlap_once_joined_to_the_one_after_it():
    """A trace inside another that disagrees changes nothing, as obspy's fold keeps what is
    merged; but one followed back to back by a third is joined to it first (obspy's clean-up
    pass) and, now ending later, wins its overlap."""
    first, inside = np.arange(0, 10, dtype=np.int32), np.arange(100, 104, dtype=np.int32)
    after = np.arange(10, 14, dtype=np.int32)
    alone, joined = [(0, first), (6, inside)], [(10, after), (6, inside), (0, first)]
    np.testing.assert_array_equal(laid_out(merged_channel(alone), 0, 10), np.arange(10))
    np.testing.assert_array_equal(
        laid_out(merged_channel(joined), 0, 14),
        [0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 10, 11, 12, 13],
    )
    for pieces in (alone, joined):
        expected = obspy_merged(pieces)
        assert expected is not None
        found = laid_out(merged_channel(pieces), expected[0], len(expected[1]))
        np.testing.assert_array_equal(found, expected[1])
