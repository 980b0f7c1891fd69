"""The referee's records on PostgreSQL: the leaderboard, the release quota and the Ladder as the
tables `leaderboard`, `releases` and `ladder` of the database a service's `--db postgresql://…`
names, beside its job table (whose `submissions` is the jobs', hence the leaderboard's other
name here), created when missing. All their PostgreSQL SQL is here, through SQLAlchemy Core,
which (the `serve` extra) is imported only when a record's target is a URL
(`release_request.on_postgres`; `schema`); the SQLite files keep theirs in `leaderboard`,
`release`, `ladder` and `sqlite_wal`. Rows, ids and JSON texts are as in the SQLite files, so
`leaderboard.entries` reads the same entries from both.

Atomicity. On SQLite, `BEGIN IMMEDIATE` takes the file's write lock before a reservation reads
the participant's slots (or a climb its best), so check and insert are one step for every
writer. Here each such transaction first takes `pg_advisory_xact_lock` on a key hashed from the
record, the participant (and, for the Ladder, the truth commitment): writers for one participant
queue there until the holder commits or rolls back, others run side by side. Under READ
COMMITTED (PostgreSQL's default) the SELECT after the lock sees every row committed before it, so
concurrent reservers never pass the quota and a climb always starts from the latest best. Chosen
over `SELECT … FOR UPDATE` (which needs a row per participant before its first reservation,
itself a race to insert) and SERIALIZABLE (every caller retrying on serialization failures): the
lock works on empty tables and fails no transaction. Two participants whose keys collide only
wait for each other.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlalchemy as sa

PENDING, RELEASED = "pending", "released"


@dataclass(frozen=True)
class Schema:
    """The record tables, in one `metadata`."""

    metadata: sa.MetaData
    leaderboard: sa.Table
    releases: sa.Table
    ladder: sa.Table

    def quota_table(self, name: str) -> sa.Table:
        """The table `name` of the release quota: `releases` or `ladder`."""
        return {"releases": self.releases, "ladder": self.ladder}[name]


@functools.cache
def schema() -> Schema:
    """The record tables (SQLAlchemy Core), defined on first use: SQLAlchemy, the serve extra's,
    is imported only when a record is on PostgreSQL."""
    import sqlalchemy as sa

    metadata = sa.MetaData()
    leaderboard = sa.Table(
        "leaderboard",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("timestamp", sa.Text, nullable=False),
        sa.Column("dataset", sa.Text, nullable=False),
        sa.Column("family", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("convention", sa.Text),
        sa.Column("avg_score", sa.Double),
        sa.Column("scores", sa.Text, nullable=False),  # JSON, as in the SQLite file
        sa.Column("metadata", sa.Text, nullable=False),  # JSON
        sa.Column("result", sa.Text, nullable=False),  # JSON
        sa.Column("truth_commitment", sa.Text),
        sa.Column("submission_key", sa.Text, unique=True),
    )
    releases = sa.Table(
        "releases",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("participant", sa.Text, nullable=False),
        sa.Column("family", sa.Text, nullable=False),
        sa.Column("name", sa.Text),
        sa.Column("time_s", sa.Double, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("holder", sa.Text, nullable=False, server_default=""),
    )
    sa.Index("releases_participant", releases.c.participant, releases.c.time_s)
    ladder = sa.Table(
        "ladder",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("participant", sa.Text, nullable=False),
        sa.Column("truth_commitment", sa.Text, nullable=False),
        sa.Column("name", sa.Text),
        sa.Column("time_s", sa.Double, nullable=False),
        sa.Column("public_avg_score", sa.Double),
        sa.Column("best", sa.Double),
        sa.Column("improved", sa.Integer, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("holder", sa.Text, nullable=False, server_default=""),
    )
    sa.Index("ladder_participant", ladder.c.participant, ladder.c.truth_commitment)
    return Schema(metadata, leaderboard, releases, ladder)


_engines: dict[str, sa.Engine] = {}
_engines_lock = threading.Lock()


def sqlalchemy_url(url: str) -> str:
    """`url` with the driver SQLAlchemy is to use: postgresql:// through psycopg (3)."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def _lock(connection: sa.Connection, *record: str) -> None:
    """Hold, until the transaction of `connection` ends, the advisory lock of `record` (the
    table's name, then what is locked in it: module doc), a 64-bit key hashed from it."""
    import sqlalchemy as sa

    digest = hashlib.sha256("\0".join(record).encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    connection.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.cast(key, sa.BigInteger))))


def engine(url: str) -> sa.Engine:
    """This process's engine for the database at `url`, its record tables created if missing
    (under an advisory lock: services starting at once do not race to create them). A database
    that cannot be reached raises SQLAlchemy's error: the infrastructure's failure (a service
    retries the job), not a participant's bad input."""
    import sqlalchemy as sa

    with _engines_lock:
        found = _engines.get(url)
        if found is None:
            found = sa.create_engine(sqlalchemy_url(url), pool_pre_ping=True)
            try:
                with found.begin() as connection:
                    _lock(connection, "create", *schema().metadata.tables)
                    schema().metadata.create_all(connection)
            except BaseException:
                found.dispose()
                raise
            _engines[url] = found
        return found


# --- the leaderboard ---------------------------------------------------------------------------


def record_entry(url: str, values: dict[str, Any]) -> int:
    """Add one leaderboard row (`values`: its columns but `id`) unless a row with its
    `submission_key` is there; the id of the row holding that key."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql

    table = schema().leaderboard
    with engine(url).begin() as connection:
        connection.execute(
            postgresql.insert(table)
            .values(values)
            .on_conflict_do_nothing(index_elements=[table.c.submission_key])
        )
        found = connection.execute(
            sa.select(table.c.id).where(table.c.submission_key == values["submission_key"])
        ).scalar_one()
    return int(found)


def entry_rows(url: str, columns: Sequence[str], family: str | None) -> list[tuple[Any, ...]]:
    """The leaderboard's `columns` of every row (of `family`, when given) in SQLite's order:
    by dataset (byte order, the "C" collation), best `avg_score` first and missing ones last,
    then id."""
    import sqlalchemy as sa

    table = schema().leaderboard
    query = sa.select(*(table.c[name] for name in columns)).order_by(
        table.c.dataset.collate("C"), table.c.avg_score.desc().nulls_last(), table.c.id
    )
    if family is not None:
        query = query.where(table.c.family == family)
    with engine(url).connect() as connection:
        return [tuple(row) for row in connection.execute(query)]


# --- the release quota and the Ladder ----------------------------------------------------------


def reserve(
    url: str,
    row: dict[str, Any],
    names: Sequence[str],
    since_s: float,
    check: Callable[[list[float]], None],
) -> list[int]:
    """Under the participant's lock (module doc): `check` the times of the participant's slots
    after `since_s` (it raises to take none), then add one pending slot per name (`row`: the
    columns they share); their ids."""
    import sqlalchemy as sa

    table = schema().releases
    with engine(url).begin() as connection:
        _lock(connection, "releases", row["participant"])
        check(
            list(
                connection.execute(
                    sa.select(table.c.time_s)
                    .where(table.c.participant == row["participant"], table.c.time_s > since_s)
                    .order_by(table.c.time_s)
                ).scalars()
            )
        )
        return [
            int(
                connection.execute(
                    table.insert()
                    .values({**row, "name": name, "state": PENDING})
                    .returning(table.c.id)
                ).scalar_one()
            )
            for name in names
        ]


def count_slots(url: str, participant: str, since_s: float) -> int:
    """The participant's slots (pending or released) after `since_s`."""
    import sqlalchemy as sa

    table = schema().releases
    with engine(url).connect() as connection:
        return int(
            connection.execute(
                sa.select(sa.func.count())
                .select_from(table)
                .where(table.c.participant == participant, table.c.time_s > since_s)
            ).scalar_one()
        )


def _best(connection: sa.Connection, participant: str, commitment: str) -> float | None:
    import sqlalchemy as sa

    table = schema().ladder
    best = connection.execute(
        sa.select(sa.func.max(table.c.best)).where(
            table.c.participant == participant,
            table.c.truth_commitment == commitment,
            table.c.state.in_((PENDING, RELEASED)),
        )
    ).scalar_one()
    return None if best is None else float(best)


def current_best(url: str, participant: str, commitment: str) -> float | None:
    """The participant's best against `commitment` (pending and released rungs)."""
    with engine(url).connect() as connection:
        return _best(connection, participant, commitment)


def climb(
    url: str,
    row: dict[str, Any],
    rule: Callable[[float | None], tuple[float | None, bool]],
) -> tuple[int, float | None, bool]:
    """Under the lock of the participant's Ladder against `row`'s truth commitment (module
    doc): the best after this rung (`rule` of the current best) and whether it improved, added
    as a pending rung (`row`: its other columns); (its id, best, improved)."""
    participant, commitment = row["participant"], row["truth_commitment"]
    table = schema().ladder
    with engine(url).begin() as connection:
        _lock(connection, "ladder", participant, commitment)
        best, improved = rule(_best(connection, participant, commitment))
        values = {**row, "best": best, "improved": int(improved), "state": PENDING}
        ident = connection.execute(table.insert().values(values).returning(table.c.id))
        return int(ident.scalar_one()), best, improved


def settle(url: str, table_name: str, ids: Sequence[int], released: bool) -> None:
    """Mark the rows `ids` of `table_name` (`releases` or `ladder`) released, or delete them
    when nothing was released (`sqlite_wal.settle_rows`)."""
    table = schema().quota_table(table_name)
    chosen = table.c.id.in_(list(ids))
    with engine(url).begin() as connection:
        if released:
            connection.execute(table.update().where(chosen).values(state=RELEASED))
        else:
            connection.execute(table.delete().where(chosen))


def drop_pending(url: str, table_name: str, holder: str) -> int:
    """Delete the pending rows of `table_name` that `holder` took (`sqlite_wal.drop_pending`);
    how many. Nothing for the empty holder."""
    if not holder:
        return 0
    table = schema().quota_table(table_name)
    with engine(url).begin() as connection:
        done = connection.execute(
            table.delete().where(table.c.state == PENDING, table.c.holder == holder)
        )
    return int(done.rowcount)
