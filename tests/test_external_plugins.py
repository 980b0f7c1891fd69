"""A package outside seisctf adds an ingest, a transform, a metric and a baseline through entry
points only (`tests/data/plugin_package`, installed here with `pip install -e` and uninstalled
at the end): `seisctf --help` lists them, `seisctf ingest csv_readings` takes flags made from
its options dataclass, a recipe uses the ingest and the transform, `score ctf --metric` reports
the metric, `seisctf baseline` writes the baseline's submission, and once uninstalled they are
gone. The commands run in their own processes, as users run them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import noisy_copy, write_tiny_truth
from submission_writers import write_npz

from seisctf import conventions as cv

PACKAGE = Path(__file__).parent / "data" / "plugin_package"
DISTRIBUTION = "seisctf-csv-readings"
SEISCTF = [sys.executable, "-m", "seisctf.cli"]
SECRET = "external-plugins-test-secret-0123456789"


def pip(*argv: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr


def seisctf(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SEISCTF, *argv], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[Path]:
    """The plugin package, copied (its build writes beside it) and installed editable."""
    source = tmp_path_factory.mktemp("plugin") / "plugin_package"
    shutil.copytree(PACKAGE, source)
    pip("install", "--no-deps", "--no-build-isolation", "-e", str(source))
    try:
        yield source
    finally:
        pip("uninstall", "-y", DISTRIBUTION)


@pytest.fixture(scope="module")
def readings(tmp_path_factory) -> tuple[Path, np.ndarray]:
    values = np.random.default_rng(4).standard_normal((50, 3))
    path = tmp_path_factory.mktemp("readings") / "readings.csv"
    np.savetxt(path, values, delimiter=",")
    return path, values


def test_the_help_lists_the_installed_plugins(installed):
    shown = seisctf("--help")
    assert shown.returncode == 0, shown.stderr
    plugins = shown.stdout.split("installed plugins")[1]
    lines = {line.split(":")[0].strip(): line for line in plugins.splitlines() if ":" in line}
    assert "csv_readings" in lines["ingests"] and "waveform_archive" in lines["ingests"]
    assert "gain" in lines["transforms"] and "peak_error" in lines["metrics"]
    assert "damped_persistence" in lines["baselines"] and "persistence" in lines["baselines"]
    flags = seisctf("ingest", "csv_readings", "--help")
    assert flags.returncode == 0, flags.stderr
    assert "--sampling-rate-hz" in flags.stdout and "samples a second, Hz" in flags.stdout


def test_the_ingest_is_a_command_with_flags_from_its_options(installed, readings, tmp_path):
    path, values = readings
    out = tmp_path / "cli.zarr"
    argv = ["ingest", "csv_readings", "--path", str(path), "--sampling-rate-hz", "20"]
    done = seisctf(*argv, "--scale", "2", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    stored = xr.open_zarr(out)
    np.testing.assert_allclose(stored["data"].values, (2 * values).astype(np.float32))
    np.testing.assert_allclose(stored["time"].values, np.arange(50) / 20.0)
    # A required option is a required flag (argparse's usage error, exit 2) ...
    missing = seisctf("ingest", "csv_readings", "--path", str(path), "--out", str(out))
    assert missing.returncode == 2 and "--sampling-rate-hz" in missing.stderr
    # ... and the options' bounds are checked before any work (exit 3).
    negative = seisctf(*argv[:4], "--sampling-rate-hz", "-5", "--out", str(tmp_path / "n.zarr"))
    assert negative.returncode == 3, negative.stderr
    assert "--sampling-rate-hz" in negative.stderr and not (tmp_path / "n.zarr").exists()


def test_a_recipe_uses_the_ingest_and_the_transform(installed, readings, tmp_path):
    path, values = readings
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"recipe: 1\nname: csv-readings\nsource:\n  csv_readings:\n"
        f"    path: {path}\n    sampling_rate_hz: 20\n"
        "transforms:\n  - gain: {factor: 3}\n"
        "outputs:\n  store:\n    url: out.zarr\n"
    )
    done = seisctf("build", str(recipe), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    built = xr.open_zarr(tmp_path / "out.zarr")
    np.testing.assert_allclose(built["data"].values, 3 * values.astype(np.float32), rtol=1e-6)
    # An option the options class does not declare is refused before any work.
    recipe.write_text(recipe.read_text().replace("{factor: 3}", "{factor: 3, offset: 1}"))
    refused = seisctf("build", str(recipe), "--quiet", cwd=tmp_path)
    assert refused.returncode == 3 and "offset" in refused.stderr


def test_score_ctf_reports_the_metric_beside_the_e_scores(installed, tmp_path):
    truth_url, manifest, truth = write_tiny_truth(tmp_path, SECRET)
    prediction = noisy_copy(truth, seed=7, level=0.3)
    submission = write_npz(prediction, tmp_path / "noisy.npz")
    scores = tmp_path / "scores.json"
    argv = ["score", "ctf", "--truth", truth_url, "--submission", str(submission), "--quiet"]
    done = seisctf(*argv, "--metric", "peak_error", "--json", str(scores))
    assert done.returncode == 0, done.stderr
    result = json.loads(scores.read_text())
    expected = {}
    for score, pair, metric in cv.scored_metrics(manifest.pairs):
        rows = cv.window_rows(metric, manifest)
        window_truth = truth[pair.test][rows].astype(np.float64)
        window_prediction = prediction[pair.test][rows].astype(np.float64)
        error = np.abs(window_truth - window_prediction).max() / np.abs(window_truth).max()
        expected[score] = error
    assert set(result["plugin_scores"]["peak_error"]) == set(cv.SCORE_NAMES)
    for score, value in expected.items():
        assert result["plugin_scores"]["peak_error"][score] == pytest.approx(value, rel=1e-12)
    # A participant's released view never carries them (its keys are an allow-list).
    released_file = tmp_path / "released.json"
    release = ["--release", "--participant", "team", "--quota-db", str(tmp_path / "q.sqlite")]
    released = seisctf(*argv, *release, "--metric", "peak_error", "--json", str(released_file))
    assert released.returncode == 0, released.stderr
    view = json.loads(released_file.read_text())
    assert "public_score" in view and "plugin_scores" not in json.dumps(view)
    unknown = seisctf(*argv, "--metric", "no_such_metric", "--json", str(tmp_path / "u.json"))
    assert unknown.returncode == 3 and "no_such_metric" in unknown.stderr


def test_the_baseline_writes_a_submission(installed, tmp_path):
    """`seisctf baseline NAME` of the package's baseline: its last input row, damped, on every
    pair; scored like any submission."""
    truth_url, manifest, _ = write_tiny_truth(tmp_path, SECRET)
    public_url, submission = str(tmp_path / "public.zarr"), str(tmp_path / "damped.zarr")
    done = seisctf("baseline", "damped_persistence", "--public", public_url, "--out", submission)
    assert done.returncode == 0, done.stderr
    public, written = zarr.open_group(public_url, mode="r"), zarr.open_group(submission, mode="r")
    for pair in manifest.pairs:
        inputs = [*pair.train, *([pair.burn_in] if pair.burn_in else [])]
        last_row = public[inputs[-1]][-1].astype(np.float32) * np.float32(0.5)
        expected = np.broadcast_to(last_row, pair.shape)
        np.testing.assert_array_equal(written[pair.test][:], expected)
    scored = seisctf("score", "ctf", "--truth", truth_url, "--submission", submission, "--quiet")
    assert scored.returncode == 0, scored.stderr


def test_uninstalled_plugins_are_gone(installed, readings, tmp_path):
    path, _ = readings
    pip("uninstall", "-y", DISTRIBUTION)
    try:
        shown = seisctf("--help")
        assert shown.returncode == 0, shown.stderr
        plugins = shown.stdout.split("installed plugins")[1]
        assert "waveform_archive" in plugins and "csv_readings" not in plugins
        assert "gain" not in plugins and "peak_error" not in plugins
        assert "damped_persistence" not in plugins
        gone_baseline = seisctf("baseline", "damped_persistence", "--public", "p", "--out", "o")
        assert gone_baseline.returncode == 2 and "damped_persistence" in gone_baseline.stderr
        gone = seisctf("ingest", "csv_readings", "--path", str(path), "--out", "x.zarr")
        assert gone.returncode == 2 and "csv_readings" in gone.stderr
    finally:
        pip("install", "--no-deps", "--no-build-isolation", "-e", str(installed))
