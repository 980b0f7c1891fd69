"""Checks every library-backed zoo family passes on a small CTF pair, and the known systems its
tests fit: one pair's prediction (shape, finite values, the hold-out's record) on a smooth
wavefield, and the message naming the `zoo` extra when the family's library is missing."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import warnings

import numpy as np
import pytest
from conftest import smooth_wavefield

from seisctf import conventions as cv
from seisctf.baselines.zoo.predict import pair_prediction
from seisctf.ctf_json import CtfPair
from seisctf.errors import InvalidInput
from seisctf.registry import BASELINES

PAIR = CtfPair(
    id=2,
    train=("X1train",),
    test="X1test",
    metrics=("short_time", "long_time"),
    burn_in=None,
    start_index=1000,
    shape=(50, 5),
)


def pair_inputs() -> list[np.ndarray]:
    """The pair's one input: 200 rows of travelling plane waves on 5 sensors (float32, as a
    bundle's arrays are)."""
    field = smooth_wavefield(n_time=200, n_sensor=5, seed=11)[cv.WAVEFIELD_VAR]
    return [np.asarray(field[0])]


def check_pair_prediction(name: str, seed: int = 0) -> None:
    """The family's prediction of PAIR: float32 of the pair's shape, finite, not diverged, with
    the settings chosen among its grid and a hold-out error for every grid entry; made without
    a print or a warning reaching the caller (the library's are dropped)."""
    model = BASELINES[name].model
    printed, errors = io.StringIO(), io.StringIO()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(errors),
    ):
        warnings.simplefilter("error")
        predicted = pair_prediction(model, PAIR, pair_inputs(), seed)
    assert printed.getvalue() == errors.getvalue() == ""
    assert predicted.prediction.shape == PAIR.shape
    assert predicted.prediction.dtype == np.float32
    assert np.isfinite(predicted.prediction).all()
    assert not predicted.diverged
    assert predicted.settings in model.grid
    record = predicted.record()["selection"]
    assert record["budget"] == len(model.grid) == len(record["errors"])
    assert record["holdout_rows"] == 50
    assert any(error is not None for error in record["errors"])


def check_missing_library(name: str) -> None:
    """Without its library, the family's prediction is refused naming the extra to install."""
    model = dataclasses.replace(BASELINES[name].model, module="seisctf_absent_zoo_library")
    with pytest.raises(InvalidInput, match=r"pip install 'seisctf\[zoo\]'"):
        pair_prediction(model, PAIR, pair_inputs())


def linear_map(eigenvalues: np.ndarray, seed: int) -> np.ndarray:
    """A real (n, n) matrix with the given eigenvalues (complex ones in conjugate pairs, each
    pair once with positive imaginary part), in a random orthonormal basis."""
    blocks = []
    for value in eigenvalues:
        if value.imag == 0:
            blocks.append(np.array([[value.real]]))
        else:
            blocks.append(np.array([[value.real, -value.imag], [value.imag, value.real]]))
    size = sum(block.shape[0] for block in blocks)
    diagonal = np.zeros((size, size))
    at = 0
    for block in blocks:
        diagonal[at : at + block.shape[0], at : at + block.shape[0]] = block
        at += block.shape[0]
    basis, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((size, size)))
    return basis @ diagonal @ basis.T


def trajectory(matrix: np.ndarray, start: np.ndarray, rows: int) -> np.ndarray:
    """(rows, n): x[0] = start, x[t+1] = A x[t]."""
    x = np.empty((rows, matrix.shape[0]))
    x[0] = start
    for t in range(rows - 1):
        x[t + 1] = matrix @ x[t]
    return x


def continuation(matrix: np.ndarray, last: np.ndarray, steps: int) -> np.ndarray:
    """(steps, n): A^k last for k = 1 … steps (numpy's matrix powers)."""
    return np.stack([np.linalg.matrix_power(matrix, k) @ last for k in range(1, steps + 1)])


def matched(found: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Each expected value's distance to the nearest found one."""
    return np.abs(expected[:, None] - found[None, :]).min(axis=1)
