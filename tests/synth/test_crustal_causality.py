"""Causality of the crustal generator: one event (no further events, no ambient field), a
heterogeneous medium and the site filters on. No sensor moves before the first physical arrival:
the source onset plus the straight-line distance from the source to the sensor over the fastest
P velocity of the actual grid (computed here from the grid's material, independently of the
solver). Checked at output rates that resample (50 Hz: two internal steps per sample) and that do
not (100 Hz). Also the pieces: the moment rate is zero before its onset, has unit area, and the
site filter equals scipy's bilinear transform run by `lfilter`."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import bilinear, lfilter

from seisctf.synth.crustal import medium as md
from seisctf.synth.crustal import source as src
from seisctf.synth.crustal.recording import SensorGrid
from seisctf.synth.crustal.simulation import (
    CrustalConfig,
    Realisation,
    simulate,
    time_plan,
)
from seisctf.synth.crustal.site import SiteParameters, apply_site, site_terms

ONSET_S = 1.5
SOURCE_XYZ = np.array([1400.0, 100.0, 1500.0])
MEDIUM = md.MediumParameters(perturbation_std=0.08)
MEDIUM_SEED = 5


def test_moment_rate_is_zero_before_the_onset_and_has_unit_area():
    source = src.PointSource(
        0, 0, 1000, 0, 90, 0, 0.7, duration_s=0.4, subevents=((0.0, 0.6), (0.25, 0.4))
    )
    t = np.linspace(-1.0, 3.0, 400001)
    rate = src.moment_rate_shape(t, source)
    assert np.all(rate[t < 0.7] == 0.0) and np.all(rate[t > source.stop_time_s] == 0.0)
    assert rate[(t > 0.7) & (t < 0.7 + 1e-3)].min() > 0.0
    assert np.trapezoid(rate, t) == pytest.approx(1.0, rel=1e-9)
    # The band edge of the docstring: |P(f)| < 1 % of P(0) above 2.75 / D.
    dt = 1e-4
    pulse = src.pulse(np.arange(2**17) * dt, 1.0)
    spectrum = np.abs(np.fft.rfft(pulse)) * dt
    frequency = np.fft.rfftfreq(pulse.size, dt)
    assert frequency[np.nonzero(spectrum >= 0.01)[0][-1]] == pytest.approx(2.75, abs=0.01)


@pytest.mark.parametrize("rate_hz", [50.0, 100.0])
def test_no_sensor_moves_before_the_first_arrival(rate_hz):
    config = CrustalConfig(
        sensors=SensorGrid(11, 11, 100.0), sampling_rate_hz=rate_hz, duration_s=3.5, depth_m=2400.0
    )
    source = src.PointSource(
        *SOURCE_XYZ, 30.0, 60.0, 45.0, ONSET_S, duration_s=1.2, subevents=((0.0, 0.7), (0.3, 0.3))
    )
    realisation = Realisation(source, MEDIUM)
    assert time_plan(config, realisation).substeps == (2 if rate_hz == 50.0 else 1)
    record = simulate(config, realisation, MEDIUM_SEED, site_seed=11).astype(np.float64)

    grid_vp = md.material(config.grid(), MEDIUM, MEDIUM_SEED).vp
    x, y = config.sensors.coordinates()
    distance = np.linalg.norm(np.stack([x, y, np.zeros_like(x)]) - SOURCE_XYZ[:, None], axis=0)
    first_arrival = ONSET_S + distance / grid_vp.max()
    time = np.arange(config.n_time) / rate_hz
    peak = np.abs(record).max(axis=1, keepdims=True)  # (3, 1, n_sensors)
    assert np.all(peak > 0)
    relative = np.abs(record) / peak

    before_issue_bound = time[:, None] < first_arrival[None, :] - 1.0
    assert before_issue_bound.any()
    assert relative[:, before_issue_bound].max() < 1e-3
    # Tighter: nothing reaches 1e-3 of the peak before the first arrival itself (measured: the
    # earliest such sample is 0.089 s after it; the slowest-to-fastest velocity spread of the
    # medium gives that margin).
    before_arrival = time[:, None] < first_arrival[None, :]
    assert relative[:, before_arrival].max() < 1e-3


def test_site_filter_is_scipys_bilinear_transform_and_causal():
    sensors = SensorGrid(4, 5, 100.0)
    terms = site_terms(sensors, 3, SiteParameters())
    rate = 100.0
    rng = np.random.default_rng(0)
    traces = rng.standard_normal((2, 300, sensors.n_sensors))
    traces[:, :100] = 0.0
    filtered = apply_site(traces, terms, rate)
    assert np.all(filtered[:, :100] == 0.0)
    for sensor in range(sensors.n_sensors):
        omega = 2 * np.pi * terms.resonance_hz[sensor]
        zeta, gain = terms.damping, terms.resonance_gain[sensor]
        # H(s) = (s² + 2ζω(1 + g)s + ω²) / (s² + 2ζωs + ω²); scipy's bilinear does not
        # prewarp, so give it the prewarped ω.
        warped = 2 * rate * np.tan(omega / (2 * rate))
        b, a = bilinear(
            [1.0, 2 * zeta * warped * (1 + gain), warped**2],
            [1.0, 2 * zeta * warped, warped**2],
            fs=rate,
        )
        expected = terms.amplification[sensor] * lfilter(b, a, traces[..., sensor], axis=-1)
        np.testing.assert_allclose(filtered[..., sensor], expected, rtol=1e-9, atol=1e-12)
    assert terms.amplification.std() > 0 and terms.resonance_hz.min() > 0
