"""A picking competition served end to end: `referee create` reads the dataset's kind from its
truth (an event-window store with pick labels), a team uploads a pick table over HTTP, the
service scores it with the picks referee (its released view equals the plain `seisctf score
picks` command's, released: the public half's mean F1 through the Ladder), the board shows its
row, the receipt checks offline (the public bundle made by `seisctf referee public-picks`); a
malformed pick table is refused at upload with nothing stored and nothing charged, and a public
bundle holding the scored traces' arrivals is refused when the competition is made. During the
season the released views and the board hold nothing of the private half (two tables differing
only there release the same view); after `referee close` the board ranks, by its private half,
the table each team marked final."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
import zarr
from event_window_fixtures import RATE, picking_window_dataset
from running_service import Service, add_team, seisctf, wait_finished

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows
from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard, parts, picks
from seisctf.scoring.release import public_entries, public_pick_score, release_picks
from seisctf.service import tables

pytestmark = pytest.mark.slow
SIZES = {"n_earthquake": 8, "n_noise": 4}
LAYOUT = event_windows.WindowLayout(chunk_traces=1, shard_traces=4)
LABELS = (cv.P_ARRIVAL_SAMPLE, cv.S_ARRIVAL_SAMPLE, cv.TRACE_CATEGORY, "source_magnitude")


def _write(dataset, url: Path) -> None:
    event_windows.write_event_windows(dataset, StoreLocation(str(url)), layout=LAYOUT, quiet=True)


def _without_test_labels(dataset, columns=LABELS):
    """The public bundle's dataset: the test split's labels `columns` missing (NaN, or "" for
    text), its traces and splits kept."""
    test = dataset[cv.SPLIT_VAR].values == "test"
    hidden = {}
    for column in columns:
        values = dataset[column].values.copy()
        values[test] = "" if values.dtype == object else np.nan
        hidden[column] = (cv.TRACE, values)
    return dataset.assign_coords(hidden)


@pytest.fixture(scope="module")
def picking(tmp_path_factory) -> dict:
    """A small picking dataset: its truth, its public bundle, one with the test labels left in,
    and a pick table of the test traces (P 0.1 s late, S 0.3 s early, one false pick)."""
    root = tmp_path_factory.mktemp("service-picking")
    dataset = picking_window_dataset(**SIZES)
    _write(dataset, root / "truth.zarr")
    # The public bundle as an organiser makes it; the same as withholding the labels by hand.
    made = seisctf("referee", "public-picks", str(root / "truth.zarr"), str(root / "public.zarr"))
    assert "without the labels of its test split" in made.stdout
    _write(_without_test_labels(dataset), root / "by-hand.zarr")
    by_command, by_hand = (
        storage.open_dataset(StoreLocation(str(root / name)))
        for name in ("public.zarr", "by-hand.zarr")
    )
    for column in (*LABELS, cv.TRACE_NAME, cv.SPLIT_VAR):
        shown = [[str(v) for v in ds[column].values.tolist()] for ds in (by_command, by_hand)]
        assert shown[0] == shown[1], column
    assert np.array_equal(
        by_command[cv.EVENT_WINDOWS_VAR].values, dataset[cv.EVENT_WINDOWS_VAR].values
    )
    _write(dataset, root / "leaky.zarr")
    _write(_without_test_labels(dataset, LABELS[:2]), root / "leaky-category.zarr")
    moved = _without_test_labels(dataset)
    split = moved[cv.SPLIT_VAR].values.copy()
    split[np.flatnonzero(split == "test")[0]] = "dev"  # one test trace in dev: another split
    _write(moved.assign({cv.SPLIT_VAR: (cv.TRACE, split)}), root / "other-split.zarr")
    test = dataset[cv.SPLIT_VAR].values == "test"
    p = dataset[cv.P_ARRIVAL_SAMPLE].values[test] / RATE
    s = dataset[cv.S_ARRIVAL_SAMPLE].values[test] / RATE
    table = pd.DataFrame(
        {
            "trace_name": dataset[cv.TRACE_NAME].values[test].astype(str),
            "detection": np.where(np.isnan(p), 0.1, 0.9),
            "p_time_s": p + 0.1,
            "s_time_s": s - 0.3,
        }
    )
    table.loc[0, "p_time_s"] = 0.0
    table.to_csv(root / "picks.csv", index=False)
    return {"root": root, "table": table}


def _create(folder: Path, picking: dict, public: str = "public.zarr", quota: int = 1):
    root = picking["root"]
    argv = ["referee", "create", str(folder), "--name", "Picking", "--quota", str(quota)]
    argv += ["--dataset", "picks", str(root / public), str(root / "truth.zarr")]
    return seisctf(*argv, check=False)


def _send(client, body: bytes, filename: str = "picks.csv"):
    params = {"dataset": "picks", "filename": filename, "model": "late-picker"}
    return client.post("/api/submissions", params=params, content=body)


def test_a_picking_competition_scores_a_pick_table_end_to_end(picking, dask_cluster, tmp_path):
    folder = tmp_path / "competition"
    made = _create(folder, picking)
    assert made.returncode == 0, made.stderr
    config = json.loads((folder / "competition.json").read_text())
    assert config["datasets"]["picks"]["family"] == "picks"
    token = add_team(folder, "Pickers")
    table: pd.DataFrame = picking["table"]
    service = Service(folder, scheduler=dask_cluster.address).start()
    try:
        with service.client(token) as client:
            # Malformed tables first, on a quota of one: refused, nothing kept or charged.
            missing = table.iloc[1:].to_csv(index=False).encode()
            out_of_range = table.assign(detection=1.5).to_csv(index=False).encode()
            no_column = table.drop(columns="s_time_s").to_csv(index=False).encode()
            first = str(table["trace_name"].iloc[0])
            for body, filename, status, why in (
                (missing, "picks.csv", 422, f"{first}"),
                (out_of_range, "picks.csv", 422, "detection missing or outside [0, 1]"),
                (no_column, "picks.csv", 422, "missing column(s) ['s_time_s']"),
                (table.to_csv(index=False).encode(), "picks.zip", 415, "a pick table"),
            ):
                refused = _send(client, body, filename)
                assert refused.status_code == status, refused.text
                assert why in refused.json()["detail"], refused.text
                assert str(folder) not in refused.text
            assert client.get("/api/submissions").json() == []
            assert list((folder / "uploads").iterdir()) == []
            engine = tables.engine_of(f"sqlite:///{folder / 'service.sqlite'}")
            with engine.connect() as connection:
                count = sa.select(sa.func.count()).select_from(tables.submissions)
                assert connection.execute(count).scalar_one() == 0

            sent = _send(client, (picking["root"] / "picks.csv").read_bytes())
            assert sent.status_code == 201, sent.text
            view = wait_finished(client, sent.json()["id"])
            assert view["state"] == "scored", view

            out = tmp_path / "plain.json"
            seisctf(
                "score", "picks", "--truth", str(picking["root"] / "truth.zarr"),
                "--submission", str(picking["root"] / "picks.csv"), "--name", "late-picker",
                "--json", str(out), "--quiet",
            )  # fmt: skip
            plain = json.loads(out.read_text())
            assert 0 < plain["p"]["f1"] < 1 and plain["n_traces"] == len(table)
            best = ladder.to_step(public_pick_score(plain))
            assert view["released"] == release_picks(plain, ladder.Rung("Pickers", best, True))
            assert view["shown"] == f"public score {best:g}"

            assert client.get("/api/board").json()["scored"] == 1
            (entry,) = leaderboard.entries(str(folder / "leaderboard.sqlite"))
            assert entry["family"] == "picks" and entry["metadata"]["team"] == "Pickers"
            assert entry["truth_commitment"] == plain["truth_commitment"]

            receipt, key = tmp_path / "receipt.json", tmp_path / "key.pem"
            receipt.write_bytes(client.get(f"/api/submissions/{view['id']}/receipt").content)
            key.write_bytes(client.get("/api/receipt-key").content)
            checked = seisctf("referee", "verify", str(receipt), "--public-key", str(key))
            payload = json.loads(checked.stdout.rsplit("}", 1)[0] + "}")
            assert payload["released"] == view["released"]
            assert payload["truth_commitment"] == plain["truth_commitment"]
            assert payload["dataset"] == "picks"

        anyone = service.client()
        pages = [anyone.get(f"/board/{p.name}").text for p in (folder / "site").glob("*.html")]
        shown = next(page for page in pages if "Phase picking" in page)
        assert "Pickers" in shown and "late-picker" in shown
    finally:
        service.stop()


def test_a_public_bundle_holding_the_test_labels_is_refused(picking, tmp_path):
    for public, column in (
        ("leaky.zarr", cv.P_ARRIVAL_SAMPLE),
        # The hand-made bundle withholds the labels but leaves the SNR, which tells the
        # earthquake windows from the noise: refused for it too.
        ("leaky-category.zarr", f"(source_magnitude, {cv.TRACE_CATEGORY}, trace_snr_db)"),
    ):
        leaky = _create(tmp_path / public, picking, public=public)
        assert leaky.returncode == 3, leaky.stderr
        assert "split with labels given" in leaky.stderr and column in leaky.stderr
        assert not (tmp_path / public / "competition.json").exists()
    other = _create(tmp_path / "other-split", picking, public="other-split.zarr")
    assert other.returncode == 3 and "in one of its and the truth's test splits" in other.stderr
    folder = tmp_path / "competition"
    assert _create(folder, picking).returncode == 0
    public, truth = picking["root"] / "public.zarr", picking["root"] / "truth.zarr"
    again = seisctf("referee", "add-dataset", str(folder), "again", str(public), str(truth),
                    check=False)  # fmt: skip
    assert again.returncode == 3 and "holds picks's truth" in again.stderr
    empty = tmp_path / "empty.zarr"
    zarr.open_group(str(empty), mode="w")
    neither = seisctf("referee", "add-dataset", str(folder), "other", str(public), str(empty),
                      check=False)  # fmt: skip
    assert neither.returncode == 3 and "neither a CTF truth bundle" in neither.stderr
    assert list(json.loads((folder / "competition.json").read_text())["datasets"]) == ["picks"]


def _exact_on(table: pd.DataFrame, truth: picks.PickTruth, names: set[str]) -> bytes:
    """`table` (CSV bytes) with the catalogue's P and S arrivals as picks on the traces `names`."""
    arrivals = truth.labels.set_index("trace_name").loc[table["trace_name"]]
    on = table["trace_name"].isin(names).to_numpy()
    out = table.copy()
    out.loc[on, "p_time_s"] = arrivals["p_arrival_s"].to_numpy()[on]
    out.loc[on, "s_time_s"] = arrivals["s_arrival_s"].to_numpy()[on]
    return out.to_csv(index=False).encode()


def test_the_season_hides_the_private_half_and_the_close_ranks_the_marked_table(
    picking, dask_cluster, tmp_path
):
    folder = tmp_path / "competition"
    assert _create(folder, picking, quota=5).returncode == 0
    truth = picks.read_truth(StoreLocation(str(picking["root"] / "truth.zarr")))
    names = truth.labels["trace_name"].to_numpy()[truth.scored("test")]
    public = set(names[parts.trace_split(truth.split_salt("test"), list(names))])
    late: pd.DataFrame = picking["table"]
    table = late.assign(s_time_s=late["s_time_s"] - 0.5)  # every S pick 0.8 s early: a miss
    bodies = {
        "base": table.to_csv(index=False).encode(),
        "private-better": _exact_on(table, truth, set(names) - public),
        "public-better": _exact_on(table, truth, public),
    }
    teams = {"Alpha": add_team(folder, "Alpha"), "Beta": add_team(folder, "Beta")}
    service = Service(folder, scheduler=dask_cluster.address).start()
    views = {}
    try:
        for team, model in (
            ("Alpha", "base"),
            ("Beta", "private-better"),
            ("Beta", "public-better"),
        ):
            with service.client(teams[team]) as client:
                params = {"dataset": "picks", "filename": f"{model}.csv", "model": model}
                sent = client.post("/api/submissions", params=params, content=bodies[model])
                assert sent.status_code == 201, sent.text
                views[model] = wait_finished(client, sent.json()["id"])
                assert views[model]["state"] == "scored", views[model]
        # Differing only on private traces, base and private-better release the same view.
        alpha, beta = (dict(views[m]["released"]) for m in ("base", "private-better"))
        assert alpha.pop("participant") == "Alpha" and beta.pop("participant") == "Beta"
        assert alpha.pop("name") == "base" and beta.pop("name") == "private-better"
        assert alpha == beta and alpha["improved"] is True
        assert views["public-better"]["released"]["improved"] is True
        assert views["public-better"]["released"]["public_score"] > alpha["public_score"]
        for view in views.values():
            text = json.dumps(view["released"])
            assert '"f1"' not in text and '"private"' not in text and '"detection"' not in text

        entries = leaderboard.entries(str(folder / "leaderboard.sqlite"))
        by_run = {e["metadata"]["submission"]: e for e in entries}
        season = public_entries(entries)
        assert {e["metadata"]["team"] for e in season} == {"Alpha", "Beta"}
        for entry in season:
            assert entry["avg_score"] is None and entry["scores"] == {}
            assert not {"detection", "p", "s"} & set(entry["result"])
        page = next((folder / "site").glob("dataset-*.html")).read_text()
        assert "ranked by public score" in page and "Mean F1" not in page
        assert ">public-better<" in page and ">private-better<" not in page

        with service.client(teams["Beta"]) as client:
            marked = views["private-better"]["id"]
            assert client.post(f"/api/submissions/{marked}/final").status_code == 200
        run = seisctf("referee", "close", str(folder))
        assert "final leaderboard" in run.stdout
        final = public_entries(entries, final=True, chosen={by_run[marked]["id"]})
        assert [e["metadata"]["team"] for e in final] == ["Beta", "Alpha"]
        assert final[0]["metadata"]["submission"] == marked
        recorded = by_run[marked]["result"]["parts"]["private"]
        assert final[0]["avg_score"] == 100.0 and recorded["p"]["f1"] == 1.0
        page = next((folder / "site").glob("dataset-*.html")).read_text()
        assert "ranked by mean F1 (%)" in page and "100.00" in page
        assert ">private-better<" in page and ">public-better<" not in page and ">base<" in page
        assert f"{final[1]['avg_score']:.2f}" in page
    finally:
        service.stop()
