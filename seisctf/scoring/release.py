"""What participants see: released scores (`seisctf score ctf|picks --release`) and the public
leaderboard's view of each entry (`public_entry`: `leaderboard.json`, the HTML site, the table
`seisctf leaderboard` prints).

Both are built key by key from allow-lists (a key the referee adds later is not published until
it is listed here). A released result has scores rounded to `CTF_DIGITS` (E1..E12, AvgScore) or
`PICK_DIGITS` (precision, recall, F1) decimals; a public leaderboard entry has its scores and
rates clipped to [-100, 100] and rounded to `PUBLIC_DIGITS` decimals. Neither has raw
(unclipped) scores, errors, norms, counts, residual statistics (they are computed against the
truth), per-split, per-group or per-trace values, or the residual histogram; those stay in the
organisers' SQLite leaderboard and `score --json` output. Every release counts against a quota:
at most `quota` releases per participant in any `QUOTA_WINDOW_S` (a rolling 24 h), kept in an
SQLite table `releases` (one `BEGIN IMMEDIATE` transaction takes the slots, so concurrent
referees cannot exceed it). A slot is taken before scoring and given back if the run fails
(nothing was released). The reasons (how much a published number tells about the truth) are in
docs/release.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seisctf.errors import InvalidInput
from seisctf.scoring import sqlite_wal

POLICY = "seisctf-release-2"
CTF_DIGITS = 1  # E1..E12 and AvgScore in steps of 0.1 (of a score between -100 and 100)
PICK_DIGITS = 2  # precision, recall, F1 in steps of 0.01
PUBLIC_DIGITS = 2  # the public leaderboard: scores and rates in steps of 0.01
SCORE_LIMIT = 100.0  # scores are clipped to [-SCORE_LIMIT, SCORE_LIMIT]
DEFAULT_QUOTA = 5
QUOTA_WINDOW_S = 24 * 3600
MAX_PARTICIPANT_CHARS = 200
CTF_KEYS = ("name", "dataset", "convention", "truth_sha256_verified")
PICK_KEYS = ("name", "dataset", "split", "n_traces", "tolerance_s", "threshold",
             "truth_commitment")  # fmt: skip
PICK_PARTS = ("detection", "p", "s")
RATES = ("precision", "recall", "f1")
# A leaderboard entry's columns and result keys the public view keeps (scores come separately).
PUBLIC_ENTRY_KEYS = ("id", "timestamp", "dataset", "family", "model", "convention",
                     "truth_commitment", "metadata")  # fmt: skip
PUBLIC_RESULT_KEYS = ("truth_sha256_verified", "tolerance_s", "threshold")
# Submitter metadata keys the site shows in columns of their own; any other key is kept and
# listed as is.
METADATA_KEYS = ("code_url", "description", "run", "seed")
_SCHEMA = """CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY, participant TEXT NOT NULL, family TEXT NOT NULL, name TEXT,
    time_s REAL NOT NULL, state TEXT NOT NULL)"""
_INDEX = "CREATE INDEX IF NOT EXISTS releases_participant ON releases (participant, time_s)"


def rounded(value: float | None, digits: int) -> float | None:
    """`value` rounded to `digits` decimals (None stays None; -0.0 becomes 0.0)."""
    return None if value is None else round(float(value), digits) + 0.0


def _policy(**steps: float) -> dict[str, Any]:
    return {"policy": POLICY, **steps}


def release_ctf(result: Mapping[str, Any]) -> dict[str, Any]:
    """The participant's view of a `score ctf` result: E1..E12 and the averages rounded."""
    released = {key: result[key] for key in CTF_KEYS if key in result}
    released["scores"] = {
        name: rounded(value, CTF_DIGITS) for name, value in result["scores"].items()
    }
    for key in ("avg_score", "extended_avg_score"):
        if key in result:
            released[key] = rounded(result[key], CTF_DIGITS)
    released["release"] = _policy(score_step=10.0**-CTF_DIGITS)
    return released


def release_picks(result: Mapping[str, Any]) -> dict[str, Any]:
    """The participant's view of a `score picks` result: precision, recall and F1 rounded; no
    counts, residual statistics, breakdowns or histogram."""
    released: dict[str, Any] = {"family": "picks"}
    released |= {key: result[key] for key in PICK_KEYS if key in result}
    for part in PICK_PARTS:
        values = result[part]
        released[part] = {key: rounded(values.get(key), PICK_DIGITS) for key in RATES}
    released["scores"] = {f"{part}_f1": released[part]["f1"] for part in PICK_PARTS}
    released["release"] = _policy(rate_step=10.0**-PICK_DIGITS)
    return released


# --- the public leaderboard ------------------------------------------------------------------


def public_value(value: object) -> float | None:
    """A score (or rate) as the public leaderboard shows it: clipped to [-100, 100], rounded to
    `PUBLIC_DIGITS` decimals; None for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return rounded(min(max(float(value), -SCORE_LIMIT), SCORE_LIMIT), PUBLIC_DIGITS)


def public_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The public view of one `leaderboard.entries` row: its identity, submitter metadata and
    truth commitment, `scores` and `avg_score` as `public_value`s, and of its result only
    `PUBLIC_RESULT_KEYS`, `extended_avg_score` and the precision, recall and F1 of detection, P
    and S picks (as `public_value`s). No raw scores, counts, residuals, breakdowns or
    histograms, and no `submission_key` (a hash of the full result)."""
    result = entry.get("result") or {}
    scores = entry.get("scores") or {}
    shown = {key: result[key] for key in PUBLIC_RESULT_KEYS if key in result}
    if "extended_avg_score" in result:
        shown["extended_avg_score"] = public_value(result["extended_avg_score"])
    for part in PICK_PARTS:
        if isinstance(result.get(part), Mapping):
            shown[part] = {key: public_value(result[part].get(key)) for key in RATES}
    return {
        **{key: entry.get(key) for key in PUBLIC_ENTRY_KEYS},
        "avg_score": public_value(entry.get("avg_score")),
        "scores": {name: public_value(value) for name, value in scores.items()},
        "result": shown,
    }


def public_entries(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`public_entry` of each entry, ordered by dataset, public AvgScore (best first, missing
    last), then id: the order never depends on digits the public view does not show."""
    shown = [public_entry(entry) for entry in entries]
    return sorted(
        shown,
        key=lambda e: (
            str(e["dataset"]),
            e["avg_score"] is None,
            -(e["avg_score"] or 0.0),
            e["id"] if isinstance(e["id"], int) else 0,
        ),
    )


# --- the quota ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """A request to release scores to `participant`, counted in the SQLite file `quota_db`."""

    participant: str
    quota_db: str
    quota: int = DEFAULT_QUOTA

    def __post_init__(self) -> None:
        name = self.participant
        if not name.strip() or len(name) > MAX_PARTICIPANT_CHARS or not name.isprintable():
            raise InvalidInput(
                f"`participant` {name!r}",
                f"expected 1 to {MAX_PARTICIPANT_CHARS} printable characters",
            )
        if self.quota < 1:
            raise InvalidInput("quota", f"expected at least 1 release per 24 h, got {self.quota}")


def _prepare(connection: sqlite3.Connection) -> None:
    connection.execute(_SCHEMA)
    connection.execute(_INDEX)


def _connect(path: str) -> sqlite3.Connection:
    return sqlite_wal.connect(path, _prepare, "a release quota database")


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def reserve(
    release: Release, family: str, names: Sequence[str], now_s: float | None = None
) -> list[int]:
    """Take one slot per name (state `pending`) or none: InvalidInput when the participant's
    releases in the last `QUOTA_WINDOW_S` and these would exceed the quota."""
    now_s = time.time() if now_s is None else now_s
    if len(names) > release.quota:
        raise InvalidInput("names", f"{len(names)} submissions, above the quota of {release.quota}")
    connection = _connect(release.quota_db)
    try:
        connection.execute("BEGIN IMMEDIATE")
        since = now_s - QUOTA_WINDOW_S
        times = [
            row[0]
            for row in connection.execute(
                "SELECT time_s FROM releases WHERE participant = ? AND time_s > ? ORDER BY time_s",
                (release.participant, since),
            )
        ]
        if len(times) + len(names) > release.quota:
            connection.execute("ROLLBACK")
            free_at = times[len(times) + len(names) - release.quota - 1] + QUOTA_WINDOW_S
            raise InvalidInput(
                f"`participant` {release.participant}",
                f"{len(times)} of {release.quota} releases used in the last 24 h, "
                f"{len(names)} asked for; nothing was scored. Next possible at "
                f"{_utc(free_at)} UTC",
            )
        ids = []
        for name in names:
            cursor = connection.execute(
                "INSERT INTO releases (participant, family, name, time_s, state) "
                "VALUES (?, ?, ?, ?, 'pending')",
                (release.participant, family, name, now_s),
            )
            ids.append(int(cursor.lastrowid))
        connection.execute("COMMIT")
        return ids
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        connection.close()


def settle(release: Release, ids: Sequence[int], released: bool) -> None:
    """Mark reserved slots `released`, or give them back (delete) when nothing was released."""
    connection = _connect(release.quota_db)
    try:
        marks = ",".join("?" * len(ids))
        if released:
            statement = f"UPDATE releases SET state = 'released' WHERE id IN ({marks})"
        else:
            statement = f"DELETE FROM releases WHERE id IN ({marks})"
        connection.execute(statement, tuple(ids))
    finally:
        connection.close()


@contextlib.contextmanager
def quota_slots(
    release: Release | None, family: str, names: Sequence[str]
) -> Iterator[Callable[[Iterable[str]], None]]:
    """Around a scoring run: slots taken before (InvalidInput over quota), kept when the block
    finishes, given back when it raises. The block gets `give_back(names)`, which returns at once
    the slots of submissions that were refused (nothing of theirs is released) while the others
    are kept. `release` None (organisers): nothing counted."""
    if release is None:
        yield lambda refused: None
        return
    held = dict(zip(names, reserve(release, family, names), strict=True))

    def give_back(refused: Iterable[str]) -> None:
        ids = [held.pop(name) for name in set(refused) & held.keys()]
        if ids:
            settle(release, ids, released=False)

    try:
        yield give_back
    except BaseException:
        if held:
            settle(release, list(held.values()), released=False)
        raise
    if held:
        settle(release, list(held.values()), released=True)


def used(release: Release, now_s: float | None = None) -> int:
    """Releases counted against the participant now (pending or released)."""
    now_s = time.time() if now_s is None else now_s
    connection = _connect(release.quota_db)
    try:
        (count,) = connection.execute(
            "SELECT COUNT(*) FROM releases WHERE participant = ? AND time_s > ?",
            (release.participant, now_s - QUOTA_WINDOW_S),
        ).fetchone()
        return int(count)
    finally:
        connection.close()
