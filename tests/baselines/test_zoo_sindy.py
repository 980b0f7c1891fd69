"""pysindy's zoo family `sindy` against known maps: a sparse linear map's coefficients (the
matrix, every other monomial zero) and continuation (numpy's matrix powers), the Hénon map's
coefficients and iterates, and pysindy's own simulation of the fitted map; and the family's
prediction of a small pair."""

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


def henon(start: np.ndarray, rows: int) -> np.ndarray:
    """(rows, 2): the Hénon map x ← 1 − 1.4 x² + y, y ← 0.3 x from `start`."""
    path = np.empty((rows, 2))
    path[0] = start
    for t in range(rows - 1):
        x, y = path[t]
        path[t + 1] = (1.0 - 1.4 * x * x + y, 0.3 * x)
    return path


def test_sindy_recovers_the_henon_map_and_iterates_it_as_pysindy_simulates() -> None:
    starts = [np.array([0.1, 0.0]), np.array([-0.2, 0.1])]
    inputs = [henon(start, 200) for start in starts]
    settings = {"degree": 2, "threshold": 0.05}
    fitted = sindy.fit_sindy(inputs, settings)
    assert fitted.get_feature_names() == ["1", "x0", "x1", "x0^2", "x0 x1", "x1^2"]
    expected = np.array([[1.0, 0.0, 1.0, -1.4, 0.0, 0.0], [0.0, 0.3, 0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(np.asarray(fitted.coefficients()), expected, atol=1e-8)
    # The family's numpy iteration of the fitted map is pysindy's own simulation of it, and
    # (chaos amplifies the fit's 1e-12 by about 1.5 a step) the map's true continuation.
    last = inputs[-1][-1]
    forecast = sindy.simulate(fitted, last, 25)
    np.testing.assert_allclose(forecast, np.asarray(fitted.simulate(last, 26))[1:], atol=1e-12)
    np.testing.assert_allclose(forecast, henon(last, 26)[1:], atol=1e-6)


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
