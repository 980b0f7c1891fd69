"""The SQLite leaderboard: every scored submission, one row each, and its public JSON view
(`leaderboard.json`); the terminal table and the HTML site are in `seisctf.scoring.site`.

Writers use one short transaction per entry (`BEGIN IMMEDIATE`, a busy timeout), so concurrent
`seisctf score --db` processes queue instead of losing entries. Each entry carries a unique
`submission_key`, by default derived from the entry itself (`entry_key`), so neither a writer
that retries after an ambiguous failure nor a re-run of a command stopped after recording adds it
twice.

A service on PostgreSQL keeps the same rows in its database instead (`db_path` its URL:
`release_request.on_postgres`; the table `leaderboard`, `postgres_records`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.scoring import postgres_records, sqlite_wal
from seisctf.scoring.release import public_entries
from seisctf.scoring.release_request import on_postgres

FAMILIES = ("ctf", "picks")
# The flat scores stored for a pick result: F1 of detection, P and S picks.
PICK_SCORE_KEYS = {"detection_f1": "detection", "p_f1": "p", "s_f1": "s"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    dataset TEXT NOT NULL,
    family TEXT NOT NULL,
    model TEXT NOT NULL,
    convention TEXT,
    avg_score REAL,
    scores TEXT NOT NULL,
    metadata TEXT NOT NULL,
    result TEXT NOT NULL,
    truth_commitment TEXT,
    submission_key TEXT
)
"""
_KEY_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS submissions_key ON submissions (submission_key)"
_COLUMNS = (
    "id",
    "timestamp",
    "dataset",
    "family",
    "model",
    "convention",
    "avg_score",
    "scores",
    "metadata",
    "result",
    "truth_commitment",
    "submission_key",
)
_JSON_COLUMNS = ("scores", "metadata", "result")


def _connect(db_path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) a leaderboard database in WAL mode, its schema up to date.

    A file that is not an SQLite database is bad input."""
    return sqlite_wal.connect(db_path, _migrate, "a seisctf leaderboard database")


def check_database(db_path: str | Path) -> None:
    """InvalidInput, before any scoring, when an existing file is not a leaderboard database
    (a missing one is created when the first entry is recorded); on PostgreSQL, its table is
    created if missing."""
    if on_postgres(str(db_path)):
        postgres_records.engine(str(db_path))
    elif Path(db_path).exists():
        _connect(db_path).close()


def _migrate(connection: sqlite3.Connection) -> None:
    """Create the table, or add the columns a database made by an older seisctf lacks."""
    connection.execute(_SCHEMA)
    present = {row[1] for row in connection.execute("PRAGMA table_info(submissions)")}
    if "submission_key" not in present:
        connection.execute("ALTER TABLE submissions ADD COLUMN submission_key TEXT")
    connection.execute(_KEY_INDEX)


def truth_commitment_of(manifest: CtfManifest) -> str:
    """One string naming the truth a score refers to: the hash over the per-array commitments."""
    hashes = dict(manifest.truth_sha256 or {})
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def scores_of(result: Mapping[str, Any], family: str) -> dict[str, float | None]:
    """The flat scores of a result: E1..E12 for ctf; detection, P and S F1 for picks."""
    if family == "picks" and "scores" not in result:
        return {key: (result.get(part) or {}).get("f1") for key, part in PICK_SCORE_KEYS.items()}
    return dict(result.get("scores", {}))


def entry_key(
    result: Mapping[str, Any],
    *,
    family: str = "ctf",
    truth_commitment: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> str:
    """sha256 of what an entry is: the family, the truth commitment, the submitter's metadata
    and the scored result. The same submission scored again against the same truth with the
    same metadata gets the same key, so `record` keeps one row for it."""
    canonical = json.dumps(
        {
            "family": family,
            "truth_commitment": truth_commitment,
            "metadata": dict(metadata or {}),
            "result": result,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def record(
    db_path: str | Path,
    result: Mapping[str, Any],
    *,
    family: str = "ctf",
    truth_commitment: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    submission_key: str | None = None,
) -> int:
    """Add one scored submission; returns its row id.

    `submission_key` (default: `entry_key` of the entry) names the entry: recording the same
    key again returns the existing row's id instead of adding a second row."""
    if family not in FAMILIES:
        raise InvalidInput("family", f"{family!r} is not one of {list(FAMILIES)}")
    key = submission_key or entry_key(
        result, family=family, truth_commitment=truth_commitment, metadata=metadata
    )
    row = (
        dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        result["dataset"],
        family,
        result["name"],
        result.get("convention"),
        result.get("avg_score"),
        json.dumps(scores_of(result, family)),
        json.dumps(dict(metadata or {})),
        json.dumps(result),
        truth_commitment,
        key,
    )
    if on_postgres(str(db_path)):
        return postgres_records.record_entry(
            str(db_path), dict(zip(_COLUMNS[1:], row, strict=True))
        )
    connection = _connect(db_path)

    def insert() -> int:
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                f"INSERT OR IGNORE INTO submissions ({', '.join(_COLUMNS[1:])}) "
                f"VALUES ({', '.join('?' * len(row))})",
                row,
            )
            (row_id,) = connection.execute(
                "SELECT id FROM submissions WHERE submission_key = ?", (key,)
            ).fetchone()
            connection.execute("COMMIT")
            return int(row_id)
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    try:
        return sqlite_wal.retry_locked(insert)
    finally:
        connection.close()


def entries(db_path: str | Path, family: str | None = None) -> list[dict[str, Any]]:
    """All entries, best AvgScore first within each dataset (None last), JSON columns parsed."""
    rows: list[Any]
    if on_postgres(str(db_path)):
        rows = postgres_records.entry_rows(str(db_path), _COLUMNS, family)
    else:
        connection = _connect(db_path)
        try:
            rows = connection.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM submissions "
                "WHERE ? IS NULL OR family = ? ORDER BY dataset, avg_score DESC, id",
                (family, family),
            ).fetchall()
        finally:
            connection.close()
    found = [dict(zip(_COLUMNS, row, strict=True)) for row in rows]
    for entry in found:
        for column in _JSON_COLUMNS:
            entry[column] = json.loads(entry[column])
    return found


def as_json(entries_: list[dict[str, Any]], final: bool = False) -> list[dict[str, Any]]:
    """The contract's leaderboard.json rows (with `extended_avg_score` where E13+ exist, and
    `truth_note` where the truth is regenerable: `--public-truth`), from
    the public view of the entries (`release.public_entries`: during the season a CTF entry's
    `public_score` to the Ladder's step, `avg_score` null and no scores; at the close, `final`,
    its private part's scores clipped and rounded to 0.01; nothing else of the results)."""
    rows = []
    for e in public_entries(entries_, final):
        row = {
            "model": e["model"],
            "dataset": e["dataset"],
            "convention": e["convention"],
            "scores": e["scores"],
            "avg_score": e["avg_score"],
        }
        if "public_score" in e:
            row["public_score"] = e["public_score"]
        for key in ("extended_avg_score", "truth_note"):
            if key in e["result"]:
                row[key] = e["result"][key]
        rows.append(row)
    return rows


def write_json(entries_: list[dict[str, Any]], out: str | Path, final: bool = False) -> Path:
    """Write `as_json(entries_, final)` to `out` (replaced whole, never half-written); returns
    it."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(as_json(entries_, final), indent=2))
    os.replace(partial, path)
    return path
