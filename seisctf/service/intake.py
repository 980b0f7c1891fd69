"""An upload's way into the job table: stored under its content hash and submission id,
validated (a CTF submission from metadata, `seisctf.scoring.submission`: names, shapes, dtypes,
sizes, zip members, nothing of the values read; a pick table as `score picks` checks it before
reading a label, `seisctf.scoring.picks.check_pick_submission`, against the public bundle's
trace names and test split), charged to the team's quota, queued. A refused upload
leaves nothing: no bytes, no row. The same bytes sent again by the same team for the same
dataset are the same submission (no second charge)."""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from seisctf.catalogs import pick_table
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.picks import PickTruth, check_pick_submission, read_truth
from seisctf.scoring.release import QUOTA_WINDOW_S
from seisctf.scoring.submission import open_submission
from seisctf.scoring.submission_checks import SubmissionLimits
from seisctf.service.competition import SCORED_SPLIT, Competition, Dataset
from seisctf.service.tables import (
    QUEUED,
    RECEIVED,
    VALIDATED,
    closed_datasets,
    submissions,
    teams,
)
from seisctf.service.teams import Team
from seisctf.storage import open_group

# A submission's file names by family: a zarr group's zip or an .npz; a pick table.
SUFFIXES = {"ctf": (".zip", ".npz"), "picks": pick_table.CSV_SUFFIXES + pick_table.PARQUET_SUFFIXES}
WHAT = {
    "ctf": "a .zip of a zarr group or an .npz",
    "picks": "a pick table (.csv, .parquet or .pq)",
}
MAX_FILENAME_CHARS = 200


class Refused(Exception):
    """An upload refused: `status` (HTTP) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Upload:
    """An upload streamed to a temporary file in the uploads folder: its path, size, SHA-256."""

    path: Path
    size: int
    sha256: str


async def receive(chunks: AsyncIterator[bytes], folder: Path, max_bytes: int) -> Upload:
    """Stream `chunks` to a temporary file under `folder`, hashing them; refused (413) past
    `max_bytes`, the partial file removed."""
    folder.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=folder, prefix=".upload-")
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(descriptor, "wb") as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > max_bytes:
                    raise Refused(413, f"upload over the limit of {max_bytes} bytes")
                digest.update(chunk)
                out.write(chunk)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Upload(Path(name), size, digest.hexdigest())


@functools.lru_cache(maxsize=16)
def public_traces(public: str, bundle_id: str) -> PickTruth:
    """The trace names and splits of a picking dataset's public bundle at `public`, read once
    per bundle (`bundle_id`, the SHA-256 of its arrays, keys the cache): not at every upload."""
    return read_truth(StoreLocation(public), labelled=False)


def manifest_of(public: str) -> CtfManifest:
    return CtfManifest.from_attrs(dict(open_group(StoreLocation(public)).attrs), public)


def check_suffix(filename: str, family: str = "ctf") -> str:
    """The suffix of a submission's file name; refused (415) unless one of the family's
    (`SUFFIXES`)."""
    suffix = Path(filename).suffix.lower()
    if suffix not in SUFFIXES[family] or len(filename) > MAX_FILENAME_CHARS:
        raise Refused(
            415,
            f"expected {WHAT[family]} (at most {MAX_FILENAME_CHARS} characters of name), "
            f"got {filename[:80]!r}",
        )
    return suffix


def validate(path: Path, spec: Dataset, limits: SubmissionLimits) -> None:
    """Refused (422) unless the submission at `path` is one of the dataset `spec`: a CTF one
    holding the manifest's test arrays with their shapes and a floating dtype, within `limits`
    (read from metadata only); a pick table naming each trace of the public bundle's test
    split once, its values in range (`check_pick_submission`)."""
    try:
        if spec.family == "picks":
            check_pick_submission(
                public_traces(spec.public, spec.bundle_id),
                StoreLocation(str(path)),
                split=SCORED_SPLIT,
                max_bytes=min(limits.max_total_bytes, pick_table.MAX_SUBMISSION_BYTES),
            )
        else:
            open_submission(StoreLocation(str(path)), manifest_of(spec.public), limits)
    except InvalidInput as error:
        text = str(error).replace(str(path), "submission")
        raise Refused(422, text) from None


def check_open(
    competition: Competition, engine: sa.Engine, dataset: str, filename: str
) -> tuple[Dataset, str]:
    """The dataset a submission named `filename` is sent to, and the name's suffix; Refused
    when the dataset is unknown (404) or closed (403), or the name is not a submission's (415)."""
    spec = competition.datasets.get(dataset)
    if spec is None:
        raise Refused(404, f"no dataset {dataset!r} in this competition")
    if dataset in closed_datasets(engine):
        raise Refused(403, f"{dataset} is closed: no submission is accepted any more")
    return spec, check_suffix(filename, spec.family)


def admit(
    competition: Competition,
    engine: sa.Engine,
    team: Team,
    dataset: str,
    filename: str,
    upload: Upload,
    model: str,
) -> dict[str, Any]:
    """The submission of `upload` (module doc): its row, `created` false when it was there
    already. Refused (4xx) when the dataset is unknown, the file is not a submission of it, or
    the team's quota is used."""
    try:
        spec, suffix = check_open(competition, engine, dataset, filename)
        existing = _existing(engine, team, dataset, upload.sha256)
        if existing is not None:
            return existing
        limits = SubmissionLimits(max_total_bytes=competition.max_upload_bytes * 64)
        now = time.time()
        ident = secrets.token_hex(16)
        # Named by the submission too: another team's identical bytes are another file, which
        # removing this one (refused here or while scoring) leaves alone.
        stored = upload.path.with_name(f"{upload.sha256}-{ident}{suffix}")
        os.replace(upload.path, stored)
        try:
            with engine.begin() as connection:
                connection.execute(
                    submissions.insert().values(
                        id=ident,
                        team_id=team.id,
                        dataset=dataset,
                        sha256=upload.sha256,
                        model=model[:MAX_FILENAME_CHARS],
                        stored=str(stored),
                        size=upload.size,
                        state=RECEIVED,
                        message="",
                        created_s=now,
                        updated_s=now,
                        attempts=0,
                        final=False,
                    )
                )
            validate(stored, spec, limits)
            _move(engine, ident, VALIDATED)
            _charge(engine, ident, team, competition.quota)
        except BaseException as error:  # refused, or anything else: nothing of it is kept
            with engine.begin() as connection:
                connection.execute(submissions.delete().where(submissions.c.id == ident))
            stored.unlink(missing_ok=True)
            if isinstance(error, sa.exc.IntegrityError):  # the same bytes sent twice at once
                existing = _existing(engine, team, dataset, upload.sha256)
                if existing is not None:
                    return existing
            raise
    finally:
        upload.path.unlink(missing_ok=True)
    with engine.connect() as connection:
        row = connection.execute(sa.select(submissions).where(submissions.c.id == ident)).one()
    return {**row._asdict(), "created": True}


def _existing(engine: sa.Engine, team: Team, dataset: str, sha256: str) -> dict[str, Any] | None:
    """The team's submission of these bytes for `dataset`, if any (`created` false)."""
    with engine.connect() as connection:
        row = connection.execute(
            sa.select(submissions).where(
                submissions.c.team_id == team.id,
                submissions.c.dataset == dataset,
                submissions.c.sha256 == sha256,
            )
        ).first()
    return None if row is None else {**row._asdict(), "created": False}


def _move(engine: sa.Engine, ident: str, state: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            submissions.update()
            .where(submissions.c.id == ident)
            .values(state=state, updated_s=time.time())
        )


def _charge(engine: sa.Engine, ident: str, team: Team, quota: int) -> None:
    """Charge the submission to the team's quota and queue it, in one transaction that holds
    the team's row (PostgreSQL) or the database's write lock (SQLite): concurrent uploads of
    one team cannot pass the quota together. Refused (429) over quota."""
    now = time.time()
    charged = (
        sa.select(sa.func.count())
        .select_from(submissions)
        .where(submissions.c.team_id == team.id, submissions.c.charged_s > now - QUOTA_WINDOW_S)
        .scalar_subquery()
    )
    with engine.begin() as connection:
        connection.execute(sa.select(teams.c.id).where(teams.c.id == team.id).with_for_update())
        done = connection.execute(
            submissions.update()
            .where(submissions.c.id == ident, charged < quota)
            .values(state=QUEUED, charged_s=now, updated_s=now)
        )
    if done.rowcount != 1:
        raise Refused(
            429, f"the team's quota of {quota} submissions in 24 h is used; nothing was charged"
        )
