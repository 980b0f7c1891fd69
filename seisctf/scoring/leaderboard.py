"""The SQLite leaderboard: every scored submission, one row each; JSON, terminal and HTML views.

Writers use one short transaction per entry (`BEGIN IMMEDIATE`, a busy timeout), so concurrent
`seisctf score --db` processes queue instead of losing entries.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seisctf import conventions as cv
from seisctf.errors import InvalidInput

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
    truth_commitment TEXT
)
"""


def _connect(db_path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) a leaderboard database in WAL mode.

    Switching a fresh file to WAL needs a lock that SQLite does not wait for, so concurrent first
    writers retry it; a file that is not an SQLite database is bad input.
    """
    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(db_path), timeout=60, isolation_level=None)
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        connection.execute(_SCHEMA)
    except sqlite3.DatabaseError as error:
        connection.close()
        if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
            raise
        raise InvalidInput(str(db_path), f"not a seisctf leaderboard database ({error})") from None
    return connection


def truth_commitment_of(manifest: Mapping[str, Any]) -> str:
    """One string naming the truth a score refers to: the hash over the per-array commitments."""
    import hashlib

    hashes = manifest.get("truth_sha256") or {}
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def record(
    db_path: str | Path,
    result: Mapping[str, Any],
    *,
    family: str = "ctf",
    truth_commitment: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> int:
    """Add one scored submission; returns its row id."""
    connection = _connect(db_path)
    try:
        connection.execute("BEGIN IMMEDIATE")
        cursor = connection.execute(
            "INSERT INTO submissions (timestamp, dataset, family, model, convention, avg_score, "
            "scores, metadata, result, truth_commitment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                result["dataset"],
                family,
                result["name"],
                result.get("convention"),
                result.get("avg_score"),
                json.dumps(result.get("scores", {})),
                json.dumps(dict(metadata or {})),
                json.dumps(result),
                truth_commitment,
            ),
        )
        connection.execute("COMMIT")
        return int(cursor.lastrowid)
    finally:
        connection.close()


def entries(db_path: str | Path, family: str | None = None) -> list[dict[str, Any]]:
    """All entries, best AvgScore first within each dataset."""
    connection = _connect(db_path)
    try:
        rows = connection.execute(
            "SELECT id, timestamp, dataset, family, model, convention, avg_score, scores, "
            "metadata, truth_commitment FROM submissions ORDER BY dataset, avg_score DESC, id"
        ).fetchall()
    finally:
        connection.close()
    keys = (
        "id",
        "timestamp",
        "dataset",
        "family",
        "model",
        "convention",
        "avg_score",
        "scores",
        "metadata",
        "truth_commitment",
    )
    found = [dict(zip(keys, row, strict=True)) for row in rows]
    for entry in found:
        entry["scores"] = json.loads(entry["scores"])
        entry["metadata"] = json.loads(entry["metadata"])
    return [entry for entry in found if family is None or entry["family"] == family]


def as_json(entries_: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The contract's leaderboard.json rows."""
    return [
        {
            "model": e["model"],
            "dataset": e["dataset"],
            "convention": e["convention"],
            "scores": e["scores"],
            "avg_score": e["avg_score"],
        }
        for e in entries_
    ]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def print_table(entries_: list[dict[str, Any]]) -> None:
    """A rich table per dataset, ranked by AvgScore."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if Console().is_terminal else 220)
    for dataset in sorted({e["dataset"] for e in entries_}):
        table = Table(title=f"seisctf leaderboard — {dataset}")
        for column in ("rank", "model", "convention", "AvgScore", *cv.SCORE_NAMES):
            table.add_column(
                column,
                justify="left" if column in ("model", "convention") else "right",
                no_wrap=True,
            )
        ranked = [e for e in entries_ if e["dataset"] == dataset]
        for rank, entry in enumerate(ranked, start=1):
            table.add_row(
                str(rank),
                entry["model"],
                str(entry["convention"]),
                _fmt(entry["avg_score"]),
                *(_fmt(entry["scores"].get(name)) for name in cv.SCORE_NAMES),
            )
        console.print(table)


def write_html(entries_: list[dict[str, Any]], out_dir: str | Path) -> Path:
    """A static page (no server, no CDN): one ranked table per dataset, radar profile images."""
    from seisctf.scoring.plots import radar_profile

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for dataset in sorted({e["dataset"] for e in entries_}):
        ranked = [e for e in entries_ if e["dataset"] == dataset]
        image = f"radar-{dataset}.png"
        radar_profile(
            {e["model"]: e["scores"] for e in ranked[:5]},
            out / image,
            title=f"{dataset}: score profiles",
        )
        header = "".join(
            f"<th scope='col'>{h}</th>" for h in ("Rank", "Model", "AvgScore", *cv.SCORE_NAMES)
        )
        rows = []
        for rank, entry in enumerate(ranked, start=1):
            cells = "".join(_score_cell(entry["scores"].get(name)) for name in cv.SCORE_NAMES)
            rows.append(
                f"<tr><td>{rank}</td><th scope='row'>{html.escape(entry['model'])}</th>"
                f"{_score_cell(entry['avg_score'])}{cells}</tr>"
            )
        conventions = ", ".join(sorted({str(e["convention"]) for e in ranked}))
        commitments = ", ".join(sorted({str(e["truth_commitment"])[:16] for e in ranked}))
        sections.append(
            f"<section><h2>{html.escape(dataset)}</h2><p>Convention: {html.escape(conventions)}; "
            f"truth commitment: <code>{html.escape(commitments)}</code>. Scores are "
            f"100·(1 − error), 0 is the all-zero prediction, 100 is perfect.</p>"
            f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<img src='{image}' alt='Radar profile of the twelve scores E1 to E12 of the top "
            f"models on {html.escape(dataset)}' width='520'></section>"
        )
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>seisctf leaderboard"
        "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.3em .5em;text-align:right}</style></head><body>"
        f"<h1>seisctf leaderboard</h1>{''.join(sections)}</body></html>"
    )
    index = out / "index.html"
    index.write_text(page)
    return index


def _score_cell(value: float | None) -> str:
    if value is None:
        return "<td>—</td>"
    # Colour around the zero baseline: red below 0, green above.
    strength = min(abs(value), 100.0) / 100.0
    colour = f"rgba(0,150,0,{strength:.2f})" if value >= 0 else f"rgba(200,0,0,{strength:.2f})"
    return f"<td style='background:{colour}'>{value:.2f}</td>"
