"""Noise injection: chunk- and scheduler-independent bits, requested levels, secrecy, bad input."""

from __future__ import annotations

import json

import dask
import dask.array as da
import numpy as np
import obspy
import pytest
import scipy.signal
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.transforms import noise as noise_module
from seisctf.pipeline.transforms.noise import (
    add_coloured_noise,
    add_gaussian_noise,
    noise_key,
    standard_normal,
)
from seisctf.pipeline.transforms.noise_real import add_real_noise
from seisctf.signal import trace_levels

RATE = 100.0  # Hz, the rate of obspy's example recording
# obspy's bundled example: 3 channels × 3000 samples of station BW.RJOB with a local event.
EXAMPLE = np.stack([trace.data.astype(np.float64) for trace in obspy.read()])
NON_TIME_DIMS = ("station", "channel", "sensor")
SPECTRUM = {"frequencies": [0.0, 10.0, 20.0, 50.0], "amplitudes": [1.0, 1.0, 0.1, 0.1]}


def recorded_data(shape: tuple[int, ...], time_axis: int, chunks=-1) -> xr.DataArray:
    """Real samples (the example recording, repeated) in `shape`, time at `time_axis`, lazy."""
    time_last = np.resize(EXAMPLE, (*shape[:time_axis], *shape[time_axis + 1 :], shape[time_axis]))
    values = np.moveaxis(time_last, -1, time_axis)
    dims = list(NON_TIME_DIMS[: len(shape) - 1])
    dims.insert(time_axis, cv.TIME)
    return xr.DataArray(
        da.from_array(values, chunks=chunks),
        dims=dims,
        attrs={cv.ATTR_SAMPLING_RATE: RATE, "dataset": "example"},
    )


def noise_windows(category: bool = False) -> xr.DataArray:
    """(trace 3 or 4, channel 3, sample 300) windows of the example's quiet tail (plus, with
    `category`, an event window first that must never be used)."""
    windows = [EXAMPLE[:, start : start + 300] for start in (2100, 2400, 2700)]
    categories = ["noise"] * 3
    if category:
        windows.insert(0, EXAMPLE[:, 600:900])
        categories.insert(0, "earthquake")
    bank = xr.DataArray(np.stack(windows), dims=("trace", "channel", "sample"))
    return bank.assign_coords(trace_category=("trace", categories)) if category else bank


def draw_level(draw) -> dict:
    return draw(st.sampled_from([{"rms_fraction": 0.2}, {"rms_fraction": 0.5}, {"snr_db": 6.0}]))


@st.composite
def partitions(draw, size: int) -> tuple[int, ...]:
    """Irregular chunk sizes of an axis of `size`: at most 4 chunks."""
    cuts = sorted(draw(st.sets(st.integers(1, size - 1), max_size=3))) if size > 1 else []
    return tuple(np.diff([0, *cuts, size]).tolist())


@st.composite
def layouts(draw, max_time: int = 60):
    """(shape, time axis, two chunkings) of a 1- to 3-D array."""
    ndim = draw(st.integers(1, 3))
    time_axis = draw(st.integers(0, ndim - 1))
    shape = tuple(
        draw(st.integers(1, max_time if axis == time_axis else 4)) for axis in range(ndim)
    )
    first = tuple(draw(partitions(size)) for size in shape)
    second = tuple(draw(partitions(size)) for size in shape)
    return shape, time_axis, first, second


def computed_both_ways(transform, data: xr.DataArray, first, second, seed: int):
    """`transform` of `data` chunked `first` on the synchronous scheduler, and chunked `second`
    on the threaded one with 2 workers, as numpy arrays; checks `seed` is not in attrs."""
    with dask.config.set(scheduler="synchronous"):
        one = transform(data.chunk(dict(zip(data.dims, first, strict=True))))
        one_values = one.values
    with dask.config.set(scheduler="threads", num_workers=2):
        two = transform(data.chunk(dict(zip(data.dims, second, strict=True)))).values
    if seed >= 10**6:  # shorter decimal strings may occur in attrs by chance ("0.2")
        assert str(seed) not in json.dumps(one.attrs)
    return one_values, two


# --- keys and the N-D generator -----------------------------------------------------------------


def test_noise_key_is_64_bit_and_separates_seeds_and_variables():
    keys = {noise_key(seed, variable) for seed in (0, 1, -1, 2**70) for variable in ("u", "data")}
    assert len(keys) == 8
    assert all(0 <= key < 2**64 for key in keys)
    assert noise_key(7, "u") == noise_key(np.int64(7), "u")


@pytest.mark.parametrize(
    ("seed", "variable", "what"),
    [(1.5, "u", "seed"), (True, "u", "seed"), ("7", "u", "seed"), (7, "", "variable")],
)
def test_noise_key_refuses_bad_seed_or_variable(seed, variable, what):
    with pytest.raises(InvalidInput) as error:
        noise_key(seed, variable)
    assert error.value.what == what


@settings(max_examples=20, deadline=None)
@given(layout=layouts(max_time=30), key=st.integers(0, 2**64 - 1))
def test_standard_normal_is_the_counter_at_each_c_order_position(layout, key):
    shape, _, first, second = layout
    expected = noise_module.standard_normal_at(key, np.arange(np.prod(shape)).reshape(shape))
    np.testing.assert_array_equal(standard_normal(key, shape, first).compute(), expected)
    np.testing.assert_array_equal(standard_normal(key, shape, second).compute(), expected)


# --- bit-identity for any chunking and scheduler ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(layout=layouts(), seed=st.integers(0, 2**63), data=st.data())
def test_gaussian_noise_is_bit_identical_for_any_chunking_and_scheduler(layout, seed, data):
    shape, time_axis, first, second = layout
    parameters = draw_level(data.draw)
    if data.draw(st.booleans()):
        parameters["rms_window"] = (0.0, shape[time_axis] / RATE)

    def transform(array):
        return add_gaussian_noise(array, seed=seed, variable="u", **parameters)

    one, two = computed_both_ways(transform, recorded_data(shape, time_axis), first, second, seed)
    np.testing.assert_array_equal(one, two)


@settings(max_examples=50, deadline=None)
@given(
    layout=layouts(),
    seed=st.integers(0, 2**63),
    numtaps=st.sampled_from([3, 31, 257]),
    data=st.data(),
)
def test_coloured_noise_is_bit_identical_for_any_chunking_and_scheduler(
    layout, seed, numtaps, data
):
    shape, time_axis, first, second = layout
    parameters = draw_level(data.draw)

    def transform(array):
        return add_coloured_noise(
            array, seed=seed, variable="u", numtaps=numtaps, **SPECTRUM, **parameters
        )

    one, two = computed_both_ways(transform, recorded_data(shape, time_axis), first, second, seed)
    np.testing.assert_array_equal(one, two)
    assert np.isfinite(one).all()  # edge samples too: their white noise exists beyond the ends


@settings(max_examples=50, deadline=None)
@given(layout=layouts(max_time=700), seed=st.integers(0, 2**63), data=st.data())
def test_real_noise_is_bit_identical_for_any_chunking_and_scheduler(layout, seed, data):
    shape, time_axis, first, second = layout
    array = recorded_data(shape, time_axis)
    windows = noise_windows(category=True)
    if "channel" in array.dims and data.draw(st.booleans()):
        windows = windows.isel(channel=np.arange(array.sizes["channel"]) % 3)
    else:
        windows = windows.isel(channel=0)
    parameters = data.draw(
        st.sampled_from([{"rms_fraction": 0.5}, {"snr_db": 10.0}, {"scale": 0.25}])
    )

    def transform(values):
        return add_real_noise(values, seed=seed, variable="u", noise=windows, **parameters)

    one, two = computed_both_ways(transform, array, first, second, seed)
    np.testing.assert_array_equal(one, two)


# --- seeds, variables and secrecy ---------------------------------------------------------------

TRANSFORMS = {
    "gaussian": lambda data, **key: add_gaussian_noise(data, rms_fraction=0.2, **key),
    "coloured": lambda data, **key: add_coloured_noise(data, rms_fraction=0.2, **SPECTRUM, **key),
    "real": lambda data, **key: add_real_noise(
        data, noise=noise_windows().isel(channel=0), rms_fraction=0.2, **key
    ),
}


@pytest.mark.parametrize("name", TRANSFORMS)
def test_seed_and_variable_choose_the_noise(name):
    data = recorded_data((40, 600), 1)
    transform = TRANSFORMS[name]
    base = transform(data, seed=11, variable="u").values - data.values
    again = transform(data, seed=11, variable="u").values - data.values
    np.testing.assert_array_equal(base, again)
    for other in (
        transform(data, seed=12, variable="u").values - data.values,
        transform(data, seed=11, variable="data").values - data.values,
    ):
        # Real noise: 3 windows × 300 starts, so a trace may coincide by chance (p = 1/900).
        assert sum(np.allclose(one, two) for one, two in zip(base, other, strict=True)) <= 1
        if name != "real":  # recorded noise is not white: shifted windows correlate
            assert abs(np.corrcoef(base.ravel(), other.ravel())[0, 1]) < 0.05


@pytest.mark.parametrize("name", TRANSFORMS)
def test_seed_is_never_recorded_and_history_is_appended(name):
    seed = 860_137_452_911_847_213
    data = recorded_data((3, 500), 1)
    data.attrs[cv.ATTR_TRANSFORMS] = [{"transform": "decimate", "factor": 2}]
    result = TRANSFORMS[name](data, seed=seed, variable="u")
    text = json.dumps(result.attrs)
    assert str(seed) not in text
    assert str(noise_key(seed, "u")) not in text
    assert result.attrs["dataset"] == "example"
    history = result.attrs[cv.ATTR_TRANSFORMS]
    assert history[0] == {"transform": "decimate", "factor": 2}
    assert history[1]["transform"] == f"add_{name}_noise"
    assert history[1]["rms_fraction"] == 0.2
    assert "seed" not in history[1] and "variable" not in history[1]


def test_outputs_are_lazy_and_keep_chunks_coords_and_dtype():
    """The per-trace level is computed when the transform is built (its own pass, so the noisy
    output streams in bounded memory); the output itself is a lazy Dask array."""
    data = recorded_data((2, 3, 900), 2, chunks=(1, 2, 200)).astype(np.float32)
    data = data.assign_coords(time=np.arange(900) / RATE)
    results = [transform(data, seed=1, variable="u") for transform in TRANSFORMS.values()]
    for result in results:
        assert isinstance(result.data, da.Array)
        assert result.chunks == data.chunks
        assert result.dtype == np.float32
        xr.testing.assert_identical(result.time, data.time)
    integers = recorded_data((2, 100), 1).astype(np.int32)
    assert add_gaussian_noise(integers, seed=1, variable="u", snr_db=3.0).dtype == np.float64


# --- levels and spectra -------------------------------------------------------------------------


def rms(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sqrt(np.nanmean(values * values, axis=axis))


@pytest.mark.parametrize(
    "parameters", [{"rms_fraction": 0.2}, {"rms_fraction": 0.5}, {"snr_db": 12}]
)
def test_gaussian_noise_has_the_requested_level_per_trace(parameters):
    data = recorded_data((25_000, 3), 0, chunks=(4000, 2))  # (time, distance)
    noise = add_gaussian_noise(data, seed=3, variable="u", **parameters).values - data.values
    if "rms_fraction" in parameters:
        expected = parameters["rms_fraction"] * rms(data.values, axis=0)
    else:
        expected = rms(data.values, axis=0) / 10 ** (parameters["snr_db"] / 20)
    np.testing.assert_allclose(rms(noise, axis=0), expected, rtol=0.05)
    assert np.abs(noise.mean(axis=0)).max() < 0.05 * expected.min()


@pytest.mark.parametrize(
    ("shape", "time_axis"),
    [((9000, 1), 0), ((9000, 2), 0), ((5000, 128), 0), ((3, 7000), 1), ((2, 4000, 3), 1)],
)
def test_block_sums_add_each_trace_in_time_order(shape, time_axis):
    """The level's sums are sequential in time for one trace and for many, in any memory layout
    (pairwise summation would change bits with how many traces a block holds)."""
    rng = np.random.default_rng(5)
    block = rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 6, shape)
    block[rng.random(shape) < 0.02] = np.nan
    samples = np.moveaxis(block, time_axis, 0).reshape(shape[time_axis], -1)
    expected_sum = np.zeros(samples.shape[1])
    for row in samples:  # one sample after the other, plain float64 additions
        expected_sum = expected_sum + np.where(np.isfinite(row), row * row, 0.0)
    expected_count = np.isfinite(samples).sum(axis=0)
    for layout in (block, np.asfortranarray(block)):
        sums = np.moveaxis(trace_levels.block_sums(layout, time_axis), time_axis, 0)[0]
        sums = sums.reshape(-1, 2)
        assert np.array_equal(sums[:, 0], expected_sum)
        assert np.array_equal(sums[:, 1], expected_count)


def test_gaussian_noise_level_comes_from_the_rms_window():
    data = recorded_data((3, 30_000), 1, chunks=(2, 7000))
    result = add_gaussian_noise(data, seed=3, variable="u", rms_fraction=0.5, rms_window=(3, 9))
    noise = result.values - data.values
    np.testing.assert_allclose(rms(noise), 0.5 * rms(data.values[:, 300:900]), rtol=0.05)
    assert result.attrs[cv.ATTR_TRANSFORMS][-1]["rms_window"] == [3.0, 9.0]


def test_coloured_noise_has_the_requested_level_and_spectrum():
    data = recorded_data((4, 40_000), 1, chunks=(3, 6000))
    result = add_coloured_noise(data, seed=5, variable="u", snr_db=6.0, **SPECTRUM)
    noise = result.values - data.values
    np.testing.assert_allclose(rms(noise), rms(data.values) / 10 ** (6 / 20), rtol=0.05)
    frequencies, psd = scipy.signal.welch(noise, fs=RATE, nperseg=512)
    taps = scipy.signal.firwin2(257, SPECTRUM["frequencies"], SPECTRUM["amplitudes"], fs=RATE)
    _, response = scipy.signal.freqz(taps, worN=frequencies, fs=RATE)
    relative_psd = psd / psd[:, 1:].mean(axis=1, keepdims=True)
    relative_model = np.abs(response) ** 2 / np.mean(np.abs(response[1:]) ** 2)
    ratio = relative_psd[:, 1:-1] / relative_model[1:-1]
    assert ratio.min() > 0.5 and ratio.max() < 2.0
    passband, stopband = frequencies < 8, (frequencies > 25) & (frequencies < 45)
    band_ratio = psd[:, passband].mean(axis=1) / psd[:, stopband].mean(axis=1)
    assert ((band_ratio > 50) & (band_ratio < 200)).all()  # (1 / 0.1)² = 100


def test_coloured_noise_is_centred_fir_of_white_noise_beyond_the_ends():
    seed, numtaps, n_time = 9, 31, 400
    data = recorded_data((2, n_time), 1, chunks=(1, 150))
    result = add_coloured_noise(
        data, seed=seed, variable="u", rms_fraction=1.0, numtaps=numtaps, **SPECTRUM
    )
    halo = numtaps // 2
    key = noise_module.substream_key(noise_key(seed, "u"), "coloured")
    white = standard_normal(key, (2, n_time + 2 * halo), -1).compute()
    taps = scipy.signal.firwin2(numtaps, SPECTRUM["frequencies"], SPECTRUM["amplitudes"], fs=RATE)
    taps /= np.sqrt(np.sum(taps**2))
    expected = np.stack([np.convolve(trace, taps, mode="valid") for trace in white])
    expected *= rms(data.values)[:, None]
    np.testing.assert_allclose(result.values - data.values, expected, rtol=1e-9, atol=1e-9)


def test_real_noise_traces_are_shifted_scaled_noise_windows():
    windows = noise_windows(category=True)
    data = recorded_data((4, 3, 900), 2, chunks=(3, 2, 400)).assign_coords(channel=["Z", "N", "E"])
    windows = windows.assign_coords(channel=["E", "N", "Z"])  # matched by label
    result = add_real_noise(data, seed=4, variable="data", noise=windows, rms_fraction=0.5)
    noise = result.values - data.values
    bank = windows.sel(channel=["Z", "N", "E"]).values[1:]  # the event window is never used
    centred = bank - bank.mean(axis=-1, keepdims=True)
    unit = centred / rms(centred)[..., None]
    for station in range(4):
        scaled = noise[station] / (0.5 * rms(data.values[station]))[:, None]
        # One window and start for all channels of a station, tiled over 900 = 3 × 300 samples.
        matches = [
            (window, start)
            for window in range(3)
            for start in range(300)
            if np.allclose(scaled, np.roll(unit[window], -start, axis=-1)[:, np.arange(900) % 300])
        ]
        assert len(matches) == 1
    np.testing.assert_allclose(rms(noise), 0.5 * rms(data.values), rtol=1e-9)
    assert result.attrs[cv.ATTR_TRANSFORMS][-1]["noise_windows"] == 3


def test_real_noise_with_a_fixed_scale_and_its_level_statistically():
    windows = noise_windows().isel(channel=0)
    data = recorded_data((30, 1000), 1, chunks=(7, 300))
    scaled = add_real_noise(data, seed=8, variable="u", noise=windows, scale=2.0)
    noise = scaled.values - data.values
    centred = windows.values - windows.values.mean(axis=-1, keepdims=True)
    # The first 300 samples of a trace hold one whole cycle of its window, from some start.
    for trace in noise:
        assert any(np.allclose(np.sort(trace[:300]), np.sort(2.0 * window)) for window in centred)
    leveled = add_real_noise(data, seed=8, variable="u", noise=windows, snr_db=20.0)
    ratio = rms(leveled.values - data.values).sum() / (rms(data.values) / 10).sum()
    assert abs(ratio - 1) < 0.05


# --- NaN ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TRANSFORMS)
def test_nan_stays_nan_and_levels_use_finite_samples(name):
    values = recorded_data((3, 4000), 1).values.copy()
    values[0, 100:300] = np.nan
    values[1, :] = np.nan
    data = xr.DataArray(da.from_array(values, chunks=(2, 700)), dims=("sensor", cv.TIME))
    data.attrs[cv.ATTR_SAMPLING_RATE] = RATE
    result = TRANSFORMS[name](data, seed=2, variable="u").values
    np.testing.assert_array_equal(np.isnan(result), np.isnan(values))
    noise = result - values
    np.testing.assert_allclose(rms(noise[[0, 2]]), 0.2 * rms(values[[0, 2]]), rtol=0.1)


def test_gaussian_noise_is_zero_on_traces_without_finite_samples_in_the_window():
    values = recorded_data((2, 1000), 1).values.copy()
    values[0, :200] = np.nan
    data = xr.DataArray(values, dims=("sensor", cv.TIME), attrs={cv.ATTR_SAMPLING_RATE: RATE})
    result = add_gaussian_noise(data, seed=1, variable="u", rms_fraction=0.5, rms_window=(0, 2))
    np.testing.assert_array_equal(result.values[0], values[0])
    assert not np.array_equal(result.values[1], values[1])


# --- bad input ----------------------------------------------------------------------------------

DATA = recorded_data((2, 500), 1)


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda: add_gaussian_noise(DATA, seed=1, variable="u"), "snr_db / rms_fraction"),
        (
            lambda: add_gaussian_noise(DATA, seed=1, variable="u", snr_db=3, rms_fraction=0.2),
            "snr_db / rms_fraction",
        ),
        (lambda: add_gaussian_noise(DATA, seed=1, variable="u", rms_fraction=-0.1), "rms_fraction"),
        (lambda: add_gaussian_noise(DATA, seed=1, variable="u", snr_db=np.inf), "snr_db"),
        (lambda: add_gaussian_noise(DATA, seed=1.0, variable="u", snr_db=3), "seed"),
        (
            lambda: add_gaussian_noise(DATA, seed=1, variable="u", snr_db=3, rms_window=(2, 1)),
            "rms_window",
        ),
        (
            lambda: add_gaussian_noise(DATA, seed=1, variable="u", snr_db=3, rms_window=(0, 9)),
            "rms_window",
        ),
        (
            lambda: add_gaussian_noise(DATA.rename(time="t"), seed=1, variable="u", snr_db=3),
            "data",
        ),
        (
            lambda: add_gaussian_noise(
                DATA.assign_attrs(sampling_rate=None),
                seed=1,
                variable="u",
                snr_db=3,
                rms_window=(0, 1),
            ),
            "data attr 'sampling_rate'",
        ),
        (
            lambda: add_coloured_noise(
                DATA, seed=1, variable="u", frequencies=[0, 50], amplitudes=[1, -1], snr_db=3
            ),
            "amplitudes",
        ),
        (
            lambda: add_coloured_noise(
                DATA, seed=1, variable="u", frequencies=[1, 50], amplitudes=[1, 1], snr_db=3
            ),
            "frequencies",
        ),
        (
            lambda: add_coloured_noise(
                DATA, seed=1, variable="u", frequencies=[0, 40], amplitudes=[1, 1], snr_db=3
            ),
            "frequencies",
        ),
        (
            lambda: add_coloured_noise(
                DATA,
                seed=1,
                variable="u",
                frequencies=[0, 30, 20, 50],
                amplitudes=[1] * 4,
                snr_db=3,
            ),
            "frequencies",
        ),
        (
            lambda: add_coloured_noise(
                DATA, seed=1, variable="u", frequencies=[0, 50], amplitudes=[1, 1, 1], snr_db=3
            ),
            "amplitudes",
        ),
        (
            lambda: add_coloured_noise(
                DATA, seed=1, variable="u", frequencies=[0, 50], amplitudes=[0, 0], snr_db=3
            ),
            "amplitudes",
        ),
        (
            lambda: add_coloured_noise(
                DATA,
                seed=1,
                variable="u",
                frequencies=[0, 50],
                amplitudes=[1, 1],
                numtaps=256,
                snr_db=3,
            ),
            "numtaps",
        ),
        (
            lambda: add_coloured_noise(
                DATA,
                seed=1,
                variable="u",
                frequencies=[0, 50],
                amplitudes=[1, 1],
                rms_fraction=0.1,
                snr_db=3,
            ),
            "snr_db / rms_fraction",
        ),
        (
            lambda: add_real_noise(
                DATA,
                seed=1,
                variable="u",
                noise=noise_windows().isel(channel=0),
                snr_db=3,
                scale=1.0,
            ),
            "snr_db / rms_fraction / scale",
        ),
        (
            lambda: add_real_noise(DATA, seed=1, variable="u", noise=noise_windows(), snr_db=3),
            "noise",
        ),
        (
            lambda: add_real_noise(
                DATA, seed=1, variable="u", noise=noise_windows().rename(sample="time"), snr_db=3
            ),
            "noise",
        ),
        (
            lambda: add_real_noise(
                DATA,
                seed=1,
                variable="u",
                noise=noise_windows().isel(channel=0).assign_attrs(sampling_rate=50.0),
                snr_db=3,
            ),
            "noise",
        ),
    ],
)
def test_bad_parameters_raise_invalid_input_naming_them(call, what):
    with pytest.raises(InvalidInput) as error:
        call()
    assert error.value.what == what


@pytest.mark.parametrize(
    ("fill", "problem"), [(np.nan, "NaN"), (5.0, "zero RMS"), (0.0, "zero RMS")]
)
def test_real_noise_refuses_dead_windows_naming_their_index(fill, problem):
    windows = noise_windows(category=True)
    values = windows.values.copy()
    values[2, 1, :] = fill  # window 2 (the second noise window), channel N
    windows = windows.copy(data=values)
    data = recorded_data((1, 3, 600), 2).assign_coords(channel=[0, 1, 2])
    with pytest.raises(InvalidInput) as error:
        add_real_noise(data, seed=1, variable="u", noise=windows, snr_db=3)
    assert error.value.what == "noise window 2"
    assert problem in error.value.problem and "channel 1" in error.value.problem
