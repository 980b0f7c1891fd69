"""Uncertainty of scores from repeated runs (arXiv 2501.14809).

A score y of approach a at data budget b, data draw d and training seed s follows
y = γ + μ_b + α_a + θ_ab + ε_data(abd) + ε_train(abds): the data draws of a cell (a, b) are the
random training sets, the seeds within a draw the random initialisations of training.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from seisctf.errors import InvalidInput

__all__ = ["mean_interval", "misranking_probability"]


def _finite_values(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise InvalidInput(what, "no values")
    if not np.all(np.isfinite(array)):
        raise InvalidInput(what, "non-finite values")
    return array


def mean_interval(
    values: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided Student-t interval of the mean of independent values.

    One value gives (value, nan, nan): its spread is unknown. Identical values give a
    zero-width interval.
    """
    array = _finite_values(values, "mean_interval")
    mean = float(array.mean())
    if array.size < 2:
        return mean, math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, array.size - 1) * array.std(ddof=1) / math.sqrt(array.size)
    return mean, mean - float(half), mean + float(half)


def misranking_probability(
    runs_a: Sequence[float] | np.ndarray,
    runs_b: Sequence[float] | np.ndarray,
    *,
    n_sim: int = 100_000,
    seed: int = 0,
) -> float:
    """Probability that one single run of a and one of b are ordered opposite to their means.

    Approximation: a single run of each approach is an independent normal draw with the mean and
    sample variance (ddof=1) of the runs given, i.e. the total variance (data sampling plus
    training) of a run trained on a fresh data draw; it is simulated `n_sim` times with a seeded
    generator (deterministic; close to Φ(−|Δ| / √(s²_a + s²_b))). An approach with one run
    has variance 0 (a fixed value); with one run on both sides nothing is known: nan. Equal means:
    0.5 (either order is as likely).
    """
    a = _finite_values(runs_a, "misranking_probability: runs_a")
    b = _finite_values(runs_b, "misranking_probability: runs_b")
    if a.size < 2 and b.size < 2:
        return math.nan
    difference = float(a.mean() - b.mean())
    if difference == 0.0:
        return 0.5
    sd_a = float(a.std(ddof=1)) if a.size > 1 else 0.0
    sd_b = float(b.std(ddof=1)) if b.size > 1 else 0.0
    return simulated_misranking(difference, sd_a, sd_b, n_sim=n_sim, seed=seed)


def simulated_misranking(
    difference: float, sd_a: float, sd_b: float, *, n_sim: int = 100_000, seed: int = 0
) -> float:
    """Fraction of `n_sim` simulated pairs (a ~ N(Δ, sd_a²), b ~ N(0, sd_b²)) ordered against Δ."""
    if difference == 0.0:
        return 0.5
    rng = np.random.default_rng(seed)
    sample_a = difference + sd_a * rng.standard_normal(n_sim)
    sample_b = sd_b * rng.standard_normal(n_sim)
    return float(np.mean(np.sign(difference) * (sample_a - sample_b) < 0))
