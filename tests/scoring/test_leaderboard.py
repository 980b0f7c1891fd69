"""The SQLite leaderboard: round trip and ranking, HTML view, concurrent writers, the command."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import noisy_copy, synthetic_manifest, write_tiny_truth

from seisctf import cli
from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.scoring import leaderboard
from seisctf.scoring.site import pages as site
from seisctf.scoring.site.terminal import print_table


def result(
    name: str, avg_score: float | None, dataset: str = "global", scores: dict | None = None
) -> dict:
    """A scorer's result object (docs/contract.md, "Scoring conventions and results")."""
    if scores is None:
        scores = {score: avg_score for score in cv.SCORE_NAMES}
    return {
        "name": name,
        "dataset": dataset,
        "convention": "reference",
        "scores": scores,
        "avg_score": avg_score,
        "raw_scores": dict(scores),
        "truth_sha256_verified": True,
    }


# One unscorable task (E5 None), one model with no scorable task at all (avg None).
PARTLY_SCORED = {**{score: 40.0 for score in cv.SCORE_NAMES}, "E5": None}
RESULTS = [
    result("persistence", 12.5),
    result("zeros", 0.0),
    result("unscorable", None, scores={score: None for score in cv.SCORE_NAMES}),
    result("best-model", 87.25),
    result("partly", 40.0, scores=PARTLY_SCORED),
    result("das-model", -30.0, dataset="das"),
]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "nested" / "leaderboard.sqlite"
    ids = [
        leaderboard.record(
            path,
            r,
            truth_commitment=f"commit-{r['dataset']}",
            metadata={"description": f"model {r['name']}"},
        )
        for r in RESULTS
    ]
    assert ids == sorted(ids) and len(set(ids)) == len(RESULTS)
    return path


def test_record_entries_as_json_round_trip_ranked_by_avg_score(db):
    rows = leaderboard.entries(db)
    assert [(e["dataset"], e["model"]) for e in rows] == [
        ("das", "das-model"),
        ("global", "best-model"),
        ("global", "partly"),
        ("global", "persistence"),
        ("global", "zeros"),
        ("global", "unscorable"),  # None ranks last
    ]
    by_model = {e["model"]: e for e in rows}
    for original in RESULTS:
        entry = by_model[original["name"]]
        assert entry["scores"] == original["scores"]
        assert entry["avg_score"] == original["avg_score"]
        assert entry["convention"] == "reference"
        assert entry["family"] == "ctf"
        assert entry["metadata"] == {"description": f"model {original['name']}"}
        assert entry["truth_commitment"] == f"commit-{original['dataset']}"
    assert by_model["unscorable"]["avg_score"] is None
    assert by_model["partly"]["scores"]["E5"] is None

    table = leaderboard.as_json(rows, final=True)  # entries without parts: their whole scores
    assert json.loads(json.dumps(table)) == table
    for row in table:
        assert set(row) == {"model", "dataset", "convention", "scores", "avg_score"}
    assert [row["model"] for row in table] == [e["model"] for e in rows]
    assert table[1] == {
        "model": "best-model",
        "dataset": "global",
        "convention": "reference",
        "scores": {score: 87.25 for score in cv.SCORE_NAMES},
        "avg_score": 87.25,
    }


def test_entries_filter_by_family(db):
    leaderboard.record(db, result("picker", 0.9), family="picks")
    assert [e["model"] for e in leaderboard.entries(db, family="picks")] == ["picker"]
    assert "picker" not in [e["model"] for e in leaderboard.entries(db, family="ctf")]
    assert len(leaderboard.entries(db)) == len(RESULTS) + 1


def test_truth_commitment_of_depends_only_on_the_hashes():
    manifest = synthetic_manifest(4, 2, 1, 1)

    def commitment(hashes: dict[str, str], **changes) -> str:
        return leaderboard.truth_commitment_of(replace(manifest, truth_sha256=hashes, **changes))

    first = commitment({"X1test": "aa", "X2test": "bb"})
    same = commitment({"X2test": "bb", "X1test": "aa"}, dataset="other")
    other = commitment({"X1test": "ab", "X2test": "bb"})
    assert first == same != other
    assert re.fullmatch("[0-9a-f]{64}", first)


def test_write_html_one_row_per_entry_escaped(db, tmp_path):
    leaderboard.record(
        db, result("<script>alert(1)</script>", 5.0), truth_commitment="commit-global"
    )
    rows = leaderboard.entries(db)
    index = site.write_site(rows, tmp_path / "html")
    assert index == tmp_path / "html" / "index.html"
    assert "global" in index.read_text() and "das" in index.read_text()
    page = (tmp_path / "html" / "dataset-global.html").read_text()
    body = re.search(r'id="ctf1-ranking">.*?<tbody>(.*?)</tbody>', page, flags=re.S).group(1)
    assert body.count("<tr>") == 6
    for entry in rows:
        if entry["dataset"] == "global" and not entry["model"].startswith("<"):
            assert f'<th scope="row" class="text" data-sort="{entry["model"]}">' in body
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "—" in body  # None scores shown as a dash


def test_write_html_survives_dollar_signs_in_model_names(tmp_path):
    db_path = tmp_path / "leaderboard.sqlite"
    leaderboard.record(db_path, result("team $x^$ v2", 1.0))
    index = site.write_site(leaderboard.entries(db_path), tmp_path / "html")
    assert "team $x^$ v2" in (index.parent / "dataset-global.html").read_text()


def test_record_keeps_result_metadata_and_pick_scores(tmp_path):
    db_path = tmp_path / "leaderboard.sqlite"
    picks = {
        "name": "stalta",
        "dataset": "global",
        "detection": {"f1": 0.7},
        "p": {"f1": 0.6},
        "s": {"f1": None},
        "tolerance_s": 0.5,
        "threshold": 0.5,
    }
    metadata = {"code_url": "https://example.org/x", "description": "d", "seed": "3"}
    leaderboard.record(db_path, picks, family="picks", metadata=metadata)
    (entry,) = leaderboard.entries(db_path)
    assert entry["result"] == picks and entry["metadata"] == metadata
    assert entry["scores"] == {"detection_f1": 0.7, "p_f1": 0.6, "s_f1": None}
    assert entry["avg_score"] is None and entry["convention"] is None
    with pytest.raises(InvalidInput, match="family"):
        leaderboard.record(db_path, picks, family="pics")


def test_record_is_idempotent_by_submission_key(tmp_path):
    db_path = tmp_path / "leaderboard.sqlite"
    first = leaderboard.record(db_path, result("a", 1.0), submission_key="k1")
    again = leaderboard.record(db_path, result("a", 2.0), submission_key="k1")
    other = leaderboard.record(db_path, result("a", 3.0))
    assert first == again != other
    assert [e["avg_score"] for e in leaderboard.entries(db_path)] == [3.0, 1.0]


def test_database_of_an_older_schema_gains_the_key_column(tmp_path):
    db_path = tmp_path / "old.sqlite"
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        connection.execute(
            "CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp TEXT NOT "
            "NULL, dataset TEXT NOT NULL, family TEXT NOT NULL, model TEXT NOT NULL, convention "
            "TEXT, avg_score REAL, scores TEXT NOT NULL, metadata TEXT NOT NULL, result TEXT NOT "
            "NULL, truth_commitment TEXT)"
        )
        connection.execute(
            "INSERT INTO submissions VALUES (1, 't', 'global', 'ctf', 'old', 'reference', 1.0, "
            "'{}', '{}', '{}', 'c')"
        )
        connection.commit()
    leaderboard.record(db_path, result("new", 2.0))
    rows = leaderboard.entries(db_path)
    assert [(e["model"], e["submission_key"] is None) for e in rows] == [
        ("new", False),
        ("old", True),
    ]


# --- concurrent writers ----------------------------------------------------------------------

N_WRITERS = 20


def test_writer_on_a_fresh_db_waits_for_another_writer(tmp_path):
    db_path = tmp_path / "fresh.sqlite"
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # what `record` does, in another writer
    commit = threading.Timer(0.5, other.execute, args=("COMMIT",))
    commit.start()
    try:
        leaderboard.record(db_path, result("patient", 1.0))
    finally:
        commit.join()
        other.close()
    assert [e["model"] for e in leaderboard.entries(db_path)] == ["patient"]


# --- the command -------------------------------------------------------------------------------


def test_cli_leaderboard_prints_models_and_writes_html(db, tmp_path, capsys):
    html = str(tmp_path / "html")
    code = cli.main(["leaderboard", "--db", str(db), "--html", html, "--final"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    for original in RESULTS:
        assert original["name"] in captured.out
    assert "87.25" in captured.out
    assert captured.out.index("best-model") < captured.out.index("persistence")
    index = tmp_path / "html" / "index.html"
    assert f"HTML leaderboard: {index}" in captured.out
    assert (tmp_path / "html" / "dataset-global.html").is_file() and index.is_file()


def test_cli_leaderboard_missing_db_exits_3(tmp_path, capsys):
    missing = tmp_path / "no" / "leaderboard.sqlite"
    code = cli.main(["leaderboard", "--db", str(missing)])
    captured = capsys.readouterr()
    assert code == 3
    assert str(missing) in captured.err and "not found" in captured.err
    assert "Traceback" not in captured.err
    assert not missing.exists() and not missing.parent.exists()


def test_cli_leaderboard_not_a_database_exits_3(tmp_path, capsys):
    not_a_db = tmp_path / "leaderboard.sqlite"
    not_a_db.write_text("model,score\nzeros,0\n" * 100)
    assert cli.main(["leaderboard", "--db", str(not_a_db)]) == 3
    assert str(not_a_db) in capsys.readouterr().err


# --- 20 scoring processes sharing one scheduler ------------------------------------------------


def _file_digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.slow
def test_twenty_score_processes_sharing_a_scheduler_lose_no_entry(tmp_path, dask_cluster):
    """20 `seisctf score ctf --db` processes at once, all on one real Dask cluster, into one
    fresh leaderboard: every entry is there once, with its own scores and metadata; the cluster
    stays healthy (the same worker processes, nothing left on the scheduler, which still
    computes) and the truth store is unchanged."""
    from distributed import Client

    truth_url, _, truth = write_tiny_truth(tmp_path, "twenty-writers")
    truth_objects = _file_digests(Path(truth_url))
    with Client(dask_cluster.address, set_as_default=False, timeout="30s") as client:
        workers = client.run(os.getpid)  # {address: pid}: a lost or restarted worker changes it
    levels = (0.0, 0.1, 0.3, 1.0)
    submissions = []
    for index, level in enumerate(levels):
        path = tmp_path / f"submission-{index}.npz"
        np.savez(path, **noisy_copy(truth, seed=index, level=level))
        submissions.append(str(path))
    db_path = tmp_path / "board" / "leaderboard.sqlite"
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "seisctf.cli",
                "score",
                "ctf",
                "--truth",
                truth_url,
                "--submission",
                submissions[i % len(levels)],
                "--name",
                f"writer-{i:02d}",
                "--db",
                str(db_path),
                "--scheduler",
                dask_cluster.address,
                "--seed",
                str(i),
                "--code-url",
                "https://example.org/writers",
                "--quiet",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(N_WRITERS)
    ]
    outputs = [writer.communicate(timeout=300) for writer in writers]
    assert [writer.returncode for writer in writers] == [0] * N_WRITERS, [
        err for _, err in outputs if err
    ]
    printed = {json.loads(out)["name"]: json.loads(out) for out, _ in outputs}
    rows = leaderboard.entries(db_path)
    assert sorted(e["model"] for e in rows) == [f"writer-{i:02d}" for i in range(N_WRITERS)]
    assert len({e["id"] for e in rows}) == len({e["submission_key"] for e in rows}) == N_WRITERS
    for entry in rows:
        index = int(entry["model"].split("-")[1])
        assert entry["result"] == printed[entry["model"]]
        assert entry["metadata"] == {"code_url": "https://example.org/writers", "seed": str(index)}
        assert entry["avg_score"] == printed[entry["model"]]["avg_score"]
    by_level = {}
    for entry in rows:
        level = levels[int(entry["model"].split("-")[1]) % len(levels)]
        by_level.setdefault(level, set()).add(entry["avg_score"])
    assert all(len(scores) == 1 for scores in by_level.values())  # same input, same score
    assert by_level[0.0] == {100.0}
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        (count,) = connection.execute("SELECT COUNT(*) FROM submissions").fetchone()
    assert count == N_WRITERS
    with Client(dask_cluster.address, set_as_default=False, timeout="30s") as client:
        assert client.run(os.getpid) == workers

        def tasks_left() -> int:  # a lambda goes to the scheduler by value
            return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))

        deadline = time.monotonic() + 60  # the writers' keys go as their clients disconnect
        while tasks_left() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tasks_left() == 0
        assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3
    assert _file_digests(Path(truth_url)) == truth_objects


def test_submitter_options_are_checked_before_scoring():
    from seisctf.cli._parse import submitter_metadata

    def parse(*options: str) -> dict:
        args = cli.build_parser().parse_args(
            ["score", "ctf", "--truth", "t", "--submission", "s", *options]
        )
        return submitter_metadata(args)

    assert parse() == {}
    assert parse(
        "--code-url", "https://x.org/a", "--description", "d", "--run", "2", "--seed", "7",
        "--meta", "budget=3", "--meta", "note=a=b",
    ) == {
        "budget": "3", "note": "a=b", "code_url": "https://x.org/a", "description": "d",
        "run": "2", "seed": "7",
    }  # fmt: skip
    for bad in (["--code-url", "javascript:alert(1)"], ["--code-url", "x.org"], ["--meta", "x"]):
        with pytest.raises(InvalidInput):
            parse(*bad)
    with pytest.raises(InvalidInput, match="longer than"):
        parse("--description", "x" * 2001)


def test_print_table_shows_pick_entries_with_their_f1(tmp_path, capsys):
    db_path = tmp_path / "leaderboard.sqlite"
    leaderboard.record(db_path, result("ctf-model", 12.5))
    picks = {"name": "picker", "dataset": "global", "scores": {"detection_f1": 0.9,
             "p_f1": 0.8125, "s_f1": None}}  # fmt: skip
    leaderboard.record(db_path, picks, family="picks")
    print_table(leaderboard.entries(db_path), final=True)
    out = capsys.readouterr().out
    assert "seisctf leaderboard — global — picks" in out and "p_f1" in out
    assert "0.81" in out and "0.812" not in out and "12.50" in out and "picker" in out


def test_public_json_rounds_clips_and_orders_by_shown_digits_only(tmp_path):
    """leaderboard.json keeps the contract's shape; its scores are the clipped scores rounded
    to 0.01, its order never tells two entries apart by digits it does not show."""
    db_path = tmp_path / "leaderboard.sqlite"
    fine = {name: 12.3456789 + i for i, name in enumerate(cv.SCORE_NAMES)} | {"E13": 7.777777}
    first = result("first", 12.344, scores=fine)
    first["extended_avg_score"] = 7.777777
    leaderboard.record(db_path, first)
    # Stored scores beyond the clip (a database from elsewhere) are clipped when shown.
    leaderboard.record(db_path, result("second", 12.3449, scores={"E1": -150.5, "E2": 100.004}))
    table = leaderboard.as_json(leaderboard.entries(db_path), final=True)
    assert [row["model"] for row in table] == ["first", "second"]  # tie at 12.34: by id
    assert table[0]["scores"] == {name: round(v, 2) for name, v in fine.items()}
    assert table[0]["avg_score"] == table[1]["avg_score"] == 12.34
    assert table[0]["extended_avg_score"] == 7.78
    assert table[1]["scores"] == {"E1": -100.0, "E2": 100.0}
    assert set(table[1]) == {"model", "dataset", "convention", "scores", "avg_score"}
    text = json.dumps(table)
    for token in re.findall(r"-?\d+\.\d+", text):
        assert re.fullmatch(r"-?\d+\.\d\d?", token), token
    assert "12.344" not in text and "-150.5" not in text


def test_cli_leaderboard_writes_the_public_json(db, tmp_path, capsys):
    out = tmp_path / "public" / "leaderboard.json"
    assert cli.main(["leaderboard", "--db", str(db), "--json", str(out)]) == 0
    assert f"leaderboard JSON: {out}" in capsys.readouterr().out
    assert json.loads(out.read_text()) == leaderboard.as_json(leaderboard.entries(db))
    assert not list(out.parent.glob(".*partial"))


def test_scoring_the_same_submission_again_keeps_one_entry(tmp_path, dask_cluster, capsys):
    """`score ctf --db` run again on the same submission and truth with the same metadata (a
    re-run after the first was stopped once it had recorded) keeps one row; other metadata is
    another entry."""
    truth_url, _, truth = write_tiny_truth(tmp_path, "again")
    path = tmp_path / "model.npz"
    np.savez(path, **noisy_copy(truth, seed=1, level=0.2))
    db_path = tmp_path / "board.sqlite"

    def score(*extra: str) -> None:
        argv = ["score", "ctf", "--truth", truth_url, "--submission", str(path), "--quiet"]
        argv += ["--db", str(db_path), "--scheduler", dask_cluster.address, *extra]
        assert cli.main(argv) == 0
        capsys.readouterr()

    score("--seed", "1")
    first = leaderboard.entries(db_path)
    score("--seed", "1")
    again = leaderboard.entries(db_path)
    assert len(first) == 1
    assert [(e["id"], e["submission_key"], e["result"]) for e in again] == [
        (e["id"], e["submission_key"], e["result"]) for e in first
    ]
    assert first[0]["submission_key"] == leaderboard.entry_key(
        first[0]["result"],
        truth_commitment=first[0]["truth_commitment"],
        metadata={"seed": "1"},
    )
    score("--seed", "2")
    assert sorted(e["metadata"]["seed"] for e in leaderboard.entries(db_path)) == ["1", "2"]
