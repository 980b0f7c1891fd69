"""Submission values: non-finite values are counted and located chunk-wise, independently of
the chunking, and refused with exit 3; valid submissions in every format score alike and are read
without being copied whole into memory."""

from __future__ import annotations

import gc
import os
import tracemalloc
import zipfile

import dask
import dask.array as da
import numpy as np
import pytest
from conftest import noisy_copy, shapes_manifest, write_tiny_truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submission_writers import score_ctf_argv, write_npy_folder, write_npz, write_zarr

from seisctf import cli
from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.ctf import score_ctf
from seisctf.scoring.submission import open_submission
from seisctf.scoring.values import describe_nonfinite, raise_if_nonfinite, value_report

SECRET = "test-secret-submission-values"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """(truth URL, manifest, truth arrays as numpy) of a tiny bundle."""
    return write_tiny_truth(tmp_path_factory.mktemp("bundle"), SECRET)


@pytest.fixture(scope="module")
def submission(bundle):
    return noisy_copy(bundle[2], seed=11, level=0.2)


# --- non-finite values --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_value_report_is_global_c_order_whatever_the_chunking(data):
    shape = (data.draw(st.integers(1, 23)), data.draw(st.integers(1, 17)))
    values = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) - 100.0
    flat = data.draw(st.lists(st.integers(0, values.size - 1), max_size=6, unique=True))
    kinds = data.draw(
        st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), min_size=len(flat), max_size=len(flat))
    )
    values.flat[flat] = kinds
    expected = [len(flat), min(flat) if flat else -1]
    for _ in range(3):
        chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
        count, first, largest = dask.compute(
            value_report(da.from_array(values, chunks=chunks)), scheduler="synchronous"
        )[0]
        assert [count, first] == expected, chunks
        if not flat:
            assert largest == np.abs(values).max(), chunks


def test_value_report_of_float32_and_3d():
    values = np.ones((4, 5, 6), dtype=np.float32)
    values[1, 1, 1] = -7.5
    assert dask.compute(value_report(da.from_array(values, chunks=(3, 2, 4))))[0] == (0, -1, 7.5)
    values[2, 3, 4] = values[3, 0, 0] = np.nan
    count, first, _ = dask.compute(value_report(da.from_array(values, chunks=(3, 2, 4))))[0]
    assert (count, first) == (2, 2 * 30 + 3 * 6 + 4)


def test_describe_and_raise_if_nonfinite():
    assert describe_nonfinite("X3test", 12, 17 * 48 + 5, (100, 48)) == (
        "X3test: 12 non-finite values (NaN or Inf), first at [17, 5]"
    )
    assert describe_nonfinite("X1test", 1, 0, (100, 48)).endswith(
        "1 non-finite value (NaN or Inf), first at [0, 0]"
    )
    raise_if_nonfinite("submission 'ok'", {"X1test": (0, -1)}, {"X1test": (100, 48)})
    with pytest.raises(InvalidInput) as caught:
        raise_if_nonfinite(
            "submission 'bad'",
            {"X1test": (0, -1), "X3test": (12, 821), "X6test": np.array([1, 47])},
            {"X1test": (100, 48), "X3test": (200, 48), "X6test": (100, 48)},
        )
    assert caught.value.what == "submission 'bad'"
    assert caught.value.problem == (
        "X3test: 12 non-finite values (NaN or Inf), first at [17, 5]; "
        "X6test: 1 non-finite value (NaN or Inf), first at [0, 47]"
    )


def _non_finite(submission):
    bad = {name: array.copy() for name, array in submission.items()}
    bad["X3test"][17, 5] = bad["X3test"][17, 6] = bad["X3test"][90, 0] = np.nan
    bad["X6test"][0, 47] = np.inf
    bad["X9test"][99, 0] = -np.inf
    return bad


NON_FINITE_MESSAGES = [
    "X3test: 3 non-finite values (NaN or Inf), first at [17, 5]",
    "X6test: 1 non-finite value (NaN or Inf), first at [0, 47]",
    "X9test: 1 non-finite value (NaN or Inf), first at [99, 0]",
]


def test_non_finite_values_are_counted_and_located_at_scoring(bundle, submission, tmp_path):
    truth_url, _, _ = bundle
    path = write_npz(_non_finite(submission), tmp_path / "nan.npz")
    with pytest.raises(InvalidInput) as caught:
        score_ctf(StoreLocation(truth_url), {"nan": StoreLocation(path)}, quiet=True)
    assert caught.value.what == "submission 'nan'"
    for fragment in NON_FINITE_MESSAGES:
        assert fragment in caught.value.problem


def test_cli_refuses_non_finite_with_exit_3(bundle, submission, tmp_path, capsys, dask_cluster):
    truth_url, _, _ = bundle
    path = write_npy_folder(_non_finite(submission), tmp_path / "nan-model")
    out = tmp_path / "result.json"
    code = cli.main(score_ctf_argv(truth_url, path, out, dask_cluster.address))
    captured = capsys.readouterr()
    assert code == 3 and "Traceback" not in captured.err and not out.exists()
    for fragment in NON_FINITE_MESSAGES:
        assert fragment in captured.err


# --- valid submissions: the same scores, memory bounded ----------------------------------------


def test_valid_variants_score_like_the_zarr_group(bundle, submission, tmp_path, dask_cluster):
    """Stored and compressed .npz, C and Fortran order, big-endian: the scores of the zarr group."""
    truth_url, _, _ = bundle
    fortran = {n: np.asfortranarray(a).astype(">f4") for n, a in submission.items()}
    np.savez_compressed(tmp_path / "compressed-fortran.npz", **fortran)
    sources = {
        "zarr": StoreLocation(write_zarr(submission, tmp_path / "g.zarr")),
        "npz": StoreLocation(write_npz(submission, tmp_path / "s.npz")),
        "npz-fortran": StoreLocation(write_npz(fortran, tmp_path / "fortran.npz")),
        "npz-compressed-fortran": StoreLocation(tmp_path / "compressed-fortran.npz"),
        "npy-fortran": StoreLocation(write_npy_folder(fortran, tmp_path / "npy")),
    }
    from distributed import Client

    with Client(dask_cluster.address):  # workers map the files and read the scratch stores
        results = score_ctf(StoreLocation(truth_url), sources, quiet=True)
    for result in results[1:]:
        assert result["raw_scores"] == results[0]["raw_scores"], result["name"]
    assert 0 < results[0]["avg_score"] < 100


def test_compressed_npz_scratch_store_is_removed_with_the_arrays(bundle, submission, tmp_path):
    _, manifest, _ = bundle
    path = tmp_path / "s.npz"
    np.savez_compressed(path, **submission)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    opened = open_submission(StoreLocation(path), manifest, scratch_dir=scratch)
    assert len(os.listdir(scratch)) == len(submission)
    np.testing.assert_array_equal(opened["X4test"].compute(), submission["X4test"])
    del opened
    gc.collect()
    assert os.listdir(scratch) == []


LARGE_SHAPE = (1400, 2048)  # nine float64 arrays: 206 MB


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """(manifest, {label: path}, sums) of one 206 MB submission as .npy folder, stored and
    compressed .npz, written array by array."""
    root = tmp_path_factory.mktemp("large")
    manifest = shapes_manifest(dict.fromkeys(cv.TEST_NAMES, LARGE_SHAPE))
    # Rows repeat a 7-value pattern (quick to deflate), offset by the row index and the array's.
    base = np.add.outer(np.arange(LARGE_SHAPE[0]) * 1e-3, np.arange(LARGE_SHAPE[1]) % 7)
    folder = root / "npy"
    folder.mkdir()
    sums = {}
    with (
        zipfile.ZipFile(root / "stored.npz", "w") as stored,
        zipfile.ZipFile(
            root / "compressed.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1
        ) as compressed,
    ):
        for index, name in enumerate(cv.TEST_NAMES):
            array = base + index
            sums[name] = float(array.sum())
            np.save(folder / f"{name}.npy", array)
            for archive in (stored, compressed):
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array)
    paths = {"npy": folder, "stored": root / "stored.npz", "compressed": root / "compressed.npz"}
    return manifest, paths, sums, base


@pytest.mark.parametrize(("label", "open_mib"), [("npy", 2), ("stored", 2), ("compressed", 24)])
def test_large_submission_is_never_copied_whole(label, open_mib, large, tmp_path):
    manifest, paths, sums, base = large
    tracemalloc.start()
    try:
        opened = open_submission(StoreLocation(paths[label]), manifest, scratch_dir=tmp_path)
        open_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        totals = da.compute(*(array.sum() for array in opened.values()), scheduler="synchronous")
        compute_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert open_peak < open_mib * 2**20, f"open_submission took {open_peak / 2**20:.1f} MiB"
    assert compute_peak < 48 * 2**20, f"reading took {compute_peak / 2**20:.1f} MiB of 206 MB"
    for index, (name, total) in enumerate(zip(opened, totals, strict=True)):
        assert total == pytest.approx(sums[name], rel=1e-12), name
        sample = opened[name][::97, 5::89].compute(scheduler="synchronous")
        np.testing.assert_array_equal(sample, base[::97, 5::89] + index, err_msg=name)


def test_relative_paths_are_resolved_for_workers(submission, bundle, tmp_path, monkeypatch):
    """Workers of another cluster do not share the caller's working directory."""
    _, manifest, _ = bundle
    write_npy_folder(submission, tmp_path / "npy")
    monkeypatch.chdir(tmp_path)
    opened = open_submission(StoreLocation("npy"), manifest)
    monkeypatch.chdir("/")
    np.testing.assert_array_equal(opened["X1test"].compute(), submission["X1test"])
