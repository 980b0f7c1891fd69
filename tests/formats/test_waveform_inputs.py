"""A waveform store's inputs are a table beside its data (`input_manifest`), and runs recognise
its files by it: through `seisctf ingest waveforms` on obspy-written miniSEED files, the root
`zarr.json` keeps its size whatever the file count, a re-run on a complete store and a resumed
ingest read no file they have already, `--append` of one file reads that file and those of the
blocks it touches alone (the others are overwritten with random bytes of the same size and
mtime: reading any of them would change its hash or its samples), with the bytes of a one-shot
ingest; an old file changed or gone is refused by name."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import dask
import numpy as np
import obspy
import pytest
import zarr
from test_waveforms import DAY, START, _cli, _MoveAwayAfter, _open, _trace, write_day_files

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared import record_parts
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation


def write_short_files(root: Path, count: int) -> list[Path]:
    """`count` consecutive 100-sample files of one channel at 1 Hz."""
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for index in range(count):
        data = np.arange(100, dtype=np.int32) + index
        trace = _trace("XX.AAA.00", "HHZ", START + 100 * index, data, rate=1.0)
        files.append(root / f"{index:04d}.mseed")
        trace.write(str(files[-1]), format="MSEED", encoding="STEIM2", reclen=512)
    return files


def garble(path: Path) -> None:
    """Random bytes in place of the file's, its size and mtime kept."""
    stat = path.stat()
    path.write_bytes(np.random.default_rng(stat.st_size).bytes(stat.st_size))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def store_digest(url: Path) -> dict[str, str]:
    """{path in the store: sha256} of every object."""
    return {
        str(path.relative_to(url)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(url.rglob("*"))
        if path.is_file()
    }


def assert_same_store(built: Path, reference: Path) -> None:
    ours, theirs = _open(built), _open(reference)
    np.testing.assert_array_equal(ours["data"].values, theirs["data"].values)
    np.testing.assert_array_equal(ours["coverage"].values, theirs["coverage"].values)
    tables = [store.attrs.pop("inputs_table", "inputs") for store in (ours, theirs)]
    assert ours.attrs == theirs.attrs  # same fingerprint, problems, grid
    for url, table in zip((built, reference), tables, strict=True):  # an append's: beside
        assert sorted(zarr.open_group(str(url)).group_keys()) == [table, cv.STATION_ATTRS_GROUP]
    assert recorded_inputs(StoreLocation(built)) == recorded_inputs(StoreLocation(reference))


def test_root_metadata_does_not_grow_with_the_file_count(tmp_path, dask_cluster):
    sizes = {}
    for count in (10, 200):
        files = write_short_files(tmp_path / f"files{count}", count)
        out = tmp_path / f"store{count}.zarr"
        run = _cli(str(tmp_path / f"files{count}"), "--out", str(out),
                   scheduler=dask_cluster.address)  # fmt: skip
        assert run.returncode == 0, run.stderr
        sizes[count] = (out / "zarr.json").stat().st_size
        assert [e["path"] for e in recorded_inputs(StoreLocation(out))] == [str(f) for f in files]
    # Only the digits of the arrays' shapes differ (200 files: 20,000 samples, 200 rows).
    assert abs(sizes[200] - sizes[10]) < 300, sizes
    assert "inputs" not in json.loads((out / "zarr.json").read_text())["attributes"]


def test_a_rerun_on_a_complete_store_reads_no_file(tmp_path, dask_cluster):
    files = write_short_files(tmp_path / "files", 10)
    out = tmp_path / "store.zarr"
    first = _cli(str(tmp_path / "files"), "--out", str(out), scheduler=dask_cluster.address)
    assert first.returncode == 0, first.stderr
    before = store_digest(out)
    for path in files:
        garble(path)
    again = _cli(str(tmp_path / "files"), "--out", str(out), scheduler=dask_cluster.address)
    assert again.returncode == 0 and "up to date:" in again.stdout, again.stdout + again.stderr
    assert store_digest(out) == before


def test_append_of_one_file_reads_it_and_the_files_of_its_blocks_alone(tmp_path, dask_cluster):
    """Day files at 1 Hz (2**18-sample blocks: 3.03 days): days 0-5 in the store, a day-7 file
    appended. It touches block 2 and each station's last partial block 1 (days 3.03-6.07);
    the files of days 0-2 lie in block 0 alone and are garbled before the append."""
    old = [f for day in range(6) for f in write_day_files(tmp_path / "old", day, seed=day)]
    new = write_day_files(tmp_path / "new", 7, seed=7)[0]
    address = dask_cluster.address
    whole, appended = tmp_path / "whole.zarr", tmp_path / "appended.zarr"
    assert _cli(str(tmp_path / "old"), str(new), "--out", str(whole),
                scheduler=address).returncode == 0  # fmt: skip
    assert _cli(str(tmp_path / "old"), "--out", str(appended), scheduler=address).returncode == 0
    unread = [f for f in old if any(f".{START.julday + day:03d}." in f.name for day in range(3))]
    assert len(unread) == 12
    originals = {path: path.read_bytes() for path in unread}
    for path in unread:
        garble(path)
    run = _cli(str(new), "--out", str(appended), "--append", scheduler=address)
    assert run.returncode == 0, run.stderr
    for path, raw in originals.items():  # the reference was made from the files' own bytes
        stat = path.stat()
        path.write_bytes(raw)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert_same_store(appended, whole)
    assert _open(appended).sizes["time"] == 8 * DAY


def test_an_old_file_changed_or_gone_is_refused_by_name(tmp_path, dask_cluster):
    files = write_short_files(tmp_path / "old", 3)
    new = write_short_files(tmp_path / "new", 4)[-1]
    out, address = tmp_path / "store.zarr", dask_cluster.address
    assert _cli(str(tmp_path / "old"), "--out", str(out), scheduler=address).returncode == 0
    before = store_digest(out)
    # The same size, other bytes, a later mtime: re-scanned, its hash differs.
    raw, stat = bytearray(files[1].read_bytes()), files[1].stat()
    raw[-1] ^= 0xFF
    files[1].write_bytes(bytes(raw))
    os.utime(files[1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    changed = _cli(str(new), "--out", str(out), "--append", scheduler=address)
    assert changed.returncode == 3 and "Traceback" not in changed.stderr
    assert changed.stderr.startswith(
        f"seisctf: invalid input: {files[1]}: changed since it was ingested into {out}"
    ), changed.stderr
    files[0].unlink()
    gone = _cli(str(new), "--out", str(out), "--append", scheduler=address)
    assert gone.returncode == 3 and "Traceback" not in gone.stderr
    assert gone.stderr.strip() == (
        f"seisctf: invalid input: {files[0]}: ingested into {out} but now missing; cannot append"
    )
    assert store_digest(out) == before


@pytest.mark.parametrize("rows_per_range", [record_parts.ROWS_PER_RANGE, 5])
def test_a_resumed_ingest_reads_no_file_of_the_blocks_it_had_written(
    tmp_path, monkeypatch, rows_per_range
):
    """Blocks of one day at 1 Hz: a day file is one block's. Interrupted after two blocks,
    their files garbled, the resume writes the other blocks with the bytes of a whole run,
    its record of 12 files read in one range or in three (`record_parts`)."""
    monkeypatch.setattr(record_parts, "ROWS_PER_RANGE", rows_per_range)
    archive = tmp_path / "archive"
    for day in range(3):
        write_day_files(archive, day, seed=day)
    whole, out = tmp_path / "whole.zarr", tmp_path / "resumed.zarr"
    with dask.config.set(scheduler="synchronous"):
        ingest_waveforms([str(archive)], StoreLocation(whole), block_samples=DAY, quiet=True)
        with _MoveAwayAfter(2, archive, tmp_path / "moved"):
            with pytest.raises(InvalidInput, match="re-run to resume"):
                ingest_waveforms([str(archive)], StoreLocation(out), block_samples=DAY, quiet=True)
        (tmp_path / "moved").rename(archive)
        stations = [str(s) for s in zarr.open_group(str(out))["station"][:]]
        written = [p.relative_to(out / "data" / "c").parts for p in (out / "data" / "c").rglob("*")]
        done = {(stations[int(s)], int(b)) for s, _, b in (p for p in written if len(p) == 3)}
        assert len(done) == 2
        for station, block in done:
            day = obspy.UTCDateTime(START.date) + block * DAY
            for path in archive.glob(f"{station}*.{day.year}.{day.julday:03d}.mseed"):
                garble(path)
        report = ingest_waveforms([str(archive)], StoreLocation(out), block_samples=DAY, quiet=True)
    assert not report.up_to_date
    assert_same_store(out, whole)
