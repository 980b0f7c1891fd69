"""The stations' metadata of a waveform plan is merged and kept on the workers, in pieces of
stations (`station_pieces`): on a cluster the client holds no station's metadata while the
store's `station_attrs` are written, and the store holds every station's metadata all the same.
A plan of pieces of any size is the plan of one piece."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import obspy
import pytest
from distributed import Client
from obspy.core.inventory import Channel, Inventory, Network, Station

from seisctf import storage
from seisctf.formats.obspy_archive import station_pieces, waveforms
from seisctf.formats.obspy_archive.inventory_checks import findings, read_source
from seisctf.formats.obspy_archive.partition_plan import accept, plan_of_parts
from seisctf.formats.obspy_archive.scan_table import scan_files
from seisctf.formats.obspy_archive.station_pieces import metadata_at
from seisctf.location import StoreLocation

START = obspy.UTCDateTime("2022-02-01T00:00:00")
RATE = 1.0
N_STATIONS = 30


def _network(folder: Path, n_stations: int) -> tuple[list[str], Path]:
    """One 1 Hz miniSEED file of 600 samples for each of `n_stations` stations (each at its own
    position), and their StationXML."""
    folder.mkdir()
    paths, stations = [], []
    for index in range(n_stations):
        code = f"S{index:03d}"
        header = {"network": "ZZ", "station": code, "channel": "LHZ", "sampling_rate": RATE,
                  "starttime": START}  # fmt: skip
        data = np.random.default_rng(index).integers(-500, 500, 600).astype(np.int32)
        path = folder / f"ZZ.{code}.LHZ.mseed"
        obspy.Trace(data, header).write(str(path), format="MSEED")
        paths.append(str(path))
        latitude, longitude = 40.0 + index / 100, 10.0 + index / 50
        channel = Channel("LHZ", "", latitude, longitude, 100.0 + index, 0.0, azimuth=0.0,
                          dip=-90.0, sample_rate=RATE, start_date=START - 86400)  # fmt: skip
        stations.append(Station(code, latitude, longitude, 100.0 + index, channels=[channel],
                                start_date=START - 86400))  # fmt: skip
    inventory = folder / "stations.xml"
    Inventory([Network("ZZ", stations=stations)], source="test").write(
        str(inventory), format="STATIONXML"
    )
    return paths, inventory


def _metadata_held() -> int:
    """Stations' metadata (`waveform_plan.station_metadata`: coordinates and a dict of
    channels, which the garbage collector tracks) alive in this process."""
    return sum(1 for item in gc.get_objects()
               if isinstance(item, dict) and "channels" in item and "latitude" in item)  # fmt: skip


def test_the_client_holds_no_station_s_metadata(tmp_path, dask_cluster, monkeypatch):
    paths, inventory = _network(tmp_path / "network", N_STATIONS)
    gc.collect()
    before = _metadata_held()  # (of other tests in this process, if any)
    held: list[int] = []
    write = waveforms.write_station_attrs

    def counted(*args, **kwargs):  # the real writer, counting what the client holds first
        gc.collect()
        held.append(_metadata_held())
        return write(*args, **kwargs)

    monkeypatch.setattr(waveforms, "write_station_attrs", counted)
    monkeypatch.setattr(station_pieces, "STATIONS_PER_PIECE", 8)  # 30 stations: 4 pieces
    out = tmp_path / "store.zarr"
    with Client(dask_cluster.address):
        report = waveforms.ingest_waveforms(
            paths, StoreLocation(out), inventories=[str(inventory)], quiet=True
        )
    assert report.problems == ()
    # (Before, the plan's metadata of every station: at least one entry a station.)
    assert len(held) == 1 and held[0] - before < N_STATIONS // 2, (held, before)
    ds = storage.open_dataset(StoreLocation(str(out)))
    metadata = ds.attrs["channel_metadata"]
    assert len(metadata) == N_STATIONS
    for index, station in enumerate(ds["station"].values.tolist()):
        assert metadata[station]["LHZ"]["dip"] == -90.0
        assert float(ds["latitude"].sel(station=station)) == pytest.approx(40.0 + index / 100)
        assert float(ds["elevation"].sel(station=station)) == 100.0 + index


def test_pieces_of_any_size_plan_as_one(tmp_path, monkeypatch):
    paths, inventory = _network(tmp_path / "network", 11)
    source = read_source([StoreLocation(str(inventory))])
    parts = []
    for cut in (slice(0, 4), slice(4, 5), slice(5, 11)):
        scans = scan_files(paths[cut])
        parts.append(accept(scans, findings(scans, source, False)))
    whole, _ = plan_of_parts(parts)
    monkeypatch.setattr(station_pieces, "STATIONS_PER_PIECE", 3)
    cut, _ = plan_of_parts(parts)
    assert len(whole.station_metadata) == 1 and len(cut.station_metadata) == 4
    assert metadata_at(cut.station_metadata, cut.stations) == metadata_at(
        whole.station_metadata, whole.stations
    )
    np.testing.assert_array_equal(cut.coordinates, whole.coordinates)
    assert cut.problems == whole.problems
    assert cut.coordinates[:, 2].tolist() == [100.0 + index for index in range(11)]
