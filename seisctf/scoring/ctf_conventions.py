"""The two CTF scoring conventions as objects (`CONVENTIONS`, by the name a command or a result
gives): what each measures a task's error with (docs/scoring.md has the formulas).

`reference` reproduces the published reference scorer: short-time and reconstruction errors in
the matrix 2-norm, the long-time error on the linear power spectrum averaged over time. `paper`
follows the paper as written: Frobenius norms, and the log spectrum row by row."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.scoring import metrics


@dataclass(frozen=True)
class Convention:
    """How one convention measures a CTF task's error.

    `frobenius`: the short-time and reconstruction norms are Frobenius norms (their statistic a
    sum of squares), else matrix 2-norms (largest singular values, whose Grams the parts of a
    truth share). `spectrum(rows, modes)`: the long-time kernel on the last k_long rows (k, n).
    `linear_spectrum`: that spectrum is linear in |FFT|², so a huge submission's spectrum is
    taken of its scaled values and scaled back exactly (a log spectrum is not)."""

    name: str
    frobenius: bool
    spectrum: Callable[[np.ndarray, int], np.ndarray]
    linear_spectrum: bool

    def norm(self, statistic: float) -> float:
        """The norm from its statistic: the square root of a sum of squares, or the 2-norm."""
        return math.sqrt(float(statistic)) if self.frobenius else float(statistic)


REFERENCE = Convention(
    "reference", frobenius=False, spectrum=metrics.reference_spectrum, linear_spectrum=True
)
PAPER = Convention(
    "paper", frobenius=True, spectrum=metrics.paper_log_spectrum, linear_spectrum=False
)
CONVENTIONS = {convention.name: convention for convention in (REFERENCE, PAPER)}
assert tuple(CONVENTIONS) == cv.CONVENTIONS  # the names the command line offers


def convention_named(name: str) -> Convention:
    """The convention a command or a result names (bad input otherwise)."""
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise InvalidInput("convention", f"{name!r}: choose one of {list(CONVENTIONS)}") from None
