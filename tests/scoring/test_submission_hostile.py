"""Hostile submissions: every malformed file is made here by code (no committed binaries), refused
with InvalidInput naming the culprit, from the library and from `seisctf score ctf` (exit 3, one
line, no traceback, nothing written). Valid large submissions are read without being copied whole
into memory; non-finite values are located chunk-wise, independently of the chunking."""

from __future__ import annotations

import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import noisy_copy, write_tiny_truth
from submission_writers import (
    add_symlink_member,
    npy_bytes,
    score_ctf_argv,
    write_npy_folder,
    write_npz,
    write_raw_zip,
    write_zarr,
    zip_files,
)

from seisctf import cli
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.submission import DEFAULT_LIMITS, SubmissionLimits, open_submission

SECRET = "test-secret-hostile"


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """(truth URL, manifest, truth arrays as numpy) of a tiny bundle."""
    return write_tiny_truth(tmp_path_factory.mktemp("bundle"), SECRET)


@pytest.fixture(scope="module")
def submission(bundle):
    return noisy_copy(bundle[2], seed=11, level=0.2)


# --- writers ------------------------------------------------------------------------------------


def _with(submission, name, array):
    return {**submission, name: array}


def _without(submission, name):
    return {n: a for n, a in submission.items() if n != name}


def _objects(shape):
    objects = np.empty(shape, dtype=object)
    objects[...] = 1.5
    return objects


# --- the malformed submissions: (writer, fragments of the message) --------------------------------


def npz_bomb(s, root):
    members = [(f"{n}.npy", npy_bytes(a)) for n, a in s.items() if n != "X1test"]
    return write_raw_zip(root / "bomb.npz", members, "X1test.npy")


def zarr_zip_bomb(s, root):
    group = write_zarr(s, root / "g.zarr")
    members = [
        (f.relative_to(group).as_posix(), f.read_bytes())
        for f in sorted(group.rglob("*"))
        if f.is_file()
    ]
    return write_raw_zip(root / "bomb.zip", members, "X1test/c/9/9")


def zip_slip(s, root):
    return write_npz(_without(s, "X2test"), root / "s.npz", {"../evil.npy": npy_bytes(s["X2test"])})


def absolute_member(s, root):
    return zip_files(
        write_zarr(s, root / "g.zarr"), root / "s.zip", {"/tmp/x.npy": npy_bytes(s["X1test"])}
    )


def symlink_member(s, root):
    return add_symlink_member(write_npz(_without(s, "X5test"), root / "s.npz"), "X5test.npy")


def symlinked_npy(s, root):
    path = write_npy_folder(_without(s, "X3test"), root / "npy")
    (root / "elsewhere.npy").write_bytes(npy_bytes(s["X3test"]))
    (path / "X3test.npy").symlink_to(root / "elsewhere.npy")
    return path


def symlink_out_of_folder(s, root):
    path = write_zarr(s, root / "g.zarr")
    (path / "notes").symlink_to("/etc/passwd")
    return path


def pickled_npy(s, root):
    path = write_npy_folder(_without(s, "X4test"), root / "npy")
    np.save(path / "X4test.npy", _objects(s["X4test"].shape), allow_pickle=True)
    return path


def object_npz(s, root):
    return write_npz(_with(s, "X4test", _objects(s["X4test"].shape)), root / "s.npz")


def integer_npy(s, root):
    return write_npy_folder(_with(s, "X2test", s["X2test"].astype(np.int64)), root / "npy")


def boolean_npz(s, root):
    return write_npz(_with(s, "X7test", s["X7test"] > 0), root / "s.npz")


def complex_zarr(s, root):
    return write_zarr(_with(s, "X6test", s["X6test"].astype(np.complex128)), root / "g.zarr")


def string_npz(s, root):
    return write_npz(_with(s, "X9test", s["X9test"].astype("U5")), root / "s.npz")


def structured_npy(s, root):
    pairs = np.zeros(s["X8test"].shape, dtype=[("a", "<f4"), ("b", "<f4")])
    return write_npy_folder(_with(s, "X8test", pairs), root / "npy")


def wrong_shape(s, root):
    return write_npz(_with(s, "X5test", s["X5test"][:-1]), root / "s.npz")


def transposed(s, root):
    return write_npy_folder(_with(s, "X8test", s["X8test"].T.copy()), root / "npy")


def missing(s, root):
    return write_npz(_without(s, "X7test"), root / "s.npz")


def extra(s, root):
    group = write_zarr({**s, "X10test": s["X1test"]}, root / "g.zarr")
    return zip_files(group, root / "s.zip")


def nested_group(s, root):
    path = write_zarr(_without(s, "X1test"), root / "g.zarr")
    write_zarr({"X1test": s["X1test"]}, path / "model")
    return path


def huge_chunks(s, root):
    path = write_zarr(_without(s, "X2test"), root / "g.zarr")
    zarr.open_group(str(path), mode="r+").create_array(
        "X2test", shape=s["X2test"].shape, dtype="f8", chunks=(2**16, 2**12)
    )
    return path


def text_file(s, root):
    path = root / "submission.txt"
    path.write_text("X1test = [1, 2, 3]\n")
    return path


def empty_folder(s, root):
    (root / "empty").mkdir()
    return root / "empty"


def truncated_npy(s, root):
    path = write_npy_folder(s, root / "npy")
    data = (path / "X5test.npy").read_bytes()
    (path / "X5test.npy").write_bytes(data[: len(data) // 2])
    return path


def not_a_zip(s, root):
    path = root / "submission.zip"
    path.write_bytes(b"PK\x03\x04 but nothing else of a zip" * 10)
    return path


def absurd_shape(s, root):
    path = write_npy_folder(_without(s, "X1test"), root / "npy")
    with (path / "X1test.npy").open("wb") as file:
        np.lib.format.write_array_header_1_0(
            file, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 10**12)}
        )
        file.write(bytes(64))
    return path


def too_many_members(s, root):
    return write_npz(s, root / "s.npz", {f"pad{i}.npy": b"" for i in range(1000)})


def duplicate_member(s, root):
    path = write_npz(s, root / "s.npz")
    with pytest.warns(UserWarning), zipfile.ZipFile(path, "a") as zipped:
        zipped.writestr("X6test.npy", npy_bytes(s["X6test"] * 0))
    return path


def bzip2_npz(s, root):
    """bzip2 can inflate one 4 KiB read to gigabytes whatever the member declares: refused."""
    path = root / "s.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_BZIP2) as zipped:
        for name, array in s.items():
            zipped.writestr(f"{name}.npy", npy_bytes(array))
    return path


def encrypted_member(s, root):
    """zipfile cannot write encryption: set the flag bit of one central directory entry."""
    path = write_npz(s, root / "s.npz")
    with zipfile.ZipFile(path) as zipped:
        directory = zipped.start_dir
    data = bytearray(path.read_bytes())
    entry = data.index(b"X2test.npy", directory) - 46  # the name follows a 46-byte entry header
    data[entry + 8] |= 0x1
    path.write_bytes(bytes(data))
    return path


def corrupt_deflate(s, root):
    """Valid headers, damaged compressed data: found while streaming, as bad input."""
    path = root / "s.npz"
    np.savez_compressed(path, **s)
    with zipfile.ZipFile(path) as zipped:
        info = zipped.getinfo("X3test.npy")
    data = bytearray(path.read_bytes())
    middle = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))
    return path


CASES = {
    "npz zip bomb": (npz_bomb, ["{path}", "X1test.npy", "zip bomb", "before decompressing"]),
    "zarr zip bomb": (zarr_zip_bomb, ["X1test/c/9/9", "zip bomb", "before decompressing"]),
    "zip-slip member": (zip_slip, ["../evil.npy", "zip-slip"]),
    "absolute member": (absolute_member, ["/tmp/x.npy", "absolute"]),
    "symlink member": (symlink_member, ["X5test.npy", "symlink"]),
    "symlinked npy": (symlinked_npy, ["X3test.npy", "symlink", "elsewhere.npy"]),
    "symlink out of folder": (symlink_out_of_folder, ["notes", "symlink", "/etc/passwd"]),
    "pickled npy": (pickled_npy, ["X4test.npy", "object arrays", "pickled"]),
    "object npz": (object_npz, ["{path}", "X4test", "object arrays"]),
    "integer": (integer_npy, ["X2test.npy", "int64", "floating point"]),
    "boolean": (boolean_npz, ["X7test", "bool", "floating point"]),
    "complex": (complex_zarr, ["X6test", "complex128", "floating point"]),
    "strings": (string_npz, ["X9test", "<U5", "floating point"]),
    "structured": (structured_npy, ["X8test.npy", "floating point"]),
    "wrong shape": (wrong_shape, ["X5test", "shape (99, 48)", "expected (100, 48)"]),
    "transposed": (transposed, ["X8test.npy", "shape (48, 100)", "expected (100, 48)"]),
    "missing": (missing, ["{path}", "missing arrays ['X7test']"]),
    "extra": (extra, ["{path}", "unexpected arrays ['X10test']"]),
    "nested subgroup": (nested_group, ["model/X1test", "nested", "group root"]),
    "huge zarr chunks": (huge_chunks, ["X2test", "chunks of", "limit"]),
    "text file": (text_file, ["{path}", "no zarr group", ".npz"]),
    "empty folder": (empty_folder, ["{path}", "no zarr group", "no .npy"]),
    "truncated npy": (truncated_npy, ["X5test.npy", "truncated"]),
    "not a zip": (not_a_zip, ["{path}", "not a readable zip"]),
    "absurd header shape": (
        absurd_shape,
        ["X1test.npy", "(1000000000000, 1000000000000)", "expected (100, 48)"],
    ),
    "too many members": (too_many_members, ["{path}", "1009 members", "limit of 1000"]),
    "duplicate member": (duplicate_member, ["X6test.npy", "appears twice"]),
    "bzip2 member": (bzip2_npz, ["X1test.npy", "compression method 12", "deflated"]),
    "encrypted member": (encrypted_member, ["X2test.npy", "encrypted"]),
    "corrupt deflate data": (corrupt_deflate, ["X3test", "corrupt compressed data"]),
}


def _assert_names(message: str, fragments: list[str], path: Path, case: str) -> None:
    for fragment in fragments:
        assert fragment.format(path=path) in message, (case, fragment, message)


@pytest.mark.parametrize("case", list(CASES))
def test_library_refuses(case, bundle, submission, tmp_path):
    _, manifest, _ = bundle
    writer, fragments = CASES[case]
    path = writer(submission, tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput) as caught:
            open_submission(StoreLocation(path), manifest)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_names(str(caught.value), fragments, path, case)
    assert peak_bytes < 8 * 2**20, f"{case}: {peak_bytes / 2**20:.1f} MiB allocated to refuse"


@pytest.mark.parametrize("case", list(CASES))
def test_cli_refuses_with_exit_3(case, bundle, submission, tmp_path, capsys, dask_cluster):
    truth_url, _, _ = bundle
    writer, fragments = CASES[case]
    path = writer(submission, tmp_path)
    out = tmp_path / "result.json"
    code = cli.main(score_ctf_argv(truth_url, path, out, dask_cluster.address))
    captured = capsys.readouterr()
    assert code == 3, (case, captured.err)
    assert captured.err.startswith("seisctf: invalid input:"), captured.err
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    _assert_names(captured.err, fragments, path, case)
    assert not out.exists()


# --- limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "fragments"),
    [
        (SubmissionLimits(max_members=5), ["9 members", "limit of 5"]),
        (SubmissionLimits(max_total_bytes=10**5), ["bytes uncompressed", "100000 bytes"]),
        (SubmissionLimits(max_array_bytes=10**4), ["declares", "above the limit of 10000"]),
    ],
)
def test_npz_limits_are_configurable(limits, fragments, submission, bundle, tmp_path):
    _, manifest, _ = bundle
    path = write_npz(submission, tmp_path / "s.npz")
    open_submission(StoreLocation(path), manifest)  # valid under the default limits
    with pytest.raises(InvalidInput) as caught:
        open_submission(StoreLocation(path), manifest, limits=limits)
    _assert_names(str(caught.value), ["{path}", *fragments], path, str(limits))


@pytest.mark.parametrize(
    ("limits", "fragments"),
    [
        (SubmissionLimits(max_total_bytes=10**5), ["in all", "limit of 100000"]),
        (SubmissionLimits(max_array_bytes=10**4), ["X1test", "above the limit of 10000"]),
        (SubmissionLimits(max_chunk_bytes=1024), ["X1test", "chunks of 2048 bytes"]),
    ],
)
def test_zarr_limits_are_configurable(limits, fragments, submission, bundle, tmp_path):
    _, manifest, _ = bundle
    path = write_zarr(submission, tmp_path / "g.zarr")
    open_submission(StoreLocation(path), manifest)
    with pytest.raises(InvalidInput) as caught:
        open_submission(StoreLocation(path), manifest, limits=limits)
    _assert_names(str(caught.value), fragments, path, str(limits))


@pytest.mark.filterwarnings("ignore:Object at padding is not recognized")
def test_compression_ratio_limit_applies_to_members_larger_than_any_array(
    bundle, submission, tmp_path
):
    """All-zero arrays deflate at ~1023:1 and are valid; a member bigger than any expected array
    and compressed beyond the limit is a bomb."""
    _, manifest, _ = bundle
    zeros = {name: np.zeros_like(array) for name, array in submission.items()}
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, **zeros)
    assert open_submission(StoreLocation(path), manifest)["X1test"].sum().compute() == 0
    group = write_zarr(submission, tmp_path / "g.zarr")
    archive = zip_files(group, tmp_path / "s.zip", {"padding": bytes(2**22)})
    assert DEFAULT_LIMITS.max_compression_ratio == 1000
    with pytest.raises(InvalidInput, match=r"padding: member declares 4194304 bytes .*ratio 10"):
        open_submission(StoreLocation(archive), manifest)
    open_submission(
        StoreLocation(archive), manifest, limits=SubmissionLimits(max_compression_ratio=2000)
    )
