"""CTF task bundles: shapes, secrecy, commitments, normalisation from public data only."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from chunkings import chunk_sizes
from conftest import TINY_LAYOUT, smooth_wavefield
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.plugins.layouts import Layout

SECRET = "organiser-secret-for-tests"


def _write(tmp_path: Path, wavefield=None, secret: str = SECRET, name: str = "b"):
    public, truth = str(tmp_path / f"{name}-public.zarr"), str(tmp_path / f"{name}-truth.zarr")
    bundle = build_bundle(
        wavefield if wavefield is not None else smooth_wavefield(), TINY_LAYOUT, secret
    )
    manifest = write_bundle(bundle, StoreLocation(public), StoreLocation(truth), secret, quiet=True)
    return public, truth, manifest


def _arrays(url: str) -> dict[str, np.ndarray]:
    group = zarr.open_group(url, mode="r")
    return {name: array[...] for name, array in group.arrays()}


def rows_found_in(needle: np.ndarray, haystack: np.ndarray, rtol: float = 1e-5) -> int:
    """How many rows of `needle` equal (to rtol) some row of `haystack`, at any shift."""
    a = needle.astype(np.float64)
    b = haystack.astype(np.float64)
    distance2 = (a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2 * a @ b.T
    scale = np.maximum((a**2).sum(1)[:, None], 1e-30)
    return int((np.sqrt(np.maximum(distance2, 0) / scale) < rtol).any(axis=1).sum())


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("tasks"))


def test_manifest_follows_the_contract(bundle):
    public_url, truth_url, manifest = bundle
    public = _arrays(public_url)
    validation_names = [f"X{i}val" for i in range(1, 10)]
    assert sorted(public) == sorted([*cv.TRAIN_NAMES, *validation_names])
    assert sorted(_arrays(truth_url), key=cv.TEST_NAMES.index) == list(cv.TEST_NAMES)
    attrs = storage.read_attrs(StoreLocation(public_url))
    assert attrs[cv.ATTR_CTF] == manifest
    assert [pair["id"] for pair in manifest["pairs"]] == list(range(1, 10))
    assert manifest["k_short"] == 20 and manifest["k_long"] == 20 and manifest["modes"] == 16
    assert manifest["delta_t"] == 1.0
    shapes = {pair["test"]: (pair["shape"], pair["start_index"]) for pair in manifest["pairs"]}
    assert shapes["X1test"] == ([100, 48], 200)
    assert shapes["X2test"] == ([200, 48], 0)
    assert public["X4train"].shape == (50, 48) and public["X1train"].shape == (200, 48)
    assert manifest["pairs"][7]["burn_in"] == "X9train"
    assert manifest["pairs"][7]["parameters"] == {
        "name": "depth_km",
        "train": [10.0, 30.0, 50.0],
        "test": 40.0,
    }
    assert manifest["pairs"][8]["parameters"]["test"] == 70.0
    pairs = CtfManifest.from_json(manifest, truth_url).pairs
    assert [name for name, _, _ in cv.scored_metrics(pairs)] == list(cv.SCORE_NAMES)
    blocks = manifest["truth_sha256_blocks"]
    assert blocks["block_rows"] > 0 and set(blocks) == {"block_rows", *cv.TEST_NAMES}
    assert all(array.dtype == np.float32 for array in public.values())


def test_commitments_match_truth_independently(bundle):
    public_url, truth_url, manifest = bundle
    salt = bytes.fromhex(zarr.open_group(truth_url, mode="r").attrs[cv.ATTR_CTF_SALT])
    rows = manifest["truth_sha256_blocks"]["block_rows"]
    for name, array in _arrays(truth_url).items():
        digest = hashlib.sha256(salt + array.astype("<f4").tobytes(order="C"))
        assert manifest["truth_sha256"][name] == digest.hexdigest()
        leaves = b"".join(
            hashlib.sha256(salt + array[start : start + rows].astype("<f4").tobytes()).digest()
            for start in range(0, array.shape[0], rows)
        )
        assert manifest["truth_sha256_blocks"][name] == hashlib.sha256(salt + leaves).hexdigest()


def test_public_bundle_holds_no_truth_even_shifted(bundle):
    public_url, truth_url, _ = bundle
    public, truth = _arrays(public_url), _arrays(truth_url)
    for truth_name, truth_array in truth.items():
        for public_name, public_array in public.items():
            assert rows_found_in(truth_array, public_array) == 0, (truth_name, public_name)
    # The detector does find a truth window hidden at a shift (positive control).
    leaky = np.concatenate([public["X1train"][:37], truth["X1test"][5:40]], axis=0)
    assert rows_found_in(truth["X1test"], leaky) == 35


def test_public_outputs_carry_no_secret_or_seed(bundle):
    public_url, _, _ = bundle
    blobs = b"".join(path.read_bytes() for path in Path(public_url).rglob("*") if path.is_file())
    metadata = b"".join(p.read_bytes() for p in Path(public_url).rglob("zarr.json"))
    forbidden = [SECRET, keys.derive_salt(SECRET), "seed", "secret", "salt"]
    forbidden += [str(keys.derive_seed(SECRET, f"noise/{n}")) for n in cv.TRAIN_NAMES]
    for text in forbidden:
        assert text.encode() not in metadata, text
    assert SECRET.encode() not in blobs
    attrs = json.dumps(storage.read_attrs(StoreLocation(public_url)))
    for leak in ("source_latitude", "origin_time", "source_longitude"):
        assert leak not in attrs


def test_normalisation_uses_public_data_only(tmp_path, bundle):
    """Changing the withheld future of every realisation changes the truth, never the public."""
    public_url, truth_url, _ = bundle
    wavefield = smooth_wavefield()
    field = wavefield[cv.WAVEFIELD_VAR]
    altered = wavefield.copy()
    altered[cv.WAVEFIELD_VAR] = field.where(
        wavefield[cv.TIME] < TINY_LAYOUT.forecast_start, field * 3.0 + 1.0
    )
    public2, truth2, _ = _write(tmp_path, altered, name="altered")
    before, after = _arrays(public_url), _arrays(public2)
    for name in before:
        assert np.array_equal(before[name], after[name]), name
    assert not np.array_equal(_arrays(truth_url)["X1test"], _arrays(truth2)["X1test"])
    # Reconstruction truth lies in the public window and is unchanged.
    assert np.array_equal(_arrays(truth_url)["X2test"], _arrays(truth2)["X2test"])


def _files(url: str) -> dict[str, bytes]:
    root = Path(url)
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(draw=st.data())
def test_bundle_bytes_do_not_depend_on_input_chunking(tmp_path, bundle, draw):
    """For a random chunking of the wavefield: every array's bytes, dtype and attrs, the group
    attrs (the manifest and its truth commitments) and every file of both stores are those of
    the bundle built from the fixture's chunking."""
    public_url, truth_url, _ = bundle
    wavefield = smooth_wavefield()
    chunks = {
        dim: chunk_sizes(draw.draw, wavefield.sizes[dim], max_cuts=4, min_step_fraction=6)
        for dim in (cv.TIME, cv.SENSOR)
    }
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh folder per example
    public2, truth2, _ = _write(root, wavefield.chunk(chunks), name="rechunked")
    for first, second in ((public_url, public2), (truth_url, truth2)):
        a, b = zarr.open_group(first, mode="r"), zarr.open_group(second, mode="r")
        assert dict(b.attrs) == dict(a.attrs)
        assert sorted(name for name, _ in b.arrays()) == sorted(name for name, _ in a.arrays())
        for name, array in a.arrays():
            other = b[name]
            assert (other.dtype, other.shape, dict(other.attrs)) == (
                array.dtype, array.shape, dict(array.attrs)
            ), name  # fmt: skip
            assert other[...].tobytes() == array[...].tobytes(), name
        assert _files(second) == _files(first)
    assert storage.read_attrs(StoreLocation(truth2))[cv.ATTR_CTF]["truth_sha256"]


def test_noise_levels_and_secret_dependence(tmp_path, bundle):
    public_url, truth_url, _ = bundle
    public, truth = _arrays(public_url), _arrays(truth_url)
    # Noisy input minus clean truth, relative to the clean truth (same normalisation constants).
    medium = np.std(public["X2train"] - truth["X2test"], axis=0) / np.std(truth["X2test"], axis=0)
    high = np.std(public["X3train"] - truth["X4test"], axis=0) / np.std(truth["X4test"], axis=0)
    assert np.median(medium) == pytest.approx(TINY_LAYOUT.noise_medium, rel=0.15)
    assert np.median(high) == pytest.approx(TINY_LAYOUT.noise_high, rel=0.15)
    other_public, _, _ = _write(tmp_path, secret="another-secret", name="other")
    other = _arrays(other_public)
    assert not np.array_equal(other["X2train"], public["X2train"])
    assert np.array_equal(other["X1train"], public["X1train"])  # clean arrays need no secret


def test_layouts_the_wavefield_cannot_fill_are_refused(tmp_path):
    with pytest.raises(InvalidInput, match="time steps"):
        build_bundle(smooth_wavefield(n_time=250), TINY_LAYOUT, SECRET)
    too_many_modes = Layout(**{**TINY_LAYOUT.as_dict(), "name": "wide", "modes": 25})
    with pytest.raises(InvalidInput, match="modes=25"):
        build_bundle(smooth_wavefield(), too_many_modes, SECRET)
    bundle = build_bundle(smooth_wavefield(), TINY_LAYOUT, SECRET)
    same = str(tmp_path / "same.zarr")
    with pytest.raises(InvalidInput, match="truth: must differ from `public`"):
        write_bundle(bundle, StoreLocation(same), StoreLocation(same), SECRET, quiet=True)
