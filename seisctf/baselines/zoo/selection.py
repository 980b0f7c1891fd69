"""Honest hyper-parameters: a zoo model chooses its settings on a hold-out cut from the pair's
public inputs, never from the truth.

The hold-out is the last `holdout_rows` rows of the most recent input (as many as the forecast,
at most half that input): every entry of the model's grid is fitted on the inputs without them
and forecasts them, scored by the relative Frobenius error ‖forecast − held‖ / ‖held‖ (the
referee's short-time error, in the model's own space). The first entry with the least error
wins; a forecast that fails or is not finite scores infinity. The search budget is the grid's
length, fixed by the model and recorded with the errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.baselines.zoo.spec import ZooFamily

MIN_FIT_ROWS = 8  # rows the most recent input keeps for fitting when the hold-out is cut


@dataclass(frozen=True)
class Selection:
    """The chosen `settings`, the hold-out's `holdout_rows` and each grid entry's `errors`
    (in grid order; inf: failed or not finite)."""

    settings: Mapping[str, Any]
    holdout_rows: int
    errors: tuple[float, ...]

    def record(self) -> dict[str, Any]:
        """JSON of the search: budget, hold-out rows, errors (null for infinity)."""
        return {
            "budget": len(self.errors),
            "holdout_rows": self.holdout_rows,
            "errors": [error if np.isfinite(error) else None for error in self.errors],
        }


def guarded_forecast(
    model: ZooFamily,
    series: Sequence[np.ndarray],
    steps: int,
    settings: Mapping[str, Any],
    seed: int,
) -> np.ndarray | None:
    """The model's forecast (steps, features), or None if it failed numerically or is not
    finite. Errors of the model's arithmetic (a singular fit, an overflow) are the model's
    result, not the caller's mistake."""
    try:
        with np.errstate(all="ignore"):
            forecast = np.asarray(model.forecast(series, steps, settings, seed), dtype=np.float64)
    except (ArithmeticError, np.linalg.LinAlgError, ValueError, RuntimeError):
        return None
    expected = (steps, series[-1].shape[1])
    if forecast.shape != expected:
        raise ValueError(f"zoo model {model.name!r} forecast {forecast.shape}, not {expected}")
    return forecast if np.isfinite(forecast).all() else None


def holdout_rows(series: Sequence[np.ndarray], steps: int) -> int:
    """Rows cut from the most recent input: the forecast's, at most half that input, leaving it
    MIN_FIT_ROWS; 0 when it is too short to cut."""
    recent = series[-1].shape[0]
    return max(0, min(steps, recent // 2, recent - MIN_FIT_ROWS))


def choose_settings(
    model: ZooFamily, series: Sequence[np.ndarray], steps: int, seed: int
) -> Selection:
    """The grid entry with the least hold-out error (the first on ties; the first when nothing
    can be held out or every entry fails)."""
    rows = holdout_rows(series, steps)
    if rows == 0 or len(model.grid) == 1:
        return Selection(model.grid[0], rows, ())
    fitted = [*series[:-1], series[-1][:-rows]]
    held = series[-1][-rows:]
    norm = max(float(np.linalg.norm(held)), np.finfo(float).tiny)
    errors = []
    for settings in model.grid:
        forecast = guarded_forecast(model, fitted, rows, settings, seed)
        errors.append(np.inf if forecast is None else float(np.linalg.norm(forecast - held)) / norm)
    best = int(np.argmin(errors)) if np.isfinite(errors).any() else 0
    return Selection(model.grid[best], rows, tuple(errors))
