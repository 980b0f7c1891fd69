"""Uploads through the competition's bucket (`competition.json`'s `uploads`, s3://bucket/prefix,
opened with its `uploads_options`): the bytes go from the team to the bucket, never through the
server's process. A team asks for an upload of a declared size and is given presigned PUT URLs,
one per part of an S3 multipart upload at a key of its own (`PREFIX/incoming/<random>`);
completing it has the server complete the multipart upload, check the object's size, stream it
through `intake` (hashed, validated, charged, queued: the way of a direct upload) and delete
it. Uploads in progress are rows of `tables.uploads`, so a restart loses none. The server's S3
credentials come from its environment (botocore's chain), never from `competition.json`. The
presigned URLs name the bucket's endpoint as the server reaches it, or the public endpoint the
server is given (`seisctf serve --public-endpoint URL`: a bucket the server reaches on an
internal address); they are signed for that host.

API (a team's token as `Authorization: Bearer TOKEN`, or a browser's session with its CSRF token
as `X-CSRF-Token`: the team page's form sends its file this way; another team's upload id is
404):
- `POST /api/uploads?dataset=NAME&filename=F&model=NAME&size=BYTES`: 201 and `{"upload": id,
  "parts": [{"part": n, "url": presigned PUT URL}, ...], "part_bytes": P, "expires_s": S}`
  (each part P bytes but the last; the URLs expire after S seconds); 413 over the upload
  limit, 415 for a name that is not a .zip or .npz, 404/403 for an unknown or closed dataset,
  nothing created then;
- `POST /api/uploads/{id}/complete` with `[{"part": n, "etag": "…"}, ...]` (each PUT's ETag):
  the submission, as `POST /api/submissions` answers (201, or 200 for bytes sent before), or
  4xx with nothing stored; 400 when the parts do not complete it (it stays open to try again);
- `DELETE /api/uploads/{id}`: aborted (204).
Uploads left open for a day (`STALE_S`) are aborted by the first scoring worker when idle."""

# No `from __future__ import annotations` here: FastAPI reads the routes' annotations at run
# time, and `Depends(api_team)` names a function given to `register`.

import asyncio
import contextlib
import logging
import secrets
import time
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Body, Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from seisctf import s3
from seisctf.service import intake, pages
from seisctf.service.competition import Competition, Reloading
from seisctf.service.tables import uploads
from seisctf.service.teams import Team

PART_BYTES = 8 * 1024**2  # each part but the last (S3's least is 5 MiB)
MIN_PART_BYTES = 5 * 1024**2
MAX_PARTS = 10_000  # S3's most
URL_EXPIRES_S = 3600
STALE_S = 24 * 3600
SWEEP_EVERY_S = 600
READ_BYTES = 1 << 20

log = logging.getLogger("seisctf.service")

# `intake`'s way of a submission: (team, dataset, model, filename, its bytes) -> its row.
Admit = Callable[[Team, str, str, str, AsyncIterator[bytes]], Awaitable[dict[str, Any]]]


def url_origin(endpoint: str) -> str:
    """The origin (scheme://host[:port]) of presigned URLs of `endpoint` (the bucket's endpoint
    as teams reach it; "": AWS's, whose URLs name a host under amazonaws.com)."""
    if not endpoint:
        return "https://*.amazonaws.com"
    parts = urllib.parse.urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}"


def endpoint_of(options: dict[str, Any]) -> str:
    """The endpoint URL storage `options` name ("": AWS's)."""
    return str(
        options.get("endpoint_url") or options.get("client_kwargs", {}).get("endpoint_url") or ""
    )


def part_plan(size: int, part_bytes: int = PART_BYTES) -> tuple[int, int]:
    """(bytes of each part but the last, number of parts) of an upload of `size` bytes (at
    least 1): parts of `part_bytes`, never under S3's least, larger where S3's most parts
    would not hold `size`."""
    if size < 1:
        raise ValueError(f"an upload holds at least one byte, not {size}")
    part = max(part_bytes, MIN_PART_BYTES, -(-size // MAX_PARTS))
    return part, -(-size // part)


class Part(BaseModel):
    """A part the team PUT: its number and the ETag the bucket answered."""

    part: int = Field(ge=1, le=MAX_PARTS)
    etag: str = Field(min_length=1, max_length=200)


class Bucket:
    """The uploads bucket: `url` (s3://bucket/prefix) opened with `options` (no credentials:
    botocore finds them in the environment); its presigned URLs name `public_endpoint`
    (http(s)://host[:port]) when given, else the endpoint of `options`. Its methods block: call
    them from a thread."""

    def __init__(self, url: str, options: dict[str, Any], public_endpoint: str = "") -> None:
        self.bucket, _, prefix = url.split("://", 1)[1].partition("/")
        self.prefix = prefix.strip("/")
        given = dict(options)
        # Presigned URLs signed with SigV4 (botocore presigns S3 with SigV2 otherwise).
        given["config_kwargs"] = {"signature_version": "s3v4", **given.get("config_kwargs", {})}
        self.fs = s3.WatchedS3FileSystem(**s3.with_retries(given))
        # Presigning is local (no request): a client of the public endpoint signs for its host.
        self.signer = (
            s3.WatchedS3FileSystem(**s3.with_retries({**given, "endpoint_url": public_endpoint}))
            if public_endpoint
            else self.fs
        )

    def new_key(self) -> str:
        return "/".join(p for p in (self.prefix, "incoming", secrets.token_hex(16)) if p)

    def start(self, key: str) -> str:
        """A new multipart upload at `key`: its S3 upload id."""
        return str(
            self.fs.call_s3("create_multipart_upload", Bucket=self.bucket, Key=key)["UploadId"]
        )

    def part_urls(self, key: str, upload_id: str, count: int) -> list[str]:
        return [
            self.signer.url(
                f"{self.bucket}/{key}",
                expires=URL_EXPIRES_S,
                client_method="upload_part",
                UploadId=upload_id,
                PartNumber=number,
            )
            for number in range(1, count + 1)
        ]

    def complete(self, key: str, upload_id: str, parts: list[Part]) -> None:
        self.fs.call_s3(
            "complete_multipart_upload",
            Bucket=self.bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={
                "Parts": [
                    {"PartNumber": p.part, "ETag": p.etag}
                    for p in sorted(parts, key=lambda p: p.part)
                ]
            },
        )

    def size(self, key: str) -> int:
        return int(self.fs.call_s3("head_object", Bucket=self.bucket, Key=key)["ContentLength"])

    async def chunks(self, key: str) -> AsyncGenerator[bytes, None]:
        """The object's bytes, read in a thread a block at a time."""
        opened = await asyncio.to_thread(
            self.fs.open, f"{self.bucket}/{key}", "rb", block_size=PART_BYTES
        )
        try:
            while block := await asyncio.to_thread(opened.read, READ_BYTES):
                yield block
        finally:
            opened.close()

    def delete(self, key: str) -> None:
        self.fs.call_s3("delete_object", Bucket=self.bucket, Key=key)

    def abort(self, key: str, upload_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # completed or aborted already
            self.fs.call_s3(
                "abort_multipart_upload", Bucket=self.bucket, Key=key, UploadId=upload_id
            )


def abort_stale(bucket: Bucket, engine: sa.Engine, older_than_s: float = STALE_S) -> int:
    """Abort the uploads started over `older_than_s` ago (at most 100 at a time): how many."""
    with engine.connect() as connection:
        rows = connection.execute(
            sa.select(uploads)
            .where(uploads.c.created_s < time.time() - older_than_s)
            .order_by(uploads.c.created_s)
            .limit(100)
        ).all()
    aborted = 0
    for row in rows:
        with engine.begin() as connection:
            taken = connection.execute(uploads.delete().where(uploads.c.id == row.id))
        if taken.rowcount == 1:  # else completed or aborted meanwhile
            try:
                bucket.abort(row.key, row.s3_upload_id)
            except BaseException:
                with engine.begin() as connection:
                    connection.execute(uploads.insert().values(**row._asdict()))
                raise
            aborted += 1
    return aborted


def remove_orphans(bucket: Bucket, engine: sa.Engine, older_than_s: float = STALE_S) -> int:
    """Delete the objects under the prefix's `incoming/` that no open upload names and that are
    over `older_than_s` old (a server stopped between completing an upload and taking its bytes
    in leaves one): how many (at most 1,000 a call)."""
    prefix = "/".join(p for p in (bucket.prefix, "incoming") if p) + "/"
    with engine.connect() as connection:
        named = set(connection.execute(sa.select(uploads.c.key)).scalars())
    listed = bucket.fs.call_s3("list_objects_v2", Bucket=bucket.bucket, Prefix=prefix)
    removed = 0
    for item in listed.get("Contents", []):
        old = item["LastModified"].timestamp() < time.time() - older_than_s
        if old and item["Key"] not in named:
            bucket.delete(item["Key"])
            removed += 1
    return removed


def register(
    app: FastAPI,
    current: Reloading,
    engine: sa.Engine,
    api_team: Any,
    admitted: Admit,
    public_endpoint: str = "",
) -> Callable[[], None]:
    """Add the routes of uploads through the bucket (module doc) to `app`: `api_team` is the
    dependency giving a request's team, `admitted` the way into `intake`, `public_endpoint` the
    endpoint presigned URLs name ("": the bucket's own). Returns the sweep of stale uploads, for
    a worker to call when idle (it runs every `SWEEP_EVERY_S` at most)."""
    opened: dict[str, Bucket] = {}
    swept = {"s": 0.0}

    def bucket_of(competition: Competition) -> Bucket:
        if not competition.uploads:
            raise HTTPException(
                404,
                "this competition has no uploads bucket: send the file as the body of "
                "POST /api/submissions",
            )
        name = f"{competition.uploads} {sorted(competition.uploads_options.items())}"
        if name not in opened:
            opened[name] = Bucket(competition.uploads, competition.uploads_options, public_endpoint)
        return opened[name]

    def sweep() -> None:
        competition, now = current.get(), time.time()
        if not competition.uploads or now - swept["s"] < SWEEP_EVERY_S:
            return
        swept["s"] = now
        try:
            aborted = abort_stale(bucket_of(competition), engine)
            remove_orphans(bucket_of(competition), engine)
        except Exception:  # noqa: BLE001 - tried again at the next sweep
            log.exception("aborting stale uploads failed")
            return
        if aborted:
            log.info("aborted %d uploads open over %d s", aborted, STALE_S)

    def take(team: Team, ident: str) -> dict[str, Any]:
        """The team's upload `ident`, its row removed: no other request completes or aborts it
        meanwhile. 404 when the team has no such upload."""
        with engine.begin() as connection:
            row = connection.execute(
                sa.select(uploads).where(uploads.c.id == ident, uploads.c.team_id == team.id)
            ).first()
            taken = connection.execute(
                uploads.delete().where(uploads.c.id == ident, uploads.c.team_id == team.id)
            )
        if row is None or taken.rowcount != 1:
            raise HTTPException(404, "no such upload of your team")
        return row._asdict()

    def put_back(row: dict[str, Any]) -> None:
        with engine.begin() as connection:
            connection.execute(uploads.insert().values(**row))

    @app.post("/api/uploads", status_code=201)
    async def start_upload(
        team: Annotated[Team, Depends(api_team)],
        dataset: str,
        filename: str,
        size: int,
        model: str = "",
    ) -> dict[str, Any]:
        competition = current.get()
        bucket = bucket_of(competition)
        if size > competition.max_upload_bytes:
            raise HTTPException(
                413, f"upload over the limit of {competition.max_upload_bytes} bytes"
            )
        if size < 1:
            raise HTTPException(422, "an upload holds at least one byte")
        try:
            intake.check_open(competition, engine, dataset, filename)
        except intake.Refused as refused:
            raise HTTPException(refused.status, refused.message) from None
        key = bucket.new_key()
        upload_id = await asyncio.to_thread(bucket.start, key)
        ident = secrets.token_hex(16)
        try:
            with engine.begin() as connection:
                connection.execute(
                    uploads.insert().values(
                        id=ident,
                        team_id=team.id,
                        dataset=dataset,
                        model=(model or team.name)[: intake.MAX_FILENAME_CHARS],
                        filename=filename,
                        key=key,
                        s3_upload_id=upload_id,
                        size=size,
                        created_s=time.time(),
                    )
                )
        except BaseException:
            await asyncio.to_thread(bucket.abort, key, upload_id)
            raise
        part_bytes, count = part_plan(size)
        urls = await asyncio.to_thread(bucket.part_urls, key, upload_id, count)
        return {
            "upload": ident,
            "parts": [{"part": n, "url": url} for n, url in enumerate(urls, start=1)],
            "part_bytes": part_bytes,
            "expires_s": URL_EXPIRES_S,
        }

    @app.post("/api/uploads/{ident}/complete")
    async def complete_upload(
        ident: str,
        team: Annotated[Team, Depends(api_team)],
        parts: Annotated[list[Part], Body(max_length=MAX_PARTS)],
    ) -> JSONResponse:
        competition = current.get()
        bucket = bucket_of(competition)
        row = take(team, ident)
        try:
            await asyncio.to_thread(bucket.complete, row["key"], row["s3_upload_id"], parts)
        except OSError as error:  # S3's refusal (s3fs's OSError): a part missing, a wrong ETag
            put_back(row)
            raise HTTPException(400, f"the parts do not complete the upload: {error}") from None
        except BaseException:
            put_back(row)
            raise
        try:
            size = await asyncio.to_thread(bucket.size, row["key"])
            if size > competition.max_upload_bytes:
                raise HTTPException(
                    413, f"upload over the limit of {competition.max_upload_bytes} bytes"
                )
            async with contextlib.aclosing(bucket.chunks(row["key"])) as chunks:
                admitted_row = await admitted(
                    team, row["dataset"], row["model"], row["filename"], chunks
                )
        finally:
            try:
                await asyncio.to_thread(bucket.delete, row["key"])
            except Exception:  # noqa: BLE001 - the submission's fate stands; the object stays
                log.exception("deleting %s from the uploads bucket failed", row["key"])
        return JSONResponse(
            pages.submission_view(admitted_row),
            status_code=201 if admitted_row["created"] else 200,
        )

    @app.delete("/api/uploads/{ident}", status_code=204)
    async def abort_upload(ident: str, team: Annotated[Team, Depends(api_team)]) -> Response:
        bucket = bucket_of(current.get())
        row = take(team, ident)
        try:
            await asyncio.to_thread(bucket.abort, row["key"], row["s3_upload_id"])
        except BaseException:
            put_back(row)
            raise
        return Response(status_code=204)

    return sweep
