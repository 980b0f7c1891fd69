"""The referee service end to end over HTTP: a team uploads the tiny bundle's persistence
baseline with its token; the submission is scored by the referee on a real Dask cluster, its
released view equals the plain `seisctf score ctf` command's on the same files, it is recorded
once, its receipt checks offline (and an altered one does not), the same bytes sent again are the
same submission, and the public pages escape what teams typed."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import subprocess
import sys

import httpx
import pytest
from running_service import Service, add_team, seisctf, upload, wait_finished
from service_fixtures import competition, persistence_zip, tiny_bundle  # noqa: F401

from seisctf import conventions as cv
from seisctf.scoring import leaderboard
from seisctf.scoring.ladder import to_step
from seisctf.scoring.release import public_score

pytestmark = pytest.mark.slow


@pytest.fixture
def service(competition, dask_cluster):  # noqa: F811
    running = Service(competition, scheduler=dask_cluster.address).start()
    yield running
    running.stop()


def test_a_team_uploads_and_sees_its_released_score(
    service,
    competition,  # noqa: F811
    tiny_bundle,  # noqa: F811
    persistence_zip,  # noqa: F811
    tmp_path,
):
    token = add_team(competition, "Team <b>One</b>")
    with service.client(token) as client:
        sent = upload(client, persistence_zip)
        assert sent.status_code == 201, sent.text
        view = wait_finished(client, sent.json()["id"])
        assert view["state"] == "scored", view
        assert view["sha256"] == hashlib.sha256(persistence_zip.read_bytes()).hexdigest()

        # The plain command on the same files, as the organisers would run it.
        out = tmp_path / "plain.json"
        seisctf(
            "score",
            "ctf",
            "--truth",
            str(tiny_bundle / "truth.zarr"),
            "--submission",
            str(persistence_zip),
            "--name",
            "persistence",
            "--json",
            str(out),
            "--quiet",
        )
        plain = json.loads(out.read_text())
        released = view["released"]
        assert released["public_score"] == to_step(public_score(plain))
        assert released["participant"] == "Team <b>One</b>"
        assert set(released) <= {
            "name",
            "dataset",
            "convention",
            "truth_sha256_verified",
            "participant",
            "public_score",
            "improved",
            "release",
        }

        # Recorded once, in full, with the scores of the plain command.
        rows = leaderboard.entries(str(competition / "leaderboard.sqlite"))
        assert len(rows) == 1
        assert rows[0]["metadata"]["submission_sha256"] == view["sha256"]
        for name in cv.SCORE_NAMES:
            assert rows[0]["scores"][name] == pytest.approx(plain["scores"][name], abs=1e-12)

        # The same bytes again: the same submission, nothing charged or scored again.
        again = upload(client, persistence_zip)
        assert again.status_code == 200 and again.json()["id"] == view["id"]
        assert len(client.get("/api/submissions").json()) == 1

        # The receipt checks offline against the competition's published key.
        receipt, key = tmp_path / "receipt.json", tmp_path / "key.pem"
        receipt.write_bytes(client.get(f"/api/submissions/{view['id']}/receipt").content)
        key.write_bytes(client.get("/api/receipt-key").content)
        checked = seisctf("referee", "verify", str(receipt), "--public-key", str(key))
        payload = json.loads(checked.stdout.rsplit("}", 1)[0] + "}")
        assert payload["submission_sha256"] == view["sha256"]
        assert payload["truth_commitment"] == rows[0]["truth_commitment"]
        assert payload["released"] == released
        altered = json.loads(receipt.read_text())
        altered["payload"]["released"]["public_score"] += 1
        receipt.write_text(json.dumps(altered))
        refused = seisctf("referee", "verify", str(receipt), "--public-key", str(key), check=False)
        assert refused.returncode == 3 and "signature does not match" in refused.stderr

    # Pages anyone can read escape the team's name; the board shows the released score.
    board = service.client().get("/board/index.html").text
    assert "<b>One</b>" not in board
    page = next(p for p in (competition / "site").glob("dataset-*.html"))
    shown = service.client().get(f"/board/{page.name}").text
    assert "Team &lt;b&gt;One&lt;/b&gt;" in shown and "<b>One</b>" not in shown


def test_the_bundle_is_served_by_its_id_and_nothing_else_is(
    service,
    competition,  # noqa: F811
    tiny_bundle,  # noqa: F811
):
    config = json.loads((competition / "competition.json").read_text())
    ident = config["datasets"]["tiny"]["bundle_id"]
    anyone = service.client()
    got = anyone.get(f"/bundles/{ident}.zip")
    assert got.status_code == 200
    assert got.content == (competition / "bundles" / f"{ident}.zip").read_bytes()
    truth_bytes = (tiny_bundle / "truth.zarr" / "X1test" / "zarr.json").read_bytes()
    for path in (
        f"/bundles/{'0' * 64}.zip",
        "/bundles/..%2Fcompetition.json",
        "/board/..%2F..%2Fcompetition.json",
        "/board/%2e%2e/keys/receipts.ed25519",
        "/static/..%2Fkeys%2Freceipts.ed25519",
        f"/bundles/{tiny_bundle}/truth.zarr/X1test/zarr.json",
        "/truth.zarr/X1test/zarr.json",
        "/keys/receipts.ed25519",
        "/competition.json",
        "/service.sqlite",
    ):
        response = anyone.get(path)
        assert response.status_code == 404, path
        assert truth_bytes not in response.content and b"PRIVATE KEY" not in response.content


def test_the_command_line_says_what_is_wrong(tmp_path):
    missing = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", "serve", "--competition", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 3 and "not a competition folder" in missing.stderr
    bad = tmp_path / "receipt.json"
    bad.write_text('{"payload": {}}')
    refused = seisctf("referee", "verify", str(bad), check=False)
    assert refused.returncode == 3 and "not a seisctf receipt" in refused.stderr


def test_serve_demo_makes_the_demo_competition_once(
    tiny_bundle,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
    tmp_path,
):
    workdir = tmp_path / "seisctf-demo"
    (workdir / "public").mkdir(parents=True)
    (workdir / "private").mkdir()
    shutil.copytree(tiny_bundle / "public.zarr", workdir / "public" / "bundle-tiny.zarr")
    shutil.copytree(tiny_bundle / "truth.zarr", workdir / "private" / "truth-tiny.zarr")
    first = Service(workdir, scheduler=dask_cluster.address, demo=True).start()
    try:
        token = re.search(r"team demo: token (\S+)", first.log()).group(1)
        with first.client(token) as client:
            view = wait_finished(client, upload(client, persistence_zip).json()["id"])
        assert view["state"] == "scored"
    finally:
        first.stop()
    again = Service(workdir, scheduler=dask_cluster.address, demo=True).start()
    try:
        assert "token" not in again.log()
        with again.client(token) as client:  # the same competition, the same team
            assert [v["state"] for v in client.get("/api/submissions").json()] == ["scored"]
    finally:
        again.stop()


def test_the_same_bytes_sent_at_once_are_one_submission(
    service,
    competition,  # noqa: F811
    persistence_zip,  # noqa: F811
):
    token = add_team(competition, "eager")

    async def send_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=service.url, timeout=120) as client:
            return await asyncio.gather(
                *[
                    client.post(
                        "/api/submissions",
                        params={"dataset": "tiny", "filename": "p.zip", "model": "p"},
                        headers={"Authorization": f"Bearer {token}"},
                        content=persistence_zip.read_bytes(),
                    )
                    for _ in range(8)
                ]
            )

    responses = asyncio.run(send_all())
    assert sorted(r.status_code for r in responses) == [200] * 7 + [201], [
        r.text for r in responses
    ]
    assert len({r.json()["id"] for r in responses}) == 1
    stored = list((competition / "uploads").iterdir())
    assert len(stored) == 1 and not stored[0].name.startswith(".upload-")


def test_a_mistyped_database_or_a_second_team_of_a_name_is_refused_in_one_line(
    competition,  # noqa: F811
):
    add_team(competition, "twice")
    again = seisctf("referee", "add-team", str(competition), "twice", check=False)
    assert again.returncode == 3 and "exists already" in again.stderr
    for url, why in (
        ("postgresl://user@host/db", "expected postgresql://"),
        ("postgresql://postgres@127.0.0.1:1/none", "cannot be opened"),
    ):
        run = seisctf("referee", "add-team", str(competition), "other", "--db", url, check=False)
        assert run.returncode == 3 and why in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
