"""Teams, their tokens and browser sessions. A token is shown once when issued and stored as its
SHA-256 only; a browser session is a random cookie (stored hashed too) with its own CSRF token."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import sqlalchemy as sa

from seisctf.errors import InvalidInput
from seisctf.scoring.release_request import MAX_PARTICIPANT_CHARS
from seisctf.service.tables import sessions, teams

SESSION_S = 12 * 3600
MAX_DESCRIPTION_CHARS = 2000


@dataclass(frozen=True)
class Team:
    id: int
    name: str
    description: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def add_team(engine: sa.Engine, name: str, description: str = "") -> str:
    """Add team `name`; returns its token (shown once: only its hash is kept)."""
    if not name.strip() or len(name) > MAX_PARTICIPANT_CHARS or not name.isprintable():
        raise InvalidInput(
            f"team {name!r}", f"expected 1 to {MAX_PARTICIPANT_CHARS} printable characters"
        )
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidInput(f"team {name!r}", f"description over {MAX_DESCRIPTION_CHARS} characters")
    token = secrets.token_urlsafe(32)
    try:
        _insert_team(engine, name, description, token)
    except sa.exc.IntegrityError:  # added at the same time by another command
        raise InvalidInput(f"team {name!r}", "exists already") from None
    return token


def _insert_team(engine: sa.Engine, name: str, description: str, token: str) -> None:
    with engine.begin() as connection:
        if connection.execute(sa.select(teams.c.id).where(teams.c.name == name)).first():
            raise InvalidInput(f"team {name!r}", "exists already")
        connection.execute(
            teams.insert().values(
                name=name,
                description=description,
                token_sha256=digest(token),
                created_s=time.time(),
                revoked=False,
            )
        )


def team_of_token(engine: sa.Engine, token: str | None) -> Team | None:
    """The team holding `token` (None: unknown or revoked)."""
    if not token:
        return None
    with engine.connect() as connection:
        row = connection.execute(
            sa.select(teams.c.id, teams.c.name, teams.c.description).where(
                teams.c.token_sha256 == digest(token), teams.c.revoked.is_(False)
            )
        ).first()
    return None if row is None else Team(row.id, row.name, row.description)


def open_session(engine: sa.Engine, team: Team) -> tuple[str, str]:
    """A new browser session of `team`: (cookie value, CSRF token)."""
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    with engine.begin() as connection:
        connection.execute(
            sessions.insert().values(
                id_sha256=digest(cookie),
                team_id=team.id,
                csrf=csrf,
                expires_s=time.time() + SESSION_S,
            )
        )
    return cookie, csrf


def session_of(engine: sa.Engine, cookie: str | None) -> tuple[Team, str] | None:
    """The team and CSRF token of a live session cookie (None: none, expired or revoked)."""
    if not cookie:
        return None
    with engine.connect() as connection:
        row = connection.execute(
            sa.select(teams.c.id, teams.c.name, teams.c.description, sessions.c.csrf)
            .join(teams, teams.c.id == sessions.c.team_id)
            .where(
                sessions.c.id_sha256 == digest(cookie),
                sessions.c.expires_s > time.time(),
                teams.c.revoked.is_(False),
            )
        ).first()
    return None if row is None else (Team(row.id, row.name, row.description), row.csrf)


def same_secret(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def close_session(engine: sa.Engine, cookie: str) -> None:
    with engine.begin() as connection:
        connection.execute(sessions.delete().where(sessions.c.id_sha256 == digest(cookie)))
