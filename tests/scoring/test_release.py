"""The score release policy (docs/release.md): a released CTF or pick result is one Ladder
number (a pick result's: its public half's mean F1), neither any of the referee's other keys; the
quota holds across processes (SQLite transactions) and over the rolling 24 h, refusals take
nothing from it, and organisers' output is unchanged. The Ladder itself: test_ladder.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import noisy_copy, write_tiny_truth
from event_window_fixtures import write_picking_windows

from seisctf import conventions as cv
from seisctf.cli import main
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard, release
from seisctf.scoring.ctf import score_ctf
from seisctf.scoring.picks import score_picks
from seisctf.scoring.site import pages as site

RATE = 100.0
CTF_RELEASED_KEYS = {"name", "dataset", "convention", "truth_sha256_verified", "participant",
                     "public_score", "improved", "release"}  # fmt: skip
PICKS_RELEASED_KEYS = {"family", "name", "dataset", "split", "n_traces", "tolerance_s",
                       "threshold", "truth_commitment", "participant", "public_score",
                       "improved", "release"}  # fmt: skip


@pytest.fixture(scope="module")
def ctf(tmp_path_factory):
    """(truth URL, path of a noisy .npz submission)."""
    root = tmp_path_factory.mktemp("release-ctf")
    truth_url, _, truth = write_tiny_truth(root, "release-secret")
    path = root / "noisy.npz"
    np.savez(path, **noisy_copy(truth, seed=5, level=0.3))
    return truth_url, path


@pytest.fixture(scope="module")
def picks(tmp_path_factory):
    """(store URL, path of a CSV pick table with picks 0.123 s late and 0.2468 s early)."""
    root = tmp_path_factory.mktemp("release-picks")
    url = str(root / "picks.zarr")
    dataset = write_picking_windows(url)
    test = dataset[cv.SPLIT_VAR].values == "test"
    p = dataset[cv.P_ARRIVAL_SAMPLE].values[test] / RATE
    s = dataset[cv.S_ARRIVAL_SAMPLE].values[test] / RATE
    table = pd.DataFrame({"trace_name": dataset[cv.TRACE_NAME].values[test].astype(str),
                          "detection": np.where(np.isnan(p), 0.2, 0.9),
                          "p_time_s": p + 0.123, "s_time_s": s - 0.2468})  # fmt: skip
    table.loc[0, "p_time_s"] = 0.0  # one false pick: precision and recall below 1
    path = root / "picks.csv"
    table.to_csv(path, index=False)
    return url, path


def _decimals_at_most(value: float | None, digits: int) -> bool:
    return value is None or value == round(value, digits)


def test_released_ctf_result_is_one_ladder_number_and_no_score(ctf, tmp_path):
    truth_url, path = ctf
    full = score_ctf(StoreLocation(truth_url), {"noisy": StoreLocation(path)}, quiet=True)[0]
    asked = release.Release("team-a", str(tmp_path / "quota.sqlite"))
    with ladder.climbing(asked) as climb:
        released = release.released_view("ctf", full, "commitment", climb)
    assert set(released) == CTF_RELEASED_KEYS
    # The public score: the public part's mean of the scores that are not long-time spectra.
    scores, metrics = full["parts"]["public"]["scores"], full["metrics"]
    kept = [v for k, v in scores.items() if k in cv.SCORE_NAMES and metrics[k] != "long_time"]
    assert len(kept) == 7 and release.public_score(full) == pytest.approx(np.mean(kept))
    public = release.public_score(full)
    assert released["public_score"] == ladder.to_step(public) and public != round(public)
    assert released["improved"] is True and released["participant"] == "team-a"
    assert released["release"] == {"policy": release.POLICY, "part": "public",
                                   "metrics": ["short_time", "reconstruction"],
                                   "ladder_step": 1.0}  # fmt: skip
    text = json.dumps(released)
    assert '"E1"' not in text and "scores" not in text
    for view in (full, *full["parts"].values()):
        for value in (*view["raw_scores"].values(), view["avg_score"]):
            assert repr(value) not in text
    no_parts = {key: value for key, value in full.items() if key != "parts"}
    with ladder.climbing(asked) as climb, pytest.raises(InvalidInput, match="no public part"):
        release.released_view("ctf", no_parts, "commitment", climb)
    assert ladder.current_best(asked, "commitment") == released["public_score"]


def test_released_picks_result_is_one_ladder_number_and_no_rate(picks, tmp_path):
    url, path = picks
    full = score_picks(url, str(path), group_by=("station",))
    asked = release.Release("team-a", str(tmp_path / "quota.sqlite"))
    with ladder.climbing(asked) as climb:
        released = release.released_view("picks", full, None, climb)
    assert set(released) == PICKS_RELEASED_KEYS
    public = release.public_pick_score(full)
    assert released["public_score"] == ladder.to_step(public) and released["improved"] is True
    # Residual statistics are computed against the truth: the organisers keep them.
    assert full["p"]["residual_mean_s"] == pytest.approx(0.123)
    assert full["s"]["residual_mean_s"] == pytest.approx(-0.2468)
    text = json.dumps(released)
    assert "residual" not in text and '"tp"' not in text and '"f1"' not in text
    assert released["release"] == {"policy": release.POLICY, "part": "public",
                                   "score": "mean_f1_percent", "ladder_step": 1.0}  # fmt: skip
    assert ladder.current_best(asked, full["truth_commitment"]) == released["public_score"]


def _reserving_code(db: Path, participant: str, quota: int, attempts: int) -> str:
    """Python code of a process taking `attempts` releases one by one: prints how many it got."""
    code = (
        "import sys; from seisctf.scoring import release; from seisctf.errors import InvalidInput\n"
        f"r = release.Release({participant!r}, {str(db)!r}, {quota}); got = 0\n"
        f"for _ in range({attempts}):\n"
        "    try: release.reserve(r, 'ctf', ['m']); got += 1\n"
        "    except InvalidInput: pass\n"
        "print(got)\n"
    )
    return code


def test_quota_holds_across_concurrent_processes(tmp_path):
    db = tmp_path / "quota.sqlite"
    code = _reserving_code(db, "team-a", quota=5, attempts=3)
    processes = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    got = [int(process.communicate(timeout=120)[0]) for process in processes]
    assert sum(got) == 5, got
    assert release.used(release.Release("team-a", str(db), 5)) == 5
    assert release.used(release.Release("team-b", str(db), 5)) == 0


def test_quota_window_is_a_rolling_day_and_failures_give_slots_back(tmp_path):
    ask = release.Release("team-a", str(tmp_path / "quota.sqlite"), quota=2)
    day = release.QUOTA_WINDOW_S
    release.reserve(ask, "ctf", ["old"], now_s=1_000_000.0)
    release.reserve(ask, "picks", ["newer"], now_s=1_000_000.0 + day / 2)
    with pytest.raises(InvalidInput, match=r"2 of 2 releases used .*1970-01-13T13:46:40 UTC"):
        release.reserve(ask, "ctf", ["again"], now_s=1_000_000.0 + day - 1)
    release.reserve(ask, "ctf", ["later"], now_s=1_000_000.0 + day + 1)  # the first expired
    with pytest.raises(InvalidInput, match="3 submissions, above the quota of 2"):
        release.reserve(ask, "ctf", ["a", "b", "c"])
    fresh = release.Release("team-c", ask.quota_db, quota=1)
    with pytest.raises(RuntimeError), release.quota_slots(fresh, "ctf", ["m"]):
        assert release.used(fresh) == 1
        raise RuntimeError("scoring failed")
    assert release.used(fresh) == 0
    with release.quota_slots(fresh, "ctf", ["m"]):
        pass
    assert release.used(fresh) == 1


def _score_ctf(truth_url: str, path: Path, scheduler: str, *extra: str) -> list[str]:
    return ["score", "ctf", "--truth", truth_url, "--submission", str(path), "--quiet",
            "--scheduler", scheduler, *extra]  # fmt: skip


def test_cli_release_records_rounded_scores_until_the_quota(ctf, tmp_path, capsys, dask_cluster):
    truth_url, path = ctf
    db, out = tmp_path / "board.sqlite", tmp_path / "released.json"
    argv = _score_ctf(truth_url, path, dask_cluster.address, "--release", "--participant",
                      "team-a", "--quota", "2", "--db", str(db), "--json", str(out))  # fmt: skip
    printed = []
    for _ in range(2):
        assert main(argv) == 0
        assert capsys.readouterr().out == ""  # --json FILE --quiet: the JSON goes to the file
        printed.append(json.loads(out.read_text()))
    assert all(set(p) == CTF_RELEASED_KEYS for p in printed)
    assert printed[0]["truth_sha256_verified"] is True
    # The same submission again does not beat its own best by a step: the old best, no gain.
    assert [p["improved"] for p in printed] == [True, False]
    assert printed[0]["public_score"] == printed[1]["public_score"]
    out.unlink()
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "--participant team-a: 2 of 2 releases used in the last 24 h" in err
    assert "nothing was scored" in err and not out.exists()
    entries = leaderboard.entries(db)
    # Both releases counted and recorded in full, what was released beside each; the public
    # views hold the one that set the participant's best.
    assert sorted(e["result"]["released"]["improved"] for e in entries) == [False, True]
    assert all("parts" in e["result"] for e in entries)
    (season,) = leaderboard.as_json(entries)
    assert season["public_score"] == printed[0]["public_score"] and season["scores"] == {}
    assert season["avg_score"] is None
    (final,) = leaderboard.as_json(entries, final=True)
    private = entries[0]["result"]["parts"]["private"]
    assert final["scores"] == {k: round(v, 2) for k, v in private["scores"].items()}
    site.write_site(entries, tmp_path / "site")  # the site renders released entries
    site.write_site(entries, tmp_path / "final", final=True)


def test_cli_release_refusals_take_nothing(ctf, picks, tmp_path, capsys, dask_cluster):
    truth_url, _ = ctf
    url, table = picks
    quota = tmp_path / "quota.sqlite"
    asks = ["--release", "--participant", "team-a", "--quota-db", str(quota)]
    bad = tmp_path / "bad.npz"
    np.savez(bad, X1test=np.zeros((3, 3)))
    cases = {
        "bad submission": (_score_ctf(truth_url, bad, dask_cluster.address, *asks),
                           "missing arrays"),
        "no participant": (_score_ctf(truth_url, bad, dask_cluster.address, "--release",
                                      "--quota-db", str(quota)), "needs --participant"),
        "no quota db": (_score_ctf(truth_url, bad, dask_cluster.address, "--release",
                                   "--participant", "team-a"), "needs --quota-db"),
        "participant alone": (_score_ctf(truth_url, bad, dask_cluster.address,
                                         "--participant", "team-a"), "only apply with --release"),
        "histogram": (["score", "picks", "--truth", url, "--submission", str(table), "--quiet",
                       "--histogram", str(tmp_path / "h.png"), *asks], "not released"),
    }  # fmt: skip
    for case, (argv, message) in cases.items():
        assert main(argv) == 3, case
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (case, err)
    assert release.used(release.Release("team-a", str(quota))) == 0
    picks_argv = ["score", "picks", "--truth", url, "--submission", str(table), "--quiet", *asks]
    assert main(picks_argv) == 0
    released = json.loads(capsys.readouterr().out)
    assert set(released) == PICKS_RELEASED_KEYS
    assert release.used(release.Release("team-a", str(quota))) == 1


def test_organiser_output_is_unchanged(ctf, tmp_path, capsys, dask_cluster):
    truth_url, path = ctf
    out = tmp_path / "full.json"
    argv = _score_ctf(truth_url, path, dask_cluster.address, "--json", str(out))
    assert main(argv) == 0
    full = json.loads(out.read_text())
    assert full == json.loads(
        json.dumps(
            score_ctf(StoreLocation(truth_url), {"noisy": StoreLocation(path)}, quiet=True)[0]
        )
    )
    assert "raw_scores" in full and "release" not in full


def test_concurrent_cli_releases_share_one_quota(ctf, tmp_path, dask_cluster):
    """Three `seisctf score ctf --release` processes at once, quota 2: two score, one is
    refused."""
    truth_url, path = ctf
    quota = tmp_path / "quota.sqlite"
    argv = _score_ctf(truth_url, path, dask_cluster.address, "--release", "--participant",
                      "team-a", "--quota", "2", "--quota-db", str(quota))  # fmt: skip
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "seisctf.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(3)
    ]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in processes]
    assert sorted(code for code, _ in outcomes) == [0, 0, 3], outcomes
    assert release.used(release.Release("team-a", str(quota))) == 2
