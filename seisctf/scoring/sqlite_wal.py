"""The SQLite files the referee shares between concurrent processes (the leaderboard, the
release quota): opened in WAL mode with a busy timeout, and retried past the lock errors SQLite
does not wait for by itself (switching a fresh file to WAL while another process does the same)."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from seisctf.errors import InvalidInput

LOCK_WAIT_S = 120.0
T = TypeVar("T")


# Free bytes under which an SQLite I/O error on a file is taken for a full disk (a WAL index that
# cannot grow on a full tmpfs is SQLITE_IOERR_SHMSIZE, not SQLITE_FULL).
NEARLY_FULL_BYTES = 2**20


def disk_full(error: sqlite3.Error, path: str | Path) -> OSError | None:
    """`error` as the OSError of a full disk naming `path` (`local_outputs.write_failure` says
    it in one line), when it is one: SQLITE_FULL, or an I/O error with the device of `path`
    (nearly) full; else None."""
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    folder = Path(path).parent if Path(path).parent.is_dir() else Path(".")
    full = code == sqlite3.SQLITE_FULL or (
        code == sqlite3.SQLITE_IOERR and shutil.disk_usage(folder).free < NEARLY_FULL_BYTES
    )
    return (
        OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({error})", str(path)) if full else None
    )


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
        full = disk_full(error, path)
        if full is not None:  # not a sign of a file of another kind
            raise full from error
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


def add_holder(connection: sqlite3.Connection, table: str) -> None:
    """Give `table` (a quota database's `releases` or `ladder`) its `holder` column (who took
    its pending rows: `Release.holder`) when a file made before it lacks one."""
    columns = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    if "holder" not in columns:
        try:
            connection.execute(f"ALTER TABLE {table} ADD COLUMN holder TEXT NOT NULL DEFAULT ''")
        except sqlite3.OperationalError as error:  # another process added it meanwhile
            if "duplicate column" not in str(error):
                raise


def drop_pending(connection: sqlite3.Connection, table: str, holder: str) -> int:
    """Delete the rows of `table` still pending that `holder` took (a run of it that died
    before settling them); how many. Nothing for the empty holder. Closes `connection`."""
    try:
        if not holder:
            return 0
        cursor = connection.execute(
            f"DELETE FROM {table} WHERE state = 'pending' AND holder = ?", (holder,)
        )
        return cursor.rowcount
    finally:
        connection.close()
