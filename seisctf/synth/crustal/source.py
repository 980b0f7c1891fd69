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

Moment rate Ṁ(t) = M s(t), causal: s(t) = 0 for t < t_on, the **source onset** (`origin_time_s`),
the first instant at which the source releases moment. s is a sum of sub-events (a simple
multiple-rupture source, as in Kikuchi & Kanamori 1982, BSSA 72), each the same smooth one-sided
pulse of duration D (`duration_s`) delayed by d_j ≥ 0 (the first d = 0) with weight w_j (Σ w = 1)::

    s(t) = Σ_j w_j p(t − t_on − d_j),   p(t) = (8 / (3 D)) sin⁴(π t / D) for 0 ≤ t ≤ D, else 0.

p has unit area, three continuous derivatives at both ends (so no step excites the grid) and its
spectrum falls below 1 % of its zero-frequency value above f = 2.75 / D (0.1 % above 3.85 / D;
computed from the closed form, `SOURCE_BAND_FACTOR`); the far-field velocity spectrum f |P(f)|
peaks at 1.10 / D. The source stops at t_on + max d_j + D. Nothing happens before t_on: the
record is causal (tested: no sensor moves before the onset plus the distance over the fastest
P velocity of the grid).

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
from seisctf.synth.crustal.medium import Grid

SOURCE_BAND_FACTOR = 2.75  # |P(f)| < 1 % of P(0) above 2.75 / D
VELOCITY_PEAK_FACTOR = 1.10  # f |P(f)| peaks at 1.10 / D
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
    scalar moment in N·m; moment rate zero before the onset `origin_time_s`, then the sub-events
    (delay s, weight) of the module docstring, each a pulse of `duration_s`."""

    x_m: float
    y_m: float
    depth_m: float
    strike_deg: float
    dip_deg: float
    rake_deg: float
    origin_time_s: float
    moment_nm: float = 1.0e15
    duration_s: float = 1.2
    subevents: tuple[tuple[float, float], ...] = ((0.0, 1.0),)

    @property
    def stop_time_s(self) -> float:
        """After this the moment rate is exactly zero."""
        return self.origin_time_s + max(delay for delay, _ in self.subevents) + self.duration_s

    @property
    def band_limit_hz(self) -> float:
        """Above this the moment rate's spectrum is below 1 % of its zero-frequency value."""
        return SOURCE_BAND_FACTOR / self.duration_s

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
        if not (self.moment_nm > 0 and self.duration_s > 0):
            raise InvalidInput(what, "moment_nm and duration_s must be positive")
        delays = [delay for delay, _ in self.subevents]
        weights = [weight for _, weight in self.subevents]
        if not delays or min(delays) != 0.0 or min(weights) <= 0 or abs(sum(weights) - 1) > 1e-9:
            raise InvalidInput(
                what, "sub-events need delays ≥ 0 (the first 0) and positive weights summing to 1"
            )
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


def pulse(time_s: np.ndarray, duration_s: float) -> np.ndarray:
    """p(t) of the module docstring (1/s): unit area, zero outside 0 ≤ t ≤ D."""
    x = np.asarray(time_s, dtype=np.float64) / duration_s
    inside = (x >= 0.0) & (x <= 1.0)
    shape = np.where(inside, np.sin(np.pi * np.clip(x, 0.0, 1.0)) ** 4, 0.0)
    return shape * (8.0 / 3.0) / duration_s


def moment_rate_shape(time_s: np.ndarray | float, source: PointSource) -> np.ndarray:
    """s(t) of the module docstring (1/s): unit area, zero before the onset."""
    relative = np.asarray(time_s, dtype=np.float64) - source.origin_time_s
    return sum(
        (weight * pulse(relative - delay, source.duration_s) for delay, weight in source.subevents),
        np.zeros_like(relative),
    )


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
