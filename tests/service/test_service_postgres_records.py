"""The referee's records on PostgreSQL (`seisctf.scoring.postgres_records`: a service's `--db
postgresql://…`): the leaderboard, the release quota and the Ladder read and write as their
SQLite files do, and their two races hold there too: reservers of one participant at once never
pass its quota, and climbers at once are ordered as one Ladder (the advisory lock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from service_fixtures import postgres_database, together  # noqa: F401

from seisctf.errors import InvalidInput
from seisctf.scoring import ladder, leaderboard, postgres_records, release

COMMITMENT = "c0" * 32
THREADS = 10
QUOTA, ROUNDS = 3, 6


def a_result(dataset: str, name: str, avg_score: float | None) -> dict[str, Any]:
    return {"dataset": dataset, "name": name, "convention": "reference", "avg_score": avg_score,
            "scores": {"E1": avg_score}}  # fmt: skip


@pytest.fixture
def targets(postgres_database: str, tmp_path: Path) -> dict[str, str]:  # noqa: F811
    """Where each backend keeps the records: an SQLite file's path, a PostgreSQL URL."""
    return {"sqlite": str(tmp_path / "records.sqlite"), "postgresql": postgres_database}


def test_the_leaderboard_reads_the_same_entries_from_both(targets: dict[str, str]) -> None:
    """The same entries recorded on each backend are read back alike: one row per key, in the
    SQLite file's order (datasets byte by byte, missing scores last)."""
    results = [a_result("b", "m1", 10.0), a_result("B", "m2", None), a_result("b", "m3", 30.0),
               a_result("a", "m4", -5.0), a_result("b", "m5", None)]  # fmt: skip
    read = {}
    for backend, target in targets.items():
        leaderboard.check_database(target)
        ids = [leaderboard.record(target, result, metadata={"team": "t"}) for result in results]
        assert leaderboard.record(target, results[0], metadata={"team": "t"}) == ids[0]
        again = leaderboard.record(target, results[1], submission_key="job-1")
        assert leaderboard.record(target, results[3], submission_key="job-1") == again
        read[backend] = [
            {key: value for key, value in entry.items() if key != "timestamp"}
            for entry in leaderboard.entries(target)
        ]
        assert [e["model"] for e in leaderboard.entries(target, "picks")] == []
    assert read["postgresql"] == read["sqlite"]
    assert [(e["dataset"], e["model"]) for e in read["sqlite"]] == [
        ("B", "m2"), ("B", "m2"), ("a", "m4"), ("b", "m3"), ("b", "m1"), ("b", "m5")
    ]  # fmt: skip


def test_quota_and_ladder_behave_alike_on_both(targets: dict[str, str]) -> None:
    """The rolling window, slots given back, holders' pending rows, and the Ladder's bests."""
    day = release.QUOTA_WINDOW_S
    for target in targets.values():
        ask = release.Release("team-a", target, quota=2, holder="job-1")
        release.reserve(ask, "ctf", ["old"], now_s=1_000_000.0)
        release.reserve(ask, "picks", ["newer"], now_s=1_000_000.0 + day / 2)
        with pytest.raises(InvalidInput, match=r"2 of 2 releases used .*1970-01-13T13:46:40"):
            release.reserve(ask, "ctf", ["again"], now_s=1_000_000.0 + day - 1)
        assert release.used(ask, now_s=1_000_000.0 + day - 1) == 2
        assert release.drop_pending(ask) == 2  # never settled: a dead run's
        fresh = release.Release("team-c", target, quota=1)
        with pytest.raises(RuntimeError), release.quota_slots(fresh, "ctf", ["m"]):
            assert release.used(fresh) == 1
            raise RuntimeError("scoring failed")
        assert release.used(fresh) == 0
        with release.quota_slots(fresh, "ctf", ["m"]):
            pass
        assert release.used(fresh) == 1 and release.drop_pending(fresh) == 0

        rungs = []
        with ladder.climbing(ask) as climb:
            rungs += [climb(COMMITMENT, "m", score) for score in (30.2, 30.9, 31.4, None)]
        with pytest.raises(RuntimeError), ladder.climbing(ask) as climb:
            rungs.append(climb(COMMITMENT, "m", 50.0))
            raise RuntimeError("recording failed")
        assert [(rung.best, rung.improved) for rung in rungs] == [
            (30.0, True), (30.0, False), (31.0, True), (31.0, False), (50.0, True)
        ]  # fmt: skip
        assert ladder.current_best(ask, COMMITMENT) == 31.0
        assert ladder.current_best(ask, "another truth") is None
        ladder.climbing(ask).__enter__()(COMMITMENT, "killed", 40.0)  # never settled
        assert ladder.current_best(ask, COMMITMENT) == 40.0
        assert ladder.drop_pending(ask) == 1 and ladder.current_best(ask, COMMITMENT) == 31.0


def test_concurrent_reservers_never_pass_the_quota_on_postgresql(
    postgres_database: str,  # noqa: F811
) -> None:
    """Rounds of `THREADS` reservations of one participant at once (a new one each round: a
    race is not won every time), each stopping at `QUOTA`."""
    for round_ in range(ROUNDS):
        ask = release.Release(f"team-{round_}", postgres_database, quota=QUOTA)
        outcomes = together(
            THREADS, lambda index, ask=ask: release.reserve(ask, "ctf", [f"m{index}"])
        )
        refused = [o for o in outcomes if isinstance(o, InvalidInput)]
        taken = [o for o in outcomes if isinstance(o, list)]
        assert len(refused) + len(taken) == THREADS, outcomes
        assert len(taken) == QUOTA, f"round {round_}: {len(taken)} slots taken, quota {QUOTA}"
        assert release.used(ask) == QUOTA


def test_concurrent_climbs_are_one_ladder_on_postgresql(
    postgres_database: str,  # noqa: F811
) -> None:
    """`THREADS` runs climb one participant's Ladder at once, rounds of them: the rungs, in the
    order their transactions took them, are exactly the Ladder's sequence over their scores,
    so the best never goes down and each improvement beats the best before it by a step."""
    scores = [10.0, 12.2, 10.5, 30.4, 11.0, 12.0, 29.6, 30.0, 5.0, 31.3]
    for round_ in range(ROUNDS):
        ask = release.Release(f"team-{round_}", postgres_database)

        def run(index: int, ask: release.Release = ask, shift: float = round_) -> ladder.Rung:
            with ladder.climbing(ask) as climb:
                return climb(COMMITMENT, f"m{index}", scores[index % len(scores)] + shift)

        outcomes = together(THREADS, run)
        assert all(isinstance(o, ladder.Rung) for o in outcomes), outcomes
        table = postgres_records.schema().ladder
        with postgres_records.engine(postgres_database).connect() as connection:
            rows = connection.execute(
                sa.select(table.c.public_avg_score, table.c.best, table.c.improved, table.c.state)
                .where(table.c.participant == ask.participant)
                .order_by(table.c.id)
            ).all()
        assert len(rows) == THREADS and {row.state for row in rows} == {"released"}
        best = None
        for row in rows:
            best, improved = ladder.next_best(best, row.public_avg_score)
            assert (row.best, bool(row.improved)) == (best, improved), f"round {round_}: {rows}"
        assert ladder.current_best(ask, COMMITMENT) == best == 31.0 + round_
