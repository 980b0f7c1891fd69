"""mean_interval and misranking_probability against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from seisctf.errors import InvalidInput
from seisctf.scoring.uncertainty import (
    chi2_interval,
    mean_interval,
    misranking_probability,
    mls_interval,
    nested_anova,
    reml_fit,
)


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


# --- nested ANOVA, intervals and REML against independent computations -----------------------


def _loop_mean_squares(values: np.ndarray, draws: np.ndarray) -> tuple[float, float, float]:
    """MS_between, MS_within and n0 by explicit loops over draws (textbook formulas)."""
    labels = sorted(set(draws.tolist()))
    grand = sum(values) / len(values)
    ss_between = ss_within = 0.0
    sizes = []
    for label in labels:
        group = [v for v, d in zip(values, draws, strict=True) if d == label]
        mean = sum(group) / len(group)
        ss_between += len(group) * (mean - grand) ** 2
        ss_within += sum((v - mean) ** 2 for v in group)
        sizes.append(len(group))
    n, a = len(values), len(labels)
    n0 = (n - sum(s * s for s in sizes) / n) / (a - 1)
    return ss_between / (a - 1), ss_within / (n - a), n0


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=2, max_size=8).filter(lambda s: sum(s) > len(s)),
    seed=st.integers(0, 2**16),
)
def test_nested_anova_matches_loops_and_statsmodels(sizes, seed):
    import pandas as pd
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(seed)
    draws = np.repeat(np.arange(len(sizes)), sizes)
    values = rng.normal(0, 1, len(sizes))[draws] + rng.normal(0, 0.5, draws.size)
    anova = nested_anova(values, draws)
    ms_between, ms_within, n0 = _loop_mean_squares(values, draws)
    assert anova.ms_between == pytest.approx(ms_between, rel=1e-9)
    assert anova.ms_within == pytest.approx(ms_within, rel=1e-9)
    assert anova.n0 == pytest.approx(n0, rel=1e-12)
    assert anova.data_variance == pytest.approx((ms_between - ms_within) / n0, rel=1e-9)
    table = sm.stats.anova_lm(
        smf.ols("y ~ C(d)", pd.DataFrame({"y": values, "d": draws})).fit(), typ=1
    )
    assert anova.ms_between == pytest.approx(table["mean_sq"]["C(d)"], rel=1e-9)
    assert anova.ms_within == pytest.approx(table["mean_sq"]["Residual"], rel=1e-9)


def _balanced_reml(values: np.ndarray) -> tuple[float, float]:
    """Closed-form REML of the balanced one-way random model (draws × seeds): the MoM estimates
    when σ²_data ≥ 0, else σ²_data = 0 and σ²_train = SS_total / (N − 1)."""
    draws, seeds = values.shape
    ms_between = seeds * values.mean(axis=1).var(ddof=1)
    ms_within = values.var(axis=1, ddof=1).mean()
    if ms_between >= ms_within:
        return (ms_between - ms_within) / seeds, ms_within
    return 0.0, values.var(ddof=1)


@pytest.mark.parametrize("seed", range(8))
def test_cell_reml_equals_closed_form_and_mom_can_be_negative(seed):
    import pandas as pd

    rng = np.random.default_rng(seed)
    values = rng.normal(0, 0.02, (6, 1)) + rng.normal(0, 0.05, (6, 3))
    draws = np.repeat(np.arange(6), 3)
    table = pd.DataFrame({"value": values.ravel(), "data_draw": draws})
    fit = reml_fit("value ~ 1", table, "data_draw")
    expected = _balanced_reml(values)
    assert float(np.asarray(fit.cov_re)[0, 0]) == pytest.approx(expected[0], abs=1e-4 * expected[1])
    assert fit.scale == pytest.approx(expected[1], rel=1e-3)
    assert nested_anova(values.ravel(), draws).data_variance == pytest.approx(
        (3 * values.mean(axis=1).var(ddof=1) - values.var(axis=1, ddof=1).mean()) / 3
    )


def test_mom_is_negative_in_some_of_these_cells():
    rng = np.random.default_rng(0)
    estimates = [
        nested_anova(
            (rng.normal(0, 0.02, (6, 1)) + rng.normal(0, 0.05, (6, 3))).ravel(),
            np.repeat(np.arange(6), 3),
        ).data_variance
        for _ in range(8)
    ]
    assert any(e < 0 for e in estimates) and any(e > 0 for e in estimates)


def test_interval_coverage_by_simulation():
    """The χ² interval of σ²_train and the MLS interval of σ²_data cover the truth about 95 %
    of the time; 10× the truth rarely (the intervals discriminate, though with 12 draws the data
    variance's interval is wide: small values are covered often, its lower bound being 0)."""
    rng = np.random.default_rng(11)
    data_variance, training_variance = 0.5**2, 1.0
    covered = {"data": 0, "training": 0, "data_x10": 0}
    trials = 1500
    for _ in range(trials):
        values = rng.normal(0, 0.5, (12, 1)) + rng.normal(0, 1.0, (12, 3))
        anova = nested_anova(values.ravel(), np.repeat(np.arange(12), 3))
        (data_low, data_high), (train_low, train_high) = anova.intervals(0.95)
        covered["data"] += data_low <= data_variance <= data_high
        covered["data_x10"] += data_low <= 10 * data_variance <= data_high
        covered["training"] += train_low <= training_variance <= train_high
    assert 0.93 < covered["data"] / trials < 0.97
    assert 0.93 < covered["training"] / trials < 0.97
    assert covered["data_x10"] / trials < 0.2


def test_chi2_and_mls_intervals_against_formulas():
    low, high = chi2_interval(2.0, 10, 0.9)
    assert (low, high) == pytest.approx(
        (20 / stats.chi2.ppf(0.95, 10), 20 / stats.chi2.ppf(0.05, 10))
    )
    # With MS_within = 0 the MLS interval of MS_between/n reduces to the exact χ² interval.
    mls_low, mls_high = mls_interval(0.5, 2.0, 10, 0.5, 0.0, 30, 0.9)
    assert (mls_low, mls_high) == pytest.approx((0.5 * low, 0.5 * high), rel=1e-9)
