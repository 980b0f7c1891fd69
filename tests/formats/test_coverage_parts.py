"""The coverage of an ingest is written by tasks from the runs' records, a chunk each
(`coverage_parts`): it equals the fraction of valid samples computed with numpy from the stored
data, over several chunks, on 1 and 2 workers, resumed, appended and for DAS; the mapping of
runs to cells equals the run layouts' own; and the client never holds the whole array."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import obspy
import pytest
import xarray as xr
import zarr
from conftest import on_one_and_two_workers
from hypothesis import given, settings
from hypothesis import strategies as st
from test_das_ingest import dascore_expected, write_series
from test_waveforms import _MoveAwayAfter

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.das.das_runs import RunLayout
from seisctf.formats.obspy_archive import waveforms
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared import coverage_parts
from seisctf.formats.shared.coverage_parts import SpanRuns, StationRuns
from seisctf.location import StoreLocation

RATE = 100.0
BLOCK = 256  # 2.56 s blocks: a day is 33,750 of them, the coverage several chunks
START = obspy.UTCDateTime("2021-03-04T05:06:07")
# (station, channels, offset s from START, seconds) of each file: stations with one and two
# channels, gaps within and between files, a channel missing from part of a station's time.
FILES = [
    ("AAA", ("HHZ",), 0, 600),
    ("AAA", ("HHZ",), 7_200, 600),
    ("AAA", ("HHZ",), 80_000, 900),
    ("BBB", ("HHZ", "HHN"), 300, 1_200),
    ("BBB", ("HHZ",), 40_000, 600),
    ("CCC", ("HHE",), 1_000, 300),
    ("CCC", ("HHE",), 60_000, 650),
    ("DDD", ("HHZ",), 2_000.37, 300),
    ("DDD", ("HHZ", "HHE"), 90_123.37, 600),
    ("EEE", ("HHZ",), 20_000, 300),
    ("EEE", ("HHZ",), 20_250, 300),
]


@pytest.fixture(autouse=True)
def two_chunks_a_task(monkeypatch):
    """Several tasks of several chunks each (the client groups the chunks into tasks), however
    small the coverage (else one task writes a coverage of up to `SMALL_CELLS` whole)."""
    monkeypatch.setattr(coverage_parts, "CHUNKS_PER_TASK", 2)
    monkeypatch.setattr(coverage_parts, "SMALL_CELLS", 0)


def _write(folder: Path, files=FILES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for index, (station, channels, offset, seconds) in enumerate(files):
        rng = np.random.default_rng(index)
        stream = obspy.Stream([
            obspy.Trace(rng.integers(-999, 999, int(seconds * RATE)).astype(np.int32),
                        {"network": "XX", "station": station, "channel": channel,
                         "sampling_rate": RATE, "starttime": START + offset})
            for channel in channels
        ])  # fmt: skip
        path = folder / f"{index:02d}_{station}.mseed"
        stream.write(str(path), format="MSEED", encoding="STEIM2")
        written.append(path)
    return written


def _ingest(paths: list[Path], out: Path, **options) -> waveforms.IngestReport:
    return ingest_waveforms([str(p) for p in paths], StoreLocation(str(out)),
                            block_samples=BLOCK, quiet=True, **options)  # fmt: skip


def _coverage_from_data(out: Path) -> np.ndarray:
    """(station, block): the fraction of non-NaN samples in each block of the station's own
    channels, with numpy from the stored data's chunks (a block without one holds no sample)."""
    group = zarr.open_group(str(out), mode="r")
    data = group["data"]
    channels = [str(c) for c in group["channel"][:]]
    own = storage.station_attrs(group, ("station_channels",))["station_channels"]
    stations = [str(s) for s in group["station"][:]]
    n_time = data.shape[-1]
    expected = np.zeros((len(stations), -(-n_time // BLOCK)), np.float32)
    for chunk in (out / "data" / "c").glob("*/0/*"):
        index, block = int(chunk.parts[-3]), int(chunk.parts[-1])
        rows = [channels.index(c) for c in own[stations[index]]]
        values = data[index, rows, block * BLOCK : (block + 1) * BLOCK]
        expected[index, block] = np.count_nonzero(~np.isnan(values)) / values.size
    return expected


def _chunk_bytes(out: Path, name: str) -> dict[str, bytes]:
    root = out / name
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_coverage_over_several_chunks_is_the_stored_datas_valid_fraction(tmp_path):
    out = tmp_path / "store.zarr"
    report = _ingest(_write(tmp_path / "files"), out)
    stored = zarr.open_array(str(out / "coverage"), mode="r")
    assert stored.nchunks >= 4  # the test is about chunks written by several tasks
    expected = _coverage_from_data(out)
    np.testing.assert_array_equal(stored[:], expected)
    assert 0 < (expected > 0).mean() < 0.2 and ((expected > 0) & (expected < 1)).any()
    np.testing.assert_array_equal(np.asarray(report.coverage), expected)  # the report reads it
    assert not (out / "ingest_progress").exists() and not (out / "ingest_progress_base").exists()


def test_one_task_writes_a_small_coverage_with_the_same_bytes(tmp_path, monkeypatch):
    files = _write(tmp_path / "files")
    _ingest(files, tmp_path / "tasks.zarr")
    monkeypatch.setattr(coverage_parts, "SMALL_CELLS", 2**22)  # the default: this one is small
    _ingest(files, tmp_path / "one.zarr")
    assert _chunk_bytes(tmp_path / "one.zarr", "coverage") == _chunk_bytes(
        tmp_path / "tasks.zarr", "coverage"
    )


def test_coverage_bytes_do_not_depend_on_the_workers(tmp_path):
    files = _write(tmp_path / "files")
    one, two = on_one_and_two_workers(
        lambda root: _chunk_bytes(_ingest(files, root / "s.zarr") and root / "s.zarr", "coverage"),
        tmp_path / "runs",
    )
    assert len(one) >= 5 and one == two  # zarr.json and the chunks


def _parts(files: list[Path]) -> tuple[list[Path], list[Path]]:
    """The files before 50,000 s (every station has some; the last ends inside a block, which
    then grows) and after."""
    early = [path for path, file in zip(files, FILES, strict=True) if file[2] < 50_000]
    return early, [path for path in files if path not in early]


def test_an_append_gives_the_one_shot_coverage_over_several_chunks(tmp_path):
    files = _write(tmp_path / "files")
    whole, parts = tmp_path / "whole.zarr", tmp_path / "parts.zarr"
    _ingest(files, whole)
    early, late = _parts(files)
    _ingest(early, parts)
    _ingest(late, parts, append=True)
    assert _chunk_bytes(parts, "coverage") == _chunk_bytes(whole, "coverage")
    np.testing.assert_array_equal(zarr.open_array(str(parts / "coverage"))[:],
                                  _coverage_from_data(parts))  # fmt: skip


def test_a_resumed_append_keeps_the_old_coverage_it_stored(tmp_path):
    files = _write(tmp_path / "files")
    whole, parts = tmp_path / "whole.zarr", tmp_path / "parts.zarr"
    _ingest(files, whole)
    early, late = _parts(files)
    _ingest(early, parts)
    later = tmp_path / "later"
    later.mkdir()
    for path in late:
        (later / path.name).write_bytes(path.read_bytes())
    with _MoveAwayAfter(1, later, tmp_path / "moved"):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            _ingest([later], parts, append=True)
    base = zarr.open_array(str(parts / "ingest_progress_base"), mode="r")
    assert base.shape == zarr.open_array(str(whole / "coverage")).shape  # kept in the store
    (tmp_path / "moved").rename(later)
    _ingest([later], parts, append=True)
    assert _chunk_bytes(parts, "coverage") == _chunk_bytes(whole, "coverage")


def test_the_client_never_holds_the_whole_coverage(tmp_path):
    """Two stations' files half a year apart at 100 Hz in 256-sample blocks: 12.3 M cells, a
    49 MB coverage; the ingest's traced peak (client and threaded tasks alike) stays below half
    of it (before, 70 MiB: the client held it whole and the graph carried it to the finishing
    task)."""
    files = [
        ("AAA", ("HHZ",), 0, 60),
        ("BBB", ("HHZ",), 30, 60),
        ("AAA", ("HHZ",), 182 * 86_400, 60),
    ]
    out = tmp_path / "far.zarr"
    paths = _write(tmp_path / "files", files)
    tracemalloc.start()
    try:
        _ingest(paths, out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    stored = zarr.open_array(str(out / "coverage"), mode="r")
    assert stored.size * 4 > 45e6
    assert peak < stored.size * 4 / 2, f"traced peak {peak / 2**20:.1f} MiB"
    first, last = np.flatnonzero(stored[0] > 0), np.flatnonzero(stored[1] > 0)
    assert len(first) == 48 and first[23] == 23 and first[24] == stored.shape[1] - 24
    assert last.tolist() == list(range(11, 36))  # 30 s to 90 s: samples 3,000 to 8,999


def test_das_coverage_over_several_chunks_is_dascores(tmp_path):
    """Two DAS files 150,000 blocks apart: a coverage of several chunks, equal to the valid
    fraction of DASCore's own read laid on the grid, as are the samples."""
    files = write_series(tmp_path / "files", "PRODML", layout=((0, 151, 0), (300_000, 60, 0)))
    out = tmp_path / "store.zarr"
    ingest_das([str(tmp_path / "files")], StoreLocation(out), block_samples=2, quiet=True)
    group = zarr.open_group(str(out), mode="r")
    coverage = group[cv.DAS_COVERAGE_VAR]
    assert coverage.nchunks >= 2
    start_ns, expected, _ = dascore_expected(files)
    assert len(expected) == 300_060  # whole blocks of 2 samples
    fractions = np.isfinite(expected).reshape(-1, 2 * expected.shape[1]).mean(axis=1)
    np.testing.assert_allclose(coverage[:], fractions, rtol=1e-6)
    assert group.attrs["start_time_ns"] == start_ns
    variable = group[cv.validate_das_store(xr.open_zarr(str(out)))]
    for first, stop in ((0, 152), (300_000, 300_060)):
        np.testing.assert_array_equal(variable[first:stop], expected[first:stop])


def _dense(shape: tuple[int, ...], cells: coverage_parts.RunCells, chunks: tuple[int, ...]):
    """Run number * 1000 + record entry of each cell, from `within` over every chunk (-1: no
    run), each chunk given its `part` alone."""
    found = np.full(shape, -1, np.int64)
    for region in coverage_parts._regions(shape, chunks):
        numbers, entries, where = cells.part(region).within(region)
        found[region][where] = numbers * 1000 + entries
    return found


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 9)), max_size=5), min_size=1,
             max_size=5),
    st.integers(1, 4),
    st.integers(1, 12),
)  # fmt: skip
def test_station_runs_map_cells_as_the_run_table_does(stations, row_chunk, block_chunk):
    table = []  # (station, first block, blocks), station-major, disjoint within a station
    for index, gaps_and_lengths in enumerate(stations):
        block = 0
        for gap, length in gaps_and_lengths:
            table.append((index, block + gap, length))
            block += gap + length
    shape = (len(stations), max([first + n for _, first, n in table] or [1]))
    expected = np.full(shape, -1, np.int64)
    for number, (station, first, blocks) in enumerate(table):
        expected[station, first : first + blocks] = number * 1000 + np.arange(blocks)
    station, first_block, blocks = np.array(table, dtype=np.int64).reshape(-1, 3).T
    cells = StationRuns.of_table(SimpleNamespace(station=station, first_block=first_block,
                                                 blocks=blocks))  # fmt: skip
    np.testing.assert_array_equal(_dense(shape, cells, (row_chunk, block_chunk)), expected)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 20)), min_size=1, max_size=6),
    st.integers(1, 5),
    st.integers(1, 25),
)
def test_span_runs_map_cells_as_the_das_layout_does(spans, min_runs, chunk):
    touched, block = [], 0
    for gap, length in spans:
        touched.append((block + gap, block + gap + length))
        block += gap + length
    import seisctf.formats.das.das_runs as das_runs

    before, das_runs.MIN_RUNS = das_runs.MIN_RUNS, min_runs
    try:
        layout = RunLayout(None, touched)  # the spans alone decide the runs
    finally:
        das_runs.MIN_RUNS = before
    shape = (block,)
    expected = np.full(shape, -1, np.int64)
    for number in range(len(layout)):
        blocks = layout.blocks_of(number)
        expected[blocks] = number * 1000 + np.arange(len(blocks))
    cells = layout.cells()
    assert isinstance(cells, SpanRuns)
    np.testing.assert_array_equal(_dense(shape, cells, (chunk,)), expected)
