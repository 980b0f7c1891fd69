"""Regions assembled from stored blocks equal numpy slicing, whatever the chunking."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from chunkings import chunk_sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf.blocks import Stored, assemble, named, pieces, restrict, subtract, tiles


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_region_from_stored_blocks_equals_numpy_slice(data):
    shape = (data.draw(st.integers(1, 30)), data.draw(st.integers(1, 20)))
    chunks = (chunk_sizes(data.draw, shape[0]), chunk_sizes(data.draw, shape[1]))
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 1.5 - 7
    other = np.cos(np.arange(np.prod(shape))).reshape(shape).astype(np.float32)
    r0 = data.draw(st.integers(0, shape[0] - 1))
    r1 = data.draw(st.integers(r0 + 1, shape[0]))
    c0 = data.draw(st.integers(0, shape[1] - 1))
    c1 = data.draw(st.integers(c0 + 1, shape[1]))

    found = pieces(chunks, (r0, r1), (c0, c1))
    covered = np.zeros((r1 - r0, c1 - c0), dtype=int)
    for piece in found:
        (t0, t1), (u0, u1) = piece.target
        covered[t0:t1, u0:u1] += 1
    assert (covered == 1).all()  # every element of the region exactly once

    minuend = Stored(da.from_array(values, chunks=chunks))
    subtrahend = Stored(da.from_array(other, chunks=chunks))

    def region(minuend_cover, subtrahend_cover):
        result = assemble((r1 - r0, c1 - c0), minuend_cover, np.float64)
        subtract(result, subtrahend_cover)
        return result

    lazy = named(
        region, "region", minuend.cover((r0, r1), (c0, c1)), subtrahend.cover((r0, r1), (c0, c1))
    )
    result = dask.compute(lazy, scheduler="synchronous")[0]
    expected = values[r0:r1, c0:c1].astype(np.float64) - other[r0:r1, c0:c1].astype(np.float64)
    assert result.dtype == np.float64 and result.flags.c_contiguous
    np.testing.assert_array_equal(result, expected)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_restricted_cover_assembles_its_sub_region(data):
    """restrict(cover of a region, sub-region) assembles what slicing the region gives."""
    shape = (data.draw(st.integers(1, 30)), data.draw(st.integers(1, 20)))
    chunks = (chunk_sizes(data.draw, shape[0]), chunk_sizes(data.draw, shape[1]))
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 1.5 - 7
    r0, c0 = data.draw(st.integers(0, shape[0] - 1)), data.draw(st.integers(0, shape[1] - 1))
    r1, c1 = data.draw(st.integers(r0 + 1, shape[0])), data.draw(st.integers(c0 + 1, shape[1]))
    blocks = da.from_array(values, chunks=chunks).to_delayed()
    found = pieces(chunks, (r0, r1), (c0, c1))
    cover = (found, [blocks[p.block].compute() for p in found])
    region = values[r0:r1, c0:c1]
    s0 = data.draw(st.integers(0, r1 - r0 - 1))
    s1 = data.draw(st.integers(s0 + 1, r1 - r0))
    t0 = data.draw(st.integers(0, c1 - c0 - 1))
    t1 = data.draw(st.integers(t0 + 1, c1 - c0))

    sub_cover = restrict(cover, (s0, s1), (t0, t1))
    assert len(sub_cover[0]) == len(sub_cover[1]) <= len(found)
    sub_region = assemble((s1 - s0, t1 - t0), sub_cover, np.float64)
    np.testing.assert_array_equal(sub_region, region[s0:s1, t0:t1])


def test_assemble_keeps_the_stored_dtype_and_whole_rows_by_default():
    values = np.arange(35, dtype=">i2").reshape(5, 7)
    stored = Stored(da.from_array(values, chunks=(2, 3)))
    cover = dask.compute(stored.cover((1, 4)), scheduler="synchronous")[0]
    result = assemble((3, 7), cover, values.dtype)
    assert result.dtype == values.dtype
    np.testing.assert_array_equal(result, values[1:4])


def test_tiles_cover_the_shape_once_in_row_major_order():
    found = tiles((5, 7), (2, 3))
    assert found[:2] == [((0, 2), (0, 3)), ((0, 2), (3, 6))]
    covered = np.zeros((5, 7), dtype=int)
    for (r0, r1), (c0, c1) in found:
        covered[r0:r1, c0:c1] += 1
    assert (covered == 1).all() and len(found) == 3 * 3


def test_named_tasks_have_legible_deterministic_keys():
    first, second = named(np.add, "add", 1, 2), named(np.add, "add", 1, 2)
    assert first.key == second.key and first.key.startswith("add-")
    assert dask.compute(first)[0] == 3
