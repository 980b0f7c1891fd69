"""Counter-based noise: independent of chunking, standard normal, keyed by seed."""

from __future__ import annotations

import dask.array as da
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from seisctf.pipeline.noise import gaussian_noise, standard_normal, standard_normal_at


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 97), cols=st.integers(1, 53))
def test_noise_is_identical_for_any_chunking(rows, cols):
    whole = gaussian_noise(42, (97, 53), (97, 53)).compute()
    chunked = gaussian_noise(42, (97, 53), (rows, cols)).compute()
    assert np.array_equal(whole, chunked)


def test_noise_is_standard_normal_and_keyed():
    sample = standard_normal_at(7, np.arange(200_000))
    assert abs(sample.mean()) < 0.01
    assert abs(sample.std() - 1.0) < 0.01
    assert stats.kstest(sample, "norm").pvalue > 1e-3
    other = standard_normal_at(8, np.arange(200_000))
    assert abs(np.corrcoef(sample, other)[0, 1]) < 0.01
    # Neighbouring positions are uncorrelated too.
    assert abs(np.corrcoef(sample[:-1], sample[1:])[0, 1]) < 0.01


def test_noise_value_depends_only_on_global_position():
    block = gaussian_noise(3, (10, 20), (4, 6)).compute()
    assert block[7, 13] == standard_normal_at(3, np.array([7 * 20 + 13]))[0]


def _original_noise_block(key: int, n_columns: int, block_info: dict | None = None) -> np.ndarray:
    """`gaussian_noise`'s block function before `standard_normal` generalised it (bundles built
    then must stay reproducible)."""
    (row_start, row_stop), (col_start, col_stop) = block_info[None]["array-location"]
    rows = np.arange(row_start, row_stop, dtype=np.uint64)[:, None]
    cols = np.arange(col_start, col_stop, dtype=np.uint64)[None, :]
    return standard_normal_at(key, rows * np.uint64(n_columns) + cols)


@settings(max_examples=15, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    chunks=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    key=st.integers(0, 2**64 - 1),
)
def test_gaussian_noise_and_standard_normal_keep_the_original_2d_values(shape, chunks, key):
    original = da.map_blocks(
        _original_noise_block,
        key,
        shape[1],
        chunks=da.core.normalize_chunks(shape, shape),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    ).compute()
    np.testing.assert_array_equal(gaussian_noise(key, shape, chunks).compute(), original)
    np.testing.assert_array_equal(standard_normal(key, shape, chunks).compute(), original)
