"""mean_interval and misranking_probability against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from seisctf.errors import InvalidInput
from seisctf.scoring.uncertainty import mean_interval, misranking_probability


def test_mean_interval_matches_scipy_t_interval():
    values = [0.71, 0.74, 0.69, 0.80, 0.77]
    mean, low, high = mean_interval(values, level=0.9)
    expected = stats.t.interval(0.9, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(np.mean(values))
    assert (low, high) == pytest.approx(expected, rel=1e-12)


def test_mean_interval_single_and_constant_values():
    mean, low, high = mean_interval([0.5])
    assert mean == 0.5 and math.isnan(low) and math.isnan(high)
    assert mean_interval([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.3, 0.3))


@pytest.mark.parametrize("values", [[], [1.0, float("nan")], [float("inf"), 1.0]])
def test_mean_interval_refuses_bad_values(values):
    with pytest.raises(InvalidInput):
        mean_interval(values)


def test_mean_interval_coverage():
    rng = np.random.default_rng(7)
    samples = rng.normal(2.0, 3.0, size=(4000, 5))
    inside = [low <= 2.0 <= high for _, low, high in map(mean_interval, samples)]
    assert 0.935 < np.mean(inside) < 0.965


@settings(max_examples=30, deadline=None)
@given(
    difference=st.floats(-3, 3).filter(lambda d: abs(d) > 1e-3),
    sd_a=st.floats(0.1, 2),
    sd_b=st.floats(0.1, 2),
)
def test_misranking_probability_matches_normal_formula(difference, sd_a, sd_b):
    # Runs with exactly the requested mean and sample standard deviation.
    unit = np.array([-1.0, 1.0]) / math.sqrt(2)  # mean 0, sample standard deviation 1
    runs_a = difference + sd_a * unit
    runs_b = sd_b * unit
    expected = stats.norm.cdf(-abs(difference) / math.hypot(sd_a, sd_b))
    got = misranking_probability(runs_a, runs_b, n_sim=200_000, seed=3)
    assert got == pytest.approx(expected, abs=4 * math.sqrt(0.25 / 200_000) + 1e-9)


def test_misranking_probability_is_deterministic_and_symmetric():
    a, b = [0.80, 0.82, 0.78, 0.85], [0.79, 0.83, 0.81]
    first = misranking_probability(a, b, seed=5)
    assert first == misranking_probability(a, b, seed=5)
    assert misranking_probability(b, a, seed=5) == pytest.approx(first, abs=0.01)
    assert 0.0 < first < 0.5


def test_misranking_probability_edge_cases():
    assert misranking_probability([1.0, 1.0], [0.0, 0.0]) == 0.0
    assert misranking_probability([1.0, 2.0], [1.5]) == 0.5
    assert math.isnan(misranking_probability([1.0], [2.0]))
    # One run on one side is a fixed value: only the other side's spread counts.
    expected = stats.norm.cdf(-0.5 / np.std([0.0, 1.0], ddof=1))
    assert misranking_probability([0.0, 1.0], [1.0]) == pytest.approx(expected, abs=0.005)
