"""Lazy DAS transforms on Dask-backed DataArrays with `time` and `distance` dims.

Along time, DAS data take the transforms of `filters.py` as they are (`butterworth` low-pass or
band-pass, `decimate` 5 Hz → 1 Hz with its order 8 anti-alias low-pass at 0.4 Hz, `resample`):
they work on any DataArray with a `time` dim and a `sampling_rate` attr. This module adds what
is particular to a fibre, each independent of the chunking:

- `select_channels`: channels in a distance range and/or every `step`-th channel (plain
  selection, no filter: spatial aliasing is the caller's choice).
- `spatial_decimate`: every `factor`-th channel after a zero-phase Butterworth low-pass along
  the fibre (order 8, corner at 0.8 × the new Nyquist wavenumber 1 / (2 · factor · spacing)
  cycles/m). It is `filters.decimate` run along `distance` (distance renamed to time, the
  sampling rate set to 1 / spacing), so it has the same overlap halo, NaN policy and equality to
  in-memory `scipy.signal.sosfiltfilt` + slicing. Needs a regular channel spacing.
- `convert_quantity`: strain ↔ strain rate.
  strain → strain rate: ε̇ = dε/dt by central differences, second order inside and first order
  one-sided at a trace's two ends (`numpy.gradient(ε, 1/rate, axis=time)`), with a one-sample
  halo (`halo.map_halo`), so the result is bitwise that of numpy on the whole trace (NaN at a
  NaN, where numpy would difference its neighbours, and next to one). Its gain
  at frequency f is sin(2πf/rate)/(2πf/rate): 0.99 at 0.2 Hz and 5 Hz.
  strain rate → strain: ε = ∫ε̇ dt by the trapezoid rule from the trace's first sample, where ε
  is taken as 0 (`scipy.integrate.cumulative_trapezoid(ε̇, dx=1/rate, initial=0)`), computed as
  dt·(cumsum(ε̇) − (ε̇ + ε̇[0])/2) with Dask's cumulative sum (carried across chunks: equal to
  the in-memory result to rounding, not bitwise). The unknown initial strain and any offset of
  ε̇ (a linear drift of ε) are the caller's to remove (`filters.detrend`, a high-pass). A NaN
  (gap) makes every later sample of its trace NaN (all of them for a NaN first sample): the
  strain change across a gap is unknown.
  The variable's name, `quantity` and `units` follow (strain: "1", strain rate: "1/s").

Each returns a float64 DataArray (selection keeps the dtype) with the step appended to
`ATTR_TRANSFORMS`; `channel_spacing_m` is updated where spacing changes.
"""

from __future__ import annotations

from typing import Annotated

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.options import spec
from seisctf.pipeline.transforms import filters
from seisctf.pipeline.transforms.history import recorded
from seisctf.registry import TRANSFORMS
from seisctf.signal.halo import map_halo

STRAIN = "strain"
STRAIN_RATE = "strain_rate"
UNITS = {STRAIN: "1", STRAIN_RATE: "1/s"}
_SPACING_TOLERANCE = 1e-6  # relative: a regular channel grid
_SWAP = "__seisctf_time__"


def _require_dim(data: xr.DataArray, dim: str, what: str) -> None:
    if dim not in data.dims:
        raise InvalidInput(f"{what} input dims {data.dims}", f"expected a {dim!r} dim")


def _distances(data: xr.DataArray, what: str) -> np.ndarray:
    _require_dim(data, cv.DISTANCE, what)
    if cv.DISTANCE not in data.coords:
        raise InvalidInput(f"{what} input", f"has no {cv.DISTANCE!r} coordinate (m)")
    return np.asarray(data[cv.DISTANCE].values, dtype=np.float64)


def channel_spacing_m(data: xr.DataArray, what: str = "spatial_decimate") -> float:
    """The regular spacing (m) of the `distance` coordinate; InvalidInput if it is irregular."""
    distance = _distances(data, what)
    steps = np.diff(distance)
    if steps.size == 0 or not np.all(np.isfinite(steps)) or steps[0] == 0:
        raise InvalidInput(f"{what} input", "needs at least two channels at distinct distances")
    if np.max(np.abs(steps - steps[0])) > _SPACING_TOLERANCE * abs(steps[0]):
        raise InvalidInput(
            f"{what} input",
            f"needs a regular channel spacing; distances step by {steps.min()}..{steps.max()} m",
        )
    return float(abs(steps[0]))


@TRANSFORMS.register("select_channels", cheap=True)
def select_channels(
    data: xr.DataArray,
    *,
    distance_min_m: Annotated[float | None, spec("first distance kept, m")] = None,
    distance_max_m: Annotated[float | None, spec("last distance kept, m")] = None,
    step: Annotated[int, spec("keep every step-th channel", minimum=1)] = 1,
) -> xr.DataArray:
    """Channels with distance_min_m <= distance <= distance_max_m (either may be None), then
    every `step`-th of them (the first kept). Lazy selection: same dtype and chunks; attr
    `channel_spacing_m` = the kept channels' spacing when it is regular."""
    what = "select_channels"
    distance = _distances(data, what)
    if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 1:
        raise InvalidInput(f"{what} step={step!r}", "expected an integer >= 1")
    inside = np.ones(distance.shape, dtype=bool)
    if distance_min_m is not None:
        inside &= distance >= distance_min_m
    if distance_max_m is not None:
        inside &= distance <= distance_max_m
    index = np.flatnonzero(inside)[::step]
    if index.size == 0:
        raise InvalidInput(
            f"{what} distance_min_m={distance_min_m}, distance_max_m={distance_max_m}",
            f"no channel there (distances {distance.min()}..{distance.max()} m)",
        )
    result = data.isel({cv.DISTANCE: index})
    parameters = {
        "distance_min_m": None if distance_min_m is None else float(distance_min_m),
        "distance_max_m": None if distance_max_m is None else float(distance_max_m),
        "step": int(step),
    }
    steps = np.diff(distance[index])
    if steps.size and np.all(np.abs(steps - steps[0]) <= _SPACING_TOLERANCE * abs(steps[0])):
        result = result.assign_attrs({cv.ATTR_CHANNEL_SPACING: float(abs(steps[0]))})
    return recorded(result, data, what, parameters)


def _along_distance(data: xr.DataArray, spacing_m: float) -> xr.DataArray:
    """`data` with `distance` renamed to `time` (and `time` out of the way), rate 1/spacing."""
    renamed = data.rename({cv.TIME: _SWAP}) if cv.TIME in data.dims else data
    renamed = renamed.rename({cv.DISTANCE: cv.TIME})
    return renamed.assign_attrs({cv.ATTR_SAMPLING_RATE: 1.0 / spacing_m})


def _back_to_time(result: xr.DataArray) -> xr.DataArray:
    back = result.rename({cv.TIME: cv.DISTANCE})
    if _SWAP in back.dims:
        back = back.rename({_SWAP: cv.TIME})
    return back


@TRANSFORMS.register("spatial_decimate", cheap=True)
def spatial_decimate(
    data: xr.DataArray,
    *,
    factor: Annotated[int, spec("keep every factor-th channel", minimum=1)],
    tolerance: Annotated[float, spec(exclusive_minimum=0)] = 1e-8,
) -> xr.DataArray:
    """Every `factor`-th channel (from the first) after the zero-phase anti-alias low-pass along
    the fibre (module docstring). float64; the kept channels' distances; `channel_spacing_m`
    × factor."""
    what = "spatial_decimate"
    spacing_m = channel_spacing_m(data, what)
    try:
        swapped = filters.decimate(
            _along_distance(data, spacing_m), factor=factor, tolerance=tolerance
        )
    except InvalidInput as error:  # filters speak of time and Hz: say where we were
        raise InvalidInput(
            f"{what} along {cv.DISTANCE!r} (as 'time', rate = 1/spacing): {error.what}",
            error.problem,
        ) from None
    result = _back_to_time(swapped)
    new_spacing_m = spacing_m * int(factor)
    result.attrs = {**data.attrs, cv.ATTR_CHANNEL_SPACING: new_spacing_m}
    parameters = {
        "factor": int(factor),
        "tolerance": float(tolerance),
        "antialias_order": filters.ANTIALIAS_ORDER,
        "antialias_cycles_per_m": filters.ANTIALIAS_CORNER / (2.0 * new_spacing_m),
    }
    return recorded(result, data, what, parameters)


def _quantity(data: xr.DataArray, what: str) -> str:
    quantity = data.attrs.get(cv.ATTR_QUANTITY) or data.name
    if quantity not in (STRAIN, STRAIN_RATE):
        raise InvalidInput(
            f"{what} input {data.name!r}",
            f"expected quantity {STRAIN!r} or {STRAIN_RATE!r} (attr {cv.ATTR_QUANTITY!r} or "
            f"the variable's name), got {quantity!r}",
        )
    return str(quantity)


def _gradient_block(block: np.ndarray, *, spacing: float) -> np.ndarray:
    """Time derivative along the last axis (`map_halo`'s layout)."""
    derivative = np.gradient(block, spacing, axis=-1)
    derivative[np.isnan(block)] = np.nan  # a gap stays a gap (numpy fills it from neighbours)
    return derivative


def _differentiate(data: xr.DataArray, sampling_rate_hz: float, what: str) -> xr.DataArray:
    axis = data.get_axis_num(cv.TIME)
    if data.sizes[cv.TIME] < 2:
        raise InvalidInput(f"{what} input", f"has {data.sizes[cv.TIME]} sample; needs 2+")
    values = data.data if isinstance(data.data, da.Array) else da.from_array(data.values, -1)
    depth = 1 if len(values.chunks[axis]) > 1 else 0
    derivative = map_halo(
        _gradient_block, values, axis, (depth, depth), spacing=1.0 / sampling_rate_hz
    )
    return data.copy(data=derivative)


def _integrate(data: xr.DataArray, sampling_rate_hz: float) -> xr.DataArray:
    values = data.astype(np.float64)
    if not isinstance(values.data, da.Array):
        values = values.chunk({dim: -1 for dim in values.dims})
    first = values.isel({cv.TIME: 0})
    total = values.cumsum(cv.TIME, skipna=False)  # NaN propagates to every later sample
    return (total - 0.5 * (values + first)) * (1.0 / sampling_rate_hz)


@TRANSFORMS.register("convert_quantity", cheap=True)
def convert_quantity(
    data: xr.DataArray, *, to: Annotated[str, spec(schema={"enum": [STRAIN, STRAIN_RATE]})]
) -> xr.DataArray:
    """Strain → strain rate (`to="strain_rate"`) or strain rate → strain (`to="strain"`), along
    time (module docstring); nothing but the record when it already is `to`. float64, named
    `to`, attrs `quantity` = `to` and `units` ("1/s" or "1")."""
    what = "convert_quantity"
    _require_dim(data, cv.TIME, what)
    if to not in (STRAIN, STRAIN_RATE):
        raise InvalidInput(f"{what} to={to!r}", f"expected {STRAIN!r} or {STRAIN_RATE!r}")
    quantity = _quantity(data, what)
    sampling_rate_hz = cv.sampling_rate_hz(data.attrs, f"{what} input")
    if quantity == to:
        result = data.astype(np.float64)
        method = "none"
    elif to == STRAIN_RATE:
        result = _differentiate(data, sampling_rate_hz, what)
        method = "central differences (numpy.gradient), one-sided at the ends"
    else:
        result = _integrate(data, sampling_rate_hz).transpose(*data.dims)
        method = "trapezoid rule from the first sample (strain 0 there)"
    result = result.rename(to).assign_attrs({cv.ATTR_QUANTITY: to, cv.ATTR_UNITS: UNITS[to]})
    return recorded(result, data, what, {"from": quantity, "to": to, "method": method})
