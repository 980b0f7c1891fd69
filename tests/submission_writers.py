"""Writers of CTF submissions in every accepted format, for the submission tests: .npz, a
folder of .npy, a zarr v3 group, a zip of a folder; hostile zips (a bomb written byte by byte, a
symlink member); and the `score ctf` command line that scores one."""

from __future__ import annotations

import functools
import io
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import zarr

BOMB_BYTES = 2 * 2**30  # what the zip bombs of `write_raw_zip` decompress to


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


@functools.cache
def deflated_zeros(prefix: bytes, n_zero_mib: int) -> tuple[bytes, int]:
    """(raw deflate stream, CRC-32) of `prefix` then n MiB of zeros, built in milliseconds: after
    a full flush the compressor restarts, so one compressed MiB of zeros can be repeated."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(2**20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc, zeros = zlib.crc32(prefix), bytes(2**24)
    for _ in range(n_zero_mib // 16):
        crc = zlib.crc32(zeros, crc)
    return head + block * n_zero_mib + compressor.flush(zlib.Z_FINISH), crc


def write_raw_zip(path: Path, members: list[tuple[str, bytes]], bomb_name: str) -> Path:
    """A zip written byte by byte: `members` stored, then `bomb_name` declaring 2 GiB of a valid
    .npy of zeros, deflated to about 2 MiB (a real bomb: it decompresses to what it declares)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (BOMB_BYTES // 8,)}
    )
    data, crc = deflated_zeros(header.getvalue(), BOMB_BYTES // 2**20)
    entries = [(name, payload, len(payload), zlib.crc32(payload), 0) for name, payload in members]
    entries.append((bomb_name, data, len(header.getvalue()) + BOMB_BYTES, crc, 8))
    central = []
    with path.open("wb") as file:
        for name, payload, size, checksum, method in entries:
            offset, encoded = file.tell(), name.encode()
            file.write(
                struct.pack(
                    "<IHHHHHIIIHH",
                    0x04034B50,
                    20,
                    0,
                    method,
                    0,
                    0,
                    checksum,
                    len(payload),
                    size,
                    len(encoded),
                    0,
                )
                + encoded
                + payload
            )
            central.append(
                struct.pack(
                    "<IHHHHHHIIIHHHHHII",
                    0x02014B50,
                    0x031E,
                    20,
                    0,
                    method,
                    0,
                    0,
                    checksum,
                    len(payload),
                    size,
                    len(encoded),
                    0,
                    0,
                    0,
                    0,
                    0o100644 << 16,
                    offset,
                )
                + encoded
            )
        start, directory = file.tell(), b"".join(central)
        file.write(
            directory
            + struct.pack(
                "<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(directory), start, 0
            )
        )
    return path


def add_symlink_member(path: Path, name: str, target: str = "/etc/passwd") -> Path:
    """Append to the zip at `path` a member `name` whose mode bits make it a symlink to
    `target`."""
    link = zipfile.ZipInfo(name)
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "a") as zipped:
        zipped.writestr(link, target)
    return path


def score_ctf_argv(truth_url: str, submission: Path, out: Path, scheduler: str) -> list[str]:
    """`seisctf score ctf` of one submission, its JSON to `out`, quiet, on `scheduler`."""
    return ["score", "ctf", "--truth", truth_url, "--submission", str(submission), "--quiet",
            "--json", str(out), "--scheduler", scheduler]  # fmt: skip
