"""Where `seisctf score ctf|picks` puts its results: without --json the JSON goes to stdout; with
--json FILE it goes to the file only, stdout gets a short table (one row per submission, its
scores to 0.01), and nothing at all with --quiet."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import noisy_copy, write_tiny_truth
from event_window_fixtures import RATE, write_picking_windows

from seisctf import conventions as cv
from seisctf.cli import main

SECRET = "test-secret-score-output"


@pytest.fixture(scope="module")
def ctf(tmp_path_factory):
    """(truth URL, .npz submission) of a tiny bundle."""
    root = tmp_path_factory.mktemp("ctf")
    truth_url, _, truth = write_tiny_truth(root, SECRET)
    path = root / "noisy.npz"
    np.savez(path, **noisy_copy(truth, seed=5, level=0.3))
    return truth_url, path


@pytest.fixture(scope="module")
def picks(tmp_path_factory):
    """(event-window store URL, CSV pick table in seconds) for every trace."""
    root = tmp_path_factory.mktemp("picks")
    url = str(root / "windows.zarr")
    dataset = write_picking_windows(url, n_earthquake=6, n_noise=3)
    p = dataset[cv.P_ARRIVAL_SAMPLE].values / RATE
    table = root / "picks.csv"
    table.write_text(
        "trace_name,detection,p_time_s,s_time_s\n"
        + "".join(
            f"{name},{0.1 if np.isnan(pt) else 0.9},{'' if np.isnan(pt) else pt},"
            f"{'' if np.isnan(st) else st / RATE}\n"
            for name, pt, st in zip(
                dataset[cv.TRACE_NAME].values, p, dataset[cv.S_ARRIVAL_SAMPLE].values, strict=True
            )
        )
    )
    return url, table


def _argv(kind: str, ctf, picks) -> list[str]:
    truth, submission = ctf if kind == "ctf" else picks
    argv = ["score", kind, "--truth", str(truth), "--submission", str(submission)]
    return argv + (["--split", "all"] if kind == "picks" else [])


@pytest.mark.parametrize("kind", ["ctf", "picks"])
def test_json_goes_to_the_file_and_stdout_gets_a_table_or_nothing(
    kind, ctf, picks, tmp_path, capsys, dask_cluster
):
    argv = [*_argv(kind, ctf, picks), "--scheduler", dask_cluster.address]
    assert main([*argv, "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)  # no --json: the JSON on stdout

    out = tmp_path / "quiet.json"
    assert main([*argv, "--quiet", "--json", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(out.read_text()) == printed

    out = tmp_path / "table.json"
    assert main([*argv, "--json", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert json.loads(out.read_text()) == printed
    assert "{" not in stdout and '"scores"' not in stdout
    assert len(stdout.splitlines()) < 15, stdout
    for name, value in printed["scores"].items():
        assert name in stdout and f"{value:.2f}" in stdout, (name, stdout)
    assert printed["name"] in stdout
    if kind == "ctf":
        assert "AvgScore" in stdout and f"{printed['avg_score']:.2f}" in stdout
