"""Submission intake: real files in every accepted format, refusals that name the culprit, and the
`seisctf score ctf` command's exit codes and outputs."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tracemalloc
import zipfile
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import noisy_copy, write_tiny_truth
from dask.array.core import normalize_chunks

from seisctf import cli, storage
from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.ctf import score_ctf
from seisctf.scoring.submission import open_submission

SECRET = "test-secret-submission"


# --- writers: one submission, every accepted format ------------------------------------------


def write_zarr(arrays: dict[str, np.ndarray], path: Path) -> Path:
    storage.write_arrays(
        {name: da.from_array(a) for name, a in arrays.items()},
        StoreLocation(path),
        {},
        quiet=True,
    )
    return path


def write_plain_zarr(arrays: dict[str, np.ndarray], path: Path) -> Path:
    """With zarr alone, as a participant would: zarr's own chunks, no consolidated metadata."""
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, array in arrays.items():
        group.create_array(name, data=array, chunks=(16, 16))
    return path


def zip_directory(directory: Path, archive: Path, top: str | None = None) -> Path:
    """Zip a folder's files with the folder at the zip root, or inside a `top` folder."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for file in sorted(directory.rglob("*")):
            if file.is_file():
                relative = file.relative_to(directory).as_posix()
                zipped.write(file, f"{top}/{relative}" if top else relative)
    return archive


def write_npz(arrays: dict[str, np.ndarray], path: Path) -> Path:
    np.savez(path, **arrays)
    return path


def write_npz_compressed(arrays: dict[str, np.ndarray], path: Path) -> Path:
    np.savez_compressed(path, **arrays)
    return path


def write_npy_folder(arrays: dict[str, np.ndarray], path: Path) -> Path:
    path.mkdir()
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", array)
    return path


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """(truth URL, manifest, truth arrays as numpy) of a tiny bundle."""
    return write_tiny_truth(tmp_path_factory.mktemp("bundle"), SECRET)


@pytest.fixture(scope="module")
def submission(bundle):
    """A noisy float32 prediction of every test array."""
    return noisy_copy(bundle[2], seed=7, level=0.3)


@pytest.fixture(scope="module")
def formats(bundle, submission, tmp_path_factory):
    """The same submission written in each accepted format: {label: path}."""
    root = tmp_path_factory.mktemp("formats")
    group = write_zarr(submission, root / "group.zarr")
    nested = root / "nested"
    nested.mkdir()
    write_zarr(submission, nested / "my-model.zarr")
    return {
        "zarr": group,
        "plain-zarr": write_plain_zarr(submission, root / "plain.zarr"),
        "zip-root": zip_directory(group, root / "root.zip"),
        "zip-folder": zip_directory(nested, root / "folder.zip"),
        "npz": write_npz(submission, root / "sub.npz"),
        "npy-folder": write_npy_folder(submission, root / "npy"),
        "npz-compressed": write_npz_compressed(submission, root / "compressed.npz"),
        "npy-fortran-big-endian": write_npy_folder(
            {name: np.asfortranarray(a).astype(">f4") for name, a in submission.items()},
            root / "npy-fortran",
        ),
    }


# --- every format gives the same arrays and the same scores ----------------------------------


def test_every_format_reads_the_same_arrays(bundle, submission, formats):
    _, manifest, _ = bundle
    for label, path in formats.items():
        opened = open_submission(StoreLocation(path), manifest)
        assert sorted(opened) == sorted(cv.TEST_NAMES), label
        for name, array in opened.items():
            # The submitted float dtype, in native byte order (kernels convert to float64).
            assert array.dtype == np.dtype(np.float32), (label, name)
            expected_chunks = normalize_chunks(cv.time_space_chunks(*array.shape), array.shape)
            assert array.chunks == expected_chunks, (label, name)
            np.testing.assert_array_equal(
                array.compute(), submission[name].astype(np.float64), err_msg=f"{label}:{name}"
            )


def test_every_format_scores_identically(bundle, submission, formats):
    truth_url, manifest, truth = bundle
    results = score_ctf(
        StoreLocation(truth_url),
        {label: StoreLocation(path) for label, path in formats.items()},
        quiet=True,
    )
    assert [r["name"] for r in results] == list(formats)
    reference = results[0]
    for result in results[1:]:
        assert result["scores"] == reference["scores"], result["name"]
        assert result["raw_scores"] == reference["raw_scores"], result["name"]
        assert result["avg_score"] == reference["avg_score"], result["name"]
        assert result["truth_sha256_verified"] is True
    # An independent check of two scores: SVD 2-norm of the first k_short rows (E1) and of the
    # whole reconstruction (E3).
    t1, s1 = truth["X1test"].astype(np.float64), submission["X1test"].astype(np.float64)
    k = manifest.k_short
    e1 = 100 * (1 - np.linalg.norm(t1[:k] - s1[:k], 2) / np.linalg.norm(t1[:k], 2))
    t2, s2 = truth["X2test"].astype(np.float64), submission["X2test"].astype(np.float64)
    e3 = 100 * (1 - np.linalg.norm(t2 - s2, 2) / np.linalg.norm(t2, 2))
    assert reference["scores"]["E1"] == pytest.approx(e1, rel=1e-9)
    assert reference["scores"]["E3"] == pytest.approx(e3, rel=1e-9)
    assert 0 < reference["avg_score"] < 100


# --- refusals --------------------------------------------------------------------------------


def _missing(submission, root):
    return write_zarr({n: a for n, a in submission.items() if n != "X7test"}, root / "s.zarr")


def _extra(submission, root):
    return write_npy_folder({**submission, "X10test": submission["X1test"]}, root / "npy")


def _wrong_shape(submission, root):
    return write_npz({**submission, "X5test": submission["X5test"][:-1]}, root / "s.npz")


def _transposed(submission, root):
    return write_zarr({**submission, "X8test": submission["X8test"].T.copy()}, root / "s.zarr")


def _integer(submission, root):
    return write_zarr(
        {**submission, "X2test": submission["X2test"].astype(np.int32)}, root / "s.zarr"
    )


def _complex(submission, root):
    return write_npz(
        {**submission, "X6test": submission["X6test"].astype(np.complex64)}, root / "s.npz"
    )


def _string(submission, root):
    path = write_plain_zarr(
        {n: a for n, a in submission.items() if n != "X9test"}, root / "plain.zarr"
    )
    zarr.open_group(str(path), mode="r+").create_array(
        "X9test", shape=submission["X9test"].shape, dtype=str
    )
    return path


def _object_array(array: np.ndarray) -> np.ndarray:
    objects = np.empty(array.shape, dtype=object)
    objects[...] = 1.0
    return objects


def _pickled_npy(submission, root):
    path = write_npy_folder(submission, root / "npy")
    np.save(path / "X4test.npy", _object_array(submission["X4test"]), allow_pickle=True)
    return path


def _object_npz(submission, root):
    path = root / "s.npz"
    np.savez(path, **{**submission, "X4test": _object_array(submission["X4test"])})
    return path


def _nonexistent(submission, root):
    return root / "no-such-submission.zarr"


def _not_a_zip(submission, root):
    path = root / "submission.zip"
    path.write_text("this is not a zip archive\n")
    return path


def _zip_without_zarr(submission, root):
    return zip_directory(write_npy_folder(submission, root / "npy"), root / "npy.zip")


def _text_file(submission, root):
    path = root / "submission.txt"
    path.write_text("X1test = [1, 2, 3]\n")
    return path


def _empty_folder(submission, root):
    path = root / "empty"
    path.mkdir()
    return path


REFUSALS = {
    # case: (writer, fragments the message must contain; "{path}" is the submission's path)
    "missing array": (_missing, ["{path}", "missing", "X7test"]),
    "extra array": (_extra, ["{path}", "unexpected", "X10test"]),
    "wrong shape": (_wrong_shape, ["{path}", "X5test", "(99, 48)", "(100, 48)"]),
    "transposed": (_transposed, ["X8test", "(48, 100)", "expected (100, 48)"]),
    "integer dtype": (_integer, ["{path}", "X2test", "int32", "floating point"]),
    "complex dtype": (_complex, ["X6test", "complex64", "floating point"]),
    "string dtype": (_string, ["X9test", "floating point"]),
    "pickled npy": (_pickled_npy, ["X4test.npy", "plain .npy"]),
    "object npz": (_object_npz, ["{path}", "X4test", "object arrays"]),
    "nonexistent path": (_nonexistent, ["{path}", "not found"]),
    "not a zip": (_not_a_zip, ["{path}", "not a readable zip"]),
    "zip without zarr group": (_zip_without_zarr, ["{path}", "no zarr group"]),
    "text file": (_text_file, ["{path}", "no zarr group"]),
    "empty folder": (_empty_folder, ["{path}", "no zarr group"]),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_bad_submissions_are_refused_naming_the_culprit(case, bundle, submission, tmp_path):
    _, manifest, _ = bundle
    writer, fragments = REFUSALS[case]
    path = writer(submission, tmp_path)
    with pytest.raises(InvalidInput) as caught:
        open_submission(StoreLocation(path), manifest)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment.format(path=path) in message, (case, message)


def test_object_array_in_npz_is_named(bundle, submission, tmp_path):
    _, manifest, _ = bundle
    with pytest.raises(InvalidInput, match="X4test"):
        open_submission(StoreLocation(_object_npz(submission, tmp_path)), manifest)


def test_npy_file_named_npz_is_refused(bundle, submission, tmp_path):
    _, manifest, _ = bundle
    path = tmp_path / "submission.npz"
    with path.open("wb") as file:
        np.save(file, submission["X1test"])
    with pytest.raises(InvalidInput, match="submission.npz"):
        open_submission(StoreLocation(path), manifest)


def test_npz_members_are_checked_before_they_are_decompressed(bundle, submission, tmp_path):
    _, manifest, _ = bundle
    path = tmp_path / "bomb.npz"
    junk_bytes = 128 * 2**20
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, array in submission.items():
            with zipped.open(f"{name}.npy", "w") as member:
                np.lib.format.write_array(member, array)
        with zipped.open("junk.npy", "w", force_zip64=True) as member:
            header = {"descr": "<f8", "fortran_order": False, "shape": (junk_bytes // 8,)}
            np.lib.format.write_array_header_1_0(member, header)
            zeros = bytes(2**20)
            for _ in range(junk_bytes // len(zeros)):
                member.write(zeros)
    assert path.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput, match="junk"):
            open_submission(StoreLocation(path), manifest)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_bytes < 16 * 2**20, f"peak {peak_bytes / 2**20:.0f} MiB to refuse a tiny file"


@pytest.mark.parametrize(
    ("label", "name", "value"),
    [
        ("npy-folder", "X3test", np.nan),
        ("zip-folder", "X6test", np.inf),
        ("zarr", "X9test", -np.inf),
    ],
)
def test_non_finite_values_are_refused_at_scoring(label, name, value, bundle, submission, tmp_path):
    truth_url, manifest, _ = bundle
    bad = {n: a.copy() for n, a in submission.items()}
    bad[name][17, 5] = value
    if label == "npy-folder":
        path = write_npy_folder(bad, tmp_path / "npy")
    elif label == "zarr":
        path = write_zarr(bad, tmp_path / "s.zarr")
    else:
        (tmp_path / "folder").mkdir()
        write_zarr(bad, tmp_path / "folder" / "s.zarr")
        path = zip_directory(tmp_path / "folder", tmp_path / "s.zip")
    open_submission(
        StoreLocation(path), manifest
    )  # finiteness is checked lazily, in the scoring pass
    with pytest.raises(InvalidInput) as caught:
        score_ctf(StoreLocation(truth_url), {"bad": StoreLocation(path)}, quiet=True)
    message = str(caught.value)
    assert name in message and "non-finite" in message and "'bad'" in message, message
    others = [n for n in cv.TEST_NAMES if n != name]
    assert not any(f"'{other}'" in message for other in others), message


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_huge_finite_values_score_minus_100(bundle, submission):
    truth_url, _, _ = bundle
    huge = {name: array.astype(np.float64) * 1e160 for name, array in submission.items()}
    result = score_ctf(StoreLocation(truth_url), {"huge": huge}, quiet=True)[0]
    assert result["scores"] == {name: -100.0 for name in cv.SCORE_NAMES}


# --- the command line --------------------------------------------------------------------------


@pytest.fixture
def no_scheduler(monkeypatch):
    """`seisctf` with no --scheduler and no $SEISCTF_SCHEDULER: an embedded LocalCluster."""
    monkeypatch.delenv("SEISCTF_SCHEDULER", raising=False)


def test_cli_refuses_non_finite_submission_with_exit_3(
    bundle, submission, tmp_path, capsys, no_scheduler
):
    truth_url, _, _ = bundle
    bad = {n: a.copy() for n, a in submission.items()}
    bad["X3test"][0, 0] = np.nan
    path = write_npz(bad, tmp_path / "nan-model.npz")
    code = cli.main(
        [
            "score",
            "ctf",
            "--truth",
            truth_url,
            "--submission",
            str(path),
            "--quiet",
            "--json",
            str(tmp_path / "out.json"),
            "--db",
            str(tmp_path / "lb.sqlite"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 3
    assert "X3test" in captured.err and "non-finite" in captured.err
    assert captured.err.startswith("seisctf: invalid input:")
    assert "Traceback" not in captured.err + captured.out
    assert captured.out == ""
    # Nothing partial is written for a refused submission.
    assert not (tmp_path / "out.json").exists()
    assert not (tmp_path / "lb.sqlite").exists()


def test_cli_refuses_missing_array_with_exit_3(bundle, submission, tmp_path, capsys, no_scheduler):
    truth_url, _, _ = bundle
    path = _missing(submission, tmp_path)
    code = cli.main(["score", "ctf", "--truth", truth_url, "--submission", str(path), "--quiet"])
    captured = capsys.readouterr()
    assert code == 3
    assert "X7test" in captured.err and str(path) in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert "Traceback" not in captured.err


RESULT_KEYS = {
    "name",
    "dataset",
    "convention",
    "scores",
    "avg_score",
    "raw_scores",
    "truth_sha256_verified",
}


def test_cli_scores_valid_submission_writes_json_and_db(
    bundle, formats, tmp_path, capsys, no_scheduler
):
    truth_url, _, _ = bundle
    out, db = tmp_path / "result.json", tmp_path / "board" / "lb.sqlite"
    code = cli.main(
        [
            "score",
            "ctf",
            "--truth",
            truth_url,
            "--submission",
            str(formats["zip-root"]),
            "--quiet",
            "--json",
            str(out),
            "--db",
            str(db),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == ""  # --json FILE --quiet: the JSON goes to the file only
    printed = json.loads(out.read_text())
    assert RESULT_KEYS <= set(printed)
    assert printed["name"] == "root"
    assert printed["convention"] == "reference"
    assert printed["dataset"] == "test"
    assert printed["truth_sha256_verified"] is True
    assert set(printed["scores"]) == set(cv.SCORE_NAMES)
    assert printed["avg_score"] == pytest.approx(np.mean(list(printed["scores"].values())))
    library = score_ctf(
        StoreLocation(truth_url), {"root": StoreLocation(formats["npz"])}, quiet=True
    )[0]
    assert printed == json.loads(json.dumps(library))
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = connection.execute("SELECT model, avg_score, dataset FROM submissions").fetchall()
    assert rows == [("root", printed["avg_score"], "test")]
