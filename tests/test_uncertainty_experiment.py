"""The end-to-end uncertainty experiment (experiments/uncertainty_experiment.py), reduced."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "uncertainty_experiment.py"


@pytest.fixture(scope="module")
def experiment():
    spec = importlib.util.spec_from_file_location("uncertainty_experiment", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.mark.timeout(300)
def test_quick_experiment_end_to_end(experiment, tmp_path):
    config = experiment.QUICK
    result = experiment.run_experiment(tmp_path, config, quiet=True)
    runs = pd.read_csv(tmp_path / "runs.csv")
    # Budget 1: two draws; budget 4 = all four training clusters: one distinct draw.
    draws = {1: 2, 4: 1}
    expected_runs = sum(draws.values()) * (1 + config.seeds)
    assert len(runs) == expected_runs * len(experiment.METRICS)
    assert runs["value"].between(0, 1).all()
    stalta = runs[runs.approach == "stalta"]
    assert stalta["training_seed"].isna().all()
    assert stalta[stalta.metric == "detection_f1"]["value"].min() > 0.5  # non-trivial scores
    report = json.loads((tmp_path / "compare" / "report.json").read_text())
    assert report == result["report"]
    for metric in experiment.METRICS:
        section = report["metrics"][metric]
        assert section["deterministic_approaches"] == ["stalta"]
        assert list(section["identical_draw_budgets"]) == ["4"]
        cells = {(c["approach"], c["budget"]): c for c in section["cells"]}
        assert cells["stalta", "1"]["training_variance"]["estimate"] == 0.0
        assert cells["tiny-cnn", "4"]["data_variance"] is None
        assert cells["tiny-cnn", "1"]["n_runs"] == 2 * config.seeds
        for figure in section["figures"].values():
            assert (tmp_path / "compare" / figure).stat().st_size > 1000
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_runs"] == expected_runs


def test_learner_training_is_seeded(experiment, tmp_path):
    """Same seed, same picks (the training variance is the seeds' doing, nothing else's)."""
    config = experiment.replace(experiment.QUICK, n_events=24, train_steps=5, budgets=(1,))
    data = experiment.build_data(tmp_path, config)
    train, test = data.positions("train"), data.positions("test")
    first = experiment.cnn_rows(data, train, test, 7, config)
    assert np.array_equal(first, experiment.cnn_rows(data, train, test, 7, config), equal_nan=True)
    other = experiment.cnn_rows(data, train, test, 8, config)
    assert not np.array_equal(first, other, equal_nan=True)
