"""Dynamic mode decompositions from pydmd as zoo models, on the inputs' POD coefficients
(`reduced_rank`: 16, scaled to RMS 1; one row a time step, time step 1).

- `bop_dmd`: optimised DMD (`pydmd.BOPDMD`, variable projection without bagging, so no random
  draw): x(t) = Σ_j φ_j b_j exp(ω_j t) with continuous-time eigenvalues ω_j (per row), fitted on
  the longest input (the most recent of equal length). The amplitudes b are then fitted by
  least squares on the most recent input, rows at t = 0 … T−1, and the forecast is the sum at
  t = T … T+steps−1. Grid: the rank r in (4, 8, 12) (at most the features), with eigenvalues
  constrained to Re ω ≤ 0 (`"stable"`) or free: six entries.
- `edmd_koopman`: the Koopman operator approximated by kernel extended DMD (`pydmd.EDMD`,
  Williams, Rowley & Kevrekidis 2015): a dictionary learned from a kernel k(x, y) on the pairs
  of consecutive rows of every input (evenly thinned to at most MAX_EDMD_PAIRS), truncated to
  its leading `rank` singular values. Koopman eigenvalues λ_j, eigenfunctions ϕ_j and modes v_j
  give x[t+k] = Re Σ_j v_j λ_j^k ϕ_j(x[t]), started from the most recent row. Grid: a linear
  kernel (exact DMD, rank at most the features), polynomial kernels (⟨x, y⟩ / features + 1)^d
  of degree 2 and 3 and Gaussian kernels exp(−γ ‖x − y‖² / features) with γ 0.1 and 1 (rank
  64): five entries.

Neither has a denoiser of its own: a reconstruction pair gets the zoo's truncated SVD
(`seisctf.baselines.zoo.predict`). A BOP-DMD reconstruction (a sum of exponentials over the whole
record, at the SVD's rank) fits a transient arrival poorly: on travelling waves with a passing
pulse and 20-50 % noise its error was 2.4-6 times the SVD's, above the noise's own at 20 %.

pydmd 2025.8.1's `EDMD.eigenfunctions` evaluates the kernel against every snapshot, one more
than the operator was fitted on when `fit` is given one matrix; the pairs are therefore given
as two matrices (X, Y), for which the snapshots are exactly the operator's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo.family import zoo_family
from seisctf.baselines.zoo.library_calls import one_step_pairs, quiet

BOP_DMD_GRID = tuple(
    {"rank": rank, "eig_constraint": constraint}
    for constraint in ("stable", None)
    for rank in (4, 8, 12)
)
EDMD_GRID: tuple[Mapping[str, Any], ...] = (
    {"kernel": "linear", "rank": 16},
    {"kernel": "poly", "degree": 2, "rank": 64},
    {"kernel": "poly", "degree": 3, "rank": 64},
    {"kernel": "rbf", "gamma": 0.1, "rank": 64},
    {"kernel": "rbf", "gamma": 1.0, "rank": 64},
)
MAX_EDMD_PAIRS = 1000  # the kernel matrices are pairs × pairs, their eigendecomposition cubic


def fit_bop_dmd(series: Sequence[np.ndarray], settings: Mapping[str, Any]) -> Any:
    """The `pydmd.BOPDMD` fitted on the longest series (the most recent of equal length), one
    row per unit of time; its `eigs` are the continuous-time eigenvalues ω."""
    longest = max(range(len(series)), key=lambda i: (series[i].shape[0], i))
    x = series[longest]
    rank = max(1, min(int(settings["rank"]), x.shape[1], x.shape[0] - 1))
    constraint = settings["eig_constraint"]
    with quiet():
        from pydmd import BOPDMD

        dmd = BOPDMD(
            svd_rank=rank,
            eig_constraints={constraint} if constraint else None,
            varpro_opts_dict={"verbose": False},
        )
        dmd.fit(x.T, np.arange(x.shape[0], dtype=np.float64))
    return dmd


def continue_exponentials(
    modes: np.ndarray, omega: np.ndarray, history: np.ndarray, steps: int
) -> np.ndarray:
    """(steps, features): Re Σ_j modes_j b_j exp(ω_j t) at t = T … T+steps−1, with b the least
    squares fit of `history` (T, features) at t = 0 … T−1."""
    n_time, width = history.shape
    past = np.exp(np.outer(np.arange(n_time), omega))  # (T, r)
    if not np.isfinite(past).all():
        raise ValueError("an eigenvalue grows beyond floating point over the history")
    design = (past[:, None, :] * modes[None, :, :]).reshape(n_time * width, -1)
    amplitudes, *_ = np.linalg.lstsq(design, history.reshape(-1).astype(complex), rcond=None)
    future = np.exp(np.outer(np.arange(n_time, n_time + steps), omega))
    return ((future * amplitudes) @ modes.T).real


@zoo_family(
    "bop_dmd",
    family="optimised DMD (BOP-DMD)",
    library="pydmd",
    grid=BOP_DMD_GRID,
    paper="Opt DMD",
)
def bop_dmd(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    dmd = fit_bop_dmd(series, settings)
    return continue_exponentials(np.asarray(dmd.modes), np.asarray(dmd.eigs), series[-1], steps)


def _thinned(rows: np.ndarray, most: int) -> np.ndarray:
    """At most `most` of `rows`, evenly spaced, the first and last kept."""
    if rows.shape[0] <= most:
        return rows
    return rows[np.linspace(0, rows.shape[0] - 1, most).round().astype(int)]


def kernel_parameters(settings: Mapping[str, Any], features: int) -> tuple[str, dict[str, Any]]:
    """sklearn `pairwise_kernels` metric and parameters of an EDMD grid entry."""
    kernel = settings["kernel"]
    if kernel == "linear":
        return "linear", {}
    if kernel == "poly":
        return "poly", {"degree": int(settings["degree"]), "gamma": 1.0 / features, "coef0": 1.0}
    if kernel == "rbf":
        return "rbf", {"gamma": float(settings["gamma"]) / features}
    raise ValueError(f"EDMD kernel {kernel!r} is none of linear, poly, rbf")


def fit_edmd(series: Sequence[np.ndarray], settings: Mapping[str, Any]) -> Any:
    """The `pydmd.EDMD` fitted on the one-step pairs of every series (at most MAX_EDMD_PAIRS,
    evenly thinned)."""
    inputs, targets = one_step_pairs(series)
    pairs = _thinned(np.hstack([np.vstack(inputs), np.vstack(targets)]), MAX_EDMD_PAIRS)
    features = series[-1].shape[1]
    metric, parameters = kernel_parameters(settings, features)
    rank = min(int(settings["rank"]), pairs.shape[0])
    if metric == "linear":
        rank = min(rank, features)
    with quiet():
        from pydmd import EDMD

        edmd = EDMD(svd_rank=rank, kernel_metric=metric, kernel_params=parameters)
        edmd.fit(pairs[:, :features].T, pairs[:, features:].T)
    return edmd


def koopman_forecast(edmd: Any, last: np.ndarray, steps: int) -> np.ndarray:
    """(steps, features): Re Σ_j v_j λ_j^k ϕ_j(last), k = 1 … steps."""
    with quiet():
        phi = np.asarray(edmd.eigenfunctions(np.asarray(last, dtype=np.float64))).ravel()
    eigenvalues = np.asarray(edmd.eigs)
    modes = np.asarray(edmd.modes)
    if phi.shape[0] != eigenvalues.shape[0]:
        raise ValueError("a Koopman eigenvalue is zero: eigenfunctions and modes differ in number")
    powers = eigenvalues[None, :] ** np.arange(1, steps + 1)[:, None]  # (steps, r)
    return ((powers * phi) @ modes.T).real


@zoo_family(
    "edmd_koopman",
    family="Koopman operator by kernel extended DMD",
    library="pydmd",
    grid=EDMD_GRID,
    paper="PyKoopman",
)
def edmd_koopman(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    return koopman_forecast(fit_edmd(series, settings), series[-1][-1], steps)
