"""Writers of CTF submissions in every accepted format, for the submission tests: .npz, a
folder of .npy, a zarr v3 group, a zip of a folder; and the `score ctf` command line that scores
one."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import zarr


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype.hasobject)
    return buffer.getvalue()


def write_npz(arrays: dict, path: Path, extra: dict[str, bytes] | None = None) -> Path:
    """An .npz of `arrays`, plus raw `extra` members written as given (names unchecked)."""
    with zipfile.ZipFile(path, "w") as zipped:
        for name, array in arrays.items():
            zipped.writestr(f"{name}.npy", npy_bytes(array))
        for name, payload in (extra or {}).items():
            zipped.writestr(zipfile.ZipInfo(name), payload)
    return path


def write_npy_folder(arrays: dict, path: Path) -> Path:
    path.mkdir()
    for name, array in arrays.items():
        (path / f"{name}.npy").write_bytes(npy_bytes(array))
    return path


def write_zarr(arrays: dict, path: Path) -> Path:
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, array in arrays.items():
        group.create_array(name, data=array, chunks=(32, 16))
    return path


def zip_files(directory: Path, archive: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for file in sorted(directory.rglob("*")):
            if file.is_file():
                zipped.write(file, file.relative_to(directory).as_posix())
        for name, payload in (extra or {}).items():
            zipped.writestr(zipfile.ZipInfo(name), payload, zipfile.ZIP_DEFLATED)
    return archive


def score_ctf_argv(truth_url: str, submission: Path, out: Path, scheduler: str) -> list[str]:
    """`seisctf score ctf` of one submission, its JSON to `out`, quiet, on `scheduler`."""
    return ["score", "ctf", "--truth", truth_url, "--submission", str(submission), "--quiet",
            "--json", str(out), "--scheduler", scheduler]  # fmt: skip
