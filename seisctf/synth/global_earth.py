"""The global synthetic's hidden Earth: lateral heterogeneity, station sites and instruments.

Everything here is drawn from the generator's seed (itself derived from the organiser's secret)
and never written to any store.

Lateral heterogeneity: four zero-mean random fields on the sphere, each a sum of real spherical
harmonics Y_lm up to degree `MAP_MAX_DEGREE` with independent N(0, 1) coefficients scaled to a
red power spectrum (power per degree ∝ (l + 1)^−`MAP_SPECTRAL_SLOPE`), then to a fixed RMS:

    δc/c at 40 s and at 150 s      Rayleigh phase velocity, RMS 1.5 % and 1.0 %
    δs_P/s_P, δs_S/s_S             body-wave slowness (the mantle the rays sample), RMS 0.4, 0.8 %

Global phase-velocity maps have most of their power below degree ~10 and peak-to-peak variations
of ±5–8 % at 40 s, ±3–4 % at 150 s (Ekström et al. 1997, JGR 102; Ekström 2011, GJI 187);
teleseismic P residuals are ±1–2 s, S residuals ±3–5 s (Kennett & Engdahl 1991). At a period T
between 40 and 150 s the map is the blend with weight ln(T/40)/ln(150/40) (clipped to [0, 1]).

Path integrals (the great-circle ray approximation, Woodhouse & Wong 1986; Trampert & Woodhouse
1995): orbit Rj of a surface wave travels x_1 = Δ (the minor arc), x_2 = 2π − Δ (the major arc),
x_3 = 2π + Δ, x_4 = 4π − Δ, … radians; its phase delay is

    δt_j(ω) = −(a x_j / c(ω)) ⟨δc/c⟩_j,

⟨⟩_j the mean of the map over the orbit's path (the minor arc's mean m₁, the whole circle's m₀,
major arc m₂ = (2π m₀ − Δ m₁)/(2π − Δ); R3 = (Δ m₁ + 2π m₀)/(2π + Δ), …), each mean over
`PATH_POINTS` equally spaced points, the map bilinearly interpolated from a 2° grid. Body waves
get δT = T ⟨δs/s⟩ over the minor arc (a crude stand-in for the mantle part of the ray) plus a
station term (N(0, 0.3 s) for P, N(0, 0.8 s) for S).

Stations (per sensor index i, the same in every realisation): a site amplification
exp(0.25 ξ₁) with ξ from a smooth site field (a fifth map, RMS 1) and 0.15 ξ₂ from the station
alone; and a broadband seismometer, a causal second-order high-pass (Wielandt 2012, NMSOP-2
ch. 5) of natural period T_n ∈ {120, 240, 360} s and damping 0.707,

    H(ω) = (iω)² / ((iω)² + 2 β ω_n (iω) + ω_n²),   ω_n = 2π / T_n.

Per-station random numbers come from a counter-based hash (SplitMix64, Steele et al. 2014) of
(seed, station, draw), so any block of stations gets the same values as the whole array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import map_coordinates
from scipy.special import ndtri, sph_harm_y

MAP_MAX_DEGREE = 20
MAP_SPECTRAL_SLOPE = 2.0
MAP_STEP_DEG = 2.0
PATH_POINTS = 48
SHORT_PERIOD_S, LONG_PERIOD_S = 40.0, 150.0
MAP_RMS = {"c_short": 0.015, "c_long": 0.010, "p": 0.004, "s": 0.008, "site": 1.0}
STATION_TERM_S = {"P": 0.3, "S": 0.8}
SITE_SMOOTH, SITE_LOCAL = 0.25, 0.15
NATURAL_PERIODS_S = (120.0, 240.0, 360.0)
DAMPING = 0.707
_MASK64 = (1 << 64) - 1


def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 `values` (wrapping arithmetic)."""
    z = np.asarray(values, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hashed_uniform(key: int, first: np.ndarray, second: np.ndarray | int) -> np.ndarray:
    """Uniform numbers in (0, 1), a pure function of (key, first, second) elementwise."""
    stream = splitmix64(np.uint64(key & _MASK64) ^ np.asarray(first).astype(np.uint64))
    bits = splitmix64(stream + np.asarray(second).astype(np.int64).astype(np.uint64))
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def hashed_normal(key: int, first: np.ndarray, second: np.ndarray | int) -> np.ndarray:
    """Standard normal numbers, a pure function of (key, first, second) elementwise."""
    return ndtri(hashed_uniform(key, first, second))


def random_sphere_map(rng: np.random.Generator, rms: float) -> np.ndarray:
    """A red-spectrum random field on the 2° grid (latitude −90…90, longitude −180…180), RMS
    `rms` (area-weighted), shape (91, 181); its last column repeats the first."""
    colatitude = np.pi / 2 - np.radians(np.arange(-90.0, 90.0 + MAP_STEP_DEG / 2, MAP_STEP_DEG))
    longitude = np.radians(np.arange(-180.0, 180.0 + MAP_STEP_DEG / 2, MAP_STEP_DEG))
    field = np.zeros((colatitude.size, longitude.size))
    for degree in range(1, MAP_MAX_DEGREE + 1):
        scale = (degree + 1.0) ** (-MAP_SPECTRAL_SLOPE / 2) / math.sqrt(2 * degree + 1)
        for order in range(0, degree + 1):
            # Y_lm(θ, φ) = Θ_lm(θ) e^{imφ}: real part ∝ cos mφ, imaginary part ∝ sin mφ.
            theta_part = sph_harm_y(degree, order, colatitude, 0.0).real
            azimuth_part = rng.standard_normal() * np.cos(order * longitude)
            if order:
                azimuth_part = azimuth_part + rng.standard_normal() * np.sin(order * longitude)
            field += scale * np.outer(theta_part, azimuth_part)
    colatitude = np.broadcast_to(colatitude[:, None], field.shape)
    weight = np.sin(colatitude)
    current = math.sqrt(float((weight * field**2).sum() / weight.sum()))
    return field * (rms / current)


def unit_vectors(latitude_deg: np.ndarray | float, longitude_deg: np.ndarray | float) -> np.ndarray:
    """Cartesian unit vectors (..., 3) of points on the sphere."""
    lat, lon = np.radians(latitude_deg), np.radians(longitude_deg)
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def distance_azimuth(
    source_lat_deg: float, source_lon_deg: float, lat_deg: np.ndarray, lon_deg: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Epicentral distance Δ (rad) and azimuth from the source to each point (rad, clockwise
    from north)."""
    lat0, lon0 = math.radians(source_lat_deg), math.radians(source_lon_deg)
    lat, dlon = np.radians(lat_deg), np.radians(lon_deg) - lon0
    cos_distance = math.sin(lat0) * np.sin(lat) + math.cos(lat0) * np.cos(lat) * np.cos(dlon)
    distance = np.arccos(np.clip(cos_distance, -1.0, 1.0))
    azimuth = np.arctan2(
        np.sin(dlon) * np.cos(lat),
        math.cos(lat0) * np.sin(lat) - math.sin(lat0) * np.cos(lat) * np.cos(dlon),
    )
    return distance, azimuth


def sample_map(field: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Bilinear value of a 2° grid map at unit vectors `points` (..., 3)."""
    latitude = np.degrees(np.arcsin(np.clip(points[..., 2], -1.0, 1.0)))
    longitude = np.degrees(np.arctan2(points[..., 1], points[..., 0]))
    rows = (latitude + 90.0) / MAP_STEP_DEG
    columns = (longitude + 180.0) / MAP_STEP_DEG
    return map_coordinates(field, [rows.ravel(), columns.ravel()], order=1, mode="nearest").reshape(
        rows.shape
    )


@dataclass(frozen=True, eq=False)
class Paths:
    """Great circles from one source to sensors: distance Δ (rad), azimuth (rad) and the points
    of the minor arc and of the whole circle, (sensor, PATH_POINTS, 3)."""

    distance: np.ndarray
    azimuth: np.ndarray
    minor: np.ndarray
    circle: np.ndarray


def great_circle_paths(
    source_lat_deg: float, source_lon_deg: float, lat_deg: np.ndarray, lon_deg: np.ndarray
) -> Paths:
    distance, azimuth = distance_azimuth(source_lat_deg, source_lon_deg, lat_deg, lon_deg)
    origin = unit_vectors(np.float64(source_lat_deg), np.float64(source_lon_deg))
    lat0, lon0 = math.radians(source_lat_deg), math.radians(source_lon_deg)
    north = np.array([-math.sin(lat0) * math.cos(lon0), -math.sin(lat0) * math.sin(lon0)])
    north = np.append(north, math.cos(lat0))
    east = np.array([-math.sin(lon0), math.cos(lon0), 0.0])
    # Unit tangent at the source towards each sensor, from the azimuth (defined even at Δ = 0).
    tangent = np.cos(azimuth)[:, None] * north + np.sin(azimuth)[:, None] * east
    fraction = (np.arange(PATH_POINTS) + 0.5) / PATH_POINTS

    def along(angle: np.ndarray) -> np.ndarray:
        return np.cos(angle)[..., None] * origin + np.sin(angle)[..., None] * tangent[:, None, :]

    minor = along(distance[:, None] * fraction)
    circle = along(np.broadcast_to(2.0 * np.pi * fraction, (distance.size, PATH_POINTS)))
    return Paths(distance, azimuth, minor, circle)


def orbit_means(minor_mean: np.ndarray, circle_mean: np.ndarray, distance: np.ndarray, n: int):
    """(orbit lengths x_j in radians, path means ⟨⟩_j), each (n, sensor), for R1 … Rn."""
    lengths, means = [], []
    for j in range(1, n + 1):
        laps, forward = divmod(j - 1, 2)
        minor_part = distance if forward == 0 else 2.0 * np.pi - distance
        minor_sum = (
            distance * minor_mean
            if forward == 0
            else 2 * np.pi * circle_mean - (distance * minor_mean)
        )
        length = minor_part + 2.0 * np.pi * laps
        lengths.append(length)
        means.append((minor_sum + 2.0 * np.pi * laps * circle_mean) / length)
    return np.stack(lengths), np.stack(means)


@dataclass(frozen=True, eq=False)
class Earth:
    """Hidden maps (2° grids) and the station key. `strength` scales every perturbation (0: the
    1D Earth with identical, flat stations)."""

    key: int
    maps: dict[str, np.ndarray]
    strength: float = 1.0
    sites: bool = True

    def phase_map_weight(self, period_s: np.ndarray) -> np.ndarray:
        """Weight of the 150 s map at `period_s` (that of the 40 s map is 1 − it)."""
        ratio = np.log(np.asarray(period_s) / SHORT_PERIOD_S) / math.log(
            LONG_PERIOD_S / SHORT_PERIOD_S
        )
        return np.clip(ratio, 0.0, 1.0)

    def station_terms(self, sensor_index: np.ndarray, lat_deg, lon_deg) -> dict[str, np.ndarray]:
        """Site amplification, natural period (s) and P and S station delays (s) per sensor."""
        index = np.asarray(sensor_index, dtype=np.int64)
        if not self.sites:
            ones = np.ones(index.shape)
            return {
                "amplification": ones,
                "natural_period_s": np.full(index.shape, np.inf),
                "P": 0.0 * ones,
                "S": 0.0 * ones,
            }
        smooth = sample_map(self.maps["site"], unit_vectors(lat_deg, lon_deg))
        local = hashed_normal(self.key, index, 0)
        choice = np.floor(3.0 * hashed_uniform(self.key, index, 1)).astype(int)
        return {
            "amplification": np.exp(SITE_SMOOTH * smooth + SITE_LOCAL * local),
            "natural_period_s": np.asarray(NATURAL_PERIODS_S)[np.clip(choice, 0, 2)],
            "P": self.strength * STATION_TERM_S["P"] * hashed_normal(self.key, index, 3),
            "S": self.strength * STATION_TERM_S["S"] * hashed_normal(self.key, index, 4),
        }


def instrument_response(omega: np.ndarray, natural_period_s: np.ndarray) -> np.ndarray:
    """H(ω) of the module docstring, (frequency, sensor) complex; 1 for an infinite period."""
    omega_n = 2.0 * np.pi / np.asarray(natural_period_s)[None, :]
    s = 1j * np.asarray(omega)[:, None]
    return s * s / (s * s + 2.0 * DAMPING * omega_n * s + omega_n**2)


def random_earth(seed: int, strength: float = 1.0, sites: bool = True) -> Earth:
    """The Earth of a challenge: maps from numpy's default_rng([seed, 1]), stations keyed by
    the seed."""
    rng = np.random.default_rng([int(seed), 1])
    maps = {name: random_sphere_map(rng, rms) for name, rms in MAP_RMS.items()}
    for field in maps.values():
        field.flags.writeable = False
    return Earth(int(seed), maps, float(strength), bool(sites))
