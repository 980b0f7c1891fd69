"""Station ids follow SEED: `NET.STA` for an empty location code, `NET.STA.LOC` otherwise, never
a trailing dot; a channel is `NET.STA.LOC.CHA` as obspy's `Trace.id`. Checked through
`seisctf ingest waveforms` and `seisctf ingest quakeml` on real data shipped with obspy
(IM.I59H1, empty location code, with its StationXML; IU.ANMO.10 and IU.COLA.10), against the
ids derived independently from obspy's trace stats, and on a store written before the rule
(`NET.STA.` ids), which keeps opening, matching picks and taking appends."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import obspy
import pytest
import xarray as xr
import zarr
from obspy.core.event import Catalog, Event, Origin, Pick, WaveformStreamID
from test_station_attrs import as_root_attrs

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.location import StoreLocation

OBSPY = Path(obspy.__file__).parent
I59_DATA = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.mseed"  # 20 Hz, 460 s
I59_XML = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.xml"
TSINDEX = OBSPY / "clients/filesystem/tests/data/tsindex_data"
IU_FILES = sorted((TSINDEX / "IU").rglob("*.mseed"))  # IU.ANMO.10, IU.COLA.10 BHZ, 40 Hz
IU_XML = OBSPY / "core/tests/data/IU_ANMO_BH.xml"  # ANMO 00 and 10; no COLA
CODE_ARRAYS = ("network", "station_code", "location")


def _cli(capsys, *args: str, scheduler: str) -> tuple[int, str]:
    """`seisctf ARGS` in this process: (exit code, stdout + stderr)."""
    code = main([*args, "--scheduler", scheduler, "--quiet"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _expected_id(stats) -> str:
    """The documented rule, written out independently of seisctf."""
    base = f"{stats.network}.{stats.station}"
    return f"{base}.{stats.location}" if stats.location else base


def _codes(ds: xr.Dataset) -> list[tuple[str, str, str]]:
    return list(zip(*(map(str, ds[name].values) for name in CODE_ARRAYS), strict=True))


def _assert_ids_follow_obspy(store: Path, files: list[Path]) -> xr.Dataset:
    """The store's ids and code arrays are those obspy's stats give, by the documented rule;
    the code arrays are coordinates along `station` when xarray opens the store."""
    stats = {}
    for path in files:
        trace = obspy.read(str(path), headonly=True)[0]
        stats[_expected_id(trace.stats)] = trace.stats
    ds = storage.open_dataset(StoreLocation(str(store)))
    ids = [str(s) for s in ds[cv.STATION].values]
    assert ids == sorted(stats) and not any(i.endswith(".") for i in ids)
    assert _codes(ds) == [(stats[i].network, stats[i].station, stats[i].location) for i in ids]
    for name in CODE_ARRAYS:
        assert name in ds.coords and ds[name].dims == (cv.STATION,)
    return ds


def _catalog(path: Path, picks: list[tuple[str, str, str | None, float]], origin) -> None:
    """One event at `origin` with P picks (network, station, location code or None, delay s)."""
    event = Event(origins=[Origin(time=origin, latitude=35.0, longitude=-106.0, depth=5000.0)])
    for network, station, location, delay in picks:
        wid = WaveformStreamID(network, station, location, "")
        event.picks.append(Pick(time=origin + delay, waveform_id=wid, phase_hint="P"))
    Catalog(events=[event]).write(str(path), format="QUAKEML")


def _windows(url: Path) -> dict[str, list[str]]:
    ds = storage.open_dataset(StoreLocation(url))
    return {
        name: [str(v) for v in ds[name].values]
        for name in (cv.TRACE_NAME, cv.NETWORK_CODE, cv.STATION_CODE, "station_location_code")
    }


def test_empty_location_code_gives_net_sta_and_picks_still_match(tmp_path, capsys, dask_cluster):
    store = tmp_path / "i59.zarr"
    code, out = _cli(capsys, "ingest", "waveforms", str(I59_DATA), "--inventory", str(I59_XML),
                     "--out", str(store), scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    assert "0 problem(s)" in out
    ds = _assert_ids_follow_obspy(store, [I59_DATA])
    assert [str(s) for s in ds[cv.STATION].values] == ["IM.I59H1"]
    assert _codes(ds) == [("IM", "I59H1", "")]
    # Keyed by the same id: the inventory's coordinates and the channel's metadata.
    station = obspy.read_inventory(str(I59_XML))[0][0]
    assert float(ds[cv.LATITUDE].values[0]) == pytest.approx(station.latitude)
    assert list(ds.attrs["channel_metadata"]) == ["IM.I59H1"]
    assert list(ds.attrs["time_offsets_s"]) == ["IM.I59H1"]
    # A channel's id stays SEED's NET.STA.LOC.CHA (two dots): response removal finds it.
    removed = tmp_path / "i59-vel.zarr"
    code, out = _cli(capsys, "ingest", "waveforms", str(I59_DATA), "--inventory", str(I59_XML),
                     "--out", str(removed), "--remove-response",
                     scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0 and "0 problem(s)" in out, out
    # Picks without a location code and with an empty one both match IM.I59H1.
    start = obspy.read(str(I59_DATA), headonly=True)[0].stats.starttime
    catalog = tmp_path / "i59.xml"
    _catalog(catalog, [("IM", "I59H1", None, 60.0)], start + 120)
    windows = tmp_path / "i59-windows.zarr"
    code, out = _cli(capsys, "ingest", "quakeml", str(catalog), "--archive", str(store),
                     "--out", str(windows), "--window", "20", "--pre-arrival", "5",
                     "--noise-windows", "1", scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    assert "picks at" not in out
    found = _windows(windows)
    assert len(found[cv.TRACE_NAME]) == 2  # the event window and one noise window
    assert all(name.startswith("IM.I59H1_") for name in found[cv.TRACE_NAME])
    assert found[cv.NETWORK_CODE] == ["IM", "IM"] and found[cv.STATION_CODE] == ["I59H1"] * 2
    assert found["station_location_code"] == ["", ""]
    # A store whose `station` holds no id is refused by name, before anything is written.
    broken = tmp_path / "broken.zarr"
    shutil.copytree(store, broken)
    zarr.open_group(str(broken), mode="r+")[cv.STATION][:] = np.array(["I59H1"], dtype=object)
    zarr.consolidate_metadata(str(broken))
    refused = tmp_path / "refused.zarr"
    code, out = _cli(capsys, "ingest", "quakeml", str(catalog), "--archive", str(broken),
                     "--out", str(refused), scheduler=dask_cluster.address)  # fmt: skip
    assert code == 3 and "Traceback" not in out, out
    assert f"{broken}: station id 'I59H1' is not NET.STA or NET.STA.LOC" in out
    assert not refused.exists()


def test_location_codes_are_kept_and_picks_match_exactly(tmp_path, capsys, dask_cluster):
    store = tmp_path / "iu.zarr"
    code, out = _cli(capsys, "ingest", "waveforms", *map(str, IU_FILES), "--inventory",
                     str(IU_XML), "--out", str(store), scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    ds = _assert_ids_follow_obspy(store, IU_FILES)
    assert [str(s) for s in ds[cv.STATION].values] == ["IU.ANMO.10", "IU.COLA.10"]
    assert _codes(ds) == [("IU", "ANMO", "10"), ("IU", "COLA", "10")]
    assert np.isfinite(float(ds[cv.LATITUDE].sel({cv.STATION: "IU.ANMO.10"})))
    assert "problem: IU.COLA.10: unknown station" in out  # the inventory has no COLA
    # ANMO's pick names its location, COLA's none (the station's only location matches);
    # a pick at ANMO's location 00, which the store does not hold, is a problem by its id.
    catalog = tmp_path / "iu.xml"
    start = obspy.UTCDateTime("2018-01-01T00:00:00")
    picks = [("IU", "ANMO", "10", 20.0), ("IU", "COLA", None, 22.0), ("IU", "ANMO", "00", 21.0)]
    _catalog(catalog, picks, start + 5)
    windows = tmp_path / "iu-windows.zarr"
    code, out = _cli(capsys, "ingest", "quakeml", str(catalog), "--archive", str(store),
                     "--out", str(windows), "--window", "10", "--pre-arrival", "2",
                     "--noise-windows", "0", scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    assert "problem: picks at IU.ANMO.00: station not in the waveform store" in out
    found = _windows(windows)
    assert [name.rsplit("_", 1)[0] for name in found[cv.TRACE_NAME]] == [
        "IU.ANMO.10",
        "IU.COLA.10",
    ]
    assert found["station_location_code"] == ["10", "10"]


def _as_written_before(store: Path) -> None:
    """Turn a store into what the ingest wrote before the current rule: `NET.STA.` ids (also as
    the keys of its per-station attrs, in the root attrs), no code arrays."""
    as_root_attrs(str(store))  # the per-station attrs where they were
    group = zarr.open_group(str(store), mode="r+")
    old = [f"{s}." if s.count(".") == 1 else s for s in group[cv.STATION][:]]
    group[cv.STATION][:] = np.array(old, dtype=object)
    for name in CODE_ARRAYS:
        del group[name]
    group["data"].attrs["coordinates"] = "latitude longitude elevation"
    group["coverage"].attrs["coordinates"] = "latitude longitude elevation"
    for key in ("channel_metadata", "time_offsets_s"):
        group.attrs[key] = {
            f"{k}." if k.count(".") == 1 else k: v for k, v in group.attrs[key].items()
        }
    zarr.consolidate_metadata(str(store))


def test_a_store_written_before_keeps_matching_picks_and_takes_appends(
    tmp_path, capsys, dask_cluster
):
    trace = obspy.read(str(I59_DATA))[0]
    halves = [tmp_path / "first.mseed", tmp_path / "second.mseed"]
    trace.slice(endtime=trace.stats.starttime + 200).write(str(halves[0]), format="MSEED")
    trace.slice(starttime=trace.stats.starttime + 200.05).write(str(halves[1]), format="MSEED")
    old = tmp_path / "old.zarr"
    args = ("--inventory", str(I59_XML))
    code, out = _cli(capsys, "ingest", "waveforms", str(halves[0]), *args, "--out", str(old),
                     scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    _as_written_before(old)
    assert [str(s) for s in xr.open_zarr(str(old))[cv.STATION].values] == ["IM.I59H1."]
    # Picks match the old id, and the windows carry it as the store spells it.
    catalog = tmp_path / "old.xml"
    _catalog(catalog, [("IM", "I59H1", "", 60.0)], trace.stats.starttime + 60)
    windows = tmp_path / "old-windows.zarr"
    code, out = _cli(capsys, "ingest", "quakeml", str(catalog), "--archive", str(old),
                     "--out", str(windows), "--window", "20", "--pre-arrival", "5",
                     "--noise-windows", "0", scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0 and "picks at" not in out, out
    found = _windows(windows)
    assert found[cv.TRACE_NAME][0].startswith("IM.I59H1._")
    assert (found[cv.STATION_CODE], found["station_location_code"]) == (["I59H1"], [""])
    # An append takes the new file and leaves the store as a one-shot ingest of both.
    code, out = _cli(capsys, "ingest", "waveforms", str(halves[1]), *args, "--out", str(old),
                     "--append", scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    whole = tmp_path / "whole.zarr"
    code, out = _cli(capsys, "ingest", "waveforms", *map(str, halves), *args, "--out",
                     str(whole), scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    appended = _assert_ids_follow_obspy(old, halves[:1])
    one_shot = storage.open_dataset(StoreLocation(str(whole)))
    assert appended.attrs["channel_metadata"] == one_shot.attrs["channel_metadata"]
    assert not set(cv.STATION_ATTRS) & set(zarr.open_group(str(old), mode="r").attrs)
    np.testing.assert_array_equal(appended["data"].values, one_shot["data"].values)
    assert np.isfinite(appended["data"].values).all()


def test_an_empty_network_code_is_ingested(tmp_path, capsys, dask_cluster):
    """SAC files often carry no network code (obspy's test.sac): the station id is `.STA`, the
    codes are kept, and the samples are stored."""
    sac = OBSPY / "io/sac/tests/data/test.sac"
    trace = obspy.read(str(sac))[0]
    assert trace.stats.network == ""  # the case this test is about
    out = tmp_path / "sac.zarr"
    code, text = _cli(capsys, "ingest", "waveforms", str(sac), "--out", str(out),
                      scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, text
    ds = _assert_ids_follow_obspy(out, [sac])
    assert [str(s) for s in ds[cv.STATION].values] == [f".{trace.stats.station}"]
    stored = ds[cv.WAVEFORM_VAR].values[0, 0, : trace.stats.npts]
    np.testing.assert_array_equal(stored, trace.data.astype(stored.dtype))
