"""`seisctf tasks` on a continuous waveform store: real miniSEED (obspy's own test archive) and
obspy-written archives ingested with `seisctf ingest waveforms`, resampled to the CTF rate with
causal filters, cut into the bundle's guarded segments, compared with an independent obspy
computation, checked for leaks of withheld samples into public arrays, and scored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import obspy
import pytest
import xarray as xr
import zarr
from conftest import SHORT_LAYOUT_YAML
from obspy.core.inventory import Channel, Inventory, Network, Site, Station
from scipy.signal import resample_poly

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.archive_wavefield import (
    SEGMENT_ROLES,
    archive_wavefield,
    select_channel,
    wavefield_for_tasks,
)
from seisctf.pipeline.bundles.guarded_segments import stations_per_chunk, to_ctf_rate
from seisctf.pipeline.transforms import filters
from seisctf.plugins.layouts import Layout, load_layout
from seisctf.signal.filter_design import guard_steps

TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"
REAL_FILES = sorted(TSINDEX.rglob("*.mseed"))  # CU.TGUH.00, IU.ANMO.10, IU.COLA.10 BHZ, 40 Hz
SECRET = "archive-tasks-test-secret"

# 60 s at 40 Hz, at 10 Hz: ten slots of a 42-sample guard and a 12-sample segment fit.
REAL_RATE_HZ = 10.0
REAL_LAYOUT = SHORT_LAYOUT_YAML
# The synthetic archive: 1200 s at 20 Hz, CTF at 1 Hz, ten slots of 39 + 60 samples.
SYNTH_LAYOUT = """train_steps: 40
few_start: 30
few_steps: 10
forecast_start: 40
forecast_steps: 20
k_short: 5
k_long: 5
modes: 2
"""
SYNTH_RATE_HZ = 20.0
SYNTH_SECONDS = 1200
SYNTH_START = obspy.UTCDateTime("2022-06-01T00:00:00")
# (station, longitude, latitude): longitudes out of name order; XX.S03 has a gap in BHZ.
SYNTH_STATIONS = [
    ("XX.S00", 12.0, 45.0),
    ("XX.S01", 10.5, 44.0),
    ("XX.S02", 11.0, 46.0),
    ("XX.S03", 10.0, 45.5),
    ("XX.S04", 13.0, 44.5),
    ("XX.S05", 11.0, 44.0),
]
GAP_S = (400, 420)


def _cli(*args: str, scheduler: str) -> int:
    return main([*args, "--scheduler", scheduler, "--quiet"])


def _arrays(url: str | Path) -> dict[str, np.ndarray]:
    return {name: array[...] for name, array in zarr.open_group(str(url), mode="r").arrays()}


def _obspy_ctf_rate(
    path: Path, grid_start: obspy.UTCDateTime, up: int = 1, down: int = 4
) -> np.ndarray:
    """Independent: obspy reads the file (as the store's float32) and low-passes it causally
    (`Trace.filter("lowpass", corners=8, zerophase=False)` at 0.8 × the new Nyquist: obspy's
    own Butterworth design, started from rest), the trace is placed on the store's grid, then
    every `down`-th sample is kept (up = 1) or scipy.signal.resample_poly resamples by up/down
    (zero outside the trace) and its output is delayed by ceil(10·down / down) = 10 samples,
    the causal FIR's delay. Values at CTF samples k = 0, 1, …; NaN where the trace is not."""
    trace = obspy.read(str(path))[0]
    rate = trace.stats.sampling_rate
    trace.data = trace.data.astype(np.float32).astype(np.float64)
    trace.filter("lowpass", freq=0.8 * rate * up / down / 2, corners=8, zerophase=False)
    offset = round((trace.stats.starttime - grid_start) * rate)  # grid sample of trace sample 0
    grid = np.full(offset + trace.stats.npts, np.nan)
    grid[offset:] = trace.data
    if up == 1:
        return grid[::down]
    delay = -(-10 * max(up, down) // down)
    resampled = resample_poly(np.nan_to_num(grid), up, down)
    return np.concatenate([np.full(delay, np.nan), resampled[:-delay]])


@pytest.fixture(scope="module")
def real(tmp_path_factory, dask_cluster):
    """The real archive ingested and turned into a bundle, both with the command line."""
    root = tmp_path_factory.mktemp("real")
    layout = root / "real.yaml"
    layout.write_text(REAL_LAYOUT)
    store = root / "real.zarr"
    assert _cli(
        "ingest", "waveforms", *map(str, REAL_FILES), "--out", str(store),
        scheduler=dask_cluster.address,
    ) == 0  # fmt: skip
    public, truth = root / "public.zarr", root / "truth.zarr"
    assert _cli(
        "tasks", str(store), "--public", str(public), "--truth", str(truth),
        "--layout", str(layout), "--rate", str(REAL_RATE_HZ), "--channel", "Z",
        "--secret", SECRET, scheduler=dask_cluster.address,
    ) == 0  # fmt: skip
    return {"root": root, "store": store, "layout": layout, "public": public, "truth": truth}


def test_resampled_channel_equals_obspy_on_real_data(real):
    store = storage.open_dataset(StoreLocation(real["store"]))
    code, data = select_channel(store, "BHZ", "real")
    resampled = to_ctf_rate(data, REAL_RATE_HZ, 2**18, "real").compute()
    assert code == "BHZ" and resampled.attrs[cv.ATTR_SAMPLING_RATE] == REAL_RATE_HZ
    assert resampled.attrs[cv.ATTR_TRANSFORMS][-1]["zero_phase"] is False
    assert resampled.sizes[cv.TIME] == 601  # ceil(2401 / 4)
    grid_start = obspy.UTCDateTime(store.attrs[cv.ATTR_START_TIME])
    # obspy's filter starts from rest, ours from the steady state of the first sample: they
    # agree once the start has worn off (the warm-up that sets the guard).
    warmup = filters.causal_warmup(40.0, REAL_RATE_HZ)
    for path in REAL_FILES:
        station = ".".join(path.name.split(".")[:3])
        ours = resampled.sel({cv.STATION: station}).values
        expected = _obspy_ctf_rate(path, grid_start)
        # Causal: only samples just after a gap (ANMO and COLA start one 40 Hz sample late) are
        # NaN, none at the record's end.
        compared = np.isfinite(ours) & (np.arange(601) >= warmup)
        assert compared.sum() >= 601 - warmup - 1 and np.isfinite(ours[-warmup:]).all()
        peak = np.nanmax(np.abs(expected))
        np.testing.assert_allclose(
            ours[compared], expected[:601][compared], rtol=0, atol=1e-6 * peak
        )
    # A rate that is no integer fraction of 40 Hz: anti-alias filter, then the delayed FIR.
    resampled = to_ctf_rate(data, 3.0, 2**18, "real").compute()
    assert resampled.sizes[cv.TIME] == 181  # ceil(2401 · 3 / 40)
    assert resampled.attrs[cv.ATTR_TRANSFORMS][-1]["transform"] == "resample"
    assert resampled.attrs[cv.ATTR_TRANSFORMS][-1]["fir_delay"] == 10
    warmup = filters.causal_warmup(40.0, 3.0)
    for path in REAL_FILES:
        ours = resampled.sel({cv.STATION: ".".join(path.name.split(".")[:3])}).values
        expected = _obspy_ctf_rate(path, grid_start, up=3, down=40)
        assert np.isfinite(ours[warmup:]).all()
        peak = np.nanmax(np.abs(expected))
        np.testing.assert_allclose(ours[warmup:], expected[warmup:181], rtol=0, atol=1e-6 * peak)


@pytest.mark.parametrize(("rate_hz", "ctf_rate_hz"), [(20.0, 1.0), (40.0, 3.0), (1.0, 1.0)])
def test_stations_batched_in_a_chunk_are_each_filtered_alone(rate_hz, ctf_rate_hz):
    """A short slot of many stations goes to the CTF rate in chunks of several stations
    (`stations_per_chunk`); every station's bytes equal those of it alone (decimate, resample,
    equal rates), NaN where a gap is within reach included."""
    rng = np.random.default_rng(5)
    n_stations, n_samples = 41, int(700 * rate_hz)
    values = rng.standard_normal((n_stations, n_samples)).astype(np.float32)
    values[7, 100:130] = np.nan
    data = xr.DataArray(
        values, dims=(cv.STATION, cv.TIME), attrs={cv.ATTR_SAMPLING_RATE: rate_hz}
    ).chunk({cv.STATION: 3, cv.TIME: 1000})  # the store's chunks: replaced by to_ctf_rate's
    time_chunk = 2**16
    batched = to_ctf_rate(data, ctf_rate_hz, time_chunk, "batched")
    per_chunk = stations_per_chunk(n_samples, time_chunk)
    assert per_chunk > 1 and batched.chunks[0][0] == min(per_chunk, n_stations)
    together = batched.compute(scheduler="sync").values
    for station in range(n_stations):
        alone = to_ctf_rate(data.isel({cv.STATION: [station]}), ctf_rate_hz, time_chunk, "alone")
        assert alone.compute(scheduler="sync").values[0].tobytes() == together[station].tobytes()
    assert np.isnan(together[7]).any() and np.isfinite(together[0]).all()


def _segments(real) -> tuple[np.ndarray, dict]:
    """Independent CTF-rate data (station order of the bundle) cut at the recorded segment
    starts, each minus its mean over the rows before the forecast window, per station:
    (segment, time, sensor), and the truth group's provenance."""
    archive = storage.read_attrs(StoreLocation(real["truth"]))[cv.ATTR_ARCHIVE]
    store = storage.open_dataset(StoreLocation(real["store"]))
    grid_start = obspy.UTCDateTime(store.attrs[cv.ATTR_START_TIME])
    by_station = {".".join(p.name.split(".")[:3]): p for p in REAL_FILES}
    series = np.stack(
        [_obspy_ctf_rate(by_station[s], grid_start)[:601] for s in archive["stations"]]
    )
    steps = archive["segment_steps"]
    public_rows = load_layout(str(real["layout"])).forecast_start
    starts = [
        round((obspy.UTCDateTime(t) - grid_start) * REAL_RATE_HZ)
        for t in archive["segment_start_times"]
    ]
    segments = np.stack([series[:, a : a + steps].T for a in starts])
    return segments - segments[:, :public_rows].mean(axis=1, keepdims=True), archive


def _scale(*public: np.ndarray, floor: float = 0.1) -> np.ndarray:
    rms = np.sqrt((np.concatenate(public) ** 2).mean(axis=0))
    return np.maximum(rms, floor * np.median(rms))


def test_real_bundle_shapes_windows_and_provenance(real):
    layout = load_layout(str(real["layout"]))
    public, truth = _arrays(real["public"]), _arrays(real["truth"])
    manifest = storage.read_attrs(StoreLocation(real["public"]))[cv.ATTR_CTF]
    segments, archive = _segments(real)
    n = 3
    assert archive["stations"] == ["CU.TGUH.00", "IU.ANMO.10", "IU.COLA.10"]  # no coordinates
    assert archive["stations_dropped"] == [] and archive["channel"] == "BHZ"
    assert archive["segment_roles"] == list(SEGMENT_ROLES) and archive["segment_steps"] == 12
    assert archive["guard_steps"] == guard_steps(40.0, REAL_RATE_HZ, 12) == 42
    assert manifest["dataset"] == cv.ARCHIVE_DATASET and manifest["delta_t"] == 0.1
    for name, steps in {"X1train": 8, "X4train": 2, "X9train": 2, "X6train": 8}.items():
        assert public[name].shape == (steps, n), name
    for pair in manifest["pairs"]:
        assert truth[pair["test"]].shape == tuple(pair["shape"])
    assert truth["X1test"].shape == (layout.forecast_steps, n)
    assert truth["X2test"].shape == (layout.train_steps, n)
    # Slots of 42 + 12 samples (5.4 s) from the record's start; ANMO and COLA start one 40 Hz
    # sample into slot 0 (less than half a CTF sample: held, recorded), so slots 0 … 9 are used,
    # each segment after its guard.
    starts = [obspy.UTCDateTime(t) for t in archive["segment_start_times"]]
    grid_start = obspy.UTCDateTime(archive["source_start_time"])
    assert [t - grid_start for t in starts] == pytest.approx([5.4 * j + 4.2 for j in range(10)])
    held = [0.025] + [0.0] * 9
    assert archive["start_offsets_s"] == {"IU.ANMO.10": held, "IU.COLA.10": held}
    assert np.isfinite(segments).all()

    # Truth (and clean public) windows = the independent data / per-sensor public RMS.
    role = {r: [i for i, x in enumerate(SEGMENT_ROLES) if x == r] for r in set(SEGMENT_ROLES)}
    train, few = slice(0, 8), slice(6, 8)
    forecast = slice(8, 12)
    forecast_seg, few_clean = segments[role["forecast"][0]], segments[role["few_clean"][0]]
    scale = _scale(forecast_seg[train])
    checks = {
        "X1train": (public, forecast_seg[train] / scale),
        "X1test": (truth, forecast_seg[forecast] / scale),
        "X6test": (truth, few_clean[forecast] / _scale(few_clean[few])),
    }
    param_train = [segments[i][train] for i in role["param_train"]]
    param_scale = _scale(*param_train)
    checks["X8test"] = (truth, segments[role["param_interp"][0]][forecast] / param_scale)
    checks["X9test"] = (truth, segments[role["param_extrap"][0]][forecast] / param_scale)
    checks["X9train"] = (public, segments[role["param_interp"][0]][few] / param_scale)
    for k, name in enumerate(("X6train", "X7train", "X8train")):
        checks[name] = (public, param_train[k] / param_scale)
    for name, (group, expected) in checks.items():
        peak = np.abs(expected).max()
        np.testing.assert_allclose(group[name], expected, rtol=1e-5, atol=1e-5 * peak, err_msg=name)
    # Noisy groups: scales come from noisy public data; truth = data / one per-sensor constant.
    for seg_role, recon, future in (("noise_medium", "X2test", "X3test"),
                                    ("noise_high", "X4test", "X5test")):  # fmt: skip
        segment = segments[role[seg_role][0]]
        noisy_scale = (segment[train] ** 2).sum(0) / (segment[train] * truth[recon]).sum(0)
        for rows, name in ((train, recon), (forecast, future)):
            expected = segment[rows] / noisy_scale
            peak = np.abs(expected).max()
            np.testing.assert_allclose(truth[name], expected, rtol=1e-5, atol=1e-5 * peak)

    # The parametric pairs' parameter: segment start hours; interpolation inside, extrapolation
    # outside the training values.
    hours = [(t - obspy.UTCDateTime(archive["source_start_time"])) / 3600 for t in starts]
    parameters = manifest["pairs"][7]["parameters"]
    assert parameters["name"] == cv.SEGMENT_PARAMETER
    assert parameters["train"] == pytest.approx([hours[i] for i in role["param_train"]])
    assert parameters["test"] == pytest.approx(hours[role["param_interp"][0]])
    assert min(parameters["train"]) < parameters["test"] < max(parameters["train"])
    extrapolation = manifest["pairs"][8]["parameters"]["test"]
    assert extrapolation == pytest.approx(hours[role["param_extrap"][0]])
    assert not min(parameters["train"]) <= extrapolation <= max(parameters["train"])

    # Public attrs: the processing, not where or when the truth was recorded.
    public_attrs = storage.read_attrs(StoreLocation(real["public"]))
    assert public_attrs[cv.ATTR_ARCHIVE]["channel"] == "BHZ"
    assert public_attrs[cv.ATTR_ARCHIVE]["sampling_rate_hz"] == REAL_RATE_HZ
    text = json.dumps(public_attrs)
    for secret_ish in ("TGUH", "ANMO", "2018-01-01", str(real["store"]), SECRET):
        assert secret_ish not in text, secret_ish


def test_real_bundle_scores_end_to_end(real, dask_cluster):
    root = real["root"]
    zeros, result = root / "zeros.zarr", root / "zeros.json"
    assert _cli(
        "baseline", "zeros", "--public", str(real["public"]), "--out", str(zeros),
        scheduler=dask_cluster.address,
    ) == 0  # fmt: skip
    assert _cli(
        "score", "ctf", "--truth", str(real["truth"]), "--submission", str(zeros),
        "--json", str(result), scheduler=dask_cluster.address,
    ) == 0  # fmt: skip
    scores = json.loads(result.read_text())
    assert scores["dataset"] == cv.ARCHIVE_DATASET and scores["truth_sha256_verified"] is True
    assert set(scores["scores"]) == set(cv.SCORE_NAMES)
    assert all(value == 0.0 for value in scores["scores"].values())
    assert scores["avg_score"] == 0.0


# --- a synthetic archive of several stations, with a gap and StationXML ------------------------


def _write_synthetic_archive(root: Path, seed: int = 11) -> tuple[list[Path], Path]:
    """Six stations × BHZ, BHE at 20 Hz for 800 s: plane waves (0.02–0.3 Hz) crossing the array
    west to east, high-frequency noise the anti-alias filter removes, an offset and a drift,
    integer counts written as STEIM2 miniSEED; XX.S03's BHZ has a 20 s gap. Plus StationXML."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    n = int(SYNTH_SECONDS * SYNTH_RATE_HZ)
    t = np.arange(n) / SYNTH_RATE_HZ
    waves = [(rng.uniform(0.02, 0.3), rng.uniform(0, 6.3), rng.uniform(0.5, 2)) for _ in range(6)]
    files, networks = [], {}
    for station, longitude, latitude in SYNTH_STATIONS:
        delay_s = (longitude - 10.0) * 111.0 / 3.5  # 3.5 km/s eastwards
        for channel in ("BHZ", "BHE"):
            signal = sum(
                amp * np.sin(2 * np.pi * f * (t - delay_s) + phase) for f, phase, amp in waves
            )
            signal += 0.3 * rng.standard_normal(n) + 0.2 * np.sin(2 * np.pi * 6.0 * t)
            counts = (2000 * signal + 500 + 0.3 * t).astype(np.int32)
            pieces = [(0, n)]
            if station == "XX.S03" and channel == "BHZ":
                gap = [int(s * SYNTH_RATE_HZ) for s in GAP_S]
                pieces = [(0, gap[0]), (gap[1], n)]
            network, code = station.split(".")  # location code empty: id NET.STA
            for first, stop in pieces:
                trace = obspy.Trace(
                    data=counts[first:stop],
                    header={"network": network, "station": code, "location": "",
                            "channel": channel, "sampling_rate": SYNTH_RATE_HZ,
                            "starttime": SYNTH_START + first / SYNTH_RATE_HZ},
                )  # fmt: skip
                path = root / f"{station}{channel}.{first}.mseed"
                trace.write(str(path), format="MSEED", encoding="STEIM2")
                files.append(path)
        channels = [
            Channel(c, "", latitude, longitude, 100.0, 0.0, sample_rate=SYNTH_RATE_HZ)
            for c in ("BHZ", "BHE")
        ]
        networks.setdefault(network, []).append(
            Station(code, latitude, longitude, 100.0, channels=channels, site=Site(code))
        )
    inventory = Inventory(
        networks=[Network(code, stations=stations) for code, stations in networks.items()],
        source="seisctf tests",
    )
    xml = root / "stations.xml"
    inventory.write(str(xml), format="STATIONXML")
    return files, xml


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory, dask_cluster):
    root = tmp_path_factory.mktemp("synthetic")
    files, xml = _write_synthetic_archive(root / "archive")
    layout = root / "synth.yaml"
    layout.write_text(SYNTH_LAYOUT)
    store = root / "synth.zarr"
    assert _cli(
        "ingest", "waveforms", str(root / "archive"), "--out", str(store), "--inventory", str(xml),
        scheduler=dask_cluster.address,
    ) == 0  # fmt: skip
    # The same archive in blocks of 1000 samples (the CLI default is 2**18: one block).
    rechunked = root / "synth-blocks.zarr"
    ingest_waveforms(
        [str(root / "archive")],
        StoreLocation(rechunked),
        inventories=[str(xml)],
        block_samples=1000,
        quiet=True,
    )
    bundles = {}
    for name, url in (("one-block", store), ("blocks", rechunked)):
        public, truth = root / f"{name}-public.zarr", root / f"{name}-truth.zarr"
        assert _cli(
            "tasks", str(url), "--public", str(public), "--truth", str(truth),
            "--layout", str(layout), "--channel", "Z", "--secret", SECRET,
            scheduler=dask_cluster.address,
        ) == 0  # fmt: skip
        bundles[name] = (public, truth)
    return {"root": root, "store": store, "rechunked": rechunked, "layout": layout, **bundles}


def test_gappy_station_is_dropped_and_sensors_ordered_by_longitude(synthetic):
    public, truth = synthetic["one-block"]
    archive = storage.read_attrs(StoreLocation(truth))[cv.ATTR_ARCHIVE]
    assert archive["stations_dropped"] == ["XX.S03"]
    # By longitude, then latitude: S01 (10.5), S05 (11.0, 44.0), S02 (11.0, 46.0), S00, S04.
    assert archive["stations"] == ["XX.S01", "XX.S05", "XX.S02", "XX.S00", "XX.S04"]
    assert archive["sampling_rate_hz"] == 1.0 and archive["channel"] == "BHZ"
    transforms = [step["transform"] for step in archive["transforms"]]
    assert transforms == ["select_channel", "decimate", "remove_offset"]
    assert archive["transforms"][1]["zero_phase"] is False
    assert archive["transforms"][2]["rows"] == [0, 40]  # the rows before the forecast window
    public_archive = storage.read_attrs(StoreLocation(public))[cv.ATTR_ARCHIVE]
    assert public_archive["n_stations"] == 5 and public_archive["n_stations_dropped"] == 1
    assert public_archive["guard_steps"] == archive["guard_steps"] == 39
    assert "stations" not in public_archive and "segment_start_times" not in public_archive
    manifest = storage.read_attrs(StoreLocation(public))[cv.ATTR_CTF]
    assert manifest["pairs"][0]["shape"] == [20, 5]
    # Slots of 39 + 60 s from the record's start; every run of ten of the twelve slots holds
    # the gap (slot 4: [396, 495) s), so XX.S03 is dropped and the first run is used.
    starts = [obspy.UTCDateTime(t) - SYNTH_START for t in archive["segment_start_times"]]
    assert starts == [99.0 * j + 39.0 for j in range(10)]


def test_bundle_bytes_do_not_depend_on_the_store_chunking(synthetic):
    assert (
        storage.open_dataset(StoreLocation(synthetic["rechunked"]))["data"].encoding["chunks"][-1]
        == 1000
    )
    for first, second in zip(synthetic["one-block"], synthetic["blocks"], strict=True):
        a, b = _arrays(first), _arrays(second)
        assert sorted(a) == sorted(b)
        for name in a:
            assert a[name].tobytes() == b[name].tobytes(), name
        attrs_a, attrs_b = (
            storage.read_attrs(StoreLocation(first)),
            storage.read_attrs(StoreLocation(second)),
        )
        assert attrs_a[cv.ATTR_CTF] == attrs_b[cv.ATTR_CTF]


FORECAST_TRUTHS = {"X1test", "X3test", "X5test", "X6test", "X7test", "X8test", "X9test"}


def test_withheld_samples_never_reach_public_arrays(synthetic, dask_cluster):
    """Every public array is a function of raw samples that no truth array covers: in a copy of
    the store, 1e7 counts are added in every segment's forecast window, at the first raw sample
    after the last public row and at the last truth row's sample (next to the following
    slot). The forecast truths change; every public array and the reconstruction truths
    (X2test, X4test: rows before the forecast window) stay the same, to the bit."""
    public, truth = synthetic["one-block"]
    archive = storage.read_attrs(StoreLocation(truth))[cv.ATTR_ARCHIVE]
    layout = load_layout(str(synthetic["layout"]))
    root = synthetic["root"]
    spiked = root / "spiked.zarr"
    shutil.copytree(synthetic["store"], spiked)
    codes = [str(code) for code in storage.open_dataset(StoreLocation(spiked))[cv.CHANNEL].values]
    data = zarr.open_group(str(spiked), mode="r+")[cv.WAVEFORM_VAR]
    down = round(SYNTH_RATE_HZ / archive["sampling_rate_hz"])  # raw samples per CTF row
    for start_time in archive["segment_start_times"]:
        row_0 = round((obspy.UTCDateTime(start_time) - SYNTH_START) * SYNTH_RATE_HZ)
        last_public = row_0 + (layout.forecast_start - 1) * down
        last_truth = row_0 + (layout.required_steps - 1) * down
        for sample in (last_public + 1, last_truth):
            data[:, codes.index("BHZ"), sample] = data[:, codes.index("BHZ"), sample] + 1e7
    spiked_public, spiked_truth = root / "spiked-public.zarr", root / "spiked-truth.zarr"
    assert _cli(
        "tasks", str(spiked), "--public", str(spiked_public), "--truth", str(spiked_truth),
        "--layout", str(synthetic["layout"]), "--channel", "Z", "--secret", SECRET,
        scheduler=dask_cluster.address,
    ) == 0  # fmt: skip
    spiked_archive = storage.read_attrs(StoreLocation(spiked_truth))[cv.ATTR_ARCHIVE]
    assert {**spiked_archive, "source": archive["source"]} == archive  # the same segments

    before, after = _arrays(public), _arrays(spiked_public)
    assert sorted(before) == sorted(after) and len(before) == 19  # X1..X10train, X1..X9val
    for name in before:
        assert before[name].tobytes() == after[name].tobytes(), name
    before, after = _arrays(truth), _arrays(spiked_truth)
    for name in before:
        changed = before[name].tobytes() != after[name].tobytes()
        assert changed == (name in FORECAST_TRUTHS), name
    # The public manifest differs only in the truth commitments.
    manifests = [
        storage.read_attrs(StoreLocation(url))[cv.ATTR_CTF] for url in (public, spiked_public)
    ]
    for manifest in manifests:
        del manifest["truth_sha256"], manifest["truth_sha256_blocks"]
    assert manifests[0] == manifests[1]


def test_filter_chunking_changes_values_by_less_than_tolerance(synthetic):
    """The canonical time chunk decides the bytes; across chunk sizes the filters agree to
    their tolerance (filters.py), so the data do not depend on it beyond rounding."""
    store = storage.open_dataset(StoreLocation(synthetic["store"]))
    layout = load_layout(str(synthetic["layout"]))
    whole = archive_wavefield(store, layout, channel="BHZ", quiet=True)
    pieces = archive_wavefield(store, layout, channel="BHZ", time_chunk_samples=1024, quiet=True)
    a, b = whole[cv.WAVEFIELD_VAR].values, pieces[cv.WAVEFIELD_VAR].values
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-6 * np.abs(a).max())
    assert list(whole[cv.ROLE].values) == list(SEGMENT_ROLES)
    assert whole[cv.PARAMETER_VALUE].values[0] != whole[cv.PARAMETER_VALUE].values[0]  # NaN


# --- errors -------------------------------------------------------------------------------------


def _refused(capsys, *args: str, scheduler: str) -> str:
    code = _cli(*args, scheduler=scheduler)
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err, err
    return err


def test_bad_archive_input_exits_3_naming_the_store(real, synthetic, dask_cluster, capsys):
    root, store = real["root"], str(real["store"])
    outputs = ["--public", str(root / "bad-public.zarr"), "--truth", str(root / "bad-truth.zarr")]
    err = _refused(capsys, "tasks", store, *outputs, "--channel", "HHZ",
                   scheduler=dask_cluster.address)  # fmt: skip
    assert store in err and "HHZ" in err and "['BHZ']" in err
    # The default layout needs 199 stations: refused from the station count, before its length.
    err = _refused(capsys, "tasks", store, *outputs, scheduler=dask_cluster.address)
    assert store in err and "has 3 stations" in err and "A benchmark from a small network" in err
    # The default layout's steps on one mode need 10 × (39 + 3000) samples at 1 Hz; 60 s give 61.
    one_mode = root / "one-mode.yaml"
    one_mode.write_text(
        "train_steps: 2000\nfew_start: 1500\nfew_steps: 500\nforecast_start: 2000\n"
        "forecast_steps: 1000\nk_short: 20\nk_long: 50\nmodes: 1\n"
    )
    err = _refused(capsys, "tasks", store, *outputs, "--layout", str(one_mode),
                   scheduler=dask_cluster.address)  # fmt: skip
    assert store in err and "61 samples at 1.0 Hz" in err and "guard of 39" in err
    assert "need 30390" in err
    err = _refused(capsys, "tasks", store, *outputs, "--rate", "80", "--layout", str(one_mode),
                   scheduler=dask_cluster.address)  # fmt: skip
    assert store in err and "80.0 Hz" in err
    # Six stations cannot carry 4 modes (needs 7): refused from the count, before the gap check
    # (too few gap-free stations among enough: tests/pipeline/test_layout_auto.py).
    wide = synthetic["root"] / "wide.yaml"
    wide.write_text(SYNTH_LAYOUT.replace("modes: 2", "modes: 4"))
    synth = str(synthetic["store"])
    err = _refused(capsys, "tasks", synth, *outputs, "--layout", str(wide), "--channel", "BHZ",
                   scheduler=dask_cluster.address)  # fmt: skip
    assert synth in err and "has 6 stations" in err and "modes=4" in err
    assert not (root / "bad-public.zarr").exists() and not (root / "bad-truth.zarr").exists()


def test_channel_choice_and_options_on_a_wavefield_store():
    codes = xr.Dataset(
        {cv.WAVEFORM_VAR: ((cv.STATION, cv.CHANNEL, cv.TIME), np.zeros((1, 3, 8), np.float32))},
        coords={cv.STATION: ["XX.A."], cv.CHANNEL: ["BHZ", "HHZ", "BHE"]},
        attrs={cv.ATTR_SAMPLING_RATE: 20.0, cv.ATTR_START_TIME: "2000-01-01T00:00:00Z"},
    )
    assert select_channel(codes, "E", "s")[0] == "BHE"
    assert select_channel(codes, "HHZ", "s")[0] == "HHZ"
    with pytest.raises(InvalidInput, match="matches channels"):
        select_channel(codes, "Z", "s")
    with pytest.raises(InvalidInput, match="choose one with `channel`"):
        select_channel(codes, None, "s")
    wavefield = xr.Dataset({cv.WAVEFIELD_VAR: ((cv.TIME, cv.SENSOR), np.zeros((4, 2)))})
    assert wavefield_for_tasks(wavefield, Layout())[0] is wavefield
    with pytest.raises(
        InvalidInput, match="`sampling_rate_hz` is only for a continuous waveform store"
    ):
        wavefield_for_tasks(wavefield, Layout(), sampling_rate_hz=1.0, what="w")
