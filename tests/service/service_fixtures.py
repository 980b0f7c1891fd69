"""Fixtures of the referee service's tests: one tiny CTF bundle and its persistence baseline for
the session, a fresh competition per test (`bucket_competition`: one taking uploads through an
S3 bucket), a database of its own per test on the run's PostgreSQL (`postgres_database`)."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import write_tiny_truth
from running_service import create_competition, seisctf, zip_folder
from servers import CLUSTER_CREDENTIALS

SECRET = "the-organisers-secret-of-the-service-tests"
MAX_UPLOAD_BYTES = 12 * 1024**2  # above the two-part submission's 11.1 MiB
PREFIX = "submissions/in"  # of the uploads in the bucket


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory) -> Path:
    """A folder holding `public.zarr` and `truth.zarr` of the tiny layout."""
    root = tmp_path_factory.mktemp("service-bundle")
    write_tiny_truth(root, SECRET)
    return root


@pytest.fixture(scope="session")
def persistence_zip(tiny_bundle, tmp_path_factory) -> Path:
    """`seisctf baseline persistence` of the tiny bundle, zipped as a participant would."""
    root = tmp_path_factory.mktemp("service-submission")
    seisctf(
        "baseline",
        "persistence",
        "--public",
        str(tiny_bundle / "public.zarr"),
        "--out",
        str(root / "persistence.zarr"),
        "--quiet",
    )
    return zip_folder(root / "persistence.zarr", root / "persistence.zip")


@pytest.fixture
def postgres_database(postgres_url: str) -> Iterator[str]:
    """A new database of the test run's PostgreSQL, for this test alone: its URL."""
    name = f"test_{secrets.token_hex(8)}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield postgres_url.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def competition(tiny_bundle, tmp_path) -> Path:
    return create_competition(tmp_path, tiny_bundle)


def bucket_competition(tiny_bundle: Path, tmp_path: Path, s3_server, s3_bucket: str) -> Path:
    """A competition of the tiny bundle taking uploads through the test's bucket."""
    competition = create_competition(
        tmp_path,
        tiny_bundle,
        max_upload_bytes=MAX_UPLOAD_BYTES,
        options=[
            "--uploads",
            f"{s3_bucket}/{PREFIX}",
            f"--storage-option=endpoint_url={s3_server.endpoint_url}",
        ],
        env=CLUSTER_CREDENTIALS,
    )
    config = json.loads((competition / "competition.json").read_text())
    assert config["uploads"] == f"{s3_bucket}/{PREFIX}"
    assert config["uploads_options"] == {"endpoint_url": s3_server.endpoint_url}
    return competition


def together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """work(0) … work(count - 1), each in a thread of its own, started at once: their results
    (an exception raised is the result)."""
    start = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = work(index)
        except Exception as error:  # noqa: BLE001 - the test looks at it
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    return results
