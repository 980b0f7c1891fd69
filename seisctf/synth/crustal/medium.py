"""The finite-difference grid and the heterogeneous random medium on it.

Background: homogeneous P velocity vp0, S velocity vs0 = vp0 / `vp_vs_ratio` (√3: a Poisson
solid), density from Gardner et al. (1974, Geophysics 39): ρ0 = 310 vp0^0.25 (kg/m³, vp0 in m/s).

Perturbations (Frankel & Clayton 1986, JGR 91; Sato, Fehler & Maeda 2012, *Seismic Wave
Propagation and Scattering in the Heterogeneous Earth*, ch. 2): one zero-mean, unit-variance
Gaussian random field δ scales all three,

    vp = vp0 (1 + ε δ),   vs = vs0 (1 + ε δ),   ρ = ρ0 (1 + 0.8 ε δ),

ε the fractional standard deviation (`perturbation_std`), 0.8 a Birch-type density–velocity
scaling, δ clipped to ±3. δ is white noise (numpy `default_rng(seed)`, one draw per grid node in C
order) filtered in the wavenumber domain by the square root of the power spectrum

    von Kármán:  P(k) ∝ (1 + k² a²)^−(κ + 3/2)    (3D; Hurst exponent κ, correlation length a)
    Gaussian:    P(k) ∝ exp(−k² a² / 4)

and normalised to zero mean and unit variance over the grid (periodic on the grid). The same seed
gives the same pattern for any a, κ, ε or vp0, so sweeps over them change one thing at a time.

Staggered material (Graves 1996, BSSA 86): the buoyancy at a velocity node is the inverse of the
arithmetic mean of the two adjacent densities; μ at a shear-stress node is the harmonic mean of
its four neighbours; λ and μ at normal-stress nodes as they are. On the free-surface row (k = 0)
the normal stresses obey plane stress (σzz = 0): ∂t σxx = a ∂x vx + b ∂y vy, ∂t σyy = b ∂x vx +
a ∂y vy with a = 4μ(λ+μ)/(λ+2μ) = b + 2μ, b = 2λμ/(λ+2μ) (`Staggered.surface_lam`): the
update of every other row with λ replaced by b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seisctf.errors import InvalidInput

GARDNER_COEFFICIENT = 310.0  # ρ = 310 vp^0.25, kg/m³ with vp in m/s
DENSITY_SCALING = 0.8  # δρ/ρ = 0.8 δv/v
PERTURBATION_CLIP = 3.0  # δ clipped to ±3 standard deviations
MEDIUM_KINDS = ("von_karman", "gaussian")


@dataclass(frozen=True)
class Grid:
    """A regular grid of `spacing_m` with normal-stress node (k, i, j) at depth k·h, x = x0 + i·h,
    y = y0 + j·h; arrays are indexed (z, x, y), shape (nz, nx, ny). The outer `pml_cells` on the
    four sides and at the bottom absorb (C-PML); the top row (k = 0) is the free surface."""

    spacing_m: float
    nz: int
    nx: int
    ny: int
    x0_m: float
    y0_m: float
    pml_cells: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.nz, self.nx, self.ny)

    def core_bounds_m(self) -> dict[str, tuple[float, float]]:
        """x, y and depth ranges (m) of the nodes outside the absorbing layer."""
        h, n = self.spacing_m, self.pml_cells
        return {
            "x": (self.x0_m + n * h, self.x0_m + (self.nx - 1 - n) * h),
            "y": (self.y0_m + n * h, self.y0_m + (self.ny - 1 - n) * h),
            "depth": (0.0, (self.nz - 1 - n) * h),
        }

    def as_dict(self) -> dict:
        return {
            "spacing_m": self.spacing_m,
            "shape_zxy": list(self.shape),
            "x0_m": self.x0_m,
            "y0_m": self.y0_m,
            "pml_cells": self.pml_cells,
        }


def grid_for_extent(
    x_extent_m: float,
    y_extent_m: float,
    *,
    spacing_m: float,
    depth_m: float,
    margin_m: float,
    pml_cells: int,
) -> Grid:
    """The grid whose core covers x in [−margin, x_extent + margin], y likewise (centred) and
    depths 0 … depth_m, with `pml_cells` more on the sides and at the bottom."""
    for name, value in (("spacing_m", spacing_m), ("depth_m", depth_m)):
        if not (math.isfinite(value) and value > 0):
            raise InvalidInput(name, f"must be positive, got {value}")
    if not (math.isfinite(margin_m) and margin_m >= 0) or pml_cells < 0:
        raise InvalidInput("grid", "margin_m and pml_cells must be non-negative")

    def axis(extent: float) -> tuple[int, float]:
        cells = math.ceil((extent + 2 * margin_m) / spacing_m - 1e-9)
        first = (extent - cells * spacing_m) / 2.0  # centred on the sensors
        return cells + 1 + 2 * pml_cells, first - pml_cells * spacing_m

    nx, x0 = axis(x_extent_m)
    ny, y0 = axis(y_extent_m)
    nz = math.ceil(depth_m / spacing_m - 1e-9) + 1 + pml_cells
    return Grid(float(spacing_m), nz, nx, ny, x0, y0, int(pml_cells))


@dataclass(frozen=True)
class MediumParameters:
    """Background and perturbation of the random medium (velocities m/s, lengths m)."""

    vp_m_s: float = 5000.0
    vp_vs_ratio: float = math.sqrt(3.0)
    perturbation_std: float = 0.05
    correlation_length_m: float = 500.0
    hurst: float = 0.3
    kind: str = "von_karman"

    @property
    def vs_m_s(self) -> float:
        return self.vp_m_s / self.vp_vs_ratio

    @property
    def density_kg_m3(self) -> float:
        return GARDNER_COEFFICIENT * self.vp_m_s**0.25

    @property
    def vp_max_m_s(self) -> float:
        """The fastest P velocity the clipped perturbations allow: vp0 (1 + 3ε)."""
        return self.vp_m_s * (1.0 + PERTURBATION_CLIP * self.perturbation_std)

    @property
    def vs_min_m_s(self) -> float:
        """The slowest S velocity the clipped perturbations allow: vs0 (1 − 3ε)."""
        return self.vs_m_s * (1.0 - PERTURBATION_CLIP * self.perturbation_std)

    def checked(self, what: str = "medium") -> MediumParameters:
        """Self, or InvalidInput naming the parameter out of range."""
        if self.kind not in MEDIUM_KINDS:
            raise InvalidInput(what, f"kind must be one of {MEDIUM_KINDS}, got {self.kind!r}")
        positive = ("vp_m_s", "correlation_length_m", "hurst")
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(what, f"{name} must be positive, got {value}")
        if not (math.isfinite(self.vp_vs_ratio) and self.vp_vs_ratio > math.sqrt(4.0 / 3.0)):
            raise InvalidInput(what, "vp_vs_ratio must exceed sqrt(4/3) (λ > −2μ/3)")
        limit = 1.0 / (PERTURBATION_CLIP + 0.5)
        if not 0.0 <= self.perturbation_std <= limit:
            raise InvalidInput(
                what, f"perturbation_std must be in [0, {limit:.3f}], got {self.perturbation_std}"
            )
        return self


def random_field(
    shape: tuple[int, ...],
    spacing_m: float,
    correlation_length_m: float,
    hurst: float,
    kind: str,
    seed: int,
) -> np.ndarray:
    """Zero-mean, unit-variance Gaussian random field (float64, `shape`) with the von Kármán or
    Gaussian power spectrum of the module docstring, from white noise of `default_rng(seed)`."""
    noise = np.random.default_rng(seed).standard_normal(shape)
    spectrum = np.fft.rfftn(noise)
    wavenumber_sq = np.zeros(spectrum.shape)
    for axis, n in enumerate(shape):
        full = axis == len(shape) - 1
        k = 2 * np.pi * (np.fft.rfftfreq(n, spacing_m) if full else np.fft.fftfreq(n, spacing_m))
        index: list[slice | None] = [np.newaxis] * len(shape)
        index[axis] = slice(None)
        wavenumber_sq = wavenumber_sq + k[tuple(index)] ** 2
    ka_sq = wavenumber_sq * correlation_length_m**2
    if kind == "gaussian":
        power = np.exp(-ka_sq / 4.0)
    else:
        power = (1.0 + ka_sq) ** -(hurst + 1.5)
    field = np.fft.irfftn(spectrum * np.sqrt(power), s=shape)
    field -= field.mean()
    std = field.std()
    return field / std if std > 0 else field


@dataclass(frozen=True, eq=False)
class Material:
    """Density (kg/m³), λ and μ (Pa) at the normal-stress nodes, float64 arrays (nz, nx, ny)."""

    density: np.ndarray
    lam: np.ndarray
    mu: np.ndarray

    @property
    def vp(self) -> np.ndarray:
        return np.sqrt((self.lam + 2 * self.mu) / self.density)

    @property
    def vs(self) -> np.ndarray:
        return np.sqrt(self.mu / self.density)


def material(grid: Grid, parameters: MediumParameters, seed: int) -> Material:
    """The medium of `parameters` on `grid`; the perturbation pattern comes from `seed`."""
    parameters.checked()
    if parameters.perturbation_std > 0:
        delta = random_field(
            grid.shape,
            grid.spacing_m,
            parameters.correlation_length_m,
            parameters.hurst,
            parameters.kind,
            seed,
        )
        np.clip(delta, -PERTURBATION_CLIP, PERTURBATION_CLIP, out=delta)
        delta *= parameters.perturbation_std
    else:
        delta = np.zeros(grid.shape)
    vp = parameters.vp_m_s * (1.0 + delta)
    vs = parameters.vs_m_s * (1.0 + delta)
    density = parameters.density_kg_m3 * (1.0 + DENSITY_SCALING * delta)
    mu = density * vs**2
    return Material(density=density, lam=density * vp**2 - 2.0 * mu, mu=mu)


def _shifted_pair_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean of each node and its neighbour at +1 along `axis` (the last node: its own value)."""
    padded = np.concatenate([values, np.take(values, [-1], axis=axis)], axis=axis)
    upper = np.take(padded, np.arange(1, values.shape[axis] + 1), axis=axis)
    return 0.5 * (values + upper)


def _harmonic_four(mu: np.ndarray, axis_a: int, axis_b: int) -> np.ndarray:
    """Harmonic mean of μ over the node and its neighbours at +1 along both axes (edge-padded)."""
    inverse = 1.0 / mu
    pad = [(0, 0)] * mu.ndim
    pad[axis_a] = (0, 1)
    pad[axis_b] = (0, 1)
    padded = np.pad(inverse, pad, mode="edge")
    n_a, n_b = mu.shape[axis_a], mu.shape[axis_b]

    def take(offset_a: int, offset_b: int) -> np.ndarray:
        index = [slice(None)] * mu.ndim
        index[axis_a] = slice(offset_a, offset_a + n_a)
        index[axis_b] = slice(offset_b, offset_b + n_b)
        return padded[tuple(index)]

    total = take(0, 0) + take(1, 0) + take(0, 1) + take(1, 1)
    return 4.0 / total


@dataclass(frozen=True, eq=False)
class Staggered:
    """Material coefficients at the staggered nodes, float32 (nz, nx, ny): buoyancies (1/ρ) at
    vx, vy, vz; λ and μ at the normal-stress nodes and μ at σxy, σxz, σyz; `surface_lam` (nx,
    ny): the plane-stress b of row 0. `vp_max`, `vs_min`: m/s."""

    bx: np.ndarray
    by: np.ndarray
    bz: np.ndarray
    lam: np.ndarray
    mu: np.ndarray
    surface_lam: np.ndarray
    mu_xy: np.ndarray
    mu_xz: np.ndarray
    mu_yz: np.ndarray
    vp_max: float
    vs_min: float


def staggered(medium: Material) -> Staggered:
    """Averages of `medium` at the staggered nodes (module docstring), as float32."""
    density, lam, mu = medium.density, medium.lam, medium.mu
    lam2mu = lam + 2.0 * mu

    def f32(values: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(values, dtype=np.float32)

    return Staggered(
        bx=f32(1.0 / _shifted_pair_mean(density, 1)),
        by=f32(1.0 / _shifted_pair_mean(density, 2)),
        bz=f32(1.0 / _shifted_pair_mean(density, 0)),
        lam=f32(lam),
        mu=f32(mu),
        surface_lam=f32(2.0 * lam[0] * mu[0] / lam2mu[0]),
        mu_xy=f32(_harmonic_four(mu, 1, 2)),
        mu_xz=f32(_harmonic_four(mu, 1, 0)),
        mu_yz=f32(_harmonic_four(mu, 2, 0)),
        vp_max=float(np.sqrt(np.max(lam2mu / density))),
        vs_min=float(np.sqrt(np.min(mu / density))),
    )
