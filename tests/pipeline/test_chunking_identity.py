"""Every registered transform for random chunkings (hypothesis): the same bytes as on one chunk
where `docs/contract.md` says so, else equal within the bound it states; the same attrs and
coordinates always, and the same bytes on one thread and on two for the same chunking."""

from __future__ import annotations

import json

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from chunkings import chunk_sizes
from hypothesis import given, settings
from hypothesis import strategies as st

from seisctf import conventions as cv
from seisctf.registry import TRANSFORMS

RATE_HZ = 100.0
# Bounds of `docs/contract.md` ("Chunking and bytes"), relative to the output's peak |value|:
# halo filters (their `tolerance` 1e-8 sets the halo) and float sums in a chunk-dependent order.
FILTER_BOUND = 1e-6
SUM_BOUND = 1e-12
NOISE_WINDOWS = xr.DataArray(
    np.random.default_rng(5).standard_normal((6, 700)), dims=("trace", "sample")
)
SEEDED = {"seed": 17, "variable": "u"}
# name -> (transform, its arguments, None for the same bytes or the bound of the difference).
# The filters' halos (50-165 samples along time, 102 channels for `spatial_decimate`) are shorter
# than the records, so that the records are cut into several chunks along the filtered axis.
CASES = {
    "taper": ("taper", {"max_percentage": 0.1}, None),
    "select_channels": ("select_channels", {"distance_min_m": 8.0, "step": 3}, None),
    "add_gaussian_noise": ("add_gaussian_noise", {**SEEDED, "rms_fraction": 0.5}, None),
    "add_coloured_noise": (
        "add_coloured_noise",
        {
            **SEEDED,
            "frequencies": [0.0, 10.0, 50.0],
            "amplitudes": [1.0, 2.0, 0.5],
            "snr_db": 6.0,
            "numtaps": 33,
        },
        None,
    ),  # fmt: skip
    "add_real_noise": ("add_real_noise", {**SEEDED, "noise": NOISE_WINDOWS, "snr_db": 3.0}, None),
    "butterworth": ("butterworth", {"freqmin": 10.0, "freqmax": 30.0}, FILTER_BOUND),
    "butterworth_causal": ("butterworth", {"freqmax": 20.0, "zero_phase": False}, FILTER_BOUND),
    "decimate": ("decimate", {"factor": 4}, FILTER_BOUND),
    "resample": ("resample", {"sampling_rate": 40.0, "zero_phase": False}, FILTER_BOUND),
    "spatial_decimate": ("spatial_decimate", {"factor": 2}, FILTER_BOUND),
    "detrend": ("detrend", {"kind": "linear"}, SUM_BOUND),
    "normalise": ("normalise", {"method": "std", "windows": [[0.5, 3.0]]}, SUM_BOUND),
    "convert_quantity": ("convert_quantity", {"to": "strain"}, SUM_BOUND),
}


@st.composite
def records(draw, across: bool) -> tuple[np.ndarray, tuple[tuple[int, ...], tuple[int, ...]]]:
    """(values (time, distance), a random chunking): noise, sinusoids, offsets and trends,
    sometimes a NaN gap; `across`: 250-350 channels and fewer samples (a filter along distance)."""
    if across:
        n_time, n_channels = draw(st.integers(60, 120)), draw(st.integers(250, 350))
    else:
        n_time, n_channels = draw(st.integers(400, 1200)), draw(st.integers(30, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    seconds = np.arange(n_time)[:, None] / RATE_HZ
    values = rng.standard_normal((n_time, n_channels))
    values += rng.uniform(0, 3) * np.sin(2 * np.pi * rng.uniform(0, 50) * seconds)
    values += rng.uniform(-5, 5, n_channels) * (1 + seconds / seconds[-1])
    if draw(st.booleans()):
        start = draw(st.integers(0, n_time - 1))
        values[start : start + draw(st.integers(1, 20)), draw(st.integers(0, n_channels - 1))] = (
            np.nan
        )
    time_chunks = chunk_sizes(draw, n_time, min_step_fraction=3 if across else 20)
    channel_chunks = chunk_sizes(draw, n_channels, max_cuts=4 if across else 2,
                                 min_step_fraction=20 if across else 3)  # fmt: skip
    return values, (time_chunks, channel_chunks)


def das_array(values: np.ndarray, chunks) -> xr.DataArray:
    return xr.DataArray(
        da.from_array(values, chunks=chunks),
        dims=cv.DAS_DIMS,
        coords={cv.DISTANCE: 4.0 * np.arange(values.shape[1]), cv.TIME: np.arange(len(values))},
        attrs={
            cv.ATTR_SAMPLING_RATE: RATE_HZ,
            cv.ATTR_QUANTITY: "strain_rate",
            cv.ATTR_CHANNEL_SPACING: 4.0,
        },
        name="u",
    )


def computed(result: xr.DataArray) -> np.ndarray:
    """Values on the synchronous scheduler, asserted byte-identical on 2 threads."""
    assert isinstance(result.data, da.Array)
    with dask.config.set(scheduler="synchronous"):
        synchronous = result.values
    with dask.config.set(scheduler="threads", num_workers=2):
        threaded = result.values
    assert synchronous.tobytes() == threaded.tobytes()
    return synchronous


def assert_same_frame(actual: xr.DataArray, expected: xr.DataArray) -> None:
    """Same name, dims, dtype, attrs and coordinates (their bytes)."""
    assert (actual.name, actual.dims, actual.dtype) == (
        expected.name,
        expected.dims,
        expected.dtype,
    )
    assert json.dumps(actual.attrs, sort_keys=True, default=str) == json.dumps(
        expected.attrs, sort_keys=True, default=str
    )
    assert set(actual.coords) == set(expected.coords)
    for name in expected.coords:
        assert actual[name].values.tobytes() == expected[name].values.tobytes(), name


@pytest.mark.parametrize("case", list(CASES))
@settings(max_examples=10, deadline=None)
@given(draw=st.data())
def test_transform_output_for_a_random_chunking(case, draw):
    name, arguments, bound = CASES[case]
    values, chunks = draw.draw(records(across=name == "spatial_decimate"))
    function = TRANSFORMS[name].function
    whole = function(das_array(values, tuple(-1 for _ in chunks)), **arguments)
    chunked = function(das_array(values, chunks), **arguments)
    assert_same_frame(chunked, whole)
    expected, actual = computed(whole), computed(chunked)
    if bound is None:
        assert actual.tobytes() == expected.tobytes()
        return
    assert np.array_equal(np.isnan(actual), np.isnan(expected))
    finite = ~np.isnan(expected)
    if finite.any():
        error = np.max(np.abs(actual[finite] - expected[finite]))
        assert error <= bound * np.max(np.abs(expected[finite])), error


def test_every_registered_transform_is_covered():
    assert {name for name, _, _ in CASES.values()} == set(TRANSFORMS)
