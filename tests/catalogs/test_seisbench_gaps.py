"""Gaps inside a component a window has, through the command line on ObsPy's recordings of a
local event (2010-05-27, 50 Hz): BW.UH3 (SHZ/SHN/SHE) with a span of SHN cut out around the
first event's P and S picks, BW.UH1 (SHZ only) with one around the second event's. The
store keeps the gaps as NaN; SeisBench's reads of the store and the export hold zeros
there (as SeisBench's converters fill gaps) and ObsPy's samples elsewhere; `trace_gap_fraction`
is the share of gap samples numpy counts; PhaseNet trains on windows with gaps to finite
losses."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import h5py
import numpy as np
import obspy
import pandas as pd
import pytest
import seisbench.data as sbd
import zarr
from obspy.core.event import Catalog, Event, Origin, Pick, WaveformStreamID
from phasenet_steps import phasenet_losses

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import seisbench_dataset
from seisctf.catalogs.event_windows import read_catalog, write_catalog
from seisctf.cli import main
from seisctf.location import StoreLocation

logging.getLogger("seisbench").setLevel(logging.ERROR)

OBSPY_DATA = Path(obspy.__file__).parent / "signal" / "tests" / "data"
RATE = 50.0
WINDOW_S, PRE_ARRIVAL_S, S_AFTER_P_S = 20.0, 5.0, 1.5
CHANNELS = {"BW.UH1": ("SHZ",), "BW.UH3": ("SHZ", "SHN", "SHE")}
# Two events: origin time and the P pick of each station.
EVENTS = (
    ("2010-05-27T16:24:31", {"UH1": "2010-05-27T16:24:33.35", "UH3": "2010-05-27T16:24:33.17"}),
    ("2010-05-27T16:25:24", {"UH1": "2010-05-27T16:25:26.89", "UH3": "2010-05-27T16:25:26.63"}),
)
# Cut out: (station, channel) -> (event, seconds from its P pick to the gap's start, samples).
CUTS = {("BW.UH3", "SHN"): (0, -0.5, 150), ("BW.UH1", "SHZ"): (1, -0.4, 100)}


def recording(station: str, channel: str) -> obspy.Stream:
    """ObsPy's recording as the archive holds it: one trace, or two around the cut-out span."""
    trace = obspy.read(str(OBSPY_DATA / f"{station}._.{channel}.D.2010.147.cut.slist.gz"))[0]
    trace.data = trace.data.astype(np.int32)  # counts; miniSEED has no int64 encoding
    if (station, channel) not in CUTS:
        return obspy.Stream([trace])
    event, offset_s, samples = CUTS[(station, channel)]
    p_time = obspy.UTCDateTime(EVENTS[event][1][station.split(".")[1]])
    first = round((p_time + offset_s - trace.stats.starttime) * RATE)
    after = trace.copy()
    after.data = trace.data[first + samples :]
    after.stats.starttime = trace.stats.starttime + (first + samples) / RATE
    trace.data = trace.data[:first]
    return obspy.Stream([trace, after])


def expected_window(station: str, start: obspy.UTCDateTime, n: int) -> np.ndarray:
    """(station's channels, n) float32: ObsPy's samples from the one nearest `start`, NaN where
    the recording has none."""
    window = np.full((len(CHANNELS[station]), n), np.nan, dtype=np.float32)
    for row, channel in enumerate(CHANNELS[station]):
        for trace in recording(station, channel):
            offset = round((trace.stats.starttime - start) * RATE)
            first, last = max(offset, 0), min(offset + trace.stats.npts, n)
            if first < last:
                window[row, first:last] = trace.data[first - offset : last - offset]
    return window


@pytest.fixture(scope="module")
def gapped(tmp_path_factory, dask_cluster) -> dict:
    """The archive ingested, its event windows (no noise windows) and each row's expected
    window (NaN in the gaps)."""
    root = tmp_path_factory.mktemp("gaps")
    (root / "archive").mkdir()
    for station, channels in CHANNELS.items():
        for channel in channels:
            path = root / "archive" / f"{station}.{channel}.mseed"
            recording(station, channel).write(str(path), format="MSEED")
    catalog = Catalog()
    for origin_time, p_picks in EVENTS:
        event = Event(origins=[Origin(time=obspy.UTCDateTime(origin_time), latitude=48.2)])
        event.origins[0].longitude, event.origins[0].depth = 11.3, 5e3
        for code, p_time in p_picks.items():
            for phase, time in (("P", 0.0), ("S", S_AFTER_P_S)):
                stream = WaveformStreamID("BW", code, "", "SHZ")
                pick_time = obspy.UTCDateTime(p_time) + time
                event.picks.append(Pick(time=pick_time, waveform_id=stream, phase_hint=phase))
        catalog.append(event)
    catalog.write(str(root / "catalog.xml"), format="QUAKEML")
    scheduler = ["--quiet", "--scheduler", dask_cluster.address]
    continuous, windows = str(root / "continuous.zarr"), str(root / "windows.zarr")
    ingest = ["ingest", "waveforms", str(root / "archive"), "--out", continuous]
    assert main([*ingest, *scheduler]) == 0
    quakeml = ["ingest", "quakeml", str(root / "catalog.xml"), "--archive", continuous]
    quakeml += ["--window", str(WINDOW_S), "--pre-arrival", str(PRE_ARRIVAL_S)]
    assert main([*quakeml, "--noise-windows", "0", "--out", windows, *scheduler]) == 0
    ds = storage.open_dataset(StoreLocation(windows))
    expected = [
        expected_window(
            str(name).split("_")[0],
            obspy.UTCDateTime(str(ds["trace_start_time"].values[i])),
            int(ds[cv.TRACE_NPTS].values[i]),
        )
        for i, name in enumerate(ds[cv.TRACE_NAME].values)
    ]
    return {"root": root, "windows": windows, "expected": expected}


def test_the_store_keeps_gaps_as_nan_and_their_fraction(gapped):
    ds = storage.open_dataset(StoreLocation(gapped["windows"]))
    fractions = [np.isnan(window).mean() for window in gapped["expected"]]
    assert sorted(fractions) == [0.0, 0.0, 0.05, 0.1]  # 150 of 3 × 1000, 100 of 1 × 1000
    np.testing.assert_allclose(ds[cv.TRACE_GAP_FRACTION].values, fractions, rtol=1e-12)
    letters = [str(letter) for letter in ds[cv.CHANNEL].values]
    for i, window in enumerate(gapped["expected"]):
        station = str(ds[cv.TRACE_NAME].values[i]).split("_")[0]
        rows = [letters.index(channel[-1]) for channel in CHANNELS[station]]
        stored = ds[cv.EVENT_WINDOWS_VAR].values[i, rows, : window.shape[1]]
        np.testing.assert_array_equal(stored, window)  # NaN in the same places


def test_seisbench_reads_gaps_as_zeros_with_their_fraction(gapped):
    """Read as SeisBench reads a trace of the station's own components (`ignore`), each window
    is ObsPy's samples with zeros in the gaps; `pad` gives finite (channel, sample) arrays."""
    store = seisbench_dataset(gapped["windows"], missing_components="ignore")
    fractions = [np.isnan(window).mean() for window in gapped["expected"]]
    np.testing.assert_allclose(store.metadata[cv.TRACE_GAP_FRACTION], fractions, rtol=1e-12)
    for i, window in enumerate(gapped["expected"]):
        np.testing.assert_array_equal(store.get_waveforms(i), np.nan_to_num(window, nan=0.0))
    padded = seisbench_dataset(gapped["windows"]).get_waveforms(np.arange(len(fractions)))
    assert np.isfinite(padded).all()
    clean = store.filter(store.metadata[cv.TRACE_GAP_FRACTION] == 0, inplace=False)
    assert len(clean) == fractions.count(0.0) == 2


def test_phasenet_trains_on_windows_with_gaps_to_a_finite_loss(gapped):
    """The README's loop, 3 steps on the two windows with a gap (each of PhaseNet's windows
    around a pick holds the gap): finite inputs and losses."""
    import torch

    store = seisbench_dataset(gapped["windows"])
    store.filter(store.metadata[cv.TRACE_GAP_FRACTION] > 0)
    assert len(store) == 2

    def finite(inputs) -> None:
        assert torch.isfinite(inputs).all()

    losses = phasenet_losses(store, batch_size=2, check=finite)
    assert len(losses) == 3 and np.all(np.isfinite(losses))


def store_names(metadata: pd.DataFrame) -> pd.Series:
    """The store's trace names in an export: the writer keeps one as `trace_name_original`, or
    as `trace_name` when it writes the trace alone (outside a block)."""
    original = metadata.get("trace_name_original")
    return metadata["trace_name"] if original is None else original.fillna(metadata["trace_name"])


def test_the_export_writes_gaps_as_zeros_and_their_fraction(gapped, dask_cluster):
    out = gapped["root"] / "exported"
    scheduler = ["--quiet", "--scheduler", dask_cluster.address]
    assert main(["export", "seisbench", gapped["windows"], str(out), *scheduler]) == 0
    with h5py.File(out / "waveforms.hdf5", "r") as waveforms:
        assert all(np.isfinite(waveforms["data"][name][()]).all() for name in waveforms["data"])
    metadata = pd.read_csv(out / "metadata.csv")
    names = store_names(metadata)
    fractions = [np.isnan(window).mean() for window in gapped["expected"]]
    np.testing.assert_allclose(metadata[cv.TRACE_GAP_FRACTION], fractions, rtol=1e-12)
    export = sbd.WaveformDataset(out, missing_components="ignore", cache=None)
    for i, window in enumerate(gapped["expected"]):
        np.testing.assert_array_equal(export.get_waveforms(i), np.nan_to_num(window, nan=0.0))
    # The column selects the windows without gaps.
    clean = gapped["root"] / "clean"
    argv = ["export", "seisbench", gapped["windows"], str(clean), "--filter"]
    assert main([*argv, f"{cv.TRACE_GAP_FRACTION} == 0", *scheduler]) == 0
    kept = pd.read_csv(clean / "metadata.csv")
    assert list(store_names(kept)) == [n for n, f in zip(names, fractions, strict=True) if f == 0]
    assert (kept[cv.TRACE_GAP_FRACTION] == 0).all() and len(kept) == 2


def as_written_before(url: str, copy: Path) -> str:
    """A copy of the store at `url` as versions before `trace_gap_fraction` wrote it: without
    that coordinate, in the arrays and in the catalogue."""
    shutil.copytree(url, copy)
    group = zarr.open_group(str(copy), mode="r+")
    del group[cv.TRACE_GAP_FRACTION]
    coordinates = group[cv.EVENT_WINDOWS_VAR].attrs["coordinates"].split()
    coordinates.remove(cv.TRACE_GAP_FRACTION)
    group[cv.EVENT_WINDOWS_VAR].attrs["coordinates"] = " ".join(coordinates)
    write_catalog(
        read_catalog(StoreLocation(copy)).drop(columns=[cv.TRACE_GAP_FRACTION]), StoreLocation(copy)
    )
    zarr.consolidate_metadata(str(copy))
    return str(copy)


def test_the_export_of_a_store_written_before_the_column_measures_it(gapped, dask_cluster):
    before = as_written_before(gapped["windows"], gapped["root"] / "before.zarr")
    assert cv.TRACE_GAP_FRACTION not in storage.open_dataset(StoreLocation(before)).variables
    out = gapped["root"] / "exported-before"
    argv = ["export", "seisbench", before, str(out), "--quiet"]
    assert main([*argv, "--scheduler", dask_cluster.address]) == 0
    metadata = pd.read_csv(out / "metadata.csv")
    fractions = [np.isnan(window).mean() for window in gapped["expected"]]
    np.testing.assert_allclose(metadata[cv.TRACE_GAP_FRACTION], fractions, rtol=1e-12)
    export = sbd.WaveformDataset(out, missing_components="ignore", cache=None)
    for i, window in enumerate(gapped["expected"]):
        np.testing.assert_array_equal(export.get_waveforms(i), np.nan_to_num(window, nan=0.0))
