"""A DAS store's record of its inputs joined with a run's listing in ranges of rows on the
workers (`record_parts` with `das_inputs.DAS`): an `--append` with any number of rows a range
writes the store a one-shot ingest of every file writes (data, coverage, gaps and overlaps,
inputs table), scans the new files and the recorded ones whose modification changed (those
must hash as recorded), and a re-run reads no file; a recorded file gone or changed is refused
by name; on a real cluster the ranges, joins and partitions stay on the workers and what the
client receives is as large for 60 recorded files as for 12."""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import dask
import pytest
from distributed import Client, futures_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_das_ingest import BLOCK, _digest, write_series
from test_record_parts import scanned, touch  # noqa: F401 (scanned: a fixture)

from seisctf.errors import InvalidInput
from seisctf.formats.das import das_files, das_inputs
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.das.das_scan import scan_das_files
from seisctf.formats.shared import record_parts
from seisctf.formats.shared.partition_tasks import on_cluster
from seisctf.location import StoreLocation

# (first grid sample, samples, offset ns) of each file, in path and time order: contiguous
# files, a gap of 20 samples before the fourth, an overlap of 20 samples at the fifth.
LAYOUT = tuple((first, 100, 0) for first in (0, 100, 200, 320, 400, 500, 600, 700, 800))


def write_files(folder: Path, count: int = len(LAYOUT), seed: int = 4) -> list[Path]:
    layout = LAYOUT if count == len(LAYOUT) else tuple((i * 100, 100, 0) for i in range(count))
    files = write_series(folder, "PRODML", seed=seed, layout=layout)
    return [path.rename(folder / f"f{i:03d}.h5") for i, path in enumerate(files)]


def ingest(paths: list[Path], store: Path, append: bool = False) -> das_files.DasIngestReport:
    return ingest_das([str(p) for p in paths], StoreLocation(store), block_samples=BLOCK,
                      append=append, quiet=True)  # fmt: skip


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, list[Path], Path]:
    """(root, the files, a one-shot ingest of them all)."""
    root = tmp_path_factory.mktemp("das-record-parts")
    files = write_files(root / "files")
    whole = root / "whole.zarr"
    ingest(files, whole)
    return root, files, whole


def assert_same_store(store: Path, whole: Path, written: bool = True) -> None:
    """Every object but the root metadata and the inputs tables, and the tables' records; if
    the table was `written` by the last run, the `modified` of each file is its mtime now (the
    tests touch files of the one-shot's)."""
    assert _digest(store, (store / "zarr.json",), tables=False) == _digest(
        whole, (whole / "zarr.json",), tables=False
    )
    recorded = das_inputs.read_recorded(StoreLocation(store))
    expected = das_inputs.read_recorded(StoreLocation(whole))
    assert recorded is not None and expected is not None
    assert (recorded.scans, recorded.placed) == (expected.scans, expected.placed)
    if written:
        assert recorded.modified == tuple(str(os.stat(p).st_mtime_ns) for p in recorded.paths())


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.sampled_from([1, 2, 3, 64]), old_count=st.integers(1, len(LAYOUT) - 1))
def test_an_append_over_any_ranges_writes_the_one_shot_store(
    archive,
    monkeypatch,
    scanned,  # noqa: F811 (the fixture)
    rows,
    old_count,
):
    root, files, whole = archive
    monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", rows)
    old, new = files[:old_count], files[old_count:]
    with tempfile.TemporaryDirectory(dir=root) as folder:
        store = Path(folder) / "appended.zarr"
        ingest(old, store)
        touch(old[0])  # a recorded file whose mtime changed is scanned again, checked
        scanned.clear()
        report = ingest(new, store, append=True)
        assert not report.up_to_date
        assert sorted(scanned) == sorted(str(p) for p in [old[0], *new])
        assert_same_store(store, whole)
        scanned.clear()
        again = ingest(files, store)
        assert again.up_to_date and scanned == []
        assert ingest(new[-1:], store, append=True).up_to_date and scanned == []


def test_a_rerun_over_ranges_reads_only_a_file_whose_mtime_changed(
    archive,
    monkeypatch,
    scanned,  # noqa: F811 (the fixture)
):
    """A re-run over 2-row ranges of a store whose file's mtime changed (the same bytes): that
    file alone is scanned, and the store is up to date."""
    root, files, whole = archive
    monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", 2)
    with tempfile.TemporaryDirectory(dir=root) as folder:
        store = Path(folder) / "again.zarr"
        ingest(files, store)
        touch(files[4])
        scanned.clear()
        assert ingest(files, store).up_to_date  # (the table is left as it was)
        assert scanned == [str(files[4])]
        assert_same_store(store, whole, written=False)


def test_a_recorded_file_gone_or_changed_is_refused_by_name(tmp_path, monkeypatch):
    files = write_files(tmp_path / "files")
    extra = write_files(tmp_path / "later", count=1, seed=9)[0]
    late = extra.rename(tmp_path / "files" / "g000.h5")  # after the others in path order
    store = tmp_path / "store.zarr"
    ingest(files, store)
    monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", 2)
    moved = files[3].rename(tmp_path / "moved.h5")
    with pytest.raises(InvalidInput, match="but now missing; cannot append") as error:
        ingest([late], store, append=True)
    assert error.value.what == str(files[3])
    moved.rename(files[3])
    raw = bytearray(files[5].read_bytes())
    raw[-1] ^= 0xFF  # other bytes, the same size
    files[5].write_bytes(bytes(raw))
    with pytest.raises(InvalidInput, match="changed since it was ingested") as error:
        ingest([late], store, append=True)
    assert error.value.what == str(files[5])


def test_the_join_stays_on_the_workers(tmp_path, dask_cluster, monkeypatch):
    """12 and 60 recorded files in three ranges and one new file: the partitions and the
    ranges' records are held by futures, the partitions are `scan_das_files` of every file,
    and what the client receives of the rounds is as large for both."""
    received: dict[int, int] = {}
    with Client(dask_cluster.address, set_as_default=True):
        for count in (12, 60):
            monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", count // 3 + 1)
            files = write_files(tmp_path / f"files{count}", count + 1, seed=count)
            store = StoreLocation(str(tmp_path / f"store{count}.zarr"))
            ingest(files[:-1], Path(store.url))
            record = record_parts.record_of(store, das_inputs.DAS)
            assert record is not None and record.files == count
            assert record_parts.record_of(store) is None  # not a waveform record
            each = on_cluster(quiet=True)
            sizes: list[int] = []

            def counted(function, *columns, keep=False, label="", each=each, sizes=sizes):
                found = each(function, *columns, keep=keep, label=label)
                if not keep:
                    sizes.append(len(pickle.dumps(found)))
                return found

            found = das_files.scan_parts([str(files[-1])], store, record, counted, quiet=True,
                                         append=True)  # fmt: skip
            records = found.part_records()
            assert all(futures_of(kept) for kept in found.parts + found.stats + records)
            parts = dask.compute(*found.parts)
            assert [s for part in parts for s in part] == scan_das_files(
                [str(p) for p in files], None
            )
            for part, part_record in zip(parts, dask.compute(*records), strict=True):
                # each partition's record: its recorded files and their patches, no more
                old = [s.path for s in part if s.path != str(files[-1])]
                assert part_record.paths() == old
                assert {p.patch.path for p in part_record.placed} == set(old)
            received[count] = sum(sizes)
    assert abs(received[60] - received[12]) < 200, received
