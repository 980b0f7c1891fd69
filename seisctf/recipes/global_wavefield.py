"""Offline synthetic global wavefield: vertical ground velocity on a Fibonacci sphere.

Surface waves (normal-mode summation on a sphere of radius a = 6371 km, source at the pole of
epicentral distance Δ; Dahlen & Tromp 1998, *Theoretical Global Seismology*, ch. 10–11; Stein &
Wysession 2003, §2.9), for τ = t − t0 ≥ 0 and exactly 0 before the origin time t0::

    v(Δ, t) = A Σ_{l=1..L} w_l P_l(cos Δ) sin(ω_l τ) exp(−ω_l τ / (2Q))
    k_l a = l + 1/2                                  Jeans' relation (Jeans 1923)
    ω_l = k_l c(2π/ω_l)                              fixed point, 12 iterations (contraction ~0.1)
    c(T) = s · (3.5 + 1.0 (1 − exp(−T / 150 s))) km/s
    w_l = (2l+1)/(4π) · (k_l² a / ω_l) · exp(−(ω_l t_h)² / 4) · exp(−k_l h)

c(T) is a rough empirical fit (within ~10 % at 30–200 s) to global-average fundamental-mode Rayleigh
phase velocities (PREM, Dziewonski & Anderson 1981; Ekström et al. 1997); s = velocity_scale. Group
velocity U = c / (1 + (T/c) dc/dT) is 3.5–3.7 km/s at 20–100 s (30–32 s per degree).
In w_l: (2l+1)/(4π) is the addition theorem's factor. k²/ω is the velocity excitation of a step
moment (Gilbert 1971; Dahlen & Tromp 1998: displacement Σ ω⁻² (M:ε_l) s_l (1 − cos ω_l t), with the
strain ε at the source ∝ k and each surface-bound eigenfunction, normalised over the Earth, ∝ k^½);
without it the degrees l ≲ 20 add a large, unrealistic ~1000 s swell ahead of R1. exp(−(ω t_h)²/4)
is the spectrum of a Gaussian source-time function of half-duration t_h; exp(−k h) the decay of the
excitation with source depth h (Rayleigh eigenfunctions decay like exp(−k z)). Q is one quality
factor for all modes. P_l comes from the recurrence (l+1) P_{l+1} = (2l+1) x P_l − l P_{l−1}.
L (`max_degree`) defaults to the degree where the source spectrum falls below 1e-4, and at most the
degree of period 2.5 × the Nyquist period. The sum is a scalar-wave analogue: no radiation pattern,
no overtones, no ellipticity or lateral heterogeneity. R1 leaves the source at t0 and reaches
~95° by 3000 s; R2 needs (360° − Δ) × ~31 s per degree, so a 3000 s record holds R1 only.

Body waves: P (p or P) and S (s or S) first arrivals at iasp91 travel times (Kennett & Engdahl
1991) from obspy.taup (Crotwell et al. 1999), tabulated once per source depth every 1° (TauP's
sampled branches without ray-shooting refinement, within ~0.05 s) and linearly interpolated. Each
is a Gaussian-derivative pulse −x exp((1 − x²)/2), x = (τ − T_phase)/σ, σ = 4 s (P), 8 s (S): peaks
±1 one σ either side of the arrival, which is its zero crossing. Amplitudes B_P g(Δ) and
B_S = 2 B_P, g(Δ) = 1/sqrt(max(sin Δ, sin 10°)) (a simple geometric spreading, capped near 0° and
180°); no radiation pattern; no pulse where TauP has no arrival (the core shadow beyond ~98°;
diffracted and core phases are left out).

Amplitude: A makes peaks O(1) (R1 at 90° from a 30 km deep default source ≈ 1): the unit is
m/s on an arbitrary scale, the same for all realisations, so amplitude changes with depth are real.

Sensors: `fibonacci_sensors`; realisations and their parameters: `GlobalSource`, `default_sources`.

Bitwise reproducibility for any chunking: the time × mode basis and the mode × sensor matrix are
rounded to integers (2^22 and 2^30 times their values, the latter normalised by Σ|w_l|), so every
partial sum of the one matmul per block is an integer below 2^53, exact in float64 whatever order
BLAS sums in. The rounding adds a deterministic error of ~1e-7 of the peak (two float32 ulps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import __version__
from seisctf.conventions import (
    ATTR_DATASET,
    ATTR_PARAMETER_NAME,
    ATTR_SAMPLING_RATE,
    ATTR_SENSOR_ORDER,
    ATTR_START_TIME,
    LATITUDE,
    LONGITUDE,
    REALISATION,
    ROLE,
    ROLES,
    SENSOR,
    TIME,
    WAVEFIELD_VAR,
    time_space_chunks,
)
from seisctf.errors import InvalidInput

EARTH_RADIUS_KM = 6371.0
GOLDEN_ANGLE_DEG = 180.0 * (3.0 - math.sqrt(5.0))
START_TIME = "2000-01-01T00:00:00Z"
PARAMETER_NAME = "source_depth_km"
SENSOR_ORDER = (
    "Fibonacci lattice, north to south: sensor i of N at latitude asin(1 - (2i+1)/N) and "
    f"longitude (i * {GOLDEN_ANGLE_DEG:.10f}) mod 360 mapped to (-180, 180] degrees"
)
AMPLITUDE = 2.43e-3  # A: R1 peak at 90 degrees ~ 1 for the default source
BODY_P_AMPLITUDE = 0.12  # B_P relative to A-scaled surface waves
BODY_S_TO_P = 2.0
P_WIDTH_S = 4.0
S_WIDTH_S = 8.0
SPREADING_MIN_SIN = math.sin(math.radians(10.0))
SOURCE_SPECTRUM_FLOOR = 1e-4
_BASIS_BITS = 22
_MODE_BITS = 30


@dataclass(frozen=True)
class GlobalSource:
    """One event: epicentre (degrees), depth (km), origin time (s after start_time), medium and
    source parameters, its CTF role and the varied parameter's value (NaN when not parametric)."""

    latitude_deg: float
    longitude_deg: float
    depth_km: float
    origin_time_s: float
    velocity_scale: float = 1.0
    q: float = 200.0
    half_duration_s: float = 20.0
    role: str = "forecast"
    parameter_value: float = math.nan


@dataclass(frozen=True, eq=False)
class TravelTimeTable:
    """First P and S arrival times (s after origin, NaN where none) on a distance grid (degrees)."""

    depth_km: float
    distance_deg: np.ndarray
    p_time_s: np.ndarray
    s_time_s: np.ndarray


@lru_cache(maxsize=64)
def travel_time_table(depth_km: float, step_deg: float = 1.0) -> TravelTimeTable:
    """iasp91 first P (p, P) and S (s, S) times every `step_deg` from 0 to 180 degrees."""
    from obspy.taup import TauPyModel

    model = TauPyModel("iasp91")
    distance_deg = np.linspace(0.0, 180.0, int(round(180.0 / step_deg)) + 1)
    p_time_s = np.full(distance_deg.shape, np.nan)
    s_time_s = np.full(distance_deg.shape, np.nan)
    for i, distance in enumerate(distance_deg):
        arrivals = model.get_travel_times(
            float(depth_km), float(distance), ["p", "P", "s", "S"], ray_param_tol=1e9
        )
        p_times = [a.time for a in arrivals if a.name in ("p", "P")]
        s_times = [a.time for a in arrivals if a.name in ("s", "S")]
        p_time_s[i] = min(p_times, default=np.nan)
        s_time_s[i] = min(s_times, default=np.nan)
    for column in (distance_deg, p_time_s, s_time_s):
        column.flags.writeable = False  # cached and shared
    return TravelTimeTable(float(depth_km), distance_deg, p_time_s, s_time_s)


def phase_velocity_km_s(period_s: np.ndarray, velocity_scale: float = 1.0) -> np.ndarray:
    """Empirical fundamental-mode Rayleigh phase velocity c(T) in km/s."""
    return velocity_scale * (3.5 + 1.0 * (1.0 - np.exp(-np.asarray(period_s) / 150.0)))


def mode_frequencies(max_degree: int, velocity_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Wavenumbers k_l (1/km) and angular frequencies ω_l (rad/s) of degrees l = 1..max_degree."""
    wavenumber = (np.arange(1, max_degree + 1) + 0.5) / EARTH_RADIUS_KM
    omega = wavenumber * 4.0 * velocity_scale
    for _ in range(12):
        omega = wavenumber * phase_velocity_km_s(2.0 * np.pi / omega, velocity_scale)
    return wavenumber, omega


def mode_weights(wavenumber: np.ndarray, omega: np.ndarray, source: GlobalSource) -> np.ndarray:
    """w_l = (2l+1)/(4π) (k_l² a / ω_l) exp(−(ω_l t_h)²/4) exp(−k_l h) for l = 1..L."""
    degree = np.arange(1, wavenumber.size + 1)
    return (
        (2.0 * degree + 1.0)
        / (4.0 * np.pi)
        * (wavenumber**2 * EARTH_RADIUS_KM / omega)
        * np.exp(-((omega * source.half_duration_s) ** 2) / 4.0)
        * np.exp(-wavenumber * source.depth_km)
    )


def legendre_table(cos_distance: np.ndarray, max_degree: int) -> np.ndarray:
    """P_l(x) for l = 1..max_degree, shape (max_degree, sensor), by the upward recurrence."""
    table = np.empty((max_degree, cos_distance.size))
    previous, current = np.ones_like(cos_distance), cos_distance.astype(np.float64)
    for degree in range(1, max_degree + 1):
        table[degree - 1] = current
        previous, current = (
            current,
            ((2 * degree + 1) * cos_distance * current - degree * previous) / (degree + 1),
        )
    return table


def cos_epicentral_distance(
    latitude_deg: np.ndarray, longitude_deg: np.ndarray, source: GlobalSource
) -> np.ndarray:
    """cos Δ between each sensor and the epicentre, clipped to [−1, 1]."""
    lat, lon = np.radians(latitude_deg), np.radians(longitude_deg)
    lat0, lon0 = math.radians(source.latitude_deg), math.radians(source.longitude_deg)
    cos_distance = math.sin(lat0) * np.sin(lat) + math.cos(lat0) * np.cos(lat) * np.cos(lon - lon0)
    return np.clip(cos_distance, -1.0, 1.0)


def default_max_degree(sources: list[GlobalSource], sampling_rate_hz: float) -> int:
    """Degree where the source spectrum falls below 1e-4, at most the degree of period 2.5 × the
    Nyquist period; the largest over `sources`."""
    degrees = []
    for source in sources:
        omega_source = 2.0 * math.sqrt(-math.log(SOURCE_SPECTRUM_FLOOR)) / source.half_duration_s
        omega = min(omega_source, 2.0 * math.pi * sampling_rate_hz / 5.0)
        velocity = float(phase_velocity_km_s(2.0 * math.pi / omega, source.velocity_scale))
        degrees.append(math.ceil(omega / velocity * EARTH_RADIUS_KM - 0.5))
    return max(1, *degrees)


def _body_waves(
    tau_s: np.ndarray, cos_distance: np.ndarray, travel_times: TravelTimeTable
) -> np.ndarray:
    """P and S Gaussian-derivative pulses, (time, sensor) float64."""
    distance_deg = np.degrees(np.arccos(cos_distance))
    spreading = 1.0 / np.sqrt(np.maximum(np.sin(np.radians(distance_deg)), SPREADING_MIN_SIN))
    body = np.zeros((tau_s.size, cos_distance.size))
    phases = (
        (travel_times.p_time_s, P_WIDTH_S, BODY_P_AMPLITUDE),
        (travel_times.s_time_s, S_WIDTH_S, BODY_P_AMPLITUDE * BODY_S_TO_P),
    )
    for table_s, width_s, amplitude in phases:
        arrival_s = np.interp(distance_deg, travel_times.distance_deg, table_s)
        present = np.isfinite(arrival_s)
        x = (tau_s[:, None] - arrival_s[None, present]) / width_s
        body[:, present] += (amplitude * spreading[present]) * (-x * np.exp(0.5 * (1.0 - x * x)))
    return body


def wavefield_block(
    times_s: np.ndarray,
    latitude_deg: np.ndarray,
    longitude_deg: np.ndarray,
    source: GlobalSource,
    travel_times: TravelTimeTable,
    max_degree: int,
) -> np.ndarray:
    """Vertical velocity (time, sensor) float32 at `times_s` (s after start_time) and sensors
    (degrees). Each element depends only on its own time, sensor and the source: any block of a
    larger grid is bitwise equal to the same slice of the whole."""
    tau_s = np.asarray(times_s, dtype=np.float64) - source.origin_time_s
    cos_distance = cos_epicentral_distance(
        np.asarray(latitude_deg, dtype=np.float64),
        np.asarray(longitude_deg, dtype=np.float64),
        source,
    )
    wavenumber, omega = mode_frequencies(max_degree, source.velocity_scale)
    weights = mode_weights(wavenumber, omega, source)
    weight_sum = float(weights.sum())
    mode_scale = weights * (2.0**_MODE_BITS / weight_sum)
    modes = np.rint(legendre_table(cos_distance, max_degree) * mode_scale[:, None])
    phase = np.maximum(tau_s, 0.0)[:, None] * omega[None, :]
    basis = np.rint(np.sin(phase) * np.exp(phase / (-2.0 * source.q)) * 2.0**_BASIS_BITS)
    surface = (basis @ modes) * (weight_sum * AMPLITUDE / 2.0 ** (_BASIS_BITS + _MODE_BITS))
    field = surface + _body_waves(tau_s, cos_distance, travel_times)
    field[tau_s < 0.0] = 0.0
    return field.astype(np.float32)


def fibonacci_sensors(n_sensors: int) -> tuple[np.ndarray, np.ndarray]:
    """Latitudes and longitudes (degrees, float64, shape (n_sensors,)) of the Fibonacci lattice,
    north to south; longitudes in (−180, 180]."""
    if int(n_sensors) != n_sensors or n_sensors < 1:
        raise InvalidInput("n_sensors", f"must be a positive integer, got {n_sensors!r}")
    index = np.arange(int(n_sensors), dtype=np.float64)
    latitude = np.degrees(np.arcsin(1.0 - (2.0 * index + 1.0) / n_sensors))
    longitude = np.mod(index * GOLDEN_ANGLE_DEG, 360.0)
    longitude[longitude > 180.0] -= 360.0
    return latitude, longitude


def default_sources(
    seed: int,
    parameter_values: tuple[float, ...] = (10.0, 30.0, 50.0),
    interpolation: float = 40.0,
    extrapolation: float = 70.0,
) -> list[GlobalSource]:
    """The default realisations: five independent random events (roles forecast … few_noisy),
    then one shared random epicentre and origin time at the source depths (km) `parameter_values`
    (param_train), `interpolation` (param_interp) and `extrapolation` (param_extrap).

    Epicentres are uniform on the sphere, depths uniform in 10–100 km, origin times in 0–200 s,
    all drawn in this order from numpy.random.default_rng(seed)."""
    rng = np.random.default_rng(seed)

    def epicentre() -> tuple[float, float]:
        return float(np.degrees(np.arcsin(rng.uniform(-1.0, 1.0)))), float(rng.uniform(-180, 180))

    sources = []
    for role in ROLES[:5]:
        latitude, longitude = epicentre()
        depth_km, origin_s = float(rng.uniform(10.0, 100.0)), float(rng.uniform(0.0, 200.0))
        sources.append(GlobalSource(latitude, longitude, depth_km, origin_s, role=role))
    latitude, longitude = epicentre()
    origin_s = float(rng.uniform(0.0, 200.0))
    varied = [("param_train", float(v)) for v in parameter_values]
    varied += [("param_interp", float(interpolation)), ("param_extrap", float(extrapolation))]
    for role, depth_km in varied:
        sources.append(
            GlobalSource(
                latitude, longitude, depth_km, origin_s, role=role, parameter_value=depth_km
            )
        )
    return sources


def _check_source(index: int, source: GlobalSource) -> None:
    what = f"source {index} ({source.role})"
    if source.role not in ROLES:
        raise InvalidInput(what, f"role must be one of {ROLES}")
    if not (-90.0 <= source.latitude_deg <= 90.0 and math.isfinite(source.longitude_deg)):
        raise InvalidInput(what, "needs latitude in [-90, 90] and a finite longitude (degrees)")
    if not 0.0 <= source.depth_km < 700.0:
        raise InvalidInput(what, f"depth must be in [0, 700) km, got {source.depth_km}")
    for name in ("velocity_scale", "q", "half_duration_s"):
        value = getattr(source, name)
        if not (math.isfinite(value) and value > 0):
            raise InvalidInput(what, f"{name} must be positive, got {value}")
    if not math.isfinite(source.origin_time_s):
        raise InvalidInput(what, "origin_time_s must be finite")


def _realisation_block(time_index, latitude_deg, longitude_deg, *, sampling_rate_hz, **kwargs):
    return wavefield_block(time_index / sampling_rate_hz, latitude_deg, longitude_deg, **kwargs)


def synthesize_global(
    n_sensors: int = 2048,
    duration_s: float = 3000.0,
    sampling_rate_hz: float = 1.0,
    seed: int = 0,
    sources: list[GlobalSource] | None = None,
    max_degree: int | None = None,
    time_chunk: int | None = None,
    sensor_chunk: int | None = None,
) -> xr.Dataset:
    """Lazy global wavefield store: `u(realisation, time, sensor)` float32 (Dask, one realisation
    per chunk, time × sensor chunks from `conventions.time_space_chunks` unless given), with
    per-sensor `latitude`, `longitude` and per-realisation source coordinates. `sources` defaults
    to `default_sources(seed)`; the seed is used for nothing else and not recorded. The values
    are bitwise the same for any `time_chunk` / `sensor_chunk`."""
    if not (math.isfinite(sampling_rate_hz) and sampling_rate_hz > 0):
        raise InvalidInput("sampling_rate_hz", f"must be positive, got {sampling_rate_hz}")
    if not (math.isfinite(duration_s) and duration_s * sampling_rate_hz >= 0.5):
        raise InvalidInput("duration_s", f"must give at least one sample, got {duration_s}")
    n_time = int(round(duration_s * sampling_rate_hz))
    latitude, longitude = fibonacci_sensors(n_sensors)
    sources = default_sources(seed) if sources is None else list(sources)
    if not sources:
        raise InvalidInput("sources", "needs at least one source")
    for index, source in enumerate(sources):
        _check_source(index, source)
    if max_degree is None:
        max_degree = default_max_degree(sources, sampling_rate_hz)
    if int(max_degree) != max_degree or max_degree < 1:
        raise InvalidInput("max_degree", f"must be a positive integer, got {max_degree!r}")
    default_time_chunk, default_sensor_chunk = time_space_chunks(n_time, n_sensors)
    time_index = da.arange(n_time, chunks=time_chunk or default_time_chunk, dtype=np.int64)
    sensor_chunks = sensor_chunk or default_sensor_chunk
    latitude_dask = da.from_array(latitude, chunks=sensor_chunks)
    longitude_dask = da.from_array(longitude, chunks=sensor_chunks)
    tables = {depth: travel_time_table(depth) for depth in {s.depth_km for s in sources}}
    realisations = [
        da.blockwise(
            _realisation_block,
            "ts",
            time_index,
            "t",
            latitude_dask,
            "s",
            longitude_dask,
            "s",
            dtype=np.float32,
            sampling_rate_hz=float(sampling_rate_hz),
            source=source,
            travel_times=tables[source.depth_km],
            max_degree=int(max_degree),
        )
        for source in sources
    ]
    per_realisation = {
        "source_latitude": [s.latitude_deg for s in sources],
        "source_longitude": [s.longitude_deg for s in sources],
        "source_depth_km": [s.depth_km for s in sources],
        "origin_time_s": [s.origin_time_s for s in sources],
        "velocity_scale": [s.velocity_scale for s in sources],
        "q": [s.q for s in sources],
        "half_duration_s": [s.half_duration_s for s in sources],
        "parameter_value": [s.parameter_value for s in sources],
    }
    coords = {
        name: (REALISATION, np.asarray(v, dtype=np.float64)) for name, v in per_realisation.items()
    }
    coords[ROLE] = (REALISATION, np.array([s.role for s in sources], dtype=object))  # zarr "string"
    coords[TIME] = (TIME, np.arange(n_time) / float(sampling_rate_hz))
    coords[LATITUDE] = (SENSOR, latitude)
    coords[LONGITUDE] = (SENSOR, longitude)
    attrs = {
        ATTR_DATASET: "global",
        ATTR_START_TIME: START_TIME,
        ATTR_SAMPLING_RATE: float(sampling_rate_hz),
        ATTR_SENSOR_ORDER: SENSOR_ORDER,
        ATTR_PARAMETER_NAME: PARAMETER_NAME,
        "units": "m/s, arbitrary scale (peaks O(1))",
        "quantity": "vertical ground velocity",
        "max_degree": int(max_degree),
        "generator": (
            f"seisctf {__version__} recipes.global_wavefield: normal-mode Rayleigh waves "
            "(Jeans' relation, empirical dispersion, Q) + iasp91 TauP P and S pulses"
        ),
    }
    u = xr.Variable(
        (REALISATION, TIME, SENSOR),
        da.stack(realisations, axis=0),
        attrs={"long_name": "vertical ground velocity"},
    )
    return xr.Dataset({WAVEFIELD_VAR: u}, coords=coords, attrs=attrs)
