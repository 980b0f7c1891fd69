"""The red team's hedged long-time tails and the global attack's vectorised fit, against plain
numpy: the referee's spectrum of the rows built, the hold-out's scores and choice, and per-sensor
least squares over shifted bases (`np.linalg.lstsq`, one sensor and shift at a time)."""

from __future__ import annotations

import numpy as np

from benchmarks.red_team import attack_global, tails
from seisctf.scoring.metrics import reference_spectrum


def test_rows_with_scored_spectrum_have_it() -> None:
    spectrum = np.random.default_rng(1).uniform(0.5, 2.0, 20)
    for n_space in (40, 41, 64):
        rows = tails.rows_with_scored_spectrum(spectrum, n_space, 5)
        assert rows.shape == (5, n_space) and np.isrealobj(rows)
        np.testing.assert_allclose(reference_spectrum(rows, 20), spectrum, rtol=1e-10)


def test_clipped_scores_are_the_referees() -> None:
    rng = np.random.default_rng(2)
    candidates, target = rng.uniform(0, 1, (3, 8)), rng.uniform(0, 1, 8)
    scores = tails.clipped_scores(candidates, target)
    assert scores.shape == (3, len(tails.LEVEL_FACTORS))
    for c in range(3):
        for f, factor in enumerate(tails.LEVEL_FACTORS):
            error = np.linalg.norm(factor * candidates[c] - target) / np.linalg.norm(target)
            assert np.isclose(scores[c, f], max(100 * (1 - error), -100.0))
    assert np.all(scores[:, 0] == 0.0)  # factor 0: silence scores 0


def test_the_hold_out_learns_a_decay_and_a_shape() -> None:
    """Records whose rows are a fixed spatial pattern whose power halves every 50 rows: 100 rows
    ahead the level is a quarter of the last rows', the shape theirs; the tail chosen on the
    hold-out (other records) forecasts a new record's spectrum nearly exactly."""
    rng = np.random.default_rng(3)
    pattern = np.sin(2 * np.pi * 3 * np.arange(64) / 64) + 0.3 * np.cos(
        2 * np.pi * 7 * np.arange(64) / 64
    )

    def record(phase: float, rows: int = 400) -> np.ndarray:
        decay = 2.0 ** (-np.arange(rows) / 100.0)  # amplitude: power halves every 50 rows
        wobble = 1 + 0.01 * rng.standard_normal((rows, 1))
        return decay[:, None] * np.roll(pattern, int(phase))[None, :] * wobble

    arrays = [record(phase) for phase in range(6)]
    examples = tails.holdout_examples(arrays, 200, 100, 10, 16)
    assert len(examples) == 6 * tails.CUTS_PER_ARRAY
    recent = record(9, 300)
    rows, (name, factor, score) = tails.hedged_tail(recent, arrays, 10, 100, 16)
    assert name.startswith("last shape") or name.startswith("mean shape"), name
    assert score > 90
    truth = record(9, 400)[390:400]
    error = np.linalg.norm(reference_spectrum(rows, 16) - reference_spectrum(truth, 16))
    assert error < 0.1 * np.linalg.norm(reference_spectrum(truth, 16))


def test_no_hold_out_example_means_silence() -> None:
    rows, (_, factor, score) = tails.hedged_tail(np.ones((30, 8)), [np.ones((30, 8))], 5, 100, 4)
    assert factor == 0.0 and score == 0.0 and not rows.any()


def test_fit_sensors_is_per_sensor_least_squares_at_the_best_shift() -> None:
    rng = np.random.default_rng(4)
    n_time, n_sensors, rows = 120, 7, slice(20, 90)
    basis = rng.standard_normal((3, n_time, n_sensors))
    shifts = np.array([-4, 0, 3, 5])
    true_shift = rng.choice(shifts, n_sensors)
    true_coefficients = rng.standard_normal((n_sensors, 3))
    x = attack_global.synthesised(basis, true_coefficients, true_shift)[rows]
    x += 0.05 * rng.standard_normal(x.shape)
    coefficients, best, residual = attack_global.fit_sensors(x, basis, rows, shifts)
    np.testing.assert_array_equal(best, true_shift)
    for s in range(n_sensors):
        design = attack_global.shifted_window(basis[..., s : s + 1], rows, best[s])[..., 0].T
        reference, *_ = np.linalg.lstsq(design, x[:, s], rcond=None)
        np.testing.assert_allclose(coefficients[s], reference, rtol=1e-6, atol=1e-9)
        expected = np.sum((x[:, s] - design @ reference) ** 2) / np.sum(x[:, s] ** 2)
        assert np.isclose(residual[s], expected, rtol=1e-5, atol=1e-9)


def test_shifted_window_delays_with_zeros() -> None:
    basis = np.arange(10.0)[None, :, None]
    np.testing.assert_array_equal(
        attack_global.shifted_window(basis, slice(2, 6), 3)[0, :, 0], [0, 0, 1, 2]
    )
    np.testing.assert_array_equal(
        attack_global.shifted_window(basis, slice(6, 10), -2)[0, :, 0], [8, 9, 0, 0]
    )


def test_with_model_power_adds_the_models_flat_power() -> None:
    rng = np.random.default_rng(5)
    tail, model = rng.standard_normal((4, 30)), 3.0 * rng.standard_normal((4, 30))
    rows = tails.with_model_power(tail, model, 10)
    expected = reference_spectrum(tail, 10) + reference_spectrum(model, 10).mean()
    np.testing.assert_allclose(reference_spectrum(rows, 10), expected, rtol=1e-10)
