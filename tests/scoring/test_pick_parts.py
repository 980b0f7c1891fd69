"""The public and private halves of a picking truth's scored traces (seisctf.scoring.picks,
"Public and private halves"): the split is HMAC-SHA256 of each trace name under a salt derived
from the withheld labels, each half is scored on its own (checked against plain numpy counts),
a release shows the public half's mean F1 through the Ladder alone, and the leaderboard's
final view ranks each participant's chosen entry by its private half."""

from __future__ import annotations

import hashlib
import hmac
import json

import numpy as np
import pandas as pd
import pytest
from event_window_fixtures import write_picking_windows

from seisctf import conventions as cv
from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard, picks, referee, release
from seisctf.scoring.site.terminal import print_table

RATE = 100.0
TOLERANCE_S = 0.5


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    """A picking store (24 test traces) and its test labels: names, P and S arrivals (s)."""
    root = tmp_path_factory.mktemp("pick-parts")
    url = str(root / "picks.zarr")
    dataset = write_picking_windows(url, n_earthquake=48, n_noise=24)
    test = dataset[cv.SPLIT_VAR].values == "test"
    return {
        "url": url,
        "root": root,
        "names": dataset[cv.TRACE_NAME].values[test].astype(str),
        "p": dataset[cv.P_ARRIVAL_SAMPLE].values[test] / RATE,
        "s": dataset[cv.S_ARRIVAL_SAMPLE].values[test] / RATE,
    }


def _table(store: dict, seed: int) -> pd.DataFrame:
    """Picks of the test traces: detections at random, P and S off by up to ±1 s (about half
    within the tolerance), some missing, some on noise windows."""
    rng = np.random.default_rng(seed)
    n = len(store["names"])
    p = np.where(np.isnan(store["p"]), rng.uniform(1, 20, n), store["p"]) + rng.uniform(-1, 1, n)
    s = np.where(np.isnan(store["s"]), rng.uniform(1, 20, n), store["s"]) + rng.uniform(-1, 1, n)
    p[rng.random(n) < 0.2] = np.nan
    s[rng.random(n) < 0.2] = np.nan
    return pd.DataFrame(
        {"trace_name": store["names"], "detection": rng.random(n), "p_time_s": p, "s_time_s": s}
    )


def _public_names(store: dict) -> set[str]:
    """The public half by hand: the n // 2 names of smallest HMAC(salt, rule/name)."""
    truth = picks.read_truth(StoreLocation(store["url"]))
    key = bytes.fromhex(truth.split_salt("test"))
    assert truth.split_salt("test") != truth.commitment("test")
    names = list(store["names"])
    digest = {
        name: hmac.new(key, f"seisctf/trace-split/v1/{name}".encode(), hashlib.sha256).digest()
        for name in names
    }
    return set(sorted(names, key=digest.__getitem__)[: len(names) // 2])


def _f1s(store: dict, table: pd.DataFrame, keep: np.ndarray) -> dict[str, tuple[int, ...]]:
    """Plain numpy (tp, fp, fn) and F1 of detection, P and S on the traces `keep`."""
    quake = ~(np.isnan(store["p"]) & np.isnan(store["s"]))[keep]
    said = (table["detection"].to_numpy() >= 0.5)[keep]
    out = {"detection": (int((said & quake).sum()), int((said & ~quake).sum()),
                         int((~said & quake).sum()))}  # fmt: skip
    for phase in ("p", "s"):
        arrival, pick = store[phase][keep], table[f"{phase}_time_s"].to_numpy()[keep]
        with np.errstate(invalid="ignore"):
            hit = np.abs(pick - arrival) <= TOLERANCE_S + 1e-9
        tp = int(hit.sum())
        out[phase] = (tp, int((~np.isnan(pick)).sum()) - tp, int((~np.isnan(arrival)).sum()) - tp)
    return out


def test_each_half_is_scored_on_its_own_keyed_by_trace_name(store):
    table = _table(store, seed=1)
    result = picks.score_picks(store["url"], table)
    public = _public_names(store)
    in_public = np.isin(store["names"], list(public))
    assert in_public.sum() == 12 and result["parts"]["public"]["n_traces"] == 12
    for half, keep in (("public", in_public), ("private", ~in_public)):
        expected = _f1s(store, table, keep)
        for part, (tp, fp, fn) in expected.items():
            scored = result["parts"][half][part]
            assert (scored["tp"], scored["fp"], scored["fn"]) == (tp, fp, fn), (half, part)
            assert scored["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    f1s = {h: [result["parts"][h][k]["f1"] for k in ("detection", "p", "s")] for h in ("public",
           "private")}  # fmt: skip
    assert f1s["public"] != f1s["private"]
    assert release.public_pick_score(result) == pytest.approx(100 * np.mean(f1s["public"]))
    # The store's order and the table's order do not move a trace between halves.
    shuffled = picks.score_picks(store["url"], table.sample(frac=1.0, random_state=3))
    assert shuffled["parts"] == result["parts"]


def _release(result: dict, db: str, participant: str = "team-a") -> dict:
    asked = release.Release(participant, db)
    with ladder.climbing(asked) as climb:
        return release.released_view("picks", result, None, climb)


def test_a_release_shows_the_public_half_alone(store, tmp_path):
    table = _table(store, seed=2)
    private = ~np.isin(store["names"], list(_public_names(store)))
    other = table.copy()
    other.loc[private, "p_time_s"] = store["p"][private]  # perfect P on the private half only
    other.loc[private, "detection"] = np.where(np.isnan(store["p"][private]), 0.0, 1.0)
    first, second = (picks.score_picks(store["url"], t) for t in (table, other))
    assert first["parts"]["public"] == second["parts"]["public"]
    assert first["parts"]["private"]["p"]["f1"] < second["parts"]["private"]["p"]["f1"] == 1.0
    views = [_release(r, str(tmp_path / f"{n}.sqlite")) for n, r in (("a", first), ("b", second))]
    assert views[0] == views[1]
    (view,) = views[:1]
    assert set(view) == {"family", "name", "dataset", "split", "n_traces", "tolerance_s",
                         "threshold", "truth_commitment", "participant", "public_score",
                         "improved", "release"}  # fmt: skip
    assert view["public_score"] == ladder.to_step(release.public_pick_score(first))
    assert view["release"]["part"] == "public" and view["improved"] is True
    text = json.dumps(view)
    assert not any(
        f'"{word}"' in text for word in ("f1", "precision", "recall", "private", "parts")
    )
    numbers = [v for v in view.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    assert sorted(numbers) == sorted([0.5, 0.5, 24, view["public_score"]])


def test_the_final_board_ranks_chosen_entries_by_their_private_half(store, tmp_path, capsys):
    db, quota = str(tmp_path / "board.sqlite"), str(tmp_path / "releases.sqlite")
    tables = {seed: _table(store, seed) for seed in (3, 4, 5, 6)}
    results = {seed: picks.score_picks(store["url"], t) for seed, t in tables.items()}
    ranked = sorted(results, key=lambda seed: release.public_pick_score(results[seed]))
    # team-a sends its worst then its best public score; team-b one submission.
    for participant, seed in (("team-a", ranked[0]), ("team-a", ranked[2]), ("team-b", ranked[1])):
        referee.run_picks(
            StoreLocation(store["url"]),
            tables[seed],
            f"{participant}-{seed}",
            referee.Referee(release.Release(participant, quota), db, {"team": participant}),
        )
    entries = leaderboard.entries(db)
    season = release.public_entries(entries)
    assert sorted(e["model"] for e in season) == sorted(["team-a-" + str(ranked[2]),
                                                         "team-b-" + str(ranked[1])])  # fmt: skip
    for entry in season:
        assert entry["avg_score"] is None and entry["scores"] == {}
        assert set(entry["result"]) <= {"tolerance_s", "threshold"}
        seed = int(entry["model"].rsplit("-", 1)[1])
        assert entry["public_score"] == ladder.to_step(release.public_pick_score(results[seed]))
    # team-a marks its first (worst public) submission final: the final board shows it, by its
    # private half.
    marked = next(e["id"] for e in entries if e["model"] == f"team-a-{ranked[0]}")
    final = release.public_entries(entries, final=True, chosen={marked})
    assert sorted(e["model"] for e in final) == sorted([f"team-a-{ranked[0]}",
                                                        f"team-b-{ranked[1]}"])  # fmt: skip
    for entry in final:
        private = results[int(entry["model"].rsplit("-", 1)[1])]["parts"]["private"]
        f1s = [private[k]["f1"] or 0.0 for k in ("detection", "p", "s")]
        assert entry["avg_score"] == round(100 * np.mean(f1s), 2)
        assert entry["scores"] == {f"{k}_f1": round(private[k]["f1"], 2) for k in ("detection",
                                   "p", "s")}  # fmt: skip
        assert "public_score" not in entry
    assert [e["avg_score"] for e in final] == sorted((e["avg_score"] for e in final), reverse=True)
    print_table(entries)
    season_table = capsys.readouterr().out
    assert "Public score" in season_table and "p_f1" not in season_table
    print_table(entries, final=True)  # no choice made: each team's Ladder best
    final_table = capsys.readouterr().out
    for entry in release.public_entries(entries, final=True):
        assert entry["model"] in final_table and f"{entry['avg_score']:.2f}" in final_table
    assert "Mean F1 (%)" in final_table and f"team-a-{ranked[0]}" not in final_table
