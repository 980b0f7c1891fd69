"""Linear time-series kernels of the zoo's `sensor_ar` and `pod_var` and of the red team's
baselines; numpy only, arrays (time, space).

- Per-sensor autoregression AR(p): x_s[t] = Σ_{i=1..p} a_{s,i} x_s[t−i], fitted by least squares
  (normal equations, a small ridge relative to their trace) on every series given, each series
  contributing only the rows whose p predecessors it holds; made stable (companion spectral
  radius < 1) by a_i ← a_i ρ^i, then iterated forward.
- Vector autoregression VAR(p) of r POD coefficients: c[t] = Σ_i A_i c[t−i] with A_i (r × r),
  least squares with the same ridge, stabilised the same way on its companion matrix.
- POD: the leading r right singular vectors of the stacked series (eigenvectors of XᵀX).
- Denoising of white noise: a per-sensor Wiener filter in frequency, gain max(0, 1 − N/P) with
  P the sensor's periodogram smoothed over neighbouring frequencies and N its white-noise level
  (N = σ² T for noise of variance σ²); and a truncated SVD at Gavish & Donoho's optimal hard
  threshold for an unknown noise level, τ = ω(β) · median singular value with
  ω(β) ≈ 0.56 β³ − 0.95 β² + 1.82 β + 1.43, β = short side / long side
  (Gavish & Donoho 2014, IEEE Trans. Inf. Theory 60(8), 5040–5053, eq. (7)).
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d

RIDGE = 1e-6  # ridge added to normal equations, relative to their mean diagonal


def solve_ridged(gram: np.ndarray, rhs: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Solve (G + λ I) a = b for a stack of systems (…, p, p) · (…, p), λ = ridge × G's mean
    diagonal."""
    size = gram.shape[-1]
    diagonal = np.trace(gram, axis1=-2, axis2=-1) / size
    scale = ridge * np.maximum(diagonal, np.finfo(float).tiny)
    ridged = gram + scale[..., None, None] * np.eye(size)
    return np.linalg.solve(ridged, rhs[..., None])[..., 0]


def sensor_ar_normal_equations(
    series: list[np.ndarray], order: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-sensor normal equations (space, order, order) and (space, order) of AR(order); their
    leading k × k blocks are those of AR(k) on the same target rows."""
    n_space = series[0].shape[1]
    gram = np.zeros((n_space, order, order))
    rhs = np.zeros((n_space, order))
    for x in series:
        n_time = x.shape[0]
        if n_time <= order:
            continue
        lags = [x[order - 1 - i : n_time - 1 - i] for i in range(order)]
        target = x[order:]
        for i in range(order):
            rhs[:, i] += np.einsum("ts,ts->s", lags[i], target)
            for j in range(i, order):
                gram[:, i, j] = gram[:, i, j] + np.einsum("ts,ts->s", lags[i], lags[j])
                gram[:, j, i] = gram[:, i, j]
    return gram, rhs


def fit_sensor_ar(series: list[np.ndarray], order: int, ridge: float = RIDGE) -> np.ndarray:
    """Per-sensor AR coefficients (space, order): column i multiplies x[t−1−i]."""
    gram, rhs = sensor_ar_normal_equations(series, order)
    return solve_ridged(gram, rhs, ridge)


def _companion(coefficients: np.ndarray) -> np.ndarray:
    """Companion matrices (…, p, p) of scalar AR coefficients (…, p)."""
    order = coefficients.shape[-1]
    companion = np.zeros((*coefficients.shape[:-1], order, order))
    companion[..., 0, :] = coefficients
    companion[..., np.arange(1, order), np.arange(order - 1)] = 1.0
    return companion


def stabilise_sensor_ar(coefficients: np.ndarray, radius: float = 0.999) -> np.ndarray:
    """Shrink a_i by ρ^i where a sensor's companion spectral radius exceeds `radius`."""
    largest = np.abs(np.linalg.eigvals(_companion(coefficients))).max(axis=-1)
    shrink = np.where(largest > radius, radius / np.maximum(largest, radius), 1.0)
    powers = shrink[:, None] ** np.arange(1, coefficients.shape[1] + 1)
    return coefficients * powers


def zero_padded(history: np.ndarray, rows: int) -> np.ndarray:
    """history with zero rows in front when it has fewer than `rows` (a short burn-in)."""
    missing = rows - history.shape[0]
    return (
        history if missing <= 0 else np.vstack([np.zeros((missing, *history.shape[1:])), history])
    )


def iterate_sensor_ar(coefficients: np.ndarray, history: np.ndarray, steps: int) -> np.ndarray:
    """(steps, space) forecast continuing `history` (rows before it count as zero)."""
    order = coefficients.shape[1]
    history = zero_padded(history, order)
    state = [history[-1 - i] for i in range(order)]  # state[i] = x[t−1−i]
    forecast = np.empty((steps, history.shape[1]))
    for step in range(steps):
        value = sum(coefficients[:, i] * state[i] for i in range(order))
        forecast[step] = value
        state = [value, *state[:-1]]
    return forecast


def pod_modes(series: list[np.ndarray], rank: int) -> np.ndarray:
    """(space, rank) leading right singular vectors of the stacked series."""
    gram = sum(x.T @ x for x in series)
    _, vectors = np.linalg.eigh(gram)
    return vectors[:, ::-1][:, :rank]


def fit_var(series: list[np.ndarray], order: int, ridge: float = RIDGE) -> np.ndarray:
    """VAR coefficients (order·r, r): c[t] = [c[t−1], …, c[t−p]] @ A."""
    width = series[0].shape[1]
    gram = np.zeros((order * width, order * width))
    rhs = np.zeros((order * width, width))
    for c in series:
        n_time = c.shape[0]
        if n_time <= order:
            continue
        design = np.hstack([c[order - 1 - i : n_time - 1 - i] for i in range(order)])
        gram += design.T @ design
        rhs += design.T @ c[order:]
    scale = ridge * max(np.trace(gram) / gram.shape[0], np.finfo(float).tiny)
    return np.linalg.solve(gram + scale * np.eye(gram.shape[0]), rhs)


def stabilise_var(coefficients: np.ndarray, radius: float = 0.999) -> np.ndarray:
    """Shrink A_i by ρ^i when the VAR's companion spectral radius exceeds `radius`."""
    width = coefficients.shape[1]
    order = coefficients.shape[0] // width
    companion = np.zeros((order * width, order * width))
    companion[:width] = coefficients.T
    companion[width:, :-width] = np.eye((order - 1) * width)
    largest = np.abs(np.linalg.eigvals(companion)).max()
    if largest <= radius:
        return coefficients
    shrink = radius / largest
    blocks = [coefficients[i * width : (i + 1) * width] * shrink ** (i + 1) for i in range(order)]
    return np.vstack(blocks)


def iterate_var(coefficients: np.ndarray, history: np.ndarray, steps: int) -> np.ndarray:
    """(steps, r) VAR forecast continuing `history` (rows before it count as zero)."""
    width = coefficients.shape[1]
    order = coefficients.shape[0] // width
    history = zero_padded(history, order)
    state = np.concatenate([history[-1 - i] for i in range(order)])
    forecast = np.empty((steps, width))
    for step in range(steps):
        value = state @ coefficients
        forecast[step] = value
        state = np.concatenate([value, state[:-width]])
    return forecast


def white_noise_level(x: np.ndarray, bands: int = 8) -> np.ndarray:
    """Per-sensor periodogram level of white noise, |FFT|² units (space,): the smallest of the
    band medians of the periodogram (rfft over time) in `bands` equal frequency bands above
    zero, divided by ln 2 (the median of an exponential variable over its mean). For white noise
    of variance σ² the periodogram's mean is σ² T; the minimum over bands errs low by about
    10 % for T = 2000 (fewer bins per band, more), so the filter errs on the gentle side."""
    power = np.abs(np.fft.rfft(x, axis=0)[1:]) ** 2
    medians = np.stack([np.median(b, axis=0) for b in np.array_split(power, bands, axis=0)])
    return medians.min(axis=0) / np.log(2.0)


def wiener_denoise(x: np.ndarray, smoothing_bins: int = 9) -> np.ndarray:
    """Per-sensor Wiener filter of white noise in frequency (module docstring); (time, space)."""
    spectrum = np.fft.rfft(x, axis=0)
    power = np.abs(spectrum) ** 2
    smoothed = uniform_filter1d(power, smoothing_bins, axis=0, mode="nearest")
    noise = white_noise_level(x)
    gain = np.clip(1.0 - noise[None, :] / np.maximum(smoothed, np.finfo(float).tiny), 0.0, 1.0)
    return np.fft.irfft(spectrum * gain, n=x.shape[0], axis=0)


def gavish_donoho_rank(singular_values: np.ndarray, shape: tuple[int, int]) -> int:
    """Rank kept by the optimal hard threshold for an unknown white-noise level."""
    beta = min(shape) / max(shape)
    omega = 0.56 * beta**3 - 0.95 * beta**2 + 1.82 * beta + 1.43
    return max(1, int((singular_values > omega * np.median(singular_values)).sum()))


def svd_denoise(x: np.ndarray) -> np.ndarray:
    """Truncated SVD of (time, space) at the Gavish–Donoho rank, through the eigenvectors of the
    smaller side's Gram matrix (x = U S Vᵀ: x V_k V_kᵀ, or U_k U_kᵀ x)."""
    by_space = x.shape[1] <= x.shape[0]
    gram = x.T @ x if by_space else x @ x.T
    eigenvalues, vectors = np.linalg.eigh(gram)
    eigenvalues, vectors = eigenvalues[::-1], vectors[:, ::-1]
    singular_values = np.sqrt(np.maximum(eigenvalues, 0.0))
    kept = vectors[:, : gavish_donoho_rank(singular_values, x.shape)]
    return (x @ kept) @ kept.T if by_space else kept @ (kept.T @ x)
