"""Fixtures of the referee service's tests: one tiny CTF bundle and its persistence baseline for
the session, a fresh competition per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_tiny_truth
from running_service import create_competition, seisctf, zip_folder

SECRET = "the-organisers-secret-of-the-service-tests"


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
def competition(tiny_bundle, tmp_path) -> Path:
    return create_competition(tmp_path, tiny_bundle)
