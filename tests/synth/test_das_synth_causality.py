"""Causality of the synthetic DAS record (issue 20, point 2): one earthquake, the swell and the
noise and every other event switched off; before each channel's first arrival − 1 s, computed
here from the known P moveout (R/v_P), the strain rate stays below 1e-3 of that channel's peak,
in the 5 Hz record and after the bundle's causal decimation to 1 Hz."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from seisctf import conventions as cv
from seisctf.pipeline.transforms import filters
from seisctf.synth import das_synth as ds

P_VELOCITY_M_S = 6000.0  # the documented homogeneous crust's P velocity
RATE_HZ = 5.0


def quake_only_record(quake: ds.Earthquake, cable: ds.Cable, slot_samples: int) -> np.ndarray:
    calm = ds.SeaState(significant_wave_height_m=0.0)
    components = ds.Components.draw(np.random.default_rng(0), 64)
    slot = ds.DasSlot("forecast", math.nan, calm, components, (quake,))
    store = ds.synthesize_das(
        cable, [slot], slot_samples, sampling_rate_hz=RATE_HZ, noise_rms=0.0, time_chunk=333
    )
    return store[ds.QUANTITY].values.astype(np.float64)


def first_arrival_s(quake: ds.Earthquake, distance_m: np.ndarray) -> np.ndarray:
    radius = np.sqrt((distance_m - quake.along_cable_m) ** 2 + quake.offset_m**2 + quake.depth_m**2)
    return quake.origin_time_s + radius / P_VELOCITY_M_S


def assert_quiet_before(field: np.ndarray, rate_hz: float, arrival_s: np.ndarray) -> None:
    time_s = np.arange(field.shape[0]) / rate_hz
    peak = np.abs(field).max(axis=0)
    assert np.all(peak > 0)
    before = time_s[:, None] < (arrival_s[None, :] - 1.0)
    assert before.sum(axis=0).min() > 5 * rate_hz  # every channel has a pre-arrival window
    ratio = np.where(before, np.abs(field), 0.0).max(axis=0) / peak
    assert ratio.max() < 1e-3, ratio.max()


@pytest.mark.parametrize(
    "quake",
    [
        ds.Earthquake(30.0, 805.0, 15e3, 8e3, 1e-6, 2.0),
        ds.Earthquake(55.0, -4e3, 40e3, 20e3, 3e-6, 6.5),
    ],
)
def test_no_energy_before_the_first_arrival(quake):
    cable = ds.Cable(n_channels=160, channel_spacing_m=10.0)
    field = quake_only_record(quake, cable, 1000)  # 200 s at 5 Hz
    arrival = first_arrival_s(quake, cable.distance_m())
    assert_quiet_before(field, RATE_HZ, arrival)
    # The bundle's path: the causal order-8 Butterworth anti-alias filter, 5 Hz -> 1 Hz.
    data = xr.DataArray(
        field,
        dims=(cv.TIME, cv.DISTANCE),
        coords={cv.TIME: np.arange(field.shape[0]) / RATE_HZ},
        attrs={cv.ATTR_SAMPLING_RATE: RATE_HZ},
    )
    decimated = filters.decimate(data, factor=5, zero_phase=False).values
    assert_quiet_before(decimated, 1.0, arrival)


def test_a_centred_pulse_would_fail_the_check():
    """The check is sharp: the previous generator's Ricker pulse centred on the arrival puts
    energy well before it."""
    time_s = np.arange(0, 60, 0.2)
    arrival = np.array([30.0])
    s = (time_s[:, None] - arrival) / 1.0
    ricker = (1 - s * s) * np.exp(-0.5 * s * s)
    with pytest.raises(AssertionError):
        assert_quiet_before(ricker, RATE_HZ, arrival)
