"""Vertical ground velocity of the global synthetic on one (time, sensor) block.

Per event e (origin t_e, τ = t − t_e) and sensor s, the trace is the sum of

Surface waves, the orbits R1, R2, … as travelling fundamental-mode Rayleigh waves on a sphere
(the asymptotic form of the mode sum: Dahlen & Tromp 1998, *Theoretical Global Seismology*,
§11.7; Aki & Richards 2002, §7.3), synthesised by a discrete Fourier sum::

    v(τ) = W(τ − T₁) · 2 Δf Σ_f Re[V(ω_f) e^{iω_f τ}],   ω_f = 2π f Δf, f = 1 … F
    V(ω) = A M₀/M₀(7.5) · iω ṁ(ω) · R(ω, φ_j, h) · k^½ / sqrt(max(sin Δ, sin 10°))
           · Σ_j exp(−i [k a x_j (1 − ⟨δc/c⟩_j) − π/4 + (j − 1) π/2]) · exp(−ω a x_j / (2 U Q))
           · B(ω) · H_s(ω) · g_s

k(ω) = ω / c(ω), c(T) = 3.5 + 1.0 (1 − exp(−T / 150 s)) km/s (a rough fit to PREM's
fundamental-mode Rayleigh phase velocities at 30–200 s: Dziewonski & Anderson 1981; Ekström et
al. 1997), U = c / (1 + (T/c) dc/dT) the group velocity (3.5–4.5 km/s), Q = 180, a = 6371 km;
x_j and ⟨δc/c⟩_j the orbit lengths and path-averaged phase-velocity perturbations
(`global_earth`), φ_j the take-off azimuth (φ for odd j, φ + π for even j: the wave leaves the
other way), −π/2 per polar passage (Dahlen & Tromp eq. 11.38); ṁ(ω) and R(ω, φ, h) from
`global_events`; H_s the station's seismometer and g_s its site amplification (`global_earth`);
B(ω) the surface-wave band: a 4-pole analog Butterworth low-pass at 1/40 Hz (causal) times a
cosine taper from 0.045 to 0.06 Hz, the highest frequency of the sum. Orbit j of sensor s is
left out when even its fastest energy (a x_j / 4.6 km/s) comes after the record's end. The sum
is periodic in P = τ_max · 4.6 / 3.4 + 1500 s (Δf = 1 / P, τ_max the record's end after the
origin), longer than any kept orbit's energy, so nothing wraps around into the record.

W is a smooth onset taper: 0 before the event's first arrival T₁ at the sensor (first P, or the
first core phase beyond the P shadow, from `global_traveltimes`, with the path and station
delays of P), (1 − cos(π (τ − T₁) / 30 s)) / 2 over the next 30 s, then 1. The band-limited
Fourier sum of a dispersive wave is not exactly zero before its fastest group arrival; W makes
the surface waves carry nothing before the first body wave, as in the real Earth (all surface
waves arrive well after P except within a few degrees of the source).

Body waves: first P and first S (`global_traveltimes`, iasp91) as the causal far-field pulse of
`global_events.body_pulse` (cut at 60 rise times, where it is below 1e-22 of its peak)
starting exactly at the (perturbed) arrival time T = T_1D (1 +
⟨δs/s⟩) + station delay, amplitude B_X M₀/M₀(7.5) F_X g(Δ) g_s with F_P = γ·M·γ, F_S = γ·M·e
at the take-off angle, geometric spreading g(Δ) = 1/sqrt(max(sin Δ, sin 10°)), B_P = 0.12,
B_S = 0.24. The pulses (periods ≤ 20 s) lie in the seismometer's flat band (natural periods
≥ 120 s), so only its unit gain applies to them; no attenuation t*, no later phases.

Ambient microseisms (part of the truth): per sensor, white Gaussian numbers ε_s(n) on the
record's sample grid (a counter-based hash of the realisation's key, the sensor and the sample),
filtered by the impulse response h of a causal 6-pole Butterworth band-pass of the secondary
microseism band, 0.1–0.2 Hz (periods 5–10 s: Longuet-Higgins 1950; Peterson 1993, USGS OFR
93-322), cut after L = 80 s (where it has decayed below 1e-4 of its peak)::

    m_s(t_n) = σ E_s Σ_{k=0}^{L−1} h_k ε_s(n − k) / ‖h‖

with σ = `AMBIENT_RMS` and E_s = 0.3 + Σ_q exp(−Δ_{sq}² / (2 (20°)²)) from three storms at
random places: a spatially correlated level, incoherent phase.

Bitwise reproducibility for any chunking: the time × frequency basis and the frequency × sensor
coefficients are rounded to integers (2^22 times the basis, 2^30 / Σ_f |coefficients| per
sensor), so each partial sum of the matmul is an integer below 2^53, exact in float64 whatever
order BLAS sums in (a deterministic error ~1e-7 of the peak). Everything else is elementwise or
summed along axes whose length does not depend on the block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.signal import butter, freqs, sosfilt

from seisctf.synth.global_earth import (
    Earth,
    great_circle_paths,
    hashed_normal,
    instrument_response,
    orbit_means,
    sample_map,
    unit_vectors,
)
from seisctf.synth.global_events import (
    Event,
    body_pulse,
    body_radiation,
    moment_rate_spectrum,
    rayleigh_radiation,
)
from seisctf.synth.global_traveltimes import TravelTimeTable

EARTH_RADIUS_KM = 6371.0
AMPLITUDE = 7.9e5  # A: R1 of a Mw 7.5 event at 90° peaks near 1 (m/s, arbitrary scale)
Q = 180.0
GROUP_VELOCITY_RANGE_KM_S = (3.4, 4.6)
PERIOD_PADDING_S = 1500.0
BAND_CORNER_HZ = 1.0 / 40.0
TAPER_START_HZ, MAX_FREQUENCY_HZ = 0.045, 0.06
ONSET_TAPER_S = 30.0
BODY_P_AMPLITUDE, BODY_S_AMPLITUDE = 0.12, 0.24
PULSE_LENGTH = 60.0  # pulses end at 60 rise times (below 1e-22 of their peak)
SPREADING_MIN_SIN = math.sin(math.radians(10.0))
AMBIENT_RMS = 0.02
AMBIENT_BAND_HZ, AMBIENT_LENGTH_S = (0.1, 0.2), 80.0
STORM_WIDTH_DEG, STORM_FLOOR = 20.0, 0.3
_BASIS_BITS, _COEFFICIENT_BITS = 22, 30


@dataclass(frozen=True)
class Ambient:
    """A realisation's microseism field: hash key, storm centres (°) and RMS (0: none)."""

    key: int
    storm_latitude_deg: tuple[float, ...]
    storm_longitude_deg: tuple[float, ...]
    rms: float = AMBIENT_RMS


def phase_velocity_km_s(period_s: np.ndarray) -> np.ndarray:
    """c(T) of the module docstring, km/s."""
    return 3.5 + 1.0 * (1.0 - np.exp(-np.asarray(period_s) / 150.0))


def group_velocity_km_s(period_s: np.ndarray) -> np.ndarray:
    """U = c / (1 + (T/c) dc/dT), km/s."""
    period = np.asarray(period_s)
    c = phase_velocity_km_s(period)
    return c / (1.0 + (period / c) * np.exp(-period / 150.0) / 150.0)


def synthesis_period_s(tau_max_s: float) -> float:
    """P of the module docstring (s)."""
    low, high = GROUP_VELOCITY_RANGE_KM_S
    return max(tau_max_s, 0.0) * high / low + PERIOD_PADDING_S


def surface_band(frequency_hz: np.ndarray) -> np.ndarray:
    """B(f): causal 4-pole Butterworth low-pass times the cosine taper (complex)."""
    b, a = butter(4, 2.0 * np.pi * BAND_CORNER_HZ, analog=True)
    _, response = freqs(b, a, worN=2.0 * np.pi * np.asarray(frequency_hz))
    x = np.clip((frequency_hz - TAPER_START_HZ) / (MAX_FREQUENCY_HZ - TAPER_START_HZ), 0.0, 1.0)
    return response * 0.5 * (1.0 + np.cos(np.pi * x))


def onset_taper(tau_after_arrival_s: np.ndarray) -> np.ndarray:
    """W: 0 before the first arrival, half-cosine rise over ONSET_TAPER_S, then 1."""
    x = np.clip(np.asarray(tau_after_arrival_s) / ONSET_TAPER_S, 0.0, 1.0)
    return 0.5 * (1.0 - np.cos(np.pi * x))


def _exact_sum(basis: np.ndarray, coefficients: np.ndarray, scale: float) -> np.ndarray:
    """basis (time, n) @ coefficients (n, sensor) × scale, rounded so that it is exact."""
    basis_int = np.rint(basis * 2.0**_BASIS_BITS)
    norm = np.abs(coefficients).sum(axis=0)
    norm = np.where(norm > 0, norm, 1.0)
    coefficients_int = np.rint(coefficients * (2.0**_COEFFICIENT_BITS / norm))
    unit = 2.0 ** -(_BASIS_BITS + _COEFFICIENT_BITS)
    return (basis_int @ coefficients_int) * (norm * (scale * unit))


def _first_arrival_s(event, table, paths, earth, stations) -> np.ndarray:
    """T₁ (s after origin): the event's first arrival at each sensor, with P's path and station
    delays."""
    first = table.first_arrival_s(np.degrees(paths.distance))
    slowness = sample_map(earth.maps["p"], paths.minor).mean(axis=1)
    return first * (1.0 + earth.strength * slowness) + stations["P"]


def surface_waves(tau_s, event, paths, earth, stations, tau_max_s) -> np.ndarray:
    """The event's surface waves before the onset taper, (time, sensor) float64."""
    period = synthesis_period_s(tau_max_s)
    frequency = np.arange(1, int(MAX_FREQUENCY_HZ * period) + 1) / period
    omega = 2.0 * np.pi * frequency
    k = omega / phase_velocity_km_s(1.0 / frequency)  # 1/km
    group = group_velocity_km_s(1.0 / frequency)
    low, high = GROUP_VELOCITY_RANGE_KM_S
    n_orbits = max(1, math.ceil(tau_max_s * high / (math.pi * EARTH_RADIUS_KM)) + 1)
    means = {}
    for name in ("c_short", "c_long"):
        minor = sample_map(earth.maps[name], paths.minor).mean(axis=1)
        circle = sample_map(earth.maps[name], paths.circle).mean(axis=1)
        lengths, means[name] = orbit_means(minor, circle, paths.distance, n_orbits)
    weight = earth.phase_map_weight(1.0 / frequency)[:, None]
    common = (
        AMPLITUDE
        * event.relative_moment
        * (1j * omega * moment_rate_spectrum(omega, event) * surface_band(frequency))[:, None]
        * np.sqrt(k)[:, None]
        / np.sqrt(np.maximum(np.sin(paths.distance), SPREADING_MIN_SIN))[None, :]
        * instrument_response(omega, stations["natural_period_s"])
        * stations["amplification"][None, :]
    )
    spectrum = np.zeros((frequency.size, paths.distance.size), dtype=np.complex128)
    for j in range(n_orbits):
        kept = EARTH_RADIUS_KM * lengths[j] / high <= tau_max_s
        if not kept.any():
            continue
        perturbation = earth.strength * (
            (1.0 - weight) * means["c_short"][j][None, :] + weight * means["c_long"][j][None, :]
        )
        distance_km = EARTH_RADIUS_KM * lengths[j][None, :]
        phase = k[:, None] * distance_km * (1.0 - perturbation) - math.pi / 4 + j * math.pi / 2
        decay = np.exp(-omega[:, None] * distance_km / (2.0 * group[:, None] * Q))
        azimuth = paths.azimuth + (math.pi if j % 2 else 0.0)
        term = rayleigh_radiation(event, k, azimuth) * np.exp(-1j * phase) * decay
        spectrum += np.where(kept[None, :], term, 0.0)
    spectrum *= common
    basis_phase = tau_s[:, None] * omega[None, :]
    basis = np.concatenate([np.cos(basis_phase), -np.sin(basis_phase)], axis=1)
    coefficients = np.concatenate([spectrum.real, spectrum.imag], axis=0)
    return _exact_sum(basis, coefficients, 2.0 / period)


def body_waves(tau_s, event, table, paths, earth, stations) -> np.ndarray:
    """First P and S pulses of the event, (time, sensor) float64."""
    distance_deg = np.degrees(paths.distance)
    spreading = 1.0 / np.sqrt(np.maximum(np.sin(paths.distance), SPREADING_MIN_SIN))
    field = np.zeros((tau_s.size, distance_deg.size))
    for phase, amplitude, map_name in (
        ("P", BODY_P_AMPLITUDE, "p"),
        ("S", BODY_S_AMPLITUDE, "s"),
    ):
        arrival_s, takeoff_deg = table.arrival(phase, distance_deg)
        present = np.isfinite(arrival_s)
        if not present.any():
            continue
        slowness = sample_map(earth.maps[map_name], paths.minor).mean(axis=1)
        arrival_s = arrival_s * (1.0 + earth.strength * slowness) + stations[phase]
        radiation = body_radiation(event, np.radians(takeoff_deg), paths.azimuth, phase)
        gain = amplitude * event.relative_moment * radiation * spreading
        gain = gain * stations["amplification"]
        delay_s = tau_s[:, None] - arrival_s[None, present]
        active = (delay_s > 0.0) & (delay_s < PULSE_LENGTH * event.rise_time_s)
        rows, columns = np.nonzero(active)
        pulse = body_pulse(delay_s[rows, columns], event.rise_time_s)
        block = np.zeros(delay_s.shape)
        block[rows, columns] = gain[present][columns] * pulse
        field[:, present] += block
    return field


def ambient_field(
    sample_index, sensor_index, lat_deg, lon_deg, ambient, sampling_rate_hz
) -> np.ndarray:
    """m_s(t_n) of the module docstring at integer samples `sample_index`, (time, sensor)."""
    length = int(round(AMBIENT_LENGTH_S * sampling_rate_hz))
    band = butter(3, AMBIENT_BAND_HZ, "bandpass", fs=sampling_rate_hz, output="sos")
    kernel = sosfilt(band, np.eye(1, length)[0])
    kernel /= math.sqrt(float((kernel**2).sum()))
    samples = np.arange(sample_index[0] - length + 1, sample_index[-1] + 1)
    if samples.size != sample_index.size + length - 1:
        raise ValueError("ambient samples must be consecutive")
    white = hashed_normal(ambient.key, np.asarray(sensor_index)[None, :], samples[:, None])
    filtered = np.zeros((sample_index.size, len(sensor_index)))
    for k, h in enumerate(kernel):
        filtered += h * white[length - 1 - k : length - 1 - k + sample_index.size]
    sensors = unit_vectors(lat_deg, lon_deg)
    storms = unit_vectors(
        np.asarray(ambient.storm_latitude_deg), np.asarray(ambient.storm_longitude_deg)
    )
    distance_deg = np.degrees(np.arccos(np.clip(sensors @ storms.T, -1.0, 1.0)))
    level = STORM_FLOOR + np.exp(-0.5 * (distance_deg / STORM_WIDTH_DEG) ** 2).sum(axis=1)
    return ambient.rms * level[None, :] * filtered


def event_field(
    times_s: np.ndarray,
    lat_deg: np.ndarray,
    lon_deg: np.ndarray,
    stations: dict,
    event: Event,
    table: TravelTimeTable,
    earth: Earth,
    record_end_s: float,
) -> np.ndarray:
    """One event's surface and body waves at `times_s` (s after the record's start),
    (time, sensor) float64, exactly 0 before its first arrival at each sensor."""
    tau_s = np.asarray(times_s, dtype=np.float64) - event.origin_time_s
    paths = great_circle_paths(event.latitude_deg, event.longitude_deg, lat_deg, lon_deg)
    first_s = _first_arrival_s(event, table, paths, earth, stations)
    field = body_waves(tau_s, event, table, paths, earth, stations)
    rows = tau_s > first_s.min()
    if rows.any():
        tau_max_s = record_end_s - event.origin_time_s
        surface = surface_waves(tau_s[rows], event, paths, earth, stations, tau_max_s)
        field[rows] += onset_taper(tau_s[rows, None] - first_s[None, :]) * surface
    return field
