"""reservoirpy's zoo family `esn`: bit-identical for a fixed seed, another seed another
reservoir; a sine wave's forecast far better than persistence or zeros; and the family's
prediction of a small pair."""

from __future__ import annotations

import numpy as np
from zoo_pair_checks import check_missing_library, check_pair_prediction

from seisctf.baselines.zoo import esn

SETTINGS = {"units": 200, "radius": 0.9, "leak": 0.5, "ridge": 1e-4}


def sines(start: int, rows: int) -> np.ndarray:
    """(rows, 3): two sinusoids (periods about 63 and 27 rows) from row `start`, RMS 1."""
    t = np.arange(start, start + rows, dtype=np.float64)[:, None]
    return np.sqrt(2.0) * np.hstack([np.sin(0.1 * t), np.cos(0.1 * t), np.sin(0.23 * t + 1.0)])


def test_esn_is_deterministic_for_a_seed_and_differs_between_seeds() -> None:
    inputs = [sines(0, 250), sines(300, 150)]
    first = esn.esn(inputs, 40, SETTINGS, seed=3)
    again = esn.esn(inputs, 40, SETTINGS, seed=3)
    other = esn.esn(inputs, 40, SETTINGS, seed=4)
    assert first.shape == (40, 3)
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - other).max() > 1e-9


def test_esn_forecasts_sines_far_better_than_persistence_or_zeros() -> None:
    inputs = [sines(0, 250), sines(300, 150)]
    truth = sines(450, 40)
    forecast = esn.esn(inputs, 40, SETTINGS, seed=0)
    error = np.linalg.norm(forecast - truth)
    assert error < 0.01 * np.linalg.norm(truth)  # zeros' error
    assert error < 0.01 * np.linalg.norm(inputs[-1][-1] - truth)  # persistence's


def test_pair_prediction() -> None:
    check_pair_prediction("esn")


def test_missing_library_names_the_zoo_extra() -> None:
    check_missing_library("esn")


def test_importing_reservoirpy_leaves_no_folder_in_the_temporary_directory(tmp_path):
    """reservoirpy makes `reservoirpy-temp-<uuid>` in the temporary directory of every process
    that imports it; the zoo removes it (empty) after its import."""
    import os
    import subprocess
    import sys

    code = (
        "from seisctf.baselines.zoo import esn\n"
        "from seisctf.registry import BASELINES\n"
        "BASELINES['esn'].model.require()\n"
        f"import reservoirpy; assert reservoirpy._TEMPDIR.startswith({str(tmp_path)!r})\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)}, check=True
    )
    assert list(tmp_path.iterdir()) == []
