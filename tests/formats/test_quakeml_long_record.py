"""`seisctf ingest quakeml` on a long, sparse record: ObsPy's shipped recordings of BW.UH1, UH2,
UH3 and UH4 (2010-05-27, 50 Hz) and copies of them 1, 17 and 59 days later, ingested in blocks of
1024 samples: 59 days, 4 × 249,000 coverage values, 5.1 million one-second tiles per station.
Through the command line, the noise windows and the shortfall line equal a plain numpy
computation over the whole coverage and every tile, and the command's peak memory on this record
is that on the first 230 s alone (coverage and tiles are read a bounded span at a time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr
from cli_peak import peak_mib
from obspy.core.event import Catalog, Event, Origin, Pick, WaveformStreamID

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

OBSPY_DATA = Path(obspy.__file__).parent / "signal" / "tests" / "data"
RATE = 50.0
BLOCK = 1024
WINDOW_S, PRE_ARRIVAL_S, NOISE_WINDOWS = 1.0, 0.5, 40
DAY = 86400.0
# (station, channel) -> ObsPy's file, and the days after the recording its copies start.
FILES = {
    ("BW.UH1", "SHZ"): "BW.UH1._.SHZ.D.2010.147.cut.slist.gz",
    ("BW.UH2", "SHZ"): "BW.UH2._.SHZ.D.2010.147.cut.slist.gz",
    ("BW.UH3", "SHE"): "BW.UH3._.SHE.D.2010.147.cut.slist.gz",
    ("BW.UH3", "SHN"): "BW.UH3._.SHN.D.2010.147.cut.slist.gz",
    ("BW.UH3", "SHZ"): "BW.UH3._.SHZ.D.2010.147.cut.slist.gz",
    ("BW.UH4", "EHZ"): "BW.UH4._.EHZ.D.2010.147.cut.slist.gz",
}
COPY_DAYS = (0, 1, 17, 59)
# UH2 has no copy on day 1 and a 40 s gap in its day-17 copy; UH3's SHN has no day-1 copy (its
# blocks there are not whole); UH4 recorded 50 s of day 0 only (decimated to 50 Hz).
SKIPPED = {("BW.UH2", "SHZ", 1), ("BW.UH3", "SHN", 1)}
UH2_GAP_S = (100.0, 140.0)
UH4_SPAN = ("2010-05-27T16:24:20", "2010-05-27T16:25:10")
# Events: origin, and the P pick's seconds after the origin's minute per station (S 1.5 s
# later). The day-30 event lies where nothing was recorded.
EVENTS = (
    ("2010-05-27T16:24:31", {"UH1": 33.35, "UH2": 33.40, "UH3": 33.17, "UH4": 33.30}),
    ("2010-05-27T16:25:24", {"UH1": 26.89, "UH2": 26.95, "UH3": 26.63}),
    ("2010-06-13T16:24:31", {"UH1": 33.35, "UH3": 33.17}),
    ("2010-06-26T16:24:31", {"UH2": 33.40}),
)


def recordings(days: tuple[int, ...]) -> list[obspy.Trace]:
    """ObsPy's recordings and their copies `days` later, as the archive holds them."""
    traces = []
    for (station, channel), name in FILES.items():
        original = obspy.read(str(OBSPY_DATA / name))[0]
        if station == "BW.UH4":
            original.decimate(2)
            original.trim(*(obspy.UTCDateTime(t) for t in UH4_SPAN))
        for day in days:
            if (station, channel, day) in SKIPPED or (station == "BW.UH4" and day):
                continue
            copy = original.copy()
            copy.stats.starttime += day * DAY
            if station == "BW.UH2" and day == 17:
                start = copy.stats.starttime
                traces.append(copy.slice(start, start + UH2_GAP_S[0] - 1 / RATE))
                copy = copy.slice(start + UH2_GAP_S[1], None)
            traces.append(copy)
    return traces


def write_catalog(path: Path) -> list[tuple[str, obspy.UTCDateTime, obspy.UTCDateTime]]:
    """The QuakeML catalogue; returns its picks (station, time, origin time)."""
    catalog, picks = Catalog(), []
    for origin_time, p_seconds in EVENTS:
        origin = obspy.UTCDateTime(origin_time)
        event = Event(origins=[Origin(time=origin, latitude=48.2, longitude=11.3, depth=5e3)])
        for code, second in p_seconds.items():
            p_time = obspy.UTCDateTime(origin_time[:17] + "00") + second
            for phase, time in (("P", p_time), ("S", p_time + 1.5)):
                stream = WaveformStreamID("BW", code, "", "SHZ")
                event.picks.append(Pick(time=time, waveform_id=stream, phase_hint=phase))
                picks.append((f"BW.{code}", time, origin))
        catalog.append(event)
    catalog.write(str(path), format="QUAKEML")
    return picks


def ingested(root: Path, days: tuple[int, ...]) -> str:
    archive = root / "archive"
    archive.mkdir(parents=True)
    for i, trace in enumerate(recordings(days)):
        trace.write(str(archive / f"{trace.id}.{i}.mseed"), format="MSEED")
    url = str(root / "continuous.zarr")
    ingest_waveforms([str(archive)], StoreLocation(url), block_samples=BLOCK, quiet=True)
    return url


@pytest.fixture(scope="module")
def record(tmp_path_factory, dask_cluster):
    """The long record and the first 230 s alone, each ingested, and the long record's
    windows cut by the command line."""
    root = tmp_path_factory.mktemp("long-record")
    picks = write_catalog(root / "catalog.xml")
    long, short = ingested(root / "long", COPY_DAYS), ingested(root / "short", (0,))
    windows = str(root / "windows.zarr")
    assert main([*quakeml_argv(root, long, windows), "--scheduler", dask_cluster.address]) == 0
    return {"root": root, "long": long, "short": short, "windows": windows, "picks": picks}


def quakeml_argv(root: Path, continuous: str, out: str) -> list[str]:
    return [
        "ingest", "quakeml", str(root / "catalog.xml"), "--archive", continuous, "--out", out,
        "--window", str(WINDOW_S), "--pre-arrival", str(PRE_ARRIVAL_S),
        "--noise-windows", str(NOISE_WINDOWS), "--quiet",
    ]  # fmt: skip


def expected_noise(record) -> tuple[dict[str, list[int]], list[str]]:
    """Per station the noise windows' first samples, and the shortfall lines, from the whole
    coverage and every tile with numpy."""
    group = zarr.open_group(record["long"], mode="r")
    coverage = np.asarray(group[cv.COVERAGE_VAR][:], dtype=np.float64)
    stations = [str(s) for s in group[cv.STATION][:]]
    start = obspy.UTCDateTime(str(group.attrs[cv.ATTR_START_TIME]))
    n_time = group[cv.WAVEFORM_VAR].shape[-1]
    window = round(WINDOW_S * RATE)
    assert window <= BLOCK  # a tile touches one or two blocks
    starts = np.arange(n_time // window, dtype=np.int64) * window
    origins = list({origin.ns: origin for *_, origin in record["picks"]}.values())
    windows, problems = {}, []
    for row, station in enumerate(stations):
        times = [t for s, t, _ in record["picks"] if s == station] + origins
        near = np.zeros(starts.size, dtype=bool)
        for busy in ((t - start) * RATE for t in times):
            near |= (starts - window < busy) & (busy < starts + 2 * window)
        whole = coverage[row] >= 1.0
        last = np.minimum((starts + window - 1) // BLOCK, coverage.shape[1] - 1)
        free = ~near & whole[starts // BLOCK] & whole[last]
        chosen = np.unique(np.round(np.linspace(0, free.sum() - 1, NOISE_WINDOWS)).astype(int))
        windows[station] = [int(s) for s in starts[free][chosen]] if free.any() else []
        if free.sum() < NOISE_WINDOWS:
            problems.append(
                f"{station}: {free.sum()} pick-free window(s), {NOISE_WINDOWS} asked for: of "
                f"{starts.size} candidate window(s) (the record tiled from its first sample), "
                f"{near.sum()} lie within one window length of a pick or an origin time, "
                f"{(~near & ~free).sum()} more in time blocks with gaps in the station's "
                f"channels (coverage < 1 in blocks of {BLOCK} samples)"
            )
    return windows, problems


def test_noise_windows_equal_numpy_over_the_whole_coverage(record):
    continuous = storage.open_dataset(StoreLocation(record["long"]))
    assert (
        continuous.sizes[cv.TIME] > 59 * DAY * RATE and continuous.attrs["block_samples"] == BLOCK
    )
    windows, problems = expected_noise(record)
    # The record as described: UH4's one short recording holds fewer free tiles than asked.
    assert [len(windows[s]) for s in ("BW.UH1", "BW.UH2", "BW.UH3")] == [NOISE_WINDOWS] * 3
    assert 0 < len(windows["BW.UH4"]) < NOISE_WINDOWS
    assert len(problems) == 1 and problems[0].startswith("BW.UH4: ")
    ds = storage.open_dataset(StoreLocation(record["windows"]))
    start = obspy.UTCDateTime(str(continuous.attrs[cv.ATTR_START_TIME]))
    got: dict[str, list[int]] = {station: [] for station in windows}
    for name, category, first in zip(
        ds[cv.TRACE_NAME].values,
        ds[cv.TRACE_CATEGORY].values,
        ds["trace_start_time"].values,
        strict=True,
    ):
        if category == "noise":
            got[str(name).split("_")[0]].append(
                round((obspy.UTCDateTime(str(first)) - start) * RATE)
            )
    assert got == windows
    assert [p for p in ds.attrs["ingest_problems"] if "pick-free" in p] == problems
    # The windows hold the store's samples, whole blocks of data only.
    data = zarr.open_group(record["long"], mode="r")[cv.WAVEFORM_VAR]
    noise = np.flatnonzero(ds[cv.TRACE_CATEGORY].values == "noise")
    for i in noise[:: len(noise) // 10]:
        station = str(ds[cv.TRACE_NAME].values[i]).split("_")[0]
        row = [str(s) for s in continuous[cv.STATION].values].index(station)
        first = round((obspy.UTCDateTime(str(ds["trace_start_time"].values[i])) - start) * RATE)
        z = list(continuous[cv.CHANNEL].values).index("EHZ" if station == "BW.UH4" else "SHZ")
        expected = data[row, z, first : first + round(WINDOW_S * RATE)]
        np.testing.assert_array_equal(ds[cv.EVENT_WINDOWS_VAR].values[i, 0], expected)
        assert np.isfinite(expected).all()


def test_peak_memory_does_not_grow_with_the_record(record, dask_cluster):
    """Planning held the long record's 5.1 million tiles per station whole (their starts, pick
    searches and block indices) and its coverage as float64: 300 MiB more than for the short
    record; now a bounded span at a time (18 MiB more)."""
    root, scheduler = record["root"], ["--scheduler", dask_cluster.address]
    peaks = {
        name: peak_mib(
            [*quakeml_argv(root, record[name], str(root / f"{name}-peak.zarr")), *scheduler]
        )
        for name in ("short", "long")
    }
    assert peaks["long"] - peaks["short"] < 64, peaks
