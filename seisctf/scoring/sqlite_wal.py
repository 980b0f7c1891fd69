"""The SQLite files the referee shares between concurrent processes (the leaderboard, the
release quota): opened in WAL mode with a busy timeout, and retried past the lock errors SQLite
does not wait for by itself (switching a fresh file to WAL while another process does the same)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from seisctf.errors import InvalidInput

LOCK_WAIT_S = 120.0
T = TypeVar("T")


def is_lock_error(error: sqlite3.Error) -> bool:
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in str(error) or "busy" in str(error)
    )


def retry_locked(action: Callable[[], T]) -> T:
    """Run `action()` until it gets past SQLite's lock errors or `LOCK_WAIT_S` pass."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return action()
        except sqlite3.OperationalError as error:
            if not is_lock_error(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def connect(
    path: str | Path, prepare: Callable[[sqlite3.Connection], None], what: str
) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path` in WAL mode and run `prepare` on it
    (create or migrate its tables). A file that is not an SQLite database is bad input, named
    as `what` ("a seisctf leaderboard database")."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), timeout=60, isolation_level=None)
    try:
        retry_locked(lambda: connection.execute("PRAGMA journal_mode=WAL"))
        retry_locked(lambda: prepare(connection))
    except sqlite3.DatabaseError as error:
        connection.close()
        if is_lock_error(error):
            raise
        raise InvalidInput(str(path), f"not {what} ({error})") from None
    return connection


def settle_rows(
    connection: sqlite3.Connection, table: str, ids: Sequence[int], released: bool
) -> None:
    """Mark the rows `ids` of `table` (a quota database's `releases` or `ladder`) released, or
    delete them when nothing was released; closes `connection`."""
    try:
        marks = ",".join("?" * len(ids))
        if released:
            statement = f"UPDATE {table} SET state = 'released' WHERE id IN ({marks})"
        else:
            statement = f"DELETE FROM {table} WHERE id IN ({marks})"
        connection.execute(statement, tuple(ids))
    finally:
        connection.close()
