"""`seisctf ingest waveforms` on inputs with something wrong, through the command line: each
problem is reported by the real file's (or folder's) name with what is wrong, in the report
(`problem:` lines) and the store's `ingest_problems`, and the good samples are kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import obspy
import zarr
from scipy.signal import resample_poly
from test_waveforms import I59_DATA, I59_XML, TSINDEX, _cli, _open

from seisctf import conventions as cv

START = obspy.UTCDateTime("2021-03-04T05:06:07")
RATE = 50.0
NAN_AT = 300


def write_non_finite_archive(folder: Path) -> tuple[Path, Path]:
    """A SAC file (written by obspy) of XX.NAN..HHZ with one NaN sample at NAN_AT, and a
    FLOAT64 miniSEED file of XX.INF..HHZ with +Inf at 10 and -Inf at 20."""
    folder.mkdir()
    rng = np.random.default_rng(4)
    header = {"network": "XX", "channel": "HHZ", "sampling_rate": RATE, "starttime": START}
    data = (100 + rng.standard_normal(1000)).astype(np.float32)
    data[NAN_AT] = np.nan
    sac = folder / "nan.sac"
    obspy.Trace(data, {**header, "station": "NAN"}).write(str(sac), format="SAC")
    data = 100 + rng.standard_normal(1000)
    data[10], data[20] = np.inf, -np.inf
    mseed = folder / "inf.mseed"
    obspy.Trace(data, {**header, "station": "INF"}).write(str(mseed), format="MSEED",
                                                          encoding="FLOAT64")  # fmt: skip
    return sac, mseed


def test_non_finite_samples_are_reported_per_file_and_stored_as_gaps(tmp_path, dask_cluster):
    sac, mseed = write_non_finite_archive(tmp_path / "archive")
    out = tmp_path / "store.zarr"
    run = _cli(str(tmp_path / "archive"), "--out", str(out), scheduler=dask_cluster.address)
    assert run.returncode == 0, run.stderr
    nan_time = START + NAN_AT / RATE
    expected = [
        f"{mseed}: 2 non-finite sample(s) (NaN or Inf) in XX.INF..HHZ, the first at "
        f"{START + 10 / RATE}; stored as gaps (NaN)",
        f"{sac}: 1 non-finite sample(s) (NaN or Inf) in XX.NAN..HHZ, the first at {nan_time}; "
        "stored as gaps (NaN)",
    ]
    assert [f"problem: {line}" for line in expected] == [
        line for line in run.stdout.splitlines() if line.startswith("problem:")
    ]
    assert "2 problem(s)" in run.stdout
    ds = _open(out)
    assert ds.attrs["ingest_problems"] == expected
    # The samples are obspy's, the non-finite ones gaps (NaN: never an Inf in the store).
    for path, station in ((sac, "XX.NAN"), (mseed, "XX.INF")):
        original = obspy.read(str(path))[0].data.astype(np.float32)
        original[~np.isfinite(original)] = np.nan
        stored = ds["data"].sel(station=station, channel="HHZ").values
        np.testing.assert_array_equal(stored, original)
    assert np.isfinite(ds["data"].values).sum() == 2 * 1000 - 3

    # Resampled: each run of finite samples on its own, so the NaN does not spread; the run
    # after it continued back by point reflection to 6.00 s (an output sample), then resampled.
    resampled = tmp_path / "resampled.zarr"
    run = _cli(str(sac), "--out", str(resampled), "--rate", "25", scheduler=dask_cluster.address)
    assert run.returncode == 0 and f"problem: {expected[1]}" in run.stdout, run.stderr
    stored = _open(resampled)["data"].values[0, 0]
    samples = obspy.read(str(sac))[0].data.astype(np.float64)
    before = resample_poly(samples[:NAN_AT], 1, 2, padtype="antireflect")
    rest = np.pad(samples[NAN_AT + 1 :], (1, 0), mode="reflect", reflect_type="odd")
    after = resample_poly(rest, 1, 2, padtype="antireflect")[1:]
    assert len(stored) == 500 and len(before) == 150 and len(after) == 349
    np.testing.assert_allclose(stored[:150], before, rtol=1e-6)
    assert np.isnan(stored[150])  # 6.00 s, the NaN's time
    np.testing.assert_allclose(stored[151:], after, rtol=1e-6)

    # --strict: the NaN is fatal, named, and no store is marked complete.
    strict = _cli(str(sac), "--out", str(tmp_path / "strict.zarr"), "--strict",
                  scheduler=dask_cluster.address)  # fmt: skip
    assert strict.returncode == 3 and "Traceback" not in strict.stderr
    assert f"{sac}: 1 non-finite sample(s)" in strict.stderr
    group = zarr.open_group(str(tmp_path / "strict.zarr"), mode="r")
    assert not group.attrs.get(cv.ATTR_COMPLETE)


def test_unreadable_files_and_empty_folders_are_named_by_their_real_paths(tmp_path, dask_cluster):
    folder = tmp_path / "archive"
    folder.mkdir()
    shutil.copy(I59_DATA, folder / "good.mseed")
    (folder / "empty.mseed").write_bytes(b"")
    (folder / "notes.mseed").write_text("not a seismogram\n" * 20)
    shutil.copy(TSINDEX / "timeseries.sqlite", folder / "timeseries.sqlite")
    run = _cli(str(folder), "--out", str(tmp_path / "store.zarr"), scheduler=dask_cluster.address)
    assert run.returncode == 0, run.stderr
    problems = [line for line in run.stdout.splitlines() if line.startswith("problem:")]
    unknown = "unreadable (no obspy reader knows its format (miniSEED, SAC, GSE2, SEG-Y, …))"
    assert problems == [
        f"problem: {folder / 'empty.mseed'}: unreadable (an empty file (0 bytes))",
        f"problem: {folder / 'notes.mseed'}: {unknown}",
        f"problem: {folder / 'timeseries.sqlite'}: {unknown}",
    ]
    assert "obspy-" not in run.stdout + run.stderr and ".tmp" not in run.stdout + run.stderr
    assert _open(tmp_path / "store.zarr").attrs["ingest_problems"] == [p[9:] for p in problems]

    # An empty folder (a hidden file does not count) is named; nothing is written.
    empty = tmp_path / "empty folder"
    empty.mkdir()
    (empty / ".keep").write_text("")
    for sources in ([str(empty)], [str(folder / "good.mseed"), str(empty)]):
        run = _cli(*sources, "--out", str(tmp_path / "none.zarr"), scheduler=dask_cluster.address)
        assert run.returncode == 3 and "Traceback" not in run.stderr
        assert run.stderr.strip().splitlines() == [
            f"seisctf: invalid input: {empty}: no file in this folder or below it (hidden "
            "files are skipped)"
        ]
        assert not (tmp_path / "none.zarr").exists()


def test_a_station_at_another_location_or_epoch_says_what_the_inventory_has(tmp_path, dask_cluster):
    folder = tmp_path / "archive"
    folder.mkdir()
    shutil.copy(I59_DATA, folder / "good.mseed")
    trace = obspy.read(str(I59_DATA))[0]
    trace.stats.location = "00"
    trace.write(str(folder / "location00.mseed"), format="MSEED")
    trace = obspy.read(str(I59_DATA))[0]
    trace.stats.starttime = obspy.UTCDateTime("2019-10-31")  # before the channel's epoch
    trace.write(str(folder / "early.mseed"), format="MSEED")
    run = _cli(str(folder), "--out", str(tmp_path / "store.zarr"), "--inventory", str(I59_XML),
               scheduler=dask_cluster.address)  # fmt: skip
    assert run.returncode == 0, run.stderr
    has = "IM.I59H1..BDF from 2020-05-06T00:00:00 to open"
    assert [line for line in run.stdout.splitlines() if line.startswith("problem:")] == [
        f"problem: {folder / 'early.mseed'}: IM.I59H1..BDF at 2019-10-31T00:00:00.000000Z is "
        f"not in the inventory (channel or epoch contradicts it; it has {has}); trace not "
        "ingested",
        "problem: IM.I59H1.00: unknown station: the inventory has no IM.I59H1 at location code "
        f"'00' (it has {has}); coordinates are NaN",
    ]
    ds = _open(tmp_path / "store.zarr")
    assert list(ds["station"].values) == ["IM.I59H1", "IM.I59H1.00"]
    assert np.isnan(float(ds.sel(station="IM.I59H1.00")[cv.LATITUDE]))


def test_an_ingest_onto_object_storage_prints_no_warning(
    tmp_path, s3_server, s3_bucket, dask_cluster
):
    """SeaweedFS keeps the emptied folder of the deleted progress array; finishing the store
    (a new one, then an append) prints no ZarrUserWarning about it, or any other warning."""
    trace = obspy.read(str(I59_DATA))[0]
    first, second = tmp_path / "first.mseed", tmp_path / "second.mseed"
    trace.slice(endtime=trace.stats.starttime + 200).write(str(first), format="MSEED")
    trace.slice(starttime=trace.stats.starttime + 200.05).write(str(second), format="MSEED")
    url = f"{s3_bucket}/store.zarr"
    for args in ((str(first),), (str(second), "--append")):
        run = _cli(*args, "--out", url, *s3_server.cli_options(), scheduler=dask_cluster.address)
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith(f"wrote {url}: 1 station x ")
        assert "Warning" not in run.stderr and "ingest_progress" not in run.stderr, run.stderr
    # The folder is there (what zarr warned about), the store complete without it.
    fs = s3_server.filesystem()
    path = url.removeprefix("s3://")
    assert f"{path}/ingest_progress" in fs.ls(path, detail=False)
    group = zarr.open_group(fs.get_mapper(path), mode="r")
    assert group.attrs[cv.ATTR_COMPLETE] is True and "ingest_progress" not in group
