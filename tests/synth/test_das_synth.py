"""Tests of the offline ocean-bottom DAS synthetic: the dispersion relation in the record's f–k
spectrum (the issue's acceptance test), the documented formulas against independent
computations, reproducibility for any chunking, and the DAS store contract."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.signal import windows

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.synth import das_synth as ds

GRAVITY = 9.81


@pytest.fixture(autouse=True, scope="module")
def single_threaded_blas():
    """Blocks here are small: BLAS threads cost more than they give (seisctf's workers run
    single-threaded BLAS anyway). The values are exact integers either way."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        yield


def dispersion_k(omega: float, depth_m: float) -> float:
    """ω² = g k tanh(k h), solved by bracketing (independent of the module's Newton)."""
    return brentq(lambda k: GRAVITY * k * math.tanh(k * depth_m) - omega**2, 1e-9, 10.0, xtol=1e-14)


def one_slot(sea: ds.SeaState, seed: int = 1, earthquakes: tuple[ds.Earthquake, ...] = ()):
    rng = np.random.default_rng(seed)
    return ds.DasSlot("forecast", math.nan, sea, ds.Components.draw(rng), earthquakes)


def test_wavenumber_solves_the_dispersion_relation():
    for omega in (0.2, 0.6, 1.3, 2.2):
        for depth in (2.0, 30.0, 150.0, 4000.0):
            assert ds.wavenumber(omega, depth) == pytest.approx(
                dispersion_k(omega, depth), rel=1e-12
            )
    # Shallow and deep limits: k = ω / sqrt(g h) and k = ω² / g.
    assert ds.wavenumber(0.1, 1.0) == pytest.approx(0.1 / math.sqrt(GRAVITY), rel=1e-3)
    assert ds.wavenumber(2.0, 5000.0) == pytest.approx(4.0 / GRAVITY, rel=1e-12)


def test_spectrum_amplitudes_and_directions_follow_their_formulas():
    sea = ds.SeaState(
        significant_wave_height_m=2.0, peak_period_s=11.0, mean_direction_deg=20.0, spreading_s=12.0
    )
    components = ds.Components.draw(np.random.default_rng(4), 20000)
    frequency = ds.component_frequencies(components)
    amplitude = ds.component_amplitudes(frequency, sea)
    assert np.sum(amplitude**2) / 2 == pytest.approx((2.0 / 4.0) ** 2, rel=1e-12)
    # a_n² ∝ JONSWAP: f⁻⁵ exp(−5/4 (f_p/f)⁴) γ^r, peak near f_p.
    peak = 1 / 11.0
    f = np.array([0.7 * peak, peak, 1.6 * peak])
    sigma = np.where(f <= peak, 0.07, 0.09)
    jonswap = (
        f**-5
        * np.exp(-1.25 * (peak / f) ** 4)
        * 3.3 ** np.exp(-((f - peak) ** 2) / (2 * sigma**2 * peak**2))
    )
    shape = ds.jonswap_shape(f, sea)
    np.testing.assert_allclose(shape / shape[1], jonswap / jonswap[1], rtol=1e-12)
    assert abs(frequency[np.argmax(amplitude)] - peak) < 0.003
    # Directions: the empirical density matches cos^{2s}((θ − θ_m)/2) on |θ| < 89°.
    theta = np.degrees(ds.component_directions(components, sea))
    assert np.all(np.abs(theta) < 89.0)
    edges = np.linspace(-89, 89, 31)
    counts, _ = np.histogram(theta, bins=edges)
    centres = np.radians(0.5 * (edges[1:] + edges[:-1]))
    density = np.cos((centres - np.radians(20.0)) / 2) ** 24
    expected = density / density.sum() * theta.size
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected.max())


@pytest.mark.parametrize("mean_direction_deg", [0.0, 35.0])
def test_fk_maximum_lies_on_the_dispersion_curve_over_the_plateau(mean_direction_deg):
    """The issue's acceptance test. Swell with a narrow spread (s = 2000: θ within ~2° of θ_m)
    over the default profile; on its constant-depth plateau (30 m) the f–k spectrum's maximum at
    each frequency must lie at the along-cable wavenumber k cos θ within 5 %: for swell along the
    cable (θ = 0) k itself, ω² = g k tanh(k h); obliquely k_x = sqrt(k² − k_y²) with
    k_y = k(h_ref) sin θ_m conserved from the 150 m reference depth (Snell)."""
    cable = ds.Cable(n_channels=3000)
    slot = one_slot(ds.SeaState(1.0, 10.0, mean_direction_deg, 2000.0))
    start, stop = 500, 1300  # 5.0 .. 13 km, inside the 30 m plateau (4.5 .. 13.5 km)
    depth = cable.depth_m(cable.distance_m(start, stop))
    assert np.all(depth == 30.0)
    swell = ds.swell_modes(slot, cable, start, stop)
    rate_hz, n_time = 5.0, 4096
    bound = ds.swell_bound(slot, cable, n_time / rate_hz)
    field = ds.swell_strain_rate(np.arange(n_time), rate_hz, swell, bound)
    taper = windows.hann(n_time)[:, None] * windows.hann(stop - start)[None, :]
    in_time = np.fft.rfft(field * taper, axis=0)  # ε̇(f, x)
    frequency = np.fft.rfftfreq(n_time, 1 / rate_hz)
    energy = (np.abs(in_time) ** 2).sum(axis=1)
    band = (frequency > 0.07) & (frequency < 0.2) & (energy > 0.05 * energy.max())
    assert band.sum() > 25  # 0.0012 Hz bins over the spectral peak
    n_k = 16384  # zero padding: 2π / (16384 · 10 m) = 3.8e-5 rad/m between bins
    spectrum = np.abs(np.fft.fft(in_time[band], n=n_k, axis=1)) ** 2
    k_axis = 2 * np.pi * np.fft.fftfreq(n_k, cable.channel_spacing_m)
    k_reference = ds.wavenumber(2 * np.pi * frequency[band], 150.0)
    k_y = k_reference * math.sin(math.radians(mean_direction_deg))
    errors = []
    for row, (f_hz, k_y_row) in enumerate(zip(frequency[band], k_y, strict=True)):
        omega = 2 * np.pi * f_hz
        peak = int(np.argmax(spectrum[row]))
        left, centre, right = spectrum[row, [peak - 1, peak, (peak + 1) % n_k]]
        shift = 0.5 * (left - right) / (left - 2 * centre + right)  # parabolic peak
        k_peak = abs(k_axis[peak] + shift * (k_axis[1] - k_axis[0]))
        k_expected = math.sqrt(dispersion_k(omega, 30.0) ** 2 - k_y_row**2)
        errors.append(abs(k_peak / k_expected - 1))
        # Shoreward travel, cos(Φ(x) + ωt): its e^{+iωt} half carries e^{+ikx}, found at
        # positive wavenumbers by numpy's e^{-i2πft}, e^{-iκx} kernels (travel to +x: negative).
        assert k_axis[peak] > 0
    assert max(errors) < 0.05, max(errors)
    assert np.median(errors) < 0.02  # the ~2° spread moves k cos θ by ~1 % at 35°


def test_swell_decays_offshore_and_shoals_towards_the_coast():
    cable = ds.Cable(n_channels=3000)
    slot = one_slot(ds.SeaState(1.5, 12.0, 0.0, 20.0))
    swell = ds.swell_modes(slot, cable, 0, 3000)
    amplitude = np.sqrt(0.5 * (swell.modes**2).sum(axis=0))  # rms strain rate per channel
    deep, plateau = amplitude[-100:].mean(), amplitude[700:1300].mean()
    assert deep < 0.2 * plateau  # 1/cosh(kh) at 150 m
    # Magnitude: of order 1e-7 .. 1e-6 /s (module docstring).
    assert 5e-8 < plateau < 5e-6


def test_integer_product_equals_the_direct_float_sum():
    """The exact-integer evaluation equals Σ_n Re[g_n(τ) (C_n − i S_n) e^{iω_n τ}] with
    g_n(τ) interpolated between knots as the module docstring says, computed directly."""
    cable = ds.Cable(n_channels=50, depth_profile=((0.0, 8.0), (490.0, 40.0)))
    slot = one_slot(ds.SeaState(2.0, 9.0, -30.0, 10.0, coherence_time_s=200.0))
    swell = ds.swell_modes(slot, cable, 0, 50)
    n = swell.omega.size
    sample = np.arange(3000, 5500)
    tau = sample / 5.0
    position = tau / 200.0
    knot = np.floor(position).astype(int)
    u = position - knot
    g = {j: ds.envelope_coefficients(slot.components.envelope_key, j, n) for j in np.unique(knot)}
    g.update({j + 1: ds.envelope_coefficients(slot.components.envelope_key, j + 1, n) for j in g})
    g_low = np.stack([g[j][0] + 1j * g[j][1] for j in knot])
    g_high = np.stack([g[j + 1][0] + 1j * g[j + 1][1] for j in knot])
    g_t = ((1 - u)[:, None] * g_low + u[:, None] * g_high) / np.sqrt((1 - u) ** 2 + u**2)[:, None]
    cos_modes, sin_modes = swell.modes[:n], swell.modes[n:]
    # C cos ωτ + S sin ωτ = Re[(C − iS) e^{iωτ}]; g rotates it: Re[g (C − iS) e^{iωτ}].
    direct = np.real(
        (g_t * np.exp(1j * tau[:, None] * swell.omega[None, :])) @ (cos_modes - 1j * sin_modes)
    )
    bound = ds.swell_bound(slot, cable, 1100.0)
    exact = ds.swell_strain_rate(sample, 5.0, swell, bound)
    assert np.abs(exact - direct).max() < 1e-5 * np.abs(direct).max()
    assert np.abs(swell.modes).sum(axis=0).max() < ds.mode_bound(slot, cable)
    # The envelope evolves: the field's amplitude per component is not constant in time.
    assert np.abs(g_t[0] - g_t[-1]).mean() > 0.5


def test_earthquake_moveout_and_broadside_null():
    """60 km off the cable, P and S arrive > 6 s apart: each causal pulse starts at its own
    arrival and peaks half its duration later at its own formula's amplitude."""
    quake = ds.Earthquake(
        origin_time_s=20.0,
        along_cable_m=1000.0,
        offset_m=60e3,
        depth_m=10e3,
        peak_strain_rate=1e-6,
        duration_s=2.0,
    )
    distance = np.array([1000.0, 21000.0, 41000.0])
    tau = np.arange(0, 120, 0.01)
    field = ds.earthquake_strain_rate(tau, distance, quake)
    assert np.all(field[:, 0] == 0.0)  # broadside: no apparent slowness, no strain
    for column, x in zip((1, 2), distance[1:], strict=True):
        radius = math.sqrt((x - 1000.0) ** 2 + 60e3**2 + 10e3**2)
        horizontal = math.sqrt((x - 1000.0) ** 2 + 60e3**2)
        cos_alpha = (x - 1000.0) / radius
        spreading = 1e4 / radius
        arrivals = (
            (20 + radius / 6000, 2.0, 1e-6 * spreading * cos_alpha**2),
            (20 + radius / 3500, 3.0, -2e-6 * spreading * cos_alpha * 60e3 / horizontal),
        )
        for arrival, duration, amplitude in arrivals:
            near = (tau >= arrival) & (tau < arrival + duration)
            peak = np.argmax(np.abs(field[near, column]))
            assert tau[near][peak] == pytest.approx(arrival + duration / 2, abs=0.006)
            assert field[near, column][peak] == pytest.approx(amplitude, rel=1e-3)
        p_arrival = 20 + radius / 6000
        assert np.all(field[tau < p_arrival, column] == 0.0)  # nothing before the P arrival
        assert np.abs(field[tau > p_arrival, column][:5]).max() > 0


def test_causal_pulse_is_the_second_derivative_of_a_sin4_moment_rate():
    """w(s) = −(1/4π²) d²/ds² sin⁴(πs) on [0, 1], zero outside: checked against a finite
    difference of sin⁴, its zero mean and its smooth (∝ s²) onset."""
    s = np.linspace(-0.5, 1.5, 20001)
    step = s[1] - s[0]
    moment_rate = np.where((s >= 0) & (s <= 1), np.sin(np.pi * s) ** 4, 0.0)
    second = np.gradient(np.gradient(moment_rate, step), step)
    np.testing.assert_allclose(ds.causal_pulse(s), -second / (4 * np.pi**2), atol=1e-4)
    assert np.all(ds.causal_pulse(s[s < 0]) == 0) and np.all(ds.causal_pulse(s[s > 1]) == 0)
    assert ds.causal_pulse(np.array([0.5]))[0] == pytest.approx(1.0)
    assert abs(ds.causal_pulse(s).sum() * step) < 1e-9
    assert ds.causal_pulse(np.array([1e-3]))[0] == pytest.approx(-3 * (np.pi * 1e-3) ** 2, rel=1e-3)


def test_catalogue_follows_gutenberg_richter_and_brune():
    """Magnitudes drawn by the truncated Gutenberg–Richter inverse CDF have its survival function
    (b = 1), and durations and amplitudes follow Brune's corner frequency."""
    from seisctf.synth import das_synth_quake as dq

    rng = np.random.default_rng(2)
    magnitude = dq.gutenberg_richter(rng.uniform(0, 1, 200000))
    low, high = dq.MAGNITUDE_RANGE
    assert magnitude.min() >= low and magnitude.max() <= high
    # Survival N(≥M)/N: the truncated law (10^{-(M - M_min)} - 10^{-(M_max - M_min)}) / (1 - ...).
    tail = 10.0 ** -(high - low)
    for m in (3.5, 4.0, 4.5, 5.0):
        expected = (10.0 ** -(m - low) - tail) / (1 - tail)
        assert np.mean(magnitude >= m) == pytest.approx(expected, rel=0.05)
    moment = 10 ** (1.5 * 5.0 + 9.1)
    corner = 0.4906 * 3500 * (3e6 / moment) ** (1 / 3)
    assert dq.pulse_duration_s(5.0) == pytest.approx(math.hypot(1 / corner, 2.0), rel=1e-12)
    ratio = dq.peak_strain_rate(5.0) / dq.peak_strain_rate(4.0)
    expected = 10**1.5 * (dq.pulse_duration_s(4.0) / dq.pulse_duration_s(5.0)) ** 3
    assert ratio == pytest.approx(expected, rel=1e-12)
    events = dq.draw_catalogue(np.random.default_rng(5), 3600.0, 2000.0)
    assert len(events) > 3
    times = [event.origin_time_s for event in events]
    assert times == sorted(times) and -60 <= times[0] and times[-1] < 3600


def small_record(**changes):
    cable = ds.Cable(n_channels=70, channel_spacing_m=8.0)
    slots = ds.default_slots(9, cv.SEGMENT_ROLES[:4], 60.0, cable.length_m)
    options = {"seed": 5, **changes}
    return ds.synthesize_das(cable, slots, 300, **options)


def test_store_follows_the_das_contract_and_keeps_no_seed():
    store = small_record()
    variable = cv.validate_das_store(store)
    assert variable == "strain_rate" == store.attrs[cv.ATTR_QUANTITY]
    data = store[variable]
    assert data.dims == cv.DAS_DIMS and data.dtype == np.float32 and data.shape == (1200, 70)
    assert data.data.chunksize == cv.time_space_chunks(1200, 70)
    assert cv.TIME not in store.coords
    np.testing.assert_array_equal(store[cv.DISTANCE].values, np.arange(70) * 8.0)
    for key, value in {
        cv.ATTR_UNITS: "1/s",
        cv.ATTR_GAUGE_LENGTH: 20.0,
        cv.ATTR_CHANNEL_SPACING: 8.0,
        cv.ATTR_INTERROGATOR: "synthetic",
        cv.ATTR_SAMPLING_RATE: 5.0,
    }.items():
        assert store.attrs[key] == value, key
    assert store.attrs[cv.ATTR_START_TIME].endswith("Z")
    assert not any("seed" in key for key in store.attrs)
    assert [r["role"] for r in store.attrs[ds.ATTR_REALISATIONS]] == list(cv.SEGMENT_ROLES[:4])
    values = data.values
    assert np.all(np.isfinite(values)) and 1e-8 < values.std() < 1e-5


@pytest.mark.parametrize("time_chunk, channel_chunk", [(1200, 70), (7, 70), (77, 13), (299, 5)])
def test_values_are_bitwise_identical_for_any_chunking(time_chunk, channel_chunk):
    reference = small_record(time_chunk=256, channel_chunk=32)[ds.QUANTITY].values
    chunked = small_record(time_chunk=time_chunk, channel_chunk=channel_chunk)
    values = chunked[ds.QUANTITY].values
    np.testing.assert_array_equal(reference.view(np.uint32), values.view(np.uint32))


def test_same_seed_same_bytes_other_seed_other_noise_and_slots_differ():
    first = small_record()[ds.QUANTITY].values
    again = small_record()[ds.QUANTITY].values
    other = small_record(seed=6)[ds.QUANTITY].values
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    assert not np.array_equal(first, other)
    quiet = small_record(noise_rms=0.0)[ds.QUANTITY].values
    noise = (first.astype(np.float64) - quiet) / 3e-9
    assert noise.std() == pytest.approx(1.0, rel=0.05) and abs(noise.mean()) < 0.05
    slots = [first[i * 300 : (i + 1) * 300] for i in range(4)]
    assert all(not np.allclose(slots[i], slots[j]) for i in range(4) for j in range(i))


def test_parametric_slots_differ_only_in_peak_period():
    slots = ds.default_slots(3, cv.SEGMENT_ROLES, 600.0, 2000.0)
    family = [slot for slot in slots if slot.role.startswith("param_")]
    assert [s.role for s in family] == [
        "param_extrap",
        "param_train",
        "param_interp",
        "param_train",
        "param_train",
    ]
    assert [s.parameter_value for s in family] == [16.0, 10.0, 11.0, 12.0, 14.0]
    assert [s.sea.peak_period_s for s in family] == [16.0, 10.0, 11.0, 12.0, 14.0]
    for slot in family:
        assert replace(slot.sea, peak_period_s=0) == replace(family[0].sea, peak_period_s=0)
        assert slot.components is family[0].components
        assert slot.earthquakes == family[0].earthquakes
    others = [slot for slot in slots if not slot.role.startswith("param_")]
    assert len({s.sea for s in others}) == 5 and all(math.isnan(s.parameter_value) for s in others)
    assert default_slots_equal(ds.default_slots(3, cv.SEGMENT_ROLES, 600.0, 2000.0), slots)
    quiet = ds.default_slots(3, cv.SEGMENT_ROLES, 600.0, 2000.0, earthquakes=False)
    assert all(slot.earthquakes == () for slot in quiet)
    assert all(len(slot.earthquakes) > 0 for slot in slots)


def default_slots_equal(first, second) -> bool:
    return [s.describe() for s in first] == [s.describe() for s in second]


def test_bad_parameters_are_refused():
    cable = ds.Cable(n_channels=10)
    slots = ds.default_slots(1, ("forecast",), 60.0, cable.length_m)
    with pytest.raises(InvalidInput, match="channels"):
        ds.synthesize_das(ds.Cable(n_channels=1), slots, 100)
    with pytest.raises(InvalidInput, match="depth_profile"):
        ds.synthesize_das(ds.Cable(10, depth_profile=((0.0, 5.0), (0.0, 9.0))), slots, 100)
    with pytest.raises(InvalidInput, match="depths must be positive"):
        ds.synthesize_das(ds.Cable(10, depth_profile=((0.0, -5.0),)), slots, 100)
    with pytest.raises(InvalidInput, match="swell band"):
        bad = replace(slots[0], sea=replace(slots[0].sea, peak_period_s=40.0))
        ds.synthesize_das(cable, [bad], 100)
    with pytest.raises(InvalidInput, match="sampling_rate_hz"):
        ds.synthesize_das(cable, slots, 100, sampling_rate_hz=0.5)


@pytest.mark.parametrize("coherence_time_s, forecastable", [(1e12, True), (300.0, False)])
def test_an_evolving_sea_is_not_a_fixed_sum_of_sinusoids(coherence_time_s, forecastable):
    """An attacker who knows every component's exact frequency fits 2000 s of each channel by
    least squares and continues the fit over the next 1000 s: exact for a frozen sea (the
    previous generator), no better than chance for the evolving one."""
    cable = ds.Cable(n_channels=12, channel_spacing_m=10.0)
    sea = ds.SeaState(1.5, 11.0, 10.0, 15.0, coherence_time_s=coherence_time_s)
    rng = np.random.default_rng(8)
    slot = ds.DasSlot("forecast", math.nan, sea, ds.Components.draw(rng, 80))
    swell = ds.swell_modes(slot, cable, 0, cable.n_channels)
    field = ds.swell_strain_rate(np.arange(3000), 1.0, swell, ds.swell_bound(slot, cable, 3000.0))
    time_s = np.arange(3000.0)[:, None]
    basis = np.concatenate([np.cos(time_s * swell.omega), np.sin(time_s * swell.omega)], axis=1)
    coefficients = np.linalg.lstsq(basis[:2000], field[:2000], rcond=None)[0]
    error = np.linalg.norm(basis[2000:] @ coefficients - field[2000:]) / np.linalg.norm(
        field[2000:]
    )
    if forecastable:
        assert error < 1e-3
    else:
        assert error > 0.7
