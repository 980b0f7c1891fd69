"""`seisctf ingest waveforms` on inputs with something wrong, through the command line: each
problem is reported by the real file's name with what is wrong, in the report (`problem:` lines)
and the store's `ingest_problems`, and the good samples are kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import obspy
import zarr
from scipy.signal import resample_poly
from test_waveforms import _cli, _open

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
    for path, station in ((sac, "XX.NAN."), (mseed, "XX.INF.")):
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
