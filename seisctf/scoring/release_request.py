"""Who scores are released to, and how often: `Release`, which the Ladder (`ladder`) and the
release of scores (`release`) both take."""

from __future__ import annotations

from dataclasses import dataclass

from seisctf.errors import InvalidInput

DEFAULT_QUOTA = 5  # releases per participant in any 24 h
MAX_PARTICIPANT_CHARS = 200
POSTGRES_SCHEMES = ("postgresql://", "postgresql+psycopg://")


def on_postgres(target: str) -> bool:
    """Whether the referee's record `target` (a leaderboard, a release quota) is a PostgreSQL
    database's URL (`postgres_records`: a service's `--db`), not an SQLite file's path."""
    return target.startswith(POSTGRES_SCHEMES)


@dataclass(frozen=True)
class Release:
    """A request to release scores to `participant`, counted in `quota_db`: an SQLite file's
    path, or a PostgreSQL database's URL (`on_postgres`)."""

    participant: str
    quota_db: str
    quota: int = DEFAULT_QUOTA
    # Who takes the pending rows of this release (quota slots, Ladder rungs): a service's job
    # id, whose later attempts drop what a dead one left (`ladder.drop_pending`); "" for none.
    holder: str = ""

    def __post_init__(self) -> None:
        name = self.participant
        if not name.strip() or len(name) > MAX_PARTICIPANT_CHARS or not name.isprintable():
            raise InvalidInput(
                f"{{participant}} {name!r}",
                f"expected 1 to {MAX_PARTICIPANT_CHARS} printable characters",
                parameters=["participant"],
            )
        if self.quota < 1:
            raise InvalidInput("quota", f"expected at least 1 release per 24 h, got {self.quota}")
