"""Long-time rows of the red team's forecasts: the last k_long rows, which the referee scores by
their mean spatial power spectrum alone (the `modes` bins from zero wavenumber up; relative
2-norm error, a score of 100 (1 − error) clipped at −100).

Far from the inputs no forecast keeps its phases, so a tail is chosen as a spectrum: a shape
and a level. Both are uncertain, and an error is not symmetric in the level (too low costs at
most 100 points, too high without bound until the clip), so the level is hedged: scaled by the
factor that maximises the mean clipped score on a public hold-out.

- `hedged_tail`: candidate spectra (`candidate_spectra`: a shape, of the last k_long rows, the
  input's second half, its window of median power, or flat, at a level, the mean power of the
  last window, the second half, the median or the quietest window) times a factor of
  LEVEL_FACTORS (0 is silence, score 0). The
  (candidate, factor) is the one with the best mean clipped score over hold-out examples cut
  from the bundle's clean public arrays only (`holdout_examples`: every clean training array cut
  where as many rows as the forecast's horizon follow, the history as long as the pair's input
  at most): the same horizon as the forecast's, the decay of the level over it learnt from
  every public realisation.
- `with_model_power`: the tail of a forecast that adds a physical model (the attacks).
- `long_time_tail`: the earlier choice among four tails on the most recent input alone (its last
  rows, scaled by the trend, its mean spectrum, zeros; error summed, not hedged), kept for its
  callers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seisctf.scoring.metrics import reference_spectrum

TAIL_HOLDOUT_WINDOWS = 5
POWER_RATIO_LIMITS = (0.01, 100.0)
LEVEL_FACTORS = (0.0, *np.geomspace(2.0**-8, 4.0, 21))  # power factors, 2^(1/2) apart, and 0
CUTS_PER_ARRAY = 1
SCORE_FLOOR = -100.0


def power_trend_ratio(recent: np.ndarray, horizon: int) -> float:
    """Row-power growth factor over `horizon` rows from a log-linear fit on recent's second half,
    clamped to POWER_RATIO_LIMITS."""
    half = recent[recent.shape[0] // 2 :]
    log_power = np.log(np.maximum((half**2).mean(axis=1), np.finfo(float).tiny))
    slope = np.polyfit(np.arange(half.shape[0]), log_power, 1)[0]
    return float(np.clip(np.exp(slope * horizon), *POWER_RATIO_LIMITS))


def rows_with_power_spectrum(power: np.ndarray, k_rows: int) -> np.ndarray:
    """(k_rows, space) identical real rows whose |FFT over space|² is `power` (space,; the
    unshifted, symmetric power spectrum of real rows), all phases zero."""
    row = np.fft.ifft(np.sqrt(np.maximum(power, 0.0))).real
    return np.tile(row, (k_rows, 1))


def rows_with_scored_spectrum(spectrum: np.ndarray, n_space: int, k_rows: int) -> np.ndarray:
    """(k_rows, n_space) identical real rows whose `reference_spectrum` is `spectrum` (modes,):
    power at wavenumbers 0 … modes − 1 and their mirrors, none elsewhere."""
    power = np.zeros(n_space)
    modes = spectrum.shape[0]
    power[:modes] = spectrum
    power[n_space - np.arange(1, modes)] = spectrum[1:]
    return rows_with_power_spectrum(power, k_rows)


def long_time_tail(recent: np.ndarray, k_long: int, horizon: int, modes: int) -> np.ndarray:
    """(k_long, space) rows standing for the forecast's last k_long rows, of four candidates the
    one that best forecasts the spectra of the input's own last windows (module docstring)."""

    def candidates(history: np.ndarray, ahead: int) -> list[np.ndarray]:
        rows = history[-k_long:]
        half = history[history.shape[0] // 2 :]
        mean_power = (np.abs(np.fft.fft(half, axis=1)) ** 2).mean(axis=0)
        return [
            rows,
            rows * np.sqrt(power_trend_ratio(history, ahead)),
            rows_with_power_spectrum(mean_power, k_long),
            np.zeros_like(rows),
        ]

    cut = min(horizon, recent.shape[0] // 2)
    errors = np.zeros(4)
    for window in range(TAIL_HOLDOUT_WINDOWS):
        end = recent.shape[0] - window * k_long
        if end - cut < recent.shape[0] // 4:
            break
        target = reference_spectrum(recent[end - k_long : end], modes)
        errors += [
            np.linalg.norm(reference_spectrum(c, modes) - target) / np.linalg.norm(target)
            for c in candidates(recent[: end - cut], cut - k_long // 2)
        ]
    return candidates(recent, horizon - k_long // 2)[int(np.argmin(errors))]


def window_spectra(history: np.ndarray, k_long: int, modes: int) -> np.ndarray:
    """(windows, modes) spectra of the consecutive k_long-row windows of `history`, latest last
    (at least the last k_long rows)."""
    count = max(history.shape[0] // k_long, 1)
    rows = history[history.shape[0] - count * k_long :] if history.shape[0] >= k_long else history
    windows = rows.reshape(count, -1, rows.shape[1]) if history.shape[0] >= k_long else rows[None]
    zero = history.shape[1] // 2
    power = np.abs(np.fft.fftshift(np.fft.fft(windows, axis=2), axes=2)) ** 2
    return power.mean(axis=1)[:, zero : zero + modes]


SHAPE_NAMES = ("last", "mean", "median", "flat")
LEVEL_NAMES = ("last", "mean", "median", "quiet")
CANDIDATE_NAMES = tuple(
    f"{shape} shape, {level} level" for shape in SHAPE_NAMES for level in LEVEL_NAMES
)


def candidate_spectra(history: np.ndarray, k_long: int, modes: int) -> np.ndarray:
    """(16, modes) spectra a tail may take after `history` (time, space): each shape of
    SHAPE_NAMES (the last k_long rows' spectrum, the mean of the second half's windows, the
    window of median power, flat) at each level of LEVEL_NAMES (the mean power of the last
    window, of the second half, of the median window, of the quietest window)."""
    windows = window_spectra(history, k_long, modes)
    power = windows.mean(axis=1)
    order = np.argsort(power)
    median = windows[order[len(order) // 2]]
    half = windows[len(windows) // 2 :].mean(axis=0)
    shapes = np.stack([windows[-1], half, median, np.ones(modes)])
    shapes /= np.maximum(shapes.mean(axis=1, keepdims=True), np.finfo(float).tiny)
    levels = np.array([power[-1], half.mean(), median.mean(), power[order[0]]])
    return (shapes[:, None, :] * levels[None, :, None]).reshape(-1, modes)


def holdout_examples(
    arrays: Sequence[np.ndarray],
    history_rows: int,
    horizon: int,
    k_long: int,
    modes: int,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(candidate spectra (16, modes), target spectrum (modes,)) of every hold-out example: each
    array of `arrays` cut at the CUTS_PER_ARRAY latest points c, k_long apart, where `horizon`
    rows follow and 2·k_long precede (the latest: the target is as late in its record as the
    forecast's); the history the (at most `history_rows`) rows before c, the target the
    spectrum of rows c + horizon − k_long … c + horizon."""
    examples = []
    for x in arrays:
        last_cut = x.shape[0] - horizon
        cuts = [c for c in last_cut - k_long * np.arange(CUTS_PER_ARRAY) if c >= 2 * k_long]
        for cut in cuts:
            target = reference_spectrum(x[cut + horizon - k_long : cut + horizon], modes)
            if not np.any(target):
                continue
            history = x[max(0, cut - history_rows) : cut]
            examples.append((candidate_spectra(history, k_long, modes), target))
    return examples


def clipped_scores(candidates: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(candidates, factors) referee scores of every candidate spectrum (candidates, modes)
    times every factor of LEVEL_FACTORS against `target`."""
    factors = np.asarray(LEVEL_FACTORS)
    predictions = factors[None, :, None] * candidates[:, None, :]
    errors = np.linalg.norm(predictions - target, axis=-1) / np.linalg.norm(target)
    return np.maximum(100.0 * (1.0 - errors), SCORE_FLOOR)


def choose_tail(examples: list[tuple[np.ndarray, np.ndarray]]) -> tuple[int, float, float]:
    """(candidate index, factor, mean hold-out score) with the best mean clipped score over the
    examples; silence (factor 0, score 0) when there are none."""
    if not examples:
        return 0, 0.0, 0.0
    mean = np.mean([clipped_scores(c, t) for c, t in examples], axis=0)
    candidate, factor = np.unravel_index(int(np.argmax(mean)), mean.shape)
    return int(candidate), float(LEVEL_FACTORS[factor]), float(mean[candidate, factor])


def hedged_tail(
    recent: np.ndarray,
    clean_arrays: Sequence[np.ndarray],
    k_long: int,
    horizon: int,
    modes: int,
) -> tuple[np.ndarray, tuple[str, float, float]]:
    """((k_long, space) tail rows `horizon` rows after `recent` (time, space), (candidate name,
    factor, mean hold-out score)): the (candidate, factor) `choose_tail` picks on the hold-out
    examples of `clean_arrays` (module docstring)."""
    examples = holdout_examples(clean_arrays, recent.shape[0], horizon, k_long, modes)
    candidate, factor, score = choose_tail(examples)
    spectrum = factor * candidate_spectra(recent, k_long, modes)[candidate]
    rows = rows_with_scored_spectrum(spectrum, recent.shape[1], k_long)
    return rows, (CANDIDATE_NAMES[candidate], factor, score)


def with_model_power(tail_rows: np.ndarray, model_rows: np.ndarray, modes: int) -> np.ndarray:
    """Long-time rows of a forecast that adds a physical model: the spectrum of a baseline's
    tail plus a flat spectrum at the model's mean power over the scored wavenumbers (the
    model's phases that far on are not to be trusted, its energy is; the two fields are
    independent, so their powers add)."""
    level = reference_spectrum(model_rows, modes).mean()
    spectrum = level + reference_spectrum(tail_rows, modes)
    return rows_with_scored_spectrum(spectrum, tail_rows.shape[1], tail_rows.shape[0])
