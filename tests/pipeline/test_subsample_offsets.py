"""Stations whose data start a fraction of a sample after a CTF slot's start are not dropped from
`seisctf tasks` bundles: archives whose traces start at sub-sample offsets (obspy-written
miniSEED from known arrays, and obspy's real IU data, 19.5 ms after the second) are ingested
with `seisctf ingest waveforms` and cut into bundles with `seisctf tasks`. An offset below half
a sample puts a trace on its grid sample (the ingest), one above on the next; a first sample
less than half a CTF sample after a slot's start counts as at the slot's start (its leading
gap held at that sample, recorded in the truth's `start_offsets_s`). Values are checked against
numpy / scipy computations from the source arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr
from conftest import SHORT_LAYOUT_YAML
from scipy.signal import butter, sosfilt, sosfilt_zi

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.signal.filter_design import guard_steps

SECRET = "subsample-offsets-test-secret"
RATE_HZ = 20.0
START = obspy.UTCDateTime("2023-03-01T00:00:00")
# 12 CTF samples per segment: 8 public rows, then a forecast window of 4.
LAYOUT = SHORT_LAYOUT_YAML
STEPS, PUBLIC_ROWS, FORECAST = 12, 8, slice(8, 12)
# Station code -> start offset in samples: the first three start on the grid's first sample
# (the ingest puts 0.39 there), XX.A051 on the next (0.51 rounds up), XX.A152 two later.
OFFSETS = {"A000": 0.0, "B000": 0.0, "A039": 0.39, "A051": 0.51, "A152": 1.52}
TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"


def _cli(capsys, *args: str, scheduler: str) -> tuple[int, str]:
    code = main([*args, "--scheduler", scheduler, "--quiet"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _source(code: str, n: int) -> np.ndarray:
    """Known int32 counts of a station: a slow wave, an offset, noise (float32-exact)."""
    rng = np.random.default_rng(sum(map(ord, code)))
    t = np.arange(n) / RATE_HZ
    wave = 3000 * np.sin(2 * np.pi * 0.15 * t + rng.uniform(0, 6)) + 800 * rng.standard_normal(n)
    return (wave + 5000).astype(np.int32)


def _write_archive(root: Path, n: int) -> dict[str, np.ndarray]:
    """One BHZ miniSEED file per station of OFFSETS, `n` samples each; its source arrays."""
    root.mkdir(parents=True)
    sources = {}
    for code, offset in OFFSETS.items():
        sources[code] = _source(code, n)
        header = {"network": "XX", "station": code, "channel": "BHZ",
                  "sampling_rate": RATE_HZ, "starttime": START + offset / RATE_HZ}  # fmt: skip
        trace = obspy.Trace(sources[code], header)
        trace.write(str(root / f"XX.{code}..BHZ.mseed"), format="MSEED", encoding="STEIM2")
    return sources


def _grid_row(source: np.ndarray, offset: float, n_time: int) -> np.ndarray:
    """The source on the store's grid, independently: its nearest grid sample (floor(x + 0.5)),
    NaN elsewhere."""
    row = np.full(n_time, np.nan)
    first = int(np.floor(offset + 0.5))
    row[first : first + len(source)] = source
    return row


def _pair_1(segments: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """X1train, X1test from each station's forecast segment (STEPS CTF samples): minus the mean
    of its public rows, over the per-station RMS of X1train floored at 0.1 × the median."""
    centred = np.stack([s - s[:PUBLIC_ROWS].mean() for s in segments.values()], axis=1)
    rms = np.sqrt((centred[:PUBLIC_ROWS] ** 2).mean(axis=0))
    scale = np.maximum(rms, 0.1 * np.median(rms))
    return centred[:PUBLIC_ROWS] / scale, centred[FORECAST] / scale


def _bundle(tmp_path, capsys, scheduler, store, rate) -> tuple[int, str, dict, dict]:
    layout = tmp_path / "small.yaml"
    layout.write_text(LAYOUT)
    public, truth = tmp_path / f"public-{rate}.zarr", tmp_path / f"truth-{rate}.zarr"
    code, out = _cli(capsys, "tasks", str(store), "--public", str(public), "--truth", str(truth),
                     "--layout", str(layout), "--rate", str(rate), "--secret", SECRET,
                     scheduler=scheduler)  # fmt: skip
    if code != 0:
        return code, out, {}, {}
    arrays = {
        name: array[...]
        for url in (public, truth)
        for name, array in zarr.open_group(str(url), mode="r").arrays()
    }
    return code, out, storage.read_attrs(StoreLocation(truth))[cv.ATTR_ARCHIVE], arrays


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, dask_cluster):
    """The archive at 20 Hz, exactly ten 5 Hz slots long (its guard + 12 samples each)."""
    root = tmp_path_factory.mktemp("offsets")
    slot_raw = (guard_steps(RATE_HZ, 5.0, STEPS) + STEPS) * 4
    sources = _write_archive(root / "archive", 10 * slot_raw)
    store = root / "store.zarr"
    code = main(["ingest", "waveforms", str(root / "archive"), "--out", str(store),
                 "--scheduler", dask_cluster.address, "--quiet"])  # fmt: skip
    assert code == 0
    return {"store": store, "sources": sources, "slot_raw": slot_raw}


def test_the_ingest_snaps_offsets_below_half_a_sample_and_rounds_the_rest_up(ingested):
    ds = storage.open_dataset(StoreLocation(ingested["store"]))
    n_time = ds.sizes[cv.TIME]
    assert n_time == 10 * ingested["slot_raw"] + 2  # XX.A152 ends two samples late
    for index, station in enumerate(ds[cv.STATION].values):
        code = str(station).split(".")[1]
        expected = _grid_row(ingested["sources"][code], OFFSETS[code], n_time)
        np.testing.assert_array_equal(ds[cv.WAVEFORM_VAR].values[index, 0], expected)
    offsets = ds.attrs["time_offsets_s"]
    assert offsets["XX.A039"] == [pytest.approx(0.39 / RATE_HZ)]
    assert offsets["XX.A051"] == [pytest.approx(-0.49 / RATE_HZ)]


def test_a_start_within_half_a_ctf_sample_keeps_the_station(ingested, tmp_path, capsys,
                                                            dask_cluster):  # fmt: skip
    """5 Hz from 20 Hz: XX.A051's first sample, one raw sample (a quarter of a CTF sample) after
    slot 0's start, counts as at it; XX.A152's, two raw samples (half a CTF sample), does not,
    and with only ten slots in the record the station is dropped."""
    code, out, archive, arrays = _bundle(tmp_path, capsys, dask_cluster.address,
                                         ingested["store"], 5.0)  # fmt: skip
    assert code == 0, out
    assert archive["stations_dropped"] == ["XX.A152"]
    assert archive["stations"] == ["XX.A000", "XX.A039", "XX.A051", "XX.B000"]  # no coordinates
    assert archive["start_offsets_s"] == {"XX.A051": [0.05] + [0.0] * 9}
    # Independent: scipy's order 8 Butterworth low-pass at 0.8 × 2.5 Hz, started in the steady
    # state of the slot's first sample (XX.A051's: its first source sample, held), run forward,
    # every 4th sample, the guard dropped. The forecast role is the first slot.
    guard = archive["guard_steps"]
    sos = butter(8, 0.8 * 2.5, btype="low", fs=RATE_HZ, output="sos")
    n_time = 10 * ingested["slot_raw"] + 2
    segments = {}
    for station in archive["stations"]:
        code = station.split(".")[1]
        raw = _grid_row(ingested["sources"][code], OFFSETS[code], n_time)[: ingested["slot_raw"]]
        raw[: np.argmax(np.isfinite(raw))] = raw[np.isfinite(raw)][0]
        filtered, _ = sosfilt(sos, raw, zi=sosfilt_zi(sos) * raw[0])
        segments[station] = filtered[::4][guard : guard + STEPS]
    train, test = _pair_1(segments)
    for name, expected in (("X1train", train), ("X1test", test)):
        np.testing.assert_allclose(arrays[name], expected, rtol=1e-6, atol=1e-6, err_msg=name)


def test_at_the_store_rate_a_later_sample_is_the_next_sample(ingested, tmp_path, capsys,
                                                             dask_cluster):  # fmt: skip
    """CTF rate = store rate (no filter, no guard): 0.39 of a sample is the grid's first
    sample, 0.51 the next and 1.52 the one after, so slot 0 misses XX.A051's and XX.A152's
    first samples (no gap is held: half a CTF sample is half a raw sample) and the ten slots
    from slot 1 are used, where every station is whole. The bundle holds the source samples,
    each station's shifted by its grid sample."""
    code, out, archive, arrays = _bundle(tmp_path, capsys, dask_cluster.address,
                                         ingested["store"], RATE_HZ)  # fmt: skip
    assert code == 0, out
    assert archive["guard_steps"] == 0 and archive["start_offsets_s"] == {}
    assert archive["stations_dropped"] == [] and len(archive["stations"]) == len(OFFSETS)
    first = round((obspy.UTCDateTime(archive["segment_start_times"][0]) - START) * RATE_HZ)
    assert first == STEPS  # slot 1
    # Independent: the forecast segment of each station is its source samples from
    # `first` − (its grid sample), the grid sample floor(offset + 0.5).
    segments = {}
    for station in archive["stations"]:
        code = station.split(".")[1]
        shift = int(np.floor(OFFSETS[code] + 0.5))
        source = ingested["sources"][code].astype(np.float64)
        segments[station] = source[first - shift : first - shift + STEPS]
    assert [int(np.floor(o + 0.5)) for o in OFFSETS.values()] == [0, 0, 0, 1, 2]
    train, test = _pair_1(segments)
    np.testing.assert_allclose(arrays["X1train"], train, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(arrays["X1test"], test, rtol=1e-6, atol=1e-6)


def test_real_iu_stations_starting_19_5_ms_late_are_kept(tmp_path, capsys, dask_cluster):
    """CU.TGUH.00 starts at 00:00:00, IU.ANMO.10 and IU.COLA.10 at 00:00:00.0195 (40 Hz): the
    ingest puts them at grid sample 1. Cut to 54 s, the record holds exactly ten slots of
    42 + 12 CTF samples at 10 Hz, so slot 0 must keep the IU stations for any bundle."""
    cut = tmp_path / "archive"
    cut.mkdir()
    for path in sorted(TSINDEX.rglob("*.mseed")):
        trace = obspy.read(str(path))[0]
        trace.trim(endtime=obspy.UTCDateTime("2018-01-01T00:00:54"))
        trace.write(str(cut / path.name), format="MSEED")
    store = tmp_path / "iu.zarr"
    code, out = _cli(capsys, "ingest", "waveforms", str(cut), "--out", str(store),
                     scheduler=dask_cluster.address)  # fmt: skip
    assert code == 0, out
    ds = storage.open_dataset(StoreLocation(store))
    assert ds.sizes[cv.TIME] == 2161 and np.isnan(ds[cv.WAVEFORM_VAR].values[1:, 0, 0]).all()
    code, out, archive, arrays = _bundle(tmp_path, capsys, dask_cluster.address, store, 10.0)
    assert code == 0, out
    assert archive["stations"] == ["CU.TGUH.00", "IU.ANMO.10", "IU.COLA.10"]
    assert archive["stations_dropped"] == []
    assert archive["guard_steps"] == 42
    # One 40 Hz sample held in slot 0; its true start is 19.5 ms after the slot's (the
    # store's time_offsets_s: the trace starts 5.5 ms before grid sample 1).
    held = [0.025] + [0.0] * 9
    assert archive["start_offsets_s"] == {"IU.ANMO.10": held, "IU.COLA.10": held}
    assert ds.attrs["time_offsets_s"]["IU.ANMO.10"] == [pytest.approx(-0.0055)]
    assert all(np.isfinite(array).all() for array in arrays.values())
