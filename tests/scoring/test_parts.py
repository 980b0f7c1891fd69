"""The public/private split of a truth's sensors and the scores of each part, against an
independent computation (hmac and sorting for the split; numpy on zero-filled arrays for the
scores)."""

from __future__ import annotations

import hashlib
import hmac

import dask.array as da
import numpy as np
import pytest
from conftest import synthetic_manifest, write_tiny_truth
from test_ctf import numpy_scores, synthetic_truth

from seisctf import conventions as cv
from seisctf.location import StoreLocation
from seisctf.scoring import parts
from seisctf.scoring.ctf import open_truth, score_arrays, score_ctf

SALT = "5a" * 16


def independent_split(salt_hex: str, n_sensors: int) -> set[int]:
    """The documented rule, written out: the n // 2 sensors of smallest HMAC key are public."""
    keys = {
        j: int.from_bytes(
            hmac.new(
                bytes.fromhex(salt_hex), f"seisctf/sensor-split/v1/{j}".encode(), hashlib.sha256
            ).digest(),
            "big",
        )
        for j in range(n_sensors)
    }
    return set(sorted(keys, key=lambda j: (keys[j], j))[: n_sensors // 2])


@pytest.mark.parametrize("n_sensors", [2, 7, 48, 257])
def test_split_is_the_documented_rule_disjoint_and_covering(n_sensors):
    public = parts.sensor_split(SALT, n_sensors)
    private = parts.part_mask(SALT, n_sensors, "private")
    assert public.dtype == bool and public.shape == (n_sensors,)
    assert set(np.flatnonzero(public)) == independent_split(SALT, n_sensors)
    assert not np.any(public & private) and np.all(public | private)
    assert public.sum() == n_sensors // 2
    np.testing.assert_array_equal(parts.part_mask(SALT, n_sensors, "public"), public)


def test_split_depends_on_the_salt_alone():
    again = parts.sensor_split(SALT, 256)
    np.testing.assert_array_equal(parts.sensor_split(SALT, 256), again)
    other = parts.sensor_split("5b" + SALT[2:], 256)
    assert 0 < np.sum(other != again) < 256  # another salt, another split
    again[:] = False  # a caller's copy: the cached split is unharmed
    assert parts.sensor_split(SALT, 256).sum() == 128


def zero_filled(arrays: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    return {name: np.where(keep[None, :], array, 0.0) for name, array in arrays.items()}


@pytest.mark.parametrize("convention", ["reference", "paper"])
@pytest.mark.parametrize(
    ("rows", "n_space", "chunks", "gram_max_side"),
    [(40, 30, (13, 7), 4096), (24, 60, (24, 16), 4096), (40, 30, (13, 7), 4)],
    ids=["tall", "wide", "lanczos"],
)
def test_part_scores_are_numpy_scores_of_the_zero_filled_arrays(
    convention, rows, n_space, chunks, gram_max_side
):
    manifest = synthetic_manifest(rows, n_space, 6, 9)
    truth = synthetic_truth(rows, n_space, seed=rows + n_space)
    rng = np.random.default_rng(7)
    submission = {name: a + 0.6 * rng.standard_normal(a.shape) for name, a in truth.items()}
    (result,) = score_arrays(
        manifest,
        {name: da.from_array(a, chunks=chunks) for name, a in truth.items()},
        {"noisy": {name: da.from_array(a, chunks=chunks) for name, a in submission.items()}},
        convention=convention,
        salt=SALT,
        verify=False,
        gram_max_side=gram_max_side,
        quiet=True,
    )
    expected_whole = numpy_scores(truth, submission, manifest, convention)
    assert result["split"] == parts.RULE
    for name, value in expected_whole.items():
        assert result["scores"][name] == pytest.approx(value, rel=1e-8, abs=1e-8)
    for part in parts.PARTS:
        keep = parts.part_mask(SALT, n_space, part)
        expected = numpy_scores(
            zero_filled(truth, keep), zero_filled(submission, keep), manifest, convention
        )
        scored = result["parts"][part]
        assert set(scored["scores"]) == set(cv.SCORE_NAMES)
        for name, value in expected.items():
            assert scored["scores"][name] == pytest.approx(value, rel=1e-8, abs=1e-8), (part, name)
        assert scored["avg_score"] == pytest.approx(np.mean(list(expected.values())), abs=1e-9)
        assert scored["raw_scores"].keys() == scored["scores"].keys()
    assert result["parts"]["public"]["scores"] != result["parts"]["private"]["scores"]


def test_zero_submission_and_truth_score_0_and_100_on_each_part():
    manifest = synthetic_manifest(30, 20, 5, 6)
    truth = synthetic_truth(30, 20, seed=3)
    results = score_arrays(
        manifest,
        {name: da.from_array(a, chunks=(11, 6)) for name, a in truth.items()},
        {
            "zeros": {name: da.zeros(a.shape, chunks=(7, 20)) for name, a in truth.items()},
            "truth": {name: da.from_array(a.astype(np.float64)) for name, a in truth.items()},
        },
        salt=SALT,
        verify=False,
        quiet=True,
    )
    for part in parts.PARTS:
        assert set(results[0]["parts"][part]["scores"].values()) == {0.0}
        assert set(results[1]["parts"][part]["scores"].values()) == {100.0}


def test_a_part_whose_truth_window_is_zero_is_unscorable():
    manifest = synthetic_manifest(30, 20, 5, 6)
    truth = synthetic_truth(30, 20, seed=4)
    public = parts.sensor_split(SALT, 20)
    truth["X1test"][:, public] = 0.0  # E1 and E2 have no public truth
    (result,) = score_arrays(
        manifest,
        {name: da.from_array(a) for name, a in truth.items()},
        {"ones": {name: da.ones(a.shape) for name, a in truth.items()}},
        salt=SALT,
        verify=False,
        quiet=True,
    )
    assert result["parts"]["public"]["unscorable"] == ["E1", "E2"]
    assert result["parts"]["private"]["unscorable"] == []
    assert result["unscorable"] == []


def test_a_truth_without_salt_has_no_parts():
    manifest = synthetic_manifest(20, 10, 4, 3)
    truth = synthetic_truth(20, 10, seed=5)
    (result,) = score_arrays(
        manifest,
        {name: da.from_array(a) for name, a in truth.items()},
        {"zeros": {name: da.zeros(a.shape) for name, a in truth.items()}},
        verify=False,
        quiet=True,
    )
    assert "parts" not in result and "split" not in result


def test_the_referee_splits_a_bundle_by_its_salt(tmp_path):
    truth_url, manifest, truth = write_tiny_truth(tmp_path, "a secret of the parts test, 32 chars")
    _, salt, _ = open_truth(StoreLocation(truth_url))
    rng = np.random.default_rng(11)
    submission = {name: a + 0.3 * rng.standard_normal(a.shape) for name, a in truth.items()}
    (result,) = score_ctf(StoreLocation(truth_url), {"noisy": submission}, quiet=True)
    n_space = next(iter(truth.values())).shape[1]
    for part in parts.PARTS:
        keep = parts.part_mask(salt, n_space, part)
        expected = numpy_scores(
            zero_filled(truth, keep), zero_filled(submission, keep), manifest, "reference"
        )
        for name, value in expected.items():
            assert result["parts"][part]["scores"][name] == pytest.approx(value, abs=1e-9)
