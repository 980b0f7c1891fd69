"""`seisctf tasks` onto an existing public bundle or truth is refused (exit 3, one line naming the
URL and --overwrite) and leaves every byte of the existing bundle as it was; with --overwrite it
writes a new bundle."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from conftest import TINY_LAYOUT_YAML, smooth_wavefield

from seisctf import cli, storage
from seisctf import conventions as cv
from seisctf.location import StoreLocation

SECRET = "test-secret-tasks-overwrite"


def _tree_digest(root: Path) -> dict[str, str]:
    """SHA-256 of every file under `root`, by relative path (with mtimes: nothing rewritten)."""
    return {
        f"{file.relative_to(root)}@{file.stat().st_mtime_ns}": hashlib.sha256(
            file.read_bytes()
        ).hexdigest()
        for file in sorted(root.rglob("*"))
        if file.is_file()
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """(wavefield store, layout file) for a tiny bundle."""
    root = tmp_path_factory.mktemp("tasks")
    store = root / "wavefield.zarr"
    storage.write_dataset(smooth_wavefield(), StoreLocation(store), quiet=True)
    layout = root / "tiny.yaml"
    layout.write_text(TINY_LAYOUT_YAML)
    return store, layout


def _tasks(store: Path, public: Path, truth: Path, layout: Path, scheduler: str, *extra: str):
    argv = ["tasks", str(store), "--public", str(public), "--truth", str(truth)]
    argv += ["--layout", str(layout), "--quiet", "--scheduler", scheduler, *extra]
    return cli.main(argv)


@pytest.fixture(scope="module")
def bundle(inputs, tmp_path_factory, dask_cluster) -> Path:
    """A folder with the bundle (public.zarr, truth.zarr) `seisctf tasks` made of `inputs`."""
    store, layout = inputs
    root = tmp_path_factory.mktemp("bundle")
    public, truth = root / "public.zarr", root / "truth.zarr"
    assert _tasks(store, public, truth, layout, dask_cluster.address) == 0
    return root


@pytest.mark.parametrize("existing", ["truth", "both"])
def test_tasks_refuses_an_existing_bundle_unless_overwrite(
    existing, inputs, bundle, tmp_path, capsys, dask_cluster
):
    store, layout = inputs
    public, truth = tmp_path / "public.zarr", tmp_path / "truth.zarr"
    for made in (public, truth):  # a copy of the existing bundle, this test's to overwrite
        shutil.copytree(bundle / made.name, made)
    attrs = storage.read_attrs(StoreLocation(public))
    if existing == "truth":
        public, truth_arg, kept = tmp_path / "public2.zarr", truth, [truth]
    else:
        truth_arg, kept = truth, [public, truth]
    before = {path: _tree_digest(path) for path in (tmp_path / "public.zarr", truth)}
    capsys.readouterr()

    code = _tasks(store, public, truth_arg, layout, dask_cluster.address)
    captured = capsys.readouterr()
    assert code == 3, captured.err
    assert captured.err.startswith("seisctf: invalid input:"), captured.err
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert str(kept[0]) in captured.err and "--overwrite" in captured.err, captured.err
    assert {path: _tree_digest(path) for path in before} == before
    assert not (tmp_path / "public2.zarr").exists()

    assert _tasks(store, public, truth_arg, layout, dask_cluster.address, "--overwrite") == 0
    assert all(_tree_digest(path) != before[path] for path in kept)
    assert (
        storage.read_attrs(StoreLocation(public))[cv.ATTR_CTF]["pairs"]
        == attrs[cv.ATTR_CTF]["pairs"]
    )


def test_tasks_refuses_a_folder_that_is_no_bundle(inputs, tmp_path, capsys, dask_cluster):
    store, layout = inputs
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    code = _tasks(store, folder, tmp_path / "truth.zarr", layout, dask_cluster.address)
    assert code == 3 and "--overwrite" in capsys.readouterr().err
    assert (folder / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "truth.zarr").exists()
