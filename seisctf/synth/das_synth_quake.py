"""Earthquakes on the synthetic ocean-bottom DAS cable: causal P and S pulses with moveout.

Catalogue (per realisation, drawn from the realisation's seed): a Poisson number of events, mean
`EVENTS_PER_HOUR` × the slot's duration, origin times uniform over [−60 s, slot end) (some fall
in the withheld windows, some before the slot so that only their S waves arrive), epicentres
uniform along the cable and 10–60 km off it, depths 5–25 km, and moment magnitudes from the
Gutenberg–Richter law log₁₀ N(≥M) = a − b M (Gutenberg & Richter 1944) with b = 1, truncated
to [M_min, M_max] = [3.0, 5.5] (inverse CDF at a uniform u:
M = M_min − log₁₀(1 − u (1 − 10^{−b (M_max − M_min)})) / b).

Source: seismic moment M₀ = 10^{1.5 M + 9.1} N·m (Hanks & Kanamori 1979); Brune (1970) corner
frequency f_c = 0.4906 β (Δσ / M₀)^{1/3} (β = 3500 m/s, Δσ = 3 MPa), source duration 1/f_c. The
far-field displacement pulse is the moment-rate function (Aki & Richards 2002, eq. 4.32), taken
as the smooth, finite, causal Ṁ(t) ∝ sin⁴(π t / T_d) on 0 ≤ t ≤ T_d (zero outside), with
T_d = sqrt((1/f_c)² + T_min²), T_min = 2 s: the broadening by the path and the interrogator's
anti-alias filter that a 5 Hz record cannot resolve below. S pulses last 1.5 T_d (the S corner
frequency is lower than the P one: Madariaga 1976).

Propagation (a homogeneous crust, straight rays): a point source at along-cable position x₀,
horizontal offset D and depth z; hypocentral distance R(x) = sqrt((x − x₀)² + D² + z²), arrivals
T_P = R/v_P, T_S = R/v_S (v_P = 6000 m/s, v_S = 3500 m/s). Far-field plane-wave strain along the
cable, ε = ∂u_x/∂x ≈ −(dT/dx) ∂u_x/∂t with dT/dx = cos α / v, cos α = (x − x₀)/R (Benioff 1935;
the cos² response of DAS to P: Martin et al. 2021, *DAS in Geophysics*, ch. 1): P polarised along
the ray (u_x ∝ cos α), S polarised horizontally across it (u_x ∝ −D/r_h, r_h = sqrt((x − x₀)² +
D²)). The strain rate is then the second time derivative of the displacement pulse:

    ε̇_P = A (R₀/R) cos² α · w((t − t₀ − T_P) / T_d)
    ε̇_S = −2 A (R₀/R) cos α (D/r_h) · w((t − t₀ − T_S) / (1.5 T_d))
    w(s) = −(1/4π²) d²/ds² sin⁴(π s) = sin⁴(π s) − 3 sin²(π s) cos²(π s),  0 ≤ s ≤ 1; 0 otherwise

w is zero before s = 0 (nothing before the arrival: causal), rises as 4π² s² (smooth onset),
peaks at 1 at s = 1/2, has zero mean and ends at s = 1. R₀ = 10 km, 1/R geometric spreading, no
attenuation. A, the peak P strain rate at R₀ for a ray along the cable, scales as the pulse's
second derivative, A = A_ref (M₀ / M₀,ref) (T_d,ref / T_d)³, with A_ref = 1e-6 /s at M_ref = 4.5.
Zero at broadside (x = x₀), where the apparent slowness vanishes, as DAS sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

P_VELOCITY_M_S = 6000.0
S_VELOCITY_M_S = 3500.0
S_TO_P = 2.0
S_DURATION_RATIO = 1.5
REFERENCE_DISTANCE_M = 10_000.0
STRESS_DROP_PA = 3.0e6
MIN_DURATION_S = 2.0
MAGNITUDE_RANGE = (3.0, 5.5)
B_VALUE = 1.0
EVENTS_PER_HOUR = 20.0
REFERENCE_MAGNITUDE = 4.5
REFERENCE_PEAK_STRAIN_RATE = 1.0e-6  # 1/s at R₀, M_ref
EARLIEST_ORIGIN_S = -60.0


@dataclass(frozen=True)
class Earthquake:
    """Origin time (s after its slot's start), epicentre along the cable (m) and off it (m),
    depth (m), A: the peak P strain rate (1/s) at R₀ = 10 km for a ray along the cable, the P
    pulse's duration T_d (s) and the moment magnitude (NaN if not given)."""

    origin_time_s: float
    along_cable_m: float
    offset_m: float
    depth_m: float
    peak_strain_rate: float
    duration_s: float = MIN_DURATION_S
    magnitude: float = math.nan


def seismic_moment(magnitude: float) -> float:
    """M₀ (N·m) of a moment magnitude (Hanks & Kanamori 1979)."""
    return 10.0 ** (1.5 * magnitude + 9.1)


def pulse_duration_s(magnitude: float) -> float:
    """T_d = sqrt((1/f_c)² + T_min²), s, with Brune's f_c = 0.4906 β (Δσ/M₀)^{1/3}."""
    corner_hz = 0.4906 * S_VELOCITY_M_S * (STRESS_DROP_PA / seismic_moment(magnitude)) ** (1 / 3)
    return math.hypot(1.0 / corner_hz, MIN_DURATION_S)


def peak_strain_rate(magnitude: float) -> float:
    """A = A_ref (M₀/M₀,ref)(T_d,ref/T_d)³, 1/s at R₀."""
    moment_ratio = seismic_moment(magnitude) / seismic_moment(REFERENCE_MAGNITUDE)
    duration_ratio = pulse_duration_s(REFERENCE_MAGNITUDE) / pulse_duration_s(magnitude)
    return REFERENCE_PEAK_STRAIN_RATE * moment_ratio * duration_ratio**3


def gutenberg_richter(u: np.ndarray) -> np.ndarray:
    """Magnitudes at quantiles u (0..1) of the truncated Gutenberg–Richter law (docstring)."""
    low, high = MAGNITUDE_RANGE
    return low - np.log10(1.0 - u * (1.0 - 10.0 ** (-B_VALUE * (high - low)))) / B_VALUE


def draw_catalogue(
    rng: np.random.Generator, slot_duration_s: float, cable_length_m: float
) -> tuple[Earthquake, ...]:
    """One realisation's earthquakes (module docstring), in origin-time order."""
    count = int(rng.poisson(EVENTS_PER_HOUR * slot_duration_s / 3600.0))
    origin = rng.uniform(EARLIEST_ORIGIN_S, slot_duration_s, count)
    along = rng.uniform(0.0, cable_length_m, count)
    offset = rng.uniform(10e3, 60e3, count)
    depth = rng.uniform(5e3, 25e3, count)
    magnitude = gutenberg_richter(rng.uniform(0.0, 1.0, count))
    events = [
        Earthquake(
            float(origin[i]),
            float(along[i]),
            float(offset[i]),
            float(depth[i]),
            peak_strain_rate(float(magnitude[i])),
            pulse_duration_s(float(magnitude[i])),
            float(magnitude[i]),
        )
        for i in range(count)
    ]
    return tuple(sorted(events, key=lambda event: event.origin_time_s))


def causal_pulse(s: np.ndarray) -> np.ndarray:
    """w(s) = sin⁴(πs) − 3 sin²(πs) cos²(πs) on [0, 1], 0 elsewhere (module docstring)."""
    inside = (s >= 0.0) & (s <= 1.0)
    sine2 = np.sin(np.pi * s) ** 2
    return np.where(inside, sine2 * (4.0 * sine2 - 3.0), 0.0)


def earthquake_strain_rate(
    tau_s: np.ndarray, distance_m: np.ndarray, quake: Earthquake
) -> np.ndarray:
    """P and S strain rate (time, channel) float64 at slot times `tau_s` (s) and channel
    distances (m) (module docstring); exactly 0 before each channel's P arrival."""
    along = distance_m - quake.along_cable_m
    horizontal = np.sqrt(along**2 + quake.offset_m**2)
    hypocentral = np.sqrt(horizontal**2 + quake.depth_m**2)
    cos_alpha = along / hypocentral
    spreading = REFERENCE_DISTANCE_M / hypocentral
    transverse = np.divide(
        quake.offset_m, horizontal, out=np.zeros_like(horizontal), where=horizontal > 0
    )
    field = np.zeros((tau_s.size, distance_m.size))
    amplitude = quake.peak_strain_rate * spreading
    phases = (
        (P_VELOCITY_M_S, quake.duration_s, amplitude * cos_alpha**2),
        (
            S_VELOCITY_M_S,
            S_DURATION_RATIO * quake.duration_s,
            -S_TO_P * amplitude * cos_alpha * transverse,
        ),
    )
    for velocity, duration, peak in phases:
        arrival = quake.origin_time_s + hypocentral / velocity
        rows = (tau_s >= arrival.min()) & (tau_s <= arrival.max() + duration)
        if rows.any():
            s = (tau_s[rows, None] - arrival[None, :]) / duration
            field[rows] += peak[None, :] * causal_pulse(s)
    return field


def catalogue_strain_rate(
    tau_s: np.ndarray, distance_m: np.ndarray, quakes: tuple[Earthquake, ...]
) -> np.ndarray:
    """The sum of `earthquake_strain_rate` over a catalogue, in catalogue order."""
    field = np.zeros((tau_s.size, distance_m.size))
    for quake in quakes:
        field += earthquake_strain_rate(tau_s, distance_m, quake)
    return field
