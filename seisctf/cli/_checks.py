"""Checks of a verb's inputs cheap enough to run before its cluster starts: local paths exist and
are of the right kind (a zarr group, a file, a folder). URLs of object stores are left to the
library (reaching them takes a connection). Each raises InvalidInput naming the path and what
was expected, in the words the library uses when it meets the same fault later.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from seisctf import conventions as cv
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.scoring.submission_names import MAX_MEMBERS, refuse_names

GLOB_CHARACTERS = "*?["
# A submission's .npz lists a few dozen members: its names are read before the cluster only
# when its central directory is this small.
MAX_ZIP_DIRECTORY_BYTES = 2**16


def local_path(url: str | None) -> Path | None:
    """The local path a URL or path names (`file://` stripped); None for another scheme."""
    if url is None:
        return None
    text = str(url)
    if text.startswith("file://"):
        return Path(text.removeprefix("file://"))
    return None if "://" in text else Path(text)


def zarr_group(url: str | None) -> None:
    """A local `url` must be a folder holding a zarr group (`zarr.json`; `.zgroup`: zarr v2)."""
    path = local_path(url)
    if path is None:
        return
    if not path.exists():
        raise InvalidInput(str(url), f"no zarr group found there ({path} does not exist)")
    if not path.is_dir():
        raise InvalidInput(str(url), "no zarr group found there (a file, not a zarr folder)")
    if not (path / "zarr.json").is_file() and not (path / ".zgroup").is_file():
        raise InvalidInput(str(url), "no zarr group found there (a folder without zarr.json)")


def group_attrs(url: str | None) -> dict[str, Any] | None:
    """The attrs of a local zarr v3 group (its `zarr.json`), or None where they cannot be read
    cheaply (a URL, zarr v2, a damaged file: the library reports those)."""
    path = local_path(url)
    document = None if path is None else zarr_document(path / "zarr.json")
    attrs = None if document is None else document.get("attributes")
    return attrs if isinstance(attrs, dict) else None


def existing(url: str | None, *, kind: str = "path") -> None:
    """A local `url` must exist; `kind` "file" or "folder" also says which it must be."""
    path = local_path(url)
    if path is None:
        return
    if not path.exists():
        raise InvalidInput(str(url), f"{kind} not found ({path} does not exist)")
    if kind == "file" and path.is_dir():
        raise InvalidInput(str(url), "a folder; expected a file")
    if kind == "folder" and not path.is_dir():
        raise InvalidInput(str(url), "a file; expected a folder")


def sources(urls: Iterable[str]) -> None:
    """Ingest sources: each local path exists, each local glob matches something."""
    for url in urls:
        path = local_path(url)
        if path is None:
            continue
        if any(character in str(path) for character in GLOB_CHARACTERS):
            if not glob.glob(str(path), recursive=True):
                raise InvalidInput(str(url), "no file matches this pattern")
        else:
            existing(url)


def ctf_manifest(url: str | None) -> CtfManifest | None:
    """The CTF manifest of a complete local bundle group (truth or public), read from its
    `zarr.json`, else None; InvalidInput naming the field when the manifest is malformed."""
    attrs = group_attrs(url) or {}
    if attrs.get(cv.ATTR_COMPLETE) is not True or cv.ATTR_CTF not in attrs:
        return None
    return CtfManifest.from_attrs(attrs, str(url))


def expected_shapes(
    manifest: CtfManifest, *, validation: bool = False
) -> dict[str, tuple[int, int]] | None:
    """Array name -> (time steps, sensors) a submission holds: the pairs' test arrays, or with
    `validation` the public validation targets (None for a bundle without them)."""
    if not validation:
        return manifest.test_shapes()
    if manifest.validation is None:
        return None
    return {target.target: target.shape for target in manifest.validation}


def submission_arrays(source: str, expected: Mapping[str, tuple[int, ...]]) -> None:
    """A local submission names exactly the expected arrays (.npz members, .npy files of a
    folder, arrays of a zarr folder), and a zarr folder's arrays declare the expected shapes.
    Read from names and JSON metadata only: nothing is decompressed or loaded; what cannot be
    listed cheaply (a zipped group, a damaged file) is left to the referee's intake."""
    path = local_path(source)
    if path is None or not path.exists() or path.is_symlink():
        return
    shapes: dict[str, Any] = {}
    if (path / ".zgroup").exists():  # zarr v2: left to the intake
        return
    if path.is_dir() and (path / "zarr.json").is_file():
        for member in sorted(path.iterdir()):
            metadata = zarr_document(member / "zarr.json")
            if metadata is not None and metadata.get("node_type") == "group":
                return  # a nested group: the intake names the arrays inside it
            if metadata is not None and metadata.get("node_type") == "array":
                shapes[member.name] = metadata.get("shape")
    elif path.is_dir():
        shapes = {file.stem: None for file in path.iterdir() if file.suffix == ".npy"}
        if not shapes:
            return  # no zarr group and no .npy files: the intake says so
    elif path.suffix == ".npz" and small_zip_directory(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (OSError, zipfile.BadZipFile, ValueError):
            return
        if len(names) > MAX_MEMBERS or any("/" in name or "\\" in name for name in names):
            return  # too many members or paths inside: the intake screens them (zip-slip)
        shapes = {name.removesuffix(".npy"): None for name in names if name.endswith(".npy")}
    else:
        return
    refuse_names(source, shapes, expected)
    for name, shape in shapes.items():
        if isinstance(shape, list) and tuple(shape) != expected[name]:
            raise InvalidInput(
                f"{source}:{name}", f"shape {tuple(shape)}, expected {expected[name]}"
            )


def small_zip_directory(path: Path) -> bool:
    """Whether a zip's end record (not zip64) declares a central directory of at most
    `MAX_ZIP_DIRECTORY_BYTES`, so listing it is cheap whatever the archive claims."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - 22 - 2**16))
            tail = file.read()
    except OSError:
        return False
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return False
    count, directory_bytes = struct.unpack_from("<HI", tail, at + 10)
    return count < 0xFFFF and directory_bytes <= MAX_ZIP_DIRECTORY_BYTES


def zarr_document(path: Path) -> dict[str, Any] | None:
    """A zarr v3 metadata document (`zarr.json`) as a dict, or None if it does not read."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None
