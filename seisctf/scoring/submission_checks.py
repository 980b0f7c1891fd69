"""Submission checks made from metadata alone, before any value is read: the limits, names,
shapes, dtypes and sizes of arrays, .npy headers (parsed without unpickling), and the zarr
metadata of a group's arrays; plus the two array wrappers the intake hands to Dask (a
memory-mapped .npy, a zarr array whose undecodable chunks are bad input). Used by
`seisctf.scoring.submission`, the intake.
"""

from __future__ import annotations

import itertools
import math
import os
import tokenize
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import zarr
from zarr.core.sync import sync

from seisctf.errors import InvalidInput
from seisctf.scoring.submission_names import MAX_MEMBERS, refuse_names

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
    max_members: int = MAX_MEMBERS  # entries of a .zip or .npz
    # Compressed/uncompressed ratio of a zip member larger than any expected float64 array could
    # be (smaller members are harmless, and all-zero arrays deflate at ~1023:1).
    max_compression_ratio: float = 1000.0


DEFAULT_LIMITS = SubmissionLimits()


ERROR_TEXT_CHARS = 300  # of a parser's message quoted in a refusal


def quoted(error: BaseException) -> str:
    """A library's error message, as a refusal quotes it: on one line (numpy's and zarr's may
    span several), at most `ERROR_TEXT_CHARS` characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= ERROR_TEXT_CHARS else f"{text[:ERROR_TEXT_CHARS]}…"


# --- checks on metadata ------------------------------------------------------------------------


# What each refused kind of numpy dtype holds, for the message (numpy's `dtype.kind` codes).
REFUSED_KINDS = {
    "b": "booleans",
    "i": "signed integers",
    "u": "unsigned integers",
    "c": "complex numbers",
    "S": "byte strings",
    "U": "unicode text",
    "T": "text",
    "M": "datetimes",
    "m": "time deltas",
    "O": "Python objects",
}
DTYPE_TEXT_CHARS = 80  # a hostile header may declare a structured dtype of thousands of fields
ACCEPTED_DTYPES = "floating point (float16, float32, float64 or longdouble, either byte order)"


def dtype_problem(dtype: np.dtype) -> str | None:
    """Why a submitted array's dtype is refused (None: a real floating-point dtype, any precision
    and byte order). Anything else holds no prediction the referee can score in float64 without
    guessing: integers, booleans, complex numbers, text, times, records, raw bytes, objects."""
    if dtype.kind == "f":
        return None
    text = str(dtype)
    if len(text) > DTYPE_TEXT_CHARS:
        text = f"{text[:DTYPE_TEXT_CHARS]}…"
    if dtype.hasobject:
        return (
            f"dtype {text}: object arrays (pickled Python objects) are refused; expected "
            "floating point in a plain .npy or zarr array"
        )
    if dtype.kind == "V":
        held = "records (structured fields)" if dtype.names else "raw bytes"
    else:
        held = REFUSED_KINDS.get(dtype.kind, f"dtype kind {dtype.kind!r}")
    return f"dtype {text} holds {held}, expected {ACCEPTED_DTYPES}"


def check_array(
    what: str, name: str, shape: Any, dtype: Any, expected: Shapes | None, limits: SubmissionLimits
) -> int:
    """Refuse any dtype but real floating point (`dtype_problem`), wrong shapes, oversized arrays;
    return bytes. Object dtypes are refused before anything else: nothing of theirs is read."""
    shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
    problem = dtype_problem(dtype)
    if dtype.hasobject and problem:
        raise InvalidInput(what, problem)
    if expected is not None and shape != expected[name]:
        raise InvalidInput(what, f"shape {shape}, expected {expected[name]}")
    if not shape or min(shape) < 1:
        raise InvalidInput(what, f"shape {shape}, expected a non-empty (time, space) matrix")
    if problem:
        raise InvalidInput(what, problem)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > limits.max_array_bytes:
        raise InvalidInput(what, f"{nbytes} bytes, above the limit of {limits.max_array_bytes}")
    return nbytes


def refuse_symlinks(root: Path) -> None:
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


def read_npy_header(what: str, stream: Any) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, fortran_order) of a .npy header, leaving `stream` at the first data byte."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
    except (ValueError, TypeError, SyntaxError, tokenize.TokenError, *ZIP_ERRORS) as error:
        raise InvalidInput(
            what, f"not a plain .npy array (unreadable header: {quoted(error)})"
        ) from None
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
        order: Literal["C", "F"] = "F" if self.fortran_order else "C"
        mapped = np.memmap(
            self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=self.shape, order=order
        )
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
                self.what, f"{where} cannot be decoded ({type(error).__name__}: {quoted(error)})"
            ) from None


def mapped_npy(
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
        shape, dtype, fortran_order = read_npy_header(what, stream)
        offset = stream.tell()
    declared = offset - start + check_array(what, name, shape, dtype, expected, limits)
    if size != declared or start + size > path.stat().st_size:
        raise InvalidInput(
            what,
            f"holds {size} bytes, its .npy header declares {declared} (a "
            f"{shape} {dtype} array): truncated or padded",
        )
    return MappedArray(
        str(path.absolute()), offset, shape, dtype, fortran_order, path.stat().st_mtime_ns
    )


def chunk_bytes(array: zarr.Array) -> int:
    return (
        math.prod(getattr(array, "shards", None) or array.chunks) * np.dtype(array.dtype).itemsize
    )


def stored_object_keys(array: zarr.Array) -> list[str]:
    """Keys, relative to the array, of every object (chunk, or shard when sharded) its grid
    needs, in C order of the grid."""
    grid_chunks = getattr(array, "shards", None) or array.chunks
    grid = [range(math.ceil(n / c)) for n, c in zip(array.shape, grid_chunks, strict=True)]
    return [array.metadata.encode_chunk_key(coords) for coords in itertools.product(*grid)]


def refuse_missing_chunks(what: str, name: str, array: zarr.Array) -> None:
    """Every chunk (or shard) of a submitted array must be stored: zarr reads a missing one as
    its fill value, so a deleted chunk would be scored as zeros. `what`: the submission."""
    prefix = array.store_path.path

    async def listed() -> set[str]:
        return {key async for key in array.store_path.store.list_prefix(f"{prefix}/")}

    stored = {key.removeprefix(f"{prefix}/") for key in sync(listed())}
    missing = [key for key in stored_object_keys(array) if key not in stored]
    if missing:
        total = len(stored_object_keys(array))
        raise InvalidInput(
            f"{what}:{name}",
            f"chunk {name}/{missing[0]} is missing ({len(missing)} of {total} chunks missing); "
            "zarr would read it as the fill value, so the submission is refused: store every "
            "chunk (zarr writes chunks equal to the fill value only with "
            "config={'write_empty_chunks': True})",
        )


def group_arrays(
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
            what, f"no readable zarr group ({type(error).__name__}: {quoted(error)})"
        ) from None
    arrays = dict(sorted((path, node) for path, node in members if isinstance(node, zarr.Array)))
    nested = sorted(path for path in arrays if "/" in path)
    if nested:
        raise InvalidInput(
            what, f"arrays {nested} sit in nested groups; arrays must be at the group root"
        )
    refuse_names(what, arrays, expected)
    for name, array in arrays.items():
        check_array(f"{what}:{name}", name, array.shape, array.dtype, expected, limits)
        if chunk_bytes(array) > limits.max_chunk_bytes:
            raise InvalidInput(
                f"{what}:{name}",
                f"chunks of {chunk_bytes(array)} bytes, above "
                f"the limit of {limits.max_chunk_bytes}",
            )
    for name, array in arrays.items():
        refuse_missing_chunks(what, name, array)
    return arrays
