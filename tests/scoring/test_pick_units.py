"""Pick times given in samples instead of seconds: `seisctf score picks` warns in one line on
stderr naming the column whose picks mostly lie beyond their windows, and scores exactly as the
independent per-trace reference does; picks in seconds get no warning."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from event_window_fixtures import RATE, write_picking_windows
from pick_reference import reference_score

from seisctf import conventions as cv
from seisctf.cli import main


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("units") / "windows.zarr")
    return url, write_picking_windows(url, n_earthquake=10, n_noise=5)


def _table(dataset, p_scale: float) -> pd.DataFrame:
    """Every trace: P picks at the arrival sample × `p_scale` (1 / RATE: seconds; 1: samples),
    S picks in seconds, 0.1 s late."""
    p = dataset[cv.P_ARRIVAL_SAMPLE].values
    s = dataset[cv.S_ARRIVAL_SAMPLE].values
    return pd.DataFrame(
        {
            "trace_name": dataset[cv.TRACE_NAME].values.astype(str),
            "detection": np.where(np.isnan(p), 0.1, 0.9),
            "p_time_s": p * p_scale + 0.1,
            "s_time_s": s / RATE + 0.1,
        }
    )


def _expected_scores(dataset, table: pd.DataFrame) -> dict:
    truth = zip(
        dataset[cv.TRACE_NAME].values.astype(str),
        dataset[cv.P_ARRIVAL_SAMPLE].values,
        dataset[cv.S_ARRIVAL_SAMPLE].values,
        strict=True,
    )
    reference = reference_score(truth, RATE, table.itertuples(index=False))
    return {f"{key}_f1": reference[key]["f1"] for key in ("detection", "p", "s")}


@pytest.mark.parametrize("unit", ["samples", "seconds"])
def test_picks_in_samples_get_a_one_line_warning(unit, store, tmp_path, capsys, dask_cluster):
    url, dataset = store
    table = _table(dataset, 1.0 if unit == "samples" else 1 / RATE)
    submission = tmp_path / f"{unit}.csv"
    table.to_csv(submission, index=False)
    out = tmp_path / "result.json"
    argv = ["score", "picks", "--truth", url, "--submission", str(submission), "--split", "all"]
    argv += ["--json", str(out), "--quiet", "--scheduler", dask_cluster.address]
    assert main(argv) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "warning" in line]
    if unit == "samples":
        assert len(warned) == 1, err
        assert warned[0].startswith("seisctf: warning:") and "p_time_s" in warned[0]
        assert "s_time_s" not in warned[0] and "samples" in warned[0]
    else:
        assert warned == [], err
    scores = json.loads(out.read_text())["scores"]
    assert scores == pytest.approx(_expected_scores(dataset, table))
    assert scores["s_f1"] == 1.0 and (scores["p_f1"] == 0.0) == (unit == "samples")
