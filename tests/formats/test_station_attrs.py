"""The per-station attrs of a waveform store (`time_offsets_s`, `station_channels`,
`channel_metadata`) in the group `station_attrs` beside the data, written by tasks a chunk of
stations at a time, not in the root `zarr.json`; stores with them in the root attrs (written
before) read the same through `storage.open_dataset` and `storage.station_attrs`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.formats.obspy_archive import station_attrs
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

START = obspy.UTCDateTime("2021-03-04T05:00:00")
RATE = 20.0
# Stations and their channels: three stations of different channel sets (one an empty location
# code, one with a location code), the middle one starting 0.3 samples off the grid.
CHANNELS = {("XX", "AAA", ""): ("HHZ",), ("XX", "BBB", "00"): ("HHE", "HHN", "HHZ"),
            ("YY", "CCC", ""): ("HHN", "HHZ")}  # fmt: skip


def as_root_attrs(url: str) -> None:
    """Turn a store into the layout written before the group `station_attrs`: its per-station
    attrs in the root attrs, objects keyed by station, and no such group."""
    group = zarr.open_group(url, mode="r+")
    held = storage.station_attrs(group)
    del group[cv.STATION_ATTRS_GROUP]
    zarr.consolidate_metadata(url)
    zarr.open_group(url, mode="r+").attrs.update(held)
    zarr.consolidate_metadata(url)


def _archive(folder: Path) -> list[str]:
    folder.mkdir()
    paths = []
    for index, ((network, station, location), channels) in enumerate(CHANNELS.items()):
        shift = 0.3 / RATE if station == "BBB" else 0.0
        for channel in channels:
            data = np.random.default_rng(index).standard_normal(2000).astype(np.float32)
            header = {"network": network, "station": station, "location": location,
                      "channel": channel, "sampling_rate": RATE,
                      "starttime": START + shift}  # fmt: skip
            path = folder / f"{network}.{station}.{channel}.mseed"
            obspy.Trace(data, header).write(str(path), format="MSEED")
            paths.append(str(path))
    return paths


def _root_attrs(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())["attributes"]


def test_per_station_attrs_are_arrays_beside_the_data(tmp_path, monkeypatch):
    monkeypatch.setattr(station_attrs, "ROWS_PER_CHUNK", 2)  # 3 stations: two chunks, two tasks
    store = tmp_path / "store.zarr"
    ingest_waveforms(_archive(tmp_path / "archive"), StoreLocation(store), quiet=True)
    assert not set(cv.STATION_ATTRS) & set(_root_attrs(store))
    group = zarr.open_group(store, mode="r")
    held = group[cv.STATION_ATTRS_GROUP]
    stations = [str(s) for s in group[cv.STATION][:]]
    assert stations == ["XX.AAA", "XX.BBB.00", "YY.CCC"]
    for name in cv.STATION_ATTRS:
        assert held[name].shape == (3,) and held[name].chunks == (2,)
        assert held[name].metadata.dimension_names == (cv.STATION,)
    # Each element the station's entry as JSON, read with zarr and json alone.
    own = [json.loads(text) for text in held["station_channels"][:].tolist()]
    assert own == [["HHZ"], ["HHE", "HHN", "HHZ"], ["HHN", "HHZ"]]
    offsets = [json.loads(text) for text in held["time_offsets_s"][:].tolist()]
    assert offsets[0] == [0.0] and offsets[1] == [pytest.approx(0.3 / RATE)]
    assert [json.loads(text) for text in held["channel_metadata"][:].tolist()] == [{}, {}, {}]
    expected = {
        "station_channels": dict(zip(stations, own, strict=True)),
        "time_offsets_s": dict(zip(stations, offsets, strict=True)),
        "channel_metadata": dict.fromkeys(stations, {}),
    }
    assert storage.station_attrs(group) == expected
    ds = storage.open_dataset(StoreLocation(store))
    assert {name: ds.attrs[name] for name in cv.STATION_ATTRS} == expected

    # A store of the layout before: the same entries, the same opened attrs.
    old = tmp_path / "old.zarr"
    shutil.copytree(store, old)
    as_root_attrs(str(old))
    assert cv.STATION_ATTRS_GROUP not in zarr.open_group(old, mode="r")
    assert set(cv.STATION_ATTRS) <= set(_root_attrs(old))
    assert storage.station_attrs(zarr.open_group(old, mode="r")) == expected
    assert storage.open_dataset(StoreLocation(old)).attrs == ds.attrs


def test_an_append_onto_an_older_store_moves_its_entries_into_the_group(tmp_path):
    paths = _archive(tmp_path / "archive")
    later = [p for p in paths if "BBB.HHZ" in p]
    first = [p for p in paths if p not in later]
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    ingest_waveforms(first, StoreLocation(appended), quiet=True)
    as_root_attrs(str(appended))
    ingest_waveforms(later, StoreLocation(appended), append=True, quiet=True)
    ingest_waveforms(paths, StoreLocation(whole), quiet=True)
    assert not set(cv.STATION_ATTRS) & set(_root_attrs(appended))
    got, want = (zarr.open_group(store, mode="r") for store in (appended, whole))
    assert storage.station_attrs(got) == storage.station_attrs(want)
    assert storage.station_attrs(got)["station_channels"]["XX.BBB.00"] == ["HHE", "HHN", "HHZ"]
    for name in cv.STATION_ATTRS:
        assert (whole / cv.STATION_ATTRS_GROUP / name / "c" / "0").read_bytes() == (
            appended / cv.STATION_ATTRS_GROUP / name / "c" / "0"
        ).read_bytes()
