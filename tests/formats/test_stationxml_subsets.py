"""A StationXML file cut to some station codes (`stationxml_subsets`) reads, through obspy, as
the whole file does for every query an ingest makes of those codes: on the StationXML files
obspy ships for its own tests and on a file of several networks sharing a station code, epochs,
a network without stations and a comment. An ingest's inventory check parses only the stations
of the partition it checks, and the store is the one a whole parse gives."""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import obspy
import pytest
from obspy import UTCDateTime
from obspy.core.inventory import Channel, Inventory, Network, Station
from test_inventory_index import T0, summary
from test_inventory_index import inventory as several_networks
from test_waveforms import write_synthetic_archive

from seisctf.formats.obspy_archive import inventory_checks
from seisctf.formats.obspy_archive.inventory_checks import InventorySource
from seisctf.formats.obspy_archive.inventory_index import InventoryIndex
from seisctf.formats.obspy_archive.inventory_text import inventory_holds
from seisctf.formats.obspy_archive.stationxml_subsets import Pieces
from seisctf.formats.obspy_archive.waveform_plan import unknown_station
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

OBSPY_FILES = sorted((Path(obspy.__file__).parent / "io/stationxml/tests/data").glob("*.xml"))


def _xml(inventory: Inventory, comment: bool = False) -> bytes:
    written = io.BytesIO()
    inventory.write(written, format="STATIONXML")
    content = written.getvalue()
    if comment:  # a comment between the header and the first network: not data
        content = content.replace(b"<Network ", b"<!-- a comment --><Network ", 1)
    return content


def _read(content: bytes) -> Inventory:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return obspy.read_inventory(io.BytesIO(content))


def _queries(inventory: Inventory, code: str, networks: list[str], locations: list[str]) -> list:
    """What an ingest asks of station `code`: obspy's selections, the index's, the problem
    texts and the responses, in order."""
    index = InventoryIndex(inventory)
    answers: list = [
        inventory.select(station=code).networks,
        inventory_holds(inventory, "XA", code),
    ]
    for network in networks:
        answers.append(inventory_holds(inventory, network, code, "HHZ"))
        for location in locations:
            if "." in network + code + location:  # not a station id (obspy's random codes)
                continue
            station = f"{network}.{code}.{location}"
            selected = index.station(station)
            answers += [
                summary(selected),
                index.knows(station),
                unknown_station(station, inventory),
            ]
            for net in selected:
                for sta in net:
                    for cha in sta:
                        when = cha.start_date or T0
                        answers.append(summary(index.channels_at(station, cha.code, when)))
                        answers.append(_response(inventory, f"{station}.{cha.code}", when))
    return answers


def _response(inventory: Inventory, seed_id: str, when: UTCDateTime):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return inventory.get_response(seed_id, when)
    except Exception as error:  # noqa: BLE001 - obspy's bare Exception: none matches
        return str(error)


@pytest.mark.parametrize("name", [path.name for path in OBSPY_FILES] + ["several_networks"])
def test_every_query_of_the_cut_codes_answers_as_the_whole_file(name):
    content = (
        _xml(several_networks(), comment=True) if name == "several_networks"
        else (OBSPY_FILES[0].parent / name).read_bytes()
    )  # fmt: skip
    whole = _read(content)
    pieces = Pieces.of(content)
    assert pieces is not None
    codes = sorted(pieces.codes())
    networks = sorted({net.code for net in whole}) + ["ZZ"]
    locations = sorted({cha.location_code for net in whole for sta in net for cha in sta})
    for code in [*codes, "NOPE"]:
        expected = _queries(whole, code, networks, [*locations, "99"])
        cut = _read(pieces.subset([code]))
        assert _queries(cut, code, networks, [*locations, "99"]) == expected, (name, code)
        with_all = _read(pieces.subset(codes))  # a partition of every station: the same
        assert _queries(with_all, code, networks, [*locations, "99"]) == expected, (name, code)
        if any(len(net) for net in whole.select(station=code)):  # the comparison can fail
            other = _read(pieces.subset(["NOPE"]))
            assert _queries(other, code, networks, locations) != _queries(
                whole, code, networks, locations
            )


def test_the_several_networks_file_is_cut_to_its_codes():
    pieces = Pieces.of(_xml(several_networks(), comment=True))
    assert pieces is not None and pieces.codes() == {"AB1", "CD2"}
    cut = _read(pieces.subset(["ab1"]))  # codes compare in upper case, as obspy's select
    assert [(net.code, [sta.code for sta in net]) for net in cut] == [
        ("XA", ["AB1"]), ("XB", ["AB1"]), ("XA", ["AB1"]), ("XC", []),
    ]  # fmt: skip
    assert Pieces.of(b"not xml at all") is None
    assert Pieces.of(b"<?xml version='1.0'?><quakeml/>") is None


def _station(code: str) -> Station:
    opened = UTCDateTime("2020-01-01")
    channels = [Channel(c, "00", 45.0, 7.0, 100.0, 0.0, sample_rate=100.0, start_date=opened)
                for c in ("HHZ", "HHN", "HHE")]  # fmt: skip
    return Station(code, 45.0, 7.0, 100.0, channels=channels)


def test_an_ingest_parses_its_stations_alone_and_writes_the_whole_parses_store(
    tmp_path, monkeypatch
):
    """The synthetic archive's two stations (XX.AAA.00, XX.BBB.) in an inventory of 42: each
    parse of the check holds those two, and the store (its metadata from the inventory) is,
    byte for byte, the one of a check that parses the whole file."""
    files = write_synthetic_archive(tmp_path / "archive")
    stations = [_station(code) for code in ("AAA", "BBB", *(f"S{i:02d}" for i in range(40)))]
    xml = tmp_path / "stations.xml"
    xml.write_bytes(_xml(Inventory(networks=[Network("XX", stations=stations)])))
    parsed: list[int] = []
    real_read = inventory_checks._read

    def counting(paths, contents):
        inventory = real_read(paths, contents)
        parsed.append(sum(len(net) for net in inventory))
        return inventory

    monkeypatch.setattr(inventory_checks, "_read", counting)
    inventory_checks._PIECES.clear()
    inventory_checks._PARSED.clear()

    def ingest(out: Path) -> None:
        ingest_waveforms([str(path) for path in files], StoreLocation(out),
                         inventories=[str(xml)], quiet=True)  # fmt: skip

    ingest(tmp_path / "cut.zarr")
    assert parsed and max(parsed) <= 2, parsed
    parsed.clear()
    monkeypatch.setattr(inventory_checks, "parsed_stations",
                        lambda source, _: inventory_checks.parsed(source))  # fmt: skip
    ingest(tmp_path / "whole.zarr")
    assert parsed and set(parsed) == {42}  # (each thread of the check may parse it)
    assert _files(tmp_path / "cut.zarr") == _files(tmp_path / "whole.zarr")


def _files(store: Path) -> dict[str, str]:
    """sha256 of every file of the store (the root attrs hold no path of the run's store)."""
    return {
        str(path.relative_to(store)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(store.rglob("*")) if path.is_file()
    }  # fmt: skip


def test_a_source_of_stationxml_and_another_format_is_parsed_whole():
    xml = _xml(several_networks())
    resp = (Path(obspy.__file__).parent / "io/xseed/tests/data/RESP.BW.FURT..EHZ").read_bytes()
    source = InventorySource(("a.xml", "b.resp"), (xml, resp),
                             tuple(hashlib.sha256(c).hexdigest() for c in (xml, resp)))  # fmt: skip
    inventory_checks._PIECES.clear()
    inventory_checks._PARSED.clear()
    found = inventory_checks.parsed_stations(source, ["XA.AB1.00"])
    assert sum(len(net) for net in found) == sum(len(net) for net in _read(xml)) + 1
    wildcard = InventorySource(("a.xml",), (xml,), ("x",))
    assert inventory_checks.parsed_stations(wildcard, ["XA.A*.00"]) is inventory_checks.parsed(
        wildcard
    )
