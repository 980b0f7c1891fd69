"""Swell on the synthetic ocean-bottom DAS cable: geometry, sea state, seafloor strain rate.

A straight cable runs offshore from its landing (distance x = 0 m at the coast) over a seafloor
whose depth h(x) varies along the cable only (isobaths perpendicular to it: a straight cable
run out normal to a straight coast); piecewise linear between `Cable.depth_profile` knots
(default, scaled to the cable's length: 5 m at the coast, 30 m at 15 % of the cable, a 30 m
plateau to 45 %, then 150 m at the offshore end: swell shoals from deep water to the coast).
Channels sit every `channel_spacing_m`; each measures the axial strain rate averaged over
`gauge_length_m`.

Swell (linear wave theory: Dean & Dalrymple 1991, *Water Wave Mechanics for Engineers and
Scientists*, ch. 3–4; Mei 1989, *The Applied Dynamics of Ocean Surface Waves*, ch. 3)::

    η(x, y, t) = Σ_n a_n Re[g_n(t) e^{i(Φ_n(x) + ω_n t + ψ_n + k_y,n y)}]   at the cable, y = 0
    ω² = g k tanh(k h)                                          dispersion, k(x) = k(ω, h(x))

Components (the single-summation random-phase model: one direction per frequency, so no
phase-locking between directions; Jefferys 1987, Miles & Funke 1989): frequencies f_n =
f_lo + (n + u_n) Δf in (f_lo, f_hi) = (0.03, 0.35) Hz, Δf = (f_hi − f_lo)/N, u_n uniform (no
exact repetition period; N = 1200 gives Δf ≈ 2.7e-4 Hz, finer than a 3040 s slot resolves);
phases ψ_n uniform; directions θ_n drawn (inverse CDF on a 0.01° grid) from the spreading function
D(θ) ∝ cos^{2s}((θ − θ_m)/2) (Longuet-Higgins, Cartwright & Smith 1963; Mitsuyasu et al. 1975)
truncated to incoming waves |θ| < 89°, θ measured from the shoreward cable axis (0: travelling
along the cable towards the coast). Amplitudes from the JONSWAP spectrum (Hasselmann et al. 1973)

    S(f) ∝ f⁻⁵ exp(−5/4 (f_p/f)⁴) γ^{exp(−(f − f_p)² / (2 σ² f_p²))},  γ = 3.3,
    σ = 0.07 (f ≤ f_p), 0.09 (f > f_p),     a_n = sqrt(2 S(f_n) Δf),

scaled so that Σ a_n²/2 = (H_s/4)²: the significant wave height of each realisation is H_s
exactly, at the reference depth h_ref = the deepest point of the cable, where the incoming sea
is defined. The dispersion relation is solved by Newton's method from Fenton & McKee's (1990)
explicit approximation (three steps: machine precision).

An evolving sea (random amplitudes): each component's complex amplitude g_n(t) is a slowly
varying complex Gaussian process, not a constant, so the sea is Gaussian (Rayleigh amplitudes,
not only random phases: Tucker, Challenor & Carter 1984, Appl. Ocean Res. 6:118) and its
spectrum is continuous, each line broadened by ~1/T_c, as wave groups from different parts of
the generating storm pass (a sea state is stationary over tens of minutes, not forever).
Independent g_{n,j} ~ CN(0, 1) at knots t_j = j T_c (T_c = `coherence_time_s`, 300 s by
default), interpolated with unit variance:

    g_n(t) = ((1 − u) g_{n,j} + u g_{n,j+1}) / sqrt((1 − u)² + u²),  j = ⌊t/T_c⌋, u = t/T_c − j

so E|g_n(t)|² = 1 at every t and the mean spectrum is the JONSWAP one. The g_{n,j} of a knot
are drawn from a counter-based generator keyed by the realisation's draws: N complex numbers
per 300 s of record, none of which a window before the knot's support constrains.

Refraction and shoaling (WKB; Mei 1989 §3.2): with depth varying along x only, the wavenumber
along the isobaths k_y = k(ω, h_ref) sin θ is conserved (Snell's law), so the along-cable
wavenumber is k_x(x) = sqrt(k(x)² − k_y²) = k(x) cos θ(x) (real everywhere, since h ≤ h_ref),
the phase is the WKB integral Φ(x) = ∫₀ˣ k_x dx' (trapezoid rule on the channel grid, from the
first channel), and energy-flux conservation E c_g cos θ = const gives the amplitude
a(x) = a_n sqrt(c_g(h_ref) cos θ_ref / (c_g(x) cos θ(x))), c_g = (ω/k)(1 + 2kh/sinh 2kh)/2.
Over a constant-depth stretch the along-cable wavenumber is k cos θ: for swell travelling along
the cable (θ = 0), exactly the dispersion relation's k. Coastal reflection, breaking, bottom
friction, currents and nonlinearity are left out.

Seafloor pressure and strain (the simplification): the dynamic pressure at the seafloor is
p_b = ρ g a(x) / cosh(k h) (Dean & Dalrymple 1991, eq. 4.11; ρ = 1025 kg/m³, g = 9.81 m/s²),
and the seafloor responds quasi-statically as a homogeneous elastic half-space (shear modulus
μ = 1e8 Pa, Poisson's ratio ν = 0.45: soft saturated sediment). A surface load p cos(k·r) on a
half-space gives a horizontal strain along k of −(1 − 2ν)/(2μ) p, independent of k (plane
strain; the same solution as the vertical compliance (1 − ν)/(μ k) of Crawford, Webb &
Hildebrand 1991, JGR 96(B10)), so the axial strain of a cable at angle θ to k is

    ε(x, t) = −(1 − 2ν)/(2μ) · p_b(x, t) · cos² θ(x) · sinc(k_x G / 2)

where sinc(u) = sin(u)/u is the average over the gauge length G (Dean, Cuny & Hartog 2017,
Geophys. Prospect. 65(1)). Strain rate ε̇ = ∂ε/∂t analytically. Observed ocean-bottom DAS swell
strain follows seafloor pressure in this way (Lindsey et al. 2019, Science 366:1103; Williams
et al. 2019, Nat. Commun. 10:5778); the layering of real sediments (frequency-dependent
compliance), the coupling of the cable to the seafloor and hydrodynamic forces on the cable are
not modelled. Magnitudes: H_s = 1.5 m, T_p = 12 s at 30 m gives ε̇ of order 1e-7 to 1e-6 /s.

Bitwise reproducibility for any chunking: per slot and knot, the swell is a matrix product of a
time basis [cos ω_n d/rate, sin ω_n d/rate] (d: samples past an anchor, a multiple of 1024
samples) by mode amplitudes times g_{n,j} rotated to the anchor's phase; both are rounded to
integers (2^20 and 2^32 / B times their values, B a bound on each channel's Σ|g mode|), so every
partial sum is an integer below 2^53, exact in float64 whatever order BLAS sums in; the two
knots' products are then weighted per sample. The WKB phase is a cumulative sum from channel 0, the
same additions for every block. The rounding errs by ~3e-7 of the peak, far below the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from seisctf.errors import InvalidInput

GRAVITY = 9.81  # m/s²
WATER_DENSITY = 1025.0  # kg/m³
SHEAR_MODULUS_PA = 1.0e8
POISSON_RATIO = 0.45
# Horizontal seafloor strain per pascal of seafloor pressure, (1 - 2ν) / (2μ).
STRAIN_PER_PASCAL = (1.0 - 2.0 * POISSON_RATIO) / (2.0 * SHEAR_MODULUS_PA)
FREQUENCY_BAND_HZ = (0.03, 0.35)
N_COMPONENTS = 1200
JONSWAP_GAMMA = 3.3
COHERENCE_TIME_S = 300.0
MAX_DIRECTION_DEG = 89.0
_BASIS_BITS = 20
_MODE_BITS = 32
_ANCHOR_SAMPLES = 1024  # the swell's phase anchors (swell_strain_rate)

# --- geometry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cable:
    """Channels every `channel_spacing_m` from the coast (channel 0 at 0 m), gauge length, and
    the depth profile: (distance_m, depth_m) knots, linear between them and constant beyond
    (None: the default shelf, scaled to the cable's length)."""

    n_channels: int = 3000
    channel_spacing_m: float = 10.0
    gauge_length_m: float = 20.0
    depth_profile: tuple[tuple[float, float], ...] | None = None

    @property
    def length_m(self) -> float:
        return (self.n_channels - 1) * self.channel_spacing_m

    def knots(self) -> tuple[np.ndarray, np.ndarray]:
        if self.depth_profile is not None:
            distance, depth = np.asarray(self.depth_profile, dtype=np.float64).T
            return distance, depth
        length = self.length_m
        return (
            np.array([0.0, 0.15 * length, 0.45 * length, length]),
            np.array([5.0, 30.0, 30.0, 150.0]),
        )

    def distance_m(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        stop = self.n_channels if stop is None else stop
        return np.arange(start, stop, dtype=np.float64) * self.channel_spacing_m

    def depth_m(self, distance_m: np.ndarray) -> np.ndarray:
        distance, depth = self.knots()
        return np.interp(distance_m, distance, depth)

    def depth_range_m(self) -> tuple[float, float]:
        """Least and greatest depth along the cable (at knots or ends: the profile is linear)."""
        distance, _ = self.knots()
        inside = distance[(distance > 0) & (distance < self.length_m)]
        depths = self.depth_m(np.concatenate([[0.0, self.length_m], inside]))
        return float(depths.min()), float(depths.max())

    def check(self) -> None:
        if int(self.n_channels) != self.n_channels or self.n_channels < 2:
            raise InvalidInput("channels", f"must be an integer >= 2, got {self.n_channels!r}")
        for name in ("channel_spacing_m", "gauge_length_m"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(name, f"must be positive, got {value!r}")
        distance, depth = self.knots()
        if distance.ndim != 1 or distance.size < 1 or np.any(np.diff(distance) <= 0):
            raise InvalidInput(
                "depth_profile", "needs (distance_m, depth_m) knots with increasing distances"
            )
        if not np.all(np.isfinite(depth) & (depth > 0)):
            raise InvalidInput("depth_profile", f"depths must be positive metres, got {depth}")


# --- realisations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SeaState:
    """The incoming sea at the reference depth: H_s (m), T_p (s), mean direction (degrees from
    the shoreward cable axis) and the spreading exponent s of cos^{2s}((θ − θ_m)/2)."""

    significant_wave_height_m: float = 1.5
    peak_period_s: float = 12.0
    mean_direction_deg: float = 0.0
    spreading_s: float = 15.0
    gamma: float = JONSWAP_GAMMA
    coherence_time_s: float = COHERENCE_TIME_S


@dataclass(frozen=True, eq=False)
class Components:
    """The random parts of a sea: per component a frequency jitter u (0..1), a direction
    quantile q (0..1) and a phase ψ (rad); and the key of the evolving amplitudes g_{n,j}
    (`envelope_coefficients`)."""

    jitter: np.ndarray
    quantile: np.ndarray
    phase_rad: np.ndarray
    envelope_key: int = 0

    @classmethod
    def draw(cls, rng: np.random.Generator, n_components: int = N_COMPONENTS) -> Components:
        return cls(
            rng.uniform(0.0, 1.0, n_components),
            rng.uniform(0.0, 1.0, n_components),
            rng.uniform(0.0, 2.0 * np.pi, n_components),
            int(rng.integers(0, 2**63)),
        )


def envelope_coefficients(key: int, knot: int, n_components: int) -> np.ndarray:
    """g_{n,j} at knot j: (2, N) real and imaginary parts, each N(0, 1/2) (E|g|² = 1), from
    Philox(key) with its counter at (0, 0, 0, j): the same values whoever asks."""
    generator = np.random.Generator(np.random.Philox(key=key, counter=[0, 0, 0, int(knot)]))
    return generator.standard_normal((2, n_components)) * math.sqrt(0.5)


def envelope_peak(components: Components, n_knots: int) -> float:
    """max |g_{n,j}| over knots 0 .. n_knots − 1 (bounds the evolving mode amplitudes)."""
    peak = 0.0
    for knot in range(n_knots):
        g = envelope_coefficients(components.envelope_key, knot, components.jitter.size)
        peak = max(peak, float(np.hypot(g[0], g[1]).max()))
    return peak


def envelope_weights(tau_s: np.ndarray, coherence_time_s: float) -> tuple[np.ndarray, ...]:
    """(knot j, w_j, w_{j+1}) per time τ (s): j = ⌊τ/T_c⌋, u = τ/T_c − j, w = (1 − u, u) /
    sqrt((1 − u)² + u²), so the interpolated g keeps E|g|² = 1 at every τ."""
    position = np.asarray(tau_s, dtype=np.float64) / coherence_time_s
    knot = np.floor(position).astype(np.int64)
    u = position - knot
    norm = np.sqrt((1.0 - u) ** 2 + u * u)
    return knot, (1.0 - u) / norm, u / norm


# --- physics (pure numpy) ---------------------------------------------------------------------


def wavenumber(omega: np.ndarray, depth_m: np.ndarray | float) -> np.ndarray:
    """k (rad/m) with ω² = g k tanh(k h), broadcast over ω (rad/s) and h (m): Fenton & McKee's
    (1990) approximation, then three Newton steps."""
    omega = np.asarray(omega, dtype=np.float64)
    depth_m = np.asarray(depth_m, dtype=np.float64)
    deep = omega**2 / GRAVITY
    k = deep / np.tanh((deep * depth_m) ** 0.75) ** (2.0 / 3.0)
    for _ in range(3):
        t = np.tanh(k * depth_m)
        k = k - (GRAVITY * k * t - omega**2) / (GRAVITY * (t + k * depth_m * (1.0 - t * t)))
    return k


def group_velocity(omega: np.ndarray, k: np.ndarray, depth_m: np.ndarray | float) -> np.ndarray:
    """c_g = (ω/k)(1 + 2kh / sinh 2kh)/2, m/s."""
    kh2 = np.minimum(2.0 * k * depth_m, 700.0)
    return 0.5 * (omega / k) * (1.0 + kh2 / np.sinh(kh2))


def jonswap_shape(frequency_hz: np.ndarray, sea: SeaState) -> np.ndarray:
    """Unscaled JONSWAP S(f) (f⁻⁵ exp(−5/4 (f_p/f)⁴) γ^r)."""
    f = np.asarray(frequency_hz, dtype=np.float64)
    peak = 1.0 / sea.peak_period_s
    sigma = np.where(f <= peak, 0.07, 0.09)
    r = np.exp(-((f - peak) ** 2) / (2.0 * sigma**2 * peak**2))
    return f**-5.0 * np.exp(-1.25 * (peak / f) ** 4) * sea.gamma**r


def component_frequencies(components: Components) -> np.ndarray:
    low, high = FREQUENCY_BAND_HZ
    n = components.jitter.size
    return low + (np.arange(n) + components.jitter) * ((high - low) / n)


def component_amplitudes(frequency_hz: np.ndarray, sea: SeaState) -> np.ndarray:
    """a_n (m) with Σ a_n²/2 = (H_s/4)² and a_n² ∝ S(f_n)."""
    shape = jonswap_shape(frequency_hz, sea)
    return (sea.significant_wave_height_m / 4.0) * np.sqrt(2.0 * shape / shape.sum())


def component_directions(components: Components, sea: SeaState) -> np.ndarray:
    """θ_n (rad) at the quantiles of cos^{2s}((θ − θ_m)/2) on |θ| < 89° (0.01° grid)."""
    grid = np.radians(np.linspace(-MAX_DIRECTION_DEG, MAX_DIRECTION_DEG, 17801))
    density = np.cos((grid - math.radians(sea.mean_direction_deg)) / 2.0) ** (2.0 * sea.spreading_s)
    cumulative = np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]))])
    return np.interp(components.quantile * cumulative[-1], cumulative, grid)


@dataclass(frozen=True, eq=False)
class SwellModes:
    """Strain-rate mode amplitudes of one slot on channels [start, stop): rows
    [ω S sin(Φ+ψ); ω S cos(Φ+ψ)] (2N, channels), 1/s, ω (rad/s), and the evolving
    amplitudes' key and knot spacing T_c (s)."""

    omega: np.ndarray
    modes: np.ndarray
    envelope_key: int = 0
    coherence_time_s: float = COHERENCE_TIME_S


class SlotSea(Protocol):
    """What the swell of a realisation depends on (`das_synth_slots.DasSlot` has it): its sea
    state and its components."""

    @property
    def sea(self) -> SeaState: ...

    @property
    def components(self) -> Components: ...


def swell_modes(slot: SlotSea, cable: Cable, start: int, stop: int) -> SwellModes:
    """ε̇(x, τ) = Σ_n modes[n] cos ω_n τ + modes[N + n] sin ω_n τ on channels [start, stop)."""
    frequency = component_frequencies(slot.components)
    omega = 2.0 * np.pi * frequency
    amplitude = component_amplitudes(frequency, slot.sea)
    theta = component_directions(slot.components, slot.sea)
    _, reference_depth = cable.depth_range_m()
    k_reference = wavenumber(omega, reference_depth)
    k_y = k_reference * np.sin(theta)
    # Channels 0 .. stop-1: the WKB phase integrates from channel 0 (same sums for any block).
    distance = cable.distance_m(0, stop)
    depth = cable.depth_m(distance)[None, :]
    k = wavenumber(omega[:, None], depth)
    k_x = np.sqrt(np.maximum(k * k - (k_y**2)[:, None], 0.0))
    steps = 0.5 * (k_x[:, 1:] + k_x[:, :-1]) * np.diff(distance)[None, :]
    phase = np.concatenate([np.zeros((omega.size, 1)), np.cumsum(steps, axis=1)], axis=1)
    k, k_x, depth, phase = k[:, start:], k_x[:, start:], depth[:, start:], phase[:, start:]
    cos_local = k_x / k
    cos_reference = np.cos(theta)[:, None]
    c_g = group_velocity(omega[:, None], k, depth)
    c_g_reference = group_velocity(omega, k_reference, reference_depth)[:, None]
    shoaling = np.sqrt(c_g_reference * cos_reference / (c_g * cos_local))
    pressure = WATER_DENSITY * GRAVITY * amplitude[:, None] * shoaling / np.cosh(k * depth)
    gauge = np.sinc(k_x * cable.gauge_length_m / (2.0 * np.pi))
    strain = STRAIN_PER_PASCAL * pressure * cos_local**2 * gauge  # ε = −strain cos(Φ+ωτ+ψ)
    argument = phase + slot.components.phase_rad[:, None]
    rate = omega[:, None] * strain
    modes = np.concatenate([rate * np.sin(argument), rate * np.cos(argument)])
    return SwellModes(omega, modes, slot.components.envelope_key, slot.sea.coherence_time_s)


def mode_bound(slot: SlotSea, cable: Cable) -> float:
    """B >= Σ_rows |modes| on every channel: 2 ω_n (1−2ν)/(2μ) ρ g a_n sqrt(c_g(h_ref) /
    min c_g) summed over n (|sin| + |cos| <= 2; cos², sinc, 1/cosh <= 1; cos θ_ref <= cos θ(x);
    min c_g over 64 depths spanning the cable's, and its ends)."""
    frequency = component_frequencies(slot.components)
    omega = 2.0 * np.pi * frequency
    amplitude = component_amplitudes(frequency, slot.sea)
    shallow, deep = cable.depth_range_m()
    depths = np.linspace(shallow, deep, 64)[None, :]
    c_g = group_velocity(omega[:, None], wavenumber(omega[:, None], depths), depths)
    ratio = np.sqrt(c_g[:, -1] / c_g.min(axis=1))
    bound = 2.0 * STRAIN_PER_PASCAL * WATER_DENSITY * GRAVITY * (omega * amplitude * ratio).sum()
    return float(bound) * (1.0 + 1e-9) or 1.0


def swell_bound(slot: SlotSea, cable: Cable, duration_s: float) -> float:
    """B_g >= Σ_rows |g-weighted modes| on every channel over a slot of `duration_s` (s):
    `mode_bound` × max |g_{n,j}| over its knots (the interpolated g is at most that)."""
    n_knots = int(duration_s // slot.sea.coherence_time_s) + 2
    return mode_bound(slot, cable) * max(envelope_peak(slot.components, n_knots), 1e-300)


def _knot_modes(swell: SwellModes, knot: int, turn: np.ndarray) -> np.ndarray:
    """The modes times g_{n,j} (C' = g_r C + g_i S, S' = g_r S − g_i C), rotated to an anchor
    whose phase is `turn` = ω a / rate."""
    n = swell.omega.size
    cos_modes, sin_modes = swell.modes[:n], swell.modes[n:]
    g_real, g_imag = envelope_coefficients(swell.envelope_key, knot, n)[:, :, None]
    cos_g = g_real * cos_modes + g_imag * sin_modes
    sin_g = g_real * sin_modes - g_imag * cos_modes
    c, s = np.cos(turn)[:, None], np.sin(turn)[:, None]
    return np.concatenate([cos_g * c + sin_g * s, sin_g * c - cos_g * s])


def swell_strain_rate(
    sample: np.ndarray, sampling_rate_hz: float, swell: SwellModes, bound: float
) -> np.ndarray:
    """Swell strain rate (time, channel) float64 at slot-local sample indices `sample` (τ =
    sample / rate), `bound` from `swell_bound`. Exact integer arithmetic (module docstring):
    with τ = (a + d) / rate, a the anchor (a multiple of 1024 samples) and 0 <= d < 1024, the
    modes times g at the two knots around τ are rotated to the anchor (phase ω a / rate) and
    rounded, the basis [cos ω d / rate, sin ω d / rate] is rounded, and their products sum
    integers, then w_j P_j + w_{j+1} P_{j+1}; a, d, j and so every value depend on the sample
    alone."""
    scale = 2.0**_MODE_BITS / bound
    field = np.empty((sample.size, swell.modes.shape[1]))
    anchors, offsets = np.divmod(sample, _ANCHOR_SAMPLES)
    knots, weight_low, weight_high = envelope_weights(
        sample / sampling_rate_hz, swell.coherence_time_s
    )
    low, high = int(offsets.min(initial=0)), int(offsets.max(initial=-1)) + 1
    phase = (np.arange(low, high) / sampling_rate_hz)[:, None] * swell.omega[None, :]
    basis = np.rint(np.concatenate([np.cos(phase), np.sin(phase)], axis=1) * 2.0**_BASIS_BITS)
    for anchor in np.unique(anchors):
        in_anchor = anchors == anchor
        turn = swell.omega * (anchor * _ANCHOR_SAMPLES / sampling_rate_hz)
        rounded: dict[int, np.ndarray] = {}
        for knot in np.unique(knots[in_anchor]):
            rows = np.flatnonzero(in_anchor & (knots == knot))
            products = []
            for j in (int(knot), int(knot) + 1):
                if j not in rounded:
                    rounded[j] = np.rint(_knot_modes(swell, j, turn) * scale)
                products.append(basis[offsets[rows] - low] @ rounded[j])
            field[rows] = (
                weight_low[rows, None] * products[0] + weight_high[rows, None] * products[1]
            )
    return field * (bound / 2.0 ** (_BASIS_BITS + _MODE_BITS))
