"""The point source: a double-couple moment tensor, its moment rate, and its injection.

Moment tensor (Aki & Richards 2002, *Quantitative Seismology*, Box 4.4; x north, y east, z down;
strike φ clockwise from north with the fault dipping to the right of the strike direction, dip δ
from the horizontal, rake λ the slip direction in the fault plane, counter-clockwise from the
strike direction, as the hanging wall moves relative to the footwall)::

    Mxx = −M0 (sin δ cos λ sin 2φ + sin 2δ sin λ sin² φ)
    Mxy =  M0 (sin δ cos λ cos 2φ + ½ sin 2δ sin λ sin 2φ)
    Mxz = −M0 (cos δ cos λ cos φ  + cos 2δ sin λ sin φ)
    Myy =  M0 (sin δ cos λ sin 2φ − sin 2δ sin λ cos² φ)
    Myz = −M0 (cos δ cos λ sin φ  − cos 2δ sin λ cos φ)
    Mzz =  M0 sin 2δ sin λ

equal to M0 (n sᵀ + s nᵀ) with the fault normal n = (−sin δ sin φ, sin δ cos φ, −cos δ) and the
slip s = (cos λ cos φ + cos δ sin λ sin φ, cos λ sin φ − cos δ sin λ cos φ, −sin λ sin δ)
(A&R eq. 4.88; tested). Far-field P displacement is ∝ γ·M·γ (γ the unit vector from source to
receiver): positive (compressional, away from the source) in the quadrants of the tension axis.

Moment rate Ṁ(t) = M s(t), s(t) = exp(−((t − t0)/τ)²) / (τ √π): unit area, a Gaussian peaking at
the origin time t0 with half-width τ (`half_duration_s`); its spectrum exp(−(ωτ)²/4) falls to 1 %
at f = √(ln 100) / (π τ) ≈ 0.683 / τ. The source "stops" (s < 1e-7 of its peak) after t0 + 4τ.

Injection (stress glut: ∂t σij = … − Ṁij(t) δ(x − x_s); Graves 1996, BSSA 86): each stress
update subtracts Δt Ṁij(t) w / h³ at the nodes of σij's own staggered grid around the source, w
its trilinear weights (sum 1), so the radiated field moves smoothly with the source position. The
sign makes an explosion (M = M0 I) push outwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.recipes.crustal.medium import Grid

STOP_HALF_WIDTHS = 4.0  # s(t0 + 4τ) / s(t0) = e^-16
MIN_DEPTH_CELLS = 2  # the source's shear-stress nodes stay below the free surface
# (x, y, z) offsets of each stress component's nodes, in grid cells.
STRESS_OFFSETS = {
    "xx": (0.0, 0.0, 0.0),
    "yy": (0.0, 0.0, 0.0),
    "zz": (0.0, 0.0, 0.0),
    "xy": (0.5, 0.5, 0.0),
    "xz": (0.5, 0.0, 0.5),
    "yz": (0.0, 0.5, 0.5),
}


@dataclass(frozen=True)
class PointSource:
    """A double couple at (x, y, depth) in metres (x north, y east), strike/dip/rake in degrees,
    scalar moment in N·m, moment-rate peak at `origin_time_s` with half-width `half_duration_s`."""

    x_m: float
    y_m: float
    depth_m: float
    strike_deg: float
    dip_deg: float
    rake_deg: float
    origin_time_s: float
    moment_nm: float = 1.0e15
    half_duration_s: float = 0.3

    @property
    def stop_time_s(self) -> float:
        """After this the moment rate is below e^-16 of its peak."""
        return self.origin_time_s + STOP_HALF_WIDTHS * self.half_duration_s

    def checked(self, grid: Grid, what: str = "source") -> PointSource:
        """Self, or InvalidInput when a value is out of range or the source is outside the
        grid's core (not in the absorbing layer, at least two cells below the free surface)."""
        values = (
            self.x_m,
            self.y_m,
            self.depth_m,
            self.strike_deg,
            self.dip_deg,
            self.rake_deg,
            self.origin_time_s,
        )
        if not all(math.isfinite(value) for value in values):
            raise InvalidInput(what, "every coordinate, angle and time must be finite")
        if not (self.moment_nm > 0 and self.half_duration_s > 0):
            raise InvalidInput(what, "moment_nm and half_duration_s must be positive")
        if not 0.0 <= self.dip_deg <= 90.0:
            raise InvalidInput(what, f"dip must be in [0, 90] degrees, got {self.dip_deg}")
        bounds = grid.core_bounds_m()
        top = MIN_DEPTH_CELLS * grid.spacing_m
        inside = (
            bounds["x"][0] <= self.x_m <= bounds["x"][1]
            and bounds["y"][0] <= self.y_m <= bounds["y"][1]
            and top <= self.depth_m <= bounds["depth"][1] - grid.spacing_m
        )
        if not inside:
            raise InvalidInput(
                what,
                f"at x={self.x_m:.0f}, y={self.y_m:.0f}, depth={self.depth_m:.0f} m is outside "
                f"the grid's core (x {bounds['x']}, y {bounds['y']}, depth from {top:.0f} to "
                f"{bounds['depth'][1] - grid.spacing_m:.0f} m)",
            )
        return self


def moment_tensor(strike_deg: float, dip_deg: float, rake_deg: float, moment_nm: float = 1.0):
    """The symmetric 3×3 moment tensor (N·m; x north, y east, z down) of Box 4.4."""
    phi, delta, lam = (math.radians(v) for v in (strike_deg, dip_deg, rake_deg))
    sd, cd, s2d, c2d = math.sin(delta), math.cos(delta), math.sin(2 * delta), math.cos(2 * delta)
    sl, cl = math.sin(lam), math.cos(lam)
    sp, cp, s2p, c2p = math.sin(phi), math.cos(phi), math.sin(2 * phi), math.cos(2 * phi)
    mxx = -(sd * cl * s2p + s2d * sl * sp**2)
    mxy = sd * cl * c2p + 0.5 * s2d * sl * s2p
    mxz = -(cd * cl * cp + c2d * sl * sp)
    myy = sd * cl * s2p - s2d * sl * cp**2
    myz = -(cd * cl * sp - c2d * sl * cp)
    mzz = s2d * sl
    return moment_nm * np.array([[mxx, mxy, mxz], [mxy, myy, myz], [mxz, myz, mzz]])


def fault_vectors(strike_deg: float, dip_deg: float, rake_deg: float):
    """(fault normal n, slip direction s), unit vectors of A&R eq. 4.88 (x north, y east,
    z down)."""
    phi, delta, lam = (math.radians(v) for v in (strike_deg, dip_deg, rake_deg))
    normal = np.array(
        [-math.sin(delta) * math.sin(phi), math.sin(delta) * math.cos(phi), -math.cos(delta)]
    )
    slip = np.array(
        [
            math.cos(lam) * math.cos(phi) + math.cos(delta) * math.sin(lam) * math.sin(phi),
            math.cos(lam) * math.sin(phi) - math.cos(delta) * math.sin(lam) * math.cos(phi),
            -math.sin(lam) * math.sin(delta),
        ]
    )
    return normal, slip


def moment_rate_shape(time_s: np.ndarray, origin_time_s: float, half_duration_s: float):
    """s(t) of the module docstring (1/s): unit area, peak at the origin time."""
    x = (np.asarray(time_s, dtype=np.float64) - origin_time_s) / half_duration_s
    return np.exp(-(x**2)) / (half_duration_s * math.sqrt(math.pi))


@dataclass(frozen=True, eq=False)
class Injection:
    """Where and how much of each stress component the source adds per step: for each of
    `STRESS_OFFSETS`, the flat indices of its 8 nodes in (nz, nx, ny) arrays and the values
    −M_ij · w / h³ (Pa·s per unit moment-rate shape; multiply by Δt s(t))."""

    indices: dict[str, np.ndarray]
    values: dict[str, np.ndarray]


def trilinear_nodes(grid: Grid, x_m: float, y_m: float, depth_m: float, offset) -> tuple:
    """Flat indices (8,) and trilinear weights (8,) of the nodes of a staggered grid with
    (x, y, z) `offset` (cells) around a point."""
    h = grid.spacing_m
    fractional = (
        (depth_m / h) - offset[2],
        (x_m - grid.x0_m) / h - offset[0],
        (y_m - grid.y0_m) / h - offset[1],
    )
    base = [math.floor(value) for value in fractional]
    frac = [value - b for value, b in zip(fractional, base, strict=True)]
    indices, weights = [], []
    for dk in (0, 1):
        for di in (0, 1):
            for dj in (0, 1):
                node = (base[0] + dk, base[1] + di, base[2] + dj)
                indices.append(np.ravel_multi_index(node, grid.shape))
                weights.append(
                    (frac[0] if dk else 1 - frac[0])
                    * (frac[1] if di else 1 - frac[1])
                    * (frac[2] if dj else 1 - frac[2])
                )
    return np.array(indices), np.array(weights)


def injection(grid: Grid, source: PointSource) -> Injection:
    """The stress-glut injection of `source` on `grid` (module docstring)."""
    tensor = moment_tensor(source.strike_deg, source.dip_deg, source.rake_deg, source.moment_nm)
    axes = {"x": 0, "y": 1, "z": 2}
    indices, values = {}, {}
    for component, offset in STRESS_OFFSETS.items():
        nodes, weights = trilinear_nodes(grid, source.x_m, source.y_m, source.depth_m, offset)
        m_ij = tensor[axes[component[0]], axes[component[1]]]
        indices[component] = nodes
        values[component] = -m_ij * weights / grid.spacing_m**3
    return Injection(indices=indices, values=values)
