"""benchmarks/scale_scheduler.py at a small size: real `dask scheduler` and `dask worker`
processes run both graph shapes, each checked against the sum computed here, and the table has a
row per shape and size with the scheduler's memory measured from its own process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import scale_scheduler  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with scale_scheduler.external_cluster(tmp_path_factory.mktemp("scheduler")) as running:
        yield running


@pytest.mark.parametrize("shape", list(scale_scheduler.SHAPES))
def test_graph_runs_and_is_counted(cluster, shape):
    address, scheduler_pid = cluster
    figures = scale_scheduler.measure(address, scheduler_pid, shape, 300)
    # independent: 300 adds; blockwise: arange, +1 and the sum's tree over 300 chunks
    if shape.startswith("independent"):
        assert figures["tasks"] == 300
    else:
        assert figures["tasks"] > 600
    if shape in scale_scheduler.RUN_THEMSELVES:  # built and run wave by wave
        assert figures["build_s"] < 0.01 < figures["run_s"]
    else:
        assert 0 < figures["build_s"] < figures["run_s"] + figures["build_s"]
    assert 20 * 2**20 < figures["scheduler_peak_rss"] < 2**30


def test_wrong_result_is_refused(cluster, monkeypatch):
    address, scheduler_pid = cluster
    monkeypatch.setattr(scale_scheduler, "_expected", lambda n_tasks: -1)
    with pytest.raises(AssertionError, match="independent of 10 tasks"):
        scale_scheduler.measure(address, scheduler_pid, "independent", 10)
