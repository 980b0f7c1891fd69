"""The referee protocol (`seisctf.scoring.referee`): quota → score → release → write → record,
with the truth opened once for the scores and the commitment an entry records."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import noisy_copy, write_tiny_truth

from seisctf import storage
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard, referee, release
from seisctf.scoring.ctf import score_ctf


@pytest.fixture(scope="module")
def ctf(tmp_path_factory):
    """(truth URL, {name: the location of a noisy .npz submission})."""
    root = tmp_path_factory.mktemp("referee")
    truth_url, _, truth = write_tiny_truth(root, "referee-secret")
    paths = {}
    for seed in (1, 2):
        paths[f"noisy{seed}"] = StoreLocation(root / f"noisy{seed}.npz")
        np.savez(paths[f"noisy{seed}"].url, **noisy_copy(truth, seed=seed, level=0.3))
    return truth_url, paths


def test_truth_is_opened_once_and_its_commitment_recorded(ctf, tmp_path, monkeypatch):
    truth_url, paths = ctf
    reads = []
    read_attrs = storage.read_attrs

    def counting(location, *args, **kwargs):
        reads.append(location.url)
        return read_attrs(location, *args, **kwargs)

    monkeypatch.setattr(storage, "read_attrs", counting)
    db = str(tmp_path / "board.sqlite")
    written = []
    results = referee.run_ctf(
        StoreLocation(truth_url),
        paths,
        referee.Referee(db=db, metadata={"run": "1"}),
        written.append,
        quiet=True,
    )
    assert reads.count(truth_url) == 1
    monkeypatch.setattr(storage, "read_attrs", read_attrs)
    assert written == [results]
    assert results == score_ctf(StoreLocation(truth_url), paths, quiet=True)
    manifest = CtfManifest.from_attrs(storage.read_attrs(StoreLocation(truth_url)), truth_url)
    entries = leaderboard.entries(db)
    assert sorted(e["model"] for e in entries) == sorted(paths)
    assert {e["truth_commitment"] for e in entries} == {leaderboard.truth_commitment_of(manifest)}
    assert all(e["metadata"] == {"run": "1"} for e in entries)


def test_released_run_counts_and_a_failed_write_gives_the_slots_back(ctf, tmp_path):
    truth_url, paths = ctf
    asked = release.Release("team-a", str(tmp_path / "quota.sqlite"), quota=2)
    judge = referee.Referee(release=asked, db=str(tmp_path / "board.sqlite"))

    def failing(results):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        referee.run_ctf(
            StoreLocation(truth_url), {"noisy1": paths["noisy1"]}, judge, failing, quiet=True
        )
    assert release.used(asked) == 0
    assert leaderboard.entries(judge.db) == []  # recorded only once written
    (full,) = score_ctf(StoreLocation(truth_url), {"noisy1": paths["noisy1"]}, quiet=True)
    commitment = leaderboard.truth_commitment_of(
        CtfManifest.from_attrs(storage.read_attrs(StoreLocation(truth_url)), truth_url)
    )
    assert ladder.current_best(asked, commitment) is None  # the failed run's rung was deleted
    (result,) = referee.run_ctf(
        StoreLocation(truth_url), {"noisy1": paths["noisy1"]}, judge, quiet=True
    )
    assert release.used(asked) == 1 and "raw_scores" not in result and "scores" not in result
    assert result["improved"] is True
    assert result["public_score"] == ladder.to_step(release.public_score(full))
    assert ladder.current_best(asked, commitment) == result["public_score"]
    # The organisers' leaderboard keeps the result in full, what was released beside it.
    recorded = [e["result"] for e in leaderboard.entries(judge.db)]
    assert any(r["released"] == result and r["parts"] == full["parts"] for r in recorded)
    with pytest.raises(InvalidInput, match="1 of 2 releases used"):
        referee.run_ctf(StoreLocation(truth_url), paths, referee.Referee(release=asked), quiet=True)
    assert release.used(asked) == 1


def test_a_database_that_is_not_one_is_refused_before_scoring(ctf, tmp_path):
    truth_url, paths = ctf
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database")
    asked = release.Release("team-b", str(tmp_path / "quota.sqlite"))

    def never(results):
        raise AssertionError("nothing may be written")

    with pytest.raises(InvalidInput, match="not a seisctf leaderboard database"):
        referee.run_ctf(
            StoreLocation(truth_url), paths, referee.Referee(asked, str(junk)), never, quiet=True
        )
    assert release.used(asked) == 0
