"""InventoryIndex answers as obspy's own `Inventory.select` does: per station id, and per
channel and time, over networks with several epochs, a network without stations, codes in
other case, wildcards and times on and around epoch bounds."""

from __future__ import annotations

import numpy as np
from obspy import UTCDateTime
from obspy.core.inventory import Channel, Inventory, Network, Station

from seisctf.catalogs.seed_ids import split_station
from seisctf.formats.obspy_archive.inventory_index import InventoryIndex
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.obspy_archive.waveform_plan import check_against_inventory

T0 = UTCDateTime("2020-01-01")


def channel(code: str, location: str, start: float, end: float | None, rate: float) -> Channel:
    return Channel(code, location, 10.0, 20.0, 0.0, 0.0, sample_rate=rate, start_date=T0 + start,
                   end_date=None if end is None else T0 + end)  # fmt: skip


def inventory() -> Inventory:
    day = 86400.0
    first = Station("AB1", 1.0, 2.0, 3.0, start_date=T0, end_date=T0 + 10 * day, channels=[
        channel("HHZ", "00", 0, 5 * day, 100.0),
        channel("HHZ", "00", 5 * day, None, 50.0),
        channel("HHN", "10", 0, None, 100.0),
    ])  # fmt: skip
    second = Station("AB1", 1.5, 2.5, 3.5, start_date=T0 + 10 * day, channels=[
        channel("HHZ", "00", 10 * day, None, 100.0),
    ])  # fmt: skip
    other = Station("cd2", 4.0, 5.0, 6.0, channels=[channel("BHZ", "", 0, None, 20.0)])
    return Inventory(networks=[
        Network("XA", stations=[first, other]),
        Network("XB", stations=[Station("AB1", 0.0, 0.0, 0.0, channels=[
            channel("HHZ", "00", 0, None, 100.0)])]),
        Network("XA", stations=[second], start_date=T0 + 10 * 86400.0),
        Network("XC"),  # no stations: obspy's select keeps it when the code matches
    ])  # fmt: skip


def summary(selected: Inventory) -> list:
    """Everything a plan reads from a selection, in order."""
    return [
        (net.code, sta.code, sta.latitude, cha.code, cha.location_code, cha.sample_rate,
         cha.start_date, cha.end_date)
        for net in selected for sta in net for cha in sta
    ] + [net.code for net in selected]  # fmt: skip


def test_station_and_channel_selections_equal_obspys():
    inv = inventory()
    index = InventoryIndex(inv)
    stations = ["XA.AB1.00", "XA.AB1.10", "xa.ab1.00", "XA.CD2", "XB.AB1.00", "XA.AB1.99",
                "XC.ZZZ", "XD.AB1.00", "X?.AB1.00", "XA.*.00", "XA.AB1"]  # fmt: skip
    bounds = [0.0, 5 * 86400.0, 10 * 86400.0]
    times = sorted({b + d for b in bounds for d in (-1.0, -1e-7, 0.0, 1e-7, 1.0)} | {3e5, 2e6})
    checked = 0
    for station in stations:
        network, code, location = split_station(station)
        wanted = inv.select(network=network, station=code, location=location)
        assert summary(index.station(station)) == summary(wanted), station
        assert index.knows(station) == bool(wanted.networks)
        for cha in ("HHZ", "HHN", "BHZ", "EHZ"):
            for offset in times:
                when = T0 + offset
                expected = wanted.select(channel=cha, time=when)
                assert summary(index.channels_at(station, cha, when)) == summary(expected)
                checked += any(True for net in expected for sta in net for _ in sta)
    assert checked > 20  # the selections compared are not all empty


def test_random_times_equal_obspys():
    inv = inventory()
    index = InventoryIndex(inv)
    rng = np.random.default_rng(5)
    for offset in rng.uniform(-86400.0, 12 * 86400.0, 300):
        when = T0 + float(offset)
        wanted = inv.select(network="XA", station="AB1", location="00").select(
            channel="HHZ", time=when
        )
        assert summary(index.channels_at("XA.AB1.00", "HHZ", when)) == summary(wanted)


def test_trace_checks_through_one_index_equal_each_through_a_fresh_one():
    """`check_against_inventory` keeps the traces found consistent per station, channel, span
    and rate: a trace of another rate, another channel or beyond an epoch bound in the same
    index is still checked (its answer equals that of an index that never saw another)."""
    inv = inventory()
    shared = InventoryIndex(inv)
    rng = np.random.default_rng(38)
    answers = []
    for number in range(400):
        station = str(rng.choice(["XA.AB1.00", "XA.AB1.10", "XB.AB1.00", "XA.CD2", "XZ.NEW"]))
        header = TraceHeader(
            f"file{number}", station, str(rng.choice(["HHZ", "HHN", "BHZ"])),
            (T0 + float(rng.uniform(-86400.0, 12 * 86400.0))).ns,
            float(rng.choice([100.0, 50.0, 20.0])), 100,
        )  # fmt: skip
        answer = check_against_inventory(header, shared)
        assert answer == check_against_inventory(header, InventoryIndex(inv)), header
        answers.append(answer)
    assert sum(a is None for a in answers) > 50 and sum(a is not None for a in answers) > 50
