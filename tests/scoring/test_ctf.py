"""CTF scores against an independent plain-numpy computation (SVD norms, eager FFT)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from conftest import TINY_LAYOUT, smooth_wavefield
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf import conventions as cv
from seisctf import storage
from seisctf.pipeline.tasks import build_bundle, write_bundle
from seisctf.scoring.ctf import open_truth, score_ctf

SECRET = "test-secret"


def numpy_spectrum(x: np.ndarray, k: int, modes: int) -> np.ndarray:
    power = np.fft.fftshift(np.abs(np.fft.fft(x[-k:], axis=1)) ** 2, axes=1).mean(0)
    return power[x.shape[1] // 2 : x.shape[1] // 2 + modes]


def numpy_reference_scores(truth: dict, submission: dict, manifest: dict) -> dict[str, float]:
    """The contract's `reference` formulas, eagerly, with numpy's SVD-based 2-norm."""
    scores = {}
    index = 1
    for pair in manifest["pairs"]:
        t = np.asarray(truth[pair["test"]], dtype=np.float64)
        s = np.asarray(submission[pair["test"]], dtype=np.float64)
        for metric in pair["metrics"]:
            if metric == "long_time":
                k, modes = manifest["k_long"], manifest["modes"]
                truth_power = numpy_spectrum(t, k, modes)
                error = np.linalg.norm(truth_power - numpy_spectrum(s, k, modes)) / np.linalg.norm(
                    truth_power
                )
            else:
                rows = slice(0, manifest["k_short"]) if metric == "short_time" else slice(None)
                error = np.linalg.norm(t[rows] - s[rows], 2) / np.linalg.norm(t[rows], 2)
            scores[f"E{index}"] = float(np.clip(100 * (1 - error), -100, 100))
            index += 1
    return scores


@pytest.fixture(scope="module")
def truth_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle")
    bundle = build_bundle(smooth_wavefield(), TINY_LAYOUT, SECRET)
    write_bundle(bundle, str(root / "public.zarr"), str(root / "truth.zarr"), SECRET, quiet=True)
    return str(root / "truth.zarr")


def _truth_numpy(truth_url: str) -> tuple[dict, dict]:
    manifest, _, truth = open_truth(truth_url)
    return manifest, {name: array.compute() for name, array in truth.items()}


def _assert_close(scores: dict, expected: dict) -> None:
    assert set(scores) == set(cv.SCORE_NAMES)
    for name in cv.SCORE_NAMES:
        tolerance = 1e-9 * max(1.0, abs(expected[name]))
        assert abs(scores[name] - expected[name]) <= tolerance, (name, scores[name], expected[name])


def test_truth_scores_100_and_zeros_score_0(truth_url):
    manifest, truth = _truth_numpy(truth_url)
    zeros = {name: np.zeros_like(array) for name, array in truth.items()}
    results = score_ctf(truth_url, {"truth": truth, "zeros": zeros}, quiet=True)
    by_name = {r["name"]: r for r in results}
    assert by_name["truth"]["scores"] == {name: 100.0 for name in cv.SCORE_NAMES}
    assert by_name["truth"]["avg_score"] == 100.0
    assert by_name["zeros"]["scores"] == {name: 0.0 for name in cv.SCORE_NAMES}
    assert all(r["truth_sha256_verified"] for r in results)
    assert by_name["zeros"]["convention"] == "reference"


def test_clipping_and_raw_scores(truth_url):
    manifest, truth = _truth_numpy(truth_url)
    wild = {name: -1e3 * array for name, array in truth.items()}
    result = score_ctf(truth_url, {"wild": wild}, quiet=True)[0]
    assert all(value == -100.0 for value in result["scores"].values())
    assert all(value < -100.0 for value in result["raw_scores"].values())


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    time_chunk=st.integers(min_value=16, max_value=120),
    space_chunk=st.integers(min_value=8, max_value=48),
    noise_scale=st.floats(min_value=0.01, max_value=3.0),
)
def test_scores_match_numpy_for_any_chunking_and_worker_count(
    truth_url, local_client, time_chunk, space_chunk, noise_scale
):
    manifest, truth = _truth_numpy(truth_url)
    rng = np.random.default_rng(int(noise_scale * 1000))
    submission = {
        name: array + noise_scale * rng.standard_normal(array.shape).astype(np.float32)
        for name, array in truth.items()
    }
    expected = numpy_reference_scores(truth, submission, manifest)
    chunked = {
        name: da.from_array(array, chunks=(time_chunk, space_chunk))
        for name, array in submission.items()
    }
    result = score_ctf(truth_url, {"noisy": chunked}, quiet=True)[0]
    _assert_close(result["scores"], expected)
    assert result["avg_score"] == pytest.approx(
        np.mean(list(expected.values())), rel=1e-9, abs=1e-9
    )


def test_truth_chunking_does_not_change_scores(tmp_path, truth_url):
    manifest, truth = _truth_numpy(truth_url)
    rechunked_url = str(tmp_path / "truth-rechunked.zarr")
    attrs = storage.read_attrs(truth_url)
    storage.write_arrays(
        {n: da.from_array(a) for n, a in truth.items()},
        rechunked_url,
        attrs,
        chunks={n: (37, 11) for n in truth},
        quiet=True,
    )
    submission = {name: 0.5 * array for name, array in truth.items()}
    first = score_ctf(truth_url, {"half": submission}, quiet=True)[0]
    second = score_ctf(rechunked_url, {"half": submission}, quiet=True)[0]
    _assert_close(second["scores"], first["scores"])
    assert second["truth_sha256_verified"]


def test_tampered_truth_is_not_verified(tmp_path, truth_url):
    manifest, truth = _truth_numpy(truth_url)
    tampered_url = str(tmp_path / "tampered.zarr")
    truth["X3test"][5, 5] += 1.0
    storage.write_arrays(
        {n: da.from_array(a) for n, a in truth.items()},
        tampered_url,
        storage.read_attrs(truth_url),
        quiet=True,
    )
    result = score_ctf(
        tampered_url, {"zeros": {n: np.zeros_like(a) for n, a in truth.items()}}, quiet=True
    )[0]
    assert result["truth_sha256_verified"] is False


def test_scoring_path_does_not_import_heavy_libraries():
    """`seisctf score ctf` must start fast: no obspy, seisbench or torch on its import path."""
    import subprocess
    import sys

    code = (
        "import sys, seisctf.cli, seisctf.scoring.ctf, seisctf.scoring.submission, "
        "seisctf.scoring.leaderboard, seisctf.cluster; "
        "print(sorted(m for m in ('obspy', 'seisbench', 'torch') if m in sys.modules))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert output.stdout.strip() == "[]"
