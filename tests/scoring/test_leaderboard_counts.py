"""Counts in what seisctf prints and publishes take their noun in the right number: a leaderboard
of one submission on one dataset says so ("1 scored submission on 1 dataset", not "1 datasets"),
through `seisctf leaderboard --html`; two say "2 … submissions"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from leaderboard_fixtures import GLOBAL_COMMITMENT, ctf_result

from seisctf import conventions as cv
from seisctf.scoring import leaderboard
from seisctf.wording import counted


def site_text(db: Path, site: Path) -> str:
    """Every page `seisctf leaderboard --db DB --html SITE` writes, joined."""
    argv = ["leaderboard", "--db", str(db), "--html", str(site)]
    command = [sys.executable, "-m", "seisctf.cli", *argv]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return "\n".join(page.read_text() for page in sorted(site.rglob("*.html")))


def test_one_submission_on_one_dataset_is_singular(tmp_path):
    db = tmp_path / "lb.sqlite"
    zeros = ctf_result("zeros", {name: 0.0 for name in cv.SCORE_NAMES})
    leaderboard.record(db, zeros, truth_commitment=GLOBAL_COMMITMENT)
    text = site_text(db, tmp_path / "one")
    assert "1 scored submission on 1 dataset." in text
    assert "1 submission of 1 model " in text
    assert "1 datasets" not in text and "1 submissions" not in text
    leaderboard.record(db, zeros | {"name": "other"}, truth_commitment=GLOBAL_COMMITMENT)
    text = site_text(db, tmp_path / "two")
    assert "2 scored submissions on 1 dataset." in text
    assert "2 submissions of 2 models " in text


def test_counted_nouns():
    assert [counted(n, "dataset") for n in (0, 1, 2)] == ["0 datasets", "1 dataset", "2 datasets"]
    assert counted(1, "such trace") == "1 such trace"
    assert counted(3, "series", "series") == "3 series"
