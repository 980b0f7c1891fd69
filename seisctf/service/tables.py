"""The service's database: SQLite (a file in the competition's folder, the default) or PostgreSQL
(`--db postgresql://…`), through SQLAlchemy Core. The `submissions` table is the job table and
the source of truth: a submission's state only moves forward there, in one statement each.

States: `received` (stored) → `validated` (its arrays' names, shapes, dtypes and sizes checked
from metadata) → `queued` (charged to the team's quota) → `scoring` (a worker holds its lease)
→ `scored`; or `refused` (bad input or over quota: nothing charged) or `failed` (the
infrastructure failed: its charge refunded)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from seisctf.errors import InvalidInput
from seisctf.scoring.postgres_records import sqlalchemy_url

RECEIVED, VALIDATED, QUEUED, SCORING = "received", "validated", "queued", "scoring"
SCORED, REFUSED, FAILED = "scored", "refused", "failed"
STATES = (RECEIVED, VALIDATED, QUEUED, SCORING, SCORED, REFUSED, FAILED)
FINISHED = (SCORED, REFUSED, FAILED)

metadata = sa.MetaData()

teams = sa.Table(
    "teams",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
    sa.Column("created_s", sa.Float, nullable=False),
    sa.Column("revoked", sa.Boolean, nullable=False, default=False),
)

submissions = sa.Table(
    "submissions",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False),
    sa.Column("dataset", sa.String(200), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("model", sa.String(300), nullable=False),
    sa.Column("stored", sa.Text, nullable=False),  # where its bytes are kept
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("message", sa.Text, nullable=False, default=""),
    sa.Column("created_s", sa.Float, nullable=False),
    sa.Column("updated_s", sa.Float, nullable=False),
    sa.Column("charged_s", sa.Float),  # when charged to the quota; null: not (or refunded)
    sa.Column("lease_owner", sa.String(64)),
    sa.Column("lease_until_s", sa.Float),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("final", sa.Boolean, nullable=False, default=False),
    sa.Column("released", sa.Text),  # JSON: what the team sees
    sa.Column("receipt", sa.Text),  # JSON: the signed receipt
    sa.UniqueConstraint("team_id", "dataset", "sha256", name="one_per_content"),
)
sa.Index("submissions_state", submissions.c.state, submissions.c.created_s)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id_sha256", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("expires_s", sa.Float, nullable=False),
)

# Uploads through the competition's bucket in progress (`s3_uploads`): the S3 multipart upload
# at `key` (`s3_upload_id`) a team was given presigned URLs for, until it completes or aborts it.
uploads = sa.Table(
    "uploads",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False),
    sa.Column("dataset", sa.String(200), nullable=False),
    sa.Column("model", sa.String(300), nullable=False),
    sa.Column("filename", sa.String(300), nullable=False),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("s3_upload_id", sa.Text, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),  # as declared
    sa.Column("created_s", sa.Float, nullable=False),
)

# Datasets closed by `seisctf referee close`: no upload after, the board's final view once all are.
closures = sa.Table(
    "closures",
    metadata,
    sa.Column("dataset", sa.String(200), primary_key=True),
    sa.Column("closed_s", sa.Float, nullable=False),
)


def closed_datasets(engine: sa.Engine) -> set[str]:
    with engine.connect() as connection:
        return set(connection.execute(sa.select(closures.c.dataset)).scalars())


def engine_of(url: str) -> sa.Engine:
    """An engine for `url` (`sqlite:///path` or `postgresql://…`) with the tables created.
    SQLite waits up to 30 s for a writer (WAL: readers never wait). The pool never makes a
    thread wait: each of the service's threads (its request thread pool's 40, the scorers)
    gets a connection at once, and the database serialises the writers (a pool of 5 + 10
    connections made the 16th thread wait, and failed its request after 30 s)."""
    if not url.startswith(("sqlite:///", "postgresql://", "postgresql+psycopg://")):
        raise InvalidInput(
            f"database {url.split('@')[-1]}",
            "expected postgresql://USER@HOST:PORT/DATABASE or sqlite:///PATH",
        )
    url = sqlalchemy_url(url)
    options: dict[str, Any] = {"max_overflow": -1}  # beyond 5 kept, opened as needed
    if url.startswith("sqlite"):
        options["connect_args"] = {"timeout": 30, "check_same_thread": False}
    engine = sa.create_engine(url, **options)
    if url.startswith("sqlite"):

        @sa.event.listens_for(engine, "connect")
        def _wal(connection: Any, _record: Any) -> None:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA busy_timeout=30000")

    try:
        metadata.create_all(engine)
    except sa.exc.OperationalError as error:
        raise InvalidInput(
            f"database {url.split('@')[-1]}",
            f"cannot be opened ({' '.join(str(error.orig).split())})",
        ) from None
    return engine
