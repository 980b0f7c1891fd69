"""Baseline pickers as Dask jobs: STA/LTA + AIC tuned on dev and a SeisBench PhaseNet with random
local weights, on synthetic windows with known arrivals, on 1 and 2 worker processes; outputs
round-trip through the pick scorer."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from event_window_fixtures import write_picking_windows

from seisctf.baselines import seisbench_picker, stalta
from seisctf.catalogs import pick_table
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.picks import mean_f1_objective, read_truth, score_picks


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    url = str(tmp_path_factory.mktemp("pickers") / "windows.zarr")
    write_picking_windows(url, n_earthquake=24, n_noise=12, shard_traces=4)
    return url


@pytest.fixture(scope="module")
def phasenet_weights(tmp_path_factory) -> dict[str, str]:
    """A PhaseNet with random weights, as a state dict and as a SeisBench saved model."""
    import seisbench.models as sbm
    import torch

    torch.manual_seed(0)
    model = sbm.PhaseNet()
    folder = tmp_path_factory.mktemp("phasenet")
    torch.save(model.state_dict(), folder / "state.pt")
    (folder / "saved").mkdir()
    model.save(folder / "saved" / "phasenet")
    return {"state": str(folder / "state.pt"), "saved": str(folder / "saved")}


@pytest.fixture(scope="module")
def runs(store, phasenet_weights, tmp_path_factory) -> dict[int, dict]:
    """Both pickers on an embedded LocalCluster of 1, then 2 worker processes: per worker count
    the outputs, the STA/LTA description, the model loads per worker and the scores."""
    from seisctf.cluster import dask_client

    objective = mean_f1_objective(read_truth(StoreLocation(store)), "dev")
    by_workers = {}
    for n_workers in (1, 2):
        out = tmp_path_factory.mktemp(f"workers{n_workers}")
        run = {"stalta": str(out / "stalta.parquet"), "phasenet": str(out / "phasenet.csv")}
        with dask_client(n_workers=n_workers, memory_limit="2GiB", quiet=True) as client:
            run["stalta_description"] = stalta.stalta_picks(
                StoreLocation(store), StoreLocation(run["stalta"]), tune_split="dev",
                objective=objective, quiet=True,
            )  # fmt: skip
            seisbench_picker.seisbench_picks(
                StoreLocation(store), StoreLocation(run["phasenet"]), model="PhaseNet",
                weights=phasenet_weights["state"], quiet=True,
            )  # fmt: skip
            run["loads"] = client.run(lambda: dict(seisbench_picker.LOAD_COUNT))
        for picker in ("stalta", "phasenet"):
            run[f"{picker}_result"] = score_picks(store, run[picker], quiet=True)
        by_workers[n_workers] = run
    return by_workers


def test_stalta_scores_well_and_records_its_tuning(runs):
    run = runs[2]
    result = run["stalta_result"]
    assert result["n_traces"] == 12 and result["n_ignored"] == 0
    assert result["detection"]["f1"] > 0.8
    assert result["p"]["f1"] > 0.8 and result["p"]["residual_mae_s"] < 0.2
    assert result["s"]["f1"] > 0.5
    description = run["stalta_description"]
    assert description["tuned_on"] == "dev" and description["split"] == "test"
    best = max(description["tuning_scores"], key=lambda row: row["objective"])
    assert {k: best[k] for k in stalta.TUNING_GRID} == {
        k: description["parameters"][k] for k in stalta.TUNING_GRID
    }
    sidecar = json.loads(open(run["stalta"] + ".picker.json").read())
    embedded = json.loads(pq.read_schema(run["stalta"]).metadata[b"seisctf"])
    assert sidecar == embedded == description


def test_phasenet_with_random_weights_runs_on_workers_and_scores(runs):
    for run in runs.values():
        table = pick_table.read_pick_submission(StoreLocation(run["phasenet"]))
        assert len(table) == 12 and table.detection.between(0, 1).all()
        result = run["phasenet_result"]
        assert result["p"]["tp"] + result["p"]["fn"] == 8  # every test arrival counted
        # Once per worker that ran a task, though there were 9 tasks (one per shard touched).
        loads = [count["loads"] for count in run["loads"].values()]
        assert max(loads) == 1 and len(loads) == len(run["loads"])


def test_picks_and_scores_identical_on_one_and_two_workers(runs):
    for picker in ("stalta", "phasenet"):
        one, two = (pick_table.read_pick_submission(StoreLocation(runs[n][picker])) for n in (1, 2))
        pd.testing.assert_frame_equal(one, two)
        first, second = runs[1][f"{picker}_result"], runs[2][f"{picker}_result"]
        assert {**first, "name": ""} == {**second, "name": ""}


def test_saved_model_folder_gives_the_state_dict_picks(store, phasenet_weights, tmp_path):
    # In this process (Dask's local threads): the same picker code, the other weights format.
    out = {name: str(tmp_path / f"{name}.csv") for name in phasenet_weights}
    for name, weights in phasenet_weights.items():
        seisbench_picker.seisbench_picks(
            StoreLocation(store), StoreLocation(out[name]), model="PhaseNet", weights=weights,
            split="dev", quiet=True,
        )  # fmt: skip
    pd.testing.assert_frame_equal(pd.read_csv(out["state"]), pd.read_csv(out["saved"]))


def test_bad_model_and_tuning_requests_are_refused(store, phasenet_weights, tmp_path):
    with pytest.raises(InvalidInput, match="not a model class"):
        seisbench_picker.model_spec("NotAModel", phasenet_weights["state"])
    with pytest.raises(InvalidInput, match="weights not found"):
        seisbench_picker.model_spec("PhaseNet", str(tmp_path / "missing.pt"))
    with pytest.raises(InvalidInput, match="cannot load into EQTransformer"):
        seisbench_picker.seisbench_picks(
            StoreLocation(store), StoreLocation(tmp_path / "x.csv"), model="EQTransformer",
            weights=phasenet_weights["state"], quiet=True,
        )  # fmt: skip
    with pytest.raises(InvalidInput, match="tuning on the test split is not allowed"):
        mean_f1_objective(read_truth(StoreLocation(store)), "test")
    with pytest.raises(InvalidInput, match="another split"):
        stalta.stalta_picks(
            StoreLocation(store), StoreLocation(tmp_path / "y.csv"), split="dev", tune_split="dev"
        )


def test_aic_onset_finds_a_step_in_variance():
    rng = np.random.default_rng(0)
    signal = np.r_[rng.standard_normal(400), 8 * rng.standard_normal(300)]
    assert abs(stalta._aic_onset([signal], 100, 600) - 400) <= 3


def test_cli_pick_stalta_then_score_and_refusals(
    store, phasenet_weights, tmp_path, capsys, dask_cluster
):
    from seisctf.cli import main

    common = ["--quiet", "--scheduler", dask_cluster.address]
    out = tmp_path / "stalta.csv"
    assert main(["pick", "stalta", store, "--out", str(out), "--tune-split", "none", *common]) == 0
    assert f"picks: {out}" in capsys.readouterr().out
    argv = ["score", "picks", "--truth", store, "--submission", str(out), *common]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["p"]["f1"] > 0.8
    bad = ["pick", "seisbench", store, "--out", str(tmp_path / "x.csv"), "--model", "Nope"]
    assert main([*bad, "--weights", phasenet_weights["state"], *common]) == 3
    assert "'Nope' is not a model class" in capsys.readouterr().err
    same_split = ["pick", "stalta", store, "--out", str(out), "--split", "dev"]
    assert main([*same_split, *common]) == 3
    assert "tune on another split" in capsys.readouterr().err
