"""The SQLite leaderboard: round trip and ranking, HTML view, concurrent writers, the command."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import re
import sqlite3
import threading

import pytest

from seisctf import cli
from seisctf import conventions as cv
from seisctf.scoring import leaderboard

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def result(
    name: str, avg_score: float | None, dataset: str = "global", scores: dict | None = None
) -> dict:
    """A scorer's result object (ARCHITECTURE.md, "Scoring conventions")."""
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

    table = leaderboard.as_json(rows)
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
    first = leaderboard.truth_commitment_of({"truth_sha256": {"X1test": "aa", "X2test": "bb"}})
    same = leaderboard.truth_commitment_of(
        {"truth_sha256": {"X2test": "bb", "X1test": "aa"}, "dataset": "other"}
    )
    other = leaderboard.truth_commitment_of({"truth_sha256": {"X1test": "ab", "X2test": "bb"}})
    assert first == same != other
    assert re.fullmatch("[0-9a-f]{64}", first)


def test_write_html_one_row_per_model_and_radar_png(db, tmp_path):
    leaderboard.record(db, result("<script>alert(1)</script>", 5.0))
    rows = leaderboard.entries(db)
    index = leaderboard.write_html(rows, tmp_path / "html")
    assert index == tmp_path / "html" / "index.html"
    page = index.read_text()
    assert page.count("<table>") == 2  # one per dataset
    bodies = re.findall(r"<tbody>(.*?)</tbody>", page, flags=re.S)
    assert [body.count("<tr>") for body in bodies] == [1, 6]  # das, global
    for entry in rows:
        if not entry["model"].startswith("<"):
            assert f"<th scope='row'>{entry['model']}</th>" in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "—" in page  # None scores shown as a dash
    for dataset in ("global", "das"):
        image = tmp_path / "html" / f"radar-{dataset}.png"
        assert f"src='{image.name}'" in page
        data = image.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 1024
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 100 and height > 100


def test_write_html_survives_dollar_signs_in_model_names(tmp_path):
    db_path = tmp_path / "leaderboard.sqlite"
    leaderboard.record(db_path, result("team $x^$ v2", 1.0))
    index = leaderboard.write_html(leaderboard.entries(db_path), tmp_path / "html")
    assert "team $x^$ v2" in index.read_text()


# --- concurrent writers ----------------------------------------------------------------------

N_WRITERS = 20


def _record_one(db_path: str, index: int, start) -> None:
    """A writer process: wait for all the others, then record one entry."""
    start.wait(timeout=120)
    leaderboard.record(db_path, result(f"writer-{index:02d}", float(index)))


def test_concurrent_writers_lose_no_entry(tmp_path):
    """20 writer processes released at once into one existing leaderboard (as after a first
    score; the fresh-file race is the next test's subject)."""
    db_path = str(tmp_path / "shared.sqlite")
    assert leaderboard.entries(db_path) == []
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(N_WRITERS)
    writers = [
        context.Process(target=_record_one, args=(db_path, i, start)) for i in range(N_WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=180)
    assert [writer.exitcode for writer in writers] == [0] * N_WRITERS
    rows = leaderboard.entries(db_path)
    assert len(rows) == N_WRITERS
    assert sorted(e["model"] for e in rows) == [f"writer-{i:02d}" for i in range(N_WRITERS)]
    assert [e["avg_score"] for e in rows] == [float(i) for i in reversed(range(N_WRITERS))]
    with contextlib.closing(sqlite3.connect(db_path)) as connection:
        ids = [row[0] for row in connection.execute("SELECT id FROM submissions ORDER BY id")]
    assert ids == list(range(1, N_WRITERS + 1))


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
    code = cli.main(["leaderboard", "--db", str(db), "--html", str(tmp_path / "html")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    for original in RESULTS:
        assert original["name"] in captured.out
    assert "87.25" in captured.out
    assert captured.out.index("best-model") < captured.out.index("persistence")
    assert (tmp_path / "html" / "index.html").is_file()
    assert (tmp_path / "html" / "radar-global.png").read_bytes()[:8] == PNG_MAGIC


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
