"""Sparse identification of nonlinear dynamics (SINDy) from pysindy as the zoo model `sindy`.

A discrete-time map x[t+1] = Θ(x[t]) Ξ on the inputs' POD coefficients (`reduced_rank`: 16,
scaled to RMS 1; one row a time step): Θ the monomials of the coefficients up to the library's
degree (constant included), Ξ sparse, fitted by sequentially thresholded least squares (STLSQ:
ridge α = 0.05, coefficients below the threshold in magnitude set to zero and the rest refitted)
on the one-step pairs of every input (`pysindy.DiscreteSINDy`, pysindy 2.x's discrete-time
SINDy: `SINDy(discrete_time=True)` before 2.0). The forecast iterates the fitted map from the
most recent row, in numpy from the library's monomial exponents and coefficients: the same
values as `DiscreteSINDy.simulate`, which validates its input again at every step (20 ms a
step for 16 features of degree 2, 20 s for a 1000-row forecast, against 0.05 ms here). A
state leaving |x| < DIVERGED (the inputs' RMS is 1) ends the simulation and the forecast is
reported as diverged (not finite).

Grid: polynomial degree 1 (a sparse linear map) and 2, thresholds 0.001, 0.005, 0.02: six
entries. The thresholds are small because the map is near the identity in 16 coefficients of
order 1: on travelling waves, 0.01 already zeroed couplings whose loss made a 1000-step forecast
diverge (relative error 1.8, against 0.004 at 0.003).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo.family import zoo_family
from seisctf.baselines.zoo.library_calls import one_step_pairs, quiet

SINDY_GRID = tuple(
    {"degree": degree, "threshold": threshold}
    for degree in (1, 2)
    for threshold in (0.001, 0.005, 0.02)
)
RIDGE_ALPHA = 0.05  # STLSQ's ridge (pysindy's default), on the library's columns
DIVERGED = 1e6  # |coefficient| past which a simulated state has left the data for good


def fit_sindy(series: Sequence[np.ndarray], settings: Mapping[str, Any]) -> Any:
    """The `pysindy.DiscreteSINDy` fitted on the one-step pairs of every series."""
    inputs, targets = one_step_pairs(series)
    with quiet():
        import pysindy as ps

        model = ps.DiscreteSINDy(
            optimizer=ps.STLSQ(threshold=float(settings["threshold"]), alpha=RIDGE_ALPHA),
            feature_library=ps.PolynomialLibrary(degree=int(settings["degree"])),
        )
        model.fit(inputs, t=1, x_next=targets)
    return model


def simulate(model: Any, last: np.ndarray, steps: int) -> np.ndarray:
    """(steps, features): the fitted map iterated from `last`, x ← Θ(x) Ξ with the library's
    monomials (`powers_`) and coefficients; NaN rows after a diverged state."""
    powers = np.asarray(model.feature_library.powers_)  # (terms, features)
    coefficients = np.asarray(model.coefficients())  # (features, terms)
    state = np.asarray(last, dtype=np.float64)
    forecast = np.full((steps, state.shape[0]), np.nan)
    for step in range(steps):
        state = np.prod(state[None, :] ** powers, axis=1) @ coefficients.T
        forecast[step] = state
        if not np.all(np.abs(state) < DIVERGED):
            break
    return forecast


@zoo_family(
    "sindy",
    family="sparse identification of nonlinear dynamics (discrete-time SINDy)",
    library="pysindy",
    grid=SINDY_GRID,
    paper="SINDy",
)
def sindy(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    return simulate(fit_sindy(series, settings), series[-1][-1], steps)
