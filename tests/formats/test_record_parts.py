"""A store's record of its inputs read in ranges of rows by tasks and joined there with a run's
listing (`record_parts`): an `--append` with any number of rows a range (one file a range
upwards) writes the store a one-shot ingest of every file writes, scans the new files and those
the record cannot serve alone (a station whose header position was at a changed file, in
another range), and a re-run reads no file; on a real cluster the ranges, the joins and the
partitions stay on the workers, what the client receives is as large for 400 recorded files as
for 40, and the partitions joined are `scan_files` of every file."""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import dask
import numpy as np
import obspy
import pytest
from distributed import Client, futures_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_input_manifest import assert_same_scan
from test_waveform_inputs import assert_same_store, write_short_files
from test_waveforms import START, _trace, ingest, write_day_files

from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.scan_table import ScanTable, scan_files
from seisctf.formats.shared import input_manifest, record_parts
from seisctf.formats.shared.partition_tasks import on_cluster
from seisctf.location import StoreLocation

DAYS = 3


def write_sac_files(root: Path) -> list[Path]:
    """Three SAC files of XX.SAC at 1 Hz on day 0 whose headers give its position: the first
    and the third the same one (recorded at the first file alone), the second another."""
    files = []
    for index, (latitude, longitude) in enumerate(((10.5, 20.25), (11.0, 21.0), (10.5, 20.25))):
        data = np.arange(1000, dtype=np.int32) * (index + 1)
        trace = _trace("XX.SAC.", "HHZ", START + 2000 * index, data, rate=1.0)
        trace.stats.sac = {"stla": latitude, "stlo": longitude, "stel": 3.0}
        files.append(root / f"XX.SAC.{index}.sac")
        trace.write(str(files[-1]), format="SAC")
    return files


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, list[list[Path]], list[Path], Path]:
    """(root, day files per day, SAC files, a one-shot ingest of them all)."""
    root = tmp_path_factory.mktemp("record-parts")
    days = [write_day_files(root / "files", day, seed=day) for day in range(DAYS)]
    sac = write_sac_files(root / "files")
    whole = root / "whole.zarr"
    ingest([str(p) for p in sorted(root.joinpath("files").iterdir())], whole)
    return root, days, sac, whole


def touch(path: Path) -> None:
    """A later mtime, the same bytes."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


@pytest.fixture
def scanned(monkeypatch) -> list[str]:
    """The paths the join scans (`record_parts._scan_slice`; the tasks run in this process)."""
    found: list[str] = []
    scan_slice = record_parts._scan_slice

    def spy(scan, todo, first, stop, options):
        found.extend(todo.paths[first:stop])
        return scan_slice(scan, todo, first, stop, options)

    monkeypatch.setattr(record_parts, "_scan_slice", spy)
    return found


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.sampled_from([1, 2, 3, 5, 64]), old_days=st.integers(1, DAYS - 1))
def test_an_append_over_any_ranges_writes_the_one_shot_store(
    archive, monkeypatch, scanned, rows, old_days
):
    root, days, sac, whole = archive
    monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", rows)
    scanned.clear()
    old = [p for day in days[:old_days] for p in day] + sac
    new = [p for day in days[old_days:] for p in day]
    with tempfile.TemporaryDirectory(dir=root) as folder:
        store = Path(folder) / "appended.zarr"
        ingest([str(p) for p in old], store)
        touch(sac[0])  # the file its position is recorded at: every XX.SAC file is scanned
        ingest([str(p) for p in new], store, append=True)
        assert sorted(scanned) == sorted(str(p) for p in new + sac)
        assert_same_store(store, whole)
        scanned.clear()
        again = ingest([str(p) for p in old + new], store)
        assert again.up_to_date and scanned == []


def test_the_join_stays_on_the_workers_and_equals_a_scan(tmp_path, dask_cluster, monkeypatch):
    """40 and 400 recorded files in ranges of 16 rows and one new file: the kept values are
    held by futures, the partitions joined are `scan_files` of every file, and what the client
    receives of the rounds (first paths, counts, lost stations) is as large for both."""
    received: dict[int, int] = {}
    with Client(dask_cluster.address, set_as_default=True) as client:
        for count in (40, 400):
            monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", count // 3 + 1)  # three ranges
            files = write_short_files(tmp_path / f"files{count}", count + 1)
            store = StoreLocation(str(tmp_path / f"store{count}.zarr"))
            ingest([str(p) for p in files[:-1]], store.url)
            record = record_parts.record_of(store)
            assert record is not None and record.files == count
            each = on_cluster(quiet=True)
            sizes: list[int] = []

            def counted(function, *columns, keep=False, label="", each=each, sizes=sizes):
                found = each(function, *columns, keep=keep, label=label)
                if not keep:
                    sizes.append(len(pickle.dumps(found)))
                return found

            batch = client.scatter(input_manifest.file_stats([str(files[-1])]), hash=False)
            found = record_parts.joined_scan(
                record, store, [batch], scan_files, append=True, each=counted, quiet=True
            )
            records = found.part_records()
            assert all(futures_of(kept) for kept in found.parts + found.stats + records)
            parts = dask.compute(*found.parts)
            paths = [str(p) for p in files]
            assert_same_scan(ScanTable.joined(parts, paths), scan_files(paths))
            for part, part_record in zip(parts, dask.compute(*records), strict=True):
                # each partition's record: its recorded files (all but the new one), no more
                assert part_record.scans.paths == tuple(p for p in part.paths if p != paths[-1])
                assert_same_scan(part_record.scans, scan_files(list(part_record.scans.paths)))
            assert sum(len(part.paths) for part in parts) == count + 1
            received[count] = sum(sizes)
    assert abs(received[400] - received[40]) < 200, received


def test_a_file_gone_from_any_range_is_refused_by_name(tmp_path, monkeypatch):
    files = write_short_files(tmp_path / "files", 7)
    store = tmp_path / "store.zarr"
    ingest([str(p) for p in files[:-1]], store)
    monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", 2)
    files[3].unlink()
    with pytest.raises(InvalidInput, match="but now missing; cannot append") as error:
        ingest([str(files[-1])], store, append=True)
    assert str(files[3]) in str(error.value)
    assert obspy.read(str(files[4]))  # (the others are there)
