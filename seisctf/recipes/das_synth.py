"""Offline synthetic ocean-bottom DAS record: swell, an earthquake and instrument noise.

A straight cable runs offshore from its landing (distance x = 0 m at the coast) over a seafloor
whose depth h(x) varies along the cable only (isobaths perpendicular to it: a straight cable
run out normal to a straight coast); piecewise linear between `Cable.depth_profile` knots
(default, scaled to the cable's length: 5 m at the coast, 30 m at 15 % of the cable, a 30 m
plateau to 45 %, then 150 m at the offshore end: swell shoals from deep water to the coast).
Channels sit every `channel_spacing_m`; each measures the axial strain rate averaged over
`gauge_length_m`.

Swell (linear wave theory: Dean & Dalrymple 1991, *Water Wave Mechanics for Engineers and
Scientists*, ch. 3–4; Mei 1989, *The Applied Dynamics of Ocean Surface Waves*, ch. 3)::

    η(x, y, t) = Σ_n a_n cos(Φ_n(x) + ω_n t + ψ_n + k_y,n y)     at the cable, y = 0
    ω² = g k tanh(k h)                                           dispersion, k(x) = k(ω, h(x))

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

Earthquake (optional, one per realisation): a point source at along-cable position x_0,
horizontal offset D from the cable and depth z; hypocentral distance R(x) = sqrt((x − x_0)² +
D² + z²), arrivals T_P = R/v_P, T_S = R/v_S (v_P = 6000 m/s, v_S = 3500 m/s: a homogeneous
crust, straight rays). Far-field plane-wave strain along the cable, ε = ∂u_x/∂x ≈ −(dT/dx) ∂u_x/∂t
with dT/dx = cos α / v and cos α = (x − x_0)/R (Benioff 1935; the cos² response of DAS to P,
Martin et al. 2021, *DAS in Geophysics*, ch. 1): P polarised along the ray (u_x ∝ cos α), S
polarised horizontally across the ray (u_x ∝ −D/r_h, r_h = sqrt((x − x_0)² + D²)), each with a
Gaussian displacement pulse of width σ, so

    ε̇_P = A (R_0/R) cos² α · w((t − t_0 − T_P)/σ_P)
    ε̇_S = −2 A (R_0/R) cos α (D/r_h) · w((t − t_0 − T_S)/σ_S),   w(s) = (1 − s²) exp(−s²/2)

with R_0 = 10 km, σ_P = 1 s, σ_S = 1.5 s (peak frequencies ~0.22 and ~0.15 Hz, inside the
1 Hz CTF band), 1/R geometric spreading and no attenuation. Zero at broadside (x = x_0), where
the apparent slowness vanishes, as DAS sees it.

Instrument noise: white Gaussian strain rate of standard deviation `noise_rms` (1/s) at the
record's rate, from numpy's Philox generator keyed by the seed, one stream per tile of 256 rows ×
256 channels with the counter at the tile's position (the same values for any chunking).

Realisations: the record is `slots` laid end to end, each `slot_samples` long and an
independent realisation (its own sea state, components, earthquake) on its own clock; the record
jumps at slot boundaries. `default_slots` draws them from a seed; the caller sizes the slots so
that each is one guarded CTF segment (pipeline/das_wavefield.py). The parametric slots share
everything (components, H_s, directions, earthquake) but the peak period T_p.

Bitwise reproducibility for any chunking: per slot, the swell is a matrix product of a time basis
[cos ω_n d/rate, sin ω_n d/rate] (d: samples past an anchor, a multiple of 1024 samples) by mode
amplitudes rotated to the anchor's phase; both are rounded to integers (2^20 and 2^32 / B times
their values, B a bound on each channel's Σ|mode|), so every partial sum is an integer below 2^53,
exact in float64 whatever order BLAS sums in. The WKB phase is a cumulative sum from channel 0, the
same additions for every block. The rounding errs by ~3e-7 of the peak, far below the noise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import __version__
from seisctf import conventions as cv
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
MAX_DIRECTION_DEG = 89.0
P_VELOCITY_M_S = 6000.0
S_VELOCITY_M_S = 3500.0
P_WIDTH_S = 1.0
S_WIDTH_S = 1.5
S_TO_P = 2.0
REFERENCE_DISTANCE_M = 10_000.0
START_TIME = "2000-01-01T00:00:00Z"
QUANTITY = cv.DAS_DEFAULT_VAR  # strain_rate
UNITS = "1/s"
INTERROGATOR = "synthetic"
WATER_DEPTH = "water_depth"  # per-channel coordinate, m
ATTR_REALISATIONS = "synthetic_realisations"  # per slot: role, parameter, sea state, earthquake
_BASIS_BITS = 20
_MODE_BITS = 32
_NOISE_STREAM = 0x4E4F495345  # "NOISE": the noise key's seed-sequence entropy beside the seed
_ANCHOR_SAMPLES = 1024  # the swell's phase anchors (swell_strain_rate)
_NOISE_TILE = 256  # rows and channels of one noise stream (noise_block)


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


@dataclass(frozen=True)
class Earthquake:
    """Origin time (s after its slot's start), epicentre along the cable (m) and off it (m),
    depth (m), and A: the peak P strain rate (1/s) at R_0 = 10 km for a ray along the cable."""

    origin_time_s: float
    along_cable_m: float
    offset_m: float
    depth_m: float
    peak_strain_rate: float


@dataclass(frozen=True, eq=False)
class Components:
    """The random parts of a sea: per component a frequency jitter u (0..1), a direction
    quantile q (0..1) and a phase ψ (rad)."""

    jitter: np.ndarray
    quantile: np.ndarray
    phase_rad: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, n_components: int = N_COMPONENTS) -> Components:
        return cls(
            rng.uniform(0.0, 1.0, n_components),
            rng.uniform(0.0, 1.0, n_components),
            rng.uniform(0.0, 2.0 * np.pi, n_components),
        )


@dataclass(frozen=True, eq=False)
class DasSlot:
    """One realisation: its CTF role, the parametric pairs' parameter (NaN if none), its sea,
    its components and its earthquake (or None)."""

    role: str
    parameter_value: float
    sea: SeaState
    components: Components
    earthquake: Earthquake | None = None

    def describe(self) -> dict[str, Any]:
        """Public-safe description (no random draws): role, parameter, sea state, earthquake."""
        return {
            "role": self.role,
            "parameter_value": None if math.isnan(self.parameter_value) else self.parameter_value,
            "sea_state": asdict(self.sea),
            "earthquake": None if self.earthquake is None else asdict(self.earthquake),
        }


def default_slots(
    seed: int,
    roles: tuple[str, ...],
    slot_duration_s: float,
    cable_length_m: float,
    *,
    parameter_values: tuple[float, ...] = (10.0, 12.0, 14.0),
    interpolation: float = 11.0,
    extrapolation: float = 16.0,
    earthquakes: bool = True,
    n_components: int = N_COMPONENTS,
) -> list[DasSlot]:
    """One slot per entry of `roles` (in record order). Every non-parametric role is an
    independent sea (H_s 0.8–2.5 m, T_p 9–15 s, mean direction −40…40°, s 8–25, uniform) with
    its own components and earthquake (origin 10–90 % into the slot, epicentre anywhere along the
    cable, 10–60 km off it, 5–25 km deep, A log-uniform 2e-7…2e-6 /s). The parametric roles
    share one such draw and differ only in T_p: `parameter_values` for param_train (in the
    order those roles appear), `interpolation` and `extrapolation`. All drawn from
    numpy.random.default_rng(seed), the shared family first."""
    rng = np.random.default_rng(seed)

    def draw() -> tuple[SeaState, Components, Earthquake | None]:
        sea = SeaState(
            significant_wave_height_m=float(rng.uniform(0.8, 2.5)),
            peak_period_s=float(rng.uniform(9.0, 15.0)),
            mean_direction_deg=float(rng.uniform(-40.0, 40.0)),
            spreading_s=float(rng.uniform(8.0, 25.0)),
        )
        components = Components.draw(rng, n_components)
        quake = Earthquake(
            origin_time_s=float(rng.uniform(0.1, 0.9) * slot_duration_s),
            along_cable_m=float(rng.uniform(0.0, cable_length_m)),
            offset_m=float(rng.uniform(10e3, 60e3)),
            depth_m=float(rng.uniform(5e3, 25e3)),
            peak_strain_rate=float(10.0 ** rng.uniform(math.log10(2e-7), math.log10(2e-6))),
        )
        return sea, components, quake if earthquakes else None

    family_sea, family_components, family_quake = draw()
    train = iter(parameter_values)
    slots = []
    for role in roles:
        if role.startswith("param_"):
            value = {"param_interp": interpolation, "param_extrap": extrapolation}.get(role)
            value = float(next(train) if value is None else value)
            sea = SeaState(**{**asdict(family_sea), "peak_period_s": value})
            slots.append(DasSlot(role, value, sea, family_components, family_quake))
        else:
            sea, components, quake = draw()
            slots.append(DasSlot(role, math.nan, sea, components, quake))
    return slots


def check_slot(index: int, slot: DasSlot) -> None:
    what = f"realisation {index} ({slot.role})"
    sea = slot.sea
    if not (math.isfinite(sea.significant_wave_height_m) and sea.significant_wave_height_m >= 0):
        raise InvalidInput(what, "significant wave height must be >= 0 m")
    if not (math.isfinite(sea.peak_period_s) and sea.peak_period_s > 0):
        raise InvalidInput(what, f"peak period must be positive, got {sea.peak_period_s}")
    peak_hz = 1.0 / sea.peak_period_s
    if not FREQUENCY_BAND_HZ[0] < peak_hz < FREQUENCY_BAND_HZ[1]:
        raise InvalidInput(
            what,
            f"peak period {sea.peak_period_s} s is outside the swell band "
            f"{1 / FREQUENCY_BAND_HZ[1]:.3g}-{1 / FREQUENCY_BAND_HZ[0]:.3g} s",
        )
    if not (math.isfinite(sea.spreading_s) and sea.spreading_s >= 0):
        raise InvalidInput(what, f"spreading exponent must be >= 0, got {sea.spreading_s}")
    if not abs(sea.mean_direction_deg) < MAX_DIRECTION_DEG:
        raise InvalidInput(what, f"mean direction must be within ±{MAX_DIRECTION_DEG} degrees")
    sizes = {slot.components.jitter.size, slot.components.quantile.size}
    if sizes != {slot.components.phase_rad.size} or not slot.components.jitter.size:
        raise InvalidInput(what, "components need equal, non-zero numbers of draws")


# --- physics (pure numpy) ---------------------------------------------------------------------


def wavenumber(omega: np.ndarray, depth_m: np.ndarray) -> np.ndarray:
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


def group_velocity(omega: np.ndarray, k: np.ndarray, depth_m: np.ndarray) -> np.ndarray:
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
    [ω S sin(Φ+ψ); ω S cos(Φ+ψ)] (2N, channels), 1/s, and ω (rad/s)."""

    omega: np.ndarray
    modes: np.ndarray


def swell_modes(slot: DasSlot, cable: Cable, start: int, stop: int) -> SwellModes:
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
    return SwellModes(omega, np.concatenate([rate * np.sin(argument), rate * np.cos(argument)]))


def mode_bound(slot: DasSlot, cable: Cable) -> float:
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


def swell_strain_rate(
    sample: np.ndarray, sampling_rate_hz: float, swell: SwellModes, bound: float
) -> np.ndarray:
    """Swell strain rate (time, channel) float64 at slot-local sample indices `sample` (τ =
    sample / rate). Exact integer arithmetic (module docstring): with τ = (a + d) / rate, a the
    anchor (a multiple of 1024 samples) and 0 <= d < 1024, the modes are rotated to the anchor
    (phase ω a / rate) and rounded, the basis [cos ω d / rate, sin ω d / rate] is rounded, and
    their product sums integers; a, d and so every value depend on the sample alone."""
    n = swell.omega.size
    cos_modes, sin_modes = swell.modes[:n], swell.modes[n:]
    scale = 2.0**_MODE_BITS / bound
    field = np.empty((sample.size, swell.modes.shape[1]))
    anchors, offsets = np.divmod(sample, _ANCHOR_SAMPLES)
    low, high = int(offsets.min(initial=0)), int(offsets.max(initial=-1)) + 1
    phase = (np.arange(low, high) / sampling_rate_hz)[:, None] * swell.omega[None, :]
    basis = np.rint(np.concatenate([np.cos(phase), np.sin(phase)], axis=1) * 2.0**_BASIS_BITS)
    for anchor in np.unique(anchors):
        rows = np.flatnonzero(anchors == anchor)
        turn = swell.omega * (anchor * _ANCHOR_SAMPLES / sampling_rate_hz)
        c, s = np.cos(turn)[:, None], np.sin(turn)[:, None]
        rotated = np.rint(
            np.concatenate([cos_modes * c + sin_modes * s, sin_modes * c - cos_modes * s]) * scale
        )
        field[rows] = basis[offsets[rows] - low] @ rotated
    return field * (bound / 2.0 ** (_BASIS_BITS + _MODE_BITS))


def _wavelet(s: np.ndarray) -> np.ndarray:
    return (1.0 - s * s) * np.exp(-0.5 * s * s)


def earthquake_strain_rate(
    tau_s: np.ndarray, distance_m: np.ndarray, quake: Earthquake
) -> np.ndarray:
    """P and S strain rate (time, channel) float64 at slot times `tau_s` and channel distances
    (module docstring); exactly 0 more than 8 widths from every arrival."""
    along = distance_m - quake.along_cable_m
    horizontal = np.sqrt(along**2 + quake.offset_m**2)
    hypocentral = np.sqrt(horizontal**2 + quake.depth_m**2)
    cos_alpha = along / hypocentral
    spreading = REFERENCE_DISTANCE_M / hypocentral
    transverse = np.divide(
        quake.offset_m, horizontal, out=np.zeros_like(horizontal), where=horizontal > 0
    )
    field = np.zeros((tau_s.size, distance_m.size))
    phases = (
        (P_VELOCITY_M_S, P_WIDTH_S, quake.peak_strain_rate * spreading * cos_alpha**2),
        (
            S_VELOCITY_M_S,
            S_WIDTH_S,
            -S_TO_P * quake.peak_strain_rate * spreading * cos_alpha * transverse,
        ),
    )
    for velocity, width, amplitude in phases:
        arrival = quake.origin_time_s + hypocentral / velocity
        rows = (tau_s >= arrival.min() - 8 * width) & (tau_s <= arrival.max() + 8 * width)
        if rows.any():
            s = (tau_s[rows, None] - arrival[None, :]) / width
            field[rows] += amplitude[None, :] * _wavelet(s)
    return field


def noise_block(key: int, rows: tuple[int, int], channels: tuple[int, int]) -> np.ndarray:
    """Standard normals for rows [r0, r1) × channels [c0, c1) of the record: tile (i, j) of
    256 × 256 samples is Philox(key) with its counter at (0, 0, i, j), its normals in C order,
    so every sample's value depends on its position alone."""
    (r0, r1), (c0, c1) = rows, channels
    out = np.empty((r1 - r0, c1 - c0))
    tile = _NOISE_TILE
    for i in range(r0 // tile, -(-r1 // tile)):
        for j in range(c0 // tile, -(-c1 // tile)):
            counter = [0, 0, i, j]
            normals = np.random.Generator(np.random.Philox(key=key, counter=counter))
            block = normals.standard_normal((tile, tile))
            top, left = max(r0, i * tile), max(c0, j * tile)
            bottom, right = min(r1, (i + 1) * tile), min(c1, (j + 1) * tile)
            out[top - r0 : bottom - r0, left - c0 : right - c0] = block[
                top - i * tile : bottom - i * tile, left - j * tile : right - j * tile
            ]
    return out


# --- Dask wiring ------------------------------------------------------------------------------


def _record_block(
    row_start: int,
    row_stop: int,
    channel_start: int,
    channel_stop: int,
    swells: list[SwellModes],
    *,
    first_slot: int,
    earthquakes: tuple[Earthquake | None, ...],
    bounds: tuple[float, ...],
    slot_samples: int,
    sampling_rate_hz: float,
    cable: Cable,
    noise_key: int,
    noise_rms: float,
) -> np.ndarray:
    """Strain rate, rows [row_start, row_stop) × channels [channel_start, channel_stop), float32."""
    field = np.empty((row_stop - row_start, channel_stop - channel_start))
    distance = cable.distance_m(channel_start, channel_stop)
    for offset, swell in enumerate(swells):
        slot = first_slot + offset
        lo = max(row_start, slot * slot_samples)
        hi = min(row_stop, (slot + 1) * slot_samples)
        sample = np.arange(lo, hi) - slot * slot_samples
        tau_s = sample / sampling_rate_hz
        part = swell_strain_rate(sample, sampling_rate_hz, swell, bounds[slot])
        if earthquakes[slot] is not None:
            part += earthquake_strain_rate(tau_s, distance, earthquakes[slot])
        field[lo - row_start : hi - row_start] = part
    if noise_rms > 0:
        field += noise_rms * noise_block(
            noise_key, (row_start, row_stop), (channel_start, channel_stop)
        )
    return field.astype(np.float32)


def _noise_key(seed: int) -> int:
    entropy = np.random.SeedSequence([int(seed), _NOISE_STREAM])
    return int(entropy.generate_state(1, np.uint64)[0])


def _edges(chunks: tuple[int, ...]) -> list[int]:
    return [int(edge) for edge in np.cumsum((0, *chunks))]


def synthesize_das(
    cable: Cable,
    slots: list[DasSlot],
    slot_samples: int,
    *,
    sampling_rate_hz: float = 5.0,
    seed: int = 0,
    noise_rms: float = 3e-9,
    time_chunk: int | None = None,
    channel_chunk: int | None = None,
    attrs: dict[str, Any] | None = None,
) -> xr.Dataset:
    """Lazy DAS store (conventions: `strain_rate(time, distance)` float32, 1/s, no time
    coordinate, `distance` and `water_depth` per channel, m), `len(slots) × slot_samples` rows
    at `sampling_rate_hz`. Chunks from `conventions.time_space_chunks` unless given; the values
    are bitwise the same for any chunking and worker count. `seed` keys the instrument noise
    only (the slots carry their own draws) and is not recorded; `attrs` are added."""
    cable.check()
    if not slots:
        raise InvalidInput("slots", "needs at least one realisation")
    for index, slot in enumerate(slots):
        check_slot(index, slot)
    if not (math.isfinite(sampling_rate_hz) and sampling_rate_hz > 0):
        raise InvalidInput("sampling_rate_hz", f"must be positive, got {sampling_rate_hz}")
    if FREQUENCY_BAND_HZ[1] >= sampling_rate_hz / 2:
        raise InvalidInput(
            "sampling_rate_hz",
            f"must exceed twice the swell band's {FREQUENCY_BAND_HZ[1]} Hz, got {sampling_rate_hz}",
        )
    if int(slot_samples) != slot_samples or slot_samples < 1:
        raise InvalidInput("slot_samples", f"must be a positive integer, got {slot_samples!r}")
    if not (math.isfinite(noise_rms) and noise_rms >= 0):
        raise InvalidInput("noise_rms", f"must be >= 0, got {noise_rms!r}")
    from dask._task_spec import List, Task, TaskRef
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    slots = tuple(slots)
    n_time, n_channels = len(slots) * int(slot_samples), int(cable.n_channels)
    rows, columns = cv.time_space_chunks(n_time, n_channels)
    rows, columns = time_chunk or rows, channel_chunk or columns
    time_chunks = (rows,) * (n_time // rows) + ((n_time % rows,) if n_time % rows else ())
    channel_chunks = (columns,) * (n_channels // columns) + (
        (n_channels % columns,) if n_channels % columns else ()
    )
    row_edges, channel_edges = _edges(time_chunks), _edges(channel_chunks)
    bounds = tuple(mode_bound(slot, cable) for slot in slots)
    noise_key = _noise_key(seed)
    token = tokenize(
        cable,
        [slot.describe() for slot in slots],
        slot_samples,
        sampling_rate_hz,
        noise_key,
        noise_rms,
        time_chunks,
        channel_chunks,
        [(s.components.jitter, s.components.quantile, s.components.phase_rad) for s in slots],
    )
    name, modes_name = f"das-synth-{token}", f"das-swell-modes-{token}"
    layer: dict[tuple, Task] = {}
    for slot_index, slot in enumerate(slots):
        for c in range(len(channel_chunks)):
            key = (modes_name, slot_index, c)
            layer[key] = Task(key, swell_modes, slot, cable, channel_edges[c], channel_edges[c + 1])
    options = {
        "earthquakes": tuple(slot.earthquake for slot in slots),  # small: every task has them
        "bounds": bounds,
        "slot_samples": int(slot_samples),
        "sampling_rate_hz": float(sampling_rate_hz),
        "cable": cable,
        "noise_key": noise_key,
        "noise_rms": float(noise_rms),
    }
    for t in range(len(time_chunks)):
        first = row_edges[t] // slot_samples
        last = (row_edges[t + 1] - 1) // slot_samples
        for c in range(len(channel_chunks)):
            key = (name, t, c)
            swells = List(*(TaskRef((modes_name, s, c)) for s in range(first, last + 1)))
            layer[key] = Task(
                key,
                _record_block,
                row_edges[t],
                row_edges[t + 1],
                channel_edges[c],
                channel_edges[c + 1],
                swells,
                first_slot=first,
                **options,
            )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[])
    strain_rate = da.Array(
        graph,
        name,
        (time_chunks, channel_chunks),
        dtype=np.float32,
        meta=np.empty((0, 0), dtype=np.float32),
    )
    distance = cable.distance_m()
    shallow, deep = cable.depth_range_m()
    store_attrs = {
        cv.ATTR_START_TIME: START_TIME,
        cv.ATTR_SAMPLING_RATE: float(sampling_rate_hz),
        cv.ATTR_QUANTITY: QUANTITY,
        cv.ATTR_UNITS: UNITS,
        cv.ATTR_GAUGE_LENGTH: float(cable.gauge_length_m),
        cv.ATTR_CHANNEL_SPACING: float(cable.channel_spacing_m),
        cv.ATTR_INTERROGATOR: INTERROGATOR,
        "depth_profile_m": [[float(x), float(h)] for x, h in zip(*cable.knots(), strict=True)],
        "slot_samples": int(slot_samples),
        "noise_rms": float(noise_rms),
        ATTR_REALISATIONS: [slot.describe() for slot in slots],
        "generator": (
            f"seisctf {__version__} recipes.das_synth: JONSWAP × cos^2s swell on "
            f"ω² = g k tanh(k h) (WKB, Snell), seafloor pressure → half-space strain, "
            f"P/S moveout, white noise; depth {shallow:g}-{deep:g} m"
        ),
        **(attrs or {}),
    }
    return xr.Dataset(
        {QUANTITY: ((cv.TIME, cv.DISTANCE), strain_rate, {cv.ATTR_UNITS: UNITS})},
        coords={
            cv.DISTANCE: (cv.DISTANCE, distance, {cv.ATTR_UNITS: "m"}),
            WATER_DEPTH: (cv.DISTANCE, cable.depth_m(distance), {cv.ATTR_UNITS: "m"}),
        },
        attrs=store_attrs,
    )
