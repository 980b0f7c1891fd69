"""Tests of `seisctf ingest waveforms` on real data: obspy's own test archives, and archives written
by obspy (several miniSEED encodings, SAC) with gaps, overlaps and mixed rates, each compared with
an independent obspy read + merge (+ scipy resample_poly) of the same files."""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import obspy
import pytest
import xarray as xr
import zarr
from conftest import on_one_and_two_workers
from dask.callbacks import Callback
from scipy.signal import resample_poly

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.waveforms import IngestReport, ingest_waveforms
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation

OBSPY = Path(obspy.__file__).parent
TSINDEX = OBSPY / "clients/filesystem/tests/data/tsindex_data"  # IU.ANMO, IU.COLA, CU.TGUH 2018-001
I59_DATA = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.mseed"
I59_XML = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.xml"
START = obspy.UTCDateTime("2021-03-04T05:06:07")
RATE = 50.0
STATION_ATTRS = cv.STATION_ATTRS_GROUP  # a waveform store's group beside `data`


def ingest(sources: list[str], out: str | Path, **options) -> IngestReport:
    """`ingest_waveforms` of `sources` into the store at the path `out`, quietly."""
    return ingest_waveforms(sources, StoreLocation(out), quiet=True, **options)


def _open(url: str | Path) -> xr.Dataset:
    """The complete store at `url`, its per-station attrs among its attrs, either layout."""
    ds = storage.open_dataset(StoreLocation(str(url)))
    assert ds.attrs[cv.ATTR_COMPLETE] is True
    return ds


def _reference(files: list[Path], start_ns: int, rate: float) -> dict[tuple[str, str], tuple]:
    """Independent expectation: obspy.read every file, float64, nearest-sample start on the
    grid, Stream.merge(method=1): {(station, channel): (first grid index, samples with NaN)}."""
    stream = obspy.Stream()
    for path in files:
        stream += obspy.read(str(path))
    for trace in stream:
        trace.data = trace.data.astype(np.float64)
        index = math.floor((trace.stats.starttime.ns - start_ns) * rate / 1e9 + 0.5)
        trace.stats.starttime = obspy.UTCDateTime(ns=start_ns + round(index * 1e9 / rate))
    stream.merge(method=1, interpolation_samples=0)
    found = {}
    for trace in stream:
        net, sta, loc = trace.stats.network, trace.stats.station, trace.stats.location
        key = (f"{net}.{sta}" + (f".{loc}" if loc else ""), trace.stats.channel)
        first = round((trace.stats.starttime.ns - start_ns) * rate / 1e9)
        found[key] = (first, np.ma.filled(np.ma.asarray(trace.data, dtype=np.float64), np.nan))
    return found


def _expected_array(ds: xr.Dataset, reference: dict) -> np.ndarray:
    expected = np.full(ds["data"].shape, np.nan, dtype=np.float32)
    stations, channels = list(ds["station"].values), list(ds["channel"].values)
    for (station, channel), (first, samples) in reference.items():
        row = expected[stations.index(station), channels.index(channel)]
        row[first : first + len(samples)] = samples.astype(np.float32)
    return expected


def _assert_store_equals_obspy(url: Path, files: list[Path]) -> xr.Dataset:
    ds = _open(url)
    reference = _reference(files, ds.attrs["start_time_ns"], ds.attrs[cv.ATTR_SAMPLING_RATE])
    expected = _expected_array(ds, reference)
    stored = ds["data"].values
    assert stored.dtype == np.float32
    np.testing.assert_array_equal(stored, expected)  # NaN where NaN, bit for bit elsewhere
    block = ds.attrs["block_samples"]
    stations, channels = list(ds["station"].values), list(ds["channel"].values)
    own = [[channels.index(c) for (s, c) in reference if s == station] for station in stations]
    assert ds.attrs["station_channels"] == {
        station: sorted(channels[row] for row in rows)
        for station, rows in zip(stations, own, strict=True)
    }
    for b in range(ds.sizes["block"]):
        window = expected[:, :, b * block : (b + 1) * block]
        station_coverage = [np.isfinite(window[i, rows]).mean() for i, rows in enumerate(own)]
        # A fraction of the station's own channels: a store of mixed channel sets reaches 1.
        np.testing.assert_allclose(ds["coverage"].values[:, b], station_coverage, rtol=1e-6)
    return ds


def test_obspy_archives_ingest_sample_for_sample_with_stationxml(tmp_path):
    archive = sorted(TSINDEX.rglob("*.mseed"))
    out = tmp_path / "tsindex.zarr"
    report = ingest([str(TSINDEX)], out, block_samples=1000)
    ds = _assert_store_equals_obspy(out, archive)
    assert list(ds["station"].values) == ["CU.TGUH.00", "IU.ANMO.10", "IU.COLA.10"]
    assert list(ds["channel"].values) == ["BHZ"] and ds.sizes["block"] == 3
    assert ds.attrs[cv.ATTR_START_TIME] == "2018-01-01T00:00:00Z"
    assert ds["data"].encoding["chunks"] == (1, 1, 1000)
    # ANMO and COLA start 0.0195 s after 00:00 at 40 Hz: snapped to sample 1 (0.025 s).
    assert ds.attrs["time_offsets_s"]["IU.ANMO.10"] == [pytest.approx(-0.0055)]
    assert np.isnan(ds["data"].sel(station="IU.ANMO.10").values[0, 0])
    assert np.all(np.isnan(ds[cv.LATITUDE].values))  # no inventory given
    # The folder's tsindex SQLite file is reported by name, not ingested.
    assert [p for p in report.problems if "timeseries.sqlite" in p]
    assert ds.attrs["ingest_problems"] == list(report.problems)
    assert {entry["path"] for entry in recorded_inputs(StoreLocation(out))} >= {
        str(p) for p in archive
    }

    out = tmp_path / "i59.zarr"
    ingest([str(I59_DATA)], out, inventories=[str(I59_XML)])
    ds = _assert_store_equals_obspy(out, [I59_DATA])
    station = ds.sel(station="IM.I59H1")
    assert float(station[cv.LATITUDE]) == pytest.approx(19.591532)
    assert float(station["elevation"]) == pytest.approx(1034.0)
    meta = ds.attrs["channel_metadata"]["IM.I59H1"]["BDF"]
    assert meta["sensitivity"] == pytest.approx(33778.28834) and meta["input_units"] == "PA"
    assert ds.attrs["ingest_problems"] == []
    # A re-run over the same inputs leaves the finished store alone; a changed input rewrites it.
    again = ingest([str(I59_DATA)], out, inventories=[str(I59_XML)])
    assert again.up_to_date and again.problems == ()
    copy = tmp_path / "I59H1.mseed"
    shutil.copy(I59_DATA, copy)
    assert ingest([str(copy)], out, inventories=[str(I59_XML)]).up_to_date
    assert not ingest([str(copy)], out, rate=10.0).up_to_date
    assert _open(out).attrs[cv.ATTR_SAMPLING_RATE] == 10.0


def _trace(station: str, channel: str, start: obspy.UTCDateTime, data: np.ndarray, rate=RATE):
    network, code, location = station.split(".")
    header = {"network": network, "station": code, "location": location, "channel": channel,
              "starttime": start, "sampling_rate": rate}  # fmt: skip
    return obspy.Trace(data=data, header=header)


def write_synthetic_archive(root: Path, seed: int = 5) -> list[Path]:
    """Two stations, three channels, integer counts with gaps, overlaps whose values differ,
    a sub-sample start offset, written as STEIM1, STEIM2, INT32, FLOAT64 miniSEED and SAC."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    files = []
    pieces = [  # (station, channel, start sample, samples, format/encoding)
        ("XX.AAA.00", "HHZ", 0, 1500, "STEIM2"),
        ("XX.AAA.00", "HHZ", 1400, 900, "STEIM1"),  # 100-sample overlap, other values
        ("XX.AAA.00", "HHZ", 2600, 800, "INT32"),  # 300-sample gap
        ("XX.AAA.00", "HHZ", 2700, 50, "STEIM2"),  # contained in the previous trace
        ("XX.AAA.00", "HHN", 10, 3000, "SAC"),
        ("XX.AAA.00", "HHE", 0, 1200, "FLOAT64"),
        ("XX.BBB.", "HHZ", 300.3, 2500, "STEIM2"),  # 0.3 sample after the grid
    ]
    for i, (station, channel, first, npts, kind) in enumerate(pieces):
        data = rng.integers(-(2**23), 2**23, npts).astype(np.int32)
        if kind == "FLOAT64":
            data = data.astype(np.float64) / 7.0
        trace = _trace(station, channel, START + first / RATE, data)
        path = root / f"{i:02d}_{station}.{channel}.{'sac' if kind == 'SAC' else 'mseed'}"
        if kind == "SAC":
            trace.write(str(path), format="SAC")
        else:
            trace.write(str(path), format="MSEED", encoding=kind, reclen=512)
        files.append(path)
    return files


def synthetic_problems(files: list[Path], named=str) -> tuple[str, ...]:
    """The problems of `write_synthetic_archive`'s files (`named`: a file's name in them): the
    0.3-sample start of XX.BBB, then its two overlaps with other values, their counts of
    differing samples and largest differences from numpy on obspy's reads."""
    data = [obspy.read(str(path))[0].data.astype(np.float64) for path in files]
    pairs = ((0, 1, data[0][1400:1500], data[1][:100]), (3, 2, data[3], data[2][100:150]))
    spans = ("05:06:35.000000Z to 2021-03-04T05:06:36.980000Z (100 samples)",
             "05:07:01.000000Z to 2021-03-04T05:07:01.980000Z (50 samples)")  # fmt: skip
    overlaps = [
        f"{named(files[lost])}: XX.AAA.00.HHZ from 2021-03-04T{span} overlaps "
        f"{named(files[kept])} with other values ({np.count_nonzero(a != b)} differ, by up to "
        f"{np.abs(a - b).max():g}); the store keeps {named(files[kept])}'s samples there"
        for (lost, kept, a, b), span in zip(pairs, spans, strict=True)
    ]
    shift = (
        f"{named(files[6])}: XX.BBB..HHZ starts 0.006 s after its grid sample (0.3 of a "
        "sample): its samples are stored 0.006 s earlier than recorded (1 of its 1 trace(s) "
        "moved by more than 1% of a sample; every offset is in `time_offsets_s`)"
    )
    return (shift, *overlaps)


def test_synthetic_gaps_overlaps_encodings_and_sac_match_obspy_merge(tmp_path):
    files = write_synthetic_archive(tmp_path / "archive")
    out = tmp_path / "synthetic.zarr"
    report = ingest([str(tmp_path / "archive")], out, block_samples=512)
    assert report.problems == synthetic_problems(files)
    ds = _assert_store_equals_obspy(out, files)
    assert list(ds["channel"].values) == ["HHE", "HHN", "HHZ"]
    assert ds.attrs["time_offsets_s"]["XX.BBB"] == [pytest.approx(0.3 / RATE)]
    z = ds["data"].sel(station="XX.AAA.00", channel="HHZ").values
    second = obspy.read(str(files[1]))[0].data
    np.testing.assert_array_equal(z[1400:1500], second[:100])  # the later trace wins the overlap
    assert np.all(np.isnan(z[2300:2600]))  # the gap
    third = obspy.read(str(files[2]))[0].data
    np.testing.assert_array_equal(z[2700:2750], third[100:150])  # contained trace dropped
    assert ds["data"].encoding["chunks"] == (1, 3, 512)
    # The contained trace gave the store nothing: its input says so, the others do not.
    assert [
        e["path"] for e in recorded_inputs(StoreLocation(out)) if e.get("samples_stored") is False
    ] == [str(files[3])]


def test_mixed_rates_need_rate_and_are_resampled_like_resample_poly(tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "mixed"
    folder.mkdir()
    fast = _trace("XX.FST.", "HHZ", START, rng.standard_normal(2000), rate=100.0)
    slow = _trace("XX.SLW.", "HHZ", START, rng.standard_normal(1000), rate=50.0)
    fast.write(str(folder / "fast.mseed"), format="MSEED", encoding="FLOAT64")
    slow.write(str(folder / "slow.sac"), format="SAC")
    with pytest.raises(InvalidInput, match="give `rate`"):
        ingest([str(folder)], tmp_path / "refused.zarr")
    out = tmp_path / "mixed.zarr"
    ingest([str(folder)], out, rate=50.0)
    ds = _open(out)
    assert ds.attrs[cv.ATTR_SAMPLING_RATE] == 50.0 and ds.sizes["time"] == 1000
    fast = obspy.read(str(folder / "fast.mseed"))[0].data.astype(np.float64)
    expected = resample_poly(fast, 1, 2, padtype="antireflect")
    stored = ds["data"].sel(station="XX.FST", channel="HHZ").values
    np.testing.assert_array_equal(stored, expected.astype(np.float32))
    original = obspy.read(str(folder / "slow.sac"))[0].data.astype(np.float32)
    np.testing.assert_array_equal(ds["data"].sel(station="XX.SLW").values[0], original)


def _chunk_files(url: Path) -> dict[str, tuple[str, int]]:
    """{path in the store: (sha256, mtime_ns)} of every data chunk file."""
    return {
        str(path.relative_to(url)): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mtime_ns,
        )  # fmt: skip
        for path in sorted((url / "data" / "c").rglob("*"))
        if path.is_file()
    }


class _MoveAwayAfter(Callback):
    """Local-scheduler callback: once `after` block tasks have finished, move the archive away
    (the later block tasks then fail to read their files, as on a lost mount)."""

    def __init__(self, after: int, archive: Path, elsewhere: Path):
        super().__init__()
        self.after, self.archive, self.elsewhere, self.finished = after, archive, elsewhere, 0

    def _posttask(self, key, result, dsk, state, worker_id):
        name = key[0] if isinstance(key, tuple) else key
        if str(name).startswith("ingest_block"):
            self.finished += 1
            if self.finished == self.after:
                self.archive.rename(self.elsewhere)


def test_interrupted_ingest_resumes_block_by_block_with_identical_bytes(tmp_path):
    files = write_synthetic_archive(tmp_path / "archive")
    whole = tmp_path / "whole.zarr"
    ingest([str(tmp_path / "archive")], whole, block_samples=512)

    out = tmp_path / "resumed.zarr"
    with _MoveAwayAfter(3, tmp_path / "archive", tmp_path / "moved"):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            ingest([str(tmp_path / "archive")], out, block_samples=512)
    group = zarr.open_group(str(out))
    assert cv.ATTR_COMPLETE not in group.attrs
    done = group["ingest_progress"][:] != ""
    assert 3 <= done.sum() < done.size  # 2 stations x 7 blocks, some written, some not
    before = _chunk_files(out)
    assert before  # some chunks were written before the failure
    (tmp_path / "moved").rename(tmp_path / "archive")

    report = ingest([str(tmp_path / "archive")], out, block_samples=512)
    assert not report.up_to_date and report.problems == synthetic_problems(files)
    # The blocks written before the failure kept their problems and lost files (progress).
    assert recorded_inputs(StoreLocation(out)) == recorded_inputs(StoreLocation(whole))
    _assert_store_equals_obspy(out, files)
    after = _chunk_files(out)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in _chunk_files(whole).items()}
    assert all(after[name] == before[name] for name in before)  # not rewritten: same mtime_ns
    assert "ingest_progress" not in zarr.open_group(str(out))
    # inputs: written whole by the resume; by the one-shot run, its samples_stored alone
    for name in ("coverage", "station", "latitude", "inputs"):
        assert _store_digest(out / name, skip=out) == _store_digest(whole / name, skip=whole)
    assert any(e.get("samples_stored") is False for e in recorded_inputs(StoreLocation(whole)))
    assert _open(out).attrs == _open(whole).attrs
    np.testing.assert_array_equal(report.coverage, _open(whole)["coverage"].values)


@pytest.mark.parametrize("limit", ["tasks", "traces"])
def test_ingest_in_waves_writes_the_bytes_of_one_wave(tmp_path, monkeypatch, limit):
    """Above MAX_TASKS_PER_WAVE runs, or MAX_TRACES_PER_WAVE traces they read, the blocks are
    computed in waves (a 50 TB archive's ~10^6 tasks; 10^5 files' graph): the store is byte
    for byte the one-wave store."""
    import seisctf.cluster
    from seisctf.formats.obspy_archive import waveforms

    files = write_synthetic_archive(tmp_path / "archive")
    whole = tmp_path / "whole.zarr"
    ingest([str(f) for f in files], whole, block_samples=512)
    if limit == "tasks":
        monkeypatch.setattr(seisctf.cluster, "MAX_TASKS_PER_WAVE", 4)  # 13 runs: 4 waves
    else:  # each run reads 1 to 3 traces: at most 3 a wave makes a wave of 1 to 3 runs
        monkeypatch.setattr(waveforms, "MAX_TRACES_PER_WAVE", 3)
    waved = tmp_path / "waved.zarr"
    waves: list[int] = []  # block tasks of each compute that ingests blocks

    def count(dsk, state) -> None:
        blocks = sum(str(key).startswith("ingest_block-") for key in dsk)
        waves.extend([blocks] * bool(blocks))

    with Callback(start_state=count):
        ingest([str(f) for f in files], waved, block_samples=512)
    if limit == "tasks":
        assert waves == [4, 4, 4, 1], waves  # 14 blocks, one without data: no task
    else:
        assert sum(waves) == 13 and len(waves) >= 5 and max(waves) <= 3, waves
    _assert_store_equals_obspy(waved, files)
    assert _store_digest(waved, skip=waved / "zarr.json") == _store_digest(
        whole, skip=whole / "zarr.json"
    )


DAY = 86400


def write_day_files(root: Path, day: int, seed: int, rate: float = 1.0) -> list[Path]:
    """Day files (STEIM2, one per station and channel) of day `day` after START's midnight; day 1
    of XX.BBB. starts 1000 s late, so the stations' first samples differ."""
    rng = np.random.default_rng(seed)
    midnight = obspy.UTCDateTime(START.date) + day * DAY
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for station in ("XX.AAA.00", "XX.BBB."):
        for channel in ("HHE", "HHZ"):
            late = 1000 if (station == "XX.BBB." and day == 1) else 0
            data = rng.integers(-(2**20), 2**20, int(DAY * rate) - late).astype(np.int32)
            trace = _trace(station, channel, midnight + late / rate, data, rate=rate)
            path = root / f"{station}{channel}.{midnight.year}.{midnight.julday:03d}.mseed"
            trace.write(str(path), format="MSEED", encoding="STEIM2", reclen=4096)
            files.append(path)
    return files


def test_append_day_files_extends_time_and_keeps_old_chunks(tmp_path):
    day1 = write_day_files(tmp_path / "day1", 0, seed=1)
    day2 = write_day_files(tmp_path / "day2", 1, seed=2)
    block = 5000  # day 1 fills blocks 0-16 and 1400 samples of block 17
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    ingest([str(tmp_path / "day1")], appended, block_samples=block)
    before = _chunk_files(appended)
    # An append interrupted after two blocks leaves an unfinished store; appending again resumes.
    with _MoveAwayAfter(2, tmp_path / "day2", tmp_path / "moved"):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            ingest([str(tmp_path / "day2")], appended, append=True)
    assert zarr.open_group(str(appended)).attrs[cv.ATTR_COMPLETE] is False
    (tmp_path / "moved").rename(tmp_path / "day2")
    with pytest.raises(InvalidInput, match="interrupted append of other files"):
        ingest([str(day2[0])], appended, append=True)
    report = ingest([str(tmp_path / "day2")], appended, append=True, block_samples=99)
    assert not report.up_to_date and report.plan.n_time == 2 * DAY
    ingest([str(tmp_path / "day1"), str(tmp_path / "day2")], whole, block_samples=block)
    ds = _assert_store_equals_obspy(appended, day1 + day2)
    assert ds.sizes["time"] == 2 * DAY and ds.attrs["block_samples"] == block
    reference = _open(whole)
    np.testing.assert_array_equal(ds["data"].values, reference["data"].values)
    np.testing.assert_array_equal(ds["coverage"].values, reference["coverage"].values)
    # Same inputs, fingerprint, problems; the appended table is in the group the attr names.
    assert ds.attrs.pop("inputs_table") == "inputs_next" and ds.attrs == reference.attrs
    assert sorted(zarr.open_group(str(appended)).group_keys()) == ["inputs_next", STATION_ATTRS]
    assert recorded_inputs(StoreLocation(appended)) == recorded_inputs(StoreLocation(whole))
    after = _chunk_files(appended)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in _chunk_files(whole).items()}
    # Day-1 chunks stay as written, except each station's partial block 17, which day 2 completes.
    rewritten = {name for name in before if after[name] != before[name]}
    assert rewritten == {"data/c/0/0/17", "data/c/1/0/17"}
    assert "ingest_progress" not in zarr.open_group(str(appended))

    again = ingest([str(day2[0])], appended, append=True)
    assert again.up_to_date
    other = _trace("XX.NEW.", "HHZ", obspy.UTCDateTime(START.date) + 3 * DAY, np.ones(9, "i4"), 1.0)
    other.write(str(tmp_path / "new.mseed"), format="MSEED")
    with pytest.raises(InvalidInput, match="station XX.NEW is not in"):
        ingest([str(tmp_path / "new.mseed")], whole, append=True)
    changed = day1[1]
    trace = obspy.read(str(changed))[0]
    trace.data[:10] += 1
    trace.write(str(changed), format="MSEED", encoding="STEIM2", reclen=4096)
    day3 = write_day_files(tmp_path / "day3", 2, seed=3)
    with pytest.raises(InvalidInput, match="changed since it was ingested") as error:
        ingest([str(day3[0])], appended, append=True)
    assert error.value.what == str(changed)
    with pytest.raises(InvalidInput, match="needs an existing store"):
        ingest([str(day3[0])], tmp_path / "none.zarr", append=True)


def test_an_append_killed_writing_its_inputs_table_resumes(tmp_path, monkeypatch):
    """The append's table is written beside the old one and named with the completion marker:
    an append stopped half-way through writing it (an error after one of its chunks) leaves
    the old table in use, and the re-run finishes to a one-shot ingest's inputs and data."""
    from seisctf.formats.shared import table_pieces

    day1 = write_day_files(tmp_path / "day1", 0, seed=1)
    day2 = write_day_files(tmp_path / "day2", 1, seed=2)
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    ingest([str(tmp_path / "day1")], appended, block_samples=5000)
    ingest([str(tmp_path / "day1"), str(tmp_path / "day2")], whole, block_samples=5000)
    write_chunk, calls = table_pieces._write_chunk, []

    def stop_after_one(*args):
        calls.append(args)  # (the chunks may be written at once, on threads)
        if len(calls) > 1:  # (the append writes one table: its own, at the end)
            raise KeyboardInterrupt  # as a kill would stop it
        return write_chunk(*args)

    monkeypatch.setattr(table_pieces, "_write_chunk", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        ingest([str(tmp_path / "day2")], appended, append=True)
    monkeypatch.setattr(table_pieces, "_write_chunk", write_chunk)
    assert zarr.open_group(str(appended)).attrs[cv.ATTR_COMPLETE] is False
    assert [e["path"] for e in recorded_inputs(StoreLocation(appended))] == [
        str(p) for p in sorted(day1)
    ]
    report = ingest([str(tmp_path / "day2")], appended, append=True)
    assert not report.up_to_date
    assert recorded_inputs(StoreLocation(appended)) == recorded_inputs(StoreLocation(whole))
    ds = _assert_store_equals_obspy(appended, day1 + day2)
    np.testing.assert_array_equal(ds["data"].values, _open(whole)["data"].values)
    assert sorted(zarr.open_group(str(appended)).group_keys()) == ["inputs_next", STATION_ATTRS]


def test_an_append_keeps_the_last_blocks_it_does_not_touch_and_grows_their_coverage(tmp_path):
    """Day 2 of XX.AAA.00 alone appended: XX.BBB.'s last, partial block keeps its chunk (nothing
    new in it), its coverage counts its samples over the grown block, as a one-shot ingest's."""
    day1 = write_day_files(tmp_path / "day1", 0, seed=1)
    day2 = [path for path in write_day_files(tmp_path / "day2", 1, seed=2) if "AAA" in path.name]
    block = 5000  # day 1 fills blocks 0-16 and 1400 samples of block 17
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    ingest([str(tmp_path / "day1")], appended, block_samples=block)
    before = _chunk_files(appended)
    ingest([str(p) for p in day2], appended, append=True)
    ingest([str(p) for p in day1 + day2], whole, block_samples=block)
    ds, reference = _open(appended), _open(whole)
    np.testing.assert_array_equal(ds["coverage"].values, reference["coverage"].values)
    station = list(ds["station"].values).index("XX.BBB")
    assert 0 < ds["coverage"].values[station, 17] < 1  # 1400 of the grown block's 5000 samples
    after = _chunk_files(appended)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in _chunk_files(whole).items()}
    assert {name for name in before if after[name] != before[name]} == {"data/c/0/0/17"}


def test_s3_inputs_ingest_to_the_same_bytes_as_local_files(
    tmp_path, s3_server, s3_bucket, dask_cluster
):
    files = write_synthetic_archive(tmp_path / "archive")
    fs = s3_server.filesystem()
    for path in files:
        fs.put_file(str(path), f"{s3_bucket}/archive/{path.name}".removeprefix("s3://"))
    fs.put_file(str(files[0]), f"{s3_bucket}/archive/.hidden".removeprefix("s3://"))
    local, remote = tmp_path / "local.zarr", tmp_path / "remote.zarr"
    ingest([str(tmp_path / "archive")], local, block_samples=512)
    remote_store = StoreLocation.from_url(remote, s3_server.storage_options)
    report = ingest_waveforms([f"{s3_bucket}/archive"], remote_store, block_samples=512, quiet=True)
    assert report.problems == synthetic_problems(files, lambda p: f"{s3_bucket}/archive/{p.name}")
    ds = _assert_store_equals_obspy(remote, files)
    assert sorted(e["path"] for e in recorded_inputs(StoreLocation(remote))) == sorted(
        f"{s3_bucket}/archive/{path.name}" for path in files
    )
    assert ds.attrs["ingest_fingerprint"] == _open(local).attrs["ingest_fingerprint"]
    assert _chunk_files(remote).keys() == _chunk_files(local).keys()
    for name in ("data", "coverage", "station"):
        assert _store_digest(remote / name, skip=remote) == _store_digest(local / name, skip=local)
    # The CLI on a real cluster: workers read the objects with the --storage-option values.
    cli = _cli(f"{s3_bucket}/archive/*.mseed", f"{s3_bucket}/archive/*.sac", "--out",
               str(tmp_path / "cli.zarr"), *s3_server.cli_options(),
               scheduler=dask_cluster.address)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    _assert_store_equals_obspy(tmp_path / "cli.zarr", files)
    with pytest.raises(InvalidInput, match="no such object") as error:
        ingest_waveforms(
            [f"{s3_bucket}/nothing/*.mseed"], remote_store.with_url(tmp_path / "x.zarr")
        )
    assert error.value.what == f"{s3_bucket}/nothing/*.mseed"


def _store_digest(url: Path, skip: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in url.rglob("*") if p.is_file() and p != skip):
        digest.update(str(path.relative_to(url)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_one_and_two_workers_write_identical_bytes(tmp_path):
    files = write_synthetic_archive(tmp_path / "archive")

    def digest(root: Path) -> str:
        out = root / "store.zarr"
        ingest([str(f) for f in files], out, block_samples=512)
        _assert_store_equals_obspy(out, files)
        # Every array's bytes; the group's attrs hold this run's tmp_path in `inputs`.
        return _store_digest(out, skip=out / "zarr.json")

    one, two = on_one_and_two_workers(digest, tmp_path)
    assert one == two


def _bad_archive(root: Path) -> dict[str, Path]:
    """Good I59H1 data plus a truncated, a corrupt, an unknown-station and a contradicting file."""
    root.mkdir(parents=True, exist_ok=True)
    good = root / "good.mseed"
    shutil.copy(I59_DATA, good)
    truncated = root / "truncated.mseed"
    raw = I59_DATA.read_bytes()
    truncated.write_bytes(raw[: len(raw) - 300])  # the last 512-byte record cut short
    corrupt = root / "corrupt.mseed"
    corrupt.write_bytes(os.urandom(3000))
    unknown = root / "unknown.mseed"
    trace = obspy.read(str(I59_DATA))[0]
    trace.stats.station = "NOPE"
    trace.write(str(unknown), format="MSEED")
    contradicting = root / "contradicting.mseed"
    trace = obspy.read(str(I59_DATA))[0]
    trace.stats.channel, trace.stats.sampling_rate = "BDF", 40.0  # inventory: 20 Hz
    trace.stats.location = ""
    trace.stats.starttime += 86400  # a later day, same station
    trace.write(str(contradicting), format="MSEED")
    return {"truncated": truncated, "corrupt": corrupt, "unknown": unknown,
            "contradicting": contradicting, "good": good}  # fmt: skip


def test_bad_inputs_are_reported_by_name_and_good_data_kept(tmp_path):
    files = _bad_archive(tmp_path / "bad")
    out = tmp_path / "bad.zarr"
    report = ingest([str(tmp_path / "bad")], out, inventories=[str(I59_XML)])
    text = "\n".join(report.problems)
    for name in ("truncated", "corrupt", "contradicting"):
        assert str(files[name]) in text, name
    assert "IM.NOPE: unknown station" in text
    ds = _open(out)
    assert ds.attrs["ingest_problems"] == list(report.problems)
    assert list(ds["station"].values) == ["IM.I59H1", "IM.NOPE"]
    assert np.isnan(float(ds.sel(station="IM.NOPE")[cv.LATITUDE]))
    # The contradicting day is not ingested: the store ends with the good day.
    assert ds.sizes["time"] == obspy.read(str(I59_DATA))[0].stats.npts
    # good + truncated overlap fully (the truncated file's complete records are its prefix).
    _assert_store_equals_obspy(out, [files["good"], files["truncated"], files["unknown"]])


def _cli(*args: str, scheduler: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "waveforms", *args]
    return subprocess.run(
        [*command, "--scheduler", scheduler, "--quiet"], capture_output=True, text=True, timeout=120
    )


def test_cli_strict_unreadable_inventory_and_no_readable_input_exit_3(tmp_path, dask_cluster):
    files = _bad_archive(tmp_path / "bad")
    address = dask_cluster.address
    strict = _cli(str(tmp_path / "bad"), "--out", str(tmp_path / "s.zarr"), "--inventory",
                  str(I59_XML), "--strict", scheduler=address)  # fmt: skip
    assert strict.returncode == 3, strict.stderr
    assert "Traceback" not in strict.stderr
    for name in ("truncated", "corrupt", "contradicting"):
        assert str(files[name]) in strict.stderr
    assert not (tmp_path / "s.zarr").exists()

    lenient = _cli(str(files["good"]), str(files["truncated"]), "--out", str(tmp_path / "l.zarr"),
                   scheduler=address)  # fmt: skip
    assert lenient.returncode == 0, lenient.stderr
    assert f"problem: {files['truncated']}: truncated" in lenient.stdout
    assert _open(tmp_path / "l.zarr").attrs[cv.ATTR_COMPLETE] is True
    appended = _cli(str(files["good"]), "--out", str(tmp_path / "l.zarr"), "--append",
                    scheduler=address)  # fmt: skip
    assert appended.returncode == 0 and "up to date:" in appended.stdout, appended.stderr

    bad_xml = tmp_path / "broken.xml"
    bad_xml.write_text("<FDSNStationXML><Network")
    broken = _cli(str(files["good"]), "--out", str(tmp_path / "x.zarr"), "--inventory",
                  str(bad_xml), scheduler=address)  # fmt: skip
    assert broken.returncode == 3 and str(bad_xml) in broken.stderr
    assert "Traceback" not in broken.stderr

    nothing = _cli(str(files["corrupt"]), "--out", str(tmp_path / "n.zarr"), scheduler=address)
    assert nothing.returncode == 3 and str(files["corrupt"]) in nothing.stderr
    assert "no input is readable" in nothing.stderr and "Traceback" not in nothing.stderr
