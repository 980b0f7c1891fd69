"""How much work a zoo model's prediction does: `full` (every settings of its grid tried on the
hold-out, its training steps as set) or `quick`, a smoke test of a set-up (the grid's first
settings, no search, QUICK_STEPS_FRACTION of the neural models' training steps). Quick results
are recorded as such (`search: quick`) and are not the model's: they are for checking that
every model runs, not for a leaderboard."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

FULL, QUICK = "full", "quick"
QUICK_STEPS_FRACTION = 0.1

_steps_fraction = contextvars.ContextVar("zoo_steps_fraction", default=1.0)


@contextlib.contextmanager
def search_budget(search: str) -> Iterator[None]:
    """A block whose trainings take `training_steps` of the `search` budget."""
    if search not in (FULL, QUICK):
        raise ValueError(f"search budget {search!r}: {FULL} or {QUICK}")
    token = _steps_fraction.set(QUICK_STEPS_FRACTION if search == QUICK else 1.0)
    try:
        yield
    finally:
        _steps_fraction.reset(token)


def training_steps(steps: int) -> int:
    """The optimiser steps a training set to `steps` takes in the current block (at least 1)."""
    return max(1, round(steps * _steps_fraction.get()))
