"""The referee service on PostgreSQL (a throwaway cluster, `postgres_url`; each test a database of
its own): a team's upload scored end to end and recorded once, its job, leaderboard entry,
release slot and Ladder rung all in PostgreSQL (no SQLite file in the competition's folder); and
the job table's two races on both databases: concurrent workers claim every queued submission
(and one whose lease ran out) exactly once, and concurrent uploads of one team cannot pass its
quota together; and every thread the service runs gets a connection at once."""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from running_service import Service, add_team, create_competition, upload, wait_finished
from service_fixtures import (  # noqa: F401
    persistence_zip,
    postgres_database,
    tiny_bundle,
    together,
)

from seisctf.scoring import leaderboard, postgres_records
from seisctf.service import intake, jobs, tables, teams

THREADS = 4
QUEUED_JOBS = 40
LAPSED_JOBS = 12
QUOTA, UPLOADS, CHARGE_ROUNDS = 3, 10, 5


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    """The service's tables in a new SQLite file, or in a new PostgreSQL database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'service.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_database")
    made = tables.engine_of(url)
    assert made.dialect.name == request.param
    yield made
    made.dispose()


def a_team(engine: sa.Engine, name: str = "Team One") -> teams.Team:
    teams.add_team(engine, name)
    with engine.connect() as connection:
        row = connection.execute(
            sa.select(tables.teams.c.id).where(tables.teams.c.name == name)
        ).one()
    return teams.Team(row.id, name, "")


def insert_submissions(
    engine: sa.Engine, team: teams.Team, count: int, state: str, **values: Any
) -> list[str]:
    """`count` submissions of `team` in `state` (oldest first), inserted as rows: their ids."""
    now = time.time()
    rows = [
        {
            "id": secrets.token_hex(16),
            "team_id": team.id,
            "dataset": "tiny",
            "sha256": secrets.token_hex(32),
            "model": "persistence",
            "stored": "/nowhere.zip",
            "size": 1,
            "state": state,
            "message": "",
            "created_s": now + index * 1e-3,
            "updated_s": now,
            "attempts": 0,
            "final": False,
            **values,
        }
        for index in range(count)
    ]
    with engine.begin() as connection:
        connection.execute(tables.submissions.insert(), rows)
    return [row["id"] for row in rows]


def states(engine: sa.Engine) -> dict[str, Any]:
    with engine.connect() as connection:
        rows = connection.execute(sa.select(tables.submissions)).all()
    return {row.id: row for row in rows}


def drain(engine: sa.Engine, owner: str) -> list[str]:
    """Claim as `owner` until there is nothing to claim: the ids claimed."""
    claimed = []
    while (job := jobs.claim(engine, owner)) is not None:
        claimed.append(job["id"])
    return claimed


def test_concurrent_workers_claim_every_queued_submission_once(engine: sa.Engine) -> None:
    team = a_team(engine)
    queued = insert_submissions(engine, team, QUEUED_JOBS, tables.QUEUED)

    def work(index: int) -> tuple[list[str], int]:
        """The ids this worker claimed, and how many were still queued when it was told none
        was (none should be: nothing is queued meanwhile)."""
        claimed = drain(engine, f"worker-{index}")
        return claimed, len([row for row in states(engine).values() if row.state == "queued"])

    outcomes = together(THREADS, work)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert [left for _, left in outcomes] == [0] * THREADS, "claim said none, with work queued"
    claims = [claimed for claimed, _ in outcomes]
    counted = Counter(ident for claimed in claims for ident in claimed)
    assert sorted(counted) == sorted(queued)
    assert set(counted.values()) == {1}, counted.most_common(3)
    rows = states(engine)
    for index, claimed in enumerate(claims):
        for ident in claimed:
            assert rows[ident].state == tables.SCORING
            assert rows[ident].lease_owner == f"worker-{index}"
            assert rows[ident].attempts == 1


def test_a_lease_run_out_is_taken_over_once(engine: sa.Engine) -> None:
    team = a_team(engine)
    now = time.time()
    lapsed = insert_submissions(
        engine, team, LAPSED_JOBS, tables.SCORING, lease_owner="died", lease_until_s=now - 5,
        attempts=1,
    )  # fmt: skip
    (held,) = insert_submissions(
        engine, team, 1, tables.SCORING, lease_owner="alive", lease_until_s=now + 600, attempts=1
    )
    claims = together(THREADS, lambda index: drain(engine, f"worker-{index}"))
    assert not [c for c in claims if isinstance(c, Exception)], claims
    counted = Counter(ident for claimed in claims for ident in claimed)
    assert sorted(counted) == sorted(lapsed)
    assert set(counted.values()) == {1}, counted.most_common(3)
    rows = states(engine)
    for index, claimed in enumerate(claims):
        for ident in claimed:
            assert rows[ident].lease_owner == f"worker-{index}"
            assert rows[ident].attempts == 2 and rows[ident].lease_until_s > now
    assert rows[held].lease_owner == "alive" and rows[held].attempts == 1


def charge_at_once(engine: sa.Engine, team: teams.Team, idents: list[str]) -> list[Any]:
    """Each submission charged to `team`'s quota (`QUOTA`) in a thread of its own, at once."""
    return together(len(idents), lambda index: intake._charge(engine, idents[index], team, QUOTA))


def test_concurrent_charges_of_one_team_stop_at_its_quota(engine: sa.Engine) -> None:
    """Rounds of `UPLOADS` charges of one team at once (a new team each: a race is not won
    every time), each stopping at `QUOTA`."""
    for round_ in range(CHARGE_ROUNDS):
        team = a_team(engine, f"Team {round_}")
        validated = insert_submissions(engine, team, UPLOADS, tables.VALIDATED)
        outcomes = charge_at_once(engine, team, validated)
        refused = [o for o in outcomes if isinstance(o, intake.Refused)]
        assert not [o for o in outcomes if o is not None and o not in refused], outcomes
        rows = states(engine)
        charged = [i for i in validated if rows[i].state == tables.QUEUED]
        assert len(charged) == QUOTA, f"round {round_}: {len(charged)} charged, quota {QUOTA}"
        assert all(rows[i].charged_s is not None for i in charged)
        assert len(refused) == UPLOADS - QUOTA and {r.status for r in refused} == {429}
        left = [i for i in validated if i not in charged]
        assert all(rows[i].state == tables.VALIDATED and rows[i].charged_s is None for i in left)


@pytest.mark.slow
def test_a_team_upload_is_scored_with_the_service_on_postgresql(
    postgres_database: str,  # noqa: F811
    dask_cluster,
    tiny_bundle: Path,  # noqa: F811
    persistence_zip: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = create_competition(tmp_path, tiny_bundle, db=postgres_database)
    token = add_team(folder, "Team One", db=postgres_database)
    service = Service(folder, scheduler=dask_cluster.address, db=postgres_database).start()
    try:
        with service.client(token) as client:
            sent = upload(client, persistence_zip)
            assert sent.status_code == 201, sent.text
            view = wait_finished(client, sent.json()["id"])
    finally:
        service.stop()
    assert view["state"] == "scored", view
    # The job table and the referee's records are PostgreSQL's: their rows are there, and no
    # SQLite file was made.
    assert sorted(path.name for path in folder.glob("*.sqlite*")) == []
    rows = leaderboard.entries(postgres_database)
    assert len(rows) == 1
    assert rows[0]["metadata"]["submission"] == view["id"]
    assert rows[0]["result"]["released"] == view["released"]
    engine = tables.engine_of(postgres_database)
    try:
        stored = states(engine)
        with engine.connect() as connection:
            recorded = connection.execute(sa.select(postgres_records.schema().leaderboard)).all()
            slots = connection.execute(sa.select(postgres_records.schema().releases)).all()
            rungs = connection.execute(sa.select(postgres_records.schema().ladder)).all()
    finally:
        engine.dispose()
    assert list(stored) == [view["id"]] and stored[view["id"]].state == tables.SCORED
    assert [row.submission_key for row in recorded] == [
        jobs.entry_key(stored[view["id"]]._asdict())
    ]
    assert [(s.participant, s.state, s.holder) for s in slots] == [
        ("Team One", "released", view["id"])
    ]
    assert [(r.participant, r.best, r.improved, r.state) for r in rungs] == [
        ("Team One", view["released"]["public_score"], 1, "released")
    ]


def test_a_retry_is_not_claimed_before_its_wait(engine: sa.Engine) -> None:
    """A job queued again after an infrastructure failure is claimable only once its wait is
    over (1 s, then 2 s), a new one at once: on both databases, the claim's one UPDATE."""
    (ident,) = insert_submissions(engine, a_team(engine), 1, tables.QUEUED)
    delay_s = 1.0

    def claim() -> dict[str, Any] | None:
        return jobs.claim(engine, "worker", retry_delay_s=delay_s)

    assert claim()["id"] == ident  # never tried: no wait
    for attempt in (1, 2):
        assert jobs.finish(engine, ident, "worker", tables.QUEUED, message="failed")
        queued_s = states(engine)[ident].updated_s
        wait_s = jobs.retry_delay(attempt, delay_s)
        assert wait_s == delay_s * 2 ** (attempt - 1)
        tries = 0
        while time.time() < queued_s + wait_s - 0.1:
            early_s = time.time() - queued_s
            assert claim() is None, f"claimed {early_s:.2f} s after attempt {attempt}"
            tries += 1
            time.sleep(0.05)
        assert tries >= 5
        time.sleep(max(0.0, queued_s + wait_s - time.time()) + 0.01)
        job = claim()
        assert job is not None and job["id"] == ident and job["attempts"] == attempt + 1


def test_every_service_thread_gets_a_connection_at_once(engine: sa.Engine) -> None:
    """As many threads as the service runs (the 40 of its request thread pool, scorers) each
    hold a connection at the same moment: none waits for the pool, which once gave 15 and then
    failed a request after 30 s (the database itself serialises the writers)."""
    holders = 48
    all_hold = threading.Barrier(holders, timeout=20)

    def hold(_: int) -> int:
        with engine.connect() as connection:
            all_hold.wait()  # BrokenBarrierError if any thread is still waiting for the pool
            return int(
                connection.execute(
                    sa.select(sa.func.count()).select_from(tables.teams)
                ).scalar_one()
            )

    assert together(holders, hold) == [0] * holders
