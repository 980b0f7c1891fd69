"""The `inputs` table of a waveform store (`input_manifest`): written and read back it is the
header scan it was made from; a scan taken from it for unchanged files and made afresh for the
others equals a scan of every file (`scan_table.scan_files`, run on obspy's files, a file no
reader knows, a cut miniSEED file and SAC files whose headers give positions); sizes and
modifications listed from a local folder and from S3 equal os.stat's and S3's own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr

from seisctf.formats.obspy_archive import waveform_table
from seisctf.formats.obspy_archive.scan_table import TRACE_COLUMNS, ScanTable, scan_files
from seisctf.formats.shared import input_manifest
from seisctf.formats.shared.partition_tasks import in_process
from seisctf.location import StoreLocation

TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    """obspy's three stations' day files and its tsindex database (unreadable), a text file,
    a cut miniSEED file, and four SAC files of BW.RJOB whose headers give positions (the first
    and third the same one, the second another)."""
    for index, path in enumerate(sorted(p for p in TSINDEX.rglob("*") if p.is_file())):
        shutil.copy(path, tmp_path / f"{index:02d}-{path.name}")
    (tmp_path / "notes.txt").write_text("not a seismogram\n")
    raw = next(TSINDEX.rglob("*.mseed")).read_bytes()
    (tmp_path / "cut.mseed").write_bytes(raw[: len(raw) // 2 + 100])
    trace = obspy.read()[0]
    for index, (latitude, longitude) in enumerate(((10.5, 20.25), (11.0, 21.0), (10.5, 20.25))):
        copy = trace.copy()
        copy.stats.starttime += 100 * index
        copy.stats.sac = {"stla": latitude, "stlo": longitude, "stel": 3.0}
        copy.write(str(tmp_path / f"sac{index}.sac"), format="SAC")
    return sorted(str(path) for path in tmp_path.iterdir())


def assert_same_scan(found: ScanTable, expected: ScanTable) -> None:
    assert found.paths == expected.paths
    assert list(found.headers()) == list(expected.headers())
    assert found.problems == expected.problems
    assert found.header_positions == expected.header_positions
    for name in ("sizes", "digests", "readable"):
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name))


def write_recorded(
    store: StoreLocation,
    scans: ScanTable,
    stats: input_manifest.InputStats,
    stored: np.ndarray | None = None,
) -> None:
    """The table of the whole scan `scans` as one partition, written in this process."""
    group = zarr.open_group(store.url, mode="r")
    name = input_manifest.table_name(group)
    waveform_table.write_table(store, name, [scans], [stats], in_process,
                               stored=None if stored is None else [stored])  # fmt: skip


def store_with_table(root: Path, files: list[str]) -> tuple[str, ScanTable]:
    url = str(root / "store.zarr")
    zarr.open_group(url, mode="w", zarr_format=3)
    scans = scan_files(files)
    write_recorded(StoreLocation(url), scans, input_manifest.file_stats(files))
    return url, scans


def touch(path: str) -> None:
    """A new modification time (one second later), the same bytes."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def test_table_reads_back_as_the_scan_and_the_attr_entries(files: list[str], tmp_path: Path):
    url, scans = store_with_table(tmp_path / "store", files)
    recorded = input_manifest.read_recorded(StoreLocation(url))
    assert_same_scan(recorded.scans, scans)
    assert scans.problems and scans.header_positions  # both kinds are in the table
    assert recorded.modified.tolist() == [str(os.stat(path).st_mtime_ns) for path in files]
    assert input_manifest.recorded_inputs(StoreLocation(url)) == list(scans.manifest())
    # samples_stored: false appears on the files said so, as the old attr had it.
    stored = np.array([not path.endswith("notes.txt") for path in files])
    write_recorded(StoreLocation(url), scans, input_manifest.file_stats(files), stored)
    entries = input_manifest.recorded_inputs(StoreLocation(url))
    assert [e["path"] for e in entries if e.get("samples_stored") is False] == [
        path for path in files if path.endswith("notes.txt")
    ]
    assert zarr.open_group(url)["inputs"]["path"].metadata.dimension_names == ("file",)


def test_table_of_many_files_is_a_few_objects_per_array(tmp_path: Path):
    """10^5 files (the table's own columns; no file is read): a few chunks per array, each of
    ROWS_PER_CHUNK rows, and the table reads back whole."""
    count = 100_000
    paths = tuple(f"/archive/{index:06d}.mseed" for index in range(count))
    scans = ScanTable(
        paths=paths,
        sizes=np.full(count, 4096, dtype=np.int64),
        digests=np.zeros((count, 32), dtype=np.uint8),
        readable=np.ones(count, dtype=bool),
        traces={name: np.arange(count).astype(kind) for name, kind in TRACE_COLUMNS.items()},
        station_ids=tuple(f"XX.S{index:05d}" for index in range(count)),
        channel_codes=tuple(f"C{index:05d}" for index in range(count)),
        problems=(),
    )
    stats = input_manifest.InputStats(
        paths, scans.sizes, np.full(count, "1700000000000000000", dtype=object)
    )
    url = tmp_path / "store.zarr"
    zarr.open_group(str(url), mode="w", zarr_format=3)
    write_recorded(StoreLocation(url), scans, stats)
    chunks = {
        folder.name: len([p for p in (folder / "c").rglob("*") if p.is_file()])
        for folder in (url / "inputs").iterdir()
        if (folder / "c").is_dir()
    }
    assert chunks and max(chunks.values()) == -(-count // input_manifest.ROWS_PER_CHUNK) <= 8
    recorded = input_manifest.read_recorded(StoreLocation(url))
    assert recorded.scans.paths == paths and recorded.scans.n_traces == count


@pytest.mark.parametrize(
    ("touched", "dropped", "rescanned"),
    [
        ((), (), ()),
        (("00-",), (), ("00-",)),
        (("notes.txt", "cut.mseed"), (), ("notes.txt", "cut.mseed")),
        # The first file of a recorded position changed: every file of its station is scanned.
        (("sac0",), (), ("sac0", "sac1", "sac2")),
        ((), ("sac0",), ("sac1", "sac2")),
        (("sac1",), (), ("sac0", "sac1", "sac2")),
        # A repeat of an earlier file's position (not recorded at it): that file alone.
        (("sac2",), (), ("sac2",)),
    ],
)
def test_scan_from_the_table_equals_a_scan_of_every_file(
    files: list[str], tmp_path: Path, touched, dropped, rescanned
):
    url, _ = store_with_table(tmp_path / "store", files)
    recorded = input_manifest.read_recorded(StoreLocation(url))
    for path in files:
        if any(Path(path).name.startswith(name) for name in touched):
            touch(path)
    paths = [p for p in files if not any(Path(p).name.startswith(n) for n in dropped)]
    scanned: list[str] = []

    def scan(todo: list[str]) -> ScanTable:
        scanned.extend(todo)
        return scan_files(todo)

    stats = input_manifest.file_stats(paths)
    assert_same_scan(input_manifest.scanned(paths, stats, recorded, scan), scan_files(paths))
    assert sorted(Path(p).name for p in scanned) == sorted(
        Path(p).name for p in paths if any(Path(p).name.startswith(n) for n in rescanned)
    )


def test_a_store_without_a_table_reads_its_attr_and_scans_every_file(
    files: list[str], tmp_path: Path
):
    """A store written before the table: its `inputs` attr is its record (no scan taken)."""
    url = str(tmp_path / "old.zarr")
    scans = scan_files(files)
    zarr.open_group(url, mode="w", zarr_format=3).attrs["inputs"] = list(scans.manifest())
    assert input_manifest.recorded_inputs(StoreLocation(url)) == list(scans.manifest())
    recorded = input_manifest.read_recorded(StoreLocation(url))
    stats = input_manifest.file_stats(files)
    scanned: list[str] = []
    found = input_manifest.scanned(
        files, stats, recorded, lambda t: scanned.extend(t) or scan_files(t)
    )
    assert scanned == files
    assert_same_scan(found, scans)
    write_recorded(StoreLocation(url), scans, stats)
    assert "inputs" not in zarr.open_group(url).attrs
    # Another kind of store's attr `inputs` (no sha256 of each file) is no record.
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w").attrs["inputs"] = [{"path": "x"}]
    assert input_manifest.read_recorded(StoreLocation(tmp_path / "other.zarr")) is None


def test_object_stats_are_s3s_own(tmp_path, s3_server, s3_bucket):
    """Objects of a folder listed (more than FEW_OBJECTS) and of one looked up one by one."""
    fs = s3_server.filesystem()
    local = sorted(TSINDEX.rglob("*.mseed"))
    listed = [f"{s3_bucket}/archive/a/{i:02d}.mseed" for i in range(input_manifest.FEW_OBJECTS + 2)]
    urls = [*listed, f"{s3_bucket}/archive/b/one.mseed"]
    for index, url in enumerate(urls):
        fs.put_file(str(local[index % len(local)]), url.removeprefix("s3://"))
    missing = [f"{s3_bucket}/archive/a/none.mseed", f"{s3_bucket}/archive/b/none.mseed"]
    stats = input_manifest.file_stats([*urls, *missing], s3_server.storage_options)
    for url, size, modified in zip(urls, stats.sizes, stats.modified, strict=False):
        info = fs.info(url)
        assert (size, modified) == (info["size"], str(info["ETag"]))
    assert stats.sizes[-2:].tolist() == [input_manifest.MISSING] * 2
    assert stats.modified[-2:].tolist() == ["", ""]
    # A new upload of other bytes of the same size has another ETag.
    raw = bytearray(local[0].read_bytes())
    raw[-1] ^= 0xFF
    fs.pipe_file(urls[0].removeprefix("s3://"), bytes(raw))
    again = input_manifest.file_stats(urls, s3_server.storage_options)
    assert again.sizes[0] == stats.sizes[0] and again.modified[0] != stats.modified[0]
    assert again.modified[1:].tolist() == stats.modified[1 : len(urls)].tolist()
