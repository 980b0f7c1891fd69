"""The columnar header scan (`scan_table`): obspy's own test archive and a damaged file, each
compared with an independent `obspy.read(headonly=True)` and `hashlib.sha256` of the files, and
batches joined in any cut equal to one batch."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import obspy
import pytest

from seisctf.formats.obspy_archive.scan_table import ScanTable, scan_files

TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """obspy's three stations' day files, a file no reader knows and a cut miniSEED file."""
    folder = tmp_path_factory.mktemp("scan")
    found = sorted(str(p) for p in TSINDEX.rglob("*") if p.is_file() and ".mseed" in p.name)
    (folder / "notes.txt").write_text("not a seismogram\n")
    raw = Path(found[0]).read_bytes()
    (folder / "cut.mseed").write_bytes(raw[: len(raw) // 2 + 100])
    return found + [str(folder / "notes.txt"), str(folder / "cut.mseed")]


def _expected(paths: list[str]) -> list[tuple]:
    """(path, station id, channel, start ns, rate, npts) of every trace, by obspy."""
    rows = []
    for path in paths:
        try:
            stream = obspy.read(path, headonly=True)
        except Exception:  # noqa: BLE001 - unreadable: no trace
            continue
        for trace in stream:
            s = trace.stats
            station = f"{s.network}.{s.station}" + (f".{s.location}" if s.location else "")
            rows.append((path, station, s.channel, s.starttime.ns, s.sampling_rate, s.npts))
    return rows


def test_scan_table_matches_obspy_and_hashlib(files: list[str]) -> None:
    table = scan_files(files)
    assert table.paths == tuple(files)
    for index, path in enumerate(files):
        raw = Path(path).read_bytes()
        assert table.sha256(index) == hashlib.sha256(raw).hexdigest()
        assert table.sizes[index] == len(raw)
    assert [tuple(h.__getattribute__(f) for f in h.__slots__) for h in table.headers()] == (
        _expected(files)
    )
    assert table.readable.tolist() == [True] * (len(files) - 2) + [False, True]
    assert any("notes.txt: unreadable" in p for p in table.problems)
    assert any("cut.mseed: truncated" in p for p in table.problems)
    manifest = list(table.manifest())
    assert manifest[0] == {
        "path": files[0],
        "size": len(Path(files[0]).read_bytes()),
        "sha256": hashlib.sha256(Path(files[0]).read_bytes()).hexdigest(),
    }


@pytest.mark.parametrize("cut", [[1], [2, 3], [1, 1, 1, 1, 1, 1]])
def test_joined_batches_equal_one_batch(files: list[str], cut: list[int]) -> None:
    whole = scan_files(files)
    edges = np.cumsum([0, *cut, len(files)]).clip(max=len(files))
    batches = [scan_files(files[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    joined = ScanTable.joined(batches, list(files))
    assert list(joined.headers()) == list(whole.headers())
    assert list(joined.manifest()) == list(whole.manifest())
    assert joined.problems == whole.problems
    np.testing.assert_array_equal(joined.readable, whole.readable)
    # The joined table holds the caller's strings, not the batches' copies.
    assert all(a is b for a, b in zip(joined.paths, files, strict=True))
