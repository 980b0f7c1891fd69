"""The Ladder (Blum & Hardt, "The Ladder: a reliable leaderboard for machine learning
competitions", ICML 2015): what a released CTF score says.

Per participant and truth commitment the best released value so far is kept. A new submission
whose public-part AvgScore beats it by at least `STEP` sets a new best, that AvgScore rounded to
`STEP`; any other submission (or a first one with no score) is told the old best and that it did
not improve. So a release is one of at most 2 + 200 / STEP outcomes (≤ log2 202 ≈ 7.7 bits with
STEP 1), and a season's k releases one of at most C(k + 201, k) transcripts (the releases that
improved, and their increasing values): about 20 bits for 3 releases, 31 for 5, 580 for 450
(docs/release.md).

The bests live in the table `ladder` of the release quota database (`Release.quota_db`),
one row per released submission: taken as `pending` in one `BEGIN IMMEDIATE` transaction (so
runs at once for one participant are ordered), marked `released` when the run finishes, deleted
when it fails (nothing was released). Pending rows count, so a run that reads the best while
another's is pending sees it. A run killed before it settles leaves its rows pending; a holder
that knows its earlier runs are dead (a service's job claimed again: `Release.holder`) drops
them first (`drop_pending`), or they would stand as a best never released. For a service on
PostgreSQL the table `ladder` is in its database (`Release.quota_db` its URL:
`postgres_records`), each rung taken in one transaction under the advisory lock of the
participant's Ladder against the truth, which orders runs at once as `BEGIN IMMEDIATE` does.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from seisctf.scoring import postgres_records, sqlite_wal
from seisctf.scoring.release_request import Release, on_postgres

STEP = 1.0  # AvgScore points (of scores between -100 and 100)
_SCHEMA = """CREATE TABLE IF NOT EXISTS ladder (
    id INTEGER PRIMARY KEY, participant TEXT NOT NULL, truth_commitment TEXT NOT NULL,
    name TEXT, time_s REAL NOT NULL, public_avg_score REAL, best REAL, improved INTEGER NOT NULL,
    state TEXT NOT NULL, holder TEXT NOT NULL DEFAULT '')"""
_INDEX = "CREATE INDEX IF NOT EXISTS ladder_participant ON ladder (participant, truth_commitment)"


@dataclass(frozen=True)
class Rung:
    """One release's outcome: the participant's best (None: nothing scorable released yet)
    after it, and whether this submission set it."""

    participant: str
    best: float | None
    improved: bool


def to_step(value: float, step: float = STEP) -> float:
    """`value` rounded to a multiple of `step` (-0.0 becomes 0.0)."""
    return round(round(value / step) * step, 10) + 0.0


def next_best(
    best: float | None, score: float | None, step: float = STEP
) -> tuple[float | None, bool]:
    """(best after a submission scoring `score`, whether it improved): the Ladder's rule."""
    if score is None or not math.isfinite(score):
        return best, False
    if best is None or score >= best + step:
        return to_step(score, step), True
    return best, False


def _prepare(connection: sqlite3.Connection) -> None:
    connection.execute(_SCHEMA)
    connection.execute(_INDEX)
    sqlite_wal.add_holder(connection, "ladder")


def _connect(path: str) -> sqlite3.Connection:
    return sqlite_wal.connect(path, _prepare, "a release quota database")


def current_best(release: Release, truth_commitment: str) -> float | None:
    """The participant's best against `truth_commitment` (pending and released rows)."""
    if on_postgres(release.quota_db):
        return postgres_records.current_best(
            release.quota_db, release.participant, truth_commitment
        )
    connection = _connect(release.quota_db)
    try:
        return _best(connection, release.participant, truth_commitment)
    finally:
        connection.close()


def _best(connection: sqlite3.Connection, participant: str, commitment: str) -> float | None:
    (best,) = connection.execute(
        "SELECT MAX(best) FROM ladder WHERE participant = ? AND truth_commitment = ? "
        "AND state IN ('pending', 'released')",
        (participant, commitment),
    ).fetchone()
    return best


def _climb(release: Release, commitment: str, name: str, score: float | None) -> tuple[int, Rung]:
    if on_postgres(release.quota_db):
        row = {
            "participant": release.participant,
            "truth_commitment": commitment,
            "name": name,
            "time_s": time.time(),
            "public_avg_score": score,
            "holder": release.holder,
        }
        ident, best, improved = postgres_records.climb(
            release.quota_db, row, lambda current: next_best(current, score)
        )
        return ident, Rung(release.participant, best, improved)
    connection = _connect(release.quota_db)
    try:
        connection.execute("BEGIN IMMEDIATE")
        best, improved = next_best(_best(connection, release.participant, commitment), score)
        cursor = connection.execute(
            "INSERT INTO ladder (participant, truth_commitment, name, time_s, public_avg_score, "
            "best, improved, state, holder) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
            (release.participant, commitment, name, time.time(), score, best, int(improved),
             release.holder),
        )  # fmt: skip
        connection.execute("COMMIT")
        assert cursor.lastrowid is not None  # the row the INSERT added
        return cursor.lastrowid, Rung(release.participant, best, improved)
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        connection.close()


def drop_pending(release: Release) -> int:
    """Delete the pending rungs `release.holder` took in runs that died (module doc): call it
    only when no run of that holder is going on. How many."""
    if on_postgres(release.quota_db):
        return postgres_records.drop_pending(release.quota_db, "ladder", release.holder)
    return sqlite_wal.drop_pending(_connect(release.quota_db), "ladder", release.holder)


def _settle(release: Release, ids: list[int], released: bool) -> None:
    if on_postgres(release.quota_db):
        postgres_records.settle(release.quota_db, "ladder", ids, released)
        return
    sqlite_wal.settle_rows(_connect(release.quota_db), "ladder", ids, released)


Climb = Callable[[str, str, "float | None"], Rung]


@contextlib.contextmanager
def climbing(release: Release | None) -> Iterator[Climb]:
    """Around a scoring run: `climb(truth_commitment, name, public_avg_score)` takes one
    pending rung per released submission and returns its `Rung`; the rungs are kept when the
    block finishes and deleted when it raises. `release` None: `climb` is never to be called."""
    ids: list[int] = []

    def climb(commitment: str, name: str, score: float | None) -> Rung:
        if release is None:
            raise ValueError("nothing is released: no Ladder to climb")
        row, rung = sqlite_wal.retry_locked(lambda: _climb(release, commitment, name, score))
        ids.append(row)
        return rung

    try:
        yield climb
    except BaseException:
        if ids and release is not None:
            _settle(release, ids, released=False)
        raise
    if ids and release is not None:
        _settle(release, ids, released=True)
