"""Uploads through the competition's bucket (a real SeaweedFS one): the team asks for an upload,
PUTs its parts to the presigned URLs with no credentials of its own, completes it, and the
submission is scored as a direct upload is; the object is gone afterwards. An upload declared
over the limit creates nothing, more bytes than the limit are refused when completed; parts
completed with a wrong ETag store nothing (and the upload can be completed after); another
team's upload id is 404; uploads open for a day are aborted."""

from __future__ import annotations

import hashlib
import json
import os
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from running_service import (
    Service,
    add_team,
    create_competition,
    log_in,
    seisctf,
    upload,
    wait_finished,
)
from servers import CLUSTER_CREDENTIALS
from service_fixtures import (  # noqa: F401
    MAX_UPLOAD_BYTES,
    PREFIX,
    bucket_competition,
    persistence_zip,
    tiny_bundle,
)

from seisctf.service import competition, s3_uploads, tables
from seisctf.service.s3_uploads import MIN_PART_BYTES, PART_BYTES, part_plan

pytestmark = pytest.mark.slow


@pytest.fixture
def bucket(s3_server, s3_bucket):
    """(the test's bucket name, a filesystem on it holding the tests' keys)."""
    return s3_bucket.removeprefix("s3://"), s3_server.filesystem()


@pytest.fixture
def service(tiny_bundle, tmp_path, s3_server, s3_bucket, dask_cluster):  # noqa: F811
    competition = bucket_competition(tiny_bundle, tmp_path, s3_server, s3_bucket)
    running = Service(competition, scheduler=dask_cluster.address, env=CLUSTER_CREDENTIALS)
    yield running.start()
    running.stop()


def leftovers(bucket: tuple[str, object]) -> tuple[list[str], list[dict]]:
    """(the objects in the bucket, the multipart uploads open in it)."""
    name, fs = bucket
    fs.invalidate_cache()
    objects = fs.find(name)
    open_uploads = fs.call_s3("list_multipart_uploads", Bucket=name).get("Uploads", [])
    return objects, open_uploads


def ask(client: httpx.Client, path: Path, size: int | None = None) -> httpx.Response:
    params = {
        "dataset": "tiny",
        "filename": path.name,
        "model": "persistence",
        "size": path.stat().st_size if size is None else size,
    }
    return client.post("/api/uploads", params=params)


def put_parts(path: Path, asked: dict) -> list[dict]:
    """PUT the file's parts to the presigned URLs, with no credentials: [{part, etag}]."""
    data, step = path.read_bytes(), asked["part_bytes"]
    sent = []
    with httpx.Client(timeout=60) as anonymous:
        for part in asked["parts"]:
            n = part["part"]
            put = anonymous.put(part["url"], content=data[(n - 1) * step : n * step])
            assert put.status_code == 200, put.text
            sent.append({"part": n, "etag": put.headers["etag"]})
    return sent


def test_part_plan():
    assert part_plan(1) == (PART_BYTES, 1)
    assert part_plan(PART_BYTES) == (PART_BYTES, 1)
    assert part_plan(PART_BYTES + 1) == (PART_BYTES, 2)
    assert part_plan(11 * 1024**2) == (PART_BYTES, 2)
    assert part_plan(10, part_bytes=1) == (MIN_PART_BYTES, 1)
    huge = 100 * 1024**3  # over 10,000 parts of PART_BYTES: larger parts
    part, count = part_plan(huge)
    assert count <= 10_000 and part * count >= huge and part * (count - 1) < huge
    with pytest.raises(ValueError):
        part_plan(0)


def test_an_upload_through_the_bucket_is_scored_and_removed(
    service,
    bucket,
    persistence_zip,  # noqa: F811
):
    token = add_team(service.competition, "Bucket team")
    with service.client(token) as client:
        asked = ask(client, persistence_zip)
        assert asked.status_code == 201, asked.text
        body = asked.json()
        assert len(body["parts"]) == 1 and body["part_bytes"] >= MIN_PART_BYTES
        url = body["parts"][0]["url"]
        assert f"/{PREFIX}/incoming/" in url and "X-Amz-Expires=3600" in url
        objects, open_uploads = leftovers(bucket)
        assert objects == [] and len(open_uploads) == 1

        completed = client.post(
            f"/api/uploads/{body['upload']}/complete", json=put_parts(persistence_zip, body)
        )
        assert completed.status_code == 201, completed.text
        view = wait_finished(client, completed.json()["id"])
        assert view["state"] == "scored", view
        assert view["sha256"] == hashlib.sha256(persistence_zip.read_bytes()).hexdigest()
        assert view["model"] == "persistence"
        assert leftovers(bucket) == ([], [])

        # The same bytes sent directly are the same submission; the upload id is used up.
        again = upload(client, persistence_zip)
        assert again.status_code == 200 and again.json()["id"] == view["id"]
        gone = client.post(f"/api/uploads/{body['upload']}/complete", json=[])
        assert gone.status_code == 404


def test_a_submission_of_two_parts(service, bucket, persistence_zip, tmp_path):  # noqa: F811
    """Over 8 MiB: the valid zip behind 11 MiB of leading bytes (zip readers find the
    members from the central directory at the end)."""
    big = tmp_path / "padded.zip"
    big.write_bytes(os.urandom(11 * 1024**2) + persistence_zip.read_bytes())
    with zipfile.ZipFile(big) as archive:
        assert archive.testzip() is None
    token = add_team(service.competition, "Two parts")
    with service.client(token) as client:
        body = ask(client, big).json()
        assert len(body["parts"]) == 2, body
        sent = put_parts(big, body)
        completed = client.post(f"/api/uploads/{body['upload']}/complete", json=sent[::-1])
        assert completed.status_code == 201, completed.text
        view = wait_finished(client, completed.json()["id"])
        assert view["state"] == "scored", view
        assert view["sha256"] == hashlib.sha256(big.read_bytes()).hexdigest()
        assert view["size"] == big.stat().st_size
    assert leftovers(bucket) == ([], [])


def test_presigned_urls_name_the_public_endpoint(
    tiny_bundle,  # noqa: F811
    persistence_zip,  # noqa: F811
    bucket,
    tmp_path,
    s3_server,
    s3_bucket,
    dask_cluster,
):
    """The server reaches the bucket at 127.0.0.1, teams at `localhost` (the same server under
    another host name, as a public address would be): the URLs name that, signed for it."""
    internal = s3_server.endpoint_url
    public = internal.replace("//127.0.0.1:", "//localhost:")
    assert public != internal
    competition = bucket_competition(tiny_bundle, tmp_path, s3_server, s3_bucket)
    running = Service(
        competition,
        scheduler=dask_cluster.address,
        env=CLUSTER_CREDENTIALS,
        options=["--public-endpoint", public + "/"],
    ).start()
    try:
        token = add_team(competition, "Outside")
        with running.client(token) as client:
            body = ask(client, persistence_zip).json()
            (part,) = body["parts"]
            assert part["url"].startswith(f"{public}/{bucket[0]}/{PREFIX}/incoming/"), part
            completed = client.post(
                f"/api/uploads/{body['upload']}/complete", json=put_parts(persistence_zip, body)
            )
            assert completed.status_code == 201, completed.text
            view = wait_finished(client, completed.json()["id"])
            assert view["state"] == "scored", view
        assert leftovers(bucket) == ([], [])
    finally:
        running.stop()
    (tmp_path / "plain").mkdir()
    plain = create_competition(tmp_path / "plain", tiny_bundle)  # no uploads bucket
    for endpoint, why in ((public, "has none"), ("ftp://example.org", "expected http://")):
        refused = seisctf(
            "serve", "--competition", str(plain), "--public-endpoint", endpoint, check=False
        )
        assert refused.returncode == 3 and why in refused.stderr, refused.stderr


def test_credentials_are_never_kept(tiny_bundle, tmp_path, s3_server, s3_bucket):  # noqa: F811
    run = seisctf(
        "referee",
        "create",
        str(tmp_path / "competition"),
        "--name",
        "Keys",
        "--dataset",
        "tiny",
        str(tiny_bundle / "public.zarr"),
        str(tiny_bundle / "truth.zarr"),
        "--uploads",
        f"{s3_bucket}/{PREFIX}",
        *s3_server.cli_options(),
        check=False,
    )
    assert run.returncode != 0 and "AWS_SECRET_ACCESS_KEY" in run.stderr, run.stderr
    assert not (tmp_path / "competition" / "competition.json").exists()


def test_refusals_create_and_store_nothing(service, bucket, persistence_zip):  # noqa: F811
    token = add_team(service.competition, "Refused team")
    other = add_team(service.competition, "Other team")
    with service.client(token) as client, service.client(other) as stranger:
        over = ask(client, persistence_zip, size=MAX_UPLOAD_BYTES + 1)
        assert over.status_code == 413, over.text
        named = client.post(
            "/api/uploads", params={"dataset": "tiny", "filename": "sub.tar", "size": 10}
        )
        assert named.status_code == 415, named.text
        assert leftovers(bucket) == ([], [])

        body = ask(client, persistence_zip).json()
        sent = put_parts(persistence_zip, body)
        route = f"/api/uploads/{body['upload']}"
        for wrong in (stranger.post(f"{route}/complete", json=sent), stranger.delete(route)):
            assert wrong.status_code == 404, wrong.text

        bad = [{"part": 1, "etag": '"00000000000000000000000000000000"'}]
        refused = client.post(f"{route}/complete", json=bad)
        assert refused.status_code == 400, refused.text
        assert client.get("/api/submissions").json() == []
        objects, open_uploads = leftovers(bucket)
        assert objects == [] and len(open_uploads) == 1

        # Still open: completed with the right ETag after.
        completed = client.post(f"{route}/complete", json=sent)
        assert completed.status_code == 201, completed.text
        assert leftovers(bucket) == ([], [])

        # More bytes than declared, over the limit: refused when completed, the object removed.
        body = ask(client, persistence_zip, size=1000).json()
        (part,) = body["parts"]
        put = httpx.put(part["url"], content=os.urandom(MAX_UPLOAD_BYTES + 1), timeout=60)
        sent = [{"part": 1, "etag": put.headers["etag"]}]
        over = client.post(f"/api/uploads/{body['upload']}/complete", json=sent)
        assert over.status_code == 413, over.text
        assert len(client.get("/api/submissions").json()) == 1
        assert leftovers(bucket) == ([], [])

        # Aborted: nothing left in the bucket, the id unknown after.
        body = ask(client, persistence_zip).json()
        put_parts(persistence_zip, body)
        assert client.delete(f"/api/uploads/{body['upload']}").status_code == 204
        assert leftovers(bucket) == ([], [])
        assert client.delete(f"/api/uploads/{body['upload']}").status_code == 404


def test_uploads_open_for_a_day_are_aborted(service, bucket, persistence_zip, monkeypatch):  # noqa: F811
    token = add_team(service.competition, "Slow team")
    with service.client(token) as client:
        old, fresh = (ask(client, persistence_zip).json()["upload"] for _ in range(2))
    engine = tables.engine_of(competition.load(service.competition).db_url)
    with engine.begin() as connection:
        connection.execute(
            tables.uploads.update()
            .where(tables.uploads.c.id == old)
            .values(created_s=time.time() - s3_uploads.STALE_S - 1)
        )
    for name, value in CLUSTER_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    found = competition.load(service.competition)
    where = s3_uploads.Bucket(found.uploads, found.uploads_options)
    assert s3_uploads.abort_stale(where, engine) == 1
    assert len(leftovers(bucket)[1]) == 1
    with service.client(token) as client:
        assert client.delete(f"/api/uploads/{old}").status_code == 404
        assert client.delete(f"/api/uploads/{fresh}").status_code == 204
    assert leftovers(bucket) == ([], [])


def test_an_object_no_upload_names_is_removed_once_old(service, bucket, monkeypatch):  # noqa: F811
    """A server stopped between completing an upload and taking its bytes in leaves an object
    under incoming/ that no upload names: the sweep removes it, and nothing an upload names."""
    name, fs = bucket
    for variable, value in CLUSTER_CREDENTIALS.items():
        monkeypatch.setenv(variable, value)
    found = competition.load(service.competition)
    where = s3_uploads.Bucket(found.uploads, found.uploads_options)
    engine = tables.engine_of(found.db_url)
    orphan, named = where.new_key(), where.new_key()
    for key in (orphan, named):
        fs.pipe(f"{where.bucket}/{key}", b"left behind")
    with engine.begin() as connection:
        connection.execute(
            tables.uploads.insert().values(
                id="named",
                team_id=1,
                dataset="tiny",
                model="m",
                filename="f.zip",
                key=named,
                s3_upload_id="x",
                size=11,
                created_s=time.time(),
            )
        )
    assert s3_uploads.remove_orphans(where, engine) == 0  # both younger than a day
    assert s3_uploads.remove_orphans(where, engine, older_than_s=0) == 1
    fs.invalidate_cache()
    assert fs.exists(f"{where.bucket}/{named}") and not fs.exists(f"{where.bucket}/{orphan}")
    with engine.begin() as connection:
        connection.execute(tables.uploads.delete().where(tables.uploads.c.id == "named"))
    fs.rm(f"{where.bucket}/{named}")


def test_a_browser_session_starts_an_upload_only_with_its_csrf_token(
    service,
    bucket,
    persistence_zip,  # noqa: F811
):
    """The team page's script asks for uploads with the session's cookie and its CSRF token
    (`X-CSRF-Token`); without the token, or with another, nothing is opened. The page's policy
    lets its script reach the bucket's origin and no other."""
    token = add_team(service.competition, "Session team")
    with service.client() as browser:
        csrf = log_in(browser, token)
        policy = browser.get("/team").headers["content-security-policy"]
        assert f"connect-src 'self' {s3_server_origin(service)}" in policy, policy
        query = {"dataset": "tiny", "filename": "p.zip", "size": persistence_zip.stat().st_size}
        for headers in ({}, {"X-CSRF-Token": ""}, {"X-CSRF-Token": csrf[:-1] + "x"}):
            refused = browser.post("/api/uploads", params=query, headers=headers)
            assert refused.status_code == 403, refused.text
        assert leftovers(bucket) == ([], [])
        started = browser.post("/api/uploads", params=query, headers={"X-CSRF-Token": csrf})
        assert started.status_code == 201, started.text
        assert len(leftovers(bucket)[1]) == 1
        aborted = browser.delete(
            f"/api/uploads/{started.json()['upload']}", headers={"X-CSRF-Token": csrf}
        )
        assert aborted.status_code == 204, aborted.text
    assert leftovers(bucket) == ([], [])


def s3_server_origin(service) -> str:
    """The origin of the bucket's endpoint the service's competition names."""
    options = json.loads((service.competition / "competition.json").read_text())["uploads_options"]
    return options["endpoint_url"].rstrip("/")
