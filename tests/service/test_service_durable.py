"""Durable jobs: the job table is the source of truth. A submission whose worker died holding it
is taken over once its lease runs out and scored once (the Ladder rung it left pending
dropped); a server killed (SIGKILL) while scoring leaves its job to be scored once after the
restart; nothing is recorded twice."""

from __future__ import annotations

import sqlite3
import time

import pytest
import sqlalchemy as sa
from running_service import Service, add_team, upload, wait_finished
from service_fixtures import competition, persistence_zip, tiny_bundle  # noqa: F401

from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard
from seisctf.scoring.ctf import open_truth
from seisctf.scoring.release_request import Release
from seisctf.service import competition as service_competition
from seisctf.service import jobs, tables

pytestmark = pytest.mark.slow


def _engine(competition):  # noqa: F811
    return tables.engine_of(f"sqlite:///{competition / 'service.sqlite'}")


def _row(competition, ident: str) -> dict:  # noqa: F811
    with _engine(competition).connect() as connection:
        query = sa.select(tables.submissions).where(tables.submissions.c.id == ident)
        return connection.execute(query).one()._asdict()


def _recorded(competition, ident: str) -> list[dict]:  # noqa: F811
    rows = leaderboard.entries(str(competition / "leaderboard.sqlite"))
    return [row for row in rows if row["metadata"].get("submission") == ident]


def test_a_job_left_by_a_dead_worker_is_scored_once_after_its_lease(
    competition,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
):
    token = add_team(competition, "durable")
    receiving = Service(competition, scheduler=dask_cluster.address, workers=0).start()
    try:
        with receiving.client(token) as client:
            ident = upload(client, persistence_zip).json()["id"]
            time.sleep(1)
            assert client.get(f"/api/submissions/{ident}").json()["state"] == "queued"
    finally:
        receiving.stop()
    # A worker claims it and dies: its lease runs out in 2 s. It died after taking its Ladder
    # rung (a public score of 90, far above what the submission scores), before settling it.
    claimed = jobs.claim(_engine(competition), "a-worker-that-died", lease_s=2)
    assert claimed["id"] == ident and _row(competition, ident)["state"] == "scoring"
    assert jobs.claim(_engine(competition), "another", lease_s=2) is None  # held meanwhile
    truth = service_competition.load(competition).datasets["tiny"].truth
    commitment = leaderboard.truth_commitment_of(open_truth(StoreLocation(truth))[0])
    releases = str(competition / "releases.sqlite")
    died = ladder.climbing(Release("durable", releases, jobs.SERVICE_QUOTA, holder=ident))
    assert died.__enter__()(commitment, "persistence", 90.0).improved  # never exited
    assert ladder.current_best(Release("durable", releases), commitment) == 90.0

    scoring = Service(competition, scheduler=dask_cluster.address, lease_s=5).start()
    try:
        with scoring.client(token) as client:
            view = wait_finished(client, ident)
    finally:
        scoring.stop()
    assert view["state"] == "scored"
    # The dead attempt's rung went with it: the team's first release sets its best.
    assert view["released"]["improved"] and view["released"]["public_score"] < 90, view["released"]
    with sqlite3.connect(releases) as connection:
        assert connection.execute("SELECT state FROM ladder").fetchall() == [("released",)]
    row = _row(competition, ident)
    assert row["attempts"] == 2 and row["lease_owner"] is None and row["charged_s"] is not None
    assert len(_recorded(competition, ident)) == 1
    # The dead worker's late finish cannot overwrite the result: it no longer holds the lease.
    assert not jobs.finish(_engine(competition), ident, "a-worker-that-died", tables.FAILED)
    assert _row(competition, ident)["state"] == "scored"


def test_a_server_killed_while_scoring_leaves_the_job_to_be_scored_once(
    competition,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
):
    token = add_team(competition, "killed")
    first = Service(competition, scheduler=dask_cluster.address, lease_s=3).start()
    try:
        with first.client(token) as client:
            ident = upload(client, persistence_zip).json()["id"]
            deadline = time.monotonic() + 60
            while _row(competition, ident)["state"] != "scoring":
                assert time.monotonic() < deadline, _row(competition, ident)
                time.sleep(0.01)
            first.kill()
    finally:
        first.kill()
    killed = _row(competition, ident)
    if killed["state"] == "scored":
        pytest.fail("the score landed before the kill: the test did not kill a score midway")
    assert killed["state"] == "scoring" and killed["attempts"] == 1

    second = Service(competition, scheduler=dask_cluster.address, lease_s=3).start()
    try:
        with second.client(token) as client:
            view = wait_finished(client, ident)
            assert view["state"] == "scored"
            assert len(client.get("/api/submissions").json()) == 1
    finally:
        second.stop()
    assert _row(competition, ident)["attempts"] == 2
    assert len(_recorded(competition, ident)) == 1


def test_a_failure_of_the_infrastructure_is_retried_then_refunded(
    competition,  # noqa: F811
    tiny_bundle,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
    tmp_path,
):
    token = add_team(competition, "unlucky")
    truth = tiny_bundle / "truth.zarr"
    hidden = tmp_path / "truth-elsewhere.zarr"
    service = Service(competition, scheduler=dask_cluster.address, workers=0).start()
    try:
        with service.client(token) as client:
            ident = upload(client, persistence_zip).json()["id"]
    finally:
        service.stop()
    truth.rename(hidden)  # the organisers' truth is gone: not the team's fault
    queued: dict[int, dict] = {}  # attempts → the row queued again after them
    try:
        service = Service(competition, scheduler=dask_cluster.address, retry_delay_s=1).start()
        try:
            deadline = time.monotonic() + 120
            while (row := _row(competition, ident))["state"] != "failed":
                assert time.monotonic() < deadline, row
                if row["state"] == "queued" and row["attempts"]:
                    queued[row["attempts"]] = row
                time.sleep(0.05)
            with service.client(token) as client:
                view = wait_finished(client, ident)
        finally:
            service.stop()
    finally:
        hidden.rename(truth)
    assert view["state"] == "failed", view
    assert "infrastructure" in view["message"] and "refunded" in view["message"]
    row = _row(competition, ident)
    assert row["attempts"] == jobs.MAX_ATTEMPTS and row["charged_s"] is None
    assert _recorded(competition, ident) == []
    # Each retry waited: 2 s after the second failure (1 s after the first), not at once.
    assert queued[2]["message"].endswith("will be retried in 2 s"), queued
    assert row["updated_s"] - queued[2]["updated_s"] >= 2.0
    if 1 in queued:  # seen unless the first second passed before the server answered
        assert queued[2]["updated_s"] - queued[1]["updated_s"] >= 1.0
