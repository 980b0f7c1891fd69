"""Recording the surface: the sensor grid, sampling the solver's surface rows, anti-aliased
resampling to the output rate, and interpolation from the staggered nodes to the sensors.

Sensors: an `n_x` × `n_y` grid at `spacing_m` on the free surface, sensor (row r, column c) at
x = r·spacing (north), y = c·spacing (east); sensor index r·n_y + c (row-major, rows along x).

Each internal step the observer copies the part of the surface rows the sensors need: vx and vy on
the surface row, vz half a cell below it (its image makes it the surface value to 2nd order). At
the end, per component: resampling from the internal rate (an integer `substeps` × the output rate)
with `scipy.signal.resample_poly(x, 1, substeps)` (a zero-phase Kaiser-windowed FIR low-pass at the
output Nyquist frequency, then every substeps-th sample; nothing to do when substeps = 1), then
4-point Lagrange (cubic) interpolation along x and then y from the component's staggered node
positions to the sensors. Both steps are linear and act on separate axes, so the order does not
change the result beyond rounding; resampling first works on fewer points. No BLAS anywhere:
the bytes do not depend on the machine's thread settings.

Output components: up (= −vz), north (vx), east (vy), m/s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import resample_poly

from seisctf.errors import InvalidInput
from seisctf.synth.crustal.medium import Grid
from seisctf.synth.crustal.solver import Fields

COMPONENTS = ("up", "north", "east")
# (solver field, its nodes' (x, y) offsets in cells, sign) of each output component
COMPONENT_FIELDS = {
    "up": ("vz", (0.0, 0.0), -1.0),
    "north": ("vx", (0.5, 0.0), 1.0),
    "east": ("vy", (0.0, 0.5), 1.0),
}
STENCIL = 4  # cubic Lagrange interpolation: nodes −1, 0, 1, 2 around the point


@dataclass(frozen=True)
class SensorGrid:
    """`n_x` × `n_y` sensors `spacing_m` apart on the surface, first at x = y = 0."""

    n_x: int = 94
    n_y: int = 94
    spacing_m: float = 100.0

    @property
    def n_sensors(self) -> int:
        return self.n_x * self.n_y

    @property
    def extent_m(self) -> tuple[float, float]:
        return ((self.n_x - 1) * self.spacing_m, (self.n_y - 1) * self.spacing_m)

    def checked(self) -> SensorGrid:
        if self.n_x < 1 or self.n_y < 1 or not (self.spacing_m > 0):
            raise InvalidInput("sensor grid", "needs at least 1 × 1 sensors and a positive spacing")
        return self

    def coordinates(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-sensor x (north) and y (east) in metres, in sensor (row-major) order."""
        rows, columns = np.meshgrid(np.arange(self.n_x), np.arange(self.n_y), indexing="ij")
        return (rows.ravel() * self.spacing_m, columns.ravel() * self.spacing_m)


def lagrange_weights(points: np.ndarray, node0: float, spacing: float, n_nodes: int):
    """(first node index (n,), weights (n, 4)) of cubic Lagrange interpolation at `points` from
    nodes at node0 + i·spacing, i = 0 … n_nodes − 1."""
    position = (np.asarray(points, dtype=np.float64) - node0) / spacing
    base = np.floor(position).astype(np.int64)
    u = position - base
    if np.any(base < 1) or np.any(base + 2 > n_nodes - 1):
        raise InvalidInput("sensor grid", "sensors too close to the grid's edge to interpolate")
    weights = np.stack(
        [
            -u * (u - 1) * (u - 2) / 6.0,
            (u + 1) * (u - 1) * (u - 2) / 2.0,
            -(u + 1) * u * (u - 2) / 2.0,
            (u + 1) * u * (u - 1) / 6.0,
        ],
        axis=1,
    )
    return base - 1, weights


@dataclass(frozen=True, eq=False)
class _Axis:
    first: np.ndarray  # (n,) index into the recorded window of the stencil's first node
    weights: np.ndarray  # (n, 4)
    window: slice  # the nodes recorded along this axis


def _axis(points: np.ndarray, node0: float, spacing: float, n_nodes: int) -> _Axis:
    base, weights = lagrange_weights(points, node0, spacing, n_nodes)
    lo, hi = int(base.min()), int(base.max()) + STENCIL
    return _Axis(base - lo, weights, slice(lo, hi))


def interpolate(values: np.ndarray, along_x: _Axis, along_y: _Axis) -> np.ndarray:
    """(time, window x, window y) node values → (time, n_x, n_y) at the sensor rows/columns."""
    rows = sum(
        values[:, along_x.first + a, :] * along_x.weights[None, :, a, None] for a in range(STENCIL)
    )
    return sum(
        rows[:, :, along_y.first + b] * along_y.weights[None, None, :, b] for b in range(STENCIL)
    )


def resample(series: np.ndarray, substeps: int) -> np.ndarray:
    """Anti-aliased decimation by `substeps` along axis 0 (float64)."""
    series = np.asarray(series, dtype=np.float64)
    if substeps == 1:
        return series
    return resample_poly(series, 1, substeps, axis=0)


class SurfaceRecorder:
    """Observer of the solver that keeps the surface nodes around the sensors every step, then
    `traces()` gives (3, n_out, n_sensors) float32 (up, north, east) at the output rate."""

    def __init__(self, grid: Grid, sensors: SensorGrid, n_steps: int, substeps: int) -> None:
        x, y = sensors.checked().coordinates()
        x_rows = x.reshape(sensors.n_x, sensors.n_y)[:, 0]
        y_columns = y.reshape(sensors.n_x, sensors.n_y)[0, :]
        self.sensors, self.substeps = sensors, substeps
        self.axes, self.samples, self._step = {}, {}, 0
        h = grid.spacing_m
        for component, (field, (offset_x, offset_y), _) in COMPONENT_FIELDS.items():
            along_x = _axis(x_rows, grid.x0_m + offset_x * h, h, grid.nx)
            along_y = _axis(y_columns, grid.y0_m + offset_y * h, h, grid.ny)
            self.axes[component] = (field, along_x, along_y)
            shape = (
                n_steps,
                along_x.window.stop - along_x.window.start,
                along_y.window.stop - along_y.window.start,
            )
            self.samples[component] = np.zeros(shape, dtype=np.float32)

    def __call__(self, time_s: float, fields: Fields) -> None:
        for component, (field, along_x, along_y) in self.axes.items():
            surface = fields.interior(field)[0]
            self.samples[component][self._step] = surface[along_x.window, along_y.window]
        self._step += 1

    def traces(self, first_sample: int, n_samples: int) -> np.ndarray:
        """Output samples first_sample … first_sample + n_samples − 1 (of the resampled record
        starting at the first step), (3, n_samples, n_sensors) float32, m/s."""
        out = np.empty((len(COMPONENTS), n_samples, self.sensors.n_sensors), dtype=np.float32)
        for index, component in enumerate(COMPONENTS):
            _, along_x, along_y = self.axes[component]
            series = resample(self.samples[component][: self._step], self.substeps)
            if series.shape[0] < first_sample + n_samples:
                raise ValueError("recorded fewer steps than the requested samples need")
            window = series[first_sample : first_sample + n_samples]
            sign = COMPONENT_FIELDS[component][2]
            values = sign * interpolate(window, along_x, along_y)
            out[index] = values.reshape(n_samples, -1)
        return out


def resampling_tail_samples(substeps: int) -> int:
    """Output samples simulated past the end so resample_poly's zero padding (its FIR reaches
    10 output samples to each side) does not reach the kept samples."""
    return 0 if substeps == 1 else 11
