"""Pure numpy kernels of the CTF errors, per convention; no Dask here.

With T the truth window and S the submission (the full table is in docs/scoring.md):
- short-time (first k_short rows) and reconstruction (all rows): ‖T−S‖/‖T‖ with the matrix
  2-norm (`reference`) or the Frobenius norm (`paper`);
- long-time (last k_long rows), `reference`: P = row mean of fftshift(|FFT over space|²), bins
  n//2 … n//2+modes−1, error ‖P_T−P_S‖₂/‖P_T‖₂; `paper`: P = ln fftshift(|FFT|²) per row (0 where
  |FFT|² = 0) on bins n//2−modes … n//2+modes (inclusive, cut to 0 … n−1), error
  ‖P_T−P_S‖_F/‖P_T‖_F.
Ei = 100 (1 − error), clipped to [−100, 100]; a zero denominator makes the task unscorable.
"""

from __future__ import annotations

import math
import sys

import numpy as np

LANCZOS_MIN_SIDE = 256  # below this a dense eigensolver is as fast as Lanczos


def spectral_norm_from_gram(gram: np.ndarray) -> float:
    """Largest singular value of A from G = A Aᵀ (or AᵀA): sqrt of G's largest eigenvalue; inf
    when G is not finite (NaN input or overflow: the caller then refuses the submission or
    rescores it scaled).

    Large G: ARPACK's Lanczos (`eigsh`, tol=0, i.e. converged to machine precision, from a fixed
    start so the result is deterministic), a few hundred G·v products instead of the O(m³)
    tridiagonal reduction; LAPACK's MRRR (one eigenvalue) for small G or if ARPACK does not
    converge."""
    from scipy.linalg import eigh
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    gram = np.asarray(gram, dtype=np.float64)
    if not np.isfinite(gram).all():
        return math.inf
    if not gram.any():
        return 0.0
    size = int(gram.shape[0])
    largest: float | None = None
    if size > LANCZOS_MIN_SIDE:
        start = np.random.default_rng(0).standard_normal(size)
        try:
            largest = eigsh(gram, k=1, which="LA", tol=0, v0=start, return_eigenvectors=False)[0]
        except ArpackNoConvergence:
            largest = None
    if largest is None:
        largest = eigh(
            gram,
            eigvals_only=True,
            check_finite=False,
            subset_by_index=[size - 1, size - 1],
            driver="evr",
        )[0]
    return math.sqrt(max(float(largest), 0.0))


def power_spectrum(rows: np.ndarray) -> np.ndarray:
    """(k, n) -> (k, n) fftshifted |FFT over space|² of each row, float64 (inf where it
    overflows: a submission that large is scored again, scaled, `ctf.metric_error`)."""
    spectrum = np.fft.fftshift(np.fft.fft(np.asarray(rows, dtype=np.float64), axis=1), axes=1)
    with np.errstate(over="ignore"):
        return spectrum.real**2 + spectrum.imag**2


def reference_spectrum(rows: np.ndarray, modes: int) -> np.ndarray:
    """(k, n) rows -> (modes,): row mean of the power spectrum from zero frequency upward."""
    zero = rows.shape[1] // 2
    return power_spectrum(rows).mean(axis=0)[zero : zero + modes]


def paper_window(n_space: int, modes: int) -> slice:
    """Bins n//2 − modes … n//2 + modes of an fftshifted spectrum, cut to the available ones."""
    zero = n_space // 2
    return slice(max(0, zero - modes), min(n_space, zero + modes + 1))


def paper_window_width(n_space: int, modes: int) -> int:
    window = paper_window(n_space, modes)
    return window.stop - window.start


def paper_log_spectrum(rows: np.ndarray, modes: int) -> np.ndarray:
    """(k, n) rows -> (k, window) ln|FFT|² per row on the symmetric window; 0 where |FFT|² = 0.

    Computed as 2 ln|FFT| (|FFT| by hypot), so huge values never overflow to inf."""
    spectrum = np.fft.fftshift(np.fft.fft(np.asarray(rows, dtype=np.float64), axis=1), axes=1)
    magnitude = np.abs(spectrum[:, paper_window(rows.shape[1], modes)])
    logged = np.zeros_like(magnitude)
    np.log(magnitude, out=logged, where=magnitude > 0)
    return 2.0 * logged


def relative_error(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None (unscorable) when the denominator is 0."""
    return None if denominator == 0.0 else numerator / denominator


def score_from_error(error: float | None) -> tuple[float | None, float | None]:
    """(raw, clipped) score 100 (1 − error); None when the task is unscorable."""
    if error is None:
        return None, None
    # An error beyond float64 (a submission of astronomically large values) is reported as the
    # most negative finite float, so results stay valid JSON.
    raw = max(100.0 * (1.0 - error), -sys.float_info.max)
    return raw, float(np.clip(raw, -100.0, 100.0)) + 0.0  # + 0.0 turns -0.0 into 0.0
