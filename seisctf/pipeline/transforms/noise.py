"""Counter-based noise and noise-injection transforms, bit-identical for any chunking.

The random numbers come from `counter_rng` (SplitMix64 of each element's global flat index and
Box-Muller): nothing depends on how the array is chunked or which worker computes a block, so
noisy arrays are bit-identical on any cluster.

The transforms (`add_gaussian_noise`, `add_coloured_noise`; `add_real_noise` in
`noise_real.py`) take a lazy DataArray with a `time` dim at any axis position (every other dim
indexes independent traces) and return a lazy noisy copy. Their random numbers are pure
functions of (seed, variable name, global position); per-trace levels come from RMS values
summed in a fixed order over whole traces (`signal.trace_levels`). Seeds are never recorded in
attrs.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated

import dask.array as da
import numpy as np
import scipy.signal
import xarray as xr

from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.options import spec
from seisctf.pipeline.transforms.history import recorded
from seisctf.plugins import schema
from seisctf.registry import TRANSFORMS
from seisctf.signal.counter_rng import (
    gaussian_noise,
    key_mix,
    noise_key,
    normals_in_block,
    normals_slab,
    row_slabs,
    standard_normal,
    standard_normal_at,
    substream_key,
)
from seisctf.signal.trace_levels import rms_from_sums, trace_sums

__all__ = [  # the generator's public names, re-exported for existing importers
    "gaussian_noise",
    "noise_key",
    "standard_normal",
    "standard_normal_at",
]


# Output elements per tile of the FIR loop: the accumulator stays in cache across the taps.
_FIR_TILE = 1 << 15


# Options of the noise level (give one) in a recipe.
# The options every noise transform takes: its seed (drawn from the secret when a recipe gives
# none) and its level, as a signal-to-noise ratio or a fraction of each trace's RMS.
Seed = Annotated[int, spec("noise seed (default: derived from the secret)", minimum=0)]
SnrDb = Annotated[float | None, spec("signal-to-noise ratio, dB")]
RmsFraction = Annotated[float | None, spec("noise RMS / trace RMS", exclusive_minimum=0)]

# --- validation ---------------------------------------------------------------------------------


def checked_time_axis(data: xr.DataArray) -> int:
    if not isinstance(data, xr.DataArray):
        raise InvalidInput("data", f"expected an xarray.DataArray, got {type(data).__name__}")
    if cv.TIME not in data.dims:
        raise InvalidInput("data", f"has no {cv.TIME!r} dim (dims {data.dims})")
    if data.sizes[cv.TIME] == 0:
        raise InvalidInput("data", f"has no samples along {cv.TIME!r}")
    if data.dtype.kind not in "fiu":
        raise InvalidInput("data", f"must hold real numbers, got dtype {data.dtype}")
    return data.dims.index(cv.TIME)


def sampling_rate_of(data: xr.DataArray) -> float:
    """Sampling rate in Hz from `data.attrs`."""
    return cv.sampling_rate_hz(data.attrs, "data")


def _real_number(name: str, value, minimum: float | None = None) -> float:
    if isinstance(value, bool):
        raise InvalidInput(name, "must be a number, got bool")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(name, f"must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise InvalidInput(name, f"must be finite, got {number}")
    if minimum is not None and number < minimum:
        raise InvalidInput(name, f"must be >= {minimum}, got {number}")
    return number


def noise_level(**given) -> dict[str, float]:
    """The one level parameter given, as {name: value}: snr_db in dB, rms_fraction or scale >= 0."""
    chosen = {name: value for name, value in given.items() if value is not None}
    if len(chosen) != 1:
        names = " / ".join(given)
        raise InvalidInput(names, f"give exactly one of them, got {sorted(chosen) or 'none'}")
    ((name, value),) = chosen.items()
    return {name: _real_number(name, value, None if name == "snr_db" else 0.0)}


def float64_values(data: xr.DataArray) -> da.Array:
    values = data.data if isinstance(data.data, da.Array) else da.asarray(data.data)
    return values.astype(np.float64)


# --- per-trace levels ---------------------------------------------------------------------------


def trace_rms_now(values: da.Array, time_axis: int, window: slice = slice(None)) -> np.ndarray:
    """NaN-aware RMS of each trace over `window` of time, computed now: `values`' shape with
    time length 1; 0 for a trace with no finite sample there (see `trace_sums`).

    It is computed at once, in its own pass, because a lazy level would make Dask hold every
    block of the (filtered, …) data until the last one is summed: the noisy output then streams
    in bounded memory, at the price of computing what feeds `values` twice (a recipe instead
    sums while it checkpoints `values`, see `gaussian_level_window`)."""
    # The blocks' sums are brought to the client (a few numbers per trace and block) and added
    # there in time order: the pass streams block by block.
    sums = compute(trace_sums(values, time_axis, window), quiet=True)[0]
    return rms_from_sums(sums, time_axis)


def noise_sigma(rms: np.ndarray, level: dict[str, float]) -> np.ndarray:
    """Noise standard deviation per trace (units of data) for rms_fraction or snr_db."""
    ((name, value),) = level.items()
    if name == "rms_fraction":
        return rms * value
    return rms / 10.0 ** (value / 20.0)


def noisy_copy(
    data: xr.DataArray,
    values: da.Array,
    sigma: np.ndarray | float,
    unit_noise: da.Array,
    name: str,
    parameters: dict,
) -> xr.DataArray:
    """data + sigma × unit_noise, in data's floating dtype (float64 for integers), recorded."""
    dtype = data.dtype if data.dtype.kind == "f" else np.dtype(np.float64)
    noisy = (values + sigma * unit_noise).astype(dtype)
    return recorded(data.copy(deep=False, data=noisy), data, name, parameters)


# --- white Gaussian noise -----------------------------------------------------------------------


def _rms_samples(rms_window, rate: float, n_time: int) -> tuple[slice, list[float]]:
    """Sample slice round(start × rate) : round(stop × rate) of a window in seconds."""
    try:
        start, stop = rms_window
    except (TypeError, ValueError):
        raise InvalidInput(
            "rms_window", f"expected (start, stop) in s, got {rms_window!r}"
        ) from None
    start = _real_number("rms_window", start, 0.0)
    stop = _real_number("rms_window", stop, 0.0)
    first, end = round(start * rate), round(stop * rate)
    if end <= first:
        raise InvalidInput("rms_window", f"({start}, {stop}) s holds no sample at {rate} Hz")
    if end > n_time:
        raise InvalidInput(
            "rms_window", f"ends at sample {end}, after the trace's {n_time} samples"
        )
    return slice(first, end), [start, stop]


def _rms_window(data: xr.DataArray, rms_window) -> tuple[slice, list[float] | None]:
    """(sample slice, window in s for the record) of `rms_window`; None: the whole trace."""
    if rms_window is None:
        return slice(None), None
    return _rms_samples(rms_window, sampling_rate_of(data), data.sizes[cv.TIME])


def _checked_rms(trace_rms, data: xr.DataArray, time_axis: int) -> np.ndarray:
    expected = tuple(1 if axis == time_axis else size for axis, size in enumerate(data.shape))
    rms = np.asarray(trace_rms, dtype=np.float64)
    if rms.shape != expected:
        raise InvalidInput("trace_rms", f"expected shape {expected}, got {rms.shape}")
    return rms


def gaussian_level_window(
    data: xr.DataArray, *, rms_window: tuple[float, float] | None = None, **_parameters
) -> slice:
    """The samples of time (a slice) whose per-trace RMS `add_gaussian_noise(data,
    rms_window=...)` scales its noise by (its other parameters are ignored): sum them with
    `trace_sums` (or `chunk_level_sums` while writing the data) alongside other work over
    `data`, and pass on `trace_rms=rms_from_sums(computed sums, time axis)`."""
    checked_time_axis(data)
    return _rms_window(data, rms_window)[0]


@TRANSFORMS.register(
    "add_gaussian_noise", seeded=True, two_pass=True, level_window=gaussian_level_window
)
def add_gaussian_noise(
    data: xr.DataArray,
    *,
    seed: Seed,
    variable: str,
    snr_db: SnrDb = None,
    rms_fraction: RmsFraction = None,
    rms_window: Annotated[tuple[float, float] | None, spec(schema=schema.SECONDS_WINDOW)] = None,
    trace_rms: np.ndarray | None = None,
) -> xr.DataArray:
    """`data` plus white Gaussian noise, its standard deviation set per trace.

    data: any dims including `time` (Hz in attrs["sampling_rate"] when `rms_window` is given);
    each 1-D slice along time is a trace. The noise standard deviation of a trace is
    `rms_fraction × RMS(trace)` or `RMS(trace) / 10**(snr_db / 20)` (give exactly one), the RMS
    taken over finite samples in `rms_window` = (start, stop) seconds from the first sample
    (samples round(start·rate) to round(stop·rate), exclusive; None: the whole trace). NaN stays
    NaN; a trace with no finite sample in the window gets no noise. The noise at each element is
    `standard_normal(noise_key(seed, variable), data.shape, ...)` at its position. CTF levels:
    rms_fraction 0.2 ("medium") and 0.5 ("high"). `trace_rms`: that RMS if already computed
    (`rms_from_sums` of the `trace_sums` over `gaussian_level_window(data, ...)`), else a pass
    over `data` computes it now. Returns a lazy DataArray like `data`, in its float dtype.
    """
    time_axis = checked_time_axis(data)
    level = noise_level(snr_db=snr_db, rms_fraction=rms_fraction)
    key = noise_key(seed, variable)
    window, window_seconds = _rms_window(data, rms_window)
    if trace_rms is None:
        trace_rms = trace_rms_now(float64_values(data), time_axis, window)
    sigma = noise_sigma(_checked_rms(trace_rms, data, time_axis), level)
    # Noise made in the task that adds it (no separate generator tasks, which Dask would run
    # ahead of the data and hold): the same values as `standard_normal(key, …)`.
    dtype = data.dtype if data.dtype.kind == "f" else np.dtype(np.float64)
    values = data.data if isinstance(data.data, da.Array) else da.asarray(data.data)
    noisy = da.map_blocks(
        _plus_noise_block, values, sigma, key, values.shape, time_axis, dtype, dtype=dtype
    )
    parameters = {**level, "rms_window": window_seconds}
    return recorded(data.copy(deep=False, data=noisy), data, "add_gaussian_noise", parameters)


def _plus_noise_block(
    block: np.ndarray,
    sigma: np.ndarray,
    key: int,
    shape: tuple[int, ...],
    time_axis: int,
    dtype: np.dtype,
    block_info: dict | None = None,
) -> np.ndarray:
    """block + sigma × standard normal at the block's global positions, in float64, rounded to
    `dtype` (sigma: per trace, time length 1, for the whole array). Slab by slab in this
    thread's scratch: the only new array is the result."""
    assert block_info is not None  # given by map_blocks
    location = block_info[0]["array-location"]
    trace_part = tuple(
        slice(0, 1) if axis == time_axis else slice(*span) for axis, span in enumerate(location)
    )
    block_sigma = sigma[trace_part]
    noisy = np.empty(block.shape, dtype=dtype)
    if noisy.size == 0:
        return noisy
    mixed_key = key_mix(key)
    first = location[0][0]
    for slab in row_slabs(location):
        rows = slice(slab[0][0] - first, slab[0][1] - first)
        values = normals_slab(mixed_key, slab, shape)
        values *= block_sigma if time_axis == 0 else block_sigma[rows]
        values += block[rows]  # block + sigma × unit (block exactly as float64), bit for bit
        noisy[rows] = values
    return noisy


# --- coloured noise -----------------------------------------------------------------------------


def _float_list(name: str, values) -> list[float]:
    try:
        numbers = [_real_number(name, value) for value in values]
    except TypeError:
        raise InvalidInput(name, f"expected a list of numbers, got {values!r}") from None
    if len(numbers) < 2:
        raise InvalidInput(name, f"needs at least 2 values, got {len(numbers)}")
    return numbers


def _unit_power_taps(
    frequencies: list[float], amplitudes: list[float], numtaps: int, rate: float
) -> np.ndarray:
    """firwin2 taps for the amplitude shape, scaled so that white unit noise filtered by them
    has unit variance (sum of squared taps = 1)."""
    nyquist = rate / 2.0
    if len(amplitudes) != len(frequencies):
        raise InvalidInput(
            "amplitudes", f"has {len(amplitudes)} values for {len(frequencies)} frequencies"
        )
    if min(amplitudes) < 0 or max(amplitudes) == 0:
        raise InvalidInput("amplitudes", f"must be >= 0 and not all 0, got {amplitudes}")
    if frequencies[0] != 0 or not math.isclose(frequencies[-1], nyquist, rel_tol=1e-9):
        raise InvalidInput(
            "frequencies", f"must run from 0 to Nyquist {nyquist} Hz, got {frequencies}"
        )
    if any(later < earlier for earlier, later in itertools.pairwise(frequencies)):
        raise InvalidInput("frequencies", f"must be non-decreasing, got {frequencies}")
    if not isinstance(numtaps, int) or isinstance(numtaps, bool) or numtaps < 3 or numtaps % 2 == 0:
        raise InvalidInput("numtaps", f"must be an odd integer >= 3, got {numtaps!r}")
    try:
        taps = scipy.signal.firwin2(numtaps, [*frequencies[:-1], nyquist], amplitudes, fs=rate)
    except ValueError as error:
        raise InvalidInput("frequencies", str(error)) from None
    power = float(np.sum(taps * taps))
    if not power > 0:
        raise InvalidInput("amplitudes", f"give a filter with no power at {numtaps} taps")
    return taps / math.sqrt(power)


def _fir_valid(padded: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """(rows, n + len(taps) - 1) -> (rows, n): out[:, i] = sum_k taps[k] × padded[:, i + 2h - k].

    A direct convolution whose terms are added in the same order (k descending) for every output
    sample, so its bits do not depend on where a block starts or how long it is.
    """
    reversed_taps = taps[::-1]
    n_rows, n_out = padded.shape[0], padded.shape[1] - taps.size + 1
    out = np.zeros((n_rows, n_out))
    span = max(1, min(n_out, 4096))
    rows_per_tile = max(1, _FIR_TILE // span)
    for row in range(0, n_rows, rows_per_tile):
        rows = slice(row, row + rows_per_tile)
        for start in range(0, n_out, span):
            stop = min(start + span, n_out)
            accumulator = out[rows, start:stop]
            term = np.empty_like(accumulator)
            for offset, tap in enumerate(reversed_taps):
                np.multiply(padded[rows, start + offset : stop + offset], tap, out=term)
                accumulator += term
    return out


def _coloured_block(
    key: int,
    counter_shape: tuple[int, ...],
    time_axis: int,
    taps: np.ndarray,
    block_info: dict | None = None,
) -> np.ndarray:
    """Coloured noise of one block: white noise at time positions [start - h, stop + h), i.e.
    counters [start, stop + 2h) along the padded time axis, filtered along time."""
    halo = taps.size // 2
    assert block_info is not None  # given by map_blocks
    location = list(block_info[None]["array-location"])
    start, stop = location[time_axis]
    location[time_axis] = (start, stop + 2 * halo)
    white = np.moveaxis(normals_in_block(key, location, counter_shape), time_axis, -1)
    coloured = _fir_valid(white.reshape(-1, white.shape[-1]), taps)
    return np.moveaxis(coloured.reshape(white.shape[:-1] + (stop - start,)), -1, time_axis)


@TRANSFORMS.register("add_coloured_noise", seeded=True, two_pass=True)
def add_coloured_noise(
    data: xr.DataArray,
    *,
    seed: Seed,
    variable: str,
    frequencies: Annotated[list[float], spec("Hz, from 0 to Nyquist", min_items=2)],
    amplitudes: Annotated[list[float], spec("at each frequency", min_items=2)],
    snr_db: SnrDb = None,
    rms_fraction: RmsFraction = None,
    numtaps: Annotated[int, spec("FIR filter taps", minimum=1)] = 257,
) -> xr.DataArray:
    """`data` plus Gaussian noise with a piecewise-linear amplitude spectrum, level set per trace.

    frequencies: Hz, non-decreasing from 0 to Nyquist (attrs["sampling_rate"] / 2);
    amplitudes: the relative amplitude spectrum (>= 0) at those frequencies. The shape is an
    odd `numtaps` FIR filter from `scipy.signal.firwin2`, applied to counter-based white noise
    by direct convolution along time; the white noise continues numtaps // 2 samples beyond both
    ends of each trace (counter positions t + numtaps // 2 of a padded trace), so edge samples are
    as random as the rest. The noise standard deviation of a trace is `rms_fraction × RMS(trace)`
    or `RMS(trace) / 10**(snr_db / 20)` (give exactly one; RMS of finite samples of the whole
    trace) in expectation: the taps are scaled to unit power, not the realised noise. NaN stays
    NaN. Returns a lazy DataArray like `data`.
    """
    time_axis = checked_time_axis(data)
    level = noise_level(snr_db=snr_db, rms_fraction=rms_fraction)
    key = substream_key(noise_key(seed, variable), "coloured")
    frequencies = _float_list("frequencies", frequencies)
    amplitudes = _float_list("amplitudes", amplitudes)
    taps = _unit_power_taps(frequencies, amplitudes, numtaps, sampling_rate_of(data))
    values = float64_values(data)
    counter_shape = list(values.shape)
    counter_shape[time_axis] += 2 * (numtaps // 2)
    unit_noise = da.map_blocks(
        _coloured_block,
        key,
        tuple(counter_shape),
        time_axis,
        taps,
        chunks=values.chunks,
        dtype=np.float64,
        meta=np.empty((0,) * values.ndim),
    )
    sigma = noise_sigma(trace_rms_now(values, time_axis), level)
    parameters = {
        **level,
        "frequencies": frequencies,
        "amplitudes": amplitudes,
        "numtaps": numtaps,
    }
    return noisy_copy(data, values, sigma, unit_noise, "add_coloured_noise", parameters)
