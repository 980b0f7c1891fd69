"""pydmd's zoo families (`bop_dmd`, `edmd_koopman`) against a known linear map: its eigenvalues
(numpy's `eig` of the matrix) and its continuation (numpy's matrix powers); and each family's
prediction of a small pair."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from zoo_pair_checks import (
    check_missing_library,
    check_pair_prediction,
    continuation,
    linear_map,
    matched,
    trajectory,
)

from seisctf.baselines.zoo import dmd
from seisctf.baselines.zoo.library_calls import quiet

# A damped map with two rotations and a decay: eigenvalues 0.99 e^{±0.3i}, 0.97 e^{±0.7i}, 0.9.
EIGENVALUES = np.array([0.99 * np.exp(0.3j), 0.97 * np.exp(0.7j), 0.9])
MATRIX = linear_map(EIGENVALUES, seed=1)


def series(rows: tuple[int, ...], seed: int) -> list[np.ndarray]:
    """Trajectories of MATRIX from random starts, `rows` long each."""
    starts = np.random.default_rng(seed).standard_normal((len(rows), MATRIX.shape[0]))
    return [trajectory(MATRIX, start, n) for start, n in zip(starts, rows, strict=True)]


def test_bop_dmd_finds_the_maps_eigenvalues_and_continues_a_short_last_series() -> None:
    # Fitted on the longest series; the amplitudes from the last, a 30-row burn-in with a
    # little noise (eigenvalues fitted on it would be off by far more than 1e-6).
    inputs = series((200, 120, 30), seed=2)
    inputs[-1] = inputs[-1] + 1e-4 * np.random.default_rng(5).standard_normal(inputs[-1].shape)
    settings = {"rank": 5, "eig_constraint": "stable"}
    fitted = dmd.fit_bop_dmd(inputs, settings)
    discrete = np.exp(np.asarray(fitted.eigs))  # continuous-time ω, time step 1: λ = e^ω
    assert discrete.shape == (5,)
    expected = np.linalg.eigvals(MATRIX)
    assert matched(discrete, expected).max() < 1e-6
    forecast = dmd.bop_dmd(inputs, 40, settings, seed=0)
    truth = continuation(MATRIX, inputs[-1][-1], 40)
    assert np.abs(forecast - truth).max() < 1e-3 * np.abs(truth).max()


def test_bop_dmd_stable_constraint_keeps_a_growing_mode_from_growing() -> None:
    growing = linear_map(np.array([1.02 * np.exp(0.2j), 0.9]), seed=3)
    x = trajectory(growing, np.ones(3), 80)
    free = np.exp(np.asarray(dmd.fit_bop_dmd([x], {"rank": 3, "eig_constraint": None}).eigs))
    assert matched(free, np.linalg.eigvals(growing)).max() < 1e-5
    stable = dmd.fit_bop_dmd([x], {"rank": 3, "eig_constraint": "stable"}).eigs
    assert np.all(np.asarray(stable).real <= 1e-12)


@pytest.mark.parametrize(
    "settings",
    [{"kernel": "linear", "rank": 16}, {"kernel": "poly", "degree": 2, "rank": 64}],
    ids=["linear", "poly2"],
)
def test_edmd_koopman_continues_a_linear_map(settings) -> None:
    # Every kernel's dictionary here holds the linear functions, which span the Koopman
    # eigenfunctions x ↦ wᵀx of a linear map: its eigenvalues are among EDMD's, and the forecast
    # is the map's continuation.
    inputs = series((120, 80, 40), seed=4)
    fitted = dmd.fit_edmd(inputs, settings)
    expected = np.linalg.eigvals(MATRIX)
    assert matched(np.asarray(fitted.eigs), expected).max() < 1e-8
    forecast = dmd.edmd_koopman(inputs, 40, settings, seed=0)
    truth = continuation(MATRIX, inputs[-1][-1], 40)
    assert np.abs(forecast - truth).max() < 1e-8 * np.abs(truth).max()


def test_pydmd_leaves_the_root_logger_as_it_was() -> None:
    # pydmd calls logging.basicConfig when imported and logs with logging.info, which installs
    # a handler on a root logger that has none (as a command's has): quiet() removes it.
    root = logging.getLogger()
    saved = list(root.handlers)
    for handler in saved:
        root.removeHandler(handler)
    try:
        x = np.cos(0.3 * np.arange(40.0))[:, None] * [1.0, 2.0, 3.0]
        with quiet():
            logging.info("a library's log line")
        dmd.bop_dmd([x], 5, {"rank": 2, "eig_constraint": None}, seed=0)
        dmd.edmd_koopman([x], 5, {"kernel": "linear", "rank": 16}, seed=0)
        assert root.handlers == []
    finally:
        for handler in saved:
            root.addHandler(handler)


@pytest.mark.parametrize("name", ["bop_dmd", "edmd_koopman"])
def test_pair_prediction(name) -> None:
    check_pair_prediction(name)


@pytest.mark.parametrize("name", ["bop_dmd", "edmd_koopman"])
def test_missing_library_names_the_zoo_extra(name) -> None:
    check_missing_library(name)
