"""Submission intake: a zarr group (path or URL), a .zip of one, an .npz, or a folder of .npy.

Submissions are data, never code, and may be hostile, so everything is checked from metadata before
any value is read: .npy headers are parsed without ever unpickling (object dtypes are refused from
the header), zip members from the central directory (paths, symlink mode bits, declared sizes and
compression ratios: a zip bomb is refused before anything is decompressed), zarr arrays from their
metadata (names, shapes, dtypes, chunk sizes, no arrays in nested groups). Limits are a
`SubmissionLimits`. A valid submission is never copied whole into memory: zarr (also inside a zip)
is read chunk-wise by Dask, .npy files and stored .npz members are memory-mapped, and compressed
.npz members are streamed once, one row block at a time, into a scratch zarr store. NaN and Inf are
found lazily, in the scoring pass (`value_report`, `raise_if_nonfinite`).
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import struct
import tempfile
import tokenize
import weakref
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.blocks import named
from seisctf.errors import InvalidInput

GIB = 2**30
NPY_HEADER_MAX_BYTES = 2**16  # a .npy header (numpy itself refuses headers above 10 000 bytes)
METADATA_MAX_BYTES = 16 * 2**20  # one zarr.json member of a zip
CODEC_SLACK_BYTES = 2**20  # a stored zarr chunk may exceed its raw size by codec/shard overhead
# zipfile bounds its output to the declared size for these only (bzip2, lzma: one read of 4 KiB
# may decompress to gigabytes); np.savez, np.savez_compressed and zarr's ZipStore use them.
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
# Untrusted zarr metadata fails in many ways; each is bad input, not a bug of seisctf.
METADATA_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError, zarr.errors.BaseZarrError)
# A damaged zip (a local file, so never a storage outage) fails in these ways; zipfile raises
# NotImplementedError for flag bits it does not support.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError)
Shapes = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class SubmissionLimits:
    """Sizes a submission may declare, checked from headers and metadata before reading values."""

    max_total_bytes: int = 64 * GIB  # all arrays, and all zip members (uncompressed, as declared)
    max_array_bytes: int = 16 * GIB  # one array, and one zip member
    max_chunk_bytes: int = 1 * GIB  # one zarr chunk (or shard): it is decoded whole
    max_members: int = 1000  # entries of a .zip or .npz
    # Compressed/uncompressed ratio of a zip member larger than any expected float64 array could
    # be (smaller members are harmless, and all-zero arrays deflate at ~1023:1).
    max_compression_ratio: float = 1000.0


DEFAULT_LIMITS = SubmissionLimits()


def expected_shapes(manifest: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {pair["test"]: tuple(pair["shape"]) for pair in manifest["pairs"]}


# --- checks on metadata ------------------------------------------------------------------------


def _refuse_names(what: str, found: Iterable[str], expected: Shapes | None) -> None:
    if expected is None:
        return
    found = set(found)
    missing = [name for name in expected if name not in found]
    unexpected = sorted(found - set(expected))
    shown = f"{unexpected[:10]}" + f" and {len(unexpected) - 10} more" * (len(unexpected) > 10)
    problems = [f"missing arrays {missing}"] * bool(missing)
    problems += [f"unexpected arrays {shown}"] * bool(unexpected)
    if problems:
        raise InvalidInput(what, f"{' and '.join(problems)}; expected exactly {list(expected)}")


def _check_array(
    what: str, name: str, shape: Any, dtype: Any, expected: Shapes | None, limits: SubmissionLimits
) -> int:
    """Refuse object (pickled) or non-float dtypes, wrong shapes, oversized arrays; return bytes."""
    shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
    if dtype.kind == "O" or (dtype.kind == "V" and dtype.hasobject):
        raise InvalidInput(
            what,
            f"dtype {dtype}: object arrays (pickled Python objects) are "
            "refused; expected floating point in a plain .npy or zarr array",
        )
    if expected is not None and shape != expected[name]:
        raise InvalidInput(what, f"shape {shape}, expected {expected[name]}")
    if not shape or min(shape) < 1:
        raise InvalidInput(what, f"shape {shape}, expected a non-empty (time, space) matrix")
    if dtype.kind != "f":
        raise InvalidInput(what, f"dtype {dtype}, expected floating point")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > limits.max_array_bytes:
        raise InvalidInput(what, f"{nbytes} bytes, above the limit of {limits.max_array_bytes}")
    return nbytes


def _refuse_symlinks(root: Path) -> None:
    """A submission folder holds plain files only: a symlink could point anywhere."""
    for folder, dirnames, filenames in os.walk(root):
        for entry in (*dirnames, *filenames):
            link = Path(folder, entry)
            if link.is_symlink():
                raise InvalidInput(
                    str(link),
                    f"is a symlink (to {os.readlink(link)}); a "
                    "submission folder must hold plain files only",
                )


def _read_npy_header(what: str, stream: Any) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, fortran_order) of a .npy header, leaving `stream` at the first data byte."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
    except (ValueError, TypeError, SyntaxError, tokenize.TokenError, *ZIP_ERRORS) as error:
        raise InvalidInput(what, f"not a plain .npy array (unreadable header: {error})") from None
    return tuple(shape), dtype, bool(fortran_order)


@dataclass(frozen=True)
class MappedArray:
    """The data of a .npy (a file, or a stored .npz member) at a byte offset, memory-mapped
    read-only on each access: it pickles as its location, so Dask workers map it themselves.
    `modified_ns` (the file's mtime) makes Dask keys differ when the file is replaced."""

    path: str
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool = False
    modified_ns: int = 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        order = "F" if self.fortran_order else "C"
        mapped = np.memmap(self.path, self.dtype, "r", self.offset, self.shape, order)
        return np.array(mapped[key])


# Decoding untrusted chunk bytes fails in many ways (codecs raise RuntimeError, a short chunk a
# ValueError on reshape); each is bad input. I/O errors (OSError) are not: they keep their type.
DECODE_ERRORS = (ValueError, RuntimeError, TypeError, zarr.errors.BaseZarrError)


@dataclass(frozen=True)
class CheckedArray:
    """A submitted zarr array read block by block (by Dask workers): a chunk that does not
    decode (corrupt or truncated bytes) is bad input naming the array and its rows."""

    array: Any
    what: str
    errors: tuple[type[BaseException], ...] = DECODE_ERRORS

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            return np.asarray(self.array[key])
        except self.errors as error:
            rows = key[0] if isinstance(key, tuple) and key else key
            where = f"rows {rows.start}-{rows.stop - 1}" if isinstance(rows, slice) else "values"
            raise InvalidInput(
                self.what, f"{where} cannot be decoded ({type(error).__name__}: {error})"
            ) from None


# --- readers, one per format -------------------------------------------------------------------


def _mapped_npy(
    what: str,
    path: Path,
    start: int,
    size: int,
    name: str,
    expected: Shapes | None,
    limits: SubmissionLimits,
) -> MappedArray:
    """The .npy of `size` bytes at `start` in a file (a .npy, or a stored .npz member), checked
    from its header and mapped, never read."""
    with path.open("rb") as stream:
        stream.seek(start)
        shape, dtype, fortran_order = _read_npy_header(what, stream)
        offset = stream.tell()
    declared = offset - start + _check_array(what, name, shape, dtype, expected, limits)
    if size != declared or start + size > path.stat().st_size:
        raise InvalidInput(
            what,
            f"holds {size} bytes, its .npy header declares {declared} (a "
            f"{shape} {dtype} array): truncated or padded",
        )
    return MappedArray(
        str(path.absolute()), offset, shape, dtype, fortran_order, path.stat().st_mtime_ns
    )


def _npy_folder_arrays(root: Path, expected: Shapes | None, limits: SubmissionLimits) -> dict:
    files = {file.stem: file for file in root.iterdir() if file.suffix == ".npy"}
    _refuse_names(str(root), files, expected)
    for file in files.values():
        if not stat.S_ISREG(file.lstat().st_mode):
            raise InvalidInput(str(file), "not a regular file")
    return {
        name: _mapped_npy(str(file), file, 0, file.stat().st_size, name, expected, limits)
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
        raise InvalidInput(str(path), f"not a readable zip file ({error})") from None
    infos, seen, total = archive.infolist(), set(), 0
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
) -> da.Array:
    """Decompress a member once, a block of whole rows (~4 MiB) at a time, into a scratch zarr
    store deleted with the array; memory stays at one block."""
    directory = tempfile.mkdtemp(prefix="seisctf-npz-", dir=scratch_dir)
    try:
        with archive.open(info) as stream:
            shape, dtype, fortran_order = _read_npy_header(what, stream)
            rows_shape = shape[::-1] if fortran_order else shape  # Fortran = C order transposed
            row_bytes = max(1, math.prod(rows_shape[1:]) * dtype.itemsize)
            rows = max(1, min(rows_shape[0], cv.TARGET_CHUNK_BYTES // row_bytes))
            target = zarr.create_array(
                directory,
                shape=rows_shape,
                dtype=dtype.newbyteorder("="),
                chunks=(rows, *rows_shape[1:]),
                compressors=None,
            )
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
    except BaseException as error:
        shutil.rmtree(directory, ignore_errors=True)
        if isinstance(error, ZIP_ERRORS):
            raise InvalidInput(what, f"corrupt compressed data ({error})") from None
        raise
    weakref.finalize(target, shutil.rmtree, directory, True)
    array = da.from_zarr(target)
    return array.transpose() if fortran_order else array


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
        _refuse_names(str(path), members, expected)
        arrays = {}
        for name, info in sorted(members.items()):  # every header first: nothing big is read
            what = f"{path}:{name}"
            if info.compress_type == zipfile.ZIP_STORED:  # map the data inside the zip file
                file.seek(info.header_offset)  # local header: 30 bytes, then name and extra
                local = file.read(30)
                if len(local) < 30 or local[:4] != b"PK\x03\x04":
                    raise InvalidInput(what, "corrupt zip: no local header found")
                start = info.header_offset + 30 + sum(struct.unpack_from("<HH", local, 26))
                arrays[name] = _mapped_npy(
                    what, path, start, info.file_size, name, expected, limits
                )
                continue
            try:
                with archive.open(info) as stream:
                    shape, dtype, _ = _read_npy_header(what, stream)
                    header_bytes = stream.tell()
            except ZIP_ERRORS as error:
                raise InvalidInput(what, f"corrupt zip member ({error})") from None
            declared = header_bytes + _check_array(what, name, shape, dtype, expected, limits)
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


def _chunk_bytes(array: zarr.Array) -> int:
    return (
        math.prod(getattr(array, "shards", None) or array.chunks) * np.dtype(array.dtype).itemsize
    )


def _group_arrays(
    what: str,
    open_group: Any,
    expected: Shapes | None,
    limits: SubmissionLimits,
    errors: tuple[type[BaseException], ...] = METADATA_ERRORS,
) -> dict[str, zarr.Array]:
    """The arrays at a zarr group's root, checked from metadata; arrays in subgroups are refused.
    `errors`: what reading the metadata raises for bad input."""
    try:
        group = open_group()
        members = list(group.members(max_depth=None))
    except errors as error:
        raise InvalidInput(
            what, f"no readable zarr group ({type(error).__name__}: {error})"
        ) from None
    arrays = dict(sorted((path, node) for path, node in members if isinstance(node, zarr.Array)))
    nested = sorted(path for path in arrays if "/" in path)
    if nested:
        raise InvalidInput(
            what, f"arrays {nested} sit in nested groups; arrays must be at the group root"
        )
    _refuse_names(what, arrays, expected)
    for name, array in arrays.items():
        _check_array(f"{what}:{name}", name, array.shape, array.dtype, expected, limits)
        if _chunk_bytes(array) > limits.max_chunk_bytes:
            raise InvalidInput(
                f"{what}:{name}",
                f"chunks of {_chunk_bytes(array)} bytes, above "
                f"the limit of {limits.max_chunk_bytes}",
            )
    return arrays


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
    arrays = _group_arrays(
        str(path),
        lambda: zarr.open_group(store, mode="r", path=tops[0].rstrip("/") or None),
        expected,
        limits,
        METADATA_ERRORS + ZIP_ERRORS,
    )
    for name, array in arrays.items():  # a chunk member is read whole: bound it by the chunk
        most = _chunk_bytes(array) + CODEC_SLACK_BYTES
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
        _refuse_symlinks(path)
        if (path / "zarr.json").is_file():
            return _group_arrays(
                source, lambda: storage.open_group(str(path.absolute())), expected, limits
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
    source: str | Mapping[str, Any],
    storage_options: storage.StorageOptions | None = None,
    *,
    manifest: Mapping[str, Any] | None = None,
    limits: SubmissionLimits | None = None,
    scratch_dir: str | os.PathLike | None = None,
) -> dict:
    """Array-likes by name (zarr, memory-mapped, Dask or numpy) from any submission format or a
    mapping of arrays, checked from metadata only; names and shapes too when a manifest is given."""
    expected = expected_shapes(manifest) if manifest is not None else None
    limits = limits or DEFAULT_LIMITS
    what = source if isinstance(source, str) else "submission"
    if isinstance(source, Mapping):
        arrays = {name: a if hasattr(a, "dtype") else np.asarray(a) for name, a in source.items()}
        _refuse_names(what, arrays, expected)
        for name, array in arrays.items():
            _check_array(f"{what}:{name}", name, array.shape, array.dtype, expected, limits)
    elif storage.is_remote(source):
        if source.rstrip("/").endswith((".zip", ".npz")):
            raise InvalidInput(source, "only zarr groups are read from URLs; give a local path")
        arrays = _group_arrays(
            source, lambda: storage.open_group(source, storage_options), expected, limits
        )
    else:
        arrays = _local_arrays(source, expected, limits, scratch_dir)
    total = sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in arrays.values())
    if total > limits.max_total_bytes:
        raise InvalidInput(
            what, f"{total} bytes in all, above the limit of {limits.max_total_bytes}"
        )
    return arrays


def open_submission(
    source: str | Mapping[str, Any],
    manifest: Mapping[str, Any],
    storage_options: storage.StorageOptions | None = None,
    limits: SubmissionLimits | None = None,
    *,
    scratch_dir: str | os.PathLike | None = None,
) -> dict[str, da.Array]:
    """Validate names, shapes, dtypes and sizes; return Dask arrays chunked like the truth, in
    the submitted float dtype (native byte order): the scorer converts to float64 in its kernels,
    where the data already is.

    `scratch_dir` holds the temporary zarr stores of compressed .npz members (default: $TMPDIR).
    """
    arrays = read_submission_arrays(
        source, storage_options, manifest=manifest, limits=limits, scratch_dir=scratch_dir
    )
    what = source if isinstance(source, str) else "submission"
    opened = {}
    for name, shape in expected_shapes(manifest).items():
        chunks = cv.time_space_chunks(*shape)
        array = arrays[name]
        if isinstance(array, zarr.Array):
            zipped = isinstance(array.store, zarr.storage.ZipStore)
            errors = DECODE_ERRORS + ZIP_ERRORS if zipped else DECODE_ERRORS
            array = CheckedArray(array, f"{what}:{name}", errors)
        if not isinstance(array, da.Array):
            array = da.from_array(array, chunks=chunks, asarray=True)
        opened[name] = array.rechunk(chunks).astype(array.dtype.newbyteorder("="))
    return opened


# --- non-finite values, found in the scoring pass -----------------------------------------------


def _block_values(
    block: np.ndarray, start: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int, int, float]:
    """(NaN/Inf count, global C-order flat index of the first or −1, max |value|) of one block.
    A block's first in its own C order is its first globally: C order is lexicographic, like a
    block's."""
    bad = ~np.isfinite(block)
    count, first = int(np.count_nonzero(bad)), -1
    if count:
        local = np.unravel_index(int(np.argmax(bad)), block.shape)
        first = int(np.ravel_multi_index([i + s for i, s in zip(local, start, strict=True)], shape))
    largest = float(np.max(np.abs(block))) if block.size else 0.0
    return count, first, largest


def _total_values(reports: list[tuple[int, int, float]]) -> tuple[int, int, float]:
    firsts = [first for _, first, _ in reports if first >= 0]
    return (
        sum(count for count, _, _ in reports),
        min(firsts) if firsts else -1,
        max((largest for _, _, largest in reports), default=0.0),
    )


def value_report(array: da.Array) -> Any:
    """Lazy (Delayed) `(count, first flat index, max |value|)`: NaN/Inf values in C order (−1
    when none) and the largest magnitude, chunk by chunk, so they are found in the same pass as
    the scores."""
    blocks = array.to_delayed(optimize_graph=False)
    edges = [np.cumsum((0, *chunks)) for chunks in array.chunks]
    parts = [
        named(
            _block_values,
            "value_report",
            blocks[index],
            tuple(int(edges[axis][i]) for axis, i in enumerate(index)),
            array.shape,
        )
        for index in np.ndindex(*blocks.shape)
    ]
    return named(_total_values, "value_report_total", parts)


def describe_nonfinite(name: str, count: int, first_flat_index: int, shape: Any) -> str:
    """'X3test: 12 non-finite values (NaN or Inf), first at [17, 5]'."""
    if count <= 0:
        return f"{name}: all values finite"
    where = ", ".join(str(int(i)) for i in np.unravel_index(int(first_flat_index), tuple(shape)))
    return f"{name}: {count} non-finite value{'s' * (count != 1)} (NaN or Inf), first at [{where}]"


def raise_if_nonfinite(source: str, reports: Mapping[str, Any], shapes: Mapping[str, Any]) -> None:
    """Raise InvalidInput naming every array whose report `(count, first index)` counts NaN/Inf."""
    bad = [
        describe_nonfinite(name, int(count), int(first), shapes[name])
        for name, (count, first) in reports.items()
        if int(count) > 0
    ]
    if bad:
        raise InvalidInput(source, "; ".join(bad))
