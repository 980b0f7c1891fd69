"""An ingest's inputs: paths, globs, folders and fsspec URLs listed as files (`expand_sources`),
read whole (`read_input`), and named in a one-line message (the first few, then how many more)."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any

from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

SHOWN = 5  # inputs a message names before "and N more"
EMPTY_FOLDER = "no file in this folder or below it (hidden files are skipped)"
NO_OBJECT = "no such object, prefix or glob match"


def first_few(
    items: Sequence[str], separator: str = ", ", shown: int = SHOWN, total: int | None = None
) -> str:
    """The first `shown` of `items` joined, and "and N more" when there are more (`total`: how
    many there are, `items` their first `shown` or more; default: `len(items)`)."""
    total = len(items) if total is None else total
    text = separator.join(items[:shown])
    if total > shown:
        text += f"{separator}and {total - shown} more"
    return text


def nothing_readable(
    paths: Sequence[str],
    problems: Sequence[str],
    count: int | None = None,
    problem_count: int | None = None,
) -> InvalidInput:
    """The error of an ingest none of whose `paths` gave data: the first few files and their
    problems, and how many more (`paths`: every file given, or its first SHOWN + 1 of `count`;
    `problems`: every problem, or its first SHOWN of `problem_count`)."""
    count = len(paths) if count is None else count
    named = first_few(paths[:SHOWN])
    if count > SHOWN:
        named += f", and {count - SHOWN} more"
    return InvalidInput(
        named or "(no files)",
        f"no input is readable (none of the {count} file(s) given holds readable data): "
        + first_few(problems, "; ", total=problem_count),
    )


def is_url(path: str) -> bool:
    """An fsspec URL (`s3://…`, `gs://…`), read with fsspec; anything else is a local path."""
    return "://" in str(path) and not str(path).startswith("file://")


def filesystem(location: StoreLocation) -> tuple[Any, str]:
    """(the fsspec filesystem of `location`, its protocol: `s3`, `file`, ...)."""
    fs, _ = location.filesystem()
    return fs, fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]


def read_input(source: StoreLocation) -> bytes:
    """All bytes of one input file (a local path, or an fsspec URL with its storage options)."""
    if is_url(source.url):
        import fsspec

        with fsspec.open(source.url, "rb", **(source.options or {})) as handle:
            return handle.read()
    with open(source.url, "rb") as handle:
        return handle.read()


def expand_sources(sources: Sequence[str], storage_options: dict | None = None) -> list[str]:
    """Paths, globs and folders (an SDS root or any tree: every file below it, hidden ones
    skipped) -> sorted unique file paths; fsspec URLs (`s3://bucket/archive/**`) likewise, with
    `storage_options`. A source matching nothing, or only folders without files, is bad input."""
    found: set[str] = set()
    for source in sources:
        if is_url(source):
            found.update(urls_below(StoreLocation(source, storage_options)))
            continue
        matches = sorted(glob.glob(source, recursive=True)) if glob.has_magic(source) else [source]
        matches = [m for m in matches if os.path.exists(m)]
        if not matches:
            raise InvalidInput(source, "no such file, folder or glob match")
        files = [f for m in matches for f in (files_below(m) if os.path.isdir(m) else [m])]
        if not files:
            raise InvalidInput(source, EMPTY_FOLDER)
        found.update(os.path.normpath(f) for f in files)
    return sorted(found)


def urls_below(location: StoreLocation) -> list[str]:
    """Object URLs of one fsspec source: an object, a prefix (all objects below) or a glob."""
    fs, protocol = filesystem(location)
    source = location.url
    try:
        if glob.has_magic(source):
            names = [n for n in fs.glob(source) if not fs.isdir(n)]
        elif fs.isdir(source):
            names = fs.find(source)
        else:
            names = [source] if fs.exists(source) else []
    except OSError as error:
        raise InvalidInput(source, f"cannot list it ({error})") from None
    names = [n.split("://", 1)[-1] for n in names]
    names = [n for n in names if not any(part.startswith(".") for part in n.split("/"))]
    if not names:
        raise InvalidInput(source, NO_OBJECT)
    return [f"{protocol}://{name}" for name in names]


def files_below(root: str) -> list[str]:
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        files += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    return [os.path.normpath(f) for f in files]
