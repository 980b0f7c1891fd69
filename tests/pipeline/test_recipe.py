"""`seisctf build RECIPE.yaml`: validation before any work, byte-identical re-runs, provenance."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from conftest import TINY_LAYOUT_YAML

from seisctf import conventions as cv
from seisctf.build import engine as recipes
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.plugins.layouts import LAYOUTS, Layout

SECRET = "recipe-test-secret"


def recipe_text(layout: str, noise: float = 0.1, chunks: int | None = None) -> str:
    store = (
        f"    url: wavefield.zarr\n    chunks: {{time: {chunks}, sensor: 32}}\n"
        if chunks
        else ("    url: wavefield.zarr\n")
    )
    return f"""\
recipe: 1
name: test-chain
source:
  synthetic_global:
    sensors: 64
    duration_s: 300
transforms:
  - butterworth:
      freqmax: 0.2
  - add_gaussian_noise:
      rms_fraction: {noise}
splits:
  ctf:
    layout: {layout}
outputs:
  store:
{store}  ctf_bundle:
    public: public.zarr
    truth: truth.zarr
"""


@pytest.fixture(scope="module")
def layout_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("layout") / "tiny.yaml"
    path.write_text(TINY_LAYOUT_YAML)
    return str(path)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def file_digests(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, by relative path (a store's chunks and metadata)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def build(recipe_path: Path, workdir: Path, **kwargs) -> recipes.BuildContext:
    return recipes.build_file(recipe_path, workdir=workdir, secret=SECRET, quiet=True, **kwargs)


# --- malformed recipes fail before any work, naming the line ------------------------------------

BAD_RECIPES = {
    "unknown transform": (
        "recipe: 1\nsource:\n  synthetic_global: {}\ntransforms:\n  - lowpass_magic:\n"
        "      freq: 1\noutputs:\n  store: {url: x.zarr}\n",
        5,
        "lowpass_magic",
    ),
    "wrong type": (
        "recipe: 1\nsource:\n  synthetic_global:\n    sensors: many\noutputs:\n"
        "  store: {url: x.zarr}\n",
        4,
        "sensors",
    ),
    "missing source": ("recipe: 1\noutputs:\n  store: {url: x.zarr}\n", 1, "'source'"),
    "unknown key": (
        "recipe: 1\nsource:\n  synthetic_global: {}\ntransforms:\n  - butterworth:\n"
        "      freqmax: 0.1\n      poles: 4\noutputs:\n  store: {url: x.zarr}\n",
        7,
        "poles",
    ),
    "duplicate key": (
        "recipe: 1\nsource:\n  synthetic_global: {}\noutputs:\n  store: {url: a.zarr}\n"
        "  store: {url: b.zarr}\n",
        6,
        "duplicate",
    ),
    "not yaml": ("recipe: 1\nsource: [unclosed\n", 3, "YAML"),
    "unknown layout": (
        "recipe: 1\nsource:\n  synthetic_global: {}\nsplits:\n  ctf:\n    layout: nope\n"
        "outputs:\n  ctf_bundle: {public: p.zarr, truth: t.zarr}\n",
        6,
        "nope",
    ),
    "unknown source": (
        "recipe: 1\nsource:\n  magic_archive: {path: x}\noutputs:\n  store: {url: x.zarr}\n",
        3,
        "magic_archive",
    ),
}


# Ingest sources and the picking output: refused before any ingest runs.
BAD_RECIPES |= {
    "unknown key": (
        "recipe: 1\nsource:\n  waveform_archive:\n    sources: [a.mseed]\n    ratee: 5\n"
        "outputs:\n  store: {url: x.zarr}\n",
        5,
        "ratee",
    ),
    "no sources": (
        "recipe: 1\nsource:\n  das_files:\n    strict: true\noutputs:\n  store: {url: x.zarr}\n",
        3,
        "'sources' is a required property",
    ),
    "picking from a waveform archive": (
        "recipe: 1\nsource:\n  waveform_archive: {sources: [a.mseed]}\noutputs:\n"
        "  picking:\n    url: p.zarr\n    split: {strategy: event}\n",
        5,
        "event-window source",
    ),
    "bad split": (
        "recipe: 1\nsource:\n  seisbench: {path: sb}\noutputs:\n  picking:\n    url: p.zarr\n"
        "    split: {strategy: event, fractions: [-1, 0, 1]}\n",
        7,
        "three shares",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RECIPES))
def test_malformed_recipe_names_the_line_before_any_work(case, tmp_path):
    text, line, word = BAD_RECIPES[case]
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(InvalidInput) as raised:
        build(path, tmp_path / "out")
    assert raised.value.what == f"{path}:{line}", (case, str(raised.value))
    assert word in str(raised.value), (case, str(raised.value))
    assert not (tmp_path / "out").exists()


def test_cli_exits_3_naming_the_line_and_writes_nothing(tmp_path):
    text, line, _ = BAD_RECIPES["wrong type"]
    path = write(tmp_path / "bad.yaml", text)
    result = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", "build", str(path), "--workdir", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 3, result.stderr
    assert f"bad.yaml:{line}" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


# --- byte-identical, idempotent, provenance -------------------------------------------------------


@pytest.fixture(scope="module")
def first_build(tmp_path_factory, layout_file):
    root = tmp_path_factory.mktemp("build-a")
    path = write(root / "chain.yaml", recipe_text(layout_file))
    context = build(path, root / "out")
    return path, root / "out", context


def test_two_runs_give_byte_identical_stores_and_a_rerun_is_a_no_op(
    first_build, tmp_path, local_client
):
    path, out, context = first_build
    assert len(context.written) == 3 and not context.skipped
    # The noise's input was checkpointed next to the truth, and the checkpoint removed.
    assert not context.report.checkpoints and not list(out.glob("*.checkpoints"))
    again = build(path, tmp_path)  # another workdir, on a 1- or 2-worker LocalCluster
    assert file_digests(out) == file_digests(tmp_path)
    before = file_digests(out)
    rerun = build(path, out)
    assert not rerun.written and len(rerun.skipped) == 3
    assert file_digests(out) == before
    assert len(again.written) == 3


def test_provenance_in_every_output_without_secret_or_seeds(first_build):
    path, out, _ = first_build
    text = yaml.safe_load(path.read_text())
    for name in ("wavefield.zarr", "public.zarr", "truth.zarr"):
        attrs = dict(zarr.open_group(str(out / name), mode="r").attrs)
        record = attrs[cv.ATTR_PROVENANCE]
        assert record["recipe"]["source"] == text["source"]
        assert record["recipe"]["transforms"] == text["transforms"]
        assert set(record["versions"]) >= {"seisctf", "numpy", "dask", "zarr"}
        assert len(record["fingerprint"]) == 64 and len(record["input_sha256"]) == 64
        assert SECRET not in json.dumps(attrs)
    store = zarr.open_group(str(out / "wavefield.zarr"), mode="r")
    assert store[cv.WAVEFIELD_VAR].dtype == "float32"  # transforms in float64, stored dtype kept
    history = store[cv.WAVEFIELD_VAR].attrs[cv.ATTR_TRANSFORMS]
    assert [step["transform"] for step in history] == ["butterworth", "add_gaussian_noise"]
    assert not any("seed" in step for step in history)


def test_changing_one_parameter_rewrites_the_affected_outputs_only(
    first_build, tmp_path, layout_file
):
    path, out, _ = first_build
    work = tmp_path / "work"
    build(path, work)
    digests = file_digests(work)

    def stores(prefix: str) -> dict[str, str]:
        return {k: v for k, v in file_digests(work).items() if k.startswith(prefix)}

    # The store's chunking is the store's alone: the bundle is up to date.
    rechunked = write(tmp_path / "rechunked.yaml", recipe_text(layout_file, chunks=100))
    context = build(rechunked, work)
    assert context.written == [str(work / "wavefield.zarr")]
    assert stores("public.zarr") == {k: v for k, v in digests.items() if k.startswith("public")}
    assert stores("wavefield.zarr") != {
        k: v for k, v in digests.items() if k.startswith("wavefield")
    }
    # The noise level feeds everything downstream: all three rewritten, provenance changed.
    noisier = write(tmp_path / "noisier.yaml", recipe_text(layout_file, noise=0.3))
    context = build(noisier, work)
    assert len(context.written) == 3
    record = zarr.open_group(str(work / "public.zarr"), mode="r").attrs[cv.ATTR_PROVENANCE]
    assert record["recipe"]["transforms"][1] == {"add_gaussian_noise": {"rms_fraction": 0.3}}


def test_recipe_on_s3_is_byte_identical_to_the_local_run(first_build, s3_server, s3_bucket):
    path, out, _ = first_build
    context = recipes.build_file(
        path,
        workdir=Path("unused"),
        secret=SECRET,
        quiet=True,
        storage_options=s3_server.storage_options,
        overrides={
            "outputs": {
                "store": {"url": f"{s3_bucket}/wavefield.zarr"},
                "ctf_bundle": {
                    "public": f"{s3_bucket}/public.zarr",
                    "truth": f"{s3_bucket}/truth.zarr",
                },
            }
        },
    )
    assert len(context.written) == 3
    fs = s3_server.filesystem()
    root = s3_bucket.removeprefix("s3://")
    local = file_digests(out)
    remote = {
        path[len(root) + 1 :]: hashlib.sha256(fs.cat_file(path)).hexdigest()
        for path in sorted(fs.find(root))
    }
    # Same files: chunks and array metadata byte for byte.
    assert sorted(remote) == sorted(local)
    chunks = {k: v for k, v in local.items() if "/c/" in k}
    assert chunks and chunks == {k: v for k, v in remote.items() if "/c/" in k}
    arrays = {k: v for k, v in local.items() if k.endswith("/zarr.json") and k.count("/") == 2}
    assert arrays and arrays == {k: v for k, v in remote.items() if k in arrays}
    # The groups' metadata (attrs, consolidated array metadata): the same but for the output
    # URLs the provenance names and the fingerprint of the recipe that names them.
    for store in ("wavefield.zarr", "public.zarr", "truth.zarr"):
        remote_group = _without_output_urls(json.loads(fs.cat_file(f"{root}/{store}/zarr.json")))
        local_group = _without_output_urls(json.loads((out / store / "zarr.json").read_text()))
        assert remote_group == local_group, store


def _without_output_urls(group: dict) -> dict:
    """A group's zarr.json without its provenance's output URLs and fingerprint."""
    provenance = group["attributes"].get(cv.ATTR_PROVENANCE)
    if provenance:
        provenance.pop("fingerprint", None)
        provenance["recipe"].pop("output", None)
        provenance["recipe"].pop("outputs", None)
    return group


def test_a_build_without_a_secret_draws_one_keeps_it_with_the_truth_and_reruns_up_to_date(
    tmp_path, layout_file, monkeypatch
):
    """No secret anywhere: the build draws 256 random bits, keeps them in the truth group only
    (never in the public bundle or the store), and a re-run takes them from there, so it is up
    to date; a build elsewhere draws another secret, so its truth differs."""
    monkeypatch.delenv("SEISCTF_SECRET", raising=False)
    path = write(tmp_path / "r.yaml", recipe_text(layout_file))
    first = recipes.build_file(path, workdir=tmp_path / "a", secret=None, quiet=True)
    assert len(first.written) == 3 and first.secret.drawn
    kept = zarr.open_group(str(tmp_path / "a" / "truth.zarr"), mode="r").attrs[cv.ATTR_CTF_SECRET]
    assert len(kept) == 64 and kept == first.secret.value
    for public in ("public.zarr", "wavefield.zarr"):
        assert kept not in json.dumps(dict(zarr.open_group(str(tmp_path / "a" / public)).attrs))
    again = recipes.build_file(path, workdir=tmp_path / "a", secret=None, quiet=True)
    assert again.secret.origin == "kept" and again.written == [] and len(again.skipped) == 3
    recipes.build_file(path, workdir=tmp_path / "b", secret=None, quiet=True)
    truths = [zarr.open_group(str(tmp_path / name / "truth.zarr")) for name in "ab"]
    assert not np.array_equal(truths[0]["X1test"][...], truths[1]["X1test"][...])


def test_the_layout_is_parsed_once_and_travels_in_the_context(tmp_path, layout_file, monkeypatch):
    """`validate` parses the recipe's layout and `build_file` hands that `Layout` to the build
    (`BuildContext.layout`): the synthetic sources and the bundle output read it from there."""
    path = write(tmp_path / "r.yaml", recipe_text(layout_file))
    layout = recipes.validate(recipes.read_recipe(path))
    assert isinstance(layout, Layout) and layout.name == "tiny"
    parsed, seen = [], []
    monkeypatch.setattr(recipes, "load_layout", lambda name: parsed.append(name) or LAYOUTS["das"])
    monkeypatch.setattr(recipes, "build", lambda recipe, context: seen.append(context.layout))
    recipes.build_file(path, workdir=tmp_path / "o", secret=SECRET, quiet=True)
    assert parsed == [layout_file] and seen == [LAYOUTS["das"]]
    no_layout = recipe_text(layout_file).replace(
        f"splits:\n  ctf:\n    layout: {layout_file}\n", ""
    )
    store_only = no_layout.split("  ctf_bundle:")[0]
    assert recipes.validate(recipes.read_recipe("r.yaml", store_only)) is None


def test_shipped_demo_recipe_is_valid():
    loaded = recipes.load(recipes.shipped("demo-global"))
    assert "synthetic_global" in loaded.data["source"]


def test_real_noise_from_an_event_window_store(tmp_path):
    """`add_real_noise` with `noise_store:` draws from the store's noise windows only."""
    import dask.array as da
    import numpy as np
    import xarray as xr

    from seisctf import storage

    quiet = xr.Dataset(
        {"u": ((cv.TIME, cv.SENSOR), da.zeros((400, 6), chunks=(128, 3), dtype=np.float32))},
        attrs={cv.ATTR_SAMPLING_RATE: 10.0, cv.ATTR_START_TIME: "2026-01-01T00:00:00Z"},
    )
    quiet["u"] = quiet["u"] + 1.0  # constant traces: RMS 1, so the noise's level is visible
    storage.write_dataset(quiet, StoreLocation(tmp_path / "in.zarr"), quiet=True)
    rng = np.random.default_rng(3)
    windows = rng.standard_normal((3, 3, 100)).astype(np.float32)
    windows[0] *= 1000.0  # the earthquake window must never be used
    events = xr.Dataset(
        {"waveforms": (("trace", "channel", "sample"), windows)},
        coords={  # variable-length strings, as the event-window contract stores them
            "trace_category": ("trace", np.array(["earthquake", "noise", "noise"], dtype=object)),
            "channel": np.array(["E", "N", "Z"], dtype=object),
        },
    )
    storage.write_dataset(events, StoreLocation(tmp_path / "events.zarr"), quiet=True)
    path = write(
        tmp_path / "real.yaml",
        "recipe: 1\nsource:\n  store: {url: in.zarr}\ntransforms:\n  - add_real_noise:\n"
        "      noise_store: events.zarr\n      channel: Z\n      rms_fraction: 0.5\n"
        "outputs:\n  store: {url: out.zarr}\n",
    )
    build(path, tmp_path)
    result = storage.open_dataset(StoreLocation(tmp_path / "out.zarr"))["u"].values
    added = result - 1.0
    assert np.allclose(np.sqrt((added**2).mean(axis=0)), 0.5, rtol=0.1)
    assert np.abs(added).max() < 10  # nothing from the ×1000 earthquake window


def test_checkpointed_chain_equals_the_functions_applied_directly(first_build):
    """The recipe checkpoints the noise's input in the stored dtype (float32, uncompressed):
    the stored result is exactly the same functions applied in memory without a checkpoint,
    the filtered data rounded to float32 before the noise is added."""
    import numpy as np

    from seisctf import keys, storage
    from seisctf.pipeline.transforms.filters import butterworth
    from seisctf.pipeline.transforms.noise import add_gaussian_noise
    from seisctf.synth.global_wavefield import synthesize_global

    _, out, _ = first_build
    source = synthesize_global(
        n_sensors=64, duration_s=300, seed=keys.derive_seed(SECRET, "synth/global")
    )
    clean = source[cv.WAVEFIELD_VAR].assign_attrs(source.attrs)
    noisy = add_gaussian_noise(
        butterworth(clean, freqmax=0.2).astype(np.float32),
        seed=keys.derive_seed(SECRET, "transforms/1/add_gaussian_noise"),
        variable=cv.WAVEFIELD_VAR,
        rms_fraction=0.1,
    )
    stored = storage.open_dataset(StoreLocation(out / "wavefield.zarr"))[cv.WAVEFIELD_VAR].values
    assert stored.dtype == noisy.dtype == np.float32
    np.testing.assert_array_equal(stored, noisy.values)


def test_the_context_is_frozen_and_the_build_returns_its_report(first_build):
    """A plugin cannot change what the build was given; what the build did is its report."""
    path, out, context = first_build
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.quiet = False  # type: ignore[misc]
    assert context.written is context.report.written
    assert context.report.store_output == str(out / "wavefield.zarr")
    recipe = recipes.read_recipe(path)
    recipes.validate(recipe)
    secret = recipes.keys.resolve_secret(SECRET)
    given = recipes.BuildContext(workdir=out, quiet=True, secret=secret)
    report = recipes.build(recipe, given)
    assert report is given.report and report.written == [] and len(report.skipped) == 3
    assert given.source_url is None and given.scratch is None  # derived on a copy
