"""Tests of the global synthetic's hidden Earth against independent computations: path averages
along great circles (scipy's interpolator and rotations), station responses (scipy.signal),
the counter-based random numbers (scipy.stats) and the random maps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator
from scipy.signal import freqs
from scipy.spatial.transform import Rotation
from scipy.stats import kstest

from seisctf.synth.global_earth import (
    DAMPING,
    MAP_STEP_DEG,
    great_circle_paths,
    hashed_normal,
    instrument_response,
    orbit_means,
    random_earth,
    random_sphere_map,
    sample_map,
)

LATITUDE = np.arange(-90.0, 90.0 + MAP_STEP_DEG / 2, MAP_STEP_DEG)
LONGITUDE = np.arange(-180.0, 180.0 + MAP_STEP_DEG / 2, MAP_STEP_DEG)


def _arc_mean(field, source, sensor, start_rad, stop_rad, n=4000) -> float:
    """Mean of `field` along the great circle from `source` through `sensor` (unit vectors)
    between angles start and stop (rad from the source), by scipy rotations and scipy's
    bilinear interpolator."""
    axis = np.cross(source, sensor)
    axis /= np.linalg.norm(axis)
    angles = start_rad + (np.arange(n) + 0.5) / n * (stop_rad - start_rad)
    points = Rotation.from_rotvec(angles[:, None] * axis).apply(source)
    lat = np.degrees(np.arcsin(points[:, 2]))
    lon = np.degrees(np.arctan2(points[:, 1], points[:, 0]))
    interpolator = RegularGridInterpolator((LATITUDE, LONGITUDE), field)
    return float(interpolator(np.stack([lat, lon], axis=1)).mean())


def test_orbit_path_means_equal_an_independent_integration():
    field = random_sphere_map(np.random.default_rng(2), 0.02)
    source_lat, source_lon = 12.0, -30.0
    sensor_lat, sensor_lon = np.array([40.0, -35.0]), np.array([60.0, 100.0])
    paths = great_circle_paths(source_lat, source_lon, sensor_lat, sensor_lon)
    minor = sample_map(field, paths.minor).mean(axis=1)
    circle = sample_map(field, paths.circle).mean(axis=1)
    lengths, means = orbit_means(minor, circle, paths.distance, 3)
    np.testing.assert_allclose(lengths[0], paths.distance)
    np.testing.assert_allclose(lengths[1], 2 * np.pi - paths.distance)
    np.testing.assert_allclose(lengths[2], 2 * np.pi + paths.distance)

    def unit(lat, lon):
        lat, lon = np.radians(lat), np.radians(lon)
        return np.array([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])

    source = unit(source_lat, source_lon)
    for i in range(2):
        sensor = unit(sensor_lat[i], sensor_lon[i])
        delta = paths.distance[i]
        r1 = _arc_mean(field, source, sensor, 0.0, delta)
        r2 = _arc_mean(field, source, sensor, delta, 2 * np.pi)
        whole = _arc_mean(field, source, sensor, 0.0, 2 * np.pi)
        r3 = (2 * np.pi * whole + delta * r1) / (2 * np.pi + delta)
        # 48 path points against 4000: agreement to a few percent of the map's RMS.
        np.testing.assert_allclose(means[:, i], [r1, r2, r3], atol=1.5e-3)
    assert np.ptp(means[0]) > 1e-3  # the two paths see different Earths


def test_random_maps_are_smooth_with_the_requested_rms():
    field = random_sphere_map(np.random.default_rng(5), 0.015)
    weight = np.cos(np.radians(LATITUDE))[:, None] * np.ones_like(field)
    rms = np.sqrt((weight * field**2).sum() / weight.sum())
    assert rms == pytest.approx(0.015, rel=1e-9)
    np.testing.assert_allclose(field[:, 0], field[:, -1], atol=1e-12)  # longitude -180 = 180
    # A red spectrum: neighbouring nodes (2° apart) are strongly correlated.
    assert np.corrcoef(field[10:80, :-1].ravel(), field[10:80, 1:].ravel())[0, 1] > 0.95
    other = random_sphere_map(np.random.default_rng(6), 0.015)
    assert abs(np.corrcoef(field.ravel(), other.ravel())[0, 1]) < 0.5


def test_station_random_numbers_are_normal_and_independent_of_the_block():
    values = hashed_normal(1234, np.arange(20000), 7)
    assert kstest(values, "norm").pvalue > 1e-3
    np.testing.assert_array_equal(values[5000:5100], hashed_normal(1234, np.arange(5000, 5100), 7))
    assert abs(np.corrcoef(values, hashed_normal(1234, np.arange(20000), 8))[0, 1]) < 0.03
    earth = random_earth(9)
    lat, lon = np.zeros(300), np.linspace(-179.0, 179.0, 300)
    terms = earth.station_terms(np.arange(300), lat, lon)
    assert set(np.unique(terms["natural_period_s"])) == {120.0, 240.0, 360.0}
    assert 0.2 < np.std(np.log(terms["amplification"])) < 0.5
    assert 0.2 < np.std(terms["P"]) < 0.4 and 0.6 < np.std(terms["S"]) < 1.0


def test_seismometer_response_is_scipy_second_order_high_pass():
    omega = 2 * np.pi * np.logspace(-4, -0.5, 50)
    periods = np.array([120.0, 360.0])
    response = instrument_response(omega, periods)
    for j, period in enumerate(periods):
        omega_n = 2 * np.pi / period
        _, expected = freqs([1.0, 0.0, 0.0], [1.0, 2 * DAMPING * omega_n, omega_n**2], omega)
        np.testing.assert_allclose(response[:, j], expected, rtol=1e-12)
    np.testing.assert_allclose(instrument_response(omega, np.array([np.inf]))[:, 0], 1.0)
