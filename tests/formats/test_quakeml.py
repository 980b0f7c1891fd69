"""`seisctf ingest quakeml`: an obspy-written QuakeML catalogue with picks + a small synthetic
continuous store -> event windows whose values are the continuous store's slices and whose
arrival samples come from the picks, noise windows from pick-free periods."""

from __future__ import annotations

import math

import numpy as np
import obspy
import pandas as pd
import pytest
import xarray as xr
from obspy.core.event import (
    Arrival,
    Catalog,
    Event,
    Magnitude,
    Origin,
    Pick,
    ResourceIdentifier,
    WaveformStreamID,
)

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs.event_windows import read_catalog
from seisctf.cli import main
from seisctf.formats.quakeml.quakeml_windows import ingest_quakeml
from seisctf.location import StoreLocation

RATE = 20.0
START = obspy.UTCDateTime("2020-01-01T00:00:00")
N_TIME = 40_000  # 2000 s
BLOCK = 4096
STATIONS = ("XX.A01.", "XX.A02.00", "XX.A03.", "YY.B01.")
CHANNELS = ("HHE", "HHN", "HHZ")
# (origin offset s, lat, lon, {station: (P offset s, S offset s or None)})
EVENTS = (
    (200.0, 45.0, 7.0, {"XX.A01.": (3.0, 6.0), "XX.A02.00": (4.5, 8.25), "YY.B01.": (7.0, None)}),
    (900.0, 46.0, 8.0, {"XX.A01.": (2.0, 3.9), "XX.A03.": (5.03, 9.71)}),
    (1500.0, 44.5, 6.5, {"XX.A02.00": (6.0, 10.0), "XX.A03.": (None, 12.0)}),
)


def continuous_dataset() -> xr.Dataset:
    rng = np.random.default_rng(5)
    data = rng.standard_normal((len(STATIONS), len(CHANNELS), N_TIME)).astype(np.float32)
    data[3, 1, 30_000:30_500] = np.nan  # a gap at YY.B01, HHN (block 7)
    n_blocks = math.ceil(N_TIME / BLOCK)
    coverage = np.ones((len(STATIONS), n_blocks), dtype=np.float32)
    coverage[3, 30_000 // BLOCK] = 1 - 500 / (3 * BLOCK)
    return xr.Dataset(
        {
            cv.WAVEFORM_VAR: (cv.WAVEFORM_DIMS, data),
            cv.COVERAGE_VAR: ((cv.STATION, "block"), coverage),
        },
        coords={
            cv.STATION: np.array(STATIONS, dtype=object),
            cv.CHANNEL: np.array(CHANNELS, dtype=object),
            cv.LATITUDE: (cv.STATION, [45.1, 45.6, 46.2, 44.9]),
            cv.LONGITUDE: (cv.STATION, [7.1, 7.5, 8.1, 6.8]),
            cv.ELEVATION: (cv.STATION, [100.0, 200.0, 300.0, 400.0]),
        },
        attrs={
            cv.ATTR_START_TIME: str(START),
            "start_time_ns": START.ns,
            cv.ATTR_SAMPLING_RATE: RATE,
            "block_samples": BLOCK,
        },
    ).chunk({cv.STATION: 1, cv.TIME: BLOCK})


def write_catalog(path) -> Catalog:
    catalog = Catalog()
    for k, (offset, lat, lon, picks) in enumerate(EVENTS):
        origin = Origin(time=START + offset, latitude=lat, longitude=lon, depth=8000.0 + k)
        event = Event(resource_id=ResourceIdentifier(f"smi:test/event/{k}"))
        event.origins.append(origin)
        event.magnitudes.append(Magnitude(mag=2.0 + k, magnitude_type="ML"))
        for station, (p, s) in picks.items():
            net, sta, loc = station.split(".")
            for phase, delay in (("P", p), ("S", s)):
                if delay is None:
                    continue
                wid = WaveformStreamID(net, sta, loc or None, "HHZ")
                # Event 1's S picks carry no hint: the phase comes from the origin's arrival.
                hint = None if (k == 1 and phase == "S") else phase + ("g" if k == 2 else "")
                pick = Pick(
                    time=START + offset + delay,
                    waveform_id=wid,
                    phase_hint=hint,
                    evaluation_mode="manual",
                )
                event.picks.append(pick)
                origin.arrivals.append(Arrival(pick_id=pick.resource_id, phase=phase))
        # A later, automatic P pick at the same station is ignored (the earliest counts).
        if k == 0:
            late = Pick(
                time=START + offset + 3.5,
                waveform_id=WaveformStreamID("XX", "A01"),
                phase_hint="P",
                evaluation_mode="automatic",
            )
            event.picks.append(late)
        catalog.append(event)
    catalog.write(str(path), format="QUAKEML")
    return catalog


def table(ds: xr.Dataset) -> pd.DataFrame:
    """The per-trace coordinates as a DataFrame (text as Python str)."""
    return pd.DataFrame(
        {
            name: ds[name].values.astype(object)
            if ds[name].dtype.kind in "OTU"
            else ds[name].values
            for name in ds.coords
            if ds[name].dims == (cv.TRACE,)
        }
    )


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("quakeml")
    continuous = continuous_dataset()
    storage.write_dataset(continuous, StoreLocation(root / "continuous.zarr"), quiet=True)
    write_catalog(root / "catalog.xml")
    return root, continuous.compute()


def test_windows_are_slices_of_the_continuous_store_with_arrivals_from_picks(sources, tmp_path):
    root, continuous = sources
    out = str(tmp_path / "windows.zarr")
    report = ingest_quakeml(
        str(root / "catalog.xml"),
        [str(root / "continuous.zarr")],
        StoreLocation(out),
        window_s=30.0,
        pre_arrival_s=5.0,
        noise_windows=2,
        quiet=True,
    )
    ds = storage.open_dataset(StoreLocation(out))
    cv.validate_event_window_store(ds)
    assert ds.attrs["component_order"] == "ZNE" and list(ds[cv.CHANNEL].values) == list("ZNE")
    assert ds[cv.EVENT_WINDOWS_VAR].dtype == np.float32
    assert ds.sizes[cv.SAMPLE] == 600 and (ds[cv.TRACE_NPTS].values == 600).all()
    n_event_windows = sum(len(p) for *_, p in EVENTS)
    assert report.n_earthquake == n_event_windows
    windows = ds[cv.EVENT_WINDOWS_VAR].values
    meta = table(ds)
    names = list(ds[cv.TRACE_NAME].values)
    assert len(set(names)) == len(names)
    category = ds[cv.TRACE_CATEGORY].values
    assert (category == "earthquake_local").sum() == n_event_windows
    data = continuous[cv.WAVEFORM_VAR].values
    zne = [CHANNELS.index("HHZ"), CHANNELS.index("HHN"), CHANNELS.index("HHE")]

    def start_of(i: int) -> int:
        offset = obspy.UTCDateTime(str(ds["trace_start_time"].values[i])) - START
        return round(offset * RATE)

    # Independent expectation per (event, station): the first pick minus 5 s, nearest sample.
    seen = 0
    for k, (offset, lat, _, picks) in enumerate(EVENTS):
        for station, (p, s) in picks.items():
            first = p if p is not None else s
            start = math.floor((offset + first - 5.0) * RATE + 0.5)
            (i,) = np.flatnonzero(
                (meta[cv.SOURCE_ID] == f"smi:test/event/{k}")
                & (meta[cv.NETWORK_CODE] + "." + meta[cv.STATION_CODE] == station[:6])
            )
            assert start_of(i) == start
            np.testing.assert_array_equal(
                windows[i], data[STATIONS.index(station)][zne, start : start + 600]
            )
            for column, delay in ((cv.P_ARRIVAL_SAMPLE, p), (cv.S_ARRIVAL_SAMPLE, s)):
                expected = np.nan if delay is None else (offset + delay) * RATE - start
                np.testing.assert_allclose(float(ds[column].values[i]), expected, atol=1e-6)
            assert ds["trace_p_status"].values[i] == ("manual" if p is not None else "")
            assert float(ds[cv.SOURCE_LATITUDE].values[i]) == lat
            assert float(ds["source_depth_km"].values[i]) == pytest.approx(8.0 + k / 1000)
            assert float(ds["source_magnitude"].values[i]) == 2.0 + k
            assert ds["trace_channel"].values[i] == "HH"
            seen += 1
    assert seen == n_event_windows

    # Noise windows: slices too, on tiles clear of every pick and origin, never in the gap.
    all_busy = [offset * RATE for offset, *_ in EVENTS]
    noise = np.flatnonzero(category == "noise")
    assert len(noise) == 2 * len(STATIONS) and report.n_noise == len(noise)
    for i in noise:
        station = ".".join(
            str(ds[c].values[i])
            for c in (cv.NETWORK_CODE, cv.STATION_CODE, "station_location_code")
        )
        row = STATIONS.index(station)
        start = start_of(i)
        assert start % 600 == 0
        np.testing.assert_array_equal(windows[i], data[row][zne, start : start + 600])
        assert np.isfinite(windows[i]).all()
        picks_here = [
            (offset + d) * RATE
            for offset, _, _, picks in EVENTS
            for d in picks.get(station, ())
            if d is not None
        ]
        for busy in all_busy + picks_here:
            assert busy <= start - 600 or busy >= start + 1200
        assert np.isnan(ds[cv.P_ARRIVAL_SAMPLE].values[i]) and ds[cv.SOURCE_ID].values[i] == ""
        assert np.isnan(ds[cv.SOURCE_LATITUDE].values[i])
    assert float(ds[cv.STATION_LATITUDE].values[noise[0]]) == 45.1
    assert ds.attrs["event_catalog"]["sha256"] and ds.attrs["window_s"] == 30.0
    catalogue = read_catalog(StoreLocation(out))
    assert list(catalogue[cv.TRACE_NAME]) == names


def test_raw_archive_is_ingested_first_and_gives_the_same_windows(
    sources, tmp_path, capsys, dask_cluster
):
    root, continuous = sources
    archive = tmp_path / "archive"
    archive.mkdir()
    data = continuous[cv.WAVEFORM_VAR].values
    for s, station in enumerate(STATIONS[:3]):
        net, sta, loc = station.split(".")
        for c, channel in enumerate(CHANNELS):
            trace = obspy.Trace(
                data[s, c].copy(),
                header={
                    "network": net,
                    "station": sta,
                    "location": loc,
                    "channel": channel,
                    "starttime": START,
                    "sampling_rate": RATE,
                },
            )
            trace.write(str(archive / f"{station}{channel}.mseed"), format="MSEED")
    out = str(tmp_path / "from-archive.zarr")
    code = main(
        [
            "ingest",
            "quakeml",
            str(root / "catalog.xml"),
            "--archive",
            str(archive),
            "--out",
            out,
            "--window",
            "30",
            "--pre-arrival",
            "5",
            "--noise-windows",
            "0",
            "--scratch",
            str(tmp_path / "scratch.zarr"),
            "--quiet",
            "--scheduler",
            dask_cluster.address,
        ]
    )
    assert code == 0
    assert f"catalogue: {out}/catalog.parquet" in capsys.readouterr().out.splitlines()
    ds = storage.open_dataset(StoreLocation(out))
    assert set(ds[cv.TRACE_CATEGORY].values) == {"earthquake_local"}
    assert ds.sizes[cv.TRACE] == sum(len(p) for *_, p in EVENTS) - 1  # YY.B01 is not there
    assert any("YY.B01" in p for p in ds.attrs["ingest_problems"])
    reference = storage.open_dataset(StoreLocation(tmp_path / "scratch.zarr"))
    assert reference.attrs[cv.ATTR_COMPLETE]
    for i in range(ds.sizes[cv.TRACE]):
        station = ".".join(
            str(ds[c].values[i])
            for c in (cv.NETWORK_CODE, cv.STATION_CODE, "station_location_code")
        )
        start = round((obspy.UTCDateTime(str(ds["trace_start_time"].values[i])) - START) * RATE)
        np.testing.assert_array_equal(
            ds[cv.EVENT_WINDOWS_VAR].values[i],
            data[STATIONS.index(station)][[2, 1, 0], start : start + 600],
        )


def test_bad_catalogue_and_archive_exit_3_naming_them(sources, tmp_path, capsys, dask_cluster):
    root, _ = sources
    scheduler = ["--scheduler", dask_cluster.address]
    bad = tmp_path / "bad.xml"
    bad.write_text("<quakeml><eventParameters")
    code = main(
        [
            "ingest",
            "quakeml",
            str(bad),
            "--archive",
            str(root / "continuous.zarr"),
            "--out",
            str(tmp_path / "o.zarr"),
            "--quiet",
            *scheduler,
        ]
    )
    assert code == 3 and str(bad) in capsys.readouterr().err
    code = main(
        [
            "ingest",
            "quakeml",
            str(root / "catalog.xml"),
            "--archive",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "o.zarr"),
            "--quiet",
            *scheduler,
        ]
    )
    assert code == 3 and str(tmp_path / "missing") in capsys.readouterr().err
    code = main(
        [
            "ingest",
            "quakeml",
            str(root / "catalog.xml"),
            "--archive",
            str(root / "continuous.zarr"),
            "--out",
            str(tmp_path / "o.zarr"),
            "--window",
            "10",
            "--pre-arrival",
            "12",
            "--quiet",
            *scheduler,
        ]
    )
    assert code == 3 and "--pre-arrival" in capsys.readouterr().err
    assert not (tmp_path / "o.zarr").exists()
