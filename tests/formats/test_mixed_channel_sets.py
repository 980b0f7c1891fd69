"""A network of mixed channel sets, from ObsPy's shipped recordings of one local event sequence
(2010-05-27, 50 Hz): BW.UH1 with SHZ only, BW.UH3 with SHZ/SHN/SHE, BW.UH4 with EHZ only
(recorded at 100 Hz, decimated by obspy to 50 Hz, its first and last sample cut off, so that
its record has gaps at both ends of the store's). Through the command line: `ingest waveforms`
(coverage per station's own channels), `ingest quakeml` (noise windows at one-component
stations, a shortfall saying why), `split`, `pick stalta` (an empty dev split), `export
seisbench`; and SeisBench's PhaseNet trained on the one-component windows."""

from __future__ import annotations

import logging
from pathlib import Path

import h5py
import numpy as np
import obspy
import pandas as pd
import pytest
import seisbench.data as sbd
import zarr
from obspy.core.event import Catalog, Event, Magnitude, Origin, Pick, WaveformStreamID
from phasenet_steps import phasenet_losses
from test_station_attrs import as_root_attrs

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import seisbench_dataset
from seisctf.cli import main
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

logging.getLogger("seisbench").setLevel(logging.ERROR)

OBSPY_DATA = Path(obspy.__file__).parent / "signal" / "tests" / "data"
RATE = 50.0
WINDOW_S, PRE_ARRIVAL_S, NOISE_WINDOWS = 20.0, 5.0, 2
# ObsPy's files: (station, channel) -> file name; UH4's EHZ is decimated and trimmed.
FILES = {
    ("BW.UH1", "SHZ"): "BW.UH1._.SHZ.D.2010.147.cut.slist.gz",
    ("BW.UH3", "SHE"): "BW.UH3._.SHE.D.2010.147.cut.slist.gz",
    ("BW.UH3", "SHN"): "BW.UH3._.SHN.D.2010.147.cut.slist.gz",
    ("BW.UH3", "SHZ"): "BW.UH3._.SHZ.D.2010.147.cut.slist.gz",
    ("BW.UH4", "EHZ"): "BW.UH4._.EHZ.D.2010.147.cut.slist.gz",
}
# Two events of the sequence: origin time and P pick per station (S picks 1.5 s later).
EVENTS = (
    ("2010-05-27T16:24:31", {"UH1": 33.35, "UH3": 33.17, "UH4": 33.30}),
    ("2010-05-27T16:25:24", {"UH1": 26.89, "UH3": 26.63, "UH4": 26.80}),
)


def obspy_trace(station: str, channel: str) -> obspy.Trace:
    """The recording as the archive holds it (UH4's decimated to 50 Hz, one sample cut at
    each end)."""
    trace = obspy.read(str(OBSPY_DATA / FILES[(station, channel)]))[0]
    if station == "BW.UH4":
        trace.decimate(2)
        trace.trim(trace.stats.starttime + 1 / RATE, trace.stats.endtime - 1 / RATE)
    return trace


def write_catalog(path: Path) -> list[tuple[obspy.UTCDateTime, str, obspy.UTCDateTime]]:
    """The QuakeML catalogue; returns its picks (time, station, origin time)."""
    catalog, picks = Catalog(), []
    for origin_time, p_seconds in EVENTS:
        origin = obspy.UTCDateTime(origin_time)
        event = Event(origins=[Origin(time=origin, latitude=48.2, longitude=11.3, depth=5e3)])
        event.magnitudes.append(Magnitude(mag=1.5, magnitude_type="ML"))
        for code, second in p_seconds.items():
            p_time = obspy.UTCDateTime(origin_time[:17] + "00") + second
            for phase, time in (("P", p_time), ("S", p_time + 1.5)):
                stream = WaveformStreamID("BW", code, "", "SHZ")
                event.picks.append(Pick(time=time, waveform_id=stream, phase_hint=phase))
                picks.append((time, f"BW.{code}", origin))
        catalog.append(event)
    catalog.write(str(path), format="QUAKEML")
    return picks


@pytest.fixture(scope="module")
def network(tmp_path_factory, dask_cluster):
    """The archive, the continuous store, the event-window store (split by event: one to
    train, one to test, no dev) and the catalogue's picks."""
    root = tmp_path_factory.mktemp("mixed")
    (root / "archive").mkdir()
    for station, channel in FILES:
        path = root / "archive" / f"{station}.{channel}.mseed"
        obspy_trace(station, channel).write(str(path), format="MSEED")
    picks = write_catalog(root / "catalog.xml")
    scheduler = ["--quiet", "--scheduler", dask_cluster.address]
    continuous, windows = str(root / "continuous.zarr"), str(root / "windows.zarr")
    assert (
        main(["ingest", "waveforms", str(root / "archive"), "--out", continuous, *scheduler]) == 0
    )
    quakeml = ["ingest", "quakeml", str(root / "catalog.xml"), "--archive", continuous]
    window = ["--window", str(WINDOW_S), "--pre-arrival", str(PRE_ARRIVAL_S)]
    noise = ["--noise-windows", str(NOISE_WINDOWS)]
    assert main([*quakeml, "--out", windows, *window, *noise, *scheduler]) == 0
    split = ["split", windows, "--strategy", "event", "--fractions", "0.5,0,0.5"]
    assert main([*split, *scheduler]) == 0
    return {"root": root, "continuous": continuous, "windows": windows, "picks": picks}


def grid_start() -> obspy.UTCDateTime:
    return min(obspy_trace(*key).stats.starttime for key in FILES)


def test_coverage_is_a_fraction_of_each_station_s_own_channels(network):
    ds = storage.open_dataset(StoreLocation(network["continuous"]))
    stations = [str(s) for s in ds[cv.STATION].values]
    own = {s: sorted(c for station, c in FILES if station == s) for s in stations}
    assert ds.attrs["station_channels"] == own
    n_time = ds.sizes[cv.TIME]
    # Independently: the samples of each station's own traces over its channels × the record.
    expected = [
        sum(obspy_trace(s, c).stats.npts for c in own[s]) / (len(own[s]) * n_time) for s in stations
    ]
    np.testing.assert_allclose(ds[cv.COVERAGE_VAR].values[:, 0], expected, rtol=1e-6)
    assert expected[:2] == [1.0, 1.0] and expected[2] == (n_time - 2) / n_time


def window_values(station: str, channel: str, start: obspy.UTCDateTime, n: int) -> np.ndarray:
    """n samples of ObsPy's trace from the one nearest `start`, float32."""
    trace = obspy_trace(station, channel)
    first = round((start - trace.stats.starttime) * RATE)
    return trace.data[first : first + n].astype(np.float32)


def test_noise_windows_at_one_component_stations_and_a_shortfall_says_why(
    network, capsys, dask_cluster
):
    ds = storage.open_dataset(StoreLocation(network["windows"]))
    table = pd.DataFrame(
        {name: ds[name].values for name in ("trace_name", "trace_category", "trace_channel")}
    )
    table["station"] = [name.split("_")[0] for name in table["trace_name"]]
    noise = table[table["trace_category"] == "noise"]
    assert noise["station"].value_counts().to_dict() == {"BW.UH1": 2, "BW.UH3": 2}
    assert set(table.loc[table["station"] == "BW.UH4", "trace_channel"]) == {"EH"}
    # Every window holds ObsPy's samples of the station's channels, NaN where it has none.
    n = round(WINDOW_S * RATE)
    for i, station in enumerate(table["station"]):
        start = obspy.UTCDateTime(str(ds["trace_start_time"].values[i]))
        band = table["trace_channel"].iloc[i]
        for c, letter in enumerate(ds[cv.CHANNEL].values):
            got = ds[cv.EVENT_WINDOWS_VAR].values[i, c]
            if (station, band + letter) in FILES:
                np.testing.assert_array_equal(got, window_values(station, band + letter, start, n))
            else:
                assert np.isnan(got).all()
    # BW.UH4's record misses its first grid sample: its one block is not whole. The reasons,
    # counted here with numpy: tiles of n samples within a window of a pick or origin.
    n_time = storage.open_dataset(StoreLocation(network["continuous"])).sizes[cv.TIME]
    starts = np.arange(n_time // n) * n
    busy = [(t - grid_start()) * RATE for t, s, _ in network["picks"] if s == "BW.UH4"]
    busy += [(origin - grid_start()) * RATE for *_, origin in network["picks"]]
    near = [any(start - n < b < start + 2 * n for b in busy) for start in starts]
    expected = (
        f"BW.UH4: 0 pick-free window(s), {NOISE_WINDOWS} asked for: of {starts.size} candidate "
        f"window(s) (the record tiled from its first sample), {sum(near)} lie within one window "
        f"length of a pick or an origin time, {starts.size - sum(near)} more in time blocks "
        "with gaps in the station's channels (coverage < 1 in blocks of 262144 samples)"
    )
    assert ds.attrs["ingest_problems"] == [expected]
    out = str(network["root"] / "again.zarr")
    argv = ["ingest", "quakeml", str(network["root"] / "catalog.xml"), "--archive"]
    argv += [network["continuous"], "--out", out, "--window", str(WINDOW_S), "--quiet"]
    argv += ["--noise-windows", str(NOISE_WINDOWS), "--scheduler", dask_cluster.address]
    assert main(argv) == 0
    assert f"problem: {expected}" in capsys.readouterr().out.splitlines()


def one_component_training(windows: str):
    """The README's training store, `store.train()`, kept to the one-component stations."""
    train = seisbench_dataset(windows).train()
    one = train.metadata["station_code"].isin(["UH1", "UH4"])
    assert one.sum() >= 2 and "ZNE" == train.component_order
    return train.filter(one.to_numpy(), inplace=False)


def test_phasenet_trains_to_a_finite_loss_on_one_component_stations(network):
    """The README's loop (random-init PhaseNet, CPU, Adam, its loss), 3 steps on windows whose
    N and E components the stations lack: SeisBench's `pad` makes them zeros, the loss finite."""
    import torch

    store = one_component_training(network["windows"])

    def padded(inputs) -> None:
        assert torch.all(inputs[:, 1:] == 0)  # N, E padded with zeros

    losses = phasenet_losses(store, batch_size=4, check=padded)
    assert len(losses) == 3 and np.all(np.isfinite(losses))


def write_reference(windows: str, folder: Path) -> Path:
    """The store's windows written as a SeisBench user writes them from ObsPy's traces:
    each trace holds only the station's components, named in `trace_component_order`."""
    ds = storage.open_dataset(StoreLocation(windows))
    n = ds.sizes[cv.SAMPLE]
    with sbd.WaveformDataWriter(folder / "metadata.csv", folder / "waveforms.hdf5") as writer:
        writer.data_format = {"dimension_order": "CW", "sampling_rate": RATE}
        for i, name in enumerate(ds["trace_name"].values):
            station, band = str(name).split("_")[0], str(ds["trace_channel"].values[i])
            start = obspy.UTCDateTime(str(ds["trace_start_time"].values[i]))
            letters = "".join(c for c in "ZNE" if (station, band + c) in FILES)
            data = np.stack([window_values(station, band + c, start, n) for c in letters])
            row = {"trace_name": str(name), "trace_component_order": letters}
            writer.add_trace({**row, "trace_sampling_rate_hz": RATE}, data)
    return folder


@pytest.fixture(scope="module")
def exported(network, dask_cluster) -> Path:
    out = network["root"] / "exported"
    argv = ["export", "seisbench", network["windows"], str(out)]
    assert main([*argv, "--quiet", "--scheduler", dask_cluster.address]) == 0
    return out


@pytest.mark.parametrize("mode", ["pad", "copy", "ignore"])
def test_missing_components_follow_seisbench_s_setting(network, exported, tmp_path, mode):
    """The store's dataset and the export, read by SeisBench, give what SeisBench gives for
    the same ObsPy samples written with each trace's own components."""
    folder = write_reference(network["windows"], tmp_path)
    reference = sbd.WaveformDataset(folder, component_order="ZNE", missing_components=mode)
    store = seisbench_dataset(network["windows"], missing_components=mode)
    export = sbd.WaveformDataset(exported, missing_components=mode, component_order="ZNE")
    rows = np.arange(len(reference))
    for dataset in (store, export):
        if mode == "ignore":  # traces of 1 and 3 components are read one by one
            for i in rows:
                np.testing.assert_array_equal(
                    dataset.get_waveforms(int(i)), reference.get_waveforms(int(i))
                )
        else:
            got = dataset.get_waveforms(rows)
            assert np.isfinite(got).all()
            np.testing.assert_array_equal(got, reference.get_waveforms(rows))
    if mode == "pad":  # numpy's own check of one UH1 window: Z is ObsPy's, N and E zeros
        first = store.get_waveforms(0)
        assert str(store.metadata["trace_name"].iloc[0]).startswith("BW.UH1_")
        assert np.abs(first[0]).max() > 0 and not first[1:].any()


def test_the_export_holds_finite_traces_and_their_component_order(network, exported):
    with h5py.File(exported / "waveforms.hdf5", "r") as waveforms:
        blocks = [waveforms["data"][name][()] for name in waveforms["data"]]
        assert "component_order" not in waveforms["data_format"]  # it varies by trace
    assert all(np.isfinite(block).all() for block in blocks)
    metadata = pd.read_csv(exported / "metadata.csv")
    # The writer keeps a store name as `trace_name_original`, or as `trace_name` when it
    # writes the trace alone (outside a block).
    names = metadata["trace_name_original"].fillna(metadata["trace_name"])
    stations = names.str.split("_").str[0]
    expected = {"BW.UH1": "Z", "BW.UH3": "ZNE", "BW.UH4": "Z"}
    assert list(metadata["trace_component_order"]) == [expected[s] for s in stations]
    # SeisBench reads each trace's order: asked for E, N, Z, UH3's rows come reversed.
    store = storage.open_dataset(StoreLocation(network["windows"]))
    reverse = sbd.WaveformDataset(exported, component_order="ENZ", cache=None)
    uh3 = int(np.flatnonzero(stations == "BW.UH3")[0])
    np.testing.assert_array_equal(
        reverse.get_waveforms(uh3), store[cv.EVENT_WINDOWS_VAR].values[uh3][::-1]
    )


def test_pick_stalta_without_a_dev_split_says_to_tune_on_train(
    network, tmp_path, capsys, dask_cluster
):
    out = tmp_path / "picks.csv"
    argv = ["pick", "stalta", network["windows"], "--out", str(out), "--quiet"]
    code = main([*argv, "--scheduler", dask_cluster.address])
    error = capsys.readouterr().err
    assert code == 3 and "Traceback" not in error and not out.exists()
    assert "has no trace in split 'dev' (its splits: train" in error
    assert "with `--tune-split train`" in error and "`--tune-split none`" in error


def as_ingested_before(url: str) -> None:
    """Turn a store into what the ingest wrote before `station_channels`: no such attr, each
    station's coverage a fraction of every channel of the store."""
    as_root_attrs(url)  # where its per-station attrs were then
    group = zarr.open_group(url, mode="r+")
    own = group.attrs["station_channels"]
    counted = [len(own[str(s)]) / group[cv.CHANNEL].shape[0] for s in group[cv.STATION][:]]
    group[cv.COVERAGE_VAR][:] = group[cv.COVERAGE_VAR][:] * np.array(counted)[:, None]
    group.attrs.pop("station_channels")
    zarr.consolidate_metadata(url)


@pytest.mark.parametrize("before", ["station_channels", "no_station_channels"])
def test_an_append_leaves_the_coverage_of_a_one_shot_ingest(tmp_path, dask_cluster, before):
    """BW.UH3's SHZ appended (its first 60 s) to a store where UH3 had SHN and SHE: every
    block's coverage is then a fraction of UH3's three channels, as a one-shot ingest gives;
    to a store ingested before `station_channels`, UH1's (SHZ only) a fraction of its one."""
    files = {key: tmp_path / f"{key[0]}.{key[1]}.mseed" for key in FILES if key[0] != "BW.UH4"}
    for (station, channel), path in files.items():
        trace = obspy_trace(station, channel)
        if (station, channel) == ("BW.UH3", "SHZ"):
            trace.trim(trace.stats.starttime, trace.stats.starttime + 60)
        trace.write(str(path), format="MSEED")
    later = files.pop(("BW.UH3", "SHZ"))
    appended, whole = str(tmp_path / "appended.zarr"), str(tmp_path / "whole.zarr")
    ingest_waveforms(
        [str(p) for p in files.values()], StoreLocation(appended), block_samples=1024, quiet=True
    )
    if before == "no_station_channels":
        as_ingested_before(appended)
        assert storage.open_dataset(StoreLocation(appended))[cv.COVERAGE_VAR].values[
            0, 0
        ] == pytest.approx(1 / 3)
    argv = ["ingest", "waveforms", str(later), "--out", appended, "--append", "--quiet"]
    assert main([*argv, "--scheduler", dask_cluster.address]) == 0
    ingest_waveforms(
        [*map(str, files.values()), str(later)],
        StoreLocation(whole),
        block_samples=1024,
        quiet=True,
    )
    got, want = (
        storage.open_dataset(StoreLocation(appended)),
        storage.open_dataset(StoreLocation(whole)),
    )
    assert got.attrs["station_channels"] == {"BW.UH1": ["SHZ"], "BW.UH3": ["SHE", "SHN", "SHZ"]}
    np.testing.assert_array_equal(got[cv.COVERAGE_VAR].values, want[cv.COVERAGE_VAR].values)
    np.testing.assert_array_equal(got["data"].values, want["data"].values)
    assert got[cv.COVERAGE_VAR].values[1, -2] == pytest.approx(2 / 3)  # UH3 after 60 s
    assert got[cv.COVERAGE_VAR].values[0, -2] == 1.0  # UH1


def test_the_export_ingests_back_with_every_component(network, exported, dask_cluster):
    """`ingest seisbench` of the export (no data_format component order: it varies by trace)
    takes every component of the traces' orders, not the first trace's `Z`: the windows come
    back as they were, NaN where a station has no component."""
    back = str(network["root"] / "back.zarr")
    argv = ["ingest", "seisbench", str(exported), "--out", back, "--quiet"]
    assert main([*argv, "--scheduler", dask_cluster.address]) == 0
    got, want = (
        storage.open_dataset(StoreLocation(back)),
        storage.open_dataset(StoreLocation(network["windows"])),
    )
    assert got.attrs["component_order"] == "ZNE"
    np.testing.assert_array_equal(
        got[cv.EVENT_WINDOWS_VAR].values, want[cv.EVENT_WINDOWS_VAR].values
    )
