"""Earthquakes of the global synthetic: moment tensors, source time functions, catalogues.

Each realisation holds a main event and, drawn from the generator's seed, aftershocks and
background events; only the main event's epicentre, depth and origin time are recorded (in the
private store), and the parametric pairs' depths are the task's public parameter.

Source (Aki & Richards 2002, Box 4.4: x north, y east, z down): a double couple of random
strike (uniform 0–360°), dip (cos δ uniform: δ 0–90°) and rake (uniform −180–180°), tensor from
`crustal.source.moment_tensor`, scalar moment M0 = 10^(1.5 Mw + 9.1) N·m (Hanks & Kanamori
1979). Moment rate (causal, unit area; Brune 1970)::

    ṁ(t) = (t² / (2τ³)) exp(−t / τ) for t ≥ 0, 0 before;   spectrum 1 / (1 + iωτ)³

(peak at t = 2τ, continuous with its first derivative at the onset) with τ = t_h / 2 and the
half duration t_h = 1.05e-8 (M0 in dyne·cm)^⅓ s of the GCMT catalogue (Ekström et al. 2012,
PEPI 200), 13.7 s at Mw 7.5 and 2.4 s at Mw 6.

Radiation (unit vectors at the source: ray γ = (sin i cos φ, sin i sin φ, cos i), SV direction
e = (cos i cos φ, cos i sin φ, −sin i), i the take-off angle from the downward vertical, φ the
azimuth to the station): P ∝ γ·M·γ, SV ∝ γ·M·e (A&R eq. 4.96). Rayleigh waves (vertical
component, exp(iωt) convention), the structure of A&R eq. 7.151 with both eigenfunctions
approximated as decaying like exp(−k z) and a horizontal-to-vertical ratio ε = 0.68:

    R(ω, φ, h) = k e^(−k h) [M_zz − ε (M_xx cos²φ + M_xy sin 2φ + M_yy sin²φ)
                             − i (1 + ε)(M_xz cos φ + M_yz sin φ)].

Catalogue of a realisation (numbers from numpy default_rng([seed, 2, realisation])): Poisson(3)
aftershocks at the main event's depth, epicentres within N(0, 0.7°) of it, times t0 + (60 s …
end of the record) with density ∝ 1/(c + t) (Omori's law, Utsu 1961; c = 100 s); Poisson(1.5)
background events anywhere on the sphere at depths 10, 33 or 100 km, times uniform over the
record. Magnitudes follow Gutenberg–Richter with b = 1 (Gutenberg & Richter 1944), truncated to
[Mw − 1.8, Mw − 0.6] (aftershocks; Båth's law puts the largest near Mw − 1.2) and [6.5,
Mw − 0.3] (background), Mw the main event's, itself uniform in 7.0–8.0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from seisctf.synth.crustal.source import moment_tensor

REFERENCE_MAGNITUDE = 7.5
MAIN_MAGNITUDE_RANGE = (7.0, 8.0)
AFTERSHOCK_RATE, BACKGROUND_RATE = 3.0, 1.5
AFTERSHOCK_SPREAD_DEG = 0.7
OMORI_C_S = 100.0
BACKGROUND_DEPTHS_KM = (10.0, 33.0, 100.0)
RAYLEIGH_HV_RATIO = 0.68


@dataclass(frozen=True)
class Event:
    """One earthquake: epicentre (°), depth (km), origin time (s after the record's start),
    moment magnitude and the 3×3 moment tensor of unit scalar moment (x north, y east,
    z down) as a tuple of rows."""

    latitude_deg: float
    longitude_deg: float
    depth_km: float
    origin_time_s: float
    magnitude: float = REFERENCE_MAGNITUDE
    tensor: tuple = field(default=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0)))

    @property
    def relative_moment(self) -> float:
        """M0 / M0(Mw 7.5)."""
        return 10.0 ** (1.5 * (self.magnitude - REFERENCE_MAGNITUDE))

    @property
    def rise_time_s(self) -> float:
        """τ of the moment rate: half the GCMT half duration (s)."""
        moment_dyne_cm = 10.0 ** (1.5 * self.magnitude + 16.1)
        return 0.5 * 1.05e-8 * moment_dyne_cm ** (1.0 / 3.0)


def random_tensor(rng: np.random.Generator) -> tuple:
    """A random double couple of unit moment (rows of the 3×3 tensor)."""
    strike, rake = rng.uniform(0.0, 360.0), rng.uniform(-180.0, 180.0)
    dip = math.degrees(math.acos(rng.uniform(0.0, 1.0)))
    return tuple(tuple(float(v) for v in row) for row in moment_tensor(strike, dip, rake))


def moment_rate_spectrum(omega: np.ndarray, event: Event) -> np.ndarray:
    """1 / (1 + iωτ)³ (dimensionless), the Fourier transform of ṁ."""
    return 1.0 / (1.0 + 1j * np.asarray(omega) * event.rise_time_s) ** 3


def body_pulse(tau_s: np.ndarray, rise_time_s: float) -> np.ndarray:
    """Far-field velocity pulse ∝ d/dt ṁ (ṁ of the module docstring), scaled to peak 1:
    x (2 − x) e^(−x) / peak with x = τ / τ_r for τ ≥ 0, exactly 0 before (onset τ = 0)."""
    x = np.maximum(np.asarray(tau_s, dtype=np.float64), 0.0) / rise_time_s
    peak = (2.0 - math.sqrt(2.0)) * math.sqrt(2.0) * math.exp(math.sqrt(2.0) - 2.0)
    return np.where(tau_s > 0.0, x * (2.0 - x) * np.exp(-x), 0.0) / peak


def body_radiation(event: Event, takeoff_rad: np.ndarray, azimuth_rad: np.ndarray, phase: str):
    """P (γ·M·γ) or SV (γ·M·e) radiation coefficient per ray."""
    tensor = np.asarray(event.tensor)
    sin_i, cos_i = np.sin(takeoff_rad), np.cos(takeoff_rad)
    cos_a, sin_a = np.cos(azimuth_rad), np.sin(azimuth_rad)
    ray = np.stack([sin_i * cos_a, sin_i * sin_a, cos_i], axis=-1)
    other = ray if phase == "P" else np.stack([cos_i * cos_a, cos_i * sin_a, -sin_i], axis=-1)
    return np.einsum("...i,ij,...j->...", ray, tensor, other)


def rayleigh_radiation(
    event: Event, wavenumber_per_km: np.ndarray, azimuth_rad: np.ndarray
) -> np.ndarray:
    """R(ω, φ, h) of the module docstring, (frequency, sensor) complex, k in 1/km."""
    m = np.asarray(event.tensor)
    eps = RAYLEIGH_HV_RATIO
    cos_a, sin_a = np.cos(azimuth_rad), np.sin(azimuth_rad)
    pattern = (
        m[2, 2]
        - eps * (m[0, 0] * cos_a**2 + m[0, 1] * np.sin(2 * azimuth_rad) + m[1, 1] * sin_a**2)
        - 1j * (1 + eps) * (m[0, 2] * cos_a + m[1, 2] * sin_a)
    )
    k = np.asarray(wavenumber_per_km)[:, None]
    return k * np.exp(-k * event.depth_km) * pattern[None, :]


def gutenberg_richter(rng: np.random.Generator, low: float, high: float, size: int) -> np.ndarray:
    """Magnitudes with b = 1 truncated to [low, high] (inverse CDF)."""
    u = rng.uniform(0.0, 1.0, size)
    return low - np.log10(1.0 - u * (1.0 - 10.0 ** -(high - low)))


def catalogue(main: Event, seed: int, realisation: int, duration_s: float) -> tuple[Event, ...]:
    """The main event followed by its aftershocks and the background events (module
    docstring), a pure function of (main, seed, realisation, duration_s)."""
    rng = np.random.default_rng([int(seed), 2, int(realisation)])
    events = [main]
    n_after = int(rng.poisson(AFTERSHOCK_RATE))
    span = max(duration_s - main.origin_time_s - 60.0, 1.0)
    for magnitude in gutenberg_richter(rng, main.magnitude - 1.8, main.magnitude - 0.6, n_after):
        u = rng.uniform()
        delay = OMORI_C_S * ((1.0 + span / OMORI_C_S) ** u - 1.0)  # density ∝ 1/(c + t)
        latitude = float(np.clip(main.latitude_deg + AFTERSHOCK_SPREAD_DEG * rng.normal(), -89, 89))
        longitude = main.longitude_deg + AFTERSHOCK_SPREAD_DEG * rng.normal()
        longitude = (longitude + 180.0) % 360.0 - 180.0
        events.append(
            Event(
                latitude,
                longitude,
                main.depth_km,
                main.origin_time_s + 60.0 + delay,
                float(magnitude),
                random_tensor(rng),
            )
        )
    n_background = int(rng.poisson(BACKGROUND_RATE))
    for magnitude in gutenberg_richter(rng, 6.5, main.magnitude - 0.3, n_background):
        latitude = math.degrees(math.asin(rng.uniform(-1.0, 1.0)))
        longitude = rng.uniform(-180.0, 180.0)
        depth = BACKGROUND_DEPTHS_KM[int(rng.integers(len(BACKGROUND_DEPTHS_KM)))]
        events.append(
            Event(
                latitude,
                float(longitude),
                depth,
                float(rng.uniform(0.0, duration_s)),
                float(magnitude),
                random_tensor(rng),
            )
        )
    return tuple(events)
