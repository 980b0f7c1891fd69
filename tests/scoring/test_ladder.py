"""The Ladder (`seisctf.scoring.ladder`): a release reports a new best only when the public
score beats the old one by a step; the best is kept across processes, ordered when they run
at once, and a failed run takes nothing; through the command line, released outcomes follow
the organisers' public-part scores."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing

import numpy as np
import pytest
from conftest import noisy_copy, write_tiny_truth

from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard, release
from seisctf.scoring.ctf import score_ctf

COMMITMENT = "c0" * 32


def test_next_best_is_the_ladder_rule():
    sequence = [25.3, 25.9, 26.2, 26.4, 27.0, None, 12.0, float("nan"), 29.5]
    best, outcomes = None, []
    for score in sequence:
        best, improved = ladder.next_best(best, score)
        outcomes.append((best, improved))
    assert outcomes == [
        (25.0, True),  # the first score sets the best, rounded to the step
        (25.0, False),  # 0.9 above it: not a step
        (26.0, True),
        (26.0, False),
        (27.0, True),  # exactly one step above
        (27.0, False),  # no score
        (27.0, False),
        (27.0, False),
        (30.0, True),  # 29.5 rounds half to even
    ]
    assert ladder.next_best(None, None) == (None, False)
    assert ladder.next_best(3.0, 3.7, step=0.5) == (3.5, True)
    assert ladder.to_step(-0.2) == 0.0 and str(ladder.to_step(-0.2)) == "0.0"


def _climb_code(db: str, participant: str, scores: list[float | None]) -> str:
    """Python code of a process releasing `scores` one run each; prints its rungs as JSON."""
    return (
        "import json; from seisctf.scoring import ladder, release\n"
        f"r = release.Release({participant!r}, {db!r}); out = []\n"
        f"for score in {scores!r}:\n"
        "    with ladder.climbing(r) as climb:\n"
        f"        rung = climb({COMMITMENT!r}, 'model', score)\n"
        "    out.append([rung.best, rung.improved])\n"
        "print(json.dumps(out))\n"
    )


def _run(code: str) -> list:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_best_is_kept_across_processes_per_participant_and_truth(tmp_path):
    db = str(tmp_path / "quota.sqlite")
    assert _run(_climb_code(db, "team-a", [30.2])) == [[30.0, True]]
    assert _run(_climb_code(db, "team-a", [30.9, 31.4])) == [[30.0, False], [31.0, True]]
    assert _run(_climb_code(db, "team-b", [10.0])) == [[10.0, True]]  # another participant
    asked = release.Release("team-a", db)
    assert ladder.current_best(asked, COMMITMENT) == 31.0
    assert ladder.current_best(asked, "another truth") is None


def test_a_failed_run_takes_no_rung(tmp_path):
    asked = release.Release("team-a", str(tmp_path / "quota.sqlite"))
    with pytest.raises(RuntimeError), ladder.climbing(asked) as climb:
        assert climb(COMMITMENT, "model", 40.0) == ladder.Rung("team-a", 40.0, True)
        raise RuntimeError("recording failed")
    assert ladder.current_best(asked, COMMITMENT) is None
    with ladder.climbing(asked) as climb:
        assert climb(COMMITMENT, "model", 20.0).improved
    with ladder.climbing(None) as climb, pytest.raises(ValueError, match="nothing is released"):
        climb(COMMITMENT, "model", 1.0)


def test_a_dead_runs_pending_rungs_are_dropped_by_its_holder_alone(tmp_path):
    """A file made before rows had holders gains the column; a run killed before settling
    (its context never exited) leaves a pending rung that counts as the best, until its holder
    drops it; another holder's pending rung, and settled ones, stay."""
    db = str(tmp_path / "quota.sqlite")
    with closing(sqlite3.connect(db)) as old:  # the table as files made before held it
        old.execute(
            "CREATE TABLE ladder (id INTEGER PRIMARY KEY, participant TEXT NOT NULL, "
            "truth_commitment TEXT NOT NULL, name TEXT, time_s REAL NOT NULL, "
            "public_avg_score REAL, best REAL, improved INTEGER NOT NULL, state TEXT NOT NULL)"
        )
    with ladder.climbing(release.Release("team-a", db)) as climb:
        assert climb(COMMITMENT, "settled", 10.0).improved
    job, other = (release.Release("team-a", db, holder=h) for h in ("job-1", "job-2"))
    for holder, score in ((other, 30.0), (job, 50.0)):
        ladder.climbing(holder).__enter__()(COMMITMENT, "killed", score)  # never settled
    assert ladder.current_best(job, COMMITMENT) == 50.0
    assert release.drop_pending(job) == 0  # no quota slot was taken
    assert ladder.drop_pending(job) == 1
    assert ladder.current_best(job, COMMITMENT) == 30.0  # job-2's run may still be going on
    assert ladder.drop_pending(release.Release("team-a", db)) == 0  # no holder: nothing
    with closing(sqlite3.connect(db)) as connection:
        states = connection.execute("SELECT holder, state FROM ladder ORDER BY id").fetchall()
    assert states == [("", "released"), ("job-2", "pending")]  # in the order taken


def test_runs_at_once_are_ordered_as_one_ladder(tmp_path):
    """Six processes release at once: the rows, in the order the transactions took them, are
    exactly the Ladder's sequence over their public scores."""
    db = str(tmp_path / "quota.sqlite")
    scores = [[10.0, 12.2], [10.5, 30.4], [11.0], [12.0, 29.6], [30.0], [5.0, 31.3]]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _climb_code(db, "team-a", batch)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for batch in scores
    ]
    for process in processes:
        assert process.wait(timeout=120) == 0
    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(
            "SELECT public_avg_score, best, improved, state FROM ladder ORDER BY id"
        ).fetchall()
    assert len(rows) == sum(map(len, scores)) and {row[3] for row in rows} == {"released"}
    best = None
    for score, stored_best, improved, _ in rows:
        best, expected = ladder.next_best(best, score)
        assert (stored_best, bool(improved)) == (best, expected)
    assert best == 31.0


def test_cli_releases_follow_the_public_part(tmp_path, capsys, dask_cluster):
    """Three submissions released in turn: each printed outcome is the Ladder over the
    organisers' public scores of the same submissions, never a per-score value."""
    truth_url, _, truth = write_tiny_truth(tmp_path, "a secret of the ladder test, 30 chars")
    paths = {}
    for name, level in (("rough", 1.5), ("close", 0.05), ("closer", 0.04)):
        paths[name] = tmp_path / f"{name}.npz"
        np.savez(paths[name], **noisy_copy(truth, seed=3, level=level))
    full = score_ctf(
        StoreLocation(truth_url),
        {name: StoreLocation(path) for name, path in paths.items()},
        quiet=True,
    )
    public = {result["name"]: release.public_score(result) for result in full}
    db = tmp_path / "board.sqlite"
    best, released = None, []
    for name, path in paths.items():
        argv = ["score", "ctf", "--truth", truth_url, "--submission", str(path), "--quiet",
                "--scheduler", dask_cluster.address, "--release", "--participant", "team-a",
                "--db", str(db)]  # fmt: skip
        assert main(argv) == 0
        released.append(json.loads(capsys.readouterr().out))
        best, improved = ladder.next_best(best, public[name])
        assert (released[-1]["public_score"], released[-1]["improved"]) == (best, improved)
        assert "scores" not in released[-1]
    assert [r["improved"] for r in released][:2] == [True, True]  # 1.5 → 0.05: far better
    (season,) = leaderboard.as_json(leaderboard.entries(db))
    assert season["public_score"] == best and season["avg_score"] is None
    standing = [r["name"] for r in released if r["improved"]][-1]
    assert season["model"] == standing
