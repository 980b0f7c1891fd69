"""One zoo model's prediction of one CTF pair, from the pair's public inputs alone.

- Forecast pairs: the inputs (training matrices, then the burn-in) are reduced to their
  `reduced_rank` leading POD modes (`reduction`) when the model works in a reduced space and
  the sensors outnumber them; the model's settings are chosen on a hold-out cut from the
  inputs (`selection`); it is then fitted on all the inputs with those settings and forecasts
  the pair's rows, projected back onto the sensors.
- Reconstruction pairs: the model's own denoiser if it has one (its first settings), else the
  shared reconstruction chosen from public data (`denoise.choose_denoiser`: Wiener filter,
  truncated SVD or the input as given), the same for every model that has none.

A forecast that is not finite everywhere (a diverging model) is submitted as zeros and recorded
(`PairPrediction.diverged`). Everything is numpy on the whole pair: results depend on the data,
the settings and the seed, never on chunks or workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.baselines.zoo.budget import FULL, QUICK, search_budget
from seisctf.baselines.zoo.denoise import SVD, denoised
from seisctf.baselines.zoo.reduction import fit_basis
from seisctf.baselines.zoo.selection import Selection, choose_settings, guarded_forecast
from seisctf.baselines.zoo.spec import ZooFamily
from seisctf.ctf_json import CtfPair


@dataclass(frozen=True)
class PairPrediction:
    """A model's prediction of one pair: `prediction` (float32, `pair.shape`), the chosen
    `settings` with the hold-out's record (`selection`), the POD `rank` it worked at (None: the
    sensors), and whether its forecast diverged (then `prediction` is zeros)."""

    prediction: np.ndarray
    settings: Mapping[str, Any]
    selection: Selection | None = None
    rank: int | None = None
    diverged: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def record(self) -> dict[str, Any]:
        """JSON of how the prediction was made (the submission's attrs keep it per pair)."""
        return {
            "settings": dict(self.settings),
            "rank": self.rank,
            "diverged": self.diverged,
            **({"selection": self.selection.record()} if self.selection else {}),
        }


def pair_prediction(
    model: ZooFamily,
    pair: CtfPair,
    inputs: Sequence[np.ndarray],
    seed: int = 0,
    search: str = FULL,
    denoiser: str | None = None,
) -> PairPrediction:
    """`model`'s prediction of `pair` from its public `inputs` ((time, sensors) arrays in the
    order of `pair.inputs`); `search`: `budget.FULL` or `budget.QUICK` (a smoke test);
    `denoiser`: the shared reconstruction `denoise.choose_denoiser` chose for a reconstruction
    pair (default: the truncated SVD)."""
    model.require()
    series = [np.asarray(x, dtype=np.float64) for x in inputs]
    if cv.METRIC_RECON in pair.metrics:
        return _reconstruction(model, series[0], seed, denoiser or SVD)
    steps = pair.shape[0]
    basis = fit_basis(series, model.reduced_rank)
    reduced = [basis.project(x) for x in series]
    with search_budget(search):
        if search == QUICK:
            selection = Selection(model.grid[0], 0, ())
        else:
            selection = choose_settings(model, reduced, steps, seed)
        forecast = guarded_forecast(model, reduced, steps, selection.settings, seed)
    if forecast is None:
        return PairPrediction(
            np.zeros(pair.shape, np.float32),
            selection.settings,
            selection,
            basis.rank,
            diverged=True,
        )
    prediction = basis.expand(forecast).astype(np.float32)
    return PairPrediction(prediction, selection.settings, selection, basis.rank)


def _reconstruction(
    model: ZooFamily, noisy: np.ndarray, seed: int, denoiser: str
) -> PairPrediction:
    if model.reconstruct is None:
        reconstruction = denoised(noisy, denoiser)
        return PairPrediction(reconstruction.astype(np.float32), {"denoiser": denoiser})
    settings = model.grid[0]
    own = np.asarray(model.reconstruct(noisy, settings, seed), dtype=np.float64)
    if own.shape != noisy.shape or not np.isfinite(own).all():
        return PairPrediction(np.zeros(noisy.shape, np.float32), settings, diverged=True)
    return PairPrediction(own.astype(np.float32), settings)
