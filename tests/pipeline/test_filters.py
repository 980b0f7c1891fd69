"""Signal transforms equal in-memory scipy/numpy/obspy for any chunking, dim order and scheduler;
NaN gaps, errors and attrs behave as `seisctf.pipeline.transforms.filters` documents."""

from __future__ import annotations

import json

import dask
import dask.array as da
import numpy as np
import obspy
import pytest
import xarray as xr
from chunkings import chunk_sizes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import signal

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.transforms import filters

RTOL = 1e-6
TOLERANCE = 1e-8
# The stores' dim orders: time first, in the middle, last.
LAYOUTS = (
    (cv.TIME, "distance"),
    (cv.REALISATION, cv.TIME, cv.SENSOR),
    ("station", "channel", cv.TIME),
)
RATES_HZ = (1.0, 20.0, 100.0, 250.0)
EXAMPLES = settings(max_examples=10, deadline=None)


# --- data -------------------------------------------------------------------------------------


@st.composite
def signals(draw, dims: tuple[str, ...], gaps: bool = False, min_samples: int = 200):
    """(clean, values, DataArray): noise + sinusoids + offset + trend, Dask-chunked at random;
    `values` has NaN gaps of 1-20 samples in random traces of `clean` if `gaps`."""
    n_time = draw(st.integers(min_samples, 3000))
    trace_sizes = [draw(st.integers(2, 5))] if len(dims) == 2 else [2, draw(st.integers(1, 2))]
    shape = list(trace_sizes)
    shape.insert(dims.index(cv.TIME), n_time)
    rate_hz = draw(st.sampled_from(RATES_HZ))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    traces = rng.standard_normal((int(np.prod(trace_sizes)), n_time))
    seconds = np.arange(n_time) / rate_hz
    for _ in range(3):
        frequency_hz = rng.uniform(0, rate_hz / 2)
        traces += rng.uniform(0, 3) * np.sin(
            2 * np.pi * frequency_hz * seconds + rng.uniform(0, 2 * np.pi)
        )
    traces += rng.uniform(-5, 5, (len(traces), 1)) * (1 + seconds / seconds[-1])
    clean = from_traces(traces.copy(), shape, dims.index(cv.TIME))
    if gaps:
        for _ in range(draw(st.integers(1, 3))):
            start = draw(st.integers(0, n_time - 1))
            trace = draw(st.integers(0, len(traces) - 1))
            traces[trace, start : start + draw(st.integers(1, 20))] = np.nan
    values = from_traces(traces, shape, dims.index(cv.TIME))
    chunks = [
        chunk_sizes(draw, size, max_cuts=6 if dim == cv.TIME else 1)
        for dim, size in zip(dims, shape, strict=True)
    ]
    array = xr.DataArray(
        da.from_array(values, chunks=tuple(chunks)),
        dims=dims,
        coords={cv.TIME: seconds},
        attrs={cv.ATTR_SAMPLING_RATE: rate_hz},
        name="u",
    )
    return clean, values, array


def to_traces(values: np.ndarray, time_axis: int) -> np.ndarray:
    """(n_traces, n_time) copy of `values`."""
    return np.moveaxis(values, time_axis, -1).reshape(-1, values.shape[time_axis]).copy()


def from_traces(traces: np.ndarray, shape: list[int], time_axis: int) -> np.ndarray:
    moved = [*shape[:time_axis], *shape[time_axis + 1 :], traces.shape[-1]]
    return np.moveaxis(traces.reshape(moved), -1, time_axis)


def computed(result: xr.DataArray) -> np.ndarray:
    """Values on the synchronous scheduler, asserted identical on 2 threads."""
    assert isinstance(result.data, da.Array)
    with dask.config.set(scheduler="synchronous"):
        synchronous = result.values
    with dask.config.set(scheduler="threads", num_workers=2):
        threaded = result.values
    np.testing.assert_array_equal(synchronous, threaded)
    return synchronous


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same shape and NaN positions; elsewhere equal to RTOL × max |expected|."""
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    if np.isnan(expected).all():
        return
    error = np.nanmax(np.abs(actual - expected))
    assert error <= RTOL * np.nanmax(np.abs(expected)), error / np.nanmax(np.abs(expected))


# --- in-memory references ---------------------------------------------------------------------


def reference_halo(sos: np.ndarray, tolerance: float = TOLERANCE) -> int:
    impulse = np.zeros(2**17)
    impulse[0] = 1.0
    response = np.abs(signal.sosfilt(sos, impulse))
    return int(np.flatnonzero(response >= tolerance * response.max())[-1]) + 1


def near(gaps: np.ndarray, radius: int) -> np.ndarray:
    """(n_traces, n_time): True within `radius` samples of a gap of the trace."""
    kernel = np.ones(2 * radius + 1)
    n_time = gaps.shape[-1]
    return np.array([np.convolve(trace, kernel)[radius : radius + n_time] > 0.5 for trace in gaps])


def reference_zero_phase(values: np.ndarray, sos: np.ndarray, time_axis: int) -> np.ndarray:
    """sosfiltfilt of the zero-filled traces, NaN within the halo of every gap."""
    traces = to_traces(values, time_axis)
    gaps = np.isnan(traces)
    filtered = signal.sosfiltfilt(sos, np.nan_to_num(traces, nan=0.0), axis=-1)
    filtered[near(gaps, reference_halo(sos))] = np.nan
    return from_traces(filtered, list(values.shape), time_axis)


def antialias_sos(new_rate_hz: float, rate_hz: float) -> np.ndarray:
    return signal.butter(8, 0.8 * new_rate_hz / 2, output="sos", fs=rate_hz)


def reference_resample(values: np.ndarray, up: int, down: int, time_axis: int) -> np.ndarray:
    """resample_poly of the zero-filled traces; NaN where the FIR support holds a NaN."""
    traces = to_traces(values, time_axis)
    gaps = np.isnan(traces)
    resampled = signal.resample_poly(np.nan_to_num(traces, nan=0.0), up, down, axis=-1)
    n_time, n_out = traces.shape[-1], resampled.shape[-1]
    half_length = 10 * max(up, down)
    centre = np.arange(n_out) * down
    first = np.clip(-((half_length - centre) // up), 0, n_time)  # ceil((centre - half) / up)
    stop = np.clip((centre + half_length) // up + 1, 0, n_time)
    gap_counts = np.concatenate([np.zeros((len(gaps), 1)), np.cumsum(gaps, axis=-1)], axis=-1)
    resampled[(gap_counts[:, stop] - gap_counts[:, first]) > 0] = np.nan
    shape = list(values.shape)
    shape[time_axis] = n_out
    return from_traces(resampled, shape, time_axis)


@st.composite
def butterworth_parameters(draw, rate_hz: float) -> dict:
    nyquist_hz = rate_hz / 2
    low, high = sorted(draw(st.lists(st.floats(0.05, 0.9), min_size=2, max_size=2)))
    high = max(high, low + 0.02)
    kind = draw(st.sampled_from(["lowpass", "highpass", "bandpass"]))
    return {
        "freqmin": None if kind == "lowpass" else low * nyquist_hz,
        "freqmax": None if kind == "highpass" else high * nyquist_hz,
        "order": draw(st.integers(1, 6)),
    }


def butter_sos(rate_hz: float, freqmin, freqmax, order: int) -> np.ndarray:
    if freqmin is None:
        return signal.butter(order, freqmax, "lowpass", output="sos", fs=rate_hz)
    if freqmax is None:
        return signal.butter(order, freqmin, "highpass", output="sos", fs=rate_hz)
    return signal.butter(order, [freqmin, freqmax], "bandpass", output="sos", fs=rate_hz)


# --- equality with the in-memory computation --------------------------------------------------


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data())
def test_butterworth_equals_sosfiltfilt_on_the_whole_array(dims, draw):
    _, values, data = draw.draw(signals(dims))
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    parameters = draw.draw(butterworth_parameters(rate_hz))
    sos = butter_sos(rate_hz, **parameters)
    expected = signal.sosfiltfilt(sos, values, axis=dims.index(cv.TIME))
    assert_close(computed(filters.butterworth(data, **parameters)), expected)


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data())
def test_butterworth_gaps_are_nan_within_the_halo_and_clean_elsewhere(dims, draw):
    clean, values, data = draw.draw(signals(dims, gaps=True))
    time_axis = dims.index(cv.TIME)
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    parameters = draw.draw(butterworth_parameters(rate_hz))
    sos = butter_sos(rate_hz, **parameters)
    expected = signal.sosfiltfilt(sos, clean, axis=time_axis)
    near_gaps = near(to_traces(np.isnan(values), time_axis), reference_halo(sos))
    expected[from_traces(near_gaps, list(values.shape), time_axis)] = np.nan
    assert_close(computed(filters.butterworth(data, **parameters)), expected)


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), factor=st.integers(2, 5), gaps=st.booleans())
def test_decimate_equals_filtered_then_subsampled(dims, draw, factor, gaps):
    _, values, data = draw.draw(signals(dims, gaps=gaps))
    time_axis = dims.index(cv.TIME)
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    filtered = reference_zero_phase(values, antialias_sos(rate_hz / factor, rate_hz), time_axis)
    expected = np.take(filtered, np.arange(0, values.shape[time_axis], factor), axis=time_axis)
    result = filters.decimate(data, factor=factor)
    assert_close(computed(result), expected)
    assert result.attrs[cv.ATTR_SAMPLING_RATE] == rate_hz / factor
    np.testing.assert_array_equal(result[cv.TIME], data[cv.TIME][::factor])


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), up=st.integers(1, 5), down=st.integers(1, 5), gaps=st.booleans())
def test_resample_equals_resample_poly(dims, draw, up, down, gaps):
    _, values, data = draw.draw(signals(dims, gaps=gaps))
    time_axis = dims.index(cv.TIME)
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    new_rate_hz = rate_hz * up / down
    result = filters.resample(data, sampling_rate=new_rate_hz)
    actual = computed(result)
    divisor = np.gcd(up, down)
    up, down = up // divisor, down // divisor
    if up == down:
        np.testing.assert_array_equal(actual, values)
        return
    if up < down:
        values = reference_zero_phase(values, antialias_sos(new_rate_hz, rate_hz), time_axis)
    assert_close(actual, reference_resample(values, up, down, time_axis))
    assert result.attrs[cv.ATTR_SAMPLING_RATE] == new_rate_hz
    seconds = np.arange(actual.shape[time_axis]) / new_rate_hz
    np.testing.assert_allclose(result[cv.TIME].values, seconds, rtol=0, atol=1e-9)


# --- causal variants (zero_phase=False) --------------------------------------------------------


def after(gaps: np.ndarray, radius: int) -> np.ndarray:
    """(n_traces, n_time): True 0 to `radius` samples after a gap of the trace."""
    kernel = np.ones(radius + 1)
    n_time = gaps.shape[-1]
    return np.array([np.convolve(trace, kernel)[:n_time] > 0.5 for trace in gaps])


def reference_causal(values: np.ndarray, sos: np.ndarray, time_axis: int) -> np.ndarray:
    """sosfilt of the zero-filled traces from the steady state of their first sample, NaN
    within the halo after every gap."""
    traces = to_traces(values, time_axis)
    gaps = np.isnan(traces)
    filled = np.nan_to_num(traces, nan=0.0)
    zi = signal.sosfilt_zi(sos)[:, np.newaxis, :] * filled[np.newaxis, :, :1]
    filtered = signal.sosfilt(sos, filled, axis=-1, zi=zi)[0]
    filtered[after(gaps, reference_halo(sos))] = np.nan
    return from_traces(filtered, list(values.shape), time_axis)


def reference_causal_resample(values: np.ndarray, up: int, down: int, time_axis: int):
    """y[k] = Σ_n x[n]·h[half + (k - delay)·down - n·up], delay = ceil(half / down), x = 0
    outside the trace (resample_poly's FIR, delayed), summed directly; NaN where the support
    holds a NaN."""
    traces = to_traces(values, time_axis)
    n_time = traces.shape[-1]
    half = 10 * max(up, down)
    taps = signal.firwin(2 * half + 1, 1.0 / max(up, down), window=("kaiser", 5.0)) * up
    delay = -(-half // down)
    n_out = -(-n_time * up // down)
    centre = (np.arange(n_out) - delay) * down
    first = -((half - centre) // up)  # ceil((centre - half) / up)
    inputs = first[:, np.newaxis] + np.arange(2 * half // up + 2)
    tap = half + centre[:, np.newaxis] - inputs * up
    used = (tap >= 0) & (tap <= 2 * half) & (inputs >= 0) & (inputs < n_time)
    weights = np.where(used, taps[np.clip(tap, 0, 2 * half)], 0.0)
    gathered = traces[:, np.clip(inputs, 0, n_time - 1)]  # (n_traces, n_out, width)
    resampled = (np.where(used, np.nan_to_num(gathered, nan=0.0), 0.0) * weights).sum(-1)
    resampled[(np.isnan(gathered) & used).any(-1)] = np.nan
    shape = list(values.shape)
    shape[time_axis] = n_out
    return from_traces(resampled, shape, time_axis)


def changed_from(data: xr.DataArray, values: np.ndarray, start: int) -> xr.DataArray:
    """`data` (same chunks) with every sample from time index `start` on moved by 1e6."""
    time_axis = data.get_axis_num(cv.TIME)
    later = np.moveaxis(values.copy(), time_axis, -1)
    later[..., start:] += 1e6
    later = np.moveaxis(later, -1, time_axis)
    return data.copy(data=da.from_array(later, chunks=data.chunks))


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), gaps=st.booleans())
def test_causal_butterworth_equals_sosfilt_and_never_sees_later_samples(dims, draw, gaps):
    _, values, data = draw.draw(signals(dims, gaps=gaps))
    time_axis = dims.index(cv.TIME)
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    parameters = draw.draw(butterworth_parameters(rate_hz))
    sos = butter_sos(rate_hz, **parameters)
    result = filters.butterworth(data, **parameters, zero_phase=False)
    actual = computed(result)
    assert_close(actual, reference_causal(values, sos, time_axis))
    assert result.attrs[cv.ATTR_TRANSFORMS][-1]["zero_phase"] is False
    # Moving every sample from `start` on changes no earlier output, to the bit.
    start = draw.draw(st.integers(1, values.shape[time_axis] - 1))
    later = computed(filters.butterworth(changed_from(data, values, start), **parameters,
                                         zero_phase=False))  # fmt: skip
    earlier = np.take(actual, np.arange(start), axis=time_axis)
    assert np.take(later, np.arange(start), axis=time_axis).tobytes() == earlier.tobytes()
    n_time = values.shape[time_axis]
    if np.isfinite(np.take(actual, np.arange(start, n_time), axis=time_axis)).any():
        # The later samples do reach the output (unless gaps blank all of it from `start` on).
        assert not np.array_equal(later, actual, equal_nan=True)


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), factor=st.integers(2, 5), gaps=st.booleans())
def test_causal_decimate_equals_sosfilt_then_subsampled(dims, draw, factor, gaps):
    _, values, data = draw.draw(signals(dims, gaps=gaps))
    time_axis = dims.index(cv.TIME)
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    filtered = reference_causal(values, antialias_sos(rate_hz / factor, rate_hz), time_axis)
    expected = np.take(filtered, np.arange(0, values.shape[time_axis], factor), axis=time_axis)
    assert_close(computed(filters.decimate(data, factor=factor, zero_phase=False)), expected)


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), up=st.integers(1, 5), down=st.integers(1, 5), gaps=st.booleans())
def test_causal_resample_is_the_delayed_fir_and_never_sees_later_samples(
    dims, draw, up, down, gaps
):
    _, values, data = draw.draw(signals(dims, gaps=gaps))
    time_axis = dims.index(cv.TIME)
    rate_hz = data.attrs[cv.ATTR_SAMPLING_RATE]
    new_rate_hz = rate_hz * up / down
    result = filters.resample(data, sampling_rate=new_rate_hz, zero_phase=False)
    actual = computed(result)
    divisor = np.gcd(up, down)
    up, down = up // divisor, down // divisor
    if up == down:
        np.testing.assert_array_equal(actual, values)
        return
    assert result.attrs[cv.ATTR_TRANSFORMS][-1]["fir_delay"] == -(-10 * max(up, down) // down)
    filtered = values
    if up < down:
        filtered = reference_causal(values, antialias_sos(new_rate_hz, rate_hz), time_axis)
    assert_close(actual, reference_causal_resample(filtered, up, down, time_axis))
    # Output k reads inputs n with n·up <= k·down only: moving inputs from `start` on leaves
    # outputs k < start·up/down unchanged, to the bit.
    start = draw.draw(st.integers(1, values.shape[time_axis] - 1))
    changed = filters.resample(
        changed_from(data, values, start), sampling_rate=new_rate_hz, zero_phase=False
    )
    kept = np.arange(-(-start * up // down))
    later = np.take(computed(changed), kept, axis=time_axis)
    assert later.tobytes() == np.take(actual, kept, axis=time_axis).tobytes()


@pytest.mark.parametrize(
    ("rate_hz", "new_rate_hz"), [(40.0, 1.0), (100.0, 20.0), (40.0, 3.0), (50.0, 20.0)]
)
def test_causal_warmup_is_where_a_cut_trace_joins_the_whole_record(rate_hz, new_rate_hz):
    rng = np.random.default_rng(3)
    n_time = 20_000
    seconds = np.arange(n_time) / rate_hz
    values = 800 + rng.standard_normal(n_time).cumsum() + 50 * np.sin(0.3 * seconds)
    up, down = filters.resampling_ratio(new_rate_hz, rate_hz)

    def causal(samples: np.ndarray) -> np.ndarray:
        data = xr.DataArray(samples, dims=(cv.TIME,), attrs={cv.ATTR_SAMPLING_RATE: rate_hz})
        if up == 1:
            return computed(filters.decimate(data, factor=down, zero_phase=False))
        return computed(filters.resample(data, sampling_rate=new_rate_hz, zero_phase=False))

    warmup = filters.causal_warmup(rate_hz, new_rate_hz)
    assert warmup > 0
    whole = causal(values)
    cut_out = 30 * up  # a cut on the output grid: input sample 30·down
    cut = causal(values[cut_out * down // up :])
    joined = whole[cut_out + warmup : cut_out + len(cut)]
    error = np.abs(cut[warmup : len(joined) + warmup] - joined).max()
    assert error <= 1e-6 * np.abs(whole - whole.mean()).max()
    assert np.abs(cut[: warmup // 2] - whole[cut_out : cut_out + warmup // 2]).max() > error
    assert filters.causal_warmup(rate_hz, rate_hz) == 0


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), kind=st.sampled_from(["constant", "linear"]), gaps=st.booleans())
def test_detrend_equals_scipy_over_the_valid_samples(dims, draw, kind, gaps):
    _, values, data = draw.draw(signals(dims, gaps=gaps, min_samples=100))
    time_axis = dims.index(cv.TIME)
    actual = computed(filters.detrend(data, kind=kind))
    if not gaps:
        assert_close(actual, signal.detrend(values, axis=time_axis, type=kind))
        return
    traces = to_traces(values, time_axis)
    expected = np.full_like(traces, np.nan)
    sample_index = np.arange(traces.shape[-1])
    for trace, out in zip(traces, expected, strict=True):
        valid = ~np.isnan(trace)
        degree = 0 if kind == "constant" else 1
        fit = np.polyfit(sample_index[valid], trace[valid], degree)
        out[valid] = trace[valid] - np.polyval(fit, sample_index[valid])
    assert_close(actual, from_traces(expected, list(values.shape), time_axis))


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(draw=st.data(), max_percentage=st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.37, 0.5]))
def test_taper_equals_obspy_hann_taper(dims, draw, max_percentage):
    _, values, data = draw.draw(signals(dims, gaps=True, min_samples=2))
    time_axis = dims.index(cv.TIME)
    expected = []
    for trace in to_traces(values, time_axis):
        tapered = obspy.Trace(data=trace.copy(), header={"sampling_rate": 1.0})
        expected.append(tapered.taper(max_percentage, type="hann").data)
    expected = from_traces(np.array(expected), list(values.shape), time_axis)
    assert_close(computed(filters.taper(data, max_percentage=max_percentage)), expected)


@pytest.mark.parametrize("dims", LAYOUTS)
@EXAMPLES
@given(
    draw=st.data(),
    method=st.sampled_from(["demean", "std", "peak"]),
    windows=st.one_of(
        st.none(),
        st.lists(st.tuples(st.floats(0, 0.6), st.floats(0.05, 0.5)), min_size=1, max_size=2),
    ),
)
def test_normalise_equals_numpy_over_the_windows(dims, draw, method, windows):
    _, values, data = draw.draw(signals(dims, gaps=True))
    time_axis = dims.index(cv.TIME)
    traces = to_traces(values, time_axis)
    duration_s = traces.shape[-1] / data.attrs[cv.ATTR_SAMPLING_RATE]
    seconds = np.arange(traces.shape[-1]) / data.attrs[cv.ATTR_SAMPLING_RATE]
    in_windows = np.ones_like(seconds, dtype=bool)
    if windows is not None:
        # Windows as fractions of the duration, in seconds from the first sample.
        windows = [(start * duration_s, (start + length) * duration_s) for start, length in windows]
        in_windows = np.any([(start <= seconds) & (seconds < stop) for start, stop in windows], 0)
    selected = np.where(in_windows, traces, np.nan)
    if method == "peak":
        expected = traces / np.nanmax(np.abs(selected), axis=-1, keepdims=True)
    else:
        expected = traces - np.nanmean(selected, axis=-1, keepdims=True)
        if method == "std":
            expected /= np.nanstd(selected, axis=-1, keepdims=True)
    expected = from_traces(expected, list(values.shape), time_axis)
    assert_close(computed(filters.normalise(data, method=method, windows=windows)), expected)


@pytest.mark.parametrize("method", ["demean", "std", "peak"])
def test_normalise_leaves_zero_traces_at_zero(method):
    values = np.zeros((3, 400))
    values[1] = np.sin(np.arange(400))
    values[2, 5] = np.nan
    data = xr.DataArray(
        da.from_array(values, chunks=(1, 64)),
        dims=("trace", cv.TIME),
        attrs={cv.ATTR_SAMPLING_RATE: 10.0},
    )
    actual = computed(filters.normalise(data, method=method))
    assert np.array_equal(actual[0], np.zeros(400))
    assert np.isnan(actual[2, 5]) and np.count_nonzero(np.isnan(actual)) == 1
    assert np.all(np.isfinite(actual[[0, 1]]))
    assert np.all(np.delete(actual[2], 5) == 0)


# --- laziness, attrs, errors ------------------------------------------------------------------


def example(dims=(cv.REALISATION, cv.TIME, cv.SENSOR), n_time=1200, rate_hz=100.0):
    values = np.random.default_rng(0).standard_normal((2, n_time, 3))
    values = np.moveaxis(values, 1, dims.index(cv.TIME))
    return xr.DataArray(
        da.from_array(values, chunks=100),
        dims=dims,
        coords={cv.TIME: np.arange(n_time) / rate_hz},
        attrs={
            cv.ATTR_SAMPLING_RATE: rate_hz,
            cv.ATTR_DATASET: "test",
            cv.ATTR_TRANSFORMS: [{"transform": "earlier"}],
        },
    )


TRANSFORMS = {
    "butterworth": (filters.butterworth, {"freqmin": 1.0, "freqmax": 10.0}, 100.0),
    "detrend": (filters.detrend, {"kind": "linear"}, 100.0),
    "taper": (filters.taper, {"max_percentage": 0.1}, 100.0),
    "decimate": (filters.decimate, {"factor": 4}, 25.0),
    "resample": (filters.resample, {"sampling_rate": 40.0}, 40.0),
    "normalise": (filters.normalise, {"method": "std", "windows": [(0.0, 2.0)]}, 100.0),
}


def refuse_to_compute(*args, **kwargs):
    raise AssertionError("a transform computed something")


@pytest.mark.parametrize("name", TRANSFORMS)
def test_transforms_are_lazy_and_record_history(name):
    function, parameters, new_rate_hz = TRANSFORMS[name]
    data = example()
    with dask.config.set(scheduler=refuse_to_compute):
        result = function(data, **parameters)
    assert isinstance(result.data, da.Array)
    assert result.dims == data.dims
    assert result.attrs[cv.ATTR_SAMPLING_RATE] == new_rate_hz
    assert result.attrs[cv.ATTR_DATASET] == "test"
    history = result.attrs[cv.ATTR_TRANSFORMS]
    assert history[0] == {"transform": "earlier"} and len(history) == 2
    assert history[1]["transform"] == name
    assert json.loads(json.dumps(history[1])) == history[1]
    assert data.attrs[cv.ATTR_TRANSFORMS] == [{"transform": "earlier"}]  # input untouched
    n_out = round(data.sizes[cv.TIME] * new_rate_hz / 100.0)
    np.testing.assert_allclose(result[cv.TIME], np.arange(n_out) / new_rate_hz, atol=1e-9)


def test_in_memory_input_is_accepted():
    data = example().compute()
    result = filters.butterworth(data, freqmax=5.0)
    assert isinstance(result.data, da.Array)
    expected = signal.sosfiltfilt(butter_sos(100.0, None, 5.0, 4), data.values, axis=1)
    assert_close(computed(result), expected)


@pytest.mark.parametrize(
    ("function", "parameters", "named"),
    [
        (filters.butterworth, {}, "freqmin"),
        (filters.butterworth, {"freqmax": 50.0}, "freqmax=50.0"),
        (filters.butterworth, {"freqmin": 0.0}, "freqmin=0.0"),
        (filters.butterworth, {"freqmin": 10.0, "freqmax": 5.0}, "freqmin=10.0, freqmax=5.0"),
        (filters.butterworth, {"freqmax": 5.0, "order": 0}, "order=0"),
        (filters.butterworth, {"freqmax": 5.0, "order": 2.5}, "order=2.5"),
        (filters.butterworth, {"freqmax": 5.0, "tolerance": 0.0}, "tolerance=0.0"),
        (filters.butterworth, {"freqmax": 1e-7}, "tolerance=1e-08"),
        (filters.detrend, {"kind": "quadratic"}, "kind='quadratic'"),
        (filters.taper, {"max_percentage": 0.6}, "max_percentage=0.6"),
        (filters.decimate, {"factor": 1}, "factor=1"),
        (filters.resample, {"sampling_rate": 100.0 / np.pi}, "sampling_rate="),
        (filters.resample, {"sampling_rate": -5.0}, "sampling_rate=-5.0"),
        (filters.normalise, {"method": "max"}, "method='max'"),
        (filters.normalise, {"windows": [(2.0, 1.0)]}, "windows="),
        (filters.normalise, {"windows": [(100.0, 200.0)]}, "windows="),
    ],
)
def test_bad_parameters_are_named(function, parameters, named):
    with pytest.raises(InvalidInput) as raised:
        function(example(), **parameters)
    assert named in raised.value.what


@pytest.mark.parametrize(
    "function", [filters.butterworth, filters.decimate, filters.resample, filters.normalise]
)
def test_missing_time_dim_or_sampling_rate_is_named(function):
    parameters = {
        filters.butterworth: {"freqmax": 5.0},
        filters.decimate: {"factor": 2},
        filters.resample: {"sampling_rate": 50.0},
        filters.normalise: {"windows": [(0.0, 1.0)]},
    }[function]
    without_rate = example()
    del without_rate.attrs[cv.ATTR_SAMPLING_RATE]
    with pytest.raises(InvalidInput) as raised:
        function(without_rate, **parameters)
    assert cv.ATTR_SAMPLING_RATE in raised.value.what
    with pytest.raises(InvalidInput) as raised:
        function(example().rename({cv.TIME: "t"}), **parameters)
    assert cv.TIME in raised.value.problem


def test_traces_too_short_for_the_filter_are_named():
    with pytest.raises(InvalidInput) as raised:
        filters.decimate(example(n_time=20), factor=2)
    assert raised.value.what == "decimate input" and "20 samples" in raised.value.problem
