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
   further time shifts (−45 … 45 s: its path delay), least squares on its training rows, all
   sensors at once per shift (`fit_sensors`: batched normal equations), clipped at 3 × the
   sensor's largest public value. Sensors the surface waves reach only after the training
   window get the global moment tensor (the leading eigenvector of the well-fitted sensors'
   coefficients) with their own gain and shift fitted on their body waves, kept only where it
   explains a fifth of the training rows' energy, and not clipped: their surface waves are
   rightly many times larger than anything in their public rows.
4. The fitted model over the test window, plus a baseline (`holdout_best` by default: the
   best legitimate method on this dataset) run on the residuals (public arrays minus the
   model) for what the physics misses. Parametric group: located on X7train, the burn-ins
   X9train and X10train modelled at their published depths; the training arrays X6–X8 stay
   as they are for the baseline. Pairs without a model (6, 7) take the baseline's forecast of
   the public arrays themselves.
5. Long-time rows (`tails.with_model_power`): the model's phases 1000 s on are not to be
   trusted, its energy is: a flat spectrum at the model's mean power over the scored
   wavenumbers plus the spectrum of the baseline's hedged tail of the public arrays (on the
   development bundle the residuals' tail, whose hold-out sees residual arrays, scored 13
   points less on E2).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.signal import butter, hilbert, sosfiltfilt

from benchmarks.red_team import harness, tails
from benchmarks.red_team.baselines import BASELINES
from seisctf.synth.global_earth import distance_azimuth
from seisctf.synth.global_synthesis import EARTH_RADIUS_KM, group_velocity_km_s
from seisctf.synth.global_wavefield import (
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
GOOD_FIT_RESIDUAL = 0.7  # a per-sensor fit that explains 30 % of the rows
SINGLE_FIT_MAX_RESIDUAL = 0.8  # the global tensor must explain a fifth of the rows
MODEL_LIMIT = 3.0
FIT_BLOCK = 256  # sensors per block of the vectorised fit
MISFIT_CAP_S = 30.0
ORIGIN_RANGE_S = (-50.0, 255.0)  # default_sources draws origin times in 0–200 s
# R1 group delay at 50 s (the package's dispersion), s per radian of distance.
SECONDS_PER_RADIAN = EARTH_RADIUS_KM / float(group_velocity_km_s(50.0))
ONE_EVENT_1D = GlobalPhysics(heterogeneity=0.0, sites=False, other_events=False, ambient_rms=0.0)
UNIT_TENSORS = tuple(
    tuple(tuple(float(i == a and j == b or i == b and j == a) for j in range(3)) for i in range(3))
    for a, b in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
)
# Independent realisations modelled, each located on its own training array; the parametric
# group is located on X7train and its burn-ins modelled at the published depths of their pairs.
GROUPS = {"forecast": "X1train", "noise_medium": "X2train", "noise_high": "X3train"}
PARAMETRIC_LOCATED_ON = "X7train"
PARAMETRIC_BURN_INS = {"X9train": "X8test", "X10train": "X9test"}


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


def shifted_window(basis: np.ndarray, rows: slice, shift: int) -> np.ndarray:
    """Rows `rows` of `basis` (traces, time, sensor) delayed by `shift` samples: (traces,
    rows, sensor), zeros where the delayed basis has no sample."""
    out = np.zeros((basis.shape[0], rows.stop - rows.start, basis.shape[2]))
    first, last = rows.start - shift, rows.stop - shift
    low, high = max(first, 0), min(last, basis.shape[1])
    if low < high:
        out[:, low - first : high - first] = basis[:, low:high]
    return out


def fit_sensors(
    x: np.ndarray, basis: np.ndarray, rows: slice, shifts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sensor, the best least-squares fit of `x` (rows, sensor) by its own traces of `basis`
    (traces, time, sensor) delayed by one of `shifts`, over `rows` of the basis: (coefficients
    (sensor, traces), shift (sensor,), relative residual (sensor,); 1 where nothing fits). All
    sensors at once per shift, by their normal equations, FIT_BLOCK sensors at a time."""
    n_traces, n_sensors = basis.shape[0], x.shape[1]
    coefficients = np.zeros((n_sensors, n_traces))
    best_shift = np.zeros(n_sensors, dtype=int)
    residual = np.ones(n_sensors)
    for block in range(0, n_sensors, FIT_BLOCK):
        sensors = slice(block, min(block + FIT_BLOCK, n_sensors))
        data = x[:, sensors]
        norm = np.maximum((data**2).sum(axis=0), np.finfo(float).tiny)
        for shift in shifts:
            design = shifted_window(basis[:, :, sensors], rows, int(shift)).transpose(2, 1, 0)
            gram = design.transpose(0, 2, 1) @ design
            rhs = np.einsum("src,rs->sc", design, data)
            scale = np.trace(gram, axis1=1, axis2=2) / n_traces
            ridge = 1e-10 * np.maximum(scale, np.finfo(float).tiny)
            system = gram + ridge[:, None, None] * np.eye(n_traces)
            solved = np.linalg.solve(system, rhs[..., None])[..., 0]
            fitted = np.where(scale > 0, 1.0 - (solved * rhs).sum(axis=1) / norm, 1.0)
            better = fitted < residual[sensors]
            coefficients[sensors][better] = solved[better]
            best_shift[sensors][better] = int(shift)
            residual[sensors][better] = fitted[better]
    return coefficients, best_shift, residual


def synthesised(basis: np.ndarray, coefficients: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """(time, sensor): each sensor's combination `coefficients` (sensor, traces) of its traces of
    `basis` (traces, time, sensor) delayed by its shift."""
    model = np.zeros(basis.shape[1:])
    whole = slice(0, basis.shape[1])
    for shift in np.unique(shifts):
        sensors = np.flatnonzero(shifts == shift)
        delayed = shifted_window(basis[:, :, sensors], whole, int(shift))
        model[:, sensors] = np.einsum("cts,sc->ts", delayed, coefficients[sensors])
    return model


def model_realisation(x: np.ndarray, basis: np.ndarray, start: int) -> np.ndarray:
    """Fitted model (time, sensor) of the public array `x` (rows, sensor; its first row at step
    `start` of the record) over the whole record: per-sensor combinations of the six Green's
    functions `basis` (6, time, sensor) where the training rows hold the surface waves, else the
    global tensor with a per-sensor amplitude and shift (unclipped; kept where it explains
    1 − SINGLE_FIT_MAX_RESIDUAL of the rows)."""
    rows = slice(start, start + x.shape[0])
    energy_train = (basis[:, rows] ** 2).sum(axis=(0, 1))
    covered = energy_train > 0.5 * (basis**2).sum(axis=(0, 1))
    # The located origin time is biased by the R1 peaks' period: a common correction first,
    # from a wide shift search on a sample of the well-covered sensors.
    sample = np.flatnonzero(covered)[::8]
    _, wide, wide_residual = fit_sensors(x[:, sample], basis[..., sample], rows, WIDE_SHIFTS)
    good_wide = wide[wide_residual < GOOD_FIT_RESIDUAL]
    shifts = (int(np.median(good_wide)) if good_wide.size else 0) + SHIFTS
    coefficients, best_shifts, residual = fit_sensors(x, basis, rows, shifts)
    good = covered & (residual < GOOD_FIT_RESIDUAL)
    model = np.zeros(basis.shape[1:])
    tensor = np.eye(6)[2]
    if good.any():
        unit = coefficients[good] / np.linalg.norm(coefficients[good], axis=1, keepdims=True)
        tensor = np.linalg.eigh(unit.T @ unit)[1][:, -1]
        model[:, good] = synthesised(basis[..., good], coefficients[good], best_shifts[good])
        # A fit on the surface waves cannot predict more than a few times what it fitted.
        limit = MODEL_LIMIT * np.abs(x[:, good]).max(axis=0)
        model[:, good] = np.clip(model[:, good], -limit, limit)
    far = np.flatnonzero(~good)
    single = np.tensordot(tensor, basis[..., far], axes=1)[None]
    gains, far_shifts, far_residual = fit_sensors(x[:, far], single, rows, shifts)
    kept = far_residual < SINGLE_FIT_MAX_RESIDUAL
    model[:, far[kept]] = synthesised(single[..., kept], gains[kept], far_shifts[kept])
    return model


def fitted_models(arrays: dict[str, np.ndarray], manifest: dict) -> dict[str, np.ndarray]:
    """{public array: fitted model (time, sensor) over its whole record} of every array the
    attack models (module docstring, steps 1–3)."""
    n_sensors = arrays["X1train"].shape[1]
    lat, lon = fibonacci_sensors(n_sensors)
    models: dict[str, np.ndarray] = {}
    located = {name: (name, ASSUMED_DEPTH_KM) for name in GROUPS.values()}
    pairs = {pair["test"]: pair for pair in manifest["pairs"]}
    for name, test in PARAMETRIC_BURN_INS.items():  # one epicentre, published depths
        located[name] = (PARAMETRIC_LOCATED_ON, pairs[test]["parameters"]["test"])
    hypocentres = {}
    for modelled, (located_on, depth) in located.items():
        if located_on not in hypocentres:
            hypocentres[located_on] = locate(surface_wave_peaks(arrays[located_on]), lat, lon)
            harness.log(f"global attack: {located_on} located at {hypocentres[located_on]}")
        basis = greens_functions(hypocentres[located_on], depth, n_sensors)
        x = arrays[modelled]
        models[modelled] = model_realisation(x, basis, FEW_START if len(x) < TRAIN_STEPS else 0)
    return models


def attack(public_url: str, workdir: Path, baseline: str = "holdout_best") -> dict:
    """X1test … X9test: where a realisation is modelled, the model over the test window plus
    `baseline`'s forecast of the residuals (public arrays minus models), and long-time rows from
    `tails.with_model_power`; elsewhere `baseline`'s forecast of the public arrays."""
    arrays, manifest = harness.load_public(public_url)
    models = fitted_models(arrays, manifest)
    residuals = {}
    for name, x in arrays.items():
        start = FEW_START if x.shape[0] < TRAIN_STEPS else 0
        residuals[name] = x - models[name][start : start + x.shape[0]] if name in models else x
    predictions = BASELINES[baseline](arrays, manifest)
    of_residuals = BASELINES[baseline](residuals, manifest)
    k_long = manifest["k_long"]
    for pair in manifest["pairs"]:
        model = models.get(pair.get("burn_in") or pair["train"][-1])
        if model is None:
            continue
        window = model[pair["start_index"] : pair["start_index"] + pair["shape"][0]]
        prediction = of_residuals[pair["test"]] + window
        if "long_time" in pair["metrics"]:
            prediction[-k_long:] = tails.with_model_power(
                predictions[pair["test"]][-k_long:], window[-k_long:], manifest["modes"]
            )
        predictions[pair["test"]] = prediction
    return predictions
