"""Red-team inversion of the synthetic DAS dataset from its public bundle alone.

What an attacker has: the public arrays (X*train, per-sensor RMS-normalised with unpublished
constants), the manifest, the public `das` attrs (channel count and spacing, gauge length), the
public docs and the installed package, whose generator (`seisctf.recipes.das_synth*`) states the
physics: swell on ω² = g k tanh(k h) over the default depth profile, refracted (Snell) and
shoaling (WKB), seen as seafloor strain; earthquakes with a known P/S moveout; white noise.

The inversion fits what the public generator exposes and the windows constrain:

- Swell: the last FIT_WINDOW_S rows of each forecast pair's most recent input are fitted, by
  damped least squares (LSQR), with a dictionary of the generator's own spatial swell modes
  m(f, θ, x) (its `swell_modes` on the public cable geometry and the default depth profile: WKB
  phase, shoaling, 1/cosh(kh), cos² θ and the gauge-length sinc) at every frequency of a grid
  twice as fine as the window resolves and directions 0–75° (the along-cable field is even in
  θ), times free per-channel gains (the unknown normalisation), alternated with the gains; the
  fit is continued by e^{iωt}.
- Long-time rows (legitimate, public data only): the forecast's last k_long rows get the mean
  spatial power spectrum of the most recent input's last SPECTRUM_ROWS (Wiener-denoised) rows
  with random phases: the expected spectrum of the stationary sea rather than one realisation's
  (whose own fluctuations double the expected error).
- Everything else comes from the best legitimate method, the red team's hold-out selection
  among its baselines (`baselines.BASELINES["holdout_best"]`, else POD-VAR): reconstructions and
  the short-time rows wherever the physics forecast does not beat it on the public hold-out
  (each forecasting the most recent input's last k_short rows from the rows before them).

Tried and dropped (scored on a bundle's truth while developing): a Wiener filter in the f–κ
plane restricted to the physical cone (|κ| <= k(ω, h_min), and apparent velocities above v_S) as
the reconstruction scored 80–81 where the per-sensor Wiener filter scores 92–95; Hann²-weighted
overlapping swell fits as the reconstruction were too slow to run (~1 min per 240-row window).

`attack(public_url, workdir)` returns X1test … X9test. `SYNTH_ARGS` are the synth sizes the
benchmark uses.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import zarr
from scipy.sparse.linalg import LinearOperator, lsqr

from benchmarks.red_team import baselines
from benchmarks.red_team import linear_models as lm
from benchmarks.red_team.harness import load_public
from seisctf.recipes import das_synth as ds
from seisctf.recipes.das_synth_swell import MAX_DIRECTION_DEG

SYNTH_ARGS = ["--channels", "256"]
FIT_WINDOW_S = 240  # rows (1 Hz) of each swell fit: shorter than the sea's 300 s coherence
DIRECTIONS_DEG = np.arange(0.0, 76.0, 7.5)
OVERSAMPLING = 2  # frequency grid: OVERSAMPLING × the window's resolution
DAMPING = 1e-2  # LSQR damping, relative to the data's norm
SPECTRUM_ROWS = 500  # rows of the most recent input whose mean spatial spectrum stands for the end
GAIN_ITERATIONS = 2
LSQR_ITERATIONS = 100


def public_cable(public_url: str) -> ds.Cable:
    """The cable the public `das` attrs describe (channels, spacing, gauge), default profile."""
    das = dict(zarr.open_group(public_url, mode="r").attrs["das"])
    return ds.Cable(
        n_channels=int(das["n_channels"]),
        channel_spacing_m=float(das["channel_spacing_m"]),
        gauge_length_m=float(das["gauge_length_m"]),
    )


def mode_dictionary(cable: ds.Cable, n_frequencies: int) -> tuple[np.ndarray, np.ndarray]:
    """(ω (F,) rad/s, modes (F, Θ, C) complex): the generator's strain-rate mode of a unit
    component at the centre of each of F sub-bands of its swell band, per direction; ε̇ =
    Im(m e^{iωτ}); each mode scaled to unit peak over the channels."""
    modes = []
    for theta in DIRECTIONS_DEG:
        quantile = (theta + MAX_DIRECTION_DEG) / (2 * MAX_DIRECTION_DEG)
        components = ds.Components(
            np.full(n_frequencies, 0.5),
            np.full(n_frequencies, quantile),
            np.zeros(n_frequencies),
        )
        sea = ds.SeaState(significant_wave_height_m=1.0, spreading_s=0.0)
        slot = SimpleNamespace(sea=sea, components=components)
        swell = ds.swell_modes(slot, cable, 0, cable.n_channels)
        n = swell.omega.size
        complex_modes = swell.modes[n:] + 1j * swell.modes[:n]
        peak = np.abs(complex_modes).max(axis=1, keepdims=True)
        modes.append(complex_modes / np.where(peak > 0, peak, 1.0))
        omega = swell.omega
    return omega, np.stack(modes, axis=1)


class SwellFit:
    """Damped least squares of a (T, C) window by Σ_{f,θ} g_x Im(c_{fθ} m_{fθ}(x) e^{iω_f t})."""

    def __init__(self, omega: np.ndarray, modes: np.ndarray, window: np.ndarray) -> None:
        self.omega, self.modes, self.window = omega, modes, window
        self.time = np.arange(window.shape[0], dtype=np.float64)
        self.gain = np.ones(window.shape[1])
        self.coefficients = np.zeros(modes.shape[:2], dtype=complex)
        for _ in range(GAIN_ITERATIONS):
            self._fit_coefficients()
            model = self.field(self.time, gain=np.ones_like(self.gain))
            power = (model**2).sum(axis=0)
            self.gain = np.where(power > 0, (model * window).sum(axis=0) / power, 0.0)
        self._fit_coefficients()

    def _spatial(self, coefficients: np.ndarray, gain: np.ndarray) -> np.ndarray:
        return (coefficients[:, None, :] @ self.modes)[:, 0, :] * gain[None, :]

    def field(self, time_s: np.ndarray, gain: np.ndarray | None = None) -> np.ndarray:
        """The fitted swell (len(time_s), C) at window-relative times (s)."""
        gain = self.gain if gain is None else gain
        spatial = self._spatial(self.coefficients, gain)
        return np.imag(np.exp(1j * time_s[:, None] * self.omega[None, :]) @ spatial)

    def _fit_coefficients(self) -> None:
        shape = self.modes.shape[:2]
        size = shape[0] * shape[1]
        basis = np.exp(1j * self.time[:, None] * self.omega[None, :])  # (T, F)

        def forward(vector: np.ndarray) -> np.ndarray:
            c = (vector[:size] + 1j * vector[size:]).reshape(shape)
            return np.imag(basis @ self._spatial(c, self.gain)).ravel()

        def adjoint(residual: np.ndarray) -> np.ndarray:
            # <r, Im(B Z)> = Im Σ_fd c_fd Q_fd, Q = Σ_x (Bᵀ r)_fx g_x m_fdx: ∂/∂(Re c, Im c)
            # = (Im Q, Re Q).
            projected = (basis.T @ residual.reshape(self.window.shape)) * self.gain[None, :]
            q = (self.modes @ projected[:, :, None])[:, :, 0]
            return np.concatenate([np.imag(q).ravel(), np.real(q).ravel()])

        operator = LinearOperator(
            (self.window.size, 2 * size), matvec=forward, rmatvec=adjoint, dtype=np.float64
        )
        damping = DAMPING * np.linalg.norm(self.window) / math.sqrt(self.window.size)
        solution = lsqr(operator, self.window.ravel(), damp=damping, iter_lim=LSQR_ITERATIONS)[0]
        self.coefficients = (solution[:size] + 1j * solution[size:]).reshape(shape)


def fit_window(cable: ds.Cable, window: np.ndarray) -> SwellFit:
    """The swell fit of one window (T rows at 1 Hz), frequencies OVERSAMPLING × finer than
    1/T over the generator's swell band."""
    low, high = ds.FREQUENCY_BAND_HZ
    n_frequencies = max(8, round((high - low) * window.shape[0] * OVERSAMPLING))
    omega, modes = mode_dictionary(cable, n_frequencies)
    return SwellFit(omega, modes, window)


def swell_forecast(cable: ds.Cable, recent: np.ndarray, steps: int) -> np.ndarray:
    """The last FIT_WINDOW_S rows' swell fit continued `steps` rows past the input's end."""
    window = recent[-FIT_WINDOW_S:]
    fit = fit_window(cable, window)
    return fit.field(window.shape[0] + np.arange(steps, dtype=np.float64))


def mean_spectrum_rows(recent: np.ndarray, rows: int, seed: int = 0) -> np.ndarray:
    """(rows, C) real rows whose |FFT over space|² all equal the mean over the last
    SPECTRUM_ROWS rows of the Wiener-denoised `recent` (random phases, Hermitian symmetric): a
    field with the expected spatial spectrum of the stationary sea, not one realisation's."""
    denoised = lm.wiener_denoise(recent)[-SPECTRUM_ROWS:]
    n_space = recent.shape[1]
    power = (np.abs(np.fft.rfft(denoised, axis=1)) ** 2).mean(axis=0)
    phase = np.random.default_rng(seed).uniform(0.0, 2.0 * np.pi, (rows, power.size))
    half = np.sqrt(power)[None, :] * np.exp(1j * phase)
    half[:, 0] = np.sqrt(power[0])
    if n_space % 2 == 0:
        half[:, -1] = np.sqrt(power[-1])
    return np.fft.irfft(half, n=n_space, axis=1)


def _recent_input(pair: dict) -> str:
    return pair.get("burn_in") or pair["train"][-1]


def _forecast_inputs(manifest: dict) -> dict[str, str]:
    """{test name: its most recent input's name} for the pairs scored on the short time."""
    return {
        pair["test"]: _recent_input(pair)
        for pair in manifest["pairs"]
        if "short_time" in pair["metrics"]
    }


def _legitimate(arrays: dict[str, np.ndarray], manifest: dict) -> dict[str, np.ndarray]:
    """The red team's best legitimate predictor: its hold-out selection among the baselines
    when it has one, else POD-VAR."""
    name = "holdout_best" if "holdout_best" in baselines.BASELINES else "pod_var"
    return baselines.BASELINES[name](arrays, manifest)


def _holdout_errors(
    cable: ds.Cable, arrays: dict[str, np.ndarray], manifest: dict
) -> dict[str, tuple[float, float]]:
    """{test name: (physics error, legitimate error)}: each forecasts its pair's most recent
    input's last k_short rows from the rows before them (Frobenius norms)."""
    k_short = int(manifest["k_short"])
    recent = _forecast_inputs(manifest)
    cut = {n: (a[:-k_short] if n in recent.values() else a) for n, a in arrays.items()}
    legitimate = _legitimate(cut, manifest)
    errors = {}
    for name, source in recent.items():
        held_out = arrays[source][-k_short:]
        physics = swell_forecast(cable, cut[source], k_short)
        errors[name] = (
            float(np.linalg.norm(physics - held_out)),
            float(np.linalg.norm(legitimate[name][:k_short] - held_out)),
        )
    return errors


def attack(public_url: str, workdir: Path) -> dict[str, np.ndarray]:
    """X1test … X9test regenerated from the public bundle (module docstring): the legitimate
    POD-VAR forecasts and reconstructions, the physics swell forecast taking the first k_short
    rows of a forecast where it beats POD-VAR on the public hold-out."""
    arrays, manifest = load_public(public_url)
    cable = public_cable(public_url)
    predictions = {
        name: np.array(values, dtype=np.float64)
        for name, values in _legitimate(arrays, manifest).items()
    }
    k_long = int(manifest["k_long"])
    for pair in manifest["pairs"]:
        if "long_time" in pair["metrics"]:
            recent_rows = arrays[_recent_input(pair)]
            predictions[pair["test"]][-k_long:] = mean_spectrum_rows(recent_rows, k_long)
    k_short = int(manifest["k_short"])
    recent = _forecast_inputs(manifest)
    for name, (physics_error, legitimate_error) in _holdout_errors(cable, arrays, manifest).items():
        print(f"{name}: hold-out error physics {physics_error:.4g}, POD-VAR {legitimate_error:.4g}")
        if physics_error < legitimate_error:
            predictions[name][:k_short] = swell_forecast(cable, arrays[recent[name]], k_short)
    return predictions
