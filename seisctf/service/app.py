"""The ASGI app of `seisctf serve` (FastAPI): participants' API and pages, the public bundles,
the live leaderboard. Scoring workers run in threads of the same process (`jobs.Worker`).

API (a team's token as `Authorization: Bearer TOKEN`):
- `POST /api/submissions?dataset=NAME&model=NAME&filename=F` with the file as the body
  (`curl --data-binary @sub.zip`): 201 and the submission (200 when the same bytes were sent
  before), or 4xx and `{"detail": why}` with nothing stored;
- `GET /api/submissions`, `GET /api/submissions/{id}`, `GET /api/submissions/{id}/receipt`,
  `POST /api/submissions/{id}/final` (the team's own only: another's is 404);
- `POST /api/uploads`, `POST /api/uploads/{id}/complete`, `DELETE /api/uploads/{id}`: uploads
  through the competition's bucket, presigned multipart (`s3_uploads`; a competition made with
  `--uploads s3://…`);
- `GET /api/board` (the number of scored submissions: the live page's signal),
  `GET /api/receipt-key` (the public key receipts are signed with).
Pages: `/` (bundles, log in with a token), `/team` (upload form, the team's submissions followed
live), `/live` (the leaderboard, reloaded when a score lands), `/board/…` (its pages),
`/bundles/<sha256>.zip`."""

# No `from __future__ import annotations` here: FastAPI reads the routes' annotations at run
# time, and `Depends(api_team)` names functions local to `create_app`.

import contextlib
import re
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Depends, FastAPI, Form, Header, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)

from seisctf.service import intake, jobs, pages, s3_uploads
from seisctf.service.competition import KEY, Competition, Reloading
from seisctf.service.tables import SCORED, closed_datasets, submissions
from seisctf.service.teams import (
    Team,
    close_session,
    open_session,
    same_secret,
    session_of,
    team_of_token,
)

COOKIE = "seisctf_session"
FORM_OVERHEAD_BYTES = 64 * 1024  # a form's fields and boundaries beside its file
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'self'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
BUNDLE = re.compile(r"[0-9a-f]{64}\.zip")
BOARD_PAGE = re.compile(r"[A-Za-z0-9_.-]+\.html")


def create_app(
    competition: Competition,
    engine: sa.Engine,
    *,
    workers: int = 1,
    lease_s: float = jobs.LEASE_S,
    owner: str = "server",
    retry_delay_s: float = jobs.RETRY_DELAY_S,
    public_endpoint: str = "",
) -> FastAPI:
    """The app of `competition` over the database `engine`, with `workers` scoring threads
    (an infrastructure failure retried after `retry_delay_s`, doubled for each retry after);
    uploads through its bucket are given URLs of `public_endpoint` when set (`s3_uploads`).
    Datasets added while it runs (`competition.add_dataset`) are served from the next request."""
    current = Reloading(competition)
    board = {"version": 0}

    def scored() -> None:
        board["version"] += 1

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        jobs.render_board(competition, engine)
        running = [
            jobs.Worker(
                current,
                engine,
                f"{owner}-{n}",
                lease_s,
                on_scored=scored,
                on_idle=sweep_uploads if n == 0 else lambda: None,
                retry_delay_s=retry_delay_s,
            )
            for n in range(workers)
        ]
        threads = [threading.Thread(target=w.run, name=w.owner, daemon=True) for w in running]
        for thread in threads:
            thread.start()
        yield
        for worker in running:
            worker.stop.set()

    app = FastAPI(
        title=competition.name, lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )

    # The team page's script sends uploads' parts to the bucket's presigned URLs.
    policy = {**SECURITY_HEADERS}
    if competition.uploads:
        policy["Content-Security-Policy"] += "; connect-src 'self' " + s3_uploads.url_origin(
            public_endpoint or s3_uploads.endpoint_of(competition.uploads_options)
        )

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        for name, value in policy.items():
            # The board's pages carry their own policy (their scripts and styles by hash).
            if name != "Content-Security-Policy" or not request.url.path.startswith("/board/"):
                response.headers[name] = value
        return response

    def api_team(authorization: Annotated[str | None, Header()] = None) -> Team:
        token = (authorization or "").removeprefix("Bearer ").strip()
        team = team_of_token(engine, token)
        if team is None:
            raise HTTPException(401, "a valid team token is needed (Authorization: Bearer …)")
        return team

    def reader(request: Request, authorization: Annotated[str | None, Header()] = None) -> Team:
        """The team of a Bearer token, else of the browser's session (GET only)."""
        if authorization:
            return api_team(authorization)
        session = session_of(engine, request.cookies.get(COOKIE))
        if session is None:
            raise HTTPException(401, "log in first")
        return session[0]

    def writer(
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
        x_csrf_token: Annotated[str | None, Header()] = None,
    ) -> Team:
        """The team of a Bearer token, else of the browser's session when the request carries
        its CSRF token (`X-CSRF-Token`: the team page's script)."""
        if authorization:
            return api_team(authorization)
        found = session_of(engine, request.cookies.get(COOKIE))
        if found is None:
            raise HTTPException(401, "log in first")
        if not same_secret(x_csrf_token or "", found[1]):
            raise HTTPException(403, "the request's CSRF token does not match the session")
        return found[0]

    def own(team: Team, ident: str) -> dict[str, Any]:
        with engine.connect() as connection:
            row = connection.execute(
                sa.select(submissions).where(
                    submissions.c.id == ident, submissions.c.team_id == team.id
                )
            ).first()
        if row is None:
            raise HTTPException(404, "no such submission of your team")
        return row._asdict()

    def team_rows(team: Team) -> list[dict[str, Any]]:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.select(submissions)
                .where(submissions.c.team_id == team.id)
                .order_by(submissions.c.created_s.desc())
            )
            return [row._asdict() for row in rows]

    async def admitted(
        team: Team, dataset: str, model: str, filename: str, chunks: AsyncIterator[bytes]
    ) -> dict[str, Any]:
        try:
            upload = await intake.receive(
                chunks, competition.path("uploads"), competition.max_upload_bytes
            )
            # Validation and the database in a thread: the event loop keeps reading the
            # other uploads meanwhile.
            return await run_in_threadpool(
                intake.admit,
                current.get(),
                engine,
                team,
                dataset,
                filename,
                upload,
                model or team.name,
            )
        except intake.Refused as refused:
            raise HTTPException(refused.status, refused.message) from None

    @app.post("/api/submissions")
    async def upload(
        request: Request,
        team: Annotated[Team, Depends(api_team)],
        dataset: str,
        filename: str,
        model: str = "",
    ) -> JSONResponse:
        row = await admitted(team, dataset, model, filename, request.stream())
        return JSONResponse(pages.submission_view(row), status_code=201 if row["created"] else 200)

    sweep_uploads = s3_uploads.register(app, current, engine, writer, admitted, public_endpoint)

    @app.get("/api/submissions")
    def listing(team: Annotated[Team, Depends(reader)]) -> list[dict[str, Any]]:
        return [pages.submission_view(row) for row in team_rows(team)]

    @app.get("/api/submissions/{ident}")
    def status(ident: str, team: Annotated[Team, Depends(reader)]) -> dict[str, Any]:
        return pages.submission_view(own(team, ident))

    @app.get("/api/submissions/{ident}/receipt")
    def receipt(ident: str, team: Annotated[Team, Depends(reader)]) -> Response:
        row = own(team, ident)
        if row["state"] != SCORED:
            raise HTTPException(409, f"not scored (state {row['state']})")
        return Response(
            row["receipt"],
            media_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="receipt-{row["id"]}.json"'},
        )

    @app.post("/api/submissions/{ident}/final")
    def mark_final(ident: str, team: Annotated[Team, Depends(api_team)]) -> dict[str, Any]:
        row = own(team, ident)
        if row["state"] != SCORED:
            raise HTTPException(
                409, f"only a scored submission can be final (state {row['state']})"
            )
        if row["dataset"] in closed_datasets(engine):
            raise HTTPException(403, f"{row['dataset']} is closed: the final choice is made")
        with engine.begin() as connection:
            connection.execute(
                submissions.update().where(submissions.c.id == row["id"]).values(final=True)
            )
        return pages.submission_view({**row, "final": True})

    @app.get("/api/board")
    def board_state() -> dict[str, int]:
        with engine.connect() as connection:
            count = connection.execute(
                sa.select(sa.func.count())
                .select_from(submissions)
                .where(submissions.c.state == SCORED)
            ).scalar_one()
        return {"version": board["version"] + int(count), "scored": int(count)}

    @app.get("/api/receipt-key", response_class=PlainTextResponse)
    def receipt_key() -> str:
        return competition.path(f"{KEY}.pub").read_text()

    @app.get("/", response_class=HTMLResponse)
    def home() -> str:
        return pages.home(current.get())

    @app.post("/login")
    def login(token: Annotated[str, Form()]) -> Response:
        team = team_of_token(engine, token)
        if team is None:
            return HTMLResponse(
                pages.message_page("Not logged in", "unknown or revoked token"), status_code=401
            )
        cookie, _ = open_session(engine, team)
        response = RedirectResponse("/team", status_code=303)
        response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", path="/")
        return response

    def session(request: Request) -> tuple[Team, str]:
        found = session_of(engine, request.cookies.get(COOKIE))
        if found is None:
            raise HTTPException(401, "log in first")
        return found

    @app.post("/logout")
    def logout(request: Request, csrf: Annotated[str, Form()]) -> Response:
        team, expected = session(request)
        if not same_secret(csrf, expected):
            raise HTTPException(403, "the form's CSRF token does not match the session")
        close_session(engine, request.cookies[COOKIE])
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/team", response_class=HTMLResponse)
    def team_page(request: Request) -> Response:
        found = session_of(engine, request.cookies.get(COOKIE))
        if found is None:
            return RedirectResponse("/", status_code=303)
        team, csrf = found
        return HTMLResponse(pages.team_page(current.get(), team.name, csrf, team_rows(team)))

    @app.post("/team/upload")
    async def form_upload(request: Request) -> Response:
        team, expected = session(request)
        length = int(request.headers.get("content-length") or -1)
        if length < 0:
            raise HTTPException(411, "an upload needs its Content-Length")
        if length > competition.max_upload_bytes + FORM_OVERHEAD_BYTES:
            raise HTTPException(
                413, f"upload over the limit of {competition.max_upload_bytes} bytes"
            )
        form = await request.form(max_files=1, max_fields=8)
        if not same_secret(str(form.get("csrf") or ""), expected):
            raise HTTPException(403, "the form's CSRF token does not match the session")
        file = form.get("file")
        if file is None or isinstance(file, str):
            raise HTTPException(422, "no file in the form")

        async def chunks() -> AsyncIterator[bytes]:
            while block := await file.read(1 << 20):
                yield block

        try:
            await admitted(
                team,
                str(form.get("dataset") or ""),
                str(form.get("model") or ""),
                file.filename or "",
                chunks(),
            )
        except HTTPException as refused:
            return HTMLResponse(
                pages.team_page(
                    current.get(), team.name, expected, team_rows(team), str(refused.detail)
                ),
                status_code=refused.status_code,
            )
        return RedirectResponse("/team", status_code=303)

    @app.get("/live", response_class=HTMLResponse)
    def live() -> str:
        return pages.live_page(competition)

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in pages.STATIC:
            raise HTTPException(404, "not found")
        media_type, text = pages.STATIC[name]
        return Response(text, media_type=media_type)

    @app.get("/board/{name}")
    def board_page(name: str) -> Response:
        path = competition.path("site") / name
        if not BOARD_PAGE.fullmatch(name) or not path.is_file():
            raise HTTPException(404, "not found")
        return FileResponse(path, media_type="text/html")

    @app.get("/bundles/{name}")
    def bundle(name: str) -> Response:
        path = competition.path("bundles") / name
        if not BUNDLE.fullmatch(name) or not path.is_file():
            raise HTTPException(404, "not found")
        return FileResponse(path, media_type="application/zip", filename=name)

    return app
