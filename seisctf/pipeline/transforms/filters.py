"""Lazy signal transforms along `time` on Dask-backed DataArrays, independent of chunking.

The time dim may sit at any axis; every other dim indexes independent traces. Each function
returns a new float64 DataArray (same dims; the input's chunks unless the length along time
changes) whose attrs are the input's plus the step appended to `ATTR_TRANSFORMS`, with
`ATTR_SAMPLING_RATE` (Hz) and the time coordinate updated when the rate changes. Nothing is
computed here: the results are Dask graphs, and a numpy-backed input becomes one chunk.

Halo. The zero-phase Butterworth filters run `scipy.signal.sosfiltfilt` chunk by chunk with
`halo_samples` neighbouring samples on each side, where `halo_samples` is the number of samples
after which the impulse response of the forward filter stays below `tolerance` × its peak.
Along time, neighbouring chunks are joined until each holds at least `halo_samples` and more
than sosfiltfilt's `padlen` samples, so the chunks at the ends of a trace see its true edges and
the result equals sosfiltfilt on the whole trace (to about `tolerance`) for any chunking.

Causal variant (`zero_phase=False` in `butterworth`, `decimate`, `resample`). The filter runs
forward only (`scipy.signal.sosfilt`), so an output sample depends on input samples at or
before it and never on later ones: for data cut into public and withheld windows, nothing of a
later window reaches an earlier one. It starts in the steady state of the trace's first sample
(`zi = sosfilt_zi(sos) * x[0]`: as if the trace had held that value forever, so an offset causes
no start transient; obspy's `zerophase=False` starts from rest instead). Chunk by chunk, each
chunk gets `halo_samples` samples of halo on its left only and starts in the steady state of
its first halo sample; the start error decays like the impulse response, so the result equals
sosfilt on the whole trace to about `tolerance` × the signal's variation, for any chunking.
`resample`'s FIR is delayed by `delay` output samples so that it is causal too. The price is
a phase delay: the Butterworth's group delay (the order 8 anti-alias filter: about 2 output
samples at 0 Hz, rising towards its corner) plus, in `resample`, the FIR's `delay`.

NaN (gaps). Filters (`butterworth` and the anti-alias filters of `decimate` and `resample`)
filter with NaN replaced by 0, then set to NaN every output sample within `halo_samples` of an
input NaN of its trace (|i - j| <= halo_samples; causal filters: 0 <= i - j <= halo_samples,
the samples after the NaN only), so no output keeps more than about `tolerance` of the zero
fill. `resample`'s polyphase step then also sets to NaN every output whose FIR support holds a
NaN (input n with |k·down - n·up| <= half_len, in resample_poly's notation; causal:
|(k - delay)·down - n·up| <= half_len). `detrend` and `normalise` take their statistics over
the non-NaN samples and leave NaN as NaN; `taper` leaves NaN as NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, cast

import dask.array as da
import numpy as np
import xarray as xr
from scipy import ndimage, signal

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.options import spec
from seisctf.pipeline.transforms.history import recorded
from seisctf.plugins import schema
from seisctf.registry import TRANSFORMS
from seisctf.signal.filter_design import (
    ANTIALIAS_CORNER,
    ANTIALIAS_ORDER,
    antialias_sos,
    butterworth_sos,
    causal_fir_delay,
    check_tolerance,
    impulse_halo,
    is_integer,
    rational_ratio,
)
from seisctf.signal.filter_design import causal_warmup as causal_warmup  # public here too
from seisctf.signal.filter_design import resampling_ratio as resampling_ratio
from seisctf.signal.halo import map_halo, with_min_chunks
from seisctf.signal.polyphase import polyphase, resampled_time

_DETREND_KINDS = ("constant", "linear")
_NORMALISE_METHODS = ("demean", "std", "peak")
# A recipe's `zero_phase: false`: the causal filter (forward only, see above).
TOLERANCE_HELP = "impulse-response level below which the filter's halo ends"
ZERO_PHASE_HELP = "filter forwards and backwards (no phase shift)"


# --- input checks -----------------------------------------------------------------------------


def _time_axis(data: xr.DataArray, what: str) -> int:
    if cv.TIME not in data.dims:
        raise InvalidInput(f"{what} input dims {data.dims}", f"expected a {cv.TIME!r} dim")
    return data.get_axis_num(cv.TIME)


def _sampling_rate_hz(data: xr.DataArray, what: str) -> float:
    return cv.sampling_rate_hz(data.attrs, f"{what} input")


def _dask_values(data: xr.DataArray) -> da.Array:
    """`data`'s values on Dask as stored (a numpy-backed array becomes a single chunk)."""
    if isinstance(data.data, da.Array):
        return data.data
    return da.from_array(data.values, chunks=-1)


def _float_dask(data: xr.DataArray) -> xr.DataArray:
    """`data` as float64 on Dask (a numpy-backed array becomes a single chunk)."""
    if not isinstance(data.data, da.Array):
        data = data.chunk({dim: -1 for dim in data.dims})
    return data.astype(np.float64)


# --- chunking ---------------------------------------------------------------------------------


def _time_index(data: xr.DataArray) -> xr.DataArray:
    """Lazy global sample index (int64) along time, chunked like `data`."""
    index = da.arange(data.sizes[cv.TIME], chunks=(data.chunksizes[cv.TIME],), dtype=np.int64)
    return xr.DataArray(index, dims=(cv.TIME,))


# --- zero-phase Butterworth -------------------------------------------------------------------


def _sosfiltfilt_padlen(sos: np.ndarray) -> int:
    """The `padlen` scipy.signal.sosfiltfilt uses by default for these sections."""
    taps = 2 * len(sos) + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum())
    return 3 * int(taps)


def _near_gaps(gaps: np.ndarray, radius: int, axis: int) -> np.ndarray:
    """True within `radius` samples (inclusive) of a True of `gaps` along `axis`."""
    spread = ndimage.maximum_filter1d(
        gaps.view(np.uint8), size=2 * radius + 1, axis=axis, mode="constant", cval=0
    )
    return spread.astype(bool)


# Samples per group of traces filtered at once: sosfiltfilt's half-dozen temporaries then stay
# near 4 MiB each instead of the whole block's size (worker memory, not arithmetic: each trace
# is filtered by the same operations either way, so the bits do not change).
_FILTER_GROUP_SAMPLES = 1 << 19


def _row_groups(rows: np.ndarray) -> list[slice]:
    """Slices cutting 2-D `rows` (trace, time) into groups of whole traces."""
    step = max(1, _FILTER_GROUP_SAMPLES // max(rows.shape[1], 1))
    return [slice(start, start + step) for start in range(0, rows.shape[0], step)]


def _zero_filled(region: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(region as 2-D rows (trace, time) with NaN set to 0 in place, NaN mask or None)."""
    gaps = np.isnan(region)
    if not gaps.any():
        return region.reshape(-1, region.shape[-1]), None
    region[gaps] = 0.0
    return region.reshape(-1, region.shape[-1]), gaps


def _filtfilt_block(region: np.ndarray, *, sos: np.ndarray, halo_samples: int) -> np.ndarray:
    """sosfiltfilt along the last axis of a C-contiguous float64 `region` (overwritten), with
    the NaN policy; float64, group of traces by group."""
    rows, gaps = _zero_filled(region)
    filtered = np.empty(rows.shape, dtype=np.float64)
    for group in _row_groups(rows):
        filtered[group] = signal.sosfiltfilt(sos, rows[group], axis=-1)
    filtered = filtered.reshape(region.shape)
    if gaps is not None:
        filtered[_near_gaps(gaps, halo_samples, -1)] = np.nan
    return filtered


def _zero_phase(data: xr.DataArray, sos: np.ndarray, tolerance: float, what: str) -> xr.DataArray:
    """sosfiltfilt(sos, data, axis=time) chunk by chunk, with the NaN policy; float64, same
    shape as `data`, its chunks along time joined as below.

    Why a halo of `halo_samples` on both sides: sosfiltfilt runs the filter forward, then
    backward over the forward output. At a chunk's inner edges the forward pass starts from a
    wrong state (padding and initial conditions of the chunk, not the true past), and the error
    decays like the impulse response, so it is below tolerance after `halo_samples` samples: the
    left halo absorbs it. The backward pass starts at the chunk's right end from a wrong state
    too and its error decays the same way going left: the right halo absorbs that. A core
    sample's NaN mask needs the inputs within `halo_samples` on both sides as well.

    At a trace's true ends the chunk starts (or stops) at the real edge (boundary "none"), so
    sosfiltfilt pads and initialises there exactly as on the whole trace. That needs the edge
    chunk to hold more than `padlen` samples, and Dask's overlap needs every chunk to hold at
    least the halo: neighbouring chunks are joined until both hold (`butterworth` splits them
    back; decimate and resample keep them).
    """
    axis = _time_axis(data, what)
    n_time = data.sizes[cv.TIME]
    padlen = _sosfiltfilt_padlen(sos)
    if n_time <= padlen:
        raise InvalidInput(
            f"{what} input",
            f"has {n_time} samples along {cv.TIME!r}; this filter needs more than {padlen}",
        )
    halo_samples = impulse_halo(sos, tolerance, what)
    values = with_min_chunks(_dask_values(data), axis, max(halo_samples, padlen + 1))
    depth = halo_samples if len(values.chunks[axis]) > 1 else 0
    filtered = map_halo(
        _filtfilt_block, values, axis, (depth, depth), sos=sos, halo_samples=halo_samples
    )
    return data.copy(data=filtered)


# --- causal Butterworth -----------------------------------------------------------------------


def _after_gaps(gaps: np.ndarray, radius: int, axis: int) -> np.ndarray:
    """True where a True of `gaps` lies 0 to `radius` samples earlier along `axis`."""
    seen = np.cumsum(gaps, axis=axis, dtype=np.int64)
    n_time = gaps.shape[axis]
    earlier = np.zeros_like(seen)
    if n_time > radius + 1:
        source = [slice(None)] * gaps.ndim
        target = [slice(None)] * gaps.ndim
        source[axis] = slice(0, n_time - radius - 1)
        target[axis] = slice(radius + 1, None)
        earlier[tuple(target)] = seen[tuple(source)]
    return seen > earlier


def _sosfilt_block(region: np.ndarray, *, sos: np.ndarray, halo_samples: int) -> np.ndarray:
    """sosfilt along the last axis of a C-contiguous float64 `region` (overwritten) from the
    steady state of each trace's first sample, with the causal NaN policy; float64, group of
    traces by group."""
    filtered = np.empty(region.shape, dtype=np.float64)
    if region.shape[-1] == 0:
        return filtered
    rows, gaps = _zero_filled(region)
    filtered_rows = filtered.reshape(rows.shape)
    steady = signal.sosfilt_zi(sos)[:, np.newaxis, :]  # (n_sections, 1, 2): after a unit step
    for group in _row_groups(rows):
        zi = steady * rows[group, :1][np.newaxis]
        filtered_rows[group], _ = signal.sosfilt(sos, rows[group], axis=-1, zi=zi)
    if gaps is not None:
        filtered[_after_gaps(gaps, halo_samples, -1)] = np.nan
    return filtered


def _causal(data: xr.DataArray, sos: np.ndarray, tolerance: float, what: str) -> xr.DataArray:
    """sosfilt(sos, data, axis=time, zi=steady state of the first sample) chunk by chunk, with
    the causal NaN policy; float64, same shape as `data`, chunks along time joined until each
    holds `halo_samples` (the left halo: a sample never sees later ones, see the module
    docstring)."""
    axis = _time_axis(data, what)
    halo_samples = impulse_halo(sos, tolerance, what)
    values = with_min_chunks(_dask_values(data), axis, halo_samples)
    depth = halo_samples if len(values.chunks[axis]) > 1 else 0
    filtered = map_halo(
        _sosfilt_block, values, axis, (depth, 0), sos=sos, halo_samples=halo_samples
    )
    return data.copy(data=filtered)


def _phase_parameter(zero_phase: bool, what: str) -> dict[str, bool]:
    """The recorded parameter: none for the default zero-phase filter (so its records stay as
    they were), `zero_phase: false` for the causal one."""
    if not isinstance(zero_phase, bool | np.bool_):
        raise InvalidInput(f"{what} zero_phase={zero_phase!r}", "expected true or false")
    return {} if zero_phase else {"zero_phase": False}


def _lowpass(
    data: xr.DataArray, sos: np.ndarray, tolerance: float, zero_phase: bool, what: str
) -> xr.DataArray:
    if zero_phase:
        return _zero_phase(data, sos, tolerance, what)
    return _causal(data, sos, tolerance, what)


@TRANSFORMS.register("butterworth")
def butterworth(
    data: xr.DataArray,
    *,
    freqmin: Annotated[float | None, spec("low corner, Hz", exclusive_minimum=0)] = None,
    freqmax: Annotated[float | None, spec("high corner, Hz", exclusive_minimum=0)] = None,
    order: Annotated[int, spec("filter order", minimum=1)] = 4,
    tolerance: Annotated[float, spec(TOLERANCE_HELP, exclusive_minimum=0)] = 1e-8,
    zero_phase: Annotated[bool, spec(ZERO_PHASE_HELP)] = True,
) -> xr.DataArray:
    """Zero-phase Butterworth filter along time: low-pass below `freqmax` (Hz) if only it is
    given, high-pass above `freqmin` (Hz) if only it is given, band-pass if both.

    Equals `scipy.signal.sosfiltfilt(butter(order, ..., output="sos", fs=rate), x, axis=time)`
    on the whole array to about `tolerance`, for any chunking; the effective order is twice
    `order` (forward and backward). `zero_phase=False`: the causal filter instead, forward only
    (effective order `order`), equal to `scipy.signal.sosfilt(sos, x, axis=time,
    zi=sosfilt_zi(sos) · x[0])`. `tolerance` sets the halo (see the module docstring). Same
    dims and shape as `data`, float64.
    """
    what = "butterworth"
    sampling_rate_hz = _sampling_rate_hz(data, what)
    check_tolerance(tolerance, what)
    sos = butterworth_sos(sampling_rate_hz, freqmin, freqmax, order, what)
    parameters = {
        "freqmin": None if freqmin is None else float(freqmin),
        "freqmax": None if freqmax is None else float(freqmax),
        "order": int(order),
        "tolerance": float(tolerance),
        **_phase_parameter(zero_phase, what),
    }
    filtered = _lowpass(data, sos, tolerance, zero_phase, what)
    result = filtered.chunk(_float_dask(data).chunksizes)
    return recorded(result, data, what, parameters)


# --- detrend, taper, normalise ----------------------------------------------------------------


def _valid_mean(values: xr.DataArray, valid: xr.DataArray, count: xr.DataArray) -> xr.DataArray:
    """Mean over time of `values` where `valid`; 0 for traces with no valid sample."""
    return values.where(valid, 0.0).sum(cv.TIME) / count.where(count > 0, 1)


@TRANSFORMS.register("detrend", two_pass=True)
def detrend(
    data: xr.DataArray,
    *,
    kind: Annotated[str, spec(schema={"enum": list(_DETREND_KINDS)})] = "linear",
) -> xr.DataArray:
    """Remove each trace's mean ("constant") or least-squares line over the whole trace
    ("linear"), like `scipy.signal.detrend(x, axis=time, type=kind)`.

    Statistics ignore NaN (a trace's line is fitted to its non-NaN samples, at their global
    sample indices); NaN stays NaN. Same dims and shape as `data`, float64.
    """
    what = "detrend"
    _time_axis(data, what)
    if kind not in _DETREND_KINDS:
        raise InvalidInput(f"{what} kind={kind!r}", f"expected one of {_DETREND_KINDS}")
    values = _float_dask(data)
    valid = values.notnull()
    count = valid.sum(cv.TIME)
    mean = _valid_mean(values, valid, count)
    if kind == "constant":
        result = values - mean
    else:
        # Two passes (means, then centred sums) so that large offsets do not cancel digits.
        sample_index = _time_index(values).astype(np.float64)
        index_mean = _valid_mean(sample_index, valid, count)
        index_deviation = (sample_index - index_mean).where(valid, 0.0)
        covariance = (index_deviation * (values - mean)).sum(cv.TIME)
        spread = (index_deviation**2).sum(cv.TIME)
        slope = (covariance / spread.where(spread > 0)).fillna(0.0)
        result = values - mean - slope * (sample_index - index_mean)
    return recorded(result.transpose(*data.dims), data, what, {"kind": kind})


def _hann_taper(sample_index: xr.DataArray, n_time: int, max_percentage: float) -> xr.DataArray:
    """obspy's `Trace.taper(max_percentage, type="hann")` window at `sample_index` (0..n-1).

    obspy takes half-length w = int(max_percentage·n) (at most n // 2) and the ends of
    scipy's symmetric Hann window of 2w + 1 samples (2w samples if 2w == n), so at m samples
    from the nearer end the taper is 0.5·(1 - cos(π·m / d)) for m < w, with d = w (or w - 1/2).
    """
    half_length = min(int(max_percentage * n_time), n_time // 2)
    if half_length == 0:
        return xr.ones_like(sample_index, dtype=np.float64)
    denominator = half_length - 0.5 if 2 * half_length == n_time else half_length
    # numpy's ufuncs give a DataArray a DataArray (__array_ufunc__); numpy's stubs say ndarray.
    from_end = cast(xr.DataArray, np.minimum(sample_index, n_time - 1 - sample_index))
    ramp = cast(xr.DataArray, 0.5 * (1.0 - np.cos(np.pi * from_end / denominator)))
    return ramp.where(from_end < half_length, 1.0)


@TRANSFORMS.register("taper", cheap=True)
def taper(
    data: xr.DataArray, *, max_percentage: Annotated[float, spec(minimum=0, maximum=0.5)] = 0.05
) -> xr.DataArray:
    """Multiply each trace by a Hann (cosine) taper over `max_percentage` (0 to 0.5) of its
    length at each end, like `obspy.Trace.taper(max_percentage, type="hann")`.

    NaN stays NaN. Same dims and shape as `data`, float64.
    """
    what = "taper"
    _time_axis(data, what)
    if not 0 <= max_percentage <= 0.5:
        raise InvalidInput(
            f"{what} max_percentage={max_percentage}", "expected 0 <= max_percentage <= 0.5"
        )
    values = _float_dask(data)
    window = _hann_taper(_time_index(values), data.sizes[cv.TIME], max_percentage)
    result = (values * window).transpose(*data.dims)
    return recorded(result, data, what, {"max_percentage": float(max_percentage)})


def _first_sample_at_or_after(seconds: float, sampling_rate_hz: float) -> int:
    """Smallest k >= 0 with k / sampling_rate_hz >= seconds, in floating point."""
    index = max(0, math.ceil(seconds * sampling_rate_hz))
    while index > 0 and (index - 1) / sampling_rate_hz >= seconds:
        index -= 1
    while index / sampling_rate_hz < seconds:
        index += 1
    return index


def _window_ranges(
    windows: Sequence[tuple[float, float]], sampling_rate_hz: float, n_time: int, what: str
) -> list[tuple[int, int]]:
    """Sample ranges [start, stop) of the windows: samples k with start_s <= k / rate < stop_s."""
    ranges = []
    for window in windows:
        if len(window) != 2 or not all(math.isfinite(edge) for edge in window):
            raise InvalidInput(f"{what} windows={windows!r}", "expected (start_s, stop_s) pairs")
        start_s, stop_s = window
        if not 0 <= start_s < stop_s:
            raise InvalidInput(
                f"{what} windows={windows!r}", f"expected 0 <= start_s < stop_s, got {window}"
            )
        start = min(_first_sample_at_or_after(start_s, sampling_rate_hz), n_time)
        stop = min(_first_sample_at_or_after(stop_s, sampling_rate_hz), n_time)
        ranges.append((start, stop))
    if not any(start < stop for start, stop in ranges):
        raise InvalidInput(
            f"{what} windows={windows!r}",
            f"expected windows holding at least one of the {n_time} samples "
            f"({n_time / sampling_rate_hz} s at {sampling_rate_hz} Hz)",
        )
    return ranges


@TRANSFORMS.register("normalise", two_pass=True)
def normalise(
    data: xr.DataArray,
    *,
    method: Annotated[str, spec(schema={"enum": list(_NORMALISE_METHODS)})] = "std",
    windows: Annotated[
        list[tuple[float, float]] | None,
        spec(schema={"type": "array", "items": schema.SECONDS_WINDOW}),
    ] = None,
) -> xr.DataArray:
    """Per trace: subtract the mean ("demean"), subtract the mean and divide by the standard
    deviation ("std", ddof 0), or divide by the peak |value| ("peak").

    Statistics are taken over the non-NaN samples in the union of `windows` ((start_s, stop_s)
    in seconds from the first sample: samples k with start_s <= k / rate < stop_s; None = whole
    trace) and applied to the whole trace. A trace whose std or peak is 0 (or with no valid
    sample in the windows, whose mean is then taken as 0) is set to 0, never NaN or Inf; NaN
    stays NaN. Same dims and shape as `data`, float64.
    """
    what = "normalise"
    _time_axis(data, what)
    if method not in _NORMALISE_METHODS:
        raise InvalidInput(f"{what} method={method!r}", f"expected one of {_NORMALISE_METHODS}")
    values = _float_dask(data)
    valid = values.notnull()
    recorded_windows = None
    if windows is not None:
        sampling_rate_hz = _sampling_rate_hz(data, what)
        ranges = _window_ranges(windows, sampling_rate_hz, data.sizes[cv.TIME], what)
        sample_index = _time_index(values)
        in_windows = xr.zeros_like(sample_index, dtype=bool)
        for start, stop in ranges:
            in_windows = in_windows | ((sample_index >= start) & (sample_index < stop))
        valid = valid & in_windows
        recorded_windows = [[float(start_s), float(stop_s)] for start_s, stop_s in windows]
    if method == "peak":
        peak = abs(values).where(valid, 0.0).max(cv.TIME)
        result = values * (1.0 / peak.where(peak > 0)).fillna(0.0)
    else:
        count = valid.sum(cv.TIME)
        mean = _valid_mean(values, valid, count)
        result = values - mean
        if method == "std":
            std = cast(xr.DataArray, np.sqrt(_valid_mean((values - mean) ** 2, valid, count)))
            result = result * (1.0 / std.where(std > 0)).fillna(0.0)
    parameters = {"method": method, "windows": recorded_windows}
    return recorded(result.transpose(*data.dims), data, what, parameters)


# --- decimate, resample -----------------------------------------------------------------------


@TRANSFORMS.register("decimate", cheap=True)
def decimate(
    data: xr.DataArray,
    *,
    factor: Annotated[int, spec("keep every factor-th sample", minimum=1)],
    tolerance: Annotated[float, spec(TOLERANCE_HELP, exclusive_minimum=0)] = 1e-8,
    zero_phase: Annotated[bool, spec(ZERO_PHASE_HELP)] = True,
) -> xr.DataArray:
    """Keep every `factor`-th sample (global indices 0, factor, 2·factor, ...) after a zero-phase
    Butterworth low-pass of order 8 with its corner at 0.8 × the new Nyquist frequency
    (rate / factor / 2), applied as `butterworth` does (same halo and NaN policy).
    `zero_phase=False`: the same low-pass run forward only (causal, as `butterworth` with
    `zero_phase=False`), so output k depends on input samples 0 … k·factor only.

    New sampling rate = rate / factor (Hz); shape along time ceil(n / factor); the time
    coordinate keeps the values of the kept samples. float64.
    """
    what = "decimate"
    if not is_integer(factor) or factor < 2:
        raise InvalidInput(f"{what} factor={factor!r}", "expected an integer >= 2")
    sampling_rate_hz = _sampling_rate_hz(data, what)
    check_tolerance(tolerance, what)
    new_rate_hz = sampling_rate_hz / factor
    sos = antialias_sos(new_rate_hz, sampling_rate_hz, what)
    filtered = _lowpass(data, sos, tolerance, zero_phase, what)
    result = filtered.isel({cv.TIME: slice(None, None, int(factor))})
    result = result.assign_attrs({cv.ATTR_SAMPLING_RATE: new_rate_hz})
    parameters = {
        "factor": int(factor),
        "tolerance": float(tolerance),
        "antialias_order": ANTIALIAS_ORDER,
        "antialias_freqmax": ANTIALIAS_CORNER * new_rate_hz / 2,
        **_phase_parameter(zero_phase, what),
    }
    return recorded(result, data, what, parameters)


@TRANSFORMS.register("resample", cheap=True)
def resample(
    data: xr.DataArray,
    *,
    sampling_rate: Annotated[float, spec("the new rate, Hz", exclusive_minimum=0)],
    tolerance: Annotated[float, spec(TOLERANCE_HELP, exclusive_minimum=0)] = 1e-8,
    zero_phase: Annotated[bool, spec(ZERO_PHASE_HELP)] = True,
) -> xr.DataArray:
    """Resample each trace to `sampling_rate` (Hz), whose ratio to the input rate must be a
    fraction up/down with denominator <= 1000 (exact to 1e-9 relative).

    When downsampling (up < down), a zero-phase Butterworth low-pass of order 8 at 0.8 × the
    new Nyquist frequency is applied first, as `butterworth` does (halo from `tolerance`). Then
    `scipy.signal.resample_poly(x, up, down, axis=time)` (default Kaiser FIR, padtype
    "constant": zero outside the trace; detrend first if traces have an offset), to which the
    result is equal for any chunking. Output sample k lies at k / sampling_rate s from the first
    sample; shape along time ceil(n·up/down); the time coordinate (if any) is recomputed from
    its first value and step, other coordinates along time are dropped. float64.

    `zero_phase=False`: causal. The low-pass runs forward only (as `butterworth` with
    `zero_phase=False`) and the FIR (2·half_len + 1 taps, half_len = 10·max(up, down)) is
    delayed by `delay` = ceil(half_len / down) output samples: output k is resample_poly's
    output k - delay (zeros before the trace), so it depends on inputs n with n·up <= k·down
    only. Recorded as `zero_phase: false` and `fir_delay` (output samples).
    """
    what = "resample"
    time_axis = _time_axis(data, what)
    sampling_rate_hz = _sampling_rate_hz(data, what)
    check_tolerance(tolerance, what)
    if isinstance(sampling_rate, bool) or not (math.isfinite(sampling_rate) and sampling_rate > 0):
        raise InvalidInput(
            f"{what} sampling_rate={sampling_rate}", "expected a positive rate in Hz"
        )
    up, down = rational_ratio(sampling_rate, sampling_rate_hz, what)
    n_time = data.sizes[cv.TIME]
    if n_time < 2:
        raise InvalidInput(f"{what} input", f"has {n_time} sample along {cv.TIME!r}; expected 2+")
    values = _float_dask(data)
    parameters: dict[str, Any] = {"sampling_rate": float(sampling_rate)}
    parameters |= {"tolerance": float(tolerance), "up": up, "down": down}
    parameters |= {"antialias_order": None, "antialias_freqmax": None}
    parameters |= _phase_parameter(zero_phase, what)
    delay = 0 if zero_phase or up == down else causal_fir_delay(up, down)
    if delay:
        parameters["fir_delay"] = delay
    if up < down:
        sos = antialias_sos(sampling_rate, sampling_rate_hz, what)
        values = _lowpass(values, sos, tolerance, zero_phase, what)
        parameters["antialias_order"] = ANTIALIAS_ORDER
        parameters["antialias_freqmax"] = ANTIALIAS_CORNER * sampling_rate / 2
    if up == down:
        result = values.copy()
    else:
        resampled = polyphase(values.data, time_axis, up, down, delay)
        n_out = resampled.shape[time_axis]
        coords = {name: coord for name, coord in values.coords.items() if cv.TIME not in coord.dims}
        if cv.TIME in values.coords:
            time = values[cv.TIME].values
            coords[cv.TIME] = (cv.TIME, resampled_time(time, n_out, up, down))
        result = xr.DataArray(resampled, dims=values.dims, coords=coords, name=values.name)
    result = result.assign_attrs({cv.ATTR_SAMPLING_RATE: float(sampling_rate)})
    return recorded(result, data, what, parameters)
