"""Causality of the global synthetic: nothing before an event's first arrival, and body waves
that start at their TauP times, both against an independent obspy TauP computation."""

from __future__ import annotations

import numpy as np
import pytest
from obspy.taup import TauPyModel

from seisctf.synth.crustal.source import moment_tensor
from seisctf.synth.global_earth import distance_azimuth, random_earth
from seisctf.synth.global_wavefield import (
    GlobalPhysics,
    GlobalSource,
    fibonacci_sensors,
    realisation,
    wavefield_block,
)

ORIGIN_S, DEPTH_KM = 100.0, 35.0
# One event: no microseisms, no other events, the 1D Earth (its stations keep their
# seismometers and sites, which are causal).
ONE_EVENT = GlobalPhysics(heterogeneity=0.0, sites=True, other_events=False, ambient_rms=0.0)


def _source(latitude_deg: float = 23.0, longitude_deg: float = -41.0) -> GlobalSource:
    tensor = moment_tensor(75.0, 35.0, 120.0)
    return GlobalSource(
        latitude_deg, longitude_deg, DEPTH_KM, ORIGIN_S, 7.6, tuple(map(tuple, tensor))
    )


def _first_arrival_s(model: TauPyModel, distance_deg: float) -> float:
    """Earliest arrival TauP finds among all its P-type phases ("ttp": first arrivals are P-type;
    s after the origin)."""
    return min(a.time for a in model.get_travel_times(DEPTH_KM, distance_deg, ["ttp"]))


def test_no_sensor_moves_before_its_first_arrival():
    source = _source()
    events = realisation(source, 4, 0, 3000.0, ONE_EVENT)
    earth = random_earth(4, ONE_EVENT.heterogeneity, ONE_EVENT.sites)
    latitude, longitude = fibonacci_sensors(240)
    times = np.arange(3000.0)
    field = wavefield_block(
        times, np.arange(240), latitude, longitude, events, earth, 3000.0
    ).astype(np.float64)
    distance = np.degrees(distance_azimuth(23.0, -41.0, latitude, longitude)[0])
    model = TauPyModel("iasp91")
    checked = 0
    for sensor in range(240):
        peak = np.abs(field[:, sensor]).max()
        first_s = ORIGIN_S + _first_arrival_s(model, float(distance[sensor]))
        if peak == 0.0:
            assert first_s > 1000.0  # beyond the modelled body waves, R1 after the record
            continue
        before = np.abs(field[times < first_s - 1.0, sensor])
        assert before.max(initial=0.0) < 1e-3 * peak, (distance[sensor], first_s)
        checked += 1
    assert checked > 150  # most sensors record the event
    # The surface waves are in the test, not tapered away: beyond 20° R1 (after 25 s per degree)
    # reaches at least a fifth of the trace's peak.
    far = np.flatnonzero((distance > 20.0) & (distance < 80.0))
    for sensor in far:
        late = times > ORIGIN_S + 25.0 * distance[sensor]
        assert np.abs(field[late, sensor]).max() > 0.2 * np.abs(field[:, sensor]).max()


@pytest.mark.parametrize("distance_deg", [3.2, 13.3, 27.0, 41.7, 64.2, 88.8])
def test_p_and_s_start_at_their_taup_times(distance_deg):
    """Onsets picked at 50 Hz (first sample where the trace departs from a quadratic fitted to
    the 3.5 s before the expected time by 1e-3 of the departure's peak) are within 0.1 s of
    TauP's refined first p/P and s/S times."""
    source = _source(0.0, 0.0)
    events = realisation(source, 4, 0, 3000.0, ONE_EVENT)
    earth = random_earth(4, ONE_EVENT.heterogeneity, ONE_EVENT.sites)
    model = TauPyModel("iasp91")
    for names in (["p", "P"], ["s", "S"]):
        expected_s = ORIGIN_S + min(
            a.time for a in model.get_travel_times(DEPTH_KM, distance_deg, names)
        )
        times = np.arange(expected_s - 4.0, expected_s + 4.0, 0.02)
        trace = wavefield_block(
            times, np.array([0]), np.array([0.0]), np.array([distance_deg]), events, earth, 3000.0
        )[:, 0].astype(np.float64)
        before = times < expected_s - 0.5
        departure = np.abs(trace - np.polyval(np.polyfit(times[before], trace[before], 2), times))
        assert departure.max() > 1e-3 * np.abs(trace).max()
        onset_s = times[np.flatnonzero(departure > 1e-3 * departure.max())[0]]
        assert abs(onset_s - expected_s) <= 0.1, (names, onset_s, expected_s)
