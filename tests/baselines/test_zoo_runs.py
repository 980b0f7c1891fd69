"""The zoo through the command line on a real bundle: submissions a referee scores, resumed
where they stopped, the same bytes on 1 and 2 workers, scores in the leaderboard with the
model's family, library and version, and a runs table `seisctf compare` reads."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import write_tiny_truth
from scipy import signal
from statsmodels.tsa.ar_model import AutoReg

from seisctf import storage
from seisctf.baselines.zoo import linear  # noqa: F401  (registers sensor_ar, pod_var)
from seisctf.baselines.zoo.denoise import (
    DENOISERS,
    choose_denoiser,
    noise_fraction,
    with_simulated_noise,
)
from seisctf.baselines.zoo.reduction import fit_basis
from seisctf.baselines.zoo.selection import choose_settings
from seisctf.ctf_json import CtfPair
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.registry import BASELINES

SECRET = "zoo-runs-secret-0123456789-abcdefghijklmnopq"
MODELS = "sensor_ar,pod_var"


def seisctf(*arguments: str, cwd: Path, one_core: bool = False) -> subprocess.CompletedProcess:
    """Run the CLI; `one_core`: pinned to one core, so its embedded cluster has one worker
    (else one per core of the machine)."""
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    environment.pop("SEISCTF_SCHEDULER", None)
    pinned = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] if one_core else []
    return subprocess.run(
        [*pinned, sys.executable, "-m", "seisctf.cli", *arguments],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zoo")
    write_tiny_truth(root, SECRET)
    return root


@pytest.fixture(scope="module")
def zoo_run(bundle, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`baseline zoo` of MODELS on the embedded cluster (a worker per core), scored into a
    leaderboard: its folder (outputs in `zoo/`) and the run. Read by the scoring test and, as
    the run on every core, by the one-worker comparison."""
    folder = tmp_path_factory.mktemp("zoo-run")
    run = seisctf(
        "baseline", "zoo", "--public", str(bundle / "public.zarr"), "--out", "zoo",
        "--models", MODELS, "--truth", str(bundle / "truth.zarr"), "--db", "board.sqlite",
        cwd=folder,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return folder, run


def array_digests(group: Path) -> dict[str, str]:
    opened = zarr.open_group(str(group), mode="r")
    return {
        name: hashlib.sha256(np.asarray(array[...]).tobytes()).hexdigest()
        for name, array in opened.arrays()
    }


def test_the_zoo_scores_records_and_feeds_compare(bundle, zoo_run):
    tmp_path, run = zoo_run
    assert "wrote zoo/sensor_ar-seed0.zarr" in run.stdout
    attrs = storage.read_attrs(StoreLocation(str(tmp_path / "zoo" / "pod_var-seed0.zarr")))
    record = attrs["zoo"]
    assert (record["model"], record["library"], record["seeded"]) == ("pod_var", "seisctf", False)
    assert set(record["pairs"]) == {f"X{i}test" for i in range(1, 10)}
    forecast = record["pairs"]["X1test"]
    assert forecast["selection"]["budget"] == len(BASELINES["pod_var"].model.grid)
    assert forecast["settings"] in [dict(s) for s in BASELINES["pod_var"].model.grid]
    public = zarr.open_group(str(bundle / "public.zarr"), mode="r")
    arrays = {name: np.asarray(array[...], dtype=np.float64) for name, array in public.arrays()}
    chosen = choose_denoiser({n: a for n, a in arrays.items() if n.endswith("train")}, "X2train")
    assert record["pairs"]["X2test"]["settings"] == {"denoiser": chosen}

    with sqlite3.connect(tmp_path / "board.sqlite") as connection:
        rows = connection.execute(
            "SELECT model, metadata FROM submissions ORDER BY model"
        ).fetchall()
    assert [name for name, _ in rows] == ["pod_var", "sensor_ar"]
    metadata = json.loads(rows[1][1])
    assert metadata["family"] == "per-sensor linear autoregression"
    assert metadata["library"] == "seisctf" and metadata["library_version"]

    board = seisctf("leaderboard", "--db", "board.sqlite", "--final", "--html", "site",
                    cwd=tmp_path)  # fmt: skip
    assert board.returncode == 0, board.stderr
    pages = "".join(page.read_text() for page in (tmp_path / "site").glob("*.html"))
    assert "sensor_ar: score profile" in pages and "pod_var: score profile" in pages
    assert "per-sensor linear autoregression" in pages

    with open(tmp_path / "zoo" / "runs.csv") as table:
        runs = list(csv.DictReader(table))
    assert {row["approach"] for row in runs} == {"pod_var", "sensor_ar"}
    assert {row["metric"] for row in runs} >= {"E1", "E12", "AvgScore"}
    compare = seisctf("compare", "zoo/runs.csv", "--out", "cmp", "--metric", "AvgScore",
                      cwd=tmp_path)  # fmt: skip
    assert compare.returncode == 0, compare.stderr
    report = json.loads((tmp_path / "cmp" / "report.json").read_text())
    assert "AvgScore" in json.dumps(report)


def test_a_zoo_run_resumes_and_is_the_same_on_one_worker_and_on_all(bundle, zoo_run, tmp_path):
    """The run on one worker against `zoo_run`'s on every core (scoring writes no array)."""
    arguments = ["baseline", "zoo", "--public", str(bundle / "public.zarr"), "--models", MODELS]
    one = seisctf(*arguments, "--out", "one", cwd=tmp_path, one_core=True)
    every_core, two = zoo_run
    assert one.returncode == 0, one.stderr
    assert "1 worker" in one.stderr and "1 worker" not in two.stderr
    for model in ("sensor_ar", "pod_var"):
        group = f"{model}-seed0.zarr"
        assert array_digests(tmp_path / "one" / group) == array_digests(every_core / "zoo" / group)

    # An interrupted run: one pair's array lost, the group not finished. The re-run redoes that
    # pair only (the others keep their files untouched) and finishes with the same arrays.
    group = tmp_path / "one" / "sensor_ar-seed0.zarr"
    expected = array_digests(group)
    kept = (group / "X1test" / "zarr.json").stat().st_mtime_ns
    subprocess.run(["rm", "-r", str(group / "X4test")], check=True)
    metadata = json.loads((group / "zarr.json").read_text())
    metadata["attributes"] = {}
    (group / "zarr.json").write_text(json.dumps(metadata))
    again = seisctf(*arguments, "--out", "one", cwd=tmp_path, one_core=True)
    assert again.returncode == 0, again.stderr
    assert "zoo: 2 tasks " in again.stderr  # the lost pair (a reconstruction) and its denoiser
    assert array_digests(group) == expected
    assert (group / "X1test" / "zarr.json").stat().st_mtime_ns == kept
    assert storage.read_attrs(StoreLocation(str(group)))["zoo"]["model"] == "sensor_ar"


def test_one_zoo_model_as_a_baseline(bundle, tmp_path):
    run = seisctf("baseline", "sensor_ar", "--public", str(bundle / "public.zarr"),
                  "--out", "ar.zarr", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (
        storage.read_attrs(StoreLocation(str(tmp_path / "ar.zarr")))["zoo"]["model"] == "sensor_ar"
    )
    seeded = seisctf("baseline", "sensor_ar", "--seed", "3", "--public",
                     str(bundle / "public.zarr"), "--out", "x.zarr", cwd=tmp_path)  # fmt: skip
    assert seeded.returncode == 3 and "draws no random numbers" in seeded.stderr
    unknown = seisctf("baseline", "zoo", "--models", "sensor_ar,nonesuch", "--public",
                      str(bundle / "public.zarr"), "--out", "z", cwd=tmp_path)  # fmt: skip
    assert unknown.returncode == 3 and "nonesuch" in unknown.stderr
    db_alone = seisctf("baseline", "zoo", "--db", "b.sqlite", "--public",
                       str(bundle / "public.zarr"), "--out", "z", cwd=tmp_path)  # fmt: skip
    assert db_alone.returncode == 3 and "--truth" in db_alone.stderr
    assert not (tmp_path / "z").exists()


def ar2(n_time: int, n_space: int, seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal((n_time, n_space))
    return signal.lfilter([1.0], [1.0, -1.6, 0.8], noise, axis=0)


def test_the_hold_out_picks_the_order_statsmodels_would_fit():
    """An AR(2) process: the hold-out's errors are the sensor AR's own on the held rows, and
    the chosen model's coefficients are statsmodels' AutoReg's at that order."""
    model = BASELINES["sensor_ar"].model
    series = [ar2(3000, 3, seed=4)]
    selection = choose_settings(model, series, 20, seed=0)
    assert selection.holdout_rows == 20 and len(selection.errors) == len(model.grid)
    order = selection.settings["order"]
    fitted, held = series[0][:-20], series[0][-20:]
    reference = np.stack(
        [AutoReg(fitted[:, s], lags=order, trend="n").fit().params for s in range(3)]
    )
    forecast = np.zeros((20, 3))
    history = list(fitted[-order:][::-1])
    for step in range(20):
        forecast[step] = np.einsum("si,is->s", reference, np.array(history[:order]))
        history.insert(0, forecast[step])
    error = np.linalg.norm(forecast - held) / np.linalg.norm(held)
    assert selection.errors[model.grid.index(selection.settings)] == pytest.approx(error, rel=1e-3)


def test_the_reduced_space_is_numpy_svd():
    rows = np.random.default_rng(1).standard_normal((300, 12)) @ np.diag(np.arange(12, 0, -1))
    basis = fit_basis([rows[:200], rows[200:]], rank=4)
    centred = rows - rows.mean(axis=0)
    _, _, right = np.linalg.svd(centred, full_matrices=False)
    assert basis.rank == 4
    np.testing.assert_allclose(np.abs(basis.modes.T @ right[:4].T), np.eye(4), atol=1e-9)
    coefficients = basis.project(rows)
    assert np.sqrt(np.mean(coefficients**2)) == pytest.approx(1.0)
    truncated = rows.mean(axis=0) + centred @ right[:4].T @ right[:4]
    np.testing.assert_allclose(basis.expand(coefficients), truncated, atol=1e-9)
    assert fit_basis([rows], rank=None).rank is None


def test_a_missing_library_names_the_extra():
    import dataclasses

    from seisctf.baselines.zoo.predict import pair_prediction

    missing = dataclasses.replace(BASELINES["pod_var"].model, module="seisctf_no_such_library")
    pair = CtfPair(id=1, train=("X1train",), test="X1test", metrics=("short_time",),
                   burn_in=None, start_index=100, shape=(10, 3))  # fmt: skip
    with pytest.raises(InvalidInput, match=r"seisctf\[zoo\]"):
        pair_prediction(missing, pair, [np.zeros((100, 3))])


@pytest.mark.parametrize("name", ["sensor_ar", "pod_var"])
def test_a_prediction_does_not_depend_on_the_input_chunks(name):
    import dask.array as da

    series = ar2(600, 6, seed=7)
    pair = CtfPair(id=1, train=("X1train",), test="X1test", metrics=("short_time",),
                   burn_in=None, start_index=600, shape=(30, 6))  # fmt: skip
    predict = BASELINES[name].function
    predictions = [
        np.asarray(predict(pair, {"X1train": da.from_array(series, chunks=chunks)}))
        for chunks in ((600, 6), (37, 6), (100, 1))
    ]
    assert np.isfinite(predictions[0]).all() and np.abs(predictions[0]).max() > 0
    for other in predictions[1:]:
        np.testing.assert_array_equal(other, predictions[0])


ZOO_LIBRARIES = {
    "sensor_ar": "seisctf", "pod_var": "seisctf", "bop_dmd": "pydmd", "edmd_koopman": "pydmd",
    "sindy": "pysindy", "esn": "reservoirpy", "lstm": "torch", "neural_ode": "torchdiffeq",
    "fno": "neuraloperator", "deeponet": "deepxde", "kan": "pykan",
}  # fmt: skip


def test_every_zoo_model_runs_end_to_end_through_the_command_line(bundle, tmp_path):
    """The whole zoo (quick: each model's first settings, a tenth of the training) on the
    embedded cluster, two seeds: every submission complete and scored, the seeded models' seeds
    as runs of one model in the leaderboard and in `compare`."""
    run = seisctf(
        "baseline", "zoo", "--quick", "--public", str(bundle / "public.zarr"), "--out", "zoo",
        "--seed", "0", "--seed", "1", "--truth", str(bundle / "truth.zarr"),
        "--db", "board.sqlite", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    # The cluster's line and progress only: no library's banner or warning.
    lines = run.stderr.splitlines()
    assert all(line.startswith(("dask:", "zoo:", "scoring:")) for line in lines), run.stderr
    assert set(ZOO_LIBRARIES) <= set(BASELINES.names())
    for model, library in ZOO_LIBRARIES.items():
        seeds = (0, 1) if BASELINES[model].seeded else (0,)
        for seed in seeds:
            attrs = storage.read_attrs(
                StoreLocation(str(tmp_path / "zoo" / f"{model}-seed{seed}.zarr"))
            )
            record = attrs["zoo"]
            assert (record["library"], record["search"], record["seed"]) == (library, "quick", seed)
            assert len(record["pairs"]) == 9
    assert len({BASELINES[m].library for m in ZOO_LIBRARIES}) >= 5
    with open(tmp_path / "zoo" / "runs.csv") as table:
        runs = list(csv.DictReader(table))
    averages = [row for row in runs if row["metric"] == "AvgScore"]
    assert {row["approach"] for row in averages} == set(ZOO_LIBRARIES)
    assert all(np.isfinite(float(row["value"])) for row in averages)
    assert {row["training_seed"] for row in averages if row["approach"] == "lstm"} == {"0", "1"}
    compare = seisctf("compare", "zoo/runs.csv", "--out", "cmp", "--metric", "AvgScore",
                      cwd=tmp_path)  # fmt: skip
    assert compare.returncode == 0, compare.stderr
    assert "P(single runs rank" in compare.stdout


@pytest.mark.parametrize("kind", ["low-rank waves, 50 % noise", "independent sensors, 1 %"])
def test_the_shared_reconstruction_is_the_least_error_on_a_public_hold_out(kind):
    """The choice among the Wiener filter, the truncated SVD and the input as given is the one
    whose reconstruction of a clean array with noise at the noisy input's level has the least
    2-norm error (numpy's, not the module's ARPACK): a denoiser for plane waves in strong noise,
    not the SVD for sensors that share nothing."""
    rng = np.random.default_rng(3)
    if kind.startswith("low-rank"):
        time, space = np.arange(400)[:, None], np.arange(40)[None, :]
        field = sum(
            np.sin(2 * np.pi * (time / period - space / wavelength))
            for period, wavelength in ((37, 11), (53, 17), (23, 29))
        )
        fraction = 0.5
    else:
        field, fraction = ar2(400, 40, seed=5), 0.01
    rms = np.sqrt((field**2).mean(axis=0))
    clean, noisy = field[:300], field[300:] + fraction * rms * rng.standard_normal((100, 40))
    choice = choose_denoiser({"clean": clean, "noisy": noisy}, "noisy")
    simulated = with_simulated_noise(clean, noise_fraction(noisy))
    errors = {"none": np.linalg.norm(simulated - clean, 2)}
    errors |= {name: np.linalg.norm(f(simulated) - clean, 2) for name, f in DENOISERS.items()}
    assert choice == min(errors, key=lambda name: errors[name])
    assert choice != ("none" if kind.startswith("low-rank") else "svd")
