"""The reduced space a zoo model works in: the leading POD modes of a pair's inputs.

POD (proper orthogonal decomposition): the inputs, stacked along time and centred on their mean
row, are `U S Vᵀ`; the first r columns of V are the spatial modes and a row x has the
coefficients (x − mean) V_r, scaled by one number (the coefficients' RMS over the inputs) so
that every model sees values of order 1. A model that works on the sensors gets the sensors,
centred and scaled the same way. Back-projection undoes each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PodBasis:
    """`mean` (sensors,), `modes` (sensors, rank) or None (the sensors themselves), `scale`
    (one number: the RMS of the centred, projected inputs)."""

    mean: np.ndarray
    modes: np.ndarray | None
    scale: float

    @property
    def rank(self) -> int | None:
        """The number of POD modes kept; None when the model works on the sensors."""
        return None if self.modes is None else self.modes.shape[1]

    def project(self, rows: np.ndarray) -> np.ndarray:
        """(time, sensors) -> (time, rank or sensors) scaled coefficients."""
        centred = rows - self.mean
        coefficients = centred if self.modes is None else centred @ self.modes
        return coefficients / self.scale

    def expand(self, coefficients: np.ndarray) -> np.ndarray:
        """(time, rank or sensors) scaled coefficients -> (time, sensors)."""
        unscaled = coefficients * self.scale
        rows = unscaled if self.modes is None else unscaled @ self.modes.T
        return rows + self.mean


def fit_basis(series: Sequence[np.ndarray], rank: int | None) -> PodBasis:
    """The basis of `series` ((time, sensors) arrays): `rank` POD modes (at most the stacked
    rows' and the sensors' number), or the sensors when `rank` is None or not smaller than
    their count."""
    stacked = np.concatenate(list(series), axis=0)
    mean = stacked.mean(axis=0)
    centred = stacked - mean
    modes = None
    if rank is not None and rank < stacked.shape[1]:
        _, _, right = np.linalg.svd(centred, full_matrices=False)
        modes = right[: min(rank, right.shape[0])].T
    projected = centred if modes is None else centred @ modes
    scale = float(np.sqrt(np.mean(projected**2)))
    return PodBasis(mean, modes, scale if scale > 0 else 1.0)
