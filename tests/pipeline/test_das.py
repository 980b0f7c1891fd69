"""DAS transforms (pipeline/transforms/das_channels.py) and the time filters on DAS-shaped data:
equal to in-memory numpy/scipy for random chunkings (to 1e-6 of the signal, or bitwise where
documented), with their attrs and errors."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from chunkings import chunk_sizes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, signal

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.transforms import das_channels as das
from seisctf.pipeline.transforms import filters

RTOL = 1e-6
EXAMPLES = settings(max_examples=10, deadline=None)


@st.composite
def das_records(
    draw,
    min_time: int = 50,
    max_time: int = 1500,
    min_channels: int = 2,
    max_channels: int = 120,
    quantity: str = "strain_rate",
):
    """(values, DataArray(time, distance)) at 5 Hz: noise + travelling waves + offsets, chunked
    at random along both dims, dims in either order."""
    n_time = draw(st.integers(min_time, max_time))
    n_channels = draw(st.integers(min_channels, max_channels))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spacing = draw(st.sampled_from([1.0, 2.04, 10.0]))
    t = np.arange(n_time)[:, None] / 5.0
    x = np.arange(n_channels)[None, :] * spacing
    values = rng.standard_normal((n_time, n_channels))
    for _ in range(3):
        k, f = rng.uniform(0, np.pi / spacing), rng.uniform(0, 2.5)
        values += rng.uniform(0, 3) * np.sin(k * x + 2 * np.pi * f * t + rng.uniform(0, 6.3))
    values += rng.uniform(-2, 2, (1, n_channels))
    chunks = (
        chunk_sizes(draw, n_time, min_step_fraction=30),
        chunk_sizes(draw, n_channels, min_step_fraction=30),
    )
    array = xr.DataArray(
        da.from_array(values, chunks=chunks),
        dims=cv.DAS_DIMS,
        coords={cv.DISTANCE: x[0] + 100.0},
        attrs={
            cv.ATTR_SAMPLING_RATE: 5.0,
            cv.ATTR_QUANTITY: quantity,
            cv.ATTR_CHANNEL_SPACING: spacing,
        },
        name=quantity,
    )
    if draw(st.booleans()):
        array = array.transpose(cv.DISTANCE, cv.TIME)
    return values, array


def computed(result: xr.DataArray) -> np.ndarray:
    """(time, distance) values on the synchronous scheduler, asserted identical on 2 threads."""
    assert isinstance(result.data, da.Array)
    result = result.transpose(cv.TIME, cv.DISTANCE)
    with dask.config.set(scheduler="synchronous"):
        synchronous = result.values
    with dask.config.set(scheduler="threads", num_workers=2):
        threaded = result.values
    np.testing.assert_array_equal(synchronous, threaded)
    return synchronous


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    scale = np.nanmax(np.abs(expected))
    assert np.nanmax(np.abs(actual - expected)) <= RTOL * scale


@EXAMPLES
@given(das_records(), st.data())
def test_select_channels_equals_numpy_slicing(record, data):
    values, array = record
    distance = array[cv.DISTANCE].values
    low = data.draw(st.sampled_from([None, float(distance[len(distance) // 3])]))
    high = data.draw(st.sampled_from([None, float(distance[-1]) - 0.5]))
    step = data.draw(st.integers(1, 4))
    result = das.select_channels(array, distance_min_m=low, distance_max_m=high, step=step)
    inside = np.ones(distance.size, dtype=bool)
    if low is not None:
        inside &= distance >= low
    if high is not None:
        inside &= distance <= high
    keep = np.flatnonzero(inside)[::step]
    np.testing.assert_array_equal(computed(result), values[:, keep])
    np.testing.assert_array_equal(result[cv.DISTANCE].values, distance[keep])
    assert result.dtype == array.dtype
    spacing = array.attrs[cv.ATTR_CHANNEL_SPACING] * (step if keep.size > 1 else 1)
    assert result.attrs[cv.ATTR_CHANNEL_SPACING] == pytest.approx(spacing, rel=1e-12)
    entry = result.attrs[cv.ATTR_TRANSFORMS][-1]
    assert entry == {
        "transform": "select_channels",
        "distance_min_m": low,
        "distance_max_m": high,
        "step": step,
    }


@EXAMPLES
@given(das_records(min_channels=60, max_channels=400), st.integers(2, 5))
def test_spatial_decimate_equals_sosfiltfilt_along_the_fibre(record, factor):
    values, array = record
    spacing = array.attrs[cv.ATTR_CHANNEL_SPACING]
    result = das.spatial_decimate(array, factor=factor)
    sos = signal.butter(8, 0.8 / (2 * factor * spacing), fs=1 / spacing, output="sos")
    expected = signal.sosfiltfilt(sos, values, axis=1)[:, ::factor]
    assert_close(computed(result), expected)
    np.testing.assert_array_equal(result[cv.DISTANCE].values, array[cv.DISTANCE].values[::factor])
    assert result.dims == array.dims
    assert result.attrs[cv.ATTR_SAMPLING_RATE] == 5.0
    assert result.attrs[cv.ATTR_CHANNEL_SPACING] == pytest.approx(spacing * factor)
    assert result.attrs[cv.ATTR_TRANSFORMS][-1]["transform"] == "spatial_decimate"


@EXAMPLES
@given(das_records(quantity="strain"))
def test_strain_to_strain_rate_is_numpy_gradient_bitwise(record):
    values, array = record
    result = das.convert_quantity(array, to="strain_rate")
    np.testing.assert_array_equal(computed(result), np.gradient(values, 0.2, axis=0))
    assert result.name == "strain_rate" and result.attrs[cv.ATTR_QUANTITY] == "strain_rate"
    assert result.attrs[cv.ATTR_UNITS] == "1/s"


@EXAMPLES
@given(das_records())
def test_strain_rate_to_strain_is_the_cumulative_trapezoid(record):
    values, array = record
    result = das.convert_quantity(array, to="strain")
    expected = integrate.cumulative_trapezoid(values, dx=0.2, axis=0, initial=0)
    assert_close(computed(result), expected)
    assert result.name == "strain" and result.attrs[cv.ATTR_UNITS] == "1"
    entry = result.attrs[cv.ATTR_TRANSFORMS][-1]
    assert entry["transform"] == "convert_quantity" and entry["from"] == "strain_rate"


@EXAMPLES
@given(das_records(min_time=300, max_time=3000))
def test_lowpass_and_decimation_to_1_hz_equal_scipy_on_das_records(record):
    """5 Hz → 1 Hz with `filters.decimate` (order 8 anti-alias at 0.4 Hz, below the new 0.5 Hz
    Nyquist), after a zero-phase band-pass, as a DAS recipe would chain them."""
    values, array = record
    bandpassed = filters.butterworth(array, freqmin=0.03, freqmax=0.3, order=4)
    result = filters.decimate(bandpassed, factor=5)
    band = signal.butter(4, [0.03, 0.3], btype="bandpass", fs=5.0, output="sos")
    antialias = signal.butter(8, 0.4, fs=5.0, output="sos")
    expected = signal.sosfiltfilt(antialias, signal.sosfiltfilt(band, values, axis=0), axis=0)
    assert_close(computed(result), expected[::5])
    assert result.attrs[cv.ATTR_SAMPLING_RATE] == 1.0


def test_gaps_propagate_as_documented():
    values = np.arange(40.0).reshape(20, 2) ** 1.5
    values[7, 0] = np.nan
    array = xr.DataArray(
        da.from_array(values, chunks=(6, 1)),
        dims=cv.DAS_DIMS,
        coords={cv.DISTANCE: [0.0, 5.0]},
        attrs={cv.ATTR_SAMPLING_RATE: 2.0},
        name="strain",
    )
    rate = das.convert_quantity(array, to="strain_rate").values
    np.testing.assert_array_equal(np.isnan(rate[:, 0]), np.isin(np.arange(20), [6, 7, 8]))
    strain = das.convert_quantity(array.rename("strain_rate"), to="strain").values
    assert np.all(np.isnan(strain[7:, 0])) and np.all(np.isfinite(strain[:7, 0]))
    assert np.all(np.isfinite(strain[:, 1]))


def test_bad_input_is_refused_naming_the_problem():
    array = xr.DataArray(
        np.zeros((50, 40)),
        dims=cv.DAS_DIMS,
        coords={cv.DISTANCE: np.arange(40.0) ** 1.1},
        attrs={cv.ATTR_SAMPLING_RATE: 5.0},
        name="strain_rate",
    )
    with pytest.raises(InvalidInput, match="regular channel spacing"):
        das.spatial_decimate(array, factor=2)
    with pytest.raises(InvalidInput, match="no channel there"):
        das.select_channels(array, distance_min_m=1e6)
    with pytest.raises(InvalidInput, match="step"):
        das.select_channels(array, step=0)
    with pytest.raises(InvalidInput, match="expected quantity"):
        das.convert_quantity(array.rename("phase"), to="strain")
    with pytest.raises(InvalidInput, match="to="):
        das.convert_quantity(array, to="velocity")
    regular = array.assign_coords({cv.DISTANCE: np.arange(40.0)})
    with pytest.raises(InvalidInput, match="along 'distance'"):
        das.spatial_decimate(regular.isel(distance=slice(0, 10)), factor=2)
    same = das.convert_quantity(regular, to="strain_rate")
    np.testing.assert_array_equal(same.values, regular.values)
