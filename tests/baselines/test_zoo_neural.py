"""The zoo's neural families (lstm, neural_ode, fno, deeponet, kan), each with its real library
on the CPU: seeded forecasts repeat bit for bit and change with the seed; each forecasts two
clean oscillators (sin and cos of two periods; the exact continuation, numpy) far better than
zeros; the neural ODE follows a linear system's exact flow expm(A t) x0 (scipy); the training
windows match a plain construction; a pair's prediction through `pair_prediction`; a missing
library names the extra; pykan writes nothing; registering a family imports no heavy library
and forecasting prints nothing.

Training budgets are the families' own except where only the mechanics are checked
(determinism, shapes, files), which train for a few steps (`few_steps`).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from scipy.linalg import expm
from zoo_pair_checks import PAIR

from seisctf.baselines.zoo import torch_training as tt
from seisctf.baselines.zoo.family import ZooFamily
from seisctf.baselines.zoo.predict import pair_prediction
from seisctf.ctf_json import CtfPair
from seisctf.errors import InvalidInput
from seisctf.registry import BASELINES

FAMILIES = ("lstm", "neural_ode", "fno", "deeponet", "kan")
HEAVY = ("torch", "torchdiffeq", "neuralop", "deepxde", "kan")
PERIODS = (20.0, 33.0)  # rows; the oscillators' periods
PHASES = (0.0, 1.0)


def family_module(name: str) -> ModuleType:
    """The family's module (importing it registers the family)."""
    return importlib.import_module(f"seisctf.baselines.zoo.{name}")


def spec(name: str) -> ZooFamily:
    family_module(name)
    model = BASELINES[name].model
    assert isinstance(model, ZooFamily)
    return model


def sines(rows: np.ndarray) -> np.ndarray:
    """(time, 4) two harmonic oscillators of PERIODS and PHASES at the row indices `rows`:
    sin and cos of each, the exact system."""
    angles = 2 * np.pi * np.asarray(rows, dtype=np.float64)[:, None] / np.array(PERIODS)
    angles = angles + np.array(PHASES)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


@pytest.fixture
def few_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every family trains for 20 mini-batches."""
    for name in FAMILIES:
        monkeypatch.setattr(family_module(name), "STEPS", 20)


@pytest.mark.parametrize("name", FAMILIES)
def test_seed_repeats_the_forecast_bit_for_bit_and_another_seed_changes_it(name, few_steps):
    model = spec(name)
    assert model.seeded
    series = [sines(np.arange(0, 120)), sines(np.arange(130, 170))]
    settings = model.grid[0]
    threads = torch.get_num_threads()
    numpy_state = np.random.get_state()
    python_state = random.getstate()
    torch_state = torch.get_rng_state()
    first = model.forecast(series, 12, settings, 3)
    # the caller's thread count and random states are left as they were
    assert torch.get_num_threads() == threads
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])
    assert random.getstate() == python_state
    assert torch.equal(torch.get_rng_state(), torch_state)
    # whatever the caller draws in between, however many threads it runs and whatever its
    # default dtype, the seed decides
    torch.rand(7), np.random.random(7), random.random()
    torch.set_num_threads(threads + 1)
    torch.set_default_dtype(torch.float64)
    try:
        again = model.forecast(series, 12, settings, 3)
        assert torch.get_num_threads() == threads + 1
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_num_threads(threads)
        torch.set_default_dtype(torch.float32)
    other = model.forecast(series, 12, settings, 4)
    assert first.shape == (12, 4) and first.dtype == np.float64
    assert np.isfinite(first).all()
    assert np.array_equal(first, again)
    assert not np.allclose(first, other, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", FAMILIES)
def test_forecast_of_clean_sines_follows_their_exact_continuation(name):
    model = spec(name)
    series = [sines(np.arange(0, 360)), sines(np.arange(380, 440))]
    truth = sines(np.arange(440, 460))
    forecast = model.forecast(series, 20, model.grid[0], 0)
    error = np.linalg.norm(forecast - truth) / np.linalg.norm(truth)
    assert error < 0.2, f"{name}: relative error {error:.3f} (zeros: 1)"


def test_neural_ode_follows_a_linear_systems_exact_flow():
    from seisctf.baselines.zoo.neural_ode import neural_ode

    a = np.array([[-0.03, 0.3], [-0.3, -0.03]])  # a decaying rotation, time in rows
    flow = expm(a)  # one row ahead
    rng = np.random.default_rng(5)
    series = []
    for rows in (80, 80, 80, 30):
        x = np.empty((rows, 2))
        x[0] = rng.normal(size=2) * 1.5
        for t in range(1, rows):
            x[t] = flow @ x[t - 1]
        series.append(x)
    last = series[-1][-1]
    exact = np.stack([expm(a * k) @ last for k in range(1, 21)])
    forecast = neural_ode(series, 20, {"hidden": 64, "learning_rate": 2e-2}, 0)
    error = np.linalg.norm(forecast - exact) / np.linalg.norm(exact)
    assert error < 0.1, f"relative error {error:.4f}"


def test_training_windows_never_cross_series_and_match_a_plain_construction():
    rng = np.random.default_rng(0)
    series = [rng.normal(size=(rows, 3)) for rows in (10, 3, 7, 5)]
    inputs, targets = tt.windows(series, 2, 3)
    expected_in, expected_out = [], []
    for x in series:
        for start in range(x.shape[0] - 5 + 1):
            expected_in.append(x[start : start + 2])
            expected_out.append(x[start + 2 : start + 5])
    assert np.array_equal(inputs, np.stack(expected_in))
    assert np.array_equal(targets, np.stack(expected_out))
    assert inputs.shape == (6 + 3 + 1, 2, 3)
    with pytest.raises(ValueError, match="no series has 5 rows"):
        tt.windows([x[:4] for x in series], 2, 3)
    # a history shorter than the window is padded with its first row
    assert np.array_equal(tt.last_rows(series[1], 5), series[1][[0, 0, 0, 1, 2]])


@pytest.mark.parametrize("name", FAMILIES)
def test_pair_prediction_has_the_pairs_shape_and_records_the_search(name, few_steps):
    inputs = [sines(np.arange(300)) @ np.random.default_rng(1).normal(size=(4, 5))]
    prediction = pair_prediction(spec(name), PAIR, inputs, seed=0)
    assert prediction.prediction.shape == (50, 5)
    assert prediction.prediction.dtype == np.float32
    assert np.isfinite(prediction.prediction).all()
    assert prediction.selection is not None
    record = prediction.record()
    assert record["selection"]["budget"] == len(spec(name).grid) == 4
    assert record["selection"]["holdout_rows"] == 50
    assert dict(prediction.settings) in [dict(s) for s in spec(name).grid]


@pytest.mark.parametrize("name", FAMILIES)
def test_a_missing_library_names_the_extra(name):
    missing = dataclasses.replace(spec(name), module="not_installed_x")
    pair = CtfPair(
        id=1,
        train=("X1train",),
        test="X1test",
        metrics=("short_time", "long_time"),
        burn_in=None,
        start_index=100,
        shape=(10, 3),
    )
    with pytest.raises(InvalidInput, match=r"seisctf\[zoo\]"):
        pair_prediction(missing, pair, [sines(np.arange(100))])


def test_kan_writes_nothing_in_the_working_folder(tmp_path, monkeypatch, few_steps):
    monkeypatch.chdir(tmp_path)
    model = spec("kan")
    forecast = model.forecast([sines(np.arange(100))], 5, model.grid[0], 0)
    assert np.isfinite(forecast).all()
    assert list(tmp_path.iterdir()) == []


def test_registering_imports_no_heavy_library_and_forecasting_prints_nothing(tmp_path):
    script = f"""
import sys
import numpy as np
for name in {FAMILIES!r}:
    __import__("seisctf.baselines.zoo." + name)
heavy = [name for name in {HEAVY!r} if name in sys.modules]
assert not heavy, heavy
from seisctf.registry import BASELINES
from seisctf.baselines.zoo import deeponet, fno, kan
from seisctf.baselines.zoo.predict import pair_prediction
from seisctf.ctf_json import CtfPair
pair = CtfPair(id=1, train=("X1train",), test="X1test", metrics=("short_time",), burn_in=None,
               start_index=100, shape=(5, 2))
x = np.sin(np.arange(100)[:, None] / np.array([5.0, 7.0]))
for module in (deeponet, fno, kan):
    module.STEPS = 2
    pair_prediction(BASELINES[module.__name__.rsplit(".", 1)[1]].model, pair, [x])
"""
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    environment.pop("DDE_BACKEND", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    assert list(tmp_path.iterdir()) == []
