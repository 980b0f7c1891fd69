"""The listing of folder sources in parts (`listing_parts`): the roots' listings, cut into the
scan's batches by tasks, are the client's listing (`expand_sources` and `file_stats`: the same
paths in the same order, sizes and modification), on disk and in a real S3 bucket, whatever the
batch size and however many roots each listing task takes; the client walks only the top of
the tree (bounded by LIST_TASKS, not by the archive); hidden files and linked folders
are left out as the client's listing leaves them; sources that overlap or are not folders go
back to the client's listing; a source with no file is bad input as before."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.formats.shared import listing_parts, resumable
from seisctf.formats.shared.input_listing import expand_sources
from seisctf.formats.shared.input_manifest import file_stats

FILES = (
    "2020/XX/AAA/BHZ.D/XX.AAA..BHZ.D.2020.001", "2020/XX/AAA/BHZ.D/XX.AAA..BHZ.D.2020.002",
    "2020/XX/AAA/BHN.D/XX.AAA..BHN.D.2020.001", "2020/XX/AAA/.hidden/kept-out",
    "2020/XX/AB-C/BHZ.D/day.001", "2020/XX/AB/BHZ.D/day.001", "2020/XX/AB/BHZ.D/sub/day.002",
    "2021/XX/AAA/BHZ.D/XX.AAA..BHZ.D.2021.001", "2021/YY/BBB/HHZ.D/one", ".git/config",
    "2021/YY/BBB/HHZ.D/.partial",
)  # fmt: skip


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "sds"
    for number, name in enumerate(FILES):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x" * (10 + number))
    (root / "2022" / "empty").mkdir(parents=True)
    os.symlink(root / "2020", root / "2023")  # a linked folder: not followed
    return root


def _parts(sources: list[str], storage_options: dict | None = None) -> tuple:
    roots = listing_parts.roots_of(sources, storage_options)
    assert roots is not None
    listing = listing_parts.listed(sources, roots, storage_options, quiet=True)
    batches = compute(*listing.batches)
    assert listing.files == sum(len(b.paths) for b in batches)
    return (
        [path for batch in batches for path in batch.paths],
        np.concatenate([batch.sizes for batch in batches]).tolist(),
        np.concatenate([batch.modified for batch in batches]).tolist(),
    )


def _client(sources: list[str], storage_options: dict | None = None) -> tuple:
    stats = file_stats(expand_sources(sources, storage_options), storage_options)
    return list(stats.paths), stats.sizes.tolist(), stats.modified.tolist()


@pytest.mark.parametrize("batches, list_tasks", [(1, 64), (3, 2), (100, 1)])
def test_listing_in_parts_is_the_clients_listing(tree, monkeypatch, batches, list_tasks):
    monkeypatch.setattr(resumable, "SCAN_TASKS", batches)
    monkeypatch.setattr(resumable, "SCAN_TASKS_PER_WORKER", 0)  # `batches` batches exactly
    monkeypatch.setattr(listing_parts, "LIST_TASKS", list_tasks)
    for sources in ([str(tree)], [str(tree / "2021"), str(tree / "2020")]):
        expected = _client(sources)
        assert len(expected[0]) == 8 and not any("/." in p for p in expected[0])
        assert _parts(sources) == expected
    # AB-C sorts before AB/ as paths do ('-' < '/'); AB/BHZ.D holds a file: one unit with sub/
    roots = listing_parts.roots_of([str(tree)], None)
    units = [unit for root in roots for unit in listing_parts.units_below(root, None)]
    assert [Path(u).relative_to(tree).as_posix() for u in units] == [
        "2020/XX/AAA/BHN.D", "2020/XX/AAA/BHZ.D", "2020/XX/AB-C/BHZ.D", "2020/XX/AB/BHZ.D",
        "2021/XX/AAA/BHZ.D", "2021/YY/BBB/HHZ.D",
    ]  # fmt: skip


def test_the_client_walks_only_the_top_of_the_tree(tree, monkeypatch):
    """With LIST_TASKS 2, the client lists the source's own folder and stops at its 3 years:
    the folders below them are the tasks' to walk."""
    listed_here = []
    children = listing_parts._children
    monkeypatch.setattr(listing_parts, "_children", lambda at: listed_here.append(at.url)
                        or children(at))  # fmt: skip
    monkeypatch.setattr(listing_parts, "LIST_TASKS", 2)
    roots = listing_parts.roots_of([str(tree)], None)
    assert [Path(r).relative_to(tree).as_posix() for r in roots] == ["2020", "2021", "2022"]
    assert listed_here == [str(tree)]
    monkeypatch.setattr(listing_parts, "LIST_TASKS", 64)
    listed_here.clear()
    assert len(listing_parts.roots_of([str(tree)], None)) == 7  # every unit, and 2022/empty
    assert len(listed_here) == 1 + 3 + 4 + 5 + 6  # down to the units: every folder of the tree


def test_sources_overlapping_or_not_folders_are_listed_by_the_client(tree):
    assert listing_parts.roots_of([str(tree), str(tree / "2020")], None) is None
    assert listing_parts.roots_of([str(tree / "2020" / "**" / "*.001")], None) is None
    assert listing_parts.roots_of([str(tree / FILES[0])], None) is None


def test_a_folder_with_no_file_is_bad_input_as_before(tree):
    sources = [str(tree / "2021"), str(tree / "2022")]
    roots = listing_parts.roots_of(sources, None)
    with pytest.raises(InvalidInput) as listed:
        listing_parts.listed(sources, roots, None, quiet=True)
    with pytest.raises(InvalidInput) as before:
        expand_sources(sources)
    assert (listed.value.what, str(listed.value)) == (before.value.what, str(before.value))


def test_listing_in_parts_of_a_bucket_is_the_clients(tree, s3_server, s3_bucket, monkeypatch):
    monkeypatch.setattr(resumable, "SCAN_TASKS", 3)
    monkeypatch.setattr(resumable, "SCAN_TASKS_PER_WORKER", 0)  # 3 batches exactly
    fs = s3_server.filesystem()
    for name in FILES:
        if not name.startswith(".") and "/." not in name:
            fs.pipe(f"{s3_bucket}/archive/{name}", (tree / name).read_bytes())
    options = s3_server.storage_options
    sources = [f"{s3_bucket}/archive/2020/", f"{s3_bucket}/archive/2021"]
    expected = _client(sources, options)
    assert len(expected[0]) == 8 and all(expected[2])  # ETags
    assert _parts(sources, options) == expected
