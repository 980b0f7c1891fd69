"""The listing of an ingest's folder sources, in parts listed by tasks on the workers.

The client walks the top of the folders' structure only: breadth first, from the sources, until
it has LIST_TASKS folders or more to hand out (or nothing left to go down into), whatever the
archive's size; those folders are the roots. Each task (at most LIST_TASKS, each of consecutive
roots) walks its roots' subtrees on a worker: it goes down through folders that hold folders
alone (an SDS tree's year, network and station levels) and stops at the first folder holding a
file (a channel's folder); each such folder's subtree is a unit, listed (paths, sizes,
modification: `input_manifest.file_stats`) and kept on the worker. Units and roots are sorted
by their path with a trailing separator: every path below one begins with it, so the listings,
each sorted, follow one another in path order. The scan's batches (`resumable`'s batch size over
all files) are cut from the tasks' listings by tasks too: the client holds the roots and each
root's file count, never a unit or a path below a root.

Sources that are not all folders (a file, a glob) or that overlap are listed by the client as
before (`input_listing.expand_sources`).
"""

from __future__ import annotations

import glob
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.cluster import compute, kept
from seisctf.errors import InvalidInput
from seisctf.formats.shared import input_locality, input_manifest, resumable
from seisctf.formats.shared.input_listing import (
    EMPTY_FOLDER,
    NO_OBJECT,
    files_below,
    filesystem,
    is_url,
    urls_below,
)
from seisctf.formats.shared.input_manifest import InputStats
from seisctf.location import StoreLocation

# Tasks listing the units, each of consecutive units: an SDS tree has a unit per channel and
# year, thousands of them, and a task each would cost the client and scheduler a key each.
LIST_TASKS = 64


@dataclass(frozen=True)
class Listed:
    """A listing in parts: per batch of the scan, its `InputStats` (kept), and the count."""

    batches: list[Any]
    files: int


def _hidden(name: str) -> bool:
    return name.rsplit("/", 1)[-1].startswith(".")


def _children(location: StoreLocation) -> tuple[list[str], bool]:
    """The subfolders of the folder at `location` (not hidden) and whether it holds a file
    itself."""
    folder = location.url
    if is_url(folder):
        fs, protocol = _filesystem(location)
        try:
            entries = fs.ls(folder, detail=True)
        except OSError as error:
            raise InvalidInput(folder, f"cannot list it ({error})") from None
        names = [(e["name"].split("://", 1)[-1].rstrip("/"), e["type"]) for e in entries]
        return (
            [f"{protocol}://{n}" for n, kind in names if kind == "directory" and not _hidden(n)],
            any(kind != "directory" and not _hidden(n) for n, kind in names),
        )
    folders, has_file = [], False
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir():  # as os.walk (`files_below`): into no linked folder
                if not entry.is_symlink():
                    folders.append(os.path.normpath(entry.path))
            else:
                has_file = True
    return folders, has_file


def _filesystem(location: StoreLocation) -> tuple[Any, str]:
    fs, protocol = filesystem(location)
    fs.invalidate_cache()  # a listing cached earlier may predate a change
    return fs, protocol


def _is_folder(location: StoreLocation) -> bool:
    source = location.url
    if glob.has_magic(source):
        return False
    if is_url(source):
        fs, _ = _filesystem(location)
        try:
            return bool(fs.isdir(source))
        except OSError:
            return False
    return os.path.isdir(source)


def _key(unit: str) -> str:
    """A unit's sort key: its path with a trailing separator (module doc)."""
    return unit.rstrip("/") + "/"


def _root(source: str) -> str:
    return source.rstrip("/") if is_url(source) else os.path.normpath(source)


def roots_of(sources: Sequence[str], storage_options: dict | None) -> list[str] | None:
    """The roots (module doc) of `sources`, in path order; None when a source is not a folder
    or two sources overlap (the client lists them). The client lists at most the folders it
    goes down into: none holding a file."""
    if not sources or not all(_is_folder(StoreLocation(s, storage_options)) for s in sources):
        return None
    roots = sorted((_root(source) for source in sources), key=_key)
    keys = [_key(root) for root in roots]
    if any(b.startswith(a) for a, b in zip(keys, keys[1:], strict=False)):
        return None  # overlapping sources
    whole: set[str] = set()  # roots to walk as they are: they hold a file, or nothing
    while len(roots) < LIST_TASKS and len(whole) < len(roots):
        below = []
        for folder in roots:
            if folder in whole:
                below.append(folder)
                continue
            subfolders, has_file = _children(StoreLocation(folder, storage_options))
            if has_file or not subfolders:
                whole.add(folder)
                below.append(folder)
            else:
                below += subfolders
        roots = sorted(below, key=_key)
    return roots


def units_below(root: str, storage_options: dict | None) -> list[str]:
    """The units (module doc) below the folder `root`, in path order (a task's)."""
    units, pending = [], [root]
    while pending:
        folder = pending.pop()
        subfolders, has_file = _children(StoreLocation(folder, storage_options))
        if has_file:
            units.append(folder)
        else:
            pending += subfolders
    return sorted(units, key=_key)


def list_roots(roots: Sequence[str], storage_options: dict | None) -> tuple[InputStats, list[int]]:
    """The files below each of `roots` (hidden ones skipped), in path order, with their stats,
    and how many each root holds (a task)."""
    found = [
        [
            path
            for unit in units_below(root, storage_options)
            for path in sorted(
                urls_below(StoreLocation(unit, storage_options))
                if is_url(unit)
                else files_below(unit)
            )
        ]
        for root in roots
    ]
    paths = [path for root in found for path in root]
    return input_manifest.file_stats(paths, storage_options), [len(root) for root in found]


def cut(first: int, stop: int, starts: Sequence[int], *listings: tuple) -> InputStats:
    """Files `first`..`stop`-1 of all units (`starts`: the index of each listing's first
    file; `listings`: those (`list_units`) holding some of them, in order) as one
    `InputStats`."""
    paths: list[str] = []
    sizes, modified = [], []
    for start, (listing, _) in zip(starts, listings, strict=True):
        piece = slice(max(first - start, 0), max(min(stop - start, len(listing.paths)), 0))
        paths += listing.paths[piece]
        sizes.append(listing.sizes[piece])
        modified.append(listing.modified[piece])
    return InputStats(tuple(paths), np.concatenate(sizes), np.concatenate(modified))


def listed(
    sources: Sequence[str], roots: Sequence[str], storage_options: dict | None, quiet: bool
) -> Listed:
    """The roots' listings cut into the scan's batches, kept on the workers (module doc): at
    most LIST_TASKS tasks list consecutive roots each. A source with no file below it is bad
    input, as for the client's listing."""
    import dask

    size = max(1, -(-len(roots) // LIST_TASKS))
    groups = [list(roots[i : i + size]) for i in range(0, len(roots), size)]
    listings = kept([dask.delayed(list_roots)(group, storage_options) for group in groups],
                    "list the inputs", quiet)  # fmt: skip
    found = compute(*[dask.delayed(_counts)(listing) for listing in listings], quiet=True)
    counts = [count for group in found for count in group]
    for source in sources:
        below = [n for root, n in zip(roots, counts, strict=True) if _within(root, source)]
        if not sum(below):
            raise InvalidInput(source, NO_OBJECT if is_url(source) else EMPTY_FOLDER)
    starts = np.concatenate([[0], np.cumsum([sum(group) for group in found])]).astype(np.int64)
    total = int(starts[-1])
    size = resumable.batch_size(total)
    batches = []
    for first in range(0, total, size):
        stop = min(first + size, total)
        held = np.flatnonzero((starts[:-1] < stop) & (starts[1:] > first)).tolist()
        batches.append(dask.delayed(cut)(first, stop, [int(starts[g]) for g in held],
                                         *[listings[g] for g in held]))  # fmt: skip
    return Listed(kept(batches, "", True), total)


def _counts(listing: tuple[InputStats, list[int]]) -> list[int]:
    return listing[1]


def _within(folder: str, source: str) -> bool:
    return _key(folder).startswith(_key(_root(source)))


def scan_tasks(
    scan: Any, listing: Listed, storage_options: dict | None, name: str, label: str, quiet: bool
) -> list[Any]:
    """`scan(paths, storage_options)` of each of the listing's batches, kept where computed
    (keys `name-token-i`, as `resumable.scan_tasks`' are named after the scan), placed in path
    order (`input_locality.in_path_order`)."""
    import dask

    token = uuid.uuid4().hex
    make = lambda i: dask.delayed(_scan_listed)(  # noqa: E731
        scan, listing.batches[i], storage_options, dask_key_name=f"{name}-{token}-{i}"
    )
    placed = input_locality.in_path_order(make, len(listing.batches))
    return kept([placed(i) for i in range(len(listing.batches))], label, quiet)


def _scan_listed(scan: Any, stats: InputStats, storage_options: dict | None) -> Any:
    return scan(list(stats.paths), storage_options)
