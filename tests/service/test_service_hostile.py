"""Hostile uploads to a running `seisctf serve` (a real server process on loopback, scoring on a
real Dask cluster): each is refused with a 4xx whose `detail` says why, and nothing of it is
kept: no file in the competition's `uploads/` (no `.upload-*` temporary either), no row in the
job table, nothing charged to the team's quota. Also: a submission with NaN values is accepted
(validation reads metadata only), refused while scoring and refunded; an upload cut short leaves
nothing; tokens are checked and a team never sees another's submission; pages escape what teams
typed; the upload form needs its CSRF token; the quota is the team's."""

from __future__ import annotations

import hashlib
import pickle
import re
import secrets
import shutil
import socket
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
from conftest import noisy_copy
from running_service import (
    Service,
    create_competition,
    log_in,
    seisctf,
    upload,
    wait_finished,
)
from service_fixtures import persistence_zip, tiny_bundle  # noqa: F401
from submission_writers import (
    add_symlink_member,
    npy_bytes,
    write_npz,
    write_raw_zip,
    write_zarr,
    zip_files,
)

from seisctf.location import StoreLocation
from seisctf.scoring.ctf import open_truth
from seisctf.service.tables import engine_of, submissions, teams
from seisctf.service.teams import add_team

pytestmark = pytest.mark.slow

MAX_UPLOAD_BYTES = 3 * 2**20  # the bomb below (~2 MiB) fits, the oversized upload does not
QUOTA = 2
SCRIPT = "<script>alert(1)</script>"
IMAGE = '"><img src=x onerror=alert(1)>'
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"

Arrays = dict[str, np.ndarray]
NewTeam = Callable[..., tuple[int, str]]


# --- the service, its database, the teams ------------------------------------------------------


@pytest.fixture(scope="module")
def competition(tiny_bundle, tmp_path_factory) -> Path:  # noqa: F811
    root = tmp_path_factory.mktemp("hostile")
    return create_competition(root, tiny_bundle, quota=QUOTA, max_upload_bytes=MAX_UPLOAD_BYTES)


@pytest.fixture(scope="module")
def service(competition, dask_cluster) -> Iterator[Service]:
    running = Service(competition, scheduler=dask_cluster.address).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def engine(competition) -> Iterator[sa.Engine]:
    """The service's database, opened beside it (SQLite in WAL mode: both may write)."""
    opened = engine_of(f"sqlite:///{competition}/service.sqlite")
    yield opened
    opened.dispose()


@pytest.fixture(scope="module")
def arrays(tiny_bundle) -> Arrays:  # noqa: F811
    """A valid float32 submission of the tiny bundle (its truth plus noise), as numpy."""
    _, _, truth = open_truth(StoreLocation(str(tiny_bundle / "truth.zarr")))
    return noisy_copy({name: array.compute() for name, array in truth.items()}, 5, 0.2)


@pytest.fixture
def new_team(engine, service) -> NewTeam:
    """Adds a team (a fresh name unless given) to the running service: (its id, its token)."""

    def make(name: str = "", description: str = "") -> tuple[int, str]:
        name = name or f"team-{secrets.token_hex(4)}"
        token = add_team(engine, name, description)
        with engine.connect() as connection:
            ident = connection.execute(sa.select(teams.c.id).where(teams.c.name == name))
            return ident.scalar_one(), token

    return make


# --- what a refusal must leave ------------------------------------------------------------------


def assert_refused(response: httpx.Response, status: int, *fragments: str) -> str:
    """The response is `status` with a JSON `detail` holding every fragment; returns it."""
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    for fragment in fragments:
        assert fragment in detail, (fragment, detail)
    return detail


def rows_of(engine: sa.Engine, team_id: int) -> list[dict]:
    with engine.connect() as connection:
        rows = connection.execute(sa.select(submissions).where(submissions.c.team_id == team_id))
        return [row._asdict() for row in rows]


def assert_nothing_kept(competition: Path, engine: sa.Engine, team_id: int) -> None:
    """No row (so no charge) of the team; no temporary upload; every file in `uploads/` the
    bytes of a submission in the job table."""
    assert rows_of(engine, team_id) == []
    folder = competition / "uploads"
    files = {path.name for path in folder.iterdir()} if folder.exists() else set()
    assert not [name for name in files if name.startswith(".upload-")], files
    with engine.connect() as connection:
        paths = connection.execute(sa.select(submissions.c.stored)).scalars().all()
    stored = {Path(path).name for path in paths}
    assert files <= stored, files - stored


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def variant(original: Path, n: int, folder: Path) -> Path:
    """The same submission with other bytes (a zip comment): a distinct submission."""
    copy = folder / f"variant-{n}.zip"
    shutil.copyfile(original, copy)
    with zipfile.ZipFile(copy, "a") as zipped:
        zipped.comment = f"variant {n}".encode()
    return copy


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


# --- hostile files: (writer of the file under a folder, status, fragments of the detail) -----


def _with(a: Arrays, name: str, array: np.ndarray) -> Arrays:
    return {**a, name: array}


def _without(a: Arrays, name: str) -> Arrays:
    return {n: array for n, array in a.items() if n != name}


def npz_bomb(a: Arrays, root: Path) -> Path:
    """X1test.npy declares 2 GiB of zeros deflated to ~2 MiB."""
    members = [(f"{n}.npy", npy_bytes(array)) for n, array in _without(a, "X1test").items()]
    return write_raw_zip(root / "bomb.npz", members, "X1test.npy")


def zarr_zip_bomb(a: Arrays, root: Path) -> Path:
    """A valid zarr zip plus 200 MiB of zeros deflated (~200 KiB)."""
    group = write_zarr(a, root / "g.zarr")
    return zip_files(group, root / "bomb.zip", {"padding": bytes(200 * 2**20)})


def not_a_zip(suffix: str) -> Callable[[Arrays, Path], Path]:
    def write(a: Arrays, root: Path) -> Path:
        path = root / f"fake{suffix}"
        path.write_bytes(b"PK\x03\x04 and then not a zip at all\n" * 100)
        return path

    return write


def renamed(suffix: str) -> Callable[[Arrays, Path], Path]:
    """A valid .npz under another suffix."""

    def write(a: Arrays, root: Path) -> Path:
        return write_npz(a, root / f"model{suffix}")

    return write


def pickled(a: Arrays, root: Path) -> Path:
    path = root / "model.pkl"
    path.write_bytes(pickle.dumps(a))
    return path


def _objects(shape: tuple[int, ...]) -> np.ndarray:
    objects = np.empty(shape, dtype=object)
    objects[...] = 1.5
    return objects


HOSTILE: dict[str, tuple[Callable[[Arrays, Path], Path], int, list[str]]] = {
    "npz zip bomb": (npz_bomb, 422, ["X1test.npy", "zip bomb", "before decompressing"]),
    "zarr zip bomb": (zarr_zip_bomb, 422, ["padding", "zip bomb"]),
    "zip slip": (
        lambda a, root: write_npz(
            _without(a, "X2test"), root / "s.npz", {"../../evil.npy": npy_bytes(a["X2test"])}
        ),
        422,
        ["../../evil.npy", "zip-slip"],
    ),
    "absolute member": (
        lambda a, root: zip_files(
            write_zarr(a, root / "g.zarr"), root / "s.zip", {"/etc/cron.d/evil": b"* * * * *"}
        ),
        422,
        ["/etc/cron.d/evil", "absolute"],
    ),
    "symlink member": (
        lambda a, root: add_symlink_member(
            write_npz(_without(a, "X5test"), root / "s.npz"), "X5test.npy"
        ),
        422,
        ["X5test.npy", "symlink"],
    ),
    "2000 members": (
        lambda a, root: write_npz(a, root / "s.npz", {f"pad{i}.npy": b"" for i in range(2000)}),
        422,
        ["2009 members", "limit of 1000"],
    ),
    "not a zip, named .zip": (not_a_zip(".zip"), 422, ["not a readable zip"]),
    "not a zip, named .npz": (not_a_zip(".npz"), 422, ["not an .npz archive"]),
    ".exe": (renamed(".exe"), 415, ["expected a .zip", "model.exe"]),
    ".pkl": (pickled, 415, ["expected a .zip", "model.pkl"]),
    "wrong shape": (
        lambda a, root: write_npz(_with(a, "X5test", a["X5test"][:-1]), root / "s.npz"),
        422,
        ["X5test", "shape (99, 48)", "expected (100, 48)"],
    ),
    "transposed": (
        lambda a, root: write_npz(_with(a, "X8test", a["X8test"].T.copy()), root / "s.npz"),
        422,
        ["X8test", "shape (48, 100)"],
    ),
    "integer dtype": (
        lambda a, root: write_npz(_with(a, "X2test", a["X2test"].astype(np.int64)), root / "s.npz"),
        422,
        ["X2test", "int64", "floating point"],
    ),
    "object dtype (pickled)": (
        lambda a, root: write_npz(_with(a, "X4test", _objects(a["X4test"].shape)), root / "s.npz"),
        422,
        ["X4test", "object arrays"],
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_file_is_refused_and_nothing_kept(
    case, service, competition, engine, new_team, arrays, tmp_path
):
    writer, status, fragments = HOSTILE[case]
    path = writer(arrays, tmp_path)
    assert path.stat().st_size <= MAX_UPLOAD_BYTES
    team_id, token = new_team()
    with service.client(token) as client:
        detail = assert_refused(upload(client, path), status, *fragments)
    assert str(competition) not in detail and "uploads" not in detail
    assert_nothing_kept(competition, engine, team_id)


def test_an_oversized_upload_is_refused_with_413(service, competition, engine, new_team, tmp_path):
    path = tmp_path / "big.zip"
    path.write_bytes(bytes(MAX_UPLOAD_BYTES + 1))
    team_id, token = new_team()
    with service.client(token) as client:
        assert_refused(upload(client, path), 413, "over the limit", str(MAX_UPLOAD_BYTES))
    assert_nothing_kept(competition, engine, team_id)


def test_refusals_charge_nothing(
    service,
    competition,
    engine,
    new_team,
    arrays,
    persistence_zip,  # noqa: F811
    tmp_path,
):
    """More refusals than the quota allows submissions, then a valid upload: accepted."""
    team_id, token = new_team()
    with service.client(token) as client:
        for n, (writer, status, _) in enumerate(HOSTILE.values()):
            folder = tmp_path / str(n)
            folder.mkdir()
            assert upload(client, writer(arrays, folder)).status_code == status
        assert len(HOSTILE) > QUOTA
        assert_nothing_kept(competition, engine, team_id)
        sent = upload(client, persistence_zip)
        assert sent.status_code == 201, sent.text
        assert sent.json()["state"] == "queued"


# --- refused while scoring ----------------------------------------------------------------------


def test_nan_values_are_refused_while_scoring_and_refunded(
    service,
    competition,
    engine,
    new_team,
    arrays,
    persistence_zip,  # noqa: F811
    tmp_path,
):
    """Accepted from its metadata, refused by the scorer naming the array, its bytes removed,
    its charge refunded: the team can then use its whole quota."""
    holed = arrays["X3test"].copy()
    holed[17, 5] = np.nan
    path = write_npz(_with(arrays, "X3test", holed), tmp_path / "nan.npz")
    team_id, token = new_team()
    with service.client(token) as client:
        sent = upload(client, path)
        assert sent.status_code == 201, sent.text
        view = wait_finished(client, sent.json()["id"])
        assert view["state"] == "refused", view
        assert "X3test" in view["message"] and "NaN" in view["message"], view
        assert str(competition) not in view["message"], view
        (row,) = rows_of(engine, team_id)
        assert row["charged_s"] is None and not Path(row["stored"]).exists()
        for n, good in enumerate([persistence_zip, variant(persistence_zip, 1, tmp_path)]):
            accepted = upload(client, good)
            assert accepted.status_code == 201, (n, accepted.text)


# --- uploads cut short --------------------------------------------------------------------------


def test_a_truncated_upload_leaves_nothing(service, competition, engine, new_team):
    """The body stops short of its Content-Length and the connection closes: the partial file
    (seen while it arrives) is removed, no row is written, and the service still answers."""
    team_id, token = new_team()
    uploads = competition / "uploads"

    def partial() -> list[Path]:
        return list(uploads.glob(".upload-*")) if uploads.exists() else []

    head = (
        "POST /api/submissions?dataset=tiny&filename=cut.zip HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Content-Type: application/octet-stream\r\n"
        f"Content-Length: {MAX_UPLOAD_BYTES}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as connection:
        connection.sendall(head.encode() + b"PK\x03\x04" + bytes(2**16))
        wait_for(lambda: bool(partial()))
    wait_for(lambda: not partial())
    assert_nothing_kept(competition, engine, team_id)
    assert httpx.get(service.url + "/api/board", timeout=10).status_code == 200


# --- tokens and other teams' submissions --------------------------------------------------------


@pytest.mark.parametrize(
    "authorization", [None, "", "Bearer", "Bearer not-a-token", "Basic dGVhbTpwYXNz"]
)
def test_an_upload_without_a_valid_token_is_401(
    authorization,
    service,
    competition,
    engine,
    persistence_zip,  # noqa: F811
):
    headers = {} if authorization is None else {"Authorization": authorization}
    with httpx.Client(base_url=service.url, headers=headers, timeout=60) as client:
        assert_refused(upload(client, persistence_zip), 401, "valid team token")
        assert_refused(client.get("/api/submissions"), 401)
    assert_nothing_kept(competition, engine, -1)  # no team: only the files are checked


def test_a_revoked_token_is_401(
    service,
    competition,
    engine,
    new_team,
    persistence_zip,  # noqa: F811
):
    team_id, token = new_team()
    with engine.begin() as connection:
        connection.execute(teams.update().where(teams.c.id == team_id).values(revoked=True))
    with service.client(token) as client:
        assert_refused(upload(client, persistence_zip), 401, "valid team token")
        assert_refused(client.get("/api/submissions"), 401)
    assert service.client().post("/login", data={"token": token}).status_code == 401
    assert_nothing_kept(competition, engine, team_id)


def test_a_team_cannot_reach_another_teams_submission(
    service,
    engine,
    new_team,
    persistence_zip,  # noqa: F811
):
    _, token_a = new_team()
    b_name = f"secret-team-{secrets.token_hex(4)}"
    _, token_b = new_team(b_name)
    with service.client(token_b) as b:
        theirs = upload(b, persistence_zip, model="secret-model")
        assert theirs.status_code == 201, theirs.text
    ident, sha = theirs.json()["id"], theirs.json()["sha256"]
    with service.client(token_a) as a:
        for response in (
            a.get(f"/api/submissions/{ident}"),
            a.get(f"/api/submissions/{ident}/receipt"),
            a.post(f"/api/submissions/{ident}/final"),
        ):
            assert_refused(response, 404, "no such submission of your team")
            for secret in (sha, b_name, "secret-model", "persistence.zip"):
                assert secret not in response.text
        assert a.get("/api/submissions").json() == []
    with engine.connect() as connection:
        final = connection.execute(sa.select(submissions.c.final).where(submissions.c.id == ident))
        assert final.scalar_one() is False


# --- pages and forms ----------------------------------------------------------------------------


def assert_escaped(html: str) -> None:
    assert "<script>alert" not in html and "<img" not in html, html


def test_pages_escape_what_teams_typed_and_the_form_needs_its_csrf_token(
    service,
    competition,
    engine,
    new_team,
    persistence_zip,  # noqa: F811
):
    team_id, token = new_team(SCRIPT, IMAGE)
    with service.client() as browser:
        csrf = log_in(browser, token)
        page = browser.get("/team").text
        assert ESCAPED_SCRIPT in page
        assert_escaped(page)

        def send(fields: dict[str, str], filename: str = "sub.zip") -> httpx.Response:
            return browser.post(
                "/team/upload",
                data={"dataset": "tiny", "model": IMAGE, **fields},
                files={"file": (filename, persistence_zip.read_bytes())},
            )

        for fields in ({}, {"csrf": ""}, {"csrf": "x" * len(csrf)}, {"csrf": csrf[:-1]}):
            assert_refused(send(fields), 403, "CSRF")
            assert_nothing_kept(competition, engine, team_id)
        # A refusal shown on the page escapes the file's name too.
        shown = send({"csrf": csrf}, filename="<script>alert(2)</script>.exe")
        assert shown.status_code == 415 and "expected a .zip" in shown.text
        assert_escaped(shown.text)
        assert_nothing_kept(competition, engine, team_id)

        accepted = send({"csrf": csrf})
        assert accepted.status_code == 303 and accepted.headers["location"] == "/team"
        (row,) = rows_of(engine, team_id)
        assert row["model"] == IMAGE
        assert_escaped(browser.get("/team").text)
    with service.client(token) as client:
        assert wait_finished(client, row["id"])["state"] == "scored"

    anyone = service.client()
    board = competition / "site"

    def served() -> str:
        return "".join(anyone.get(f"/board/{p.name}").text for p in sorted(board.glob("*.html")))

    wait_for(lambda: ESCAPED_SCRIPT in served(), 60)  # the team's row, once rendered again
    assert "&lt;img src=x" in served()  # its model's name
    assert_escaped(served())
    for path in ("/", "/live"):
        assert_escaped(anyone.get(path).text)


def test_the_team_page_links_the_receipt_of_each_scored_submission(
    service,
    new_team,
    persistence_zip,  # noqa: F811
    tmp_path,
):
    _, token = new_team()
    with service.client(token) as client:
        ident = upload(client, persistence_zip).json()["id"]
        assert wait_finished(client, ident)["state"] == "scored"
        (tmp_path / "key.pem").write_bytes(client.get("/api/receipt-key").content)
    with service.client() as browser:
        log_in(browser, token)
        page = browser.get("/team").text
        links = re.findall(r'<a class="receipt" href="([^"]+)" download="([^"]+)">', page)
        assert links == [(f"/api/submissions/{ident}/receipt", f"receipt-{ident}.json")]
        assert browser.get("/api/submissions").json()[0]["receipt"] == links[0][0]
        got = browser.get(links[0][0])  # with the session's cookie alone
        assert got.status_code == 200, got.text
        assert got.headers["content-disposition"] == f'attachment; filename="{links[0][1]}"'
    receipt = tmp_path / links[0][1]
    receipt.write_bytes(got.content)
    checked = seisctf("referee", "verify", str(receipt), "--public-key", str(tmp_path / "key.pem"))
    assert "receipt verified" in checked.stdout and ident in checked.stdout
    _, other = new_team()
    with service.client() as browser:  # another team's session: no link, and the link is 404
        log_in(browser, other)
        assert 'class="receipt"' not in browser.get("/team").text
        assert browser.get(links[0][0]).status_code == 404


# --- the quota --------------------------------------------------------------------------------


def test_the_quota_is_the_teams(
    service,
    competition,
    engine,
    new_team,
    persistence_zip,  # noqa: F811
    tmp_path,
):
    """A third distinct submission is refused (429) with nothing kept, the same bytes again are
    still the same submission, another team still submits; the refused team sending bytes the
    other team sent does not touch the other's stored file. (A team has one token: two tokens of
    one team are not a thing the service has.)"""
    team_id, token = new_team()
    first, second, third = (variant(persistence_zip, n, tmp_path) for n in (11, 12, 13))
    with service.client(token) as client:
        kept = [upload(client, path) for path in (first, second)]
        assert [response.status_code for response in kept] == [201, 201]
        assert_refused(upload(client, third), 429, "quota of 2")
        assert upload(client, first).json()["id"] == kept[0].json()["id"]
        ours = rows_of(engine, team_id)
        assert sorted(row["sha256"] for row in ours) == sorted(map(digest, (first, second)))

        other_id, other_token = new_team()
        with service.client(other_token) as other:
            theirs = upload(other, persistence_zip)
            assert theirs.status_code == 201, theirs.text
            (their_row,) = rows_of(engine, other_id)
            assert_refused(upload(client, persistence_zip), 429, "quota")
            assert Path(their_row["stored"]).is_file()
            assert wait_finished(other, their_row["id"])["state"] == "scored"
    assert sorted(row["sha256"] for row in rows_of(engine, team_id)) == sorted(
        map(digest, (first, second))
    )
