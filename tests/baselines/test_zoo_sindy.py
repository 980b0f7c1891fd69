"""pysindy's zoo family `sindy` against a known sparse linear map: its coefficients (the
matrix, every other monomial zero) and its continuation (numpy's matrix powers); and the
family's prediction of a small pair."""

from __future__ import annotations

import numpy as np
from zoo_pair_checks import check_missing_library, check_pair_prediction, continuation, trajectory

from seisctf.baselines.zoo import sindy

# x0 and x1 rotate and decay, x2 decays driven by x1: a sparse map of three variables.
MATRIX = np.array([[0.9, -0.3, 0.0], [0.3, 0.9, 0.0], [0.0, 0.2, 0.8]])


def test_sindy_recovers_a_sparse_linear_map_among_quadratic_monomials() -> None:
    starts = np.random.default_rng(1).standard_normal((4, 3))
    inputs = [trajectory(MATRIX, start, 60) for start in starts]
    settings = {"degree": 2, "threshold": 0.05}
    fitted = sindy.fit_sindy(inputs, settings)
    names = fitted.get_feature_names()
    assert names[:4] == ["1", "x0", "x1", "x2"] and len(names) == 10
    coefficients = np.asarray(fitted.coefficients())  # (3 targets, 10 monomials)
    np.testing.assert_allclose(coefficients[:, 1:4], MATRIX, atol=1e-8)
    assert np.all(coefficients[:, [0, *range(4, 10)]] == 0.0)
    forecast = sindy.sindy(inputs, 30, settings, seed=0)
    np.testing.assert_allclose(forecast, continuation(MATRIX, inputs[-1][-1], 30), atol=1e-8)


def test_sindy_reports_a_diverging_map_as_not_finite() -> None:
    growing = 1.5 * np.eye(2)
    x = trajectory(growing, np.array([1.0, -1.0]), 20)
    forecast = sindy.sindy([x], 100, {"degree": 1, "threshold": 0.01}, seed=0)
    assert forecast.shape == (100, 2)
    assert np.isfinite(forecast[:5]).all() and not np.isfinite(forecast).all()


def test_pair_prediction() -> None:
    check_pair_prediction("sindy")


def test_missing_library_names_the_zoo_extra() -> None:
    check_missing_library("sindy")
