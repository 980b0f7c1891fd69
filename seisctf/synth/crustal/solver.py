"""3D elastic velocity–stress finite differences on a staggered grid (Virieux 1986; Levander 1988;
Graves 1996): 2nd order in time (leapfrog), 4th order in space.

    ρ ∂t vi = ∂j σij + fi,        ∂t σij = λ δij ∂k vk + μ (∂i vj + ∂j vi) − Ṁij(t) δ(x − x_s)

Staggering (x north, y east, z down; node (k, i, j) at z = k h, x = x0 + i h, y = y0 + j h):
σxx, σyy, σzz, λ, μ at (i, j, k); vx at (i+½, j, k); vy at (i, j+½, k); vz at (i, j, k+½); σxy at
(i+½, j+½, k); σxz at (i+½, j, k+½); σyz at (i, j+½, k+½). Velocities live at half time steps,
stresses at whole ones. Every spatial derivative is the 4th-order staggered difference

    ∂f(p) ≈ [c1 (f(p + h/2) − f(p − h/2)) + c2 (f(p + 3h/2) − f(p − 3h/2))] / h,
    c1 = 9/8, c2 = −1/24,

with values outside the grid taken as zero (the absorbing layers damp everything before it gets
there).

Stability (CFL): vp_max Δt / h ≤ 1 / (√3 (c1 − c2)) = 0.4949 (`CFL_LIMIT`); a larger time step is
refused (InvalidInput).

Free surface (stress imaging; Levander 1988, Geophysics 53; Graves 1996): the surface is the
normal-stress row k = 0, where σzz = 0; σzz, σxz and σyz are antisymmetric about it (σzz(−z) =
−σzz(z)), so σxz = σyz = 0 on it, and σxx, σyy obey plane stress there (medium.py). The velocities
needed above the surface are their mirror images, vi(−z) = vi(z): with these images the discrete
operators of the velocity and stress updates are exact negative adjoints of each other (weights ½
on the surface row of the integer-level fields), so the scheme conserves the discrete energy
(`EnergyMeter`; it includes the static strain the source's final moment leaves around it)
without absorbing layers once the source has stopped — tested. The surface records vx, vy on
row 0 and vz half a cell below it.

Absorbing boundaries: a convolutional perfectly matched layer (C-PML with complex frequency
shifting; Roden & Gedney 2000; Komatitsch & Martin 2007, Geophysics 72) of `pml_cells` N on the
four sides and at the bottom. In it every spatial derivative ∂a f is replaced by ∂a f + ψ, with
one memory variable ψ per derivative term, ψ^n = b ψ^(n−1) + a (∂a f)^n, b = exp(−(d + α) Δt),
a = d (b − 1) / (d + α) (κ = 1); d = d0 (s/N)², α = α_max (1 − s/N), s the distance into the
layer in cells (at each derivative's own staggered position), d0 = 3 vp_max ln(1/R) / (2 N h),
R = `pml_reflection` (1e-3), α_max = π f_c with f_c the source's dominant frequency. Its
reflection is tested against a reference run on a larger grid.

Source timing: the stress update from step n to n+1 adds the source at t_n instead of t_n + Δt/2,
which delays the solution by Δt/2, so the velocities after step n's velocity update (time
t_n + Δt/2 in the scheme) are the undelayed field at t_n: `run` hands them to its observers
labelled t_n.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.synth.crustal.medium import Grid, Staggered
from seisctf.synth.crustal.source import Injection, PointSource, moment_rate_shape

C1 = 9.0 / 8.0
C2 = -1.0 / 24.0
CFL_LIMIT = 1.0 / (math.sqrt(3.0) * (C1 - C2))
PAD = 2  # ghost cells on every side of every field (zeros, or the free surface's images)
VELOCITIES = ("vx", "vy", "vz")
STRESSES = ("sxx", "syy", "szz", "sxy", "sxz", "syz")


def courant_number(vp_max_m_s: float, time_step_s: float, spacing_m: float) -> float:
    return vp_max_m_s * time_step_s / spacing_m


def check_time_step(time_step_s: float, vp_max_m_s: float, spacing_m: float) -> None:
    """Refuse a time step beyond the CFL limit of the scheme (InvalidInput)."""
    courant = courant_number(vp_max_m_s, time_step_s, spacing_m)
    if not (math.isfinite(time_step_s) and time_step_s > 0) or courant > CFL_LIMIT:
        raise InvalidInput(
            "time step",
            f"{time_step_s} s gives a Courant number vp_max Δt / h = {courant:.4f} "
            f"(vp_max {vp_max_m_s:.0f} m/s, h {spacing_m:g} m); the scheme is stable only up "
            f"to {CFL_LIMIT:.4f}: use Δt ≤ {CFL_LIMIT * spacing_m / vp_max_m_s:.6f} s",
        )


def stable_substeps(sample_interval_s: float, vp_max_m_s: float, spacing_m: float) -> int:
    """The fewest time steps per output sample that keep the Courant number ≤ 0.9 × the limit."""
    largest = 0.9 * CFL_LIMIT * spacing_m / vp_max_m_s
    return max(1, math.ceil(sample_interval_s / largest - 1e-9))


@dataclass(frozen=True, eq=False)
class _Slab:
    """One side's layer along one axis: its index range along the axis, and the C-PML
    coefficients b, a (float32, broadcastable) at integer (False) and half (True) positions."""

    where: slice
    b: dict[bool, np.ndarray]
    a: dict[bool, np.ndarray]


def _slab(axis: int, length: int, side: str, n: int, d0: float, alpha_max: float, dt: float):
    where = slice(0, n) if side == "low" else slice(length - 1 - n, length)
    index = np.arange(where.start, where.stop, dtype=np.float64)
    b, a = {}, {}
    for half in (False, True):
        position = index + (0.5 if half else 0.0)
        depth = n - position if side == "low" else position - (length - 1 - n)
        s = np.clip(depth / n, 0.0, None)
        d = d0 * s**2
        alpha = np.where(depth > 0, alpha_max * (1.0 - s), 0.0)
        total = d + alpha
        decay = np.exp(-total * dt)
        gain = np.divide(d * (decay - 1.0), total, out=np.zeros_like(d), where=total > 0)
        shape = [1, 1, 1]
        shape[axis] = len(index)
        b[half] = decay.reshape(shape).astype(np.float32)
        a[half] = gain.reshape(shape).astype(np.float32)
    return _Slab(where, b, a)


class Pml:
    """C-PML memory variables and coefficients of a grid (module docstring): `correct` turns a
    difference into its PML-corrected value inside the layers, in place."""

    def __init__(
        self,
        grid: Grid,
        vp_max_m_s: float,
        time_step_s: float,
        frequency_hz: float,
        reflection: float = 1e-3,
    ) -> None:
        n = grid.pml_cells
        self.slabs: dict[int, list[_Slab]] = {axis: [] for axis in range(3)}
        self.memory: dict[tuple[str, int], list[np.ndarray]] = {}
        if not n:
            return
        d0 = 3.0 * vp_max_m_s * math.log(1.0 / reflection) / (2.0 * n * grid.spacing_m)
        alpha_max = math.pi * frequency_hz
        for axis, length in enumerate(grid.shape):
            sides = ("high",) if axis == 0 else ("low", "high")  # the top is the free surface
            self.slabs[axis] = [
                _slab(axis, length, side, n, d0, alpha_max, time_step_s) for side in sides
            ]

    def correct(self, key: tuple[str, int], half: bool, difference: np.ndarray) -> None:
        """ψ ← b ψ + a D, then D ← D + ψ, in the layers along axis key[1] (D: (nz, nx, ny))."""
        slabs = self.slabs[key[1]]
        if not slabs:
            return
        memory = self.memory.get(key)
        if memory is None:
            memory = self.memory[key] = [
                np.zeros(difference[_along(key[1], slab.where)].shape, np.float32) for slab in slabs
            ]
        for slab, psi in zip(slabs, memory, strict=True):
            view = difference[_along(key[1], slab.where)]
            psi *= slab.b[half]
            psi += slab.a[half] * view
            view += psi


def _along(axis: int, where: slice) -> tuple[slice, ...]:
    index = [slice(None)] * 3
    index[axis] = where
    return tuple(index)


def _interior(axis_offsets: tuple[int, ...], shape: tuple[int, int, int]) -> tuple:
    return tuple(slice(PAD + o, PAD + o + n) for o, n in zip(axis_offsets, shape, strict=True))


@dataclass
class Fields:
    """The nine wavefield arrays, float32, padded by `PAD` ghost cells: velocities (m/s) and
    stresses (Pa). `interior(name)` is the (nz, nx, ny) view of the grid's nodes."""

    arrays: dict[str, np.ndarray]
    shape: tuple[int, int, int]

    @classmethod
    def zeros(cls, shape: tuple[int, int, int]) -> Fields:
        padded = tuple(n + 2 * PAD for n in shape)
        names = VELOCITIES + STRESSES
        return cls({name: np.zeros(padded, dtype=np.float32) for name in names}, shape)

    def interior(self, name: str) -> np.ndarray:
        return self.arrays[name][_interior((0, 0, 0), self.shape)]


class Solver:
    """Time stepping of one simulation: `step(n)` advances velocities to n+½ and stresses to
    n+1 (module docstring). Coefficients are folded with Δt c1 / h once."""

    def __init__(
        self,
        grid: Grid,
        material: Staggered,
        time_step_s: float,
        *,
        source_frequency_hz: float,
        pml_reflection: float = 1e-3,
    ) -> None:
        check_time_step(time_step_s, material.vp_max, grid.spacing_m)
        self.grid, self.time_step_s = grid, time_step_s
        self.fields = Fields.zeros(grid.shape)
        scale = np.float32(time_step_s * C1 / grid.spacing_m)
        lam = material.lam.copy()
        lam[0] = material.surface_lam
        self.coefficients = {
            "vx": scale * material.bx,
            "vy": scale * material.by,
            "vz": scale * material.bz,
            "lam": scale * lam,
            "two_mu": scale * 2.0 * material.mu,
            "sxy": scale * material.mu_xy,
            "sxz": scale * material.mu_xz,
            "syz": scale * material.mu_yz,
        }
        self.pml = Pml(grid, material.vp_max, time_step_s, source_frequency_hz, pml_reflection)
        self._buffers = [np.empty(grid.shape, dtype=np.float32) for _ in range(5)]
        shape = grid.shape
        self._slices = {
            (axis, offset): _interior(tuple(offset if a == axis else 0 for a in range(3)), shape)
            for axis in range(3)
            for offset in (-2, -1, 0, 1, 2)
        }
        # (stress array, flat padded indices, values per unit s(t), the source's s(t))
        self._sources: list[tuple[np.ndarray, np.ndarray, np.ndarray, PointSource]] = []

    def add_source(self, injection: Injection, source: PointSource) -> None:
        """Inject `source` (its `injection` on this grid) from now on."""
        padded = tuple(n + 2 * PAD for n in self.grid.shape)
        for component, flat in injection.indices.items():
            nodes = np.unravel_index(flat, self.grid.shape)
            padded_flat = np.ravel_multi_index(tuple(n + PAD for n in nodes), padded)
            values = (injection.values[component] * self.time_step_s).astype(np.float32)
            array = self.fields.arrays["s" + component]
            self._sources.append((array, padded_flat, values, source))

    # --- stencils -------------------------------------------------------------------------
    def _difference(self, name: str, axis: int, forward: bool, out: np.ndarray) -> None:
        """out = (f(+½) − f(−½)) + (c2/c1)(f(+3/2) − f(−3/2)) of field `name` along `axis`: the
        derivative times h / c1 (folded into the coefficients), C-PML-corrected in the layers.
        Forward: from integer to half-integer positions along `axis`."""
        field = self.fields.arrays[name]
        near, far = ((1, 0), (2, -1)) if forward else ((0, -1), (1, -2))
        tmp = self._buffers[4]
        s = self._slices
        np.subtract(field[s[axis, near[0]]], field[s[axis, near[1]]], out=out)
        np.subtract(field[s[axis, far[0]]], field[s[axis, far[1]]], out=tmp)
        tmp *= np.float32(C2 / C1)
        out += tmp
        self.pml.correct((name, axis), forward, out)

    def _mirror(self, name: str, sign: float, half_level: bool) -> None:
        """Fill the two ghost rows above the surface with ±the rows below it."""
        array = self.fields.arrays[name]
        below = (PAD, PAD + 1) if half_level else (PAD + 1, PAD + 2)
        array[PAD - 1] = sign * array[below[0]]
        array[PAD - 2] = sign * array[below[1]]

    def _update_velocities(self) -> None:
        a, b = self._buffers[:2]
        f = self.fields
        self._mirror("sxz", -1.0, half_level=True)
        self._mirror("syz", -1.0, half_level=True)
        self._mirror("szz", -1.0, half_level=False)
        for name, terms in (
            ("vx", (("sxx", 1, True), ("sxy", 2, False), ("sxz", 0, False))),
            ("vy", (("sxy", 1, False), ("syy", 2, True), ("syz", 0, False))),
            ("vz", (("sxz", 1, False), ("syz", 2, False), ("szz", 0, True))),
        ):
            self._difference(terms[0][0], terms[0][1], terms[0][2], a)
            for stress, axis, forward in terms[1:]:
                self._difference(stress, axis, forward, b)
                a += b
            a *= self.coefficients[name]
            view = f.interior(name)
            view += a

    def _update_stresses(self, time_s: float) -> None:
        dx, dy, dz, total = self._buffers[:4]
        f, k = self.fields, self.coefficients
        self._mirror("vx", 1.0, half_level=False)
        self._mirror("vy", 1.0, half_level=False)
        self._mirror("vz", 1.0, half_level=True)
        self._difference("vx", 1, False, dx)
        self._difference("vy", 2, False, dy)
        self._difference("vz", 0, False, dz)
        np.add(dx, dy, out=total)
        total += dz
        total *= k["lam"]
        for name, own in (("sxx", dx), ("syy", dy), ("szz", dz)):
            view = f.interior(name)
            view += total
            own *= k["two_mu"]
            view += own
        f.interior("szz")[0] = 0.0  # the free surface
        for name, (first, first_axis), (second, second_axis) in (
            ("sxy", ("vx", 2), ("vy", 1)),
            ("sxz", ("vx", 0), ("vz", 1)),
            ("syz", ("vy", 0), ("vz", 2)),
        ):
            self._difference(first, first_axis, True, dx)
            self._difference(second, second_axis, True, dy)
            dx += dy
            dx *= k[name]
            view = f.interior(name)
            view += dx
        rates: dict[int, np.float32] = {}
        for array, flat, values, source in self._sources:
            if id(source) not in rates:
                rates[id(source)] = np.float32(moment_rate_shape(time_s, source))
            array.reshape(-1)[flat] += values * rates[id(source)]

    def step(self, time_s: float, observers: Sequence[Callable[[float, Fields], None]] = ()):
        """One leapfrog step from time t: velocities, observers (labelled t), stresses with the
        source at t."""
        self._update_velocities()
        for observe in observers:
            observe(time_s, self.fields)
        self._update_stresses(time_s)


def run(
    solver: Solver,
    start_time_s: float,
    n_steps: int,
    observers: Sequence[Callable[[float, Fields], None]] = (),
) -> None:
    """`n_steps` steps from `start_time_s`; observers see the velocities of t_n = start + n Δt."""
    for n in range(n_steps):
        solver.step(start_time_s + n * solver.time_step_s, observers)


class EnergyMeter:
    """Observer of the discrete energy the scheme conserves (J): kinetic ½ Σ ρ v^{n−½}·v^{n+½}
    plus strain ½ Σ σ:S:σ (S the compliance), times h³, with weight ½ on the surface row of
    the integer-level fields (vx, vy, σxx, σyy, σxy). Records every `every`-th step: time (s),
    total and kinetic energy (J)."""

    def __init__(self, grid: Grid, material: Staggered, every: int = 1) -> None:
        self.every = every
        self.times_s: list[float] = []
        self.energy_j: list[float] = []
        self.kinetic_j: list[float] = []
        self.volume = grid.spacing_m**3
        weights = np.ones((grid.nz, 1, 1))
        weights[0] = 0.5
        mu, lam = material.mu.astype(np.float64), material.lam.astype(np.float64)
        self._normal = (weights / (4.0 * mu), weights * lam / (4.0 * mu * (3.0 * lam + 2.0 * mu)))
        self._kinetic = {
            "vx": weights / material.bx,
            "vy": weights / material.by,
            "vz": 1.0 / material.bz,
        }
        self._shear = {
            "sxy": weights / (2.0 * material.mu_xy),
            "sxz": 1.0 / (2.0 * material.mu_xz),
            "syz": 1.0 / (2.0 * material.mu_yz),
        }
        self._previous = {name: np.zeros(grid.shape) for name in VELOCITIES}
        self._count = 0

    def __call__(self, time_s: float, fields: Fields) -> None:
        current = {name: fields.interior(name).astype(np.float64) for name in VELOCITIES}
        if self._count % self.every == 0:
            kinetic = sum(
                0.5 * np.sum(density * self._previous[name] * current[name])
                for name, density in self._kinetic.items()
            )
            sxx, syy, szz = (fields.interior(n).astype(np.float64) for n in ("sxx", "syy", "szz"))
            trace = sxx + syy + szz
            strain = np.sum(self._normal[0] * (sxx**2 + syy**2 + szz**2))
            strain -= np.sum(self._normal[1] * trace**2)
            for name, compliance in self._shear.items():
                strain += np.sum(compliance * fields.interior(name).astype(np.float64) ** 2)
            self.times_s.append(time_s)
            self.energy_j.append(float((kinetic + strain) * self.volume))
            self.kinetic_j.append(float(kinetic * self.volume))
        self._previous = current
        self._count += 1
