"""Tests of the offline global synthetic: lattice, reproducibility, and the physics against
independent computations (scipy Legendre polynomials, obspy TauP, the documented dispersion)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from obspy.taup import TauPyModel
from scipy.signal import butter, hilbert, sosfiltfilt
from scipy.special import eval_legendre

from seisctf.conventions import (
    ATTR_COMPLETE,
    ATTR_PARAMETER_NAME,
    BUNDLE_ROLES,
    REALISATION,
    ROLE,
    SENSOR,
    TIME,
    WAVEFIELD_VAR,
    time_space_chunks,
    validate_wavefield,
)
from seisctf.errors import InvalidInput
from seisctf.recipes.global_wavefield import (
    AMPLITUDE,
    GlobalSource,
    TravelTimeTable,
    default_sources,
    fibonacci_sensors,
    synthesize_global,
    travel_time_table,
    wavefield_block,
)

EARTH_RADIUS_KM = 6371.0
KM_PER_DEGREE = EARTH_RADIUS_KM * math.pi / 180.0
SMALL = {"n_sensors": 41, "duration_s": 300.0, "max_degree": 120}


def _pole_source(depth_km: float = 30.0, origin_time_s: float = 0.0) -> GlobalSource:
    return GlobalSource(90.0, 0.0, depth_km, origin_time_s)


def _meridian(distance_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sensors at the given distances from the north pole, on the Greenwich meridian."""
    return 90.0 - distance_deg, np.zeros_like(distance_deg)


def test_fibonacci_lattice_runs_north_to_south_and_covers_the_sphere_evenly():
    n = 2000
    latitude, longitude = fibonacci_sensors(n)
    assert latitude.shape == longitude.shape == (n,)
    assert np.all(np.diff(latitude) < 0)
    assert -90 < latitude.min() and latitude.max() < 90
    assert np.all((longitude > -180) & (longitude <= 180))
    assert longitude[0] == 0.0 and longitude[1] == pytest.approx(137.5077640500378)
    z = np.sin(np.radians(latitude))
    # Equal-area bands (equal ranges of z) hold equal counts; so do the eight octants.
    assert np.all(np.histogram(z, bins=10, range=(-1, 1))[0] == n // 10)
    octant = (latitude > 0) * 4 + np.floor((longitude + 180) / 90).clip(0, 3)
    assert np.abs(np.bincount(octant.astype(int), minlength=8) - n / 8).max() <= 0.02 * n
    # Nearest-neighbour spacing is nearly uniform.
    xyz = np.stack(
        [
            np.cos(np.radians(latitude)) * np.cos(np.radians(longitude)),
            np.cos(np.radians(latitude)) * np.sin(np.radians(longitude)),
            z,
        ],
        axis=1,
    )
    gram = np.clip(xyz @ xyz.T, -1, 1)
    np.fill_diagonal(gram, -1)
    nearest = np.degrees(np.arccos(gram.max(axis=1)))
    assert nearest.max() / nearest.min() < 1.6
    with pytest.raises(InvalidInput, match="n_sensors"):
        fibonacci_sensors(0)


def test_store_follows_the_wavefield_contract():
    ds = synthesize_global(**SMALL)
    u = ds[WAVEFIELD_VAR]
    assert u.dims == (REALISATION, TIME, SENSOR) and u.dtype == np.float32
    assert u.shape == (10, 300, 41)
    assert u.data.chunksize == (1, *time_space_chunks(300, 41))
    assert tuple(ds[ROLE].values) == BUNDLE_ROLES
    assert ds.attrs[ATTR_PARAMETER_NAME] == "source_depth_km"
    assert ds.attrs["dataset"] == "global" and ds.attrs["start_time"].endswith("Z")
    assert ATTR_COMPLETE not in ds.attrs and not any("seed" in key for key in ds.attrs)
    np.testing.assert_array_equal(ds.time.values, np.arange(300.0))
    validate_wavefield(ds.assign_attrs({ATTR_COMPLETE: True}))
    assert np.all(np.isfinite(u.values))


@pytest.mark.parametrize("time_chunk, sensor_chunk", [(300, 41), (1, 41), (7, 13), (128, 1)])
def test_values_are_bitwise_identical_for_any_chunking(time_chunk, sensor_chunk):
    sources = default_sources(3)[::4]
    reference = synthesize_global(**SMALL, sources=sources, time_chunk=64, sensor_chunk=20)
    chunked = synthesize_global(
        **SMALL, sources=sources, time_chunk=time_chunk, sensor_chunk=sensor_chunk
    )
    assert chunked.u.data.chunks[1][0] == min(time_chunk, 300)
    np.testing.assert_array_equal(
        reference.u.values.view(np.uint32), chunked.u.values.view(np.uint32)
    )


def test_same_seed_same_bytes_other_seed_other_field():
    first = synthesize_global(**SMALL, seed=5).u.values
    again = synthesize_global(**SMALL, seed=5).u.values
    other = synthesize_global(**SMALL, seed=6).u.values
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert not np.allclose(first, other)
    assert default_sources(5) == default_sources(5) != default_sources(6)


def test_parametric_realisations_differ_only_in_source_depth():
    ds = synthesize_global(**SMALL, seed=11)
    parametric = ds.isel({REALISATION: slice(5, 10)})
    for name in ("source_latitude", "source_longitude", "origin_time_s", "velocity_scale", "q"):
        assert np.unique(parametric[name].values).size == 1, name
    np.testing.assert_array_equal(parametric.source_depth_km.values, [10, 30, 50, 40, 70])
    np.testing.assert_array_equal(parametric.parameter_value.values, [10, 30, 50, 40, 70])
    assert np.all(np.isnan(ds.parameter_value.values[:5]))
    assert np.unique(ds.source_latitude.values[:6]).size == 6  # five events + the shared one
    fields = parametric.u.values
    for i in range(5):
        for j in range(i):
            assert not np.allclose(fields[i], fields[j])
    depths = default_sources(11, (15.0, 25.0, 35.0), 20.0, 60.0)[5:]
    assert [s.depth_km for s in depths] == [15.0, 25.0, 35.0, 20.0, 60.0]


def test_velocity_is_zero_before_origin_time_and_not_after():
    source = _pole_source(origin_time_s=150.0)
    latitude, longitude = fibonacci_sensors(60)
    times = np.arange(400.0)
    field = wavefield_block(times, latitude, longitude, source, travel_time_table(30.0), 150)
    assert np.all(field[times < 150.0] == 0.0)
    assert np.abs(field[times > 160.0]).max() > 1e-3


def test_mode_sum_matches_an_independent_float64_sum():
    """The integer-exact matmul equals the documented formula, computed with scipy's P_l."""
    source = GlobalSource(20.0, 40.0, 15.0, 10.0, velocity_scale=1.1, q=150.0, half_duration_s=30.0)
    distance = np.array([25.0, 60.0, 95.0, 140.0])  # along the source's meridian, northwards
    latitude = 20.0 + distance
    longitude = np.where(latitude > 90, 40.0 - 180.0, 40.0)
    latitude = np.where(latitude > 90, 180.0 - latitude, latitude)
    times = np.arange(0.0, 3000.0, 3.0)
    degree = np.arange(1, 201)
    wavenumber = (degree + 0.5) / EARTH_RADIUS_KM
    omega = wavenumber * 4.0
    for _ in range(50):
        omega = wavenumber * 1.1 * (3.5 + 1.0 - np.exp(-2 * np.pi / omega / 150.0))
    weights = (
        (2 * degree + 1)
        / (4 * np.pi)
        * wavenumber**2
        * EARTH_RADIUS_KM
        / omega
        * np.exp(-((omega * 30.0) ** 2) / 4)
        * np.exp(-wavenumber * 15.0)
    )
    tau = np.maximum(times - 10.0, 0.0)[:, None] * omega
    legendre = eval_legendre(degree[:, None], np.cos(np.radians(distance))[None, :])
    expected = AMPLITUDE * (np.sin(tau) * np.exp(-tau / 300.0)) @ (weights[:, None] * legendre)
    no_arrivals = np.full(181, np.nan)
    no_body_waves = TravelTimeTable(15.0, np.arange(181.0), no_arrivals, no_arrivals)
    field = wavefield_block(times, latitude, longitude, source, no_body_waves, 200)
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(field, expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def test_surface_waves_move_out_at_the_documented_group_velocity():
    distance = np.arange(20.0, 81.0, 10.0)
    times = np.arange(3000.0)
    field = wavefield_block(
        times, *_meridian(distance), _pole_source(), travel_time_table(30.0), 400
    ).astype(np.float64)
    for period_s in (50.0, 100.0):
        band = butter(4, [1 / (1.15 * period_s), 1.15 / period_s], "band", fs=1.0, output="sos")
        envelope = np.abs(hilbert(sosfiltfilt(band, field, axis=0), axis=0))
        slope_s_per_degree = np.polyfit(distance, times[envelope.argmax(axis=0)], 1)[0]
        # Group velocity from the documented c(T) by a central difference of k(ω) = ω / c.
        omega, step = 2 * np.pi / period_s, 1e-5
        wavenumber = [
            w / (4.5 - np.exp(-2 * np.pi / w / 150.0)) for w in (omega - step, omega + step)
        ]
        group_velocity = 2 * step / (wavenumber[1] - wavenumber[0])
        assert 3.4 < group_velocity < 3.8
        assert slope_s_per_degree == pytest.approx(KM_PER_DEGREE / group_velocity, rel=0.02)


@pytest.mark.parametrize("phase, names, width_s", [("P", ("p", "P"), 4.0), ("S", ("s", "S"), 8.0)])
def test_body_wave_arrives_at_the_taup_time(phase, names, width_s):
    source = GlobalSource(-12.0, 75.0, 25.0, 40.0)
    latitude, longitude = np.array([-12.0 + 47.3, -12.0 - 71.6]), np.array([75.0, 75.0])
    times = np.arange(2200.0)
    field = wavefield_block(times, latitude, longitude, source, travel_time_table(25.0), 300)
    model = TauPyModel("iasp91")
    for sensor, distance in enumerate((47.3, 71.6)):
        arrivals = model.get_travel_times(25.0, distance, list(names))
        expected_s = 40.0 + min(a.time for a in arrivals)
        window = (times > expected_s - 3 * width_s) & (times < expected_s + 3 * width_s)
        trace, t = field[window, sensor].astype(np.float64), times[window]
        first, last = np.argmax(trace), np.argmin(trace)  # the pulse's + then − lobe
        assert first < last and trace[first] > 1e-2
        crossing = first + np.flatnonzero(trace[first : last + 1] <= 0)[0]
        zero_s = t[crossing - 1] + trace[crossing - 1] / (trace[crossing - 1] - trace[crossing])
        assert abs(zero_s - expected_s) <= 1.0, (phase, distance, zero_s, expected_s)


def test_bad_parameters_are_refused_with_a_named_input():
    with pytest.raises(InvalidInput, match="source 0"):
        synthesize_global(**SMALL, sources=[GlobalSource(0.0, 0.0, 800.0, 0.0)])
    with pytest.raises(InvalidInput, match="role"):
        synthesize_global(**SMALL, sources=[GlobalSource(0.0, 0.0, 10.0, 0.0, role="x")])
    with pytest.raises(InvalidInput, match="sampling_rate_hz"):
        synthesize_global(n_sensors=4, sampling_rate_hz=0.0)
