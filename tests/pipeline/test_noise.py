"""Counter-based noise: independent of chunking, standard normal, keyed by seed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from seisctf.pipeline.noise import gaussian_noise, standard_normal_at


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
