"""The steps every resumable ingest shares (waveforms, DAS): scan, create the store, resume an
unfinished one, check whether a complete one is up to date, mark and collect blocks, write the
coverage, finish, and reopen a complete store for an append.

A store being ingested holds `PROGRESS_VAR`, one string element (and chunk) per block of work:
"" until the block's chunks are written, then JSON {"coverage": fraction, "problems": [...]}.
Its attr `ATTR_FINGERPRINT` says which ingest (inputs and settings) it belongs to, so a re-run
of the same ingest resumes (only the unmarked blocks run) and any other ingest starts afresh.
Finishing writes the coverage, deletes the progress array and writes the attrs and the
completion marker last (`storage.finish_group`); the complete store keeps the fingerprint in its
attrs, so re-running the same ingest on it writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from zarr.errors import ZarrUserWarning

from seisctf import conventions as cv
from seisctf import storage, urls
from seisctf.cluster import compute
from seisctf.errors import InvalidInput

NS_PER_S = 1_000_000_000
PROGRESS_VAR = "ingest_progress"
ATTR_FINGERPRINT = "ingest_fingerprint"
BLOCK = "block"
_LEFT_FOLDER = f"Object at {PROGRESS_VAR} is not recognized as a component of a Zarr hierarchy"
# Scan tasks: files in batches (a header scan takes a few ms, about a task's own overhead), in
# about SCAN_TASKS tasks; above SCAN_TASKS x SCAN_BATCH_MAX files, batches of SCAN_BATCH_MAX
# (more tasks, so that a cluster of more than SCAN_TASKS workers shares the scan, each task
# a few seconds and its result ~0.3 MB).
SCAN_TASKS = 16
SCAN_BATCH_MAX = 1000


def open_store(url: str, storage_options: dict | None, mode: str = "r") -> Any:
    """The store's group, ignoring consolidated metadata (stale while an append runs, and
    absent before the store is finished)."""
    import zarr

    if mode == "r":
        urls.checked(url)
        try:
            return zarr.open_group(
                str(url),
                mode="r",
                storage_options=storage.options_for(url, storage_options),
                use_consolidated=False,
            )
        except (FileNotFoundError, zarr.errors.GroupNotFoundError) as error:
            raise InvalidInput(str(url), f"no zarr group found there ({error})") from None
    group = storage.open_group(url, storage_options, mode=mode)
    if mode == "w":
        return group
    return zarr.open_group(group.store, mode=mode, zarr_format=3, use_consolidated=False)


def iso_time(ns: int) -> str:
    """ISO 8601 UTC with only the fractional digits needed: `2018-01-01T00:00:00.0195Z`."""
    from obspy import UTCDateTime

    whole = UTCDateTime(ns=ns - ns % NS_PER_S).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{ns % NS_PER_S:09d}".rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


def fingerprint_of(parts: Any) -> str:
    """sha256 (hex) of `parts` as canonical JSON."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def fail_if_strict(strict: bool, problems: Sequence[str]) -> None:
    """With `strict`, any input problem is InvalidInput (naming the `strict` option)."""
    if strict and problems:
        raise InvalidInput("strict", f"{len(problems)} input problem(s): " + "; ".join(problems))


def scan_all(
    scan_batch: Callable[[list[str], dict | None], list],
    paths: Sequence[str],
    storage_options: dict | None,
    label: str,
    quiet: bool,
    join: Callable[[list, Sequence[str]], Any] | None = None,
) -> Any:
    """`scan_batch` (one scan per path) of every path, in Dask tasks of consecutive batches
    (about SCAN_TASKS, of at most SCAN_BATCH_MAX paths), in path order: one list, or what
    `join(batch results, paths)` makes of them (a scan task may return a table, not a list)."""
    import dask

    size = min(SCAN_BATCH_MAX, max(1, -(-len(paths) // SCAN_TASKS)))
    batches = [list(paths[i : i + size]) for i in range(0, len(paths), size)]
    scanned = compute(
        *[dask.delayed(scan_batch)(batch, storage_options) for batch in batches],
        label=label,
        quiet=quiet,
    )
    if join is not None:
        return join(list(scanned), paths)
    return [found for batch in scanned for found in batch]


def finished_store_attrs(url: str, storage_options: dict | None) -> dict[str, Any] | None:
    """The attrs of a complete store at `url`, or None (absent or unfinished)."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        return None
    attrs = dict(group.attrs)
    return attrs if attrs.get(cv.ATTR_COMPLETE) else None


def up_to_date_attrs(
    url: str, storage_options: dict | None, fingerprint: str
) -> dict[str, Any] | None:
    """The attrs of the complete store at `url` if the same ingest made it, else None."""
    existing = finished_store_attrs(url, storage_options)
    return existing if existing and existing.get(ATTR_FINGERPRINT) == fingerprint else None


def unfinished_progress(
    url: str, storage_options: dict | None, fingerprint: str, shape: tuple[int, ...]
) -> np.ndarray | None:
    """The progress array (of `shape`: the blocks of work) of an interrupted ingest of the same
    inputs and settings at `url`, or None (no store, a complete one, or another ingest's)."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        return None
    if group.attrs.get(cv.ATTR_COMPLETE) or PROGRESS_VAR not in group:
        return None
    progress = group[PROGRESS_VAR]
    if progress.attrs.get(ATTR_FINGERPRINT) != fingerprint or progress.shape != shape:
        return None
    return np.asarray(progress[:], dtype=object)


def no_progress(shape: tuple[int, ...]) -> np.ndarray:
    """The progress of an ingest that has written nothing yet."""
    return np.full(shape, "", dtype=object)


def create_progress(
    group: Any,
    progress: np.ndarray,
    dims: tuple[str, ...],
    fingerprint: str,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """The progress array (one chunk per block of work, replacing any), with `progress`'s
    values. Written last when a store is created or reopened, in one metadata write: a store
    that has it (with this fingerprint) is resumable."""
    if PROGRESS_VAR in group:
        del group[PROGRESS_VAR]
    array = group.create_array(
        PROGRESS_VAR,
        shape=progress.shape,
        chunks=(1,) * progress.ndim,
        dtype=str,
        fill_value="",
        dimension_names=dims,
        attributes={ATTR_FINGERPRINT: fingerprint, **(attributes or {})},
    )
    if any(progress.flat):
        array[:] = progress.astype(str)


def coverage_of(values: np.ndarray) -> float:
    """Fraction of valid (non-NaN) samples of a block."""
    return float(np.count_nonzero(~np.isnan(values)) / values.size)


def mark_done(progress: Any, index: Any, fraction: float, problems: Sequence[str]) -> None:
    """Mark one block done, after its chunks are written (a re-run skips it)."""
    progress[index] = done_entry(fraction, problems)


def done_entry(fraction: float, problems: Sequence[str] = (), **lists: Sequence) -> str:
    """A finished block's progress entry: coverage, problems and any other `lists` (JSON)."""
    return json.dumps(
        {"coverage": fraction, "problems": list(problems), **{k: list(v) for k, v in lists.items()}}
    )


def collect_list(
    progress: np.ndarray, results: Iterable[tuple[Any, Sequence]], name: str
) -> set[tuple]:
    """(block index, *item) of every item of the list `name` of every finished block: from
    `progress` (JSON or "") for blocks done before this run, from `results` ((index, items) of
    each block this run wrote) for the others. Items are sequences (JSON arrays)."""
    found = set()
    for index, text in np.ndenumerate(progress):
        if text:
            found.update((index, *item) for item in json.loads(text).get(name, []))
    for index, items in results:
        found.update((index, *item) for item in items)
    return found


def collect(
    progress: np.ndarray, results: Iterable[tuple[Any, float, Sequence[str]]]
) -> tuple[np.ndarray, set[str]]:
    """Coverage (of the progress's shape) and the problems of every finished block: of those
    done before this run from `progress` (JSON or ""), of the others from `results`,
    (index, coverage, problems) of each block this run wrote."""
    coverage = np.full(progress.shape, np.nan, dtype=np.float32)
    problems: set[str] = set()
    for index, text in np.ndenumerate(progress):
        if text:
            done = json.loads(text)
            coverage[index] = done["coverage"]
            problems.update(done["problems"])
    for index, fraction, found in results:
        coverage[index] = fraction
        problems.update(found)
    return coverage, problems


def kept_progress(old_coverage: np.ndarray, shape: tuple[int, ...], kept: np.ndarray) -> np.ndarray:
    """The progress of a store reopened for an append: every old block where `kept` (a bool
    array of `old_coverage`'s shape) is done, with its old coverage and no problem."""
    progress = no_progress(shape)
    for index in zip(*np.nonzero(kept), strict=True):
        progress[index] = done_entry(float(old_coverage[index]))
    return progress


def reopen_for_append(url: str, storage_options: dict | None, coverage_var: str) -> tuple:
    """(group, old coverage) of a complete store an append changes: its completion marker goes
    off first (from here on the store is being changed)."""
    group = open_store(url, storage_options, mode="r+")
    group.attrs[cv.ATTR_COMPLETE] = False
    return group, np.asarray(group[coverage_var][:])


def appendable_attrs(url: str, storage_options: dict | None, record: str) -> tuple[Any, dict]:
    """(group, attrs) of the store to append to: complete, or an interrupted append (its
    progress array and its old `record` attr still there: resumable)."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        raise InvalidInput(url, "`append` needs an existing store; ingest without it") from None
    attrs = dict(group.attrs)
    if not attrs.get(cv.ATTR_COMPLETE) and not (PROGRESS_VAR in group and record in attrs):
        raise InvalidInput(url, "`append` needs a complete store (this one is unfinished)")
    return group, attrs


def pending_append(url: str) -> InvalidInput:
    """The error of an append over another, interrupted append."""
    return InvalidInput(
        url,
        "an interrupted append of other files is pending: re-run that append, "
        "or ingest all files without `append`",
    )


def changed_input(path: str, url: str, recorded: str, now: str) -> InvalidInput:
    """The error of an input whose sha256 changed since it was ingested into `url`."""
    return InvalidInput(
        path,
        f"changed since it was ingested into {url} (sha256 {recorded[:12]}… "
        f"now {now[:12]}…); ingest without `append` to rebuild",
    )


def finish(
    url: str,
    storage_options: dict | None,
    coverage: np.ndarray,
    coverage_var: str,
    dims: tuple[str, ...],
    attrs: Mapping[str, Any],
    coverage_attrs: Mapping[str, Any] | None = None,
) -> None:
    """Write the coverage (replacing an append's old one), delete the progress array, then the
    attrs and the completion marker."""
    group = open_store(url, storage_options, mode="r+")
    if coverage_var in group:
        del group[coverage_var]
    array = group.create_array(
        coverage_var, shape=coverage.shape, dtype="float32", fill_value=np.nan, dimension_names=dims
    )
    if coverage_attrs:
        array.attrs.update(dict(coverage_attrs))
    array[:] = coverage
    del group[PROGRESS_VAR]
    # An object store with folders (SeaweedFS's filer) keeps the deleted progress array's
    # emptied folders; zarr's consolidation lists the group's folders and says of this one
    # "ZarrUserWarning: Object at ingest_progress is not recognized as a component of a Zarr
    # hierarchy". The folder holds nothing and the consolidated metadata leaves it out, as it
    # should: the warning says nothing a user can act on.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LEFT_FOLDER, category=ZarrUserWarning)
        storage.finish_group(url, dict(attrs), storage_options)
