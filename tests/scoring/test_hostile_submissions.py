"""The referee never lets one submission hurt another: every dtype numpy can write, in every
container that holds it, is scored (real floating point, any precision and byte order, scored
as its float64 values: compared with the contract's formulas in plain numpy) or refused with exit
3 naming the submission, the array and what was expected; a longdouble value float64 cannot hold
is refused naming the first; a batch with hostile submissions scores, writes and records the
others and reports each refused one on a line of its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from conftest import shapes_manifest, write_tiny_truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from submission_writers import write_npy_folder, write_npz, write_zarr, zip_files
from test_ctf import numpy_scores

from seisctf import cli, storage
from seisctf import conventions as cv
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import leaderboard, referee, release
from seisctf.scoring.submission import open_submission
from seisctf.scoring.submission_checks import DEFAULT_LIMITS, check_array

SECRET = "test-secret-dtypes"
LONGDOUBLE_IS_WIDER = np.finfo(np.longdouble).max > np.finfo(np.float64).max
# Submitted dtypes by label (labels are file names): scored ones, refused ones.
ACCEPTED = {
    "float16": "<f2", "float16_be": ">f2", "float32": "<f4", "float32_be": ">f4",
    "float64": "<f8", "float64_be": ">f8",
    "longdouble": np.dtype(np.longdouble).newbyteorder("<"),
    "longdouble_be": np.dtype(np.longdouble).newbyteorder(">"),
}  # fmt: skip
REFUSED = {
    "int8": "|i1", "int64": "<i8", "int32_be": ">i4", "uint16": "<u2", "uint64": "<u8",
    "bool": "|b1", "complex64": "<c8", "complex128": "<c16", "complex128_be": ">c16",
    "clongdouble": np.dtype(np.clongdouble), "unicode": "<U5", "bytes": "|S5",
    "datetime": "<M8[s]", "timedelta": "<m8[ms]", "object": "|O",
    "record": [("a", "<f4"), ("b", "<f4")], "raw": "|V8",
}  # fmt: skip
HOSTILE_ARRAY = "X4test"  # the one array of a refused submission that has the refused dtype
# Containers: how a submission is written, and which dtypes zarr (so a zipped group) cannot hold.
ZARR_CANNOT = {"longdouble", "longdouble_be", "clongdouble", "object"}


def _npz_compressed(arrays: dict, path: Path) -> Path:
    np.savez_compressed(path, **arrays)
    return path


def _zipped_zarr(arrays: dict, path: Path) -> Path:
    folder = write_zarr(arrays, path.with_suffix(".zarr"))
    zipped = zip_files(folder, path)
    shutil.rmtree(folder)
    return zipped


CONTAINERS = {
    "npy": (write_npy_folder, ""),
    "npz": (write_npz, ".npz"),
    "npzc": (_npz_compressed, ".npz"),
    "zarr": (write_zarr, ".zarr"),
    "zip": (_zipped_zarr, ".zip"),
}
pytestmark = pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """(truth URL, manifest, truth as numpy, float64 predictions: truth + noise)."""
    truth_url, manifest, truth = write_tiny_truth(tmp_path_factory.mktemp("bundle"), SECRET)
    rng = np.random.default_rng(7)
    predictions = {
        name: array.astype(np.float64) + 0.25 * rng.standard_normal(array.shape)
        for name, array in truth.items()
    }
    return truth_url, manifest, truth, predictions


def _write(container: str, arrays: dict, root: Path, name: str) -> Path:
    writer, suffix = CONTAINERS[container]
    return writer(arrays, root / f"{name}{suffix}")


def _cast(values: np.ndarray, dtype) -> np.ndarray:
    """`values` in `dtype` (zeros of it where numpy has no cast from float64)."""
    try:
        return values.astype(dtype)
    except (TypeError, ValueError):
        return np.zeros(values.shape, dtype)


def _score_ctf(truth_url: str, sources: dict, root: Path, scheduler: str, capsys) -> tuple:
    """`seisctf score ctf` of a batch (name → path) with --json and --db: (exit code, stderr
    lines, JSON written or None, leaderboard models)."""
    out, db = root / "results.json", root / "board.sqlite"
    names = [part for name in sources for part in ("--name", name)]
    argv = ["score", "ctf", "--truth", truth_url, "--quiet", "--json", str(out), "--db", str(db),
            "--scheduler", scheduler, "--submission", *map(str, sources.values()),
            *names]  # fmt: skip
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    written = json.loads(out.read_text()) if out.exists() else None
    models = sorted(entry["model"] for entry in leaderboard.entries(db)) if db.exists() else []
    return code, captured.err.splitlines(), written, models


def _assert_numpy_scores(result: dict, truth: dict, values: dict, manifest: CtfManifest) -> None:
    expected = numpy_scores(truth, values, manifest, "reference")
    for score in cv.SCORE_NAMES:
        tolerance = 1e-9 * max(1.0, abs(expected[score]))
        assert abs(result["scores"][score] - expected[score]) <= tolerance, (result["name"], score)


# --- the dtype rule -------------------------------------------------------------------------------

ANY_DTYPE = st.one_of(
    hnp.floating_dtypes(endianness="?", sizes=(16, 32, 64, 8 * np.dtype(np.longdouble).itemsize)),
    hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.complex_number_dtypes(endianness="?"),
    hnp.boolean_dtypes(),
    hnp.byte_string_dtypes(),
    hnp.unicode_string_dtypes(),
    hnp.datetime64_dtypes(),
    hnp.timedelta64_dtypes(),
    hnp.array_dtypes(),
    hnp.nested_dtypes(),
    st.just(np.dtype(object)),
    st.just(np.dtype("V8")),
)


@settings(max_examples=300, deadline=None)
@given(ANY_DTYPE)
def test_only_real_floating_point_dtypes_are_accepted(dtype):
    expected = {"X4test": (3, 2)}
    if dtype.kind == "f":
        assert check_array("sub:X4test", "X4test", (3, 2), dtype, expected, DEFAULT_LIMITS) == (
            6 * dtype.itemsize
        )
        return
    with pytest.raises(InvalidInput) as caught:
        check_array("sub:X4test", "X4test", (3, 2), dtype, expected, DEFAULT_LIMITS)
    assert caught.value.what == "sub:X4test"
    assert "expected floating point" in caught.value.problem
    assert len(caught.value.problem) < 300  # a record dtype of many fields is cut short


# --- every dtype in every container, through the command line -------------------------------------


def test_every_float_dtype_in_every_container_scores_its_float64_values(
    bundle, tmp_path, capsys, dask_cluster
):
    truth_url, manifest, truth, predictions = bundle
    sources, values = {}, {}
    for label, dtype in ACCEPTED.items():
        submitted = {name: array.astype(dtype) for name, array in predictions.items()}
        for container in CONTAINERS:
            if container in ("zarr", "zip") and label in ZARR_CANNOT:
                continue
            name = f"{label}-{container}"
            sources[name] = _write(container, submitted, tmp_path, name)
            values[name] = {n: a.astype(np.float64) for n, a in submitted.items()}
    code, err, written, models = _score_ctf(
        truth_url, sources, tmp_path, dask_cluster.address, capsys
    )
    assert code == 0, err
    assert [result["name"] for result in written] == list(sources)
    assert models == sorted(sources)
    by_name = {result["name"]: result for result in written}
    for name, result in by_name.items():
        _assert_numpy_scores(result, truth, values[name], manifest)
        label = name.split("-")[0]  # every container of a dtype: the same bytes of scores
        assert result["raw_scores"] == by_name[f"{label}-npy"]["raw_scores"], name
    # float16 values differ from the float64 predictions: its scores are its own values' scores
    assert by_name["float16-npz"]["raw_scores"] != by_name["float64-npz"]["raw_scores"]
    assert by_name["longdouble-npz"]["raw_scores"] == by_name["float64-npz"]["raw_scores"]


def test_every_other_dtype_in_every_container_is_refused_naming_the_array(
    bundle, tmp_path, capsys, dask_cluster
):
    truth_url, _, _, predictions = bundle
    sources = {}
    for label, dtype in REFUSED.items():
        submitted = {name: array.astype(np.float32) for name, array in predictions.items()}
        submitted[HOSTILE_ARRAY] = _cast(predictions[HOSTILE_ARRAY], dtype)
        for container in CONTAINERS:
            if container in ("zarr", "zip") and label in ZARR_CANNOT:
                with pytest.raises(ValueError):  # zarr has no such data type
                    write_zarr(submitted, tmp_path / "cannot.zarr")
                shutil.rmtree(tmp_path / "cannot.zarr", ignore_errors=True)
                continue
            name = f"{label}-{container}"
            sources[name] = _write(container, submitted, tmp_path, name)
    code, err, written, models = _score_ctf(
        truth_url, sources, tmp_path, dask_cluster.address, capsys
    )
    assert code == 3
    assert written is None and models == []
    assert (
        err[0] == f"seisctf: invalid input: submissions: {len(sources)} of {len(sources)} refused:"
    )
    assert len(err) == 1 + len(sources)
    for line, (name, path) in zip(err[1:], sources.items(), strict=True):
        assert line.startswith(f"  {name}: {path}"), line
        assert HOSTILE_ARRAY in line and "expected floating point" in line, line
        assert ("object arrays" if name.startswith("object") else "holds") in line, line


# --- longdouble values float64 cannot hold -----------------------------------------------------

FLOAT64_MAX = np.finfo(np.float64).max
needs_wide_longdouble = pytest.mark.skipif(
    not LONGDOUBLE_IS_WIDER, reason="longdouble is float64 on this platform"
)


@needs_wide_longdouble
@pytest.mark.parametrize("container", ["npy", "npz", "npzc"])
def test_longdouble_beyond_float64_is_refused_naming_the_first(
    container, bundle, tmp_path, capsys, dask_cluster
):
    truth_url, _, _, predictions = bundle
    submitted = {name: array.astype(np.longdouble) for name, array in predictions.items()}
    submitted["X6test"][40, 2] = -np.longdouble("1e4000")
    submitted["X6test"][17, 5] = np.longdouble("1e400")
    path = _write(container, submitted, tmp_path, "huge")
    code, err, written, models = _score_ctf(
        truth_url, {"huge": path}, tmp_path, dask_cluster.address, capsys
    )
    assert (code, written, models) == (3, None, [])
    assert err == [
        f"seisctf: invalid input: {path}:X6test: 2 values of dtype float128 that float64 cannot "
        f"hold (NaN, Inf, or beyond ±{FLOAT64_MAX:.4g}), first at [17, 5]; the referee scores "
        "in float64"
    ]


LONGDOUBLE_HALF_ULP_ABOVE_MAX = np.longdouble(2.0) ** 1024 - np.longdouble(2.0) ** 970


@needs_wide_longdouble
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.floats(-2.0, 2.0, allow_nan=False),
            st.sampled_from([0, 1, 900, 1023, 1024, 2000, -1100]),
            st.sampled_from([0.0, 1.0, -1.0, np.nan, np.inf]),
        ),
        min_size=24,
        max_size=24,
    )
)
def test_longdouble_values_are_refused_exactly_when_float64_cannot_hold_them(cells):
    """A value is refused when it is NaN, infinite, or rounds beyond float64's range: at or
    above 2**1024 - 2**970 in magnitude (the midpoint between float64's largest value and the
    next power of two), an independent statement of IEEE rounding to nearest."""
    values = np.array(
        [
            np.longdouble(mantissa) * np.longdouble(2.0) ** exponent if special == 0.0 else special
            for mantissa, exponent, special in cells
        ],
        dtype=np.longdouble,
    ).reshape(6, 4)
    bad = ~np.isfinite(values) | (np.abs(values) >= LONGDOUBLE_HALF_ULP_ABOVE_MAX)
    manifest = shapes_manifest({"X1test": (6, 4)})
    if not bad.any():
        opened = open_submission({"X1test": values}, manifest)["X1test"]
        assert opened.dtype == np.float64
        np.testing.assert_array_equal(opened.compute(), values.astype(np.float64))
        return
    with pytest.raises(InvalidInput) as caught:
        open_submission({"X1test": values}, manifest)
    first = np.unravel_index(np.flatnonzero(bad)[0], bad.shape)
    assert caught.value.what == "submission:X1test"
    assert caught.value.problem.startswith(f"{np.count_nonzero(bad)} value")
    assert f"first at [{first[0]}, {first[1]}]" in caught.value.problem


@needs_wide_longdouble
def test_longdouble_just_below_the_rounding_midpoint_is_float64_max():
    manifest = shapes_manifest({"X1test": (1, 2)})
    below = np.nextafter(LONGDOUBLE_HALF_ULP_ABOVE_MAX, np.longdouble(0))
    values = np.array([[below, -below]], dtype=np.longdouble)
    opened = open_submission({"X1test": values}, manifest)["X1test"].compute()
    np.testing.assert_array_equal(opened, [[FLOAT64_MAX, -FLOAT64_MAX]])
    with pytest.raises(InvalidInput, match=r"1 value .* first at \[0, 1\]"):
        values[0, 1] = -LONGDOUBLE_HALF_ULP_ABOVE_MAX
        open_submission({"X1test": values}, manifest)


# --- batches -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch(bundle, tmp_path_factory):
    """{name: path}: `honest` (float32 .npz), `huge` (a float128 .npy folder with a value beyond
    float64's range: refused when opened), `nan` (a float32 zarr group with a NaN: refused only
    by the scoring pass, which then scores the rest one by one) and `second` (float64 .npy)."""
    root = tmp_path_factory.mktemp("batch")
    _, _, _, predictions = bundle
    honest = {name: array.astype(np.float32) for name, array in predictions.items()}
    huge = {name: array.astype(np.longdouble) for name, array in predictions.items()}
    huge["X2test"][3, 9] = np.longdouble("1e400") if LONGDOUBLE_IS_WIDER else np.nan
    nan = {name: array.copy() for name, array in honest.items()}
    nan["X5test"][4, 7] = np.nan
    return {
        "honest": write_npz(honest, root / "honest.npz"),
        "huge": write_npy_folder(huge, root / "huge"),
        "nan": write_zarr(nan, root / "nan.zarr"),
        "second": write_npy_folder(predictions, root / "second"),
    }


def test_a_batch_scores_writes_and_records_the_valid_and_reports_each_refused(
    bundle, batch, tmp_path, capsys, dask_cluster
):
    truth_url, manifest, truth, predictions = bundle
    code, err, written, models = _score_ctf(
        truth_url, batch, tmp_path, dask_cluster.address, capsys
    )
    assert code == 3
    assert [result["name"] for result in written] == ["honest", "second"]
    assert models == ["honest", "second"]
    honest = {name: array.astype(np.float32) for name, array in predictions.items()}
    _assert_numpy_scores(written[0], truth, honest, manifest)
    _assert_numpy_scores(written[1], truth, predictions, manifest)
    assert err[0] == (
        "seisctf: invalid input: submissions: 2 of 4 refused; the other 2 scored, their "
        "results written:"
    )
    assert err[1].startswith(f"  huge: {batch['huge']}:X2test: 1 value of dtype ")
    assert err[1].endswith("first at [3, 9]; the referee scores in float64")
    assert err[2] == (
        "  nan: submission 'nan': X5test: 1 non-finite value (NaN or Inf), first at [4, 7]"
    )
    assert len(err) == 3
    # Alone or in a batch with hostile submissions, the same scores.
    (tmp_path / "alone").mkdir()
    code, _, alone, _ = _score_ctf(
        truth_url, {"honest": batch["honest"]}, tmp_path / "alone", dask_cluster.address, capsys
    )
    assert code == 0 and alone["raw_scores"] == written[0]["raw_scores"]


def test_one_valid_submission_of_a_batch_is_written_as_a_list(
    bundle, batch, tmp_path, capsys, dask_cluster
):
    truth_url = bundle[0]
    sources = {name: batch[name] for name in ("huge", "honest")}
    code, err, written, models = _score_ctf(
        truth_url, sources, tmp_path, dask_cluster.address, capsys
    )
    assert (code, models, len(err)) == (3, ["honest"], 2)
    assert isinstance(written, list) and [r["name"] for r in written] == ["honest"]


def test_refused_submissions_give_their_release_slots_back(bundle, batch, tmp_path):
    truth_url = bundle[0]
    asked = release.Release("team-h", str(tmp_path / "quota.sqlite"), quota=4)
    judge = referee.Referee(release=asked, db=str(tmp_path / "board.sqlite"))
    written = []
    sources = {name: StoreLocation(path) for name, path in batch.items() if name != "second"}
    with pytest.raises(InvalidInput) as caught:
        referee.run_ctf(StoreLocation(truth_url), sources, judge, written.append, quiet=True)
    assert caught.value.what == "submissions"
    assert [[r["name"] for r in results] for results in written] == [["honest"]]
    assert "raw_scores" not in written[0][0]  # released: the participant's view
    assert release.used(asked) == 1
    assert [e["model"] for e in leaderboard.entries(judge.db)] == ["honest"]
    with pytest.raises(InvalidInput, match="X5test: 1 non-finite value"):  # a lone refusal
        referee.run_ctf(
            StoreLocation(truth_url), {"nan": StoreLocation(batch["nan"])}, judge, quiet=True
        )
    assert release.used(asked) == 1


def test_a_truth_that_fails_its_commitment_refuses_the_whole_batch(
    bundle, batch, tmp_path, capsys, dask_cluster
):
    """A pass failed by a submission is retried one by one; the truth is checked alone first,
    so an altered truth is reported once, as the batch's error, and nothing is written."""
    truth_url, _, truth, _ = bundle
    altered = {name: array.copy() for name, array in truth.items()}
    altered["X3test"][5, 5] += 1.0
    altered_url = str(tmp_path / "altered.zarr")
    storage.write_arrays(
        {name: da.from_array(array) for name, array in altered.items()},
        StoreLocation(altered_url),
        storage.read_attrs(StoreLocation(truth_url)),
        quiet=True,
    )
    sources = {name: batch[name] for name in ("honest", "nan", "second")}
    code, err, written, models = _score_ctf(
        altered_url, sources, tmp_path, dask_cluster.address, capsys
    )
    assert (code, written, models) == (3, None, [])
    assert len(err) == 1 and "X3test: does not hash to the published commitment" in err[0]


def test_a_validation_batch_scores_the_valid_and_reports_the_refused(
    bundle, tmp_path, capsys, dask_cluster
):
    public_url = str(Path(bundle[0]).with_name("public.zarr"))
    public = CtfManifest.from_attrs(storage.read_attrs(StoreLocation(public_url)), public_url)
    manifest = public.validation_manifest(public_url)
    names = [pair.test for pair in manifest.pairs]
    targets = {
        name: storage.read_array(StoreLocation(public_url), name).compute() for name in names
    }
    predictions = {name: (array + 0.1).astype(np.float32) for name, array in targets.items()}
    honest = write_npz(predictions, tmp_path / "honest.npz")
    integers = write_npz({n: a.astype(np.int16) for n, a in targets.items()}, tmp_path / "int.npz")
    out = tmp_path / "validation.json"
    argv = ["score", "ctf", "--validation", "--public", public_url, "--quiet", "--json", str(out),
            "--scheduler", dask_cluster.address,
            "--submission", str(honest), str(integers)]  # fmt: skip
    code = cli.main(argv)
    err = capsys.readouterr().err.splitlines()
    assert code == 3 and len(err) == 2, err
    assert err[1].startswith(f"  int: {integers}:X1val: dtype int16 holds signed integers"), err
    (result,) = json.loads(out.read_text())
    assert result["name"] == "honest" and result["validation"] is True
    _assert_numpy_scores(result, targets, predictions, manifest)
