"""The inputs table written piece by piece where the partitions are (`table_pieces`,
`waveform_table`): for any split of the files into partitions (each scanned alone, so its
station and channel lists are its own), any chunk length and one or two workers, the table
reads back as the scan of every file (`scan_files`), with the files' modifications and
`samples_stored`, and its arrays hold the same bytes as the table of one partition."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from distributed import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_input_manifest import TSINDEX, assert_same_scan, files  # noqa: F401 (files: a fixture)

from seisctf.formats.obspy_archive import waveform_table
from seisctf.formats.obspy_archive.scan_table import scan_files
from seisctf.formats.shared import input_manifest, table_pieces
from seisctf.formats.shared.partition_tasks import Each, in_process, on_cluster
from seisctf.location import StoreLocation

assert TSINDEX.is_dir()  # (obspy's files the fixture copies)


def write(root: Path, paths: list[str], cuts: list[int], stored: np.ndarray, one_stats: bool,
          each: Each) -> StoreLocation:  # fmt: skip
    """The table of `paths` split at `cuts` (each partition scanned alone), in a new store."""
    store = StoreLocation(str(root))
    zarr.open_group(store.url, mode="w", zarr_format=3)
    bounds = list(zip([0, *cuts], [*cuts, len(paths)], strict=True))
    parts = [scan_files(paths[a:b]) for a, b in bounds]
    stats = (
        [input_manifest.file_stats(paths)]
        if one_stats
        else [input_manifest.file_stats(paths[a:b]) for a, b in bounds]
    )
    waveform_table.write_table(store, input_manifest.GROUP, parts, stats, each,
                               stored=[stored[a:b] for a, b in bounds])  # fmt: skip
    return store


def objects(store: StoreLocation) -> dict[str, bytes]:
    table = Path(store.url) / input_manifest.GROUP
    return {str(p.relative_to(table)): p.read_bytes() for p in table.rglob("*") if p.is_file()}


def check(store: StoreLocation, paths: list[str], stored: np.ndarray) -> None:
    recorded = input_manifest.read_recorded(store)
    assert recorded is not None
    assert_same_scan(recorded.scans, scan_files(paths))
    assert recorded.modified.tolist() == input_manifest.file_stats(paths).modified.tolist()
    np.testing.assert_array_equal(recorded.samples_stored, stored)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_split_and_chunk_length_writes_the_table_of_the_whole_scan(files, data, monkeypatch):  # noqa: F811
    rows = data.draw(st.sampled_from([1, 2, 3, 7, input_manifest.ROWS_PER_CHUNK]), "rows")
    monkeypatch.setattr(table_pieces, "ROWS_PER_CHUNK", rows)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(files) - 1), max_size=6), "cuts"))
    stored = np.array(data.draw(st.lists(st.booleans(), min_size=len(files),
                                         max_size=len(files))), dtype=bool)  # fmt: skip
    one_stats = data.draw(st.booleans(), "one stats for every file")
    with tempfile.TemporaryDirectory() as folder:
        split = write(Path(folder) / "split.zarr", files, cuts, stored, one_stats, in_process)
        whole = write(Path(folder) / "whole.zarr", files, [], stored, False, in_process)
        check(split, files, stored)
        assert objects(split) == objects(whole)


def test_two_workers_write_the_bytes_of_one_partition(files, tmp_path, dask_cluster, monkeypatch):  # noqa: F811
    """On a real cluster, four partitions kept on two workers and chunks of 3 rows."""
    monkeypatch.setattr(table_pieces, "ROWS_PER_CHUNK", 3)
    stored = np.arange(len(files)) % 3 != 0
    with Client(dask_cluster.address, set_as_default=True):
        each = on_cluster(quiet=True)
        split = write(tmp_path / "split.zarr", files, [2, 5, 9], stored, False, each)
    whole = write(tmp_path / "whole.zarr", files, [], stored, True, in_process)
    check(split, files, stored)
    assert objects(split) == objects(whole)
    with pytest.raises(ValueError, match="different files"):  # stats of other files: refused
        write(tmp_path / "wrong.zarr", files, [], stored, True, _swapped_stats)


def _swapped_stats(function, *columns, keep=False, label=""):
    """`in_process`, with each partition's stats those of the files in reverse order."""
    columns = list(columns)
    if len(columns) > 1 and columns[1] and isinstance(columns[1][0], input_manifest.InputStats):
        stats = columns[1][0]
        columns[1] = [input_manifest.InputStats(stats.paths[::-1], stats.sizes, stats.modified)]
    return in_process(function, *columns, keep=keep, label=label)


def test_a_column_rewritten_alone_keeps_the_rest_and_must_fit(files, tmp_path):  # noqa: F811
    """`into_existing`: pieces of `samples_stored` alone rewrite that column of the finished
    table (the scan and modifications stay); pieces of other lengths are refused."""
    stored = np.ones(len(files), dtype=bool)
    store = write(tmp_path / "table.zarr", files, [3], stored, False, in_process)
    flipped = np.arange(len(files)) % 2 == 0
    pieces = [table_pieces.Piece({"samples_stored": (input_manifest.FILE, flipped[a:b])})
              for a, b in ((0, 3), (3, len(files)))]  # fmt: skip
    table_pieces.write_pieces(store, input_manifest.GROUP, pieces, in_process, {},
                              into_existing=True)  # fmt: skip
    check(store, files, flipped)
    with pytest.raises(ValueError, match="not these pieces"):
        table_pieces.write_pieces(store, input_manifest.GROUP, pieces[:1], in_process, {},
                                  into_existing=True)  # fmt: skip
