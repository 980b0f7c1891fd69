"""The public leaderboard's two views (docs/release.md): during the season a CTF entry shows its
public score alone (short-time and reconstruction scores on the public part), to the Ladder's
step; at the close (`final`) its private part's
E1..E12 and AvgScore to 0.01, ranked by them; both hold one released entry per participant and
truth, the one that set their best."""

from __future__ import annotations

import re

import dask.array as da
import numpy as np
import pytest
from conftest import synthetic_manifest
from test_ctf import synthetic_truth

from seisctf import cli
from seisctf import conventions as cv
from seisctf.scoring import ladder, leaderboard, release
from seisctf.scoring.ctf import score_arrays
from seisctf.scoring.site import pages as site
from seisctf.scoring.site.terminal import print_results, print_table

SALT = "3c" * 16
COMMITMENT = "ab" * 32


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Real referee results (with parts) of three submissions of a small synthetic truth."""
    manifest = synthetic_manifest(40, 24, 6, 8)
    truth = synthetic_truth(40, 24, seed=9)
    rng = np.random.default_rng(2)
    submissions = {
        name: {
            test: da.from_array(a + level * rng.standard_normal(a.shape))
            for test, a in truth.items()
        }
        for name, level in (("good", 0.2), ("fair", 0.6), ("poor", 1.5))
    }
    scored = score_arrays(
        manifest,
        {name: da.from_array(a) for name, a in truth.items()},
        submissions,
        salt=SALT,
        verify=False,
        quiet=True,
    )
    return {result["name"]: result for result in scored}


def _released(result: dict, participant: str, best: float, improved: bool) -> dict:
    view = release.release_ctf(result, ladder.Rung(participant, best, improved))
    return release.recorded_result("ctf", result, view)


@pytest.fixture
def db(tmp_path, results):
    """Organiser baselines (recorded without a release) and two participants' releases."""
    path = tmp_path / "board.sqlite"

    def add(result: dict, **metadata: str) -> None:
        leaderboard.record(path, result, truth_commitment=COMMITMENT, metadata=metadata)

    add(results["poor"], description="organiser baseline")
    public = {name: release.public_score(r) for name, r in results.items()}
    add(_released(results["fair"], "team-a", ladder.to_step(public["fair"]), True), run="1")
    add(_released(results["good"], "team-a", ladder.to_step(public["good"]), True), run="2")
    add(_released(results["fair"], "team-a", ladder.to_step(public["good"]), False), run="3")
    add(_released(results["poor"], "team-b", ladder.to_step(public["poor"]), True), run="1")
    return path


def test_season_view_holds_only_public_scores_to_the_step(db, results):
    shown = release.public_entries(leaderboard.entries(db))
    public = {name: release.public_score(r) for name, r in results.items()}
    assert [(e["model"], (e["metadata"] or {}).get("run")) for e in shown] == [
        ("good", "2"),  # team-a: the release that set their best alone
        ("poor", None),
        ("poor", "1"),  # team-b
    ]
    for entry in shown:
        assert entry["scores"] == {} and "extended_avg_score" not in entry["result"]
        assert entry["avg_score"] is None
        assert entry["public_score"] == ladder.to_step(public[entry["model"]])
    table = leaderboard.as_json(leaderboard.entries(db))
    assert all(row["scores"] == {} and row["avg_score"] is None for row in table)
    assert [row["public_score"] for row in table] == [e["public_score"] for e in shown]


def test_final_view_holds_private_scores_and_ranks_by_them(db, results):
    shown = release.public_entries(leaderboard.entries(db), final=True)
    assert [e["model"] for e in shown] == ["good", "poor", "poor"]
    for entry in shown:
        private = results[entry["model"]]["parts"]["private"]
        assert entry["scores"] == {k: round(v, 2) + 0.0 for k, v in private["scores"].items()}
        assert entry["avg_score"] == round(private["avg_score"], 2)
    assert list(shown[0]["scores"]) == list(cv.SCORE_NAMES)
    averages = [e["avg_score"] for e in shown]
    assert averages == sorted(averages, reverse=True)


def test_season_table_and_pages_have_no_per_score_value(db, tmp_path, capsys):
    entries = leaderboard.entries(db)
    print_table(entries)
    season = capsys.readouterr().out
    assert "(season:" in season and "E1" not in season and "E12" not in season
    assert re.search(r"│ +-?\d+ │", season)  # the AvgScore, a multiple of the step
    print_table(entries, final=True)
    final = capsys.readouterr().out
    assert "(final:" in final and "E12" in final
    page = "dataset-synthetic.html"
    season_page = (site.write_site(entries, tmp_path / "season").parent / page).read_text()
    final_page = (site.write_site(entries, tmp_path / "final", True).parent / page).read_text()
    assert "Public score" in season_page and "-overlay" not in season_page
    assert "-radar-" not in season_page and "Score profiles" not in season_page
    assert not re.search(r">E\d+<", season_page)
    assert re.search(r">E12<", final_page) and final_page.count('role="img"') >= 2
    assert "Season view" in season_page and "Final view" in final_page


def test_cli_leaderboard_final_switch(db, tmp_path, capsys):
    out = tmp_path / "final.json"
    assert cli.main(["leaderboard", "--db", str(db), "--final", "--json", str(out)]) == 0
    capsys.readouterr()
    assert out.read_text().count('"E12"') == 3
    assert cli.main(["leaderboard", "--db", str(db), "--json", str(out)]) == 0
    assert '"E12"' not in out.read_text()


def test_the_short_table_of_a_release_shows_the_ladder(results, capsys):
    view = release.release_ctf(results["good"], ladder.Rung("team-a", 41.0, True))
    print_results([view])
    out = capsys.readouterr().out
    assert "Public score" in out and "41" in out and "yes" in out and "E1" not in out
