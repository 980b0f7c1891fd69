"""The slice end to end through the command line: embedded LocalCluster, an external
`dask scheduler` with workers, and real S3 on loopback."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import DEMO_SIZES, TINY_LAYOUT_YAML

from seisctf import conventions as cv
from seisctf.cli import main

SMALL = ["--sensors", "64", "--duration", "300"]


@pytest.fixture(scope="module")
def tiny_layout(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("layout") / "tiny.yaml"
    path.write_text(TINY_LAYOUT_YAML)
    return str(path)


def seisctf(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the installed command line in its own process, as users do."""
    result = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *args], capture_output=True, text=True, timeout=600
    )
    if check and result.returncode != 0:
        raise AssertionError(f"seisctf {' '.join(args)} -> {result.returncode}\n{result.stderr}")
    return result


def _store_arrays(root: Path) -> dict[str, np.ndarray]:
    """Every array of every zarr store under root, by relative path."""
    arrays = {}
    for meta in sorted(root.rglob("zarr.json")):
        node = zarr.open(str(meta.parent), mode="r")
        if isinstance(node, zarr.Array):
            arrays[str(meta.parent.relative_to(root))] = node[...]
    return arrays


@pytest.fixture(scope="module")
def local_demo(embedded_demo) -> Path:
    """The demo at DEMO_SIZES with the tiny layout, on its embedded LocalCluster (conftest's,
    shared with test_cluster_config)."""
    return embedded_demo[0]


def test_demo_writes_the_contract_leaderboard(local_demo):
    rows = json.loads((local_demo / "leaderboard.json").read_text())
    by_model = {row["model"]: row for row in rows}
    assert set(by_model) == {"zeros", "persistence", "mean"}
    for row in rows:
        # The demo's truth is regenerable (the published demo secret): every row says so.
        assert set(row) == {"model", "dataset", "convention", "scores", "avg_score", "truth_note"}
        assert row["truth_note"] == cv.PUBLIC_TRUTH_NOTE
        assert row["dataset"] == "global" and row["convention"] == "reference"
        assert list(row["scores"]) == list(cv.SCORE_NAMES)
        assert all(math.isfinite(v) for v in row["scores"].values())
    assert by_model["zeros"]["scores"] == {name: 0.0 for name in cv.SCORE_NAMES}
    assert by_model["zeros"]["avg_score"] == 0.0
    # Persistence of a field with microseisms is no forecast (it may score below zeros), but
    # its reconstructions are the noisy inputs themselves: better than zeros, and better at
    # medium noise (E3) than at high noise (E5).
    persistence = by_model["persistence"]["scores"]
    assert persistence["E3"] > persistence["E5"] > 0.0
    assert rows == sorted(rows, key=lambda r: -r["avg_score"])
    index = local_demo / "leaderboard" / "index.html"
    last_line = (local_demo / "demo-stdout.txt").read_text().splitlines()[-1]
    assert last_line == f"HTML leaderboard: {index.resolve()}"
    assert index.read_text().count("<tr>") == 2 and "dataset-global.html" in index.read_text()
    page = (local_demo / "leaderboard" / "dataset-global.html").read_text()
    ranking = page[page.index('id="ctf1-ranking"') : page.index("</table>")]
    assert ranking.count("<tr>") == 4 and "persistence" in ranking  # header + 3 baselines
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" role="img"') == 4  # radars
    board = seisctf("leaderboard", "--db", str(local_demo / "leaderboard.sqlite"))
    assert "persistence" in board.stdout


def test_truth_itself_scores_100(local_demo, tmp_path):
    truth = str(local_demo / "private" / "truth-global.zarr")
    out = tmp_path / "result.json"
    seisctf(
        "score",
        "ctf",
        "--truth",
        truth,
        "--submission",
        truth,
        "--name",
        "oracle",
        "--json",
        str(out),
        "--plot",
        str(tmp_path / "radar.png"),
        "--quiet",
    )
    result = json.loads(out.read_text())
    assert result["scores"] == {name: 100.0 for name in cv.SCORE_NAMES}
    assert result["avg_score"] == 100.0 and result["truth_sha256_verified"] is True
    contract_keys = {
        "name",
        "dataset",
        "convention",
        "scores",
        "avg_score",
        "raw_scores",
        "truth_sha256_verified",
    }
    assert contract_keys <= set(result) and result["unscorable"] == []
    assert (tmp_path / "radar.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_is_byte_identical_on_an_external_scheduler_with_one_worker(
    local_demo, embedded_demo, dask_cluster_one_worker, tmp_path
):
    workdir = tmp_path / "demo-external"
    _, layout = embedded_demo  # the local demo's own layout file
    seisctf(
        "demo",
        "--workdir",
        str(workdir),
        *DEMO_SIZES,
        "--layout",
        layout,
        "--quiet",
        "--scheduler",
        dask_cluster_one_worker.address,
    )
    local, external = _store_arrays(local_demo), _store_arrays(workdir)
    assert set(local) == set(external) and len(local) > 30
    for name in local:
        assert local[name].tobytes() == external[name].tobytes(), name
    for folder in ("private", "public", "submissions"):
        for meta in (local_demo / folder).rglob("zarr.json"):
            twin = workdir / meta.relative_to(local_demo)
            assert meta.read_bytes() == twin.read_bytes(), meta
    assert json.loads((local_demo / "leaderboard.json").read_text()) == json.loads(
        (workdir / "leaderboard.json").read_text()
    )


def test_slice_on_s3_and_an_external_cluster(s3_server, s3_bucket, dask_cluster, tiny_layout):
    common = ["--scheduler", dask_cluster.address, "--quiet", *s3_server.cli_options()]
    wavefield, public, truth = (
        f"{s3_bucket}/{name}.zarr" for name in ("wavefield", "public", "truth")
    )
    secret = "s3-test-secret-long-enough-to-use"
    seisctf("synth", "global", "--out", wavefield, *SMALL, "--secret", secret, *common)
    opened = xr.open_zarr(wavefield, storage_options=s3_server.storage_options)
    assert opened[cv.WAVEFIELD_VAR].dims == (cv.REALISATION, cv.TIME, cv.SENSOR)
    assert opened[cv.WAVEFIELD_VAR].shape == (10, 300, 64)
    assert opened[cv.WAVEFIELD_VAR].chunks is not None  # lazy, Dask-backed
    seisctf(
        "tasks",
        wavefield,
        "--public",
        public,
        "--truth",
        truth,
        "--layout",
        tiny_layout,
        "--secret",
        secret,
        *common,
    )
    submission = f"{s3_bucket}/persistence.zarr"
    seisctf("baseline", "persistence", "--public", public, "--out", submission, *common)
    result = json.loads(
        seisctf("score", "ctf", "--truth", truth, "--submission", submission, *common).stdout
    )
    assert result["name"] == "persistence" and result["truth_sha256_verified"] is True
    assert all(math.isfinite(v) for v in result["scores"].values())
    oracle = json.loads(
        seisctf(
            "score", "ctf", "--truth", truth, "--submission", truth, "--name", "oracle", *common
        ).stdout
    )
    assert oracle["avg_score"] == 100.0


def test_bad_input_exits_3_without_traceback(tmp_path, capsys):
    code = main(
        [
            "tasks",
            str(tmp_path / "missing.zarr"),
            "--public",
            str(tmp_path / "p"),
            "--truth",
            str(tmp_path / "t"),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 3 and "missing.zarr" in err and "Traceback" not in err
    assert not (tmp_path / "p").exists() and not (tmp_path / "t").exists()
    result = seisctf("leaderboard", "--db", str(tmp_path / "none.sqlite"), check=False)
    assert result.returncode == 3 and "none.sqlite" in result.stderr
    assert "Traceback" not in result.stderr


def test_validation_scoring_and_size_limit_from_the_command_line(local_demo, tmp_path):
    public = str(local_demo / "public" / "bundle-global.zarr")
    group = zarr.open_group(public, mode="r")
    targets = {f"X{i}val": group[f"X{i}val"][...] for i in range(1, 10)}
    np.savez(tmp_path / "val.npz", **targets)
    result = json.loads(
        seisctf(
            "score",
            "ctf",
            "--validation",
            "--public",
            public,
            "--submission",
            str(tmp_path / "val.npz"),
            "--quiet",
        ).stdout
    )
    assert result["scores"] == {name: 100.0 for name in cv.SCORE_NAMES}
    assert result["validation"] is True
    refused = seisctf(
        "score",
        "ctf",
        "--validation",
        "--public",
        public,
        "--submission",
        str(tmp_path / "val.npz"),
        "--max-submission-bytes",
        "1000",
        "--quiet",
        check=False,
    )
    assert refused.returncode == 3 and "val.npz" in refused.stderr
    both = seisctf(
        "score",
        "ctf",
        "--truth",
        public,
        "--validation",
        "--public",
        public,
        "--submission",
        str(tmp_path / "val.npz"),
        "--quiet",
        check=False,
    )
    assert both.returncode == 3 and "--validation" in both.stderr


def test_several_submissions_in_one_command_land_in_the_leaderboard(local_demo, tmp_path):
    truth = str(local_demo / "private" / "truth-global.zarr")
    subs = local_demo / "submissions" / "global"
    db = tmp_path / "lb.sqlite"
    results = json.loads(
        seisctf(
            "score",
            "ctf",
            "--truth",
            truth,
            "--submission",
            str(subs / "zeros.zarr"),
            "--submission",
            str(subs / "persistence.zarr"),
            "--convention",
            "paper",
            "--db",
            str(db),
            "--quiet",
        ).stdout
    )
    assert [r["name"] for r in results] == ["zeros", "persistence"]
    assert all(r["convention"] == "paper" for r in results)
    assert results[0]["scores"] == {name: 0.0 for name in cv.SCORE_NAMES}
    board = seisctf("leaderboard", "--db", str(db)).stdout
    assert "persistence" in board and "paper" in board
