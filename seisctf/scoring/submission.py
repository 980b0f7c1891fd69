"""Submission intake: a zarr group (path or URL), a .zip of one, an .npz, or a folder of .npy.

Submissions are data, never code: numpy files are read with `allow_pickle=False`, and every array
must be named, shaped and typed exactly as the manifest says. Values are checked for finiteness
lazily, in the same pass as scoring.
"""

from __future__ import annotations

import functools
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput


def expected_shapes(manifest: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {pair["test"]: tuple(pair["shape"]) for pair in manifest["pairs"]}


def _zarr_group_arrays(group: zarr.Group) -> dict[str, Any]:
    return {name: array for name, array in group.arrays()}


def _zip_arrays(path: Path) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile as error:
        raise InvalidInput(str(path), f"not a readable zip file ({error})") from None
    roots = sorted(
        {name.rsplit("zarr.json", 1)[0] for name in names if name.endswith("zarr.json")}, key=len
    )
    if not roots:
        raise InvalidInput(str(path), "zip holds no zarr group (no zarr.json)")
    store = zarr.storage.ZipStore(path, mode="r")
    group = zarr.open_group(store, mode="r", path=roots[0].rstrip("/") or None)
    return _zarr_group_arrays(group)


@dataclass(frozen=True)
class NpzMember:
    """One array of an .npz, known by its header only: nothing is decompressed until a block is
    read, so names, shapes and dtypes are checked before any data is loaded."""

    path: str
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        return _load_npz_member(self.path, self.name)[key]


@functools.lru_cache(maxsize=4)
def _load_npz_member(path: str, name: str) -> np.ndarray:
    with np.load(path, allow_pickle=False) as archive:
        return archive[name]


def _npy_header(stream: Any) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    return tuple(shape), dtype


def _npz_arrays(path: Path) -> dict[str, Any]:
    if not zipfile.is_zipfile(path):
        raise InvalidInput(str(path), "not an .npz archive (a zip of .npy files)")
    members = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if not info.filename.endswith(".npy") or "/" in name:
                raise InvalidInput(f"{path}:{info.filename}", "not a top-level .npy member")
            try:
                with archive.open(info) as stream:
                    shape, dtype = _npy_header(stream)
            except ValueError as error:
                raise InvalidInput(f"{path}:{name}", f"unreadable .npy header ({error})") from None
            if dtype.hasobject:
                raise InvalidInput(f"{path}:{name}", "object arrays (pickles) are refused")
            members[name] = NpzMember(str(path), name, shape, dtype)
    return members


def _npy_folder_arrays(path: Path) -> dict[str, Any]:
    arrays = {}
    for file in sorted(path.glob("*.npy")):
        try:
            arrays[file.stem] = np.load(file, mmap_mode="r", allow_pickle=False)
        except ValueError as error:
            raise InvalidInput(str(file), f"cannot read as a plain .npy array ({error})") from None
    return arrays


def read_submission_arrays(
    source: str | Mapping[str, Any], storage_options: storage.StorageOptions | None = None
) -> dict:
    """Raw arrays (numpy, memmap, zarr or Dask) by name, from any supported submission format
    or from a mapping of arrays (a submission made in Python)."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    if not storage.is_remote(source):
        if not path.exists():
            raise InvalidInput(source, "submission not found")
        if path.suffix == ".npz":
            return _npz_arrays(path)
        if path.suffix == ".zip":
            return _zip_arrays(path)
        if path.is_dir() and not (path / "zarr.json").exists() and any(path.glob("*.npy")):
            return _npy_folder_arrays(path)
    return _zarr_group_arrays(storage.open_group(source, storage_options))


def open_submission(
    source: str | Mapping[str, Any],
    manifest: Mapping[str, Any],
    storage_options: storage.StorageOptions | None = None,
) -> dict[str, da.Array]:
    """Validate names, shapes and dtypes; return float64 Dask arrays chunked like the truth."""
    arrays = read_submission_arrays(source, storage_options)
    if isinstance(source, Mapping):
        source = "submission"
    shapes = expected_shapes(manifest)
    missing = sorted(set(shapes) - set(arrays), key=cv.TEST_NAMES.index)
    unexpected = sorted(set(arrays) - set(shapes))
    if missing:
        raise InvalidInput(source, f"missing arrays {missing}")
    if unexpected:
        raise InvalidInput(
            source, f"unexpected arrays {unexpected}; expected exactly {sorted(shapes)}"
        )
    opened = {}
    for name, shape in shapes.items():
        array = arrays[name]
        if tuple(array.shape) != shape:
            raise InvalidInput(f"{source}:{name}", f"shape {tuple(array.shape)}, expected {shape}")
        if np.dtype(array.dtype).kind != "f":
            raise InvalidInput(f"{source}:{name}", f"dtype {array.dtype}, expected floating point")
        chunks = cv.time_space_chunks(*shape)
        if isinstance(array, da.Array):
            opened[name] = array.rechunk(chunks).astype(np.float64)
        else:
            opened[name] = da.from_array(array, chunks=chunks, asarray=True).astype(np.float64)
    return opened
