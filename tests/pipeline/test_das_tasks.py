"""The das CTF path: the synthetic DAS record (5 Hz) cut into guarded segments, low-passed and
decimated to 1 Hz causally, built into the 12-task bundle by the same builder as the global
dataset; compared with an independent scipy computation, checked for leaks of withheld
samples, scored (zeros: 0.0 on all twelve), on the demo, a recipe, S3 and 1 vs 2 workers."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import TINY_LAYOUT_YAML
from scipy import signal

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.das_wavefield import (
    das_wavefield,
    slot_plan,
    synthetic_das_record,
)
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.plugins.layouts import load_layout

SECRET = "das-tasks-test-secret"
CHANNELS = 40
# The tiny layout of tests/conftest.py: 300 steps per segment, modes 16 (needs 31 channels).
FORECAST_TRUTHS = {"X1test", "X3test", "X5test", "X6test", "X7test", "X8test", "X9test"}


def _cli(*args: str, scheduler: str) -> int:
    return main([*args, "--scheduler", scheduler, "--quiet"])


def _arrays(url: str | Path) -> dict[str, np.ndarray]:
    return {name: array[...] for name, array in zarr.open_group(str(url), mode="r").arrays()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("das-layout") / "tiny.yaml"
    path.write_text(TINY_LAYOUT_YAML)
    return path


@pytest.fixture(scope="module")
def record(tmp_path_factory, tiny, dask_cluster_one_worker) -> dict:
    """`seisctf synth das` on one worker, then `seisctf tasks` on it."""
    root = tmp_path_factory.mktemp("das")
    store = root / "das.zarr"
    scheduler = dask_cluster_one_worker.address
    assert (
        _cli(
            "synth",
            "das",
            "--out",
            str(store),
            "--channels",
            str(CHANNELS),
            "--layout",
            str(tiny),
            "--secret",
            SECRET,
            scheduler=scheduler,
        )
        == 0
    )
    public, truth = root / "public.zarr", root / "truth.zarr"
    assert (
        _cli(
            "tasks",
            str(store),
            "--public",
            str(public),
            "--truth",
            str(truth),
            "--layout",
            str(tiny),
            "--secret",
            SECRET,
            scheduler=scheduler,
        )
        == 0
    )
    return {"root": root, "store": store, "public": public, "truth": truth, "layout": tiny}


def test_synthetic_record_is_a_das_store_with_its_realisations(record):
    store = storage.open_dataset(StoreLocation(record["store"]))
    assert cv.validate_das_store(store) == "strain_rate"
    layout = load_layout(str(record["layout"]))
    slot_samples, guard = slot_plan(layout, 5.0, 1.0)
    assert guard == 40 and slot_samples == (40 + 300) * 5
    assert store["strain_rate"].shape == (10 * slot_samples, CHANNELS)
    segments = store.attrs[cv.ATTR_CTF_SEGMENTS]
    assert segments["roles"] == list(cv.SEGMENT_ROLES)
    assert segments["parameter_name"] == "swell_peak_period_s"
    assert segments["parameter_values"] == [
        None,
        None,
        16.0,
        10.0,
        None,
        None,
        11.0,
        12.0,
        14.0,
        None,
    ]
    assert segments["slot_duration_s"] == 340.0 and segments["guard_steps"] == 40
    text = json.dumps(dict(store.attrs))
    assert "seed" not in text and SECRET not in text


def test_segments_equal_an_independent_causal_scipy_computation(record):
    """Per slot and channel: scipy's order 8 Butterworth at 0.4 Hz run forward from the steady
    state of the slot's first sample, every 5th sample, the 40-sample guard dropped, the mean
    of the 200 public rows removed."""
    store = storage.open_dataset(StoreLocation(record["store"]))
    layout = load_layout(str(record["layout"]))
    wavefield = das_wavefield(store, layout, quiet=True)
    u = wavefield[cv.WAVEFIELD_VAR]
    assert u.dims == (cv.REALISATION, cv.TIME, cv.SENSOR) and u.shape == (10, 300, CHANNELS)
    assert list(wavefield[cv.ROLE].values) == list(cv.SEGMENT_ROLES)
    np.testing.assert_array_equal(wavefield[cv.SENSOR].values, np.arange(CHANNELS))
    np.testing.assert_array_equal(wavefield[cv.DISTANCE].values, store[cv.DISTANCE].values)
    parameter = wavefield[cv.PARAMETER_VALUE].values
    np.testing.assert_array_equal(parameter[[2, 3, 6, 7, 8]], [16.0, 10.0, 11.0, 12.0, 14.0])
    assert np.isnan(parameter[[0, 1, 4, 5, 9]]).all()
    assert wavefield.attrs[cv.ATTR_PARAMETER_NAME] == "swell_peak_period_s"
    assert wavefield.attrs[cv.ATTR_DATASET] == "das"
    raw = store["strain_rate"].values.astype(np.float64)
    sos = signal.butter(8, 0.4, fs=5.0, output="sos")
    values = u.values
    for slot in (0, 6, 9):
        part = raw[slot * 1700 : (slot + 1) * 1700]
        zi = signal.sosfilt_zi(sos)[:, :, None] * part[0][None, None, :]
        filtered, _ = signal.sosfilt(sos, part, axis=0, zi=zi)
        segment = filtered[::5][40:]
        segment -= segment[:200].mean(axis=0)
        scale = np.abs(segment).max()
        assert np.abs(values[slot] - segment).max() < 1e-6 * scale


def test_bundle_manifest_and_public_provenance(record):
    public_attrs = storage.read_attrs(StoreLocation(record["public"]))
    truth_attrs = storage.read_attrs(StoreLocation(record["truth"]))
    manifest = public_attrs[cv.ATTR_CTF]
    assert manifest["dataset"] == "das" and manifest["delta_t"] == 1.0
    assert [pair["shape"] for pair in manifest["pairs"]][0] == [100, CHANNELS]
    assert manifest["pairs"][7]["parameters"] == {
        "name": "swell_peak_period_s",
        "train": [10.0, 12.0, 14.0],
        "test": 11.0,
    }
    assert manifest["pairs"][8]["parameters"]["test"] == 16.0
    assert "fibre order" in manifest["sensor_order"]
    public_das, truth_das = public_attrs[cv.ATTR_DAS], truth_attrs[cv.ATTR_DAS]
    assert set(public_das) < set(truth_das)
    assert "segment_start_times" not in public_das and "source" not in public_das
    assert public_das["guard_steps"] == 40 and public_das["quantity"] == "strain_rate"
    assert truth_das["transforms"][-2]["transform"] == "decimate"
    assert truth_das["transforms"][-2]["zero_phase"] is False


def test_withheld_samples_never_reach_public_arrays(record, tmp_path):
    """As for archives: spikes in every segment's forecast window (at the first raw sample
    after the last public row, and at the last truth row's) change the forecast truths and
    nothing public, to the bit."""
    layout = load_layout(str(record["layout"]))
    spiked = tmp_path / "spiked.zarr"
    shutil.copytree(record["store"], spiked)
    data = zarr.open_group(str(spiked), mode="r+")["strain_rate"]
    for slot in range(10):
        row_0 = slot * 1700 + 40 * 5
        last_public = row_0 + (layout.forecast_start - 1) * 5
        last_truth = row_0 + (layout.required_steps - 1) * 5
        for sample in (last_public + 1, last_truth):
            data[sample, :] = data[sample, :] + 1e-3
    store = storage.open_dataset(StoreLocation(spiked))
    wavefield = das_wavefield(store, layout, quiet=True)
    bundle = build_bundle(wavefield, layout, SECRET)
    public, truth = tmp_path / "public.zarr", tmp_path / "truth.zarr"
    write_bundle(bundle, StoreLocation(public), StoreLocation(truth), SECRET, quiet=True)
    before, after = _arrays(record["public"]), _arrays(public)
    assert sorted(before) == sorted(after) and len(before) == 19
    for name in before:
        assert before[name].tobytes() == after[name].tobytes(), name
    before, after = _arrays(record["truth"]), _arrays(truth)
    for name in before:
        changed = before[name].tobytes() != after[name].tobytes()
        assert changed == (name in FORECAST_TRUTHS), name


def test_continuous_das_store_drops_gappy_channels_and_uses_segment_hours(record):
    store = storage.open_dataset(StoreLocation(record["store"])).load()
    del store.attrs[cv.ATTR_CTF_SEGMENTS]
    values = store["strain_rate"].values.copy()
    values[1700 * 3 + 900 : 1700 * 3 + 905, 7] = np.nan
    store["strain_rate"] = (cv.DAS_DIMS, values)
    store = store.chunk({cv.TIME: 4096})
    layout = load_layout(str(record["layout"]))
    wavefield = das_wavefield(store, layout, quiet=True)
    assert wavefield.sizes[cv.SENSOR] == CHANNELS - 1 and 7 not in wavefield[cv.SENSOR].values
    assert wavefield.attrs[cv.ATTR_PARAMETER_NAME] == "segment_start_h"
    hours = wavefield[cv.PARAMETER_VALUE].values
    assert hours[3] == pytest.approx((3 * 340 + 40) / 3600)
    assert wavefield.attrs[cv.ATTR_DAS]["channels_dropped"] == [7]
    with pytest.raises(InvalidInput, match="only 0 channel"):
        gappy = store.copy()
        gappy["strain_rate"] = gappy["strain_rate"].where(gappy[cv.DISTANCE] < 0)
        das_wavefield(gappy, layout, quiet=True)
    with pytest.raises(InvalidInput, match="too short"):
        das_wavefield(store.isel({cv.TIME: slice(0, 5000)}), layout, quiet=True)


def test_das_demo_scores_the_baselines_and_zeros_score_zero(tiny, tmp_path, dask_cluster):
    workdir = tmp_path / "demo"
    assert (
        _cli(
            "demo",
            "--dataset",
            "das",
            "--workdir",
            str(workdir),
            "--sensors",
            str(CHANNELS),
            "--layout",
            str(tiny),
            scheduler=dask_cluster.address,
        )
        == 0
    )
    rows = json.loads((workdir / "leaderboard.json").read_text())
    assert {row["model"] for row in rows} == {"zeros", "persistence", "mean"}
    assert all(row["dataset"] == "das" for row in rows)
    zeros = next(row for row in rows if row["model"] == "zeros")
    assert set(zeros["scores"]) >= set(cv.SCORE_NAMES)
    assert all(zeros["scores"][name] == 0.0 for name in cv.SCORE_NAMES)
    persistence = next(row for row in rows if row["model"] == "persistence")
    assert all(math.isfinite(persistence["scores"][name]) for name in cv.SCORE_NAMES)
    assert (workdir / "private" / "wavefield-das.zarr").exists()
    assert (workdir / "leaderboard" / "index.html").exists()
    # The published demo secret makes a truth anyone can regenerate: the bundle says so.
    manifest = storage.read_attrs(StoreLocation(workdir / "public" / "bundle-das.zarr"))[
        cv.ATTR_CTF
    ]
    assert manifest[cv.PROVENANCE_TRUTH] == "public"
    assert manifest["truth_note"] == cv.PUBLIC_TRUTH_NOTE
    assert all(row["truth_note"] == cv.PUBLIC_TRUTH_NOTE for row in rows)
    for page in (workdir / "leaderboard").glob("*.html"):
        assert cv.PUBLIC_TRUTH_NOTE in page.read_text(), page


def test_synthetic_das_on_s3_with_two_workers_is_byte_identical(
    record, tiny, s3_server, s3_bucket, dask_cluster
):
    url = f"{s3_bucket}/das.zarr"
    assert (
        main(
            [
                "synth",
                "das",
                "--out",
                url,
                "--channels",
                str(CHANNELS),
                "--layout",
                str(tiny),
                "--secret",
                SECRET,
                "--scheduler",
                dask_cluster.address,
                "--quiet",
                *s3_server.cli_options(),
            ]
        )
        == 0
    )
    filesystem = s3_server.filesystem()
    remote_root = url.removeprefix("s3://")
    remote = {
        path[len(remote_root) + 1 :]: filesystem.cat_file(path)
        for path in filesystem.find(remote_root)
    }
    local_root = record["store"]
    local = {
        str(path.relative_to(local_root)): path.read_bytes()
        for path in local_root.rglob("*")
        if path.is_file()
    }
    assert sorted(remote) == sorted(local)
    assert any(name.startswith("strain_rate/c/") for name in local)
    for name, content in local.items():
        assert remote[name] == content, name


def test_recipe_with_das_transforms(tmp_path):
    """A recipe: the synthetic record, the fibre's first 300 m every 2nd channel, strain, and
    back to strain rate; the store keeps the DAS contract (variable renamed with its quantity)."""
    recipe = tmp_path / "das.yaml"
    recipe.write_text(
        """recipe: 1
source:
  synthetic_das: {channels: 40, seed: 3, earthquakes: false}
transforms:
  - select_channels: {distance_max_m: 300, step: 2}
  - convert_quantity: {to: strain}
outputs:
  store: {url: out.zarr}
"""
    )
    from seisctf.build.engine import build_file

    with pytest.raises(InvalidInput, match="layout"):
        bad = tmp_path / "bad.yaml"
        bad.write_text(recipe.read_text() + "splits:\n  ctf: {layout: nowhere}\n")
        build_file(bad, workdir=tmp_path, quiet=True)
    small = tmp_path / "small.yaml"
    small.write_text(TINY_LAYOUT_YAML)
    text = recipe.read_text() + f"splits:\n  ctf: {{layout: {small}}}\n"
    recipe.write_text(text)
    build_file(recipe, workdir=tmp_path, quiet=True)
    store = storage.open_dataset(StoreLocation(tmp_path / "out.zarr"))
    assert cv.validate_das_store(store) == "strain" == store.attrs[cv.ATTR_QUANTITY]
    assert store.attrs[cv.ATTR_UNITS] == "1" and store.attrs[cv.ATTR_CHANNEL_SPACING] == 20.0
    np.testing.assert_array_equal(store[cv.DISTANCE].values, np.arange(0, 301, 20.0))
    transforms = store["strain"].attrs[cv.ATTR_TRANSFORMS]
    assert [t["transform"] for t in transforms] == ["select_channels", "convert_quantity"]
    source = synthetic_das_record(channels=40, seed=3, earthquakes=False, layout=str(small))
    expected = source["strain_rate"].isel({cv.DISTANCE: slice(0, 31, 2)}).values.astype(float)
    cumulative = np.concatenate(
        [np.zeros((1, 16)), np.cumsum(0.5 * (expected[1:] + expected[:-1]) * 0.2, axis=0)]
    )
    strain = store["strain"].values
    assert np.abs(strain - cumulative).max() < 1e-5 * np.abs(cumulative).max()
    assert isinstance(store, xr.Dataset)


def test_vendor_files_ingested_then_bundled_and_scored(tiny, tmp_path, dask_cluster_one_worker):
    """The whole real-format path: two PRODML files (5 Hz, 40 loci) -> `seisctf ingest das` ->
    `seisctf tasks` (guarded slots, causal 5 -> 1 Hz) -> `seisctf baseline zeros` -> `seisctf
    score ctf`: a valid bundle of the layout's shapes whose zeros submission scores 0.0."""
    from das_vendor_files import write_prodml

    layout = load_layout(str(tiny))
    slot_samples, _ = slot_plan(layout, 5.0, 1.0)
    n_time = 10 * slot_samples + 50
    rng = np.random.default_rng(11)
    sos = signal.butter(4, 0.3, fs=5.0, output="sos")
    record = signal.sosfilt(sos, rng.standard_normal((n_time, CHANNELS)), axis=0) * 1e-9
    start = np.datetime64("2026-03-01T00:00:00", "us")
    half = n_time // 2
    files = tmp_path / "raw"
    files.mkdir()
    write_prodml(files / "a.h5", record[:half].astype(np.float32), start, 5.0)
    write_prodml(
        files / "b.h5",
        record[half:].astype(np.float32),
        start + np.timedelta64(half * 200_000, "us"),
        5.0,
    )
    scheduler = dask_cluster_one_worker.address
    store, public, truth = tmp_path / "das.zarr", tmp_path / "public.zarr", tmp_path / "truth.zarr"
    assert _cli("ingest", "das", str(files), "--out", str(store), scheduler=scheduler) == 0
    ingested = storage.open_dataset(StoreLocation(store))
    assert cv.validate_das_store(ingested) == cv.DAS_DEFAULT_VAR
    assert ingested.sizes[cv.TIME] == n_time
    common = ("--layout", str(tiny), "--secret", SECRET)
    assert (
        _cli("tasks", str(store), "--public", str(public), "--truth", str(truth), *common,
             scheduler=scheduler)
        == 0
    )  # fmt: skip
    manifest = zarr.open_group(str(public), mode="r").attrs[cv.ATTR_CTF]
    shapes = {name: array.shape for name, array in zarr.open_group(str(public)).arrays()}
    assert shapes["X1train"] == (layout.train_steps, CHANNELS)
    assert shapes["X4train"] == (layout.few_steps, CHANNELS)
    assert manifest["pairs"][0]["test"] == "X1test"
    submission = tmp_path / "zeros.zarr"
    assert (
        _cli("baseline", "zeros", "--public", str(public), "--out", str(submission),
             scheduler=scheduler)
        == 0
    )  # fmt: skip
    result_path = tmp_path / "scores.json"
    assert (
        _cli("score", "ctf", "--truth", str(truth), "--submission", str(submission),
             "--json", str(result_path), scheduler=scheduler)
        == 0
    )  # fmt: skip
    result = json.loads(result_path.read_text())
    assert result["truth_sha256_verified"] is True
    assert all(result["scores"][name] == 0.0 for name in cv.SCORE_NAMES)
