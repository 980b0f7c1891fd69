"""Tests of the offline global synthetic: lattice, store, reproducibility, hidden part, and the
physics against independent computations (obspy TauP and radiation patterns, the documented
dispersion)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from obspy.imaging.source import farfield
from obspy.taup import TauPyModel
from scipy.signal import butter, hilbert, sosfiltfilt, welch

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
from seisctf.synth.crustal.source import moment_tensor
from seisctf.synth.global_earth import random_earth
from seisctf.synth.global_wavefield import (
    GlobalPhysics,
    GlobalSource,
    default_sources,
    fibonacci_sensors,
    realisation,
    synthesize_global,
    wavefield_block,
)

EARTH_RADIUS_KM = 6371.0
KM_PER_DEGREE = EARTH_RADIUS_KM * math.pi / 180.0
SMALL = {"n_sensors": 41, "duration_s": 300.0}
ONE_EVENT_1D = GlobalPhysics(heterogeneity=0.0, sites=False, other_events=False, ambient_rms=0.0)


def _one_event(source: GlobalSource, physics: GlobalPhysics = ONE_EVENT_1D, seed: int = 1):
    """(realisation, earth) of `source` alone."""
    return realisation(source, seed, 0, 3000.0, physics), random_earth(
        seed, physics.heterogeneity, physics.sites
    )


def _meridian(distance_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sensors at the given distances from (0°, 0°) along the equator, eastwards."""
    return np.zeros_like(distance_deg), np.asarray(distance_deg, dtype=np.float64)


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
    # Only the main events' epicentres, depths, origin times and parameters are recorded:
    # no magnitude, moment tensor, catalogue, map or station value.
    assert set(ds.coords) == {
        "source_latitude",
        "source_longitude",
        "source_depth_km",
        "origin_time_s",
        "parameter_value",
        ROLE,
        TIME,
        "latitude",
        "longitude",
    }
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
    values = reference.u.values
    assert np.abs(values).max() > 0 and np.count_nonzero(values) > values.size // 4
    np.testing.assert_array_equal(values.view(np.uint32), chunked.u.values.view(np.uint32))


def test_same_seed_same_bytes_other_seed_other_field():
    first = synthesize_global(**SMALL, seed=5).u.values
    again = synthesize_global(**SMALL, seed=5).u.values
    other = synthesize_global(**SMALL, seed=6).u.values
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert not np.allclose(first, other)
    assert default_sources(5) == default_sources(5) != default_sources(6)


def test_the_seed_draws_a_hidden_part_beyond_the_main_events():
    """Same main events, other seed: another Earth, stations, catalogues and microseisms, so
    the traces differ by much more than the microseisms alone."""
    sources = default_sources(5)[:2]
    first = synthesize_global(n_sensors=64, duration_s=1200.0, seed=5, sources=sources)
    other = synthesize_global(n_sensors=64, duration_s=1200.0, seed=6, sources=sources)
    quiet = GlobalPhysics(ambient_rms=0.0)
    first_quiet = synthesize_global(
        n_sensors=64, duration_s=1200.0, seed=5, sources=sources, physics=quiet
    ).u.values
    other_quiet = synthesize_global(
        n_sensors=64, duration_s=1200.0, seed=6, sources=sources, physics=quiet
    ).u.values
    difference = np.linalg.norm(first_quiet - other_quiet) / np.linalg.norm(first_quiet)
    assert difference > 0.3
    assert not np.allclose(first.u.values, other.u.values)
    # The microseisms are part of the truth: present, and different between realisations.
    ambient = first.u.values - first_quiet
    assert np.sqrt(np.mean(ambient**2)) > 1e-3 * np.abs(first_quiet).max()
    assert abs(np.corrcoef(ambient[0].ravel(), ambient[1].ravel())[0, 1]) < 0.05
    # In the secondary microseism band (scipy's Welch estimate): nearly all power in 0.08–0.25 Hz.
    frequency, power = welch(ambient[0], fs=1.0, nperseg=256, axis=0)
    in_band = (frequency > 0.08) & (frequency < 0.25)
    assert power[in_band].sum() > 0.95 * power.sum()


def test_parametric_realisations_share_the_main_event_but_its_depth():
    sources = default_sources(11)
    parametric = sources[5:]
    for name in ("latitude_deg", "longitude_deg", "origin_time_s", "magnitude", "tensor"):
        assert len({getattr(s, name) for s in parametric}) == 1, name
    assert [s.depth_km for s in parametric] == [10, 30, 50, 40, 70]
    assert [s.parameter_value for s in parametric] == [10, 30, 50, 40, 70]
    assert all(math.isnan(s.parameter_value) for s in sources[:5])
    assert len({s.latitude_deg for s in sources[:6]}) == 6  # five events + the shared one
    ds = synthesize_global(**SMALL, seed=11)
    np.testing.assert_array_equal(ds.source_depth_km.values[5:], [10, 30, 50, 40, 70])
    fields = ds.u.values[5:]
    for i in range(5):
        for j in range(i):
            assert not np.allclose(fields[i], fields[j])
    depths = default_sources(11, (15.0, 25.0, 35.0), 20.0, 60.0)[5:]
    assert [s.depth_km for s in depths] == [15.0, 25.0, 35.0, 20.0, 60.0]


def test_surface_waves_move_out_at_the_documented_group_velocity():
    distance = np.arange(20.0, 81.0, 10.0)
    times = np.arange(3000.0)
    source = GlobalSource(0.0, 0.0, 30.0, 0.0)  # vertical dip-slip: isotropic Rayleigh waves
    events, earth = _one_event(source)
    field = wavefield_block(
        times, np.arange(distance.size), *_meridian(distance), events, earth, 3000.0
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


def test_p_polarity_and_amplitude_follow_obspy_radiation_pattern():
    """P pulse peaks at equal distance and four azimuths are proportional to obspy's far-field
    P radiation (Aki & Richards eq. 4.29) of the same moment tensor at TauP's take-off angle."""
    tensor = moment_tensor(30.0, 60.0, 80.0)
    source = GlobalSource(0.0, 0.0, 30.0, 0.0, tensor=tuple(map(tuple, tensor)))
    events, earth = _one_event(source)
    azimuths = np.radians([10.0, 100.0, 190.0, 280.0])
    distance = math.radians(50.0)
    latitude = np.degrees(np.arcsin(np.sin(distance) * np.cos(azimuths)))
    longitude = np.degrees(np.arctan2(np.sin(azimuths) * np.sin(distance), np.cos(distance)))
    arrival = TauPyModel("iasp91").get_travel_times(30.0, 50.0, ["p", "P"])[0]
    peak_s = arrival.time + (2.0 - math.sqrt(2.0)) * source.event.rise_time_s
    field = wavefield_block(
        np.array([peak_s]), np.arange(4), latitude, longitude, events, earth, 3000.0
    )[0]
    takeoff = math.radians(arrival.takeoff_angle)
    rays = np.array(  # x north, y east, z down: the tensor's own system
        [
            np.sin(takeoff) * np.cos(azimuths),
            np.sin(takeoff) * np.sin(azimuths),
            np.full(4, np.cos(takeoff)),
        ]
    )
    mt = [tensor[0, 0], tensor[1, 1], tensor[2, 2], tensor[0, 1], tensor[0, 2], tensor[1, 2]]
    expected = (farfield(mt, rays, "P") * rays).sum(axis=0)  # radial displacement
    assert np.abs(expected).min() > 0.05
    np.testing.assert_allclose(field / field[0], expected / expected[0], rtol=0.02)


def test_bad_parameters_are_refused_with_a_named_input():
    with pytest.raises(InvalidInput, match="source 0"):
        synthesize_global(**SMALL, sources=[GlobalSource(0.0, 0.0, 800.0, 0.0)])
    with pytest.raises(InvalidInput, match="role"):
        synthesize_global(**SMALL, sources=[GlobalSource(0.0, 0.0, 10.0, 0.0, role="x")])
    with pytest.raises(InvalidInput, match="tensor"):
        synthesize_global(**SMALL, sources=[GlobalSource(0.0, 0.0, 10.0, 0.0, tensor=((1,),))])
    with pytest.raises(InvalidInput, match="sampling_rate_hz"):
        synthesize_global(n_sensors=4, sampling_rate_hz=0.0)
    with pytest.raises(InvalidInput, match="microseisms"):
        synthesize_global(n_sensors=4, sampling_rate_hz=0.25)
    with pytest.raises(InvalidInput, match="heterogeneity"):
        synthesize_global(**SMALL, physics=GlobalPhysics(heterogeneity=-1.0))
