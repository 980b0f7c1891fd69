"""Durable scoring: the job table (`tables.submissions`) is the source of truth.

A worker claims a queued submission, or one whose lease ran out (its worker died), with one
conditional UPDATE (only one claimant's matches), renews the lease while it scores, and finishes
it with one UPDATE that matches only while it still holds the lease. Scoring is the referee's
(`seisctf.scoring.referee.run_ctf`, or `run_picks` for a picking dataset: F1 at 0.5 s on its
test split; on the Dask cluster of the process): it releases the team's
view through the Ladder and records the full result in the competition's leaderboard (its
SQLite files, or the tables of the service's PostgreSQL database: `Competition.records`) under a
key of the submission alone, so a submission scored again after a crash adds no second row.
A refusal found while scoring (NaN values, a chunk that does not decode) refunds the charge;
an infrastructure failure is retried until `MAX_ATTEMPTS` attempts, then refunded and marked
`failed`. A retry waits: the job, queued again, is claimable `retry_delay_s` after its first
failure, twice that after its second, and so on (`retry_wait`, from its attempts and the time it
was queued again, in the claim's one UPDATE)."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import ladder, leaderboard, referee
from seisctf.scoring import release as release_quota
from seisctf.scoring.ctf import open_truth
from seisctf.scoring.release_request import Release, on_postgres
from seisctf.scoring.site.pages import write_site
from seisctf.service import receipts
from seisctf.service.competition import KEY, SCORED_SPLIT, Competition, Dataset, Reloading
from seisctf.service.tables import (
    FAILED,
    QUEUED,
    REFUSED,
    SCORED,
    SCORING,
    closed_datasets,
    submissions,
    teams,
)

LEASE_S = 60.0
MAX_ATTEMPTS = 3
RETRY_DELAY_S = 5.0  # the wait before the first retry (s); doubled for each one after
SERVICE_QUOTA = 10**9  # the service charges its own quota on acceptance (`intake`)
log = logging.getLogger("seisctf.service")


def retry_delay(attempts: int, retry_delay_s: float = RETRY_DELAY_S) -> float:
    """Seconds a submission queued after `attempts` failed attempts waits before it is claimed
    again: 0 before any, `retry_delay_s` * 2**(attempts - 1) after (at most MAX_ATTEMPTS - 1)."""
    if attempts < 1:
        return 0.0
    return retry_delay_s * 2.0 ** (min(attempts, MAX_ATTEMPTS - 1) - 1)


def retry_wait(retry_delay_s: float = RETRY_DELAY_S) -> sa.ColumnElement[float]:
    """`retry_delay` of each row's `attempts`, in SQL (one CASE: SQLite and PostgreSQL)."""
    attempts = submissions.c.attempts
    waits = [(attempts == n, retry_delay(n, retry_delay_s)) for n in range(MAX_ATTEMPTS)]
    return sa.case(*waits, else_=retry_delay(MAX_ATTEMPTS, retry_delay_s))


def claim(
    engine: sa.Engine, owner: str, lease_s: float = LEASE_S, retry_delay_s: float = RETRY_DELAY_S
) -> dict[str, Any] | None:
    """Take the oldest claimable submission (queued, and its retry's wait over: `retry_wait`;
    or scoring with its lease run out), or None when there is none. Candidates all taken by
    other workers meanwhile are looked for again: None means that nothing was claimable, not
    that this worker lost its races."""
    now = time.time()
    claimable = sa.or_(
        sa.and_(
            submissions.c.state == QUEUED,
            submissions.c.updated_s + retry_wait(retry_delay_s) <= now,
        ),
        sa.and_(submissions.c.state == SCORING, submissions.c.lease_until_s < now),
    )
    while True:
        with engine.connect() as connection:
            candidates = (
                connection.execute(
                    sa.select(submissions.c.id)
                    .where(claimable)
                    .order_by(submissions.c.created_s, submissions.c.id)
                    .limit(8)
                )
                .scalars()
                .all()
            )
        if not candidates:
            return None
        for ident in candidates:
            with engine.begin() as connection:
                taken = connection.execute(
                    submissions.update()
                    .where(submissions.c.id == ident, claimable)
                    .values(
                        state=SCORING,
                        lease_owner=owner,
                        lease_until_s=now + lease_s,
                        attempts=submissions.c.attempts + 1,
                        updated_s=now,
                    )
                )
                if taken.rowcount == 1:
                    row = connection.execute(
                        sa.select(submissions, teams.c.name.label("team"))
                        .join(teams, teams.c.id == submissions.c.team_id)
                        .where(submissions.c.id == ident)
                    ).one()
                    return row._asdict()


def _holding(ident: str, owner: str) -> Any:
    return sa.and_(
        submissions.c.id == ident,
        submissions.c.state == SCORING,
        submissions.c.lease_owner == owner,
    )


def renew(engine: sa.Engine, ident: str, owner: str, lease_s: float = LEASE_S) -> bool:
    with engine.begin() as connection:
        done = connection.execute(
            submissions.update()
            .where(_holding(ident, owner))
            .values(lease_until_s=time.time() + lease_s)
        )
    return done.rowcount == 1


def finish(engine: sa.Engine, ident: str, owner: str, state: str, **values: Any) -> bool:
    """Move a held submission to `state`; False when the lease was lost (another worker took
    it over: it finishes it)."""
    if state in (REFUSED, FAILED):
        values["charged_s"] = None  # refunded
    with engine.begin() as connection:
        done = connection.execute(
            submissions.update()
            .where(_holding(ident, owner))
            .values(
                state=state, lease_owner=None, lease_until_s=None, updated_s=time.time(), **values
            )
        )
    return done.rowcount == 1


def entry_key(job: dict[str, Any]) -> str:
    return hashlib.sha256(
        f"seisctf-service:{job['team_id']}:{job['dataset']}:{job['sha256']}".encode()
    ).hexdigest()


class TruthUnreadable(Exception):
    """The organisers' truth cannot be opened: the infrastructure's failure, not the team's."""


def _open_truth(spec: Dataset) -> str | None:
    """Open the dataset's truth as its referee will: the commitment of a CTF truth's manifest
    (`leaderboard.truth_commitment_of`); None for a picking truth (its result names it)."""
    if spec.family == "picks":
        cv.validate_event_window_store(storage.open_dataset(StoreLocation(spec.truth)))
        return None
    return leaderboard.truth_commitment_of(open_truth(StoreLocation(spec.truth))[0])


def score(competition: Competition, job: dict[str, Any], quiet: bool = True) -> dict[str, Any]:
    """Score one claimed submission with the referee; returns the released view and the truth
    commitment it was scored against. The truth is opened first, alone: an error there
    (`TruthUnreadable`) is no refusal of the submission."""
    spec = competition.datasets[job["dataset"]]
    try:
        commitment = _open_truth(spec)
    except Exception as error:  # noqa: BLE001 - whatever it is, the team is not to blame
        raise TruthUnreadable(f"the truth of {job['dataset']} cannot be read") from error
    release = Release(
        job["team"], competition.records("releases.sqlite"), SERVICE_QUOTA, holder=job["id"]
    )
    # The job is this worker's now: rows an earlier attempt left pending died with it (a
    # pending rung would stand as a best never released, and this attempt not improve on it).
    ladder.drop_pending(release)
    release_quota.drop_pending(release)
    judge = referee.Referee(
        release,
        competition.records("leaderboard.sqlite"),
        {"team": job["team"], "submission_sha256": job["sha256"], "submission": job["id"]},
        submission_key=entry_key(job),
    )
    submission = StoreLocation(job["stored"])
    if spec.family == "picks":
        shown = referee.run_picks(
            StoreLocation(spec.truth),
            submission,
            job["model"],
            judge,
            split=SCORED_SPLIT,
            quiet=quiet,
        )
        return {"released": shown, "truth_commitment": shown["truth_commitment"]}
    (released,) = referee.run_ctf(
        StoreLocation(spec.truth), {job["model"]: submission}, judge, quiet=quiet
    )
    # The commitment the referee records is the manifest's, as here.
    return {"released": released, "truth_commitment": commitment}


def render_board(competition: Competition, engine: sa.Engine) -> None:
    """The leaderboard's pages again, from the referee's record: the season's view, or once
    every dataset is closed the final one, each team's entry the submission it marked final
    (its latest marked), else the one that set its Ladder best (`release.standing`)."""
    db = competition.records("leaderboard.sqlite")
    entries = leaderboard.entries(db) if on_postgres(db) or Path(db).exists() else []
    with engine.connect() as connection:
        marked = set(
            connection.execute(
                sa.select(submissions.c.id).where(submissions.c.final.is_(True))
            ).scalars()
        )
    chosen = {e["id"] for e in entries if (e.get("metadata") or {}).get("submission") in marked}
    final = set(competition.datasets) <= closed_datasets(engine)
    write_site(entries, competition.path("site"), final=final, chosen=chosen)


class Worker:
    """Claims and scores submissions in a thread until `stop` is set, against the competition
    as it is when each job starts (`Reloading`: rounds added meanwhile)."""

    def __init__(
        self,
        live: Reloading,
        engine: sa.Engine,
        owner: str,
        lease_s: float = LEASE_S,
        poll_s: float = 0.5,
        on_scored: Callable[[], None] = lambda: None,
        on_idle: Callable[[], None] = lambda: None,
        retry_delay_s: float = RETRY_DELAY_S,
    ) -> None:
        self.live, self.engine, self.owner = live, engine, owner
        self.lease_s, self.poll_s, self.on_scored = lease_s, poll_s, on_scored
        self.retry_delay_s = retry_delay_s
        self.on_idle = on_idle  # called when no job is claimable (housekeeping)
        self.stop = threading.Event()
        self._key = receipts.load_private_key(live.get().path(KEY))

    def run(self) -> None:
        while not self.stop.is_set():
            job = claim(self.engine, self.owner, self.lease_s, self.retry_delay_s)
            if job is None:
                self.on_idle()
                self.stop.wait(self.poll_s)
                continue
            self.handle(job)

    def _heartbeat(self, ident: str, done: threading.Event) -> None:
        while not done.wait(self.lease_s / 3):
            renew(self.engine, ident, self.owner, self.lease_s)

    def handle(self, job: dict[str, Any]) -> None:
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job["id"], done), daemon=True)
        beat.start()
        try:
            outcome = score(self.live.get(), job)
        except InvalidInput as error:
            # The team is told why, not where the server keeps its file.
            message = str(error).replace(job["stored"], "submission")
            finish(self.engine, job["id"], self.owner, REFUSED, message=message)
            Path(job["stored"]).unlink(missing_ok=True)
            return
        except Exception as error:  # noqa: BLE001 - any other failure is the infrastructure's
            log.exception("scoring %s failed", job["id"])
            state = FAILED if job["attempts"] >= MAX_ATTEMPTS else QUEUED
            wait_s = retry_delay(job["attempts"], self.retry_delay_s)
            finish(
                self.engine,
                job["id"],
                self.owner,
                state,
                message=f"infrastructure failure ({type(error).__name__}); "
                + ("refunded" if state == FAILED else f"will be retried in {wait_s:g} s"),
            )
            return
        finally:
            done.set()
        receipt = receipts.sign(
            {
                "competition": self.live.get().name,
                "team": job["team"],
                "dataset": job["dataset"],
                "submission_id": job["id"],
                "submission_sha256": job["sha256"],
                "truth_commitment": outcome["truth_commitment"],
                "seisctf_version": version("seisctf"),
                "released": outcome["released"],
                "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            self._key,
        )
        if finish(
            self.engine,
            job["id"],
            self.owner,
            SCORED,
            message="",
            released=json.dumps(outcome["released"]),
            receipt=json.dumps(receipt),
        ):
            render_board(self.live.get(), self.engine)
            self.on_scored()
