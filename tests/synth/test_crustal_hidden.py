"""The hidden part of the crustal generator: the secret catalogue (Gutenberg–Richter magnitudes,
events at times all over the record, groups sharing a catalogue), the ambient Rayleigh-wave field
(amplitude ratio, retrograde motion, phase velocity) and the superposition of a realisation's
events in one run (the wave equation is linear)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.signal import hilbert

from seisctf.synth.crustal import events as ev
from seisctf.synth.crustal import medium as md
from seisctf.synth.crustal import source as src
from seisctf.synth.crustal.ambient import (
    RAYLEIGH_SPEED_RATIO,
    AmbientField,
    ambient_record,
)
from seisctf.synth.crustal.recording import SensorGrid
from seisctf.synth.crustal.simulation import CrustalConfig, Realisation, simulate
from seisctf.synth.crustal.sweep import default_sweep


def test_gutenberg_richter_magnitudes_follow_the_truncated_exponential_law():
    rng = np.random.default_rng(1)
    low, high = 2.8, 3.9
    magnitudes = np.array([ev.gutenberg_richter(rng, low, high) for _ in range(4000)])
    beta = math.log(10.0)  # b = 1

    def cdf(m):
        return (1 - np.exp(-beta * (m - low))) / (1 - math.exp(-beta * (high - low)))

    assert magnitudes.min() >= low and magnitudes.max() <= high
    assert stats.kstest(magnitudes, cdf).pvalue > 0.01
    assert ev.moment_nm(3.9) == pytest.approx(10 ** (1.5 * 3.9 + 9.1))


def test_catalogues_are_secret_rich_and_shared_only_within_a_group():
    config = CrustalConfig()
    realisations, medium_seed, site_seed = default_sweep(11, config)
    again = default_sweep(11, config)
    assert realisations == again[0] and (medium_seed, site_seed) == again[1:]
    by_role = {}
    for r in realisations:
        by_role.setdefault(r.role, []).append(r)
    core = [by_role[role][0] for role in ("forecast", "noise_medium", "noise_high", "few_clean")]
    assert len({r.source for r in core}) == 4
    parametric = by_role["param_train"] + by_role["param_interp"] + by_role["param_extrap"]
    assert len({(r.source, r.others) for r in parametric}) == 1
    assert len({r.medium.vp_m_s for r in parametric}) == 5
    assert len({r.ambient.seed for r in realisations}) == len(realisations)
    onsets = [e.origin_time_s for r in realisations for e in r.others]
    counts = [len(r.others) for r in realisations]
    assert np.mean(counts) > 3 and min(onsets) >= 0.0 and max(onsets) < config.duration_s
    assert any(t >= 5.0 for t in onsets)  # some fall inside the withheld forecast windows
    for r in realisations:
        assert r.source.moment_nm > max((e.moment_nm for e in r.others), default=0.0)
        assert all(0.0 <= e.dip_deg <= 90.0 for e in r.sources)


def test_ambient_field_is_a_retrograde_rayleigh_wave_at_the_rayleigh_speed():
    vs = 2900.0
    field = AmbientField(seed=4, rms_m_s=1e-5, vs_m_s=vs, n_waves=1)
    rate = 200.0
    time = np.arange(4000) / rate
    x = np.arange(0.0, 3001.0, 100.0)
    y = np.zeros_like(x)
    up, north, east = ambient_record(field, x, y, time)
    horizontal = np.hypot(north, east)
    assert horizontal.max() / np.abs(up).max() == pytest.approx(0.68, rel=1e-6)
    assert np.sqrt(np.mean(up**2)) == pytest.approx(1e-5, rel=0.02)
    # Phase velocity along x: the lag of the cross-correlation between two sensors 3 km apart,
    # divided into the projection of their separation on the propagation direction.
    radial_direction = np.array([north[:, 0], east[:, 0]])
    propagation = radial_direction[:, np.argmax(np.hypot(*radial_direction))]
    propagation /= np.linalg.norm(propagation)
    # Phase lag between the analytic signals of two sensors 3 km apart along x is k times the
    # projection of their separation on the propagation direction.
    analytic = hilbert(up[:, [0, -1]], axis=0)[500:-500]
    lag = np.angle(np.mean(analytic[:, 1] * np.conj(analytic[:, 0])))
    frequency = np.median(np.diff(np.unwrap(np.angle(analytic[:, 0])))) * rate / (2 * np.pi)
    wavenumber = 2 * np.pi * frequency / (RAYLEIGH_SPEED_RATIO * vs)
    expected = np.angle(np.exp(-1j * wavenumber * x[-1] * propagation[0]))
    assert abs(np.angle(np.exp(1j * (lag - expected)))) < 0.02
    # Retrograde: where the vertical peaks, the horizontal velocity points against propagation.
    radial = north[:, 0] * propagation[0] + east[:, 0] * propagation[1]
    crests = np.nonzero(up[:, 0] > 0.999 * up[:, 0].max())[0]
    derivative = np.gradient(radial, 1 / rate)
    assert np.all(derivative[crests] < 0)


def test_events_of_a_realisation_superpose():
    config = CrustalConfig(sensors=SensorGrid(6, 6), duration_s=2.0, depth_m=2000.0)
    medium = md.MediumParameters(perturbation_std=0.05)
    main = src.PointSource(300, 200, 1200, 30, 60, 45, 0.2, 1e15, 1.2, ((0.0, 0.7), (0.4, 0.3)))
    other = src.PointSource(100, 400, 900, 200, 80, -30, 0.9, 3e14, 1.1)
    both = simulate(config, Realisation(main, medium, others=(other,)), 3)
    one = simulate(config, Realisation(main, medium), 3).astype(np.float64)
    two = simulate(config, Realisation(other, medium), 3).astype(np.float64)
    assert np.abs(both - (one + two)).max() < 1e-4 * np.abs(both).max()
    assert np.abs(two).max() > 0.05 * np.abs(one).max()
    # Nothing of the second event before its onset: the record equals the main event's alone.
    early = np.arange(config.n_time) / config.sampling_rate_hz < other.origin_time_s
    assert np.array_equal(both[:, early], simulate(config, Realisation(main, medium), 3)[:, early])
