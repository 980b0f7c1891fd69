"""`seisctf.open_store`: stores ingested through the CLI open with lazy `time` (and, for DAS,
`distance`) axes whose selections equal numpy slicing of the stored arrays, obspy's
`Stream.slice` of the source miniSEED and DASCore's `Patch.select` of the source files; label
selection behaves as on a materialised pandas index; a long store opens without per-sample
memory; S3 works the same."""

from __future__ import annotations

import math
import subprocess
import sys
import tracemalloc
from pathlib import Path

import dascore as dc
import matplotlib
import numpy as np
import obspy
import pandas as pd
import pytest
import xarray as xr
import zarr
from das_vendor_files import write_dasdae

import seisctf
from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.store_view import GridIndex, RegularTime, grid_coordinates
from seisctf.synth import das_synth

matplotlib.use("Agg")

OBSPY = Path(obspy.__file__).parent
TSINDEX = OBSPY / "clients/filesystem/tests/data/tsindex_data"  # IU.ANMO, IU.COLA, CU.TGUH 2018-001
I59_DATA = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.mseed"
START = obspy.UTCDateTime("2018-01-01T00:00:00")
RATE = 50.0
MINUTES = 30


def seisctf_cli(*args: str, scheduler: str) -> subprocess.CompletedProcess:
    """`seisctf ARGS --scheduler S --quiet` as a user runs it; must succeed."""
    command = [sys.executable, "-m", "seisctf.cli", *args, "--scheduler", scheduler, "--quiet"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def write_archive(root: Path) -> list[Path]:
    """Two stations, 30 min at 50 Hz as float32 miniSEED (values exact in the store): XX.AAA
    starts on the second; XX.BBB 6 ms (0.3 sample) later and has a 61 s gap from 00:14:00."""
    rng = np.random.default_rng(7)
    n = MINUTES * 60 * int(RATE)
    files = []
    for station, offset_s in (("AAA", 0.0), ("BBB", 0.006)):
        data = rng.standard_normal(n).astype(np.float32) * 1000
        pieces = [(0, n)] if station == "AAA" else [(0, 14 * 3000), (14 * 3000 + 3050, n)]
        for k, (i0, i1) in enumerate(pieces):
            trace = obspy.Trace(data[i0:i1].copy())
            trace.stats.update(
                {
                    "network": "XX",
                    "station": station,
                    "location": "00",
                    "channel": "HHZ",
                    "sampling_rate": RATE,
                    "starttime": START + offset_s + i0 / RATE,
                }
            )
            path = root / f"XX.{station}.{k}.mseed"
            root.mkdir(parents=True, exist_ok=True)
            trace.write(str(path), format="MSEED", encoding="FLOAT32")
            files.append(path)
    return files


@pytest.fixture(scope="module")
def archive_store(tmp_path_factory, dask_cluster) -> tuple[str, list[Path]]:
    root = tmp_path_factory.mktemp("archive")
    files = write_archive(root / "mseed")
    out = str(root / "archive.zarr")
    seisctf_cli("ingest", "waveforms", str(root / "mseed"), "--out", out,
                scheduler=dask_cluster.address)  # fmt: skip
    return out, files


def obspy_span(files: list[Path], station: str, start: str, stop: str) -> np.ndarray:
    """The samples obspy gives for [start, stop] of a station: read, merge (gaps masked),
    `Stream.slice` (both ends included, as `nearest_sample=False`), NaN where masked."""
    stream = obspy.Stream()
    for path in files:
        stream += obspy.read(str(path))
    stream = stream.select(station=station)
    stream.merge(method=1)
    begin, end = obspy.UTCDateTime(start), obspy.UTCDateTime(stop)
    [trace] = stream.slice(begin, end, nearest_sample=True)
    return np.ma.filled(np.ma.asarray(trace.data, dtype=np.float32), np.nan)


def test_ten_minutes_equal_numpy_slicing_and_obspy(archive_store):
    url, files = archive_store
    ds = seisctf.open_store(url)
    assert ds.time.dtype == np.dtype("datetime64[ns]")
    assert isinstance(ds.xindexes["time"], GridIndex)
    assert ds.time.values[0] == np.datetime64("2018-01-01T00:00:00", "ns")
    start, stop = "2018-01-01T00:10", "2018-01-01T00:20"
    part = ds.data.sel(time=slice(start, stop))
    assert part.sizes["time"] == 10 * 60 * int(RATE) + 1  # both ends included
    # numpy: positions (t - start) × rate of the stored array, opened without seisctf
    raw = xr.open_zarr(url)["data"].values
    first = math.ceil((pd.Timestamp(start) - pd.Timestamp("2018-01-01")).total_seconds() * RATE)
    last = math.floor((pd.Timestamp(stop) - pd.Timestamp("2018-01-01")).total_seconds() * RATE)
    np.testing.assert_array_equal(part.values, raw[:, :, first : last + 1])
    expected_times = np.datetime64(start, "ns") + np.arange(part.sizes["time"]) * np.timedelta64(
        20_000_000, "ns"
    )
    np.testing.assert_array_equal(part.time.values, expected_times)
    # obspy: the same span of the source files (BBB's traces are 0.3 sample late: the ingest
    # put them on their nearest grid sample, as obspy's nearest-sample slicing does)
    for station in ("AAA", "BBB"):
        got = part.sel(station=f"XX.{station}.00", channel="HHZ").values
        expected = obspy_span(files, station, start, stop)
        np.testing.assert_array_equal(got, expected)
    gap = part.sel(station="XX.BBB.00", time=slice("2018-01-01T00:14:00.02", "2018-01-01T00:15"))
    assert np.isnan(gap.values).all() and gap.sizes["time"] == 50 * 60
    # lazy until asked: Dask-backed, `.load()` reads the span, isel and plots work
    assert part.chunks is not None
    loaded = part.isel(station=0, channel=0).load()
    assert isinstance(loaded.variable._data, np.ndarray)
    line = loaded.plot()[0]
    np.testing.assert_array_equal(line.get_xdata(), loaded.time.values)
    np.testing.assert_array_equal(line.get_ydata(), loaded.values)
    assert part.isel(time=slice(100, 200, 10)).time.values[1] == expected_times[110]


def test_real_iu_and_cu_data_equal_obspy_slices(tmp_path, dask_cluster):
    out = str(tmp_path / "tsindex.zarr")
    seisctf_cli("ingest", "waveforms", str(TSINDEX), "--out", out, scheduler=dask_cluster.address)
    ds = seisctf.open_store(out)
    assert ds.time.values[0] == np.datetime64("2018-01-01T00:00:00", "ns")
    assert list(ds.station.values) == ["CU.TGUH.00", "IU.ANMO.10", "IU.COLA.10"]
    assert {"latitude", "longitude", "elevation", "channel"} <= set(ds.coords)
    start, stop = "2018-01-01T00:00:10", "2018-01-01T00:00:40"
    part = ds.data.sel(time=slice(start, stop), channel="BHZ")
    assert part.sizes["time"] == 30 * 40 + 1
    for path in sorted(TSINDEX.rglob("*.mseed")):
        [trace] = obspy.read(str(path)).slice(obspy.UTCDateTime(start), obspy.UTCDateTime(stop))
        station = ".".join(trace.id.split(".")[:3])
        # IU starts 19.5 ms after the second: stored from its nearest grid sample (5.5 ms off)
        np.testing.assert_array_equal(
            part.sel(station=station).values, trace.data.astype(np.float32)
        )
    nearest = ds.sel(time="2018-01-01T00:00:10.013", method="nearest").time.values
    assert nearest == np.datetime64("2018-01-01T00:00:10.025", "ns")


def test_das_store_time_and_distance_equal_dascore_select(tmp_path, dask_cluster):
    folder = tmp_path / "das"
    folder.mkdir()
    start = np.datetime64("2024-01-02T03:04:05", "ns")
    rng = np.random.default_rng(3)
    path = write_dasdae(
        folder / "one.h5", rng.standard_normal((3000, 40)).astype(np.float32), start, 50.0,
        spacing_m=2.5,
    )  # fmt: skip
    out = str(tmp_path / "das.zarr")
    seisctf_cli("ingest", "das", str(folder), "--out", out, scheduler=dask_cluster.address)
    ds = seisctf.open_store(out)
    assert isinstance(ds.xindexes["time"], GridIndex)
    assert isinstance(ds.xindexes["distance"], GridIndex)
    assert ds["distance"].attrs["units"] == "m"
    patch = dc.read(str(path))[0].transpose("time", "distance")
    np.testing.assert_array_equal(ds.time.values, patch.get_coord("time").values)
    np.testing.assert_array_equal(ds.distance.values, patch.get_coord("distance").values)
    t0, t1 = np.datetime64("2024-01-02T03:04:10", "ns"), np.datetime64("2024-01-02T03:04:30", "ns")
    part = ds.strain_rate.sel(time=slice(t0, t1), distance=slice(10.0, 50.0))
    selected = patch.select(time=(t0, t1), distance=(10.0, 50.0))
    np.testing.assert_array_equal(part.values, np.asarray(selected.data, dtype=np.float32))
    np.testing.assert_array_equal(part.time.values, selected.get_coord("time").values)
    np.testing.assert_array_equal(part.distance.values, selected.get_coord("distance").values)
    assert ds.sel(distance=12.4, method="nearest").distance.values == 12.5


def test_synthetic_das_store_gets_the_same_axes():
    cable = das_synth.Cable(n_channels=70, channel_spacing_m=8.0)
    slots = das_synth.default_slots(9, cv.SEGMENT_ROLES[:4], 60.0, cable.length_m)
    store = seisctf.store_view.with_axes(das_synth.synthesize_das(cable, slots, 300, seed=5))
    # `start_time` (ISO 8601, no `start_time_ns`) and 5 Hz: 200 ms steps
    expected = pd.Timestamp(store.attrs[cv.ATTR_START_TIME]).tz_localize(None)
    assert store.time.values[3] == np.datetime64(expected, "ns") + np.timedelta64(600, "ms")
    assert isinstance(store.xindexes["distance"], GridIndex)
    np.testing.assert_array_equal(store.distance.values, np.arange(70) * 8.0)
    assert "water_depth" in store.coords


def outcome(ds: xr.Dataset, labels: list, options: dict) -> list | str:
    """The values `ds.sel(time=labels, **options)` selects, or "KeyError"."""
    try:
        return ds.sel(time=labels, **options).v.values.tolist()
    except KeyError:
        return "KeyError"


def test_label_selection_matches_a_materialised_pandas_index():
    """The lazy index against xarray's own PandasIndex of the same labels (an independent
    computation), for instants, nearest/pad/backfill with tolerance, arrays, isel."""
    n, start_ns, rate = 100_000, int(pd.Timestamp("2018-01-01").value) + 7, 3.0
    time = RegularTime(n, start_ns, rate)
    values = np.arange(n, dtype=np.float32)
    lazy = xr.Dataset({"v": ("time", values)}).assign_coords(grid_coordinates(time, {}))
    labels = pd.DatetimeIndex(start_ns + np.rint(np.arange(n) * 1e9 / rate).astype(np.int64))
    eager = xr.Dataset({"v": ("time", values)}, coords={"time": labels.as_unit("ns")})
    np.testing.assert_array_equal(lazy.time.values, eager.time.values)
    t = labels[500]
    instants = [t, t + pd.Timedelta("1ns"), t - pd.Timedelta("1ns"), labels[0] - pd.Timedelta("1s")]
    for a in instants:
        for b in [
            labels[900],
            labels[900] + pd.Timedelta("100ms"),
            labels[-1] + pd.Timedelta("1s"),
        ]:
            for kind in (np.datetime64, str):
                span = slice(kind(a.as_unit("ns").isoformat()), kind(b.as_unit("ns").isoformat()))
                if kind is np.datetime64:
                    span = slice(a.to_datetime64(), b.to_datetime64())
                np.testing.assert_array_equal(lazy.sel(time=span).v, eager.sel(time=span).v)
    for method in ("nearest", "pad", "backfill"):
        for tolerance in (None, "200ms"):
            query = [labels[10] + pd.Timedelta("0.1s"), labels[20] - pd.Timedelta("0.2s")]
            options = {"method": method, "tolerance": tolerance}
            assert outcome(lazy, query, options) == outcome(eager, query, options), options
    assert float(lazy.sel(time=labels[42]).v) == 42.0
    with pytest.raises(KeyError):
        lazy.sel(time=labels[42] + pd.Timedelta("1ms"))
    with pytest.raises(KeyError):
        lazy.sel(time=labels[42] + pd.Timedelta("150ms"), method="nearest", tolerance="100ms")
    with pytest.raises(TypeError, match="dates and times"):
        lazy.sel(time=5)
    for cut in (slice(7, 5000, 13), slice(None, None, -3), [3, -1, 17]):
        np.testing.assert_array_equal(lazy.isel(time=cut).time, eager.isel(time=cut).time)
    stepped = lazy.isel(time=slice(7, 5000, 13))
    assert isinstance(stepped.xindexes["time"], GridIndex)
    span = slice(labels[40].to_datetime64(), labels[400].to_datetime64())
    np.testing.assert_array_equal(
        stepped.sel(time=span).v, eager.isel(time=slice(7, 5000, 13)).sel(time=span).v
    )
    # text is an instant (obspy's reading), not pandas' whole minute; `Z` and offsets are UTC
    # (samples at 7 ns + k / 3 s: 00:00:00 to 00:01:00 holds k = 0 … 179)
    minute = slice("2018-01-01T00:00", "2018-01-01T00:01")
    assert lazy.sel(time=minute).sizes["time"] == 180
    assert eager.sel(time=minute).sizes["time"] == 360  # pandas: up to 00:01:59.999…
    assert lazy.sel(time=slice("2018-01-01T01:00+01:00", "2018-01-01T00:01Z")).sizes["time"] == 180
    window = slice(obspy.UTCDateTime("2018-01-01T00:00:00"), obspy.UTCDateTime("2018-01-01T00:01"))
    assert lazy.sel(time=window).sizes["time"] == 180


def lazy_and_eager(n: int = 1000, start_ns: int = 5, rate: float = 7.0) -> tuple:
    """The same DataArray with the lazy axis and with a materialised pandas index."""
    lazy = xr.DataArray(np.arange(n, dtype=np.float32), dims="time", name="v")
    lazy = lazy.assign_coords(grid_coordinates(RegularTime(n, start_ns, rate), {}))
    labels = start_ns + np.rint(np.arange(n) * 1e9 / rate).astype(np.int64)
    return lazy, lazy.drop_vars("time").assign_coords(time=labels.view("datetime64[ns]"))


OPERATIONS = {  # name: (operation, whether the result keeps the lazy axis)
    "inner": (lambda v: v.isel(time=slice(0, 10)) + v.isel(time=slice(5, 15)), True),
    "outer": (
        lambda v: xr.align(v.isel(time=slice(0, 10)), v.isel(time=slice(5, 15)), join="outer")[0],
        True,
    ),
    "outer-gap": (
        lambda v: xr.align(v.isel(time=slice(0, 10)), v.isel(time=slice(50, 60)), join="outer")[1],
        False,
    ),
    "left": (
        lambda v: xr.align(v.isel(time=slice(0, 10, 2)), v.isel(time=slice(1, 10)), join="left")[1],
        True,
    ),
    "concat": (
        lambda v: xr.concat([v.isel(time=slice(0, 5)), v.isel(time=slice(5, 12))], "time"),
        True,
    ),
    "concat-overlap": (
        lambda v: xr.concat([v.isel(time=slice(0, 10)), v.isel(time=slice(5, 15))], "time"),
        False,
    ),
    "where-drop": (lambda v: v.where(v > 500, drop=True), False),
    "mask": (lambda v: v.isel(time=(v > 990).values), False),
    "resample": (lambda v: v.resample(time="1s").mean(), False),
    "rename": (
        lambda v: v.rename(time="when").sel(when=slice(v.time[3].values, None)).rename(when="time"),
        True,
    ),
    "sortby": (lambda v: v.sortby("time", ascending=False).isel(time=slice(0, 3)), False),
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_alignment_concat_and_masks_match_a_pandas_index(name):
    operation, stays_lazy = OPERATIONS[name]
    lazy, eager = lazy_and_eager()
    result = operation(lazy)
    xr.testing.assert_identical(result.drop_indexes("time"), operation(eager).drop_indexes("time"))
    assert isinstance(result.xindexes["time"], GridIndex) == stays_lazy


def write_long_store(url: str, n_time: int) -> None:
    """A complete waveform store of `n_time` samples (2 stations, 3 channels) with no chunk
    written (all NaN): its metadata as `ingest waveforms` writes it."""
    group = zarr.open_group(url, mode="w", zarr_format=3)
    data = group.create_array(
        cv.WAVEFORM_VAR, shape=(2, 3, n_time), chunks=(1, 3, 2**22), dtype="float32",
        fill_value=np.nan, dimension_names=cv.WAVEFORM_DIMS,
    )  # fmt: skip
    data.attrs["coordinates"] = "latitude longitude"
    for name, values in (("station", ["XX.A.00", "XX.B.00"]), ("channel", ["HHE", "HHN", "HHZ"])):
        group.create_array(name, shape=(len(values),), dtype=str, dimension_names=(name,))[:] = (
            np.array(values, dtype=object)
        )
    for name in ("latitude", "longitude"):
        array = group.create_array(name, shape=(2,), dtype="float64", dimension_names=("station",))
        array[:] = [1.0, 2.0]
    start_ns = int(pd.Timestamp("2000-01-01").value)
    attrs = {
        "start_time": "2000-01-01T00:00:00Z",
        "start_time_ns": start_ns,
        "sampling_rate": 100.0,
    }
    storage.finish_group(StoreLocation(url), attrs)


def test_a_long_store_opens_without_per_sample_memory(tmp_path):
    n_time = 10 * 365 * 86_400 * 100  # ten years at 100 Hz: 3.2e10 samples, 252 GB of labels
    url = str(tmp_path / "long.zarr")
    write_long_store(url, n_time)
    tracemalloc.start()
    ds = seisctf.open_store(url)
    text = repr(ds)
    last = ds.time[-1].values
    tail = ds.time[-1].values - np.timedelta64(490, "ms")  # the last 50 samples
    part = ds.data.sel(time=slice(tail, None), station="XX.B.00")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 50 * 2**20, peak  # n_time × 8 bytes would be 252 GB
    assert "GridIndex" in text and isinstance(ds.xindexes["time"], GridIndex)
    assert ds.sizes["time"] == n_time
    assert last == np.datetime64("2000-01-01", "ns") + np.timedelta64((n_time - 1) * 10, "ms")
    assert part.sizes["time"] == 50
    assert np.isnan(part.values).all()
    assert list(ds.latitude.values) == [1.0, 2.0]


def test_s3_store_opens_with_its_time_axis(tmp_path, s3_server, s3_bucket, dask_cluster):
    """By URL and storage options, and by a location holding both: the same axes and values."""
    url = f"{s3_bucket}/i59.zarr"
    seisctf_cli("ingest", "waveforms", str(I59_DATA), "--out", url, *s3_server.cli_options(),
                scheduler=dask_cluster.address)  # fmt: skip
    ds = seisctf.open_store(url, storage_options=s3_server.storage_options)
    start, stop = "2020-10-31T00:01", "2020-10-31T00:03"
    [trace] = obspy.read(str(I59_DATA)).slice(obspy.UTCDateTime(start), obspy.UTCDateTime(stop))
    part = ds.data.sel(time=slice(start, stop)).isel(station=0, channel=0)
    np.testing.assert_array_equal(part.values, trace.data.astype(np.float32))
    assert part.time.values[0] == np.datetime64(start, "ns")
    located = seisctf.open_store(StoreLocation.from_url(url, s3_server.storage_options))
    xr.testing.assert_identical(
        located.data.sel(time=slice(start, stop)), ds.data.sel(time=slice(start, stop))
    )


def test_other_stores_and_bad_urls(tmp_path):
    with pytest.raises(InvalidInput, match="no zarr group"):
        seisctf.open_store(str(tmp_path / "missing.zarr"))
    url = str(tmp_path / "plain.zarr")
    plain = xr.Dataset({"u": (("time", "sensor"), np.zeros((4, 2), np.float32))},
                       coords={"time": np.arange(4) * 0.5}, attrs={"sampling_rate": 2.0,
                       "start_time": "2000-01-01T00:00:00Z"})  # fmt: skip
    storage.write_dataset(plain, StoreLocation(url), quiet=True)
    opened = seisctf.open_store(url)  # a wavefield keeps its own time coordinate (s)
    np.testing.assert_array_equal(opened.time.values, [0.0, 0.5, 1.0, 1.5])
    assert not isinstance(opened.xindexes["time"], GridIndex)
