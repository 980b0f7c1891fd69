"""The red team's baseline kernels against independent computations (statsmodels, scipy,
numpy's SVD), and the baselines' predictions on a small bundle-shaped problem."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal
from statsmodels.tsa.api import VAR
from statsmodels.tsa.ar_model import AutoReg

from benchmarks.red_team.baselines import (
    BASELINES,
    choose_per_pair,
    forecast_error,
    horizon_holdout,
    rows_with_power_spectrum,
)
from seisctf.baselines.zoo import linear_models as lm


def ar2_series(n_time: int, n_space: int, seed: int) -> np.ndarray:
    """(time, space) AR(2) processes x[t] = 1.6 x[t−1] − 0.8 x[t−2] + e[t] (scipy's lfilter)."""
    noise = np.random.default_rng(seed).standard_normal((n_time, n_space))
    return signal.lfilter([1.0], [1.0, -1.6, 0.8], noise, axis=0)


def test_sensor_ar_matches_statsmodels_autoreg() -> None:
    x = ar2_series(3000, 3, seed=1)
    exact = lm.fit_sensor_ar([x], order=4, ridge=0.0)
    ridged = lm.fit_sensor_ar([x], order=4)
    for sensor in range(3):
        reference = AutoReg(x[:, sensor], lags=4, trend="n").fit().params
        np.testing.assert_allclose(exact[sensor], reference, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ridged[sensor], reference, atol=1e-3)
    assert np.allclose(lm.fit_sensor_ar([x], order=2), [1.6, -0.8], atol=0.05)


def test_sensor_ar_iteration_matches_lfilter_free_response() -> None:
    x = ar2_series(200, 4, seed=2)
    coefficients = np.tile([1.6, -0.8], (4, 1))
    forecast = lm.iterate_sensor_ar(coefficients, x, steps=30)
    for sensor in range(4):
        history = x[::-1, sensor][:2]  # y[-1], y[-2]
        initial = signal.lfiltic([1.0], [1.0, -1.6, 0.8], history)
        reference, _ = signal.lfilter([1.0], [1.0, -1.6, 0.8], np.zeros(30), zi=initial)
        np.testing.assert_allclose(forecast[:, sensor], reference, rtol=1e-10, atol=1e-10)


def test_stabilised_ar_has_roots_inside_the_unit_circle() -> None:
    explosive = np.array([[2.5, -1.0], [1.6, -0.8]])  # roots 2 and 0.5; a stable pair
    stable = lm.stabilise_sensor_ar(explosive)
    for row in stable:
        assert np.abs(np.roots([1.0, *(-row)])).max() < 1.0
    np.testing.assert_array_equal(stable[1], explosive[1])


def test_var_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    transition = np.array([[0.5, 0.2], [-0.3, 0.4]])
    c = np.zeros((2000, 2))
    for t in range(1, 2000):
        c[t] = transition @ c[t - 1] + rng.standard_normal(2)
    coefficients = lm.fit_var([c], order=2, ridge=0.0)
    reference = VAR(c).fit(2, trend="n")
    np.testing.assert_allclose(coefficients, reference.params, rtol=1e-9, atol=1e-12)


def test_svd_denoise_is_numpy_truncated_svd() -> None:
    rng = np.random.default_rng(4)
    clean = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 200)) * 3.0
    noisy = clean + rng.standard_normal(clean.shape)
    left, values, right = np.linalg.svd(noisy, full_matrices=False)
    rank = lm.gavish_donoho_rank(values, noisy.shape)
    assert rank == 5
    reference = (left[:, :rank] * values[:rank]) @ right[:rank]
    np.testing.assert_allclose(lm.svd_denoise(noisy), reference, atol=1e-8)
    np.testing.assert_allclose(lm.svd_denoise(noisy.T), reference.T, atol=1e-8)
    assert np.linalg.norm(lm.svd_denoise(noisy) - clean) < 0.5 * np.linalg.norm(noisy - clean)


def test_wiener_denoise_removes_white_noise_above_a_low_band_signal() -> None:
    rng = np.random.default_rng(5)
    time = np.arange(2000)[:, None]
    clean = np.sin(2 * np.pi * 0.01 * time + rng.uniform(0, 6, 8))
    noisy = clean + 0.5 * rng.standard_normal(clean.shape)
    level = lm.white_noise_level(noisy) / noisy.shape[0]
    assert np.all((0.7 * 0.25 < level) & (level < 1.05 * 0.25))  # errs low (docstring)
    assert np.linalg.norm(lm.wiener_denoise(noisy) - clean) < 0.4 * np.linalg.norm(noisy - clean)


@pytest.fixture(scope="module")
def small_bundle() -> tuple[dict[str, np.ndarray], dict, dict[str, np.ndarray]]:
    """A bundle-shaped problem: travelling waves on 240 sensors plus 1 % white noise (the seismo
    layout's roles at a tenth of its lengths, few-snapshot and burn-in windows of 80 rows), its
    public arrays, manifest and truth."""
    rng = np.random.default_rng(6)
    space = np.arange(240)

    def field(phase: float, steps: int, start: int = 0) -> np.ndarray:
        time = np.arange(start, start + steps)[:, None]
        return 0.01 * rng.standard_normal((steps, 240)) + sum(
            np.sin(2 * np.pi * (f * time - k * space / 240) + phase + j)
            for j, (f, k) in enumerate([(0.02, 3), (0.035, 7), (0.05, 11)])
        )

    def noisy(x: np.ndarray, fraction: float) -> np.ndarray:
        return x + fraction * x.std() * rng.standard_normal(x.shape)

    arrays = {
        "X1train": field(0.0, 200),
        "X2train": noisy(field(1.0, 200), 0.2),
        "X3train": noisy(field(2.0, 200), 0.5),
        "X4train": field(3.0, 80, 120),
        "X5train": noisy(field(4.0, 80, 120), 0.2),
        **{f"X{6 + i}train": field(5.0 + 0.1 * i, 200) for i in range(3)},
        "X9train": field(5.15, 80, 120),
        "X10train": field(5.4, 80, 120),
    }
    truth = {
        "X1test": field(0.0, 100, 200),
        "X2test": field(1.0, 200),
        "X4test": field(2.0, 200),
        "X6test": field(3.0, 100, 200),
        "X8test": field(5.15, 100, 200),
    }
    forecast, recon = [100, 240], [200, 240]
    pairs = [
        {"id": 1, "train": ["X1train"], "test": "X1test", "shape": forecast,
         "metrics": ["short_time", "long_time"]},
        {"id": 2, "train": ["X2train"], "test": "X2test", "shape": recon,
         "metrics": ["reconstruction"]},
        {"id": 3, "train": ["X2train"], "test": "X3test", "shape": forecast,
         "metrics": ["long_time"]},
        {"id": 4, "train": ["X3train"], "test": "X4test", "shape": recon,
         "metrics": ["reconstruction"]},
        {"id": 5, "train": ["X3train"], "test": "X5test", "shape": forecast,
         "metrics": ["long_time"]},
        {"id": 6, "train": ["X4train"], "test": "X6test", "shape": forecast,
         "metrics": ["short_time", "long_time"]},
        {"id": 7, "train": ["X5train"], "test": "X7test", "shape": forecast,
         "metrics": ["short_time", "long_time"]},
        {"id": 8, "train": ["X6train", "X7train", "X8train"], "burn_in": "X9train",
         "test": "X8test", "shape": forecast, "metrics": ["short_time"]},
        {"id": 9, "train": ["X6train", "X7train", "X8train"], "burn_in": "X10train",
         "test": "X9test", "shape": forecast, "metrics": ["short_time"]},
    ]  # fmt: skip
    manifest = {"k_short": 10, "k_long": 10, "modes": 50, "pairs": pairs}
    return arrays, manifest, truth


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_predict_every_pair_and_learn_the_waves(small_bundle, name) -> None:
    arrays, manifest, truth = small_bundle
    predictions = BASELINES[name](arrays, manifest)
    assert sorted(predictions) == sorted(p["test"] for p in manifest["pairs"])
    for pair in manifest["pairs"]:
        assert predictions[pair["test"]].shape == tuple(pair["shape"])
        assert np.isfinite(predictions[pair["test"]]).all()
    if name == "persistence":
        return
    # Three plane waves are an AR(6) / VAR process: the first rows are forecast far better than
    # by persistence (the POD-VAR, on the waves' few modes, closely), and the reconstructions
    # are closer to the clean field than the noisy inputs.
    persisted = BASELINES["persistence"](arrays, manifest)
    for test in ("X1test", "X6test", "X8test"):
        error = np.linalg.norm(predictions[test][:10] - truth[test][:10], 2)
        assert error < 0.5 * np.linalg.norm(persisted[test][:10] - truth[test][:10], 2), test
        if name != "sensor_ar":
            assert error < 0.1 * np.linalg.norm(truth[test][:10], 2), test
    for test, noisy in (("X2test", "X2train"), ("X4test", "X3train")):
        denoised = np.linalg.norm(predictions[test] - truth[test])
        assert denoised < 0.7 * np.linalg.norm(arrays[noisy] - truth[test]), test


def test_rows_with_power_spectrum_have_it() -> None:
    rows = np.random.default_rng(7).standard_normal((50, 64))
    power = (np.abs(np.fft.fft(rows, axis=1)) ** 2).mean(axis=0)
    built = rows_with_power_spectrum(power, 3)
    assert built.shape == (3, 64)
    np.testing.assert_allclose(np.abs(np.fft.fft(built, axis=1)) ** 2, np.tile(power, (3, 1)))


def test_horizon_holdout_cuts_each_forecast_input_once(small_bundle) -> None:
    arrays, manifest, _ = small_bundle
    held, cut = horizon_holdout(arrays, manifest)
    # X2train feeds a reconstruction and a 100-row forecast; X9train (80 rows) at most half.
    assert cut == {"X1train": 100, "X2train": 100, "X3train": 100, "X4train": 40,
                   "X5train": 40, "X9train": 40, "X10train": 40}  # fmt: skip
    for name, x in arrays.items():
        np.testing.assert_array_equal(held[name], x[: x.shape[0] - cut.get(name, 0)])


def test_choose_per_pair_picks_the_candidate_that_forecasts_the_cut_rows(small_bundle) -> None:
    """An oracle that continues every input with its own true rows (read from the full arrays)
    against persistence: the hold-out must pick the oracle for every forecast pair, and the
    full-data prediction returned is the oracle's."""
    arrays, manifest, _ = small_bundle
    _, cut = horizon_holdout(arrays, manifest)

    def candidates(inputs: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
        oracle, persisted = {}, BASELINES["persistence"](inputs, manifest)
        for pair in manifest["pairs"]:
            recent = pair.get("burn_in") or pair["train"][-1]
            rows = inputs[recent].shape[0]
            continuation = np.zeros(pair["shape"])
            known = arrays[recent][rows : rows + pair["shape"][0]]
            continuation[: known.shape[0]] = known
            oracle[pair["test"]] = continuation + (0.0 if rows < arrays[recent].shape[0] else 1.0)
        return {"persistence": persisted, "oracle": oracle}

    messages: list[str] = []
    chosen = choose_per_pair(arrays, manifest, candidates, log=messages.append)
    forecasts = [p["test"] for p in manifest["pairs"] if "reconstruction" not in p["metrics"]]
    assert sorted(chosen) == sorted(forecasts)
    full = candidates(arrays)["oracle"]
    for test in forecasts:
        np.testing.assert_array_equal(chosen[test], full[test])
    assert all(" from oracle " in message for message in messages) and len(messages) == 7
    assert forecast_error(arrays["X1train"][-20:], arrays["X1train"][-20:], manifest) == 0.0
