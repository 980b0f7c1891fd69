"""`seisctf ingest waveforms`, where stations are and when their samples are: SAC header
coordinates (obspy's GD.PIN1 and LMOW test files) used without an inventory and checked
against one, and traces moved onto the store's grid by more than 1 % of a sample (obspy's
CH.BALST LHE/LHZ day, and stations written 0.5 % and 2 % of a sample late) reported. Expected
positions, distances and offsets are computed here with numpy from obspy's reads."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import obspy
from obspy.core.inventory import Channel, Inventory, Network, Station
from test_waveforms import I59_XML, OBSPY, _cli, _open

SAC_DATA = OBSPY / "io/sac/tests/data"
PIN1 = SAC_DATA / "null_terminated.sac"  # GD.PIN1..LYE, stla 33.61216, stlo -116.45816, stel 0
LMOW = SAC_DATA / "LMOW.BHE.SAC"  # .LMOW..BHE, stla -39.41, stlo 175.75, no stel
BALST = OBSPY / "io/mseed/tests/data/CH.BALST..LH_two_channels"
EARTH_RADIUS_M = 6_371_000.0


def _problems(stdout: str) -> list[str]:
    return [line.removeprefix("problem: ") for line in stdout.splitlines() if "problem:" in line]


def _header_position(path: Path) -> tuple[float, float, float]:
    """obspy's stla, stlo, stel (NaN if absent) as the float32 values SAC holds them in."""
    sac = obspy.read(str(path))[0].stats.sac
    values = (sac["stla"], sac["stlo"], sac.get("stel", np.nan))
    return tuple(float(np.float32(value)) for value in values)


def _inventory(path: Path, latitude: float, longitude: float, elevation: float) -> Path:
    """StationXML of GD.PIN1 with its LYE channel (1 Hz, from 2012) at the given position."""
    channel = Channel("LYE", "", latitude, longitude, elevation, 0.0, sample_rate=1.0,
                      start_date=obspy.UTCDateTime(2012, 1, 1))  # fmt: skip
    station = Station("PIN1", latitude, longitude, elevation, channels=[channel],
                      start_date=obspy.UTCDateTime(2012, 1, 1))  # fmt: skip
    Inventory([Network("GD", stations=[station])], source="test").write(
        str(path), format="STATIONXML"
    )
    return path


def test_sac_header_coordinates_are_used_without_an_inventory(tmp_path, dask_cluster):
    for path, station in ((PIN1, "GD.PIN1"), (LMOW, ".LMOW")):
        out = tmp_path / f"{path.stem}.zarr"
        run = _cli(str(path), "--out", str(out), scheduler=dask_cluster.address)
        assert run.returncode == 0 and run.stderr == "", run.stderr
        assert _problems(run.stdout) == []
        ds = _open(out).sel(station=station)
        latitude, longitude, elevation = _header_position(path)
        np.testing.assert_allclose(float(ds["latitude"]), latitude, rtol=1e-7)
        np.testing.assert_allclose(float(ds["longitude"]), longitude, rtol=1e-7)
        np.testing.assert_allclose(float(ds["elevation"]), elevation, rtol=1e-7)  # NaN: NaN
    # The shortest decimal float32 reads back, not float32's binary expansion.
    assert float(_open(tmp_path / "null_terminated.zarr")["latitude"][0]) == 33.61216

    # Two files of one station whose headers are 0.01° of latitude apart (1112 m along the
    # meridian): the first path's position is used, the other named.
    folder = tmp_path / "two"
    folder.mkdir()
    first = Path(shutil.copy(PIN1, folder / "a.sac"))
    moved = obspy.read(str(PIN1))[0]
    moved.stats.sac.stla = np.float32(33.62216)
    moved.write(str(folder / "b.sac"), format="SAC")
    run = _cli(str(folder), "--out", str(tmp_path / "two.zarr"), scheduler=dask_cluster.address)
    apart = math.radians(33.62216 - 33.61216) * EARTH_RADIUS_M
    assert _problems(run.stdout) == [
        f"{folder / 'b.sac'}: its SAC header puts GD.PIN1 at (33.6222°, -116.458°, 0 m), "
        f"{apart:.0f} m from (33.6122°, -116.458°, 0 m) of {first}, which the store uses"
    ]
    assert float(_open(tmp_path / "two.zarr")["latitude"][0]) == 33.61216


def test_sac_header_coordinates_are_checked_against_the_inventory(tmp_path, dask_cluster):
    latitude, longitude, _ = _header_position(PIN1)
    address = dask_cluster.address
    # The inventory puts PIN1 1280 m higher than its SAC header's 0 m: a problem, and the
    # inventory's position is stored.
    higher = _inventory(tmp_path / "higher.xml", latitude, longitude, 1280.0)
    out = tmp_path / "higher.zarr"
    run = _cli(str(PIN1), "--inventory", str(higher), "--out", str(out), scheduler=address)
    assert run.returncode == 0, run.stderr
    assert _problems(run.stdout) == [
        f"{PIN1}: its SAC header puts GD.PIN1 at (33.6122°, -116.458°, 0 m), 1280 m from the "
        "inventory's (33.6122°, -116.458°, 1280 m); the store uses the inventory's"
    ]
    assert float(_open(out)["elevation"][0]) == 1280.0
    # 50 m apart in elevation: within the 100 m tolerance, silent.
    close = _inventory(tmp_path / "close.xml", latitude, longitude, 50.0)
    run = _cli(str(PIN1), "--inventory", str(close), "--out", str(tmp_path / "close.zarr"),
               scheduler=address)  # fmt: skip
    assert run.returncode == 0 and _problems(run.stdout) == [], run.stdout
    # An inventory without the station: its header's position, and the problem line says so.
    out = tmp_path / "unknown.zarr"
    run = _cli(str(PIN1), "--inventory", str(I59_XML), "--out", str(out), scheduler=address)
    assert _problems(run.stdout) == [
        f"GD.PIN1: unknown station (not in the inventory); coordinates are from the SAC header "
        f"of {PIN1}"
    ]
    assert float(_open(out)["longitude"][0]) == -116.45816


def _grid_offset(start_ns: int, grid_ns: int, rate: float) -> tuple[int, float]:
    """(grid index, offset (s) trace minus grid) of a trace start: its nearest grid sample."""
    position = (start_ns - grid_ns) * rate / 1e9
    index = int(np.floor(position + 0.5))
    return index, (position - index) / rate


def test_a_channel_moved_by_a_fraction_of_a_sample_is_reported(tmp_path, dask_cluster):
    out = tmp_path / "balst.zarr"
    run = _cli(str(BALST), "--out", str(out), scheduler=dask_cluster.address)
    assert run.returncode == 0, run.stderr
    traces = {tr.stats.channel: tr for tr in obspy.read(str(BALST))}
    grid_ns = min(tr.stats.starttime.ns for tr in traces.values())  # LHZ starts first
    index, offset = _grid_offset(traces["LHE"].stats.starttime.ns, grid_ns, 1.0)
    assert offset == -0.375
    assert _problems(run.stdout) == [
        f"{BALST}: CH.BALST..LHE starts 0.375 s before its grid sample (0.375 of a sample): its "
        "samples are stored 0.375 s later than recorded (1 of its 1 trace(s) moved by more "
        "than 1% of a sample; every offset is in `time_offsets_s`)"
    ]
    ds = _open(out)
    lhe = ds["data"].sel(channel="LHE").values[0]
    np.testing.assert_array_equal(
        lhe[index : index + traces["LHE"].stats.npts], traces["LHE"].data.astype(np.float32)
    )
    assert ds.attrs["time_offsets_s"]["CH.BALST"] == [-0.375, 0.0]


def test_the_shift_tolerance_is_one_percent_of_a_sample(tmp_path, dask_cluster):
    """Stations written 0.5 % and 2 % of a sample (5 and 20 ms at 1 Hz) after the first: only
    the second is a problem; --strict refuses it."""
    lhz = obspy.read(str(BALST)).select(channel="LHZ")[0]
    lhz = lhz.slice(lhz.stats.starttime, lhz.stats.starttime + 599)
    folder = tmp_path / "archive"
    folder.mkdir()
    for station, late_s in (("A", 0.0), ("B", 0.005), ("C", 0.02)):
        trace = lhz.copy()
        trace.stats.station = station
        trace.stats.starttime += late_s
        trace.write(str(folder / f"{station}.mseed"), format="MSEED", encoding="STEIM2")
    run = _cli(str(folder), "--out", str(tmp_path / "s.zarr"), scheduler=dask_cluster.address)
    assert run.returncode == 0, run.stderr
    assert _problems(run.stdout) == [
        f"{folder / 'C.mseed'}: CH.C..LHZ starts 0.02 s after its grid sample (0.02 of a "
        "sample): its samples are stored 0.02 s earlier than recorded (1 of its 1 trace(s) "
        "moved by more than 1% of a sample; every offset is in `time_offsets_s`)"
    ]
    strict = _cli(str(folder), "--out", str(tmp_path / "strict.zarr"), "--strict",
                  scheduler=dask_cluster.address)  # fmt: skip
    assert strict.returncode == 3 and "Traceback" not in strict.stderr
    assert "CH.C..LHZ starts 0.02 s after its grid sample" in strict.stderr
    assert not (tmp_path / "strict.zarr").exists()
