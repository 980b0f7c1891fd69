"""A zarr submission with a chunk file deleted is refused by `seisctf score ctf` (exit 3, one line
naming the array and the chunk key, no result written), as a folder, as a .zip of one and at an
S3 URL; the intact submission scores as before, and a baseline of zeros stores every chunk."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import write_tiny_truth
from servers import CLUSTER_CREDENTIALS

from seisctf import cli

SECRET = "test-secret-missing-chunks"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """(truth URL, public URL) of a tiny bundle."""
    root = tmp_path_factory.mktemp("bundle")
    truth_url, _, _ = write_tiny_truth(root, SECRET)
    return truth_url, str(root / "public.zarr")


def _baseline(model: str, public: str, out: Path, scheduler: str) -> Path:
    argv = ["baseline", model, "--public", public, "--out", str(out), "--quiet"]
    assert cli.main([*argv, "--scheduler", scheduler]) == 0
    return out


def _score(truth: str, submission: Path | str, out: Path, scheduler: str, *extra: str) -> int:
    argv = ["score", "ctf", "--truth", truth, "--submission", str(submission), "--quiet"]
    return cli.main([*argv, "--json", str(out), "--scheduler", scheduler, *extra])


def _zip(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                zipped.write(file, file.relative_to(folder).as_posix())
    return archive


def _chunk_files(group: Path, array: str) -> list[Path]:
    return sorted(p for p in (group / array / "c").rglob("*") if p.is_file())


@pytest.mark.parametrize("packed", ["folder", "zip"])
def test_a_deleted_chunk_is_refused_naming_array_and_chunk(
    packed, bundle, tmp_path, capsys, dask_cluster
):
    truth, public = bundle
    intact = _baseline("persistence", public, tmp_path / "persistence.zarr", dask_cluster.address)
    first = tmp_path / "intact.json"
    intact_source = intact if packed == "folder" else _zip(intact, tmp_path / "intact.zip")
    assert _score(truth, intact_source, first, dask_cluster.address) == 0
    scores = json.loads(first.read_text())["scores"]

    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(intact, damaged)
    deleted = _chunk_files(damaged, "X3test")[-1]
    key = deleted.relative_to(damaged).as_posix()
    deleted.unlink()
    source = damaged if packed == "folder" else _zip(damaged, tmp_path / "damaged.zip")
    capsys.readouterr()
    out = tmp_path / "damaged.json"
    code = _score(truth, source, out, dask_cluster.address)
    captured = capsys.readouterr()
    assert code == 3, captured.err
    assert captured.err.startswith("seisctf: invalid input:"), captured.err
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert "X3test" in captured.err and key in captured.err and "missing" in captured.err
    assert not out.exists()

    again = tmp_path / "again.json"
    assert _score(truth, intact_source, again, dask_cluster.address) == 0
    assert json.loads(again.read_text())["scores"] == scores


def test_a_zeros_baseline_stores_every_chunk_and_scores(bundle, tmp_path, dask_cluster):
    truth, public = bundle
    zeros = _baseline("zeros", public, tmp_path / "zeros.zarr", dask_cluster.address)
    assert all(_chunk_files(zeros, f"X{i}test") for i in range(1, 10))
    out = tmp_path / "zeros.json"
    assert _score(truth, zeros, out, dask_cluster.address) == 0
    scores = json.loads(out.read_text())["scores"]
    assert all(scores[f"E{i}"] == 0.0 for i in range(1, 13)), scores


def test_a_deleted_chunk_at_an_s3_url_is_refused(
    bundle, tmp_path, capsys, dask_cluster, s3_server, s3_bucket, monkeypatch
):
    for name, value in CLUSTER_CREDENTIALS.items():  # as the cluster's workers have them
        monkeypatch.setenv(name, value)
    truth, public = bundle
    local = _baseline("persistence", public, tmp_path / "persistence.zarr", dask_cluster.address)
    deleted = _chunk_files(local, "X7test")[0]
    key = deleted.relative_to(local).as_posix()
    deleted.unlink()
    url = f"{s3_bucket}/damaged.zarr"
    s3_server.filesystem().put(str(local), url, recursive=True)
    capsys.readouterr()
    out = tmp_path / "damaged.json"
    code = _score(truth, url, out, dask_cluster.address, *s3_server.endpoint_options())
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1, err
    assert "X7test" in err and key in err and url in err and "Traceback" not in err
    assert not out.exists()
