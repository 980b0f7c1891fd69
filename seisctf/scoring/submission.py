"""Submission intake: a zarr group (path or URL), a .zip of one, an .npz, or a folder of .npy.

Submissions are data, never code, and may be hostile, so everything is checked from metadata before
any value is read: .npy headers are parsed without ever unpickling (object dtypes are refused from
the header), zip members from the central directory (paths, symlink mode bits, declared sizes and
compression ratios: a zip bomb is refused before anything is decompressed), zarr arrays from their
metadata (names, shapes, dtypes, chunk sizes, no arrays in nested groups). Limits are a
`SubmissionLimits`. A valid submission is never copied whole into memory: zarr (also inside a zip)
is read chunk-wise by Dask, .npy files and stored .npz members are memory-mapped, and compressed
.npz members are streamed once, one row block at a time, into a scratch .npy file that is mapped
in turn. Real floating point of any precision and byte order is accepted, every other dtype
refused (`submission_checks.dtype_problem`); NaN and Inf are found lazily, in the scoring pass
(`seisctf.scoring.values`), except in a longdouble array, whose values are read once here to
check that float64 holds them (`as_float64`). The checks on metadata and the array wrappers are
in `seisctf.scoring.submission_checks`; this module reads each format.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import struct
import tempfile
import weakref
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import compute
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.submission_checks import (
    CODEC_SLACK_BYTES,
    DECODE_ERRORS,
    DEFAULT_LIMITS,
    METADATA_ERRORS,
    METADATA_MAX_BYTES,
    NPY_HEADER_MAX_BYTES,
    ZIP_ERRORS,
    ZIP_METHODS,
    CheckedArray,
    MappedArray,
    Shapes,
    SubmissionLimits,
    check_array,
    chunk_bytes,
    group_arrays,
    mapped_npy,
    quoted,
    read_npy_header,
    refuse_symlinks,
)
from seisctf.scoring.submission_names import refuse_names
from seisctf.scoring.values import value_report


def _npy_folder_arrays(root: Path, expected: Shapes | None, limits: SubmissionLimits) -> dict:
    files = {file.stem: file for file in root.iterdir() if file.suffix == ".npy"}
    refuse_names(str(root), files, expected)
    for file in files.values():
        if not stat.S_ISREG(file.lstat().st_mode):
            raise InvalidInput(str(file), "not a regular file")
    return {
        name: mapped_npy(str(file), file, 0, file.stat().st_size, name, expected, limits)
        for name, file in sorted(files.items())
    }


def _zip_member_count(path: Path) -> tuple[int, int] | None:
    """(entries, central directory bytes) from a zip's end record (zip64 too), read before
    `zipfile` parses the whole central directory into memory."""
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - 22 - 2**16))
        tail = file.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) < at + 22:
            return None
        count, directory_bytes = struct.unpack_from("<HI", tail, at + 10)
        if at >= 20 and tail[at - 20 : at - 16] == b"PK\x06\x07":
            file.seek(struct.unpack_from("<Q", tail, at - 12)[0])
            record = file.read(56)
            if record[:4] == b"PK\x06\x06" and len(record) == 56:
                count, directory_bytes = struct.unpack_from("<QQ", record, 32)
    return count, directory_bytes


def _largest_expected_member(expected: Shapes | None) -> int:
    """Bytes of the largest member a valid submission needs (float64 .npy); 0 if unknown."""
    if not expected:
        return 0
    return NPY_HEADER_MAX_BYTES + 8 * max(math.prod(shape) for shape in expected.values())


def _member_problem(
    info: zipfile.ZipInfo, seen: set[str], limits: SubmissionLimits, harmless_bytes: int
) -> str | None:
    """What is wrong with a zip member, from its central directory entry alone."""
    parts = info.filename.replace("\\", "/").split("/")
    ratio = info.file_size / max(info.compress_size, 1)
    if info.filename.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
        return "path is absolute or leaves the archive (zip-slip)"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "is a symlink"
    if info.flag_bits & 0x1:
        return "is encrypted"
    if info.compress_type not in ZIP_METHODS:
        return f"uses compression method {info.compress_type}; only stored or deflated are read"
    if info.filename in seen:
        return "appears twice"
    if info.file_size > limits.max_array_bytes:
        return (
            f"declares {info.file_size} bytes uncompressed, above the limit of "
            f"{limits.max_array_bytes}"
        )
    if info.file_size > harmless_bytes and ratio > limits.max_compression_ratio:
        return (
            f"declares {info.file_size} bytes compressed into {info.compress_size} (ratio "
            f"{ratio:.0f}:1, limit {limits.max_compression_ratio:.0f}:1): a zip bomb"
        )
    return None


def _open_zip(path: Path, limits: SubmissionLimits, harmless_bytes: int) -> zipfile.ZipFile:
    """Open a zip and screen every member from the central directory; nothing is decompressed."""
    declared = _zip_member_count(path)
    if declared and (declared[0] > limits.max_members or declared[1] > 4096 * limits.max_members):
        raise InvalidInput(
            str(path),
            f"{declared[0]} members ({declared[1]} bytes of directory), "
            f"above the limit of {limits.max_members}",
        )
    try:
        archive = zipfile.ZipFile(path)
    except (ValueError, *ZIP_ERRORS) as error:
        raise InvalidInput(str(path), f"not a readable zip file ({quoted(error)})") from None
    infos, total = archive.infolist(), 0
    seen: set[str] = set()
    for info in infos:
        problem = _member_problem(info, seen, limits, harmless_bytes)
        if problem:
            archive.close()
            raise InvalidInput(
                f"{path}:{info.filename}", f"member {problem}; refused before decompressing"
            )
        seen.add(info.filename)
        total += info.file_size
    if len(infos) > limits.max_members or total > limits.max_total_bytes:
        archive.close()
        raise InvalidInput(
            str(path),
            f"{len(infos)} members declaring {total} bytes uncompressed,"
            f" above the limits ({limits.max_members} members, "
            f"{limits.max_total_bytes} bytes)",
        )
    return archive


def _stream_to_scratch(
    what: str,
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    scratch_dir: str | os.PathLike | None,
) -> MappedArray:
    """Decompress a member once, a block of whole rows (~4 MiB) at a time, into a scratch .npy
    file (any dtype, byte order and layout as submitted), mapped like a stored member; its folder
    is deleted with the array. Memory stays at one block."""
    directory = tempfile.mkdtemp(prefix="seisctf-npz-", dir=scratch_dir)
    path = Path(directory, "member.npy")
    try:
        with archive.open(info) as stream:
            shape, dtype, fortran_order = read_npy_header(what, stream)
            rows_shape = shape[::-1] if fortran_order else shape  # Fortran = C order transposed
            row_bytes = max(1, math.prod(rows_shape[1:]) * dtype.itemsize)
            rows = max(1, min(rows_shape[0], cv.TARGET_CHUNK_BYTES // row_bytes))
            target = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=rows_shape)
            for start in range(0, rows_shape[0], rows):
                count = min(rows, rows_shape[0] - start)
                block = stream.read(count * row_bytes)
                if len(block) != count * row_bytes:
                    raise InvalidInput(what, f"truncated: data ends within row {start + count}")
                target[start : start + count] = np.frombuffer(block, dtype).reshape(
                    count, *rows_shape[1:]
                )
            if stream.read(1):
                raise InvalidInput(what, "more data than its .npy header declares")
            target.flush()
            offset = target.offset
            del target
    except BaseException as error:
        shutil.rmtree(directory, ignore_errors=True)
        if isinstance(error, ZIP_ERRORS):
            raise InvalidInput(what, f"corrupt compressed data ({quoted(error)})") from None
        raise
    mapped = MappedArray(str(path), offset, shape, dtype, fortran_order, path.stat().st_mtime_ns)
    weakref.finalize(mapped, shutil.rmtree, directory, True)
    return mapped


def _npz_arrays(
    path: Path,
    expected: Shapes | None,
    limits: SubmissionLimits,
    scratch_dir: str | os.PathLike | None,
) -> dict:
    if not zipfile.is_zipfile(path):
        raise InvalidInput(str(path), "not an .npz archive (a zip of .npy files)")
    with (
        _open_zip(path, limits, _largest_expected_member(expected)) as archive,
        path.open("rb") as file,
    ):
        members = {}
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if name == info.filename or "/" in name:
                raise InvalidInput(f"{path}:{info.filename}", "not a top-level .npy member")
            members[name] = info
        refuse_names(str(path), members, expected)
        arrays = {}
        for name, info in sorted(members.items()):  # every header first: nothing big is read
            what = f"{path}:{name}"
            if info.compress_type == zipfile.ZIP_STORED:  # map the data inside the zip file
                file.seek(info.header_offset)  # local header: 30 bytes, then name and extra
                local = file.read(30)
                if len(local) < 30 or local[:4] != b"PK\x03\x04":
                    raise InvalidInput(what, "corrupt zip: no local header found")
                start = info.header_offset + 30 + sum(struct.unpack_from("<HH", local, 26))
                arrays[name] = mapped_npy(what, path, start, info.file_size, name, expected, limits)
                continue
            try:
                with archive.open(info) as stream:
                    shape, dtype, _ = read_npy_header(what, stream)
                    header_bytes = stream.tell()
            except ZIP_ERRORS as error:
                raise InvalidInput(what, f"corrupt zip member ({quoted(error)})") from None
            declared = header_bytes + check_array(what, name, shape, dtype, expected, limits)
            if info.file_size != declared:
                raise InvalidInput(
                    what,
                    f"holds {info.file_size} bytes, its .npy header declares "
                    f"{declared}: truncated or padded",
                )
        return {
            name: arrays.get(name)
            or _stream_to_scratch(f"{path}:{name}", archive, members[name], scratch_dir)
            for name in members
        }


def _zip_group_arrays(path: Path, expected: Shapes | None, limits: SubmissionLimits) -> dict:
    with _open_zip(path, limits, _largest_expected_member(expected)) as archive:
        infos = archive.infolist()
    metadata = [info for info in infos if f"/{info.filename}".endswith("/zarr.json")]
    roots = {info.filename.removesuffix("zarr.json") for info in metadata}
    tops = sorted(root for root in roots if not any(root.startswith(o) for o in roots - {root}))
    if len(tops) != 1:
        raise InvalidInput(
            str(path),
            "zip holds no zarr group (no zarr.json)"
            if not tops
            else f"zip holds several zarr groups {tops}, expected one",
        )
    for info in metadata:
        if info.file_size > METADATA_MAX_BYTES:
            raise InvalidInput(f"{path}:{info.filename}", f"metadata of {info.file_size} bytes")
    store = zarr.storage.ZipStore(path.absolute(), mode="r")
    arrays = group_arrays(
        str(path),
        lambda: zarr.open_group(store, mode="r", path=tops[0].rstrip("/") or None),
        expected,
        limits,
        METADATA_ERRORS + ZIP_ERRORS,
    )
    for name, array in arrays.items():  # a chunk member is read whole: bound it by the chunk
        most = chunk_bytes(array) + CODEC_SLACK_BYTES
        for info in infos:
            if info.filename.startswith(f"{tops[0]}{name}/") and info.file_size > most:
                raise InvalidInput(
                    f"{path}:{info.filename}",
                    f"member declares {info.file_size} "
                    f"bytes, more than a chunk of {name} holds ({most}); refused "
                    "before decompressing",
                )
    return arrays


def _local_arrays(
    source: str,
    expected: Shapes | None,
    limits: SubmissionLimits,
    scratch_dir: str | os.PathLike | None,
) -> dict:
    path = Path(source)
    if not path.exists():
        raise InvalidInput(source, "submission not found")
    if path.is_dir():
        refuse_symlinks(path)
        if (path / "zarr.json").is_file():
            return group_arrays(
                source,
                lambda: storage.open_group(StoreLocation(str(path.absolute()))),
                expected,
                limits,
            )
        if any(path.glob("*.npy")):
            return _npy_folder_arrays(path, expected, limits)
        raise InvalidInput(source, "folder holds no zarr group (no zarr.json) and no .npy files")
    if path.is_file() and path.suffix == ".npz":
        return _npz_arrays(path, expected, limits, scratch_dir)
    if path.is_file() and (path.suffix == ".zip" or zipfile.is_zipfile(path)):
        return _zip_group_arrays(path, expected, limits)
    raise InvalidInput(
        source, "no zarr group here, nor a .zip of one, an .npz or a folder of .npy files"
    )


def read_submission_arrays(
    source: StoreLocation | Mapping[str, Any],
    *,
    manifest: CtfManifest | None = None,
    limits: SubmissionLimits | None = None,
    scratch_dir: str | os.PathLike | None = None,
) -> dict:
    """Array-likes by name (zarr, memory-mapped, Dask or numpy) from any submission format at a
    location or a mapping of arrays, checked from metadata only; names and shapes too when a
    manifest is given."""
    expected = manifest.test_shapes() if manifest is not None else None
    limits = limits or DEFAULT_LIMITS
    what = source.url if isinstance(source, StoreLocation) else "submission"
    arrays: dict[str, Any]
    if not isinstance(source, StoreLocation):
        arrays = {name: a if hasattr(a, "dtype") else np.asarray(a) for name, a in source.items()}
        refuse_names(what, arrays, expected)
        for name, array in arrays.items():
            check_array(f"{what}:{name}", name, array.shape, array.dtype, expected, limits)
    elif source.is_remote:
        if what.rstrip("/").endswith((".zip", ".npz")):
            raise InvalidInput(what, "only zarr groups are read from URLs; give a local path")
        arrays = group_arrays(what, lambda: storage.open_group(source), expected, limits)
    else:
        arrays = _local_arrays(what, expected, limits, scratch_dir)
    total = sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in arrays.values())
    if total > limits.max_total_bytes:
        raise InvalidInput(
            what, f"{total} bytes in all, above the limit of {limits.max_total_bytes}"
        )
    return arrays


def _float64_block(block: np.ndarray) -> np.ndarray:
    """A block of a wider float as float64, rounded to nearest; a value beyond float64's range
    becomes ±Inf (and is then refused, so the warning numpy would give is not needed)."""
    with np.errstate(over="ignore"):
        return block.astype(np.float64)


def as_float64(what: str, array: da.Array) -> da.Array:
    """A longdouble array (wider than float64) as float64, its values read here once, before any
    scoring: refused naming the first value float64 cannot hold (NaN, Inf, or beyond ±1.8e308)."""
    converted = da.map_blocks(_float64_block, array, dtype=np.float64)
    count, first, _ = compute(value_report(converted), label=f"reading {what}", quiet=True)[0]
    if count:
        where = ", ".join(str(int(i)) for i in np.unravel_index(int(first), array.shape))
        raise InvalidInput(
            what,
            f"{count} value{'s' * (count != 1)} of dtype {array.dtype} that float64 cannot hold "
            f"(NaN, Inf, or beyond ±{np.finfo(np.float64).max:.4g}), first at [{where}]; the "
            "referee scores in float64",
        )
    return converted


def open_submission(
    source: StoreLocation | Mapping[str, Any],
    manifest: CtfManifest,
    limits: SubmissionLimits | None = None,
    *,
    scratch_dir: str | os.PathLike | None = None,
) -> dict[str, da.Array]:
    """Validate names, shapes, dtypes and sizes; return Dask arrays chunked like the truth, in
    the submitted float dtype (native byte order): the scorer converts to float64 in its kernels,
    where the data already is. A longdouble array is converted here instead, its values checked
    first (`as_float64`): the only dtype whose values float64 may not hold.

    `scratch_dir` holds the temporary .npy files of compressed .npz members (default: $TMPDIR).
    """
    arrays = read_submission_arrays(
        source, manifest=manifest, limits=limits, scratch_dir=scratch_dir
    )
    what = source.url if isinstance(source, StoreLocation) else "submission"
    opened = {}
    for name, shape in manifest.test_shapes().items():
        chunks = cv.time_space_chunks(*shape)
        array = arrays[name]
        if isinstance(array, zarr.Array):
            zipped = isinstance(array.store, zarr.storage.ZipStore)
            errors = DECODE_ERRORS + ZIP_ERRORS if zipped else DECODE_ERRORS
            array = CheckedArray(array, f"{what}:{name}", errors)
        if not isinstance(array, da.Array):
            array = da.from_array(array, chunks=chunks, asarray=True)
        array = array.rechunk(chunks).astype(array.dtype.newbyteorder("="))
        if array.dtype.itemsize > np.dtype(np.float64).itemsize:
            array = as_float64(f"{what}:{name}", array)
        opened[name] = array
    return opened
