"""Red-team attack on the global dataset: regenerate the withheld windows from the public bundle
with the public generator, then forecast what the physics does not explain with a baseline.

What a participant has: the public bundle (training arrays, manifest: sensor order, sampling,
the parametric pairs' depths), the docs and the installed package (`seisctf.recipes.global_*`,
with every equation and default). The hidden part (heterogeneous Earth, stations, moment
tensors, magnitudes, aftershocks, background events, microseisms) is drawn from the secret.

Per independent realisation (pairs 1, 2–3, 4–5, the parametric group; the few-snapshot pairs 6
and 7 have only 500 public rows, after the P waves, and are left to the baseline):

1. Location: each sensor's largest 25–100 s envelope peak (the main event's R1 where it has
   arrived), a grid search over 4000 trial epicentres (Fibonacci lattice, 3.2° apart) and
   origin times (every 5 s around the generator's public 0–200 s) for the most peaks within
   30 s of the package's R1 group delay at 50 s, then Nelder–Mead on (latitude, longitude,
   origin time) of the capped misfit (mean of min(|r|, 30 s)). (P onsets picked by STA/LTA
   were tried first: the microseisms and the other events make too many false picks.)
2. Green's functions: the package's generator (1D Earth, flat stations, the event alone) for
   the six unit moment tensors at the fitted hypocentre (depth 35 km, or the published depth).
3. A common time correction (the median best shift, −150 … 150 s, of every 8th sensor whose
   surface waves are in the training rows: the R1 peaks bias the origin time). Per sensor: a
   free linear combination of the six (its own amplitude and radiation) at the best of 31
   further time shifts (−45 … 45 s: its path delay), least squares on its training rows.
   Sensors the surface waves reach only after the training window get the global moment
   tensor (the leading eigenvector of the well-fitted sensors' coefficients) with their own
   amplitude and shift fitted on their body waves, kept only where it explains a fifth of the
   training rows' energy; every model is clipped at 3 × the sensor's largest public value.
4. The fitted model over the test window, plus `sensor_ar` (the best legitimate baseline on
   this dataset, and ten times cheaper than `pod_var`) run on the residuals (public arrays
   minus the model) for what the physics misses. Parametric group: located on X7train, the
   burn-ins X9train and X10train modelled at their published depths; the training arrays
   X6–X8 stay as they are for the baseline (their models would cost three more syntheses and
   serve only the residual's dynamics).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.signal import butter, hilbert, sosfiltfilt

from benchmarks.red_team import harness
from benchmarks.red_team.baselines import BASELINES
from seisctf.recipes.synth.global_earth import distance_azimuth
from seisctf.recipes.synth.global_synthesis import EARTH_RADIUS_KM, group_velocity_km_s
from seisctf.recipes.synth.global_wavefield import (
    GlobalPhysics,
    GlobalSource,
    fibonacci_sensors,
    synthesize_global,
)

SYNTH_ARGS = ["--sensors", "2048", "--duration", "3000"]
DURATION_S = 3000
TRAIN_STEPS, FEW_START = 2000, 1500
ASSUMED_DEPTH_KM = 35.0
TRIAL_EPICENTRES = 4000
SHIFTS = np.arange(-45, 46, 3)
WIDE_SHIFTS = np.arange(-150, 151, 5)
SINGLE_FIT_MAX_RESIDUAL = 0.8  # the global tensor must explain a fifth of the rows
MODEL_LIMIT = 3.0
MISFIT_CAP_S = 30.0
ORIGIN_RANGE_S = (-50.0, 255.0)  # default_sources draws origin times in 0–200 s
# R1 group delay at 50 s (the package's dispersion), s per radian of distance.
SECONDS_PER_RADIAN = EARTH_RADIUS_KM / float(group_velocity_km_s(50.0))
ONE_EVENT_1D = GlobalPhysics(heterogeneity=0.0, sites=False, other_events=False, ambient_rms=0.0)
UNIT_TENSORS = tuple(
    tuple(tuple(float(i == a and j == b or i == b and j == a) for j in range(3)) for i in range(3))
    for a, b in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
)
# Independent realisations: (training arrays used to locate, arrays modelled, window start).
GROUPS = {
    "forecast": (("X1train",), ("X1train",)),
    "noise_medium": (("X2train",), ("X2train",)),
    "noise_high": (("X3train",), ("X3train",)),
}


def surface_wave_peaks(x: np.ndarray) -> np.ndarray:
    """Time (s) of each sensor's largest 25–100 s envelope peak in `x` (time, sensor): the main
    event's R1 where it has arrived. NaN where the peak is not clear (below 3 × the median)."""
    band = butter(4, [0.01, 0.04], "bandpass", fs=1.0, output="sos")
    envelope = np.abs(hilbert(sosfiltfilt(band, x, axis=0), axis=0))
    peaks = envelope.argmax(axis=0).astype(np.float64)
    clear = envelope.max(axis=0) > 3.0 * np.median(envelope, axis=0)
    return np.where(clear, peaks, np.nan)


def _misfit(params, picks, lat, lon) -> float:
    source_lat, source_lon, origin = params
    if abs(source_lat) > 90:
        return 1e9
    distance = distance_azimuth(source_lat, source_lon, lat, lon)[0]
    residual = np.abs(picks - origin - distance * SECONDS_PER_RADIAN)
    residual = residual[np.isfinite(residual)]
    return float(np.mean(np.minimum(residual, MISFIT_CAP_S))) if residual.size else 1e9


def locate(picks: np.ndarray, lat, lon) -> tuple[float, float, float]:
    """(latitude, longitude, origin time s): the trial epicentre and origin time (within the
    generator's public range) with the most R1 peaks within MISFIT_CAP_S of their predicted
    time, refined by Nelder–Mead on the capped mean misfit."""
    trial_lat, trial_lon = fibonacci_sensors(TRIAL_EPICENTRES)
    origins = np.arange(*ORIGIN_RANGE_S, 5.0)
    best = (-1, 0.0, 0.0, 0.0)
    finite = np.isfinite(picks)
    for source_lat, source_lon in zip(trial_lat, trial_lon, strict=True):
        distance = distance_azimuth(source_lat, source_lon, lat[finite], lon[finite])[0]
        residual = picks[finite] - distance * SECONDS_PER_RADIAN
        inliers = (np.abs(residual[None, :] - origins[:, None]) < MISFIT_CAP_S).sum(axis=1)
        if inliers.max() > best[0]:
            best = (int(inliers.max()), float(source_lat), float(source_lon))
            best += (float(origins[inliers.argmax()]),)
    result = minimize(
        _misfit, best[1:], args=(picks, lat, lon), method="Nelder-Mead", options={"xatol": 0.01}
    )
    return tuple(float(v) for v in result.x)


def greens_functions(hypocentre, depth_km: float, n_sensors: int) -> np.ndarray:
    """(6, time, sensor) float64 traces of the six unit tensors, 1D Earth, event alone."""
    latitude, longitude, origin = hypocentre
    sources = [
        GlobalSource(latitude, longitude, depth_km, origin, 7.5, tensor) for tensor in UNIT_TENSORS
    ]
    store = synthesize_global(
        n_sensors=n_sensors, duration_s=DURATION_S, sources=sources, physics=ONE_EVENT_1D
    )
    return store.u.values.astype(np.float64)


def _shifted(traces: np.ndarray, shift: int) -> np.ndarray:
    """traces delayed by `shift` samples along axis 1 (zeros shifted in)."""
    out = np.zeros_like(traces)
    if shift >= 0:
        out[:, shift:] = traces[:, : traces.shape[1] - shift]
    else:
        out[:, :shift] = traces[:, -shift:]
    return out


def fit_sensor(data: np.ndarray, rows: slice, basis: np.ndarray, shifts=SHIFTS):
    """Best (coefficients (6,), shift, relative residual) of `data` (rows of one sensor) by
    the shifted basis (6, time)."""
    best = (np.zeros(6), 0, 1.0)
    norm = float(data @ data) or 1.0
    for shift in shifts:
        design = _shifted(basis, int(shift))[:, rows].T
        if not np.any(design):
            continue
        coefficients, *_ = np.linalg.lstsq(design, data, rcond=None)
        residual = float(np.sum((data - design @ coefficients) ** 2)) / norm
        if residual < best[2]:
            best = (coefficients, int(shift), residual)
    return best


def model_realisation(
    data: dict[str, np.ndarray], greens: dict[str, np.ndarray], starts: dict[str, int]
) -> dict[str, np.ndarray]:
    """Fitted model of each array in `data` over the whole record, (time, sensor) each, and
    over every sensor: per-sensor combinations where the training rows constrain the surface
    waves, else the global tensor with per-sensor amplitude and shift."""
    models = {}
    for name, x in data.items():
        basis = greens[name]
        rows = slice(starts[name], starts[name] + x.shape[0])
        n_sensors = x.shape[1]
        model = np.zeros((DURATION_S, n_sensors))
        energy_train = (basis[:, rows] ** 2).sum(axis=(0, 1))
        energy_all = (basis**2).sum(axis=(0, 1))
        covered = energy_train > 0.5 * energy_all
        # The located origin time is biased by the R1 peaks' period: a common correction first,
        # from a wide shift search on a sample of the well-covered sensors.
        sample = np.flatnonzero(covered)[::8]
        wide = [fit_sensor(x[:, s], rows, basis[:, :, s], WIDE_SHIFTS) for s in sample]
        good_wide = [fit[1] for fit in wide if fit[2] < 0.7]
        correction = int(np.median(good_wide)) if good_wide else 0
        shifts = correction + SHIFTS
        fits = [fit_sensor(x[:, s], rows, basis[:, :, s], shifts) for s in range(n_sensors)]
        good = [s for s in range(n_sensors) if covered[s] and fits[s][2] < 0.7]
        if good:
            stacked = np.array([fits[s][0] / np.linalg.norm(fits[s][0]) for s in good])
            tensor = np.linalg.eigh(stacked.T @ stacked)[1][:, -1]
        else:
            tensor = np.eye(6)[2]
        for s in range(n_sensors):
            coefficients, shift, residual = fits[s]
            if not covered[s] or residual >= 0.7:
                single = np.tensordot(tensor, basis[:, :, s], axes=1)[None, :]
                coefficient, shift, residual = fit_sensor(x[:, s], rows, single, shifts)
                if residual >= SINGLE_FIT_MAX_RESIDUAL:
                    continue
                model[:, s] = coefficient[0] * _shifted(single, shift)[0]
            else:
                model[:, s] = coefficients @ _shifted(basis[:, :, s], shift)
            # A fit on a few body-wave samples can predict absurd surface waves: cap the model
            # at a few times the sensor's largest public value.
            limit = MODEL_LIMIT * np.abs(x[:, s]).max()
            model[:, s] = np.clip(model[:, s], -limit, limit)
        models[name] = model
    return models


def attack(public_url: str, workdir: Path, baseline: str = "sensor_ar") -> dict:
    arrays, manifest = harness.load_public(public_url)
    n_sensors = arrays["X1train"].shape[1]
    lat, lon = fibonacci_sensors(n_sensors)
    starts = {name: (FEW_START if x.shape[0] < TRAIN_STEPS else 0) for name, x in arrays.items()}
    models: dict[str, np.ndarray] = {}
    for role, (inputs, modelled) in GROUPS.items():
        hypocentre = locate(surface_wave_peaks(arrays[inputs[0]]), lat, lon)
        harness.log(f"global attack: {role} located at {np.round(hypocentre, 2)}")
        greens = greens_functions(hypocentre, ASSUMED_DEPTH_KM, n_sensors)
        models.update(
            model_realisation(
                {n: arrays[n] for n in modelled}, dict.fromkeys(modelled, greens), starts
            )
        )
    # Parametric group: one epicentre, published depths.
    pairs = {pair["test"]: pair for pair in manifest["pairs"]}
    depths = {
        "X9train": pairs["X8test"]["parameters"]["test"],
        "X10train": pairs["X9test"]["parameters"]["test"],
    }
    hypocentre = locate(surface_wave_peaks(arrays["X7train"]), lat, lon)
    harness.log(f"global attack: parametric group located at {np.round(hypocentre, 2)}")
    for name, depth in depths.items():
        greens = greens_functions(hypocentre, depth, n_sensors)
        models.update(model_realisation({name: arrays[name]}, {name: greens}, starts))
    residuals = {}
    for name, x in arrays.items():
        model = models.get(name)
        window = slice(starts[name], starts[name] + x.shape[0])
        residuals[name] = x - model[window] if model is not None else x
    predictions = BASELINES[baseline](residuals, manifest)
    for pair in manifest["pairs"]:
        source = pair.get("burn_in") or pair["train"][-1]
        model = models.get(source)
        if model is None:
            continue
        start = pair["start_index"]
        rows = pair["shape"][0]
        predictions[pair["test"]] = predictions[pair["test"]] + model[start : start + rows]
    return predictions
