"""The steps every resumable ingest shares (waveforms, DAS): scan, create the store, resume an
unfinished one, check whether a complete one is up to date, mark and collect blocks, write the
coverage, finish, and reopen a complete store for an append.

Work is done in runs: consecutive blocks of data (waveforms: of one station; DAS: one block);
a block no input touches costs nothing (no task, no progress, no chunk: coverage 0).
A store being ingested holds `PROGRESS_VAR`, one string element (and chunk) per run: "" until
the run's chunks are written, then its record, JSON {"coverage": [...], "problems": [[...]],
...} with one entry per block. Its attr `ATTR_FINGERPRINT` says which ingest (inputs and
settings) it belongs to, so a re-run of the same ingest resumes (one listing finds the records
written; only the other runs run) and any other ingest starts afresh. An append also keeps the
old coverage (`BASE_VAR`) until it finishes. Finishing writes the coverage (by tasks, from the
records: `coverage_parts`), deletes the progress and writes the attrs and the completion marker
last (`storage.finish_group`); the
complete store keeps the fingerprint in its attrs, so re-running the same ingest on it writes
nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from zarr.errors import ZarrUserWarning

from seisctf import conventions as cv
from seisctf import storage, urls
from seisctf.cluster import cluster_workers, compute
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

NS_PER_S = 1_000_000_000
PROGRESS_VAR = "ingest_progress"
# An append's coverage of the store's old blocks, kept while it runs (its old `coverage` is
# replaced at the end).
BASE_VAR = "ingest_progress_base"
RECORD = "record"
ATTR_FINGERPRINT = "ingest_fingerprint"
BLOCK = "block"
# Scan tasks: files in batches of consecutive paths (a header scan takes a few ms, about a
# task's own overhead), SCAN_TASKS_PER_WORKER a worker of the cluster and at least SCAN_TASKS
# in all. Each batch is a partition of the plan, whose handles and summaries the client holds:
# their number follows the cluster, not the archive (docs/scaling.md).
SCAN_TASKS = 16
SCAN_TASKS_PER_WORKER = 8


def open_store(store: StoreLocation, mode: storage.AccessMode = "r") -> Any:
    """The store's group, ignoring consolidated metadata (stale while an append runs, and
    absent before the store is finished)."""
    import zarr

    if mode == "r":
        url = urls.checked(store.url)
        try:
            return zarr.open_group(
                url, mode="r", storage_options=store.options, use_consolidated=False
            )
        except (FileNotFoundError, zarr.errors.GroupNotFoundError) as error:
            raise InvalidInput(url, f"no zarr group found there ({error})") from None
    group = storage.open_group(store, mode=mode)
    if mode == "w":
        return group
    return zarr.open_group(group.store, mode=mode, zarr_format=3, use_consolidated=False)


def iso_time(ns: int) -> str:
    """ISO 8601 UTC with only the fractional digits needed: `2018-01-01T00:00:00.0195Z`."""
    # numpy, not obspy's UTCDateTime: the client of an ingest need not import obspy for this.
    whole = np.datetime_as_string(np.datetime64(ns - ns % NS_PER_S, "ns"), unit="s")
    fraction = f"{ns % NS_PER_S:09d}".rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


@dataclass(frozen=True, eq=False)
class SortedDigests:
    """A value of `fingerprint_of`'s `parts` standing for the sorted list of the hex text of each
    row of `digests` ((file, 32) uint8: sha256), hashed a piece at a time, no string per row."""

    digests: np.ndarray


# Rows of a `SortedDigests` made into text at a time (~1.3 MB of it).
DIGESTS_PER_PIECE = 2**14
_STAND_IN = "\u0000digests\u0000"


def fingerprint_of(parts: Any) -> str:
    """sha256 (hex) of `parts` as canonical JSON; a top-level `SortedDigests` value is hashed as
    the JSON list of its hex digests, sorted (the same hash as that list would give)."""
    listed = {k: v for k, v in parts.items() if isinstance(v, SortedDigests)} if isinstance(
        parts, dict) else {}  # fmt: skip
    if not listed:
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    stand_ins = {key: f"{_STAND_IN}{key}" for key in listed}
    text = json.dumps({**parts, **stand_ins}, sort_keys=True)
    digest = hashlib.sha256()
    for key in sorted(listed):
        before, text = text.split(json.dumps(stand_ins[key]), 1)
        digest.update(before.encode())
        _hash_sorted_hex(digest, listed[key].digests)
    digest.update(text.encode())
    return digest.hexdigest()


def _hash_sorted_hex(digest: Any, rows: np.ndarray) -> None:
    """Feed `digest` the JSON list of the sorted hex text of `rows` ((n, width) uint8)."""
    width = rows.shape[1] if rows.ndim == 2 else 0
    ordered = np.sort(np.ascontiguousarray(rows).view(f"S{width}").ravel()) if width else rows
    digest.update(b"[")
    for start in range(0, len(ordered), DIGESTS_PER_PIECE):
        text = ordered[start : start + DIGESTS_PER_PIECE].tobytes().hex()
        step = 2 * width
        piece = '", "'.join(text[i : i + step] for i in range(0, len(text), step))
        digest.update(((", " if start else "") + f'"{piece}"').encode())
    digest.update(b"]")


def fail_if_strict(strict: bool, problems: Sequence[str]) -> None:
    """With `strict`, any input problem is InvalidInput (naming the `strict` option)."""
    if strict and problems:
        raise InvalidInput("strict", f"{len(problems)} input problem(s): " + "; ".join(problems))


def batch_size(files: int, workers: int | None = None) -> int:
    """Files in each scan batch of `files` (`scan_tasks`) on `workers` (None: the active
    cluster's, `cluster.cluster_workers`)."""
    workers = cluster_workers() if workers is None else workers
    return max(1, -(-files // max(SCAN_TASKS, SCAN_TASKS_PER_WORKER * workers)))


def scan_tasks(
    scan_batch: Callable[[list[str], dict | None], Any],
    paths: Sequence[str],
    storage_options: dict | None,
    place: Callable[[Callable[[int], Any], int], Callable[[int], Any]] | None = None,
) -> list[Any]:
    """Dask tasks of `scan_batch` of consecutive batches of `paths` (`batch_size`), in path
    order; `place(make_task, count)`: how they are built
    (e.g. `input_locality.in_path_order`)."""
    import dask

    size = batch_size(len(paths))
    batches = [list(paths[i : i + size]) for i in range(0, len(paths), size)]
    make = lambda i: dask.delayed(scan_batch)(batches[i], storage_options)  # noqa: E731
    make = place(make, len(batches)) if place else make
    return [make(index) for index in range(len(batches))]


def finished_store_attrs(store: StoreLocation) -> dict[str, Any] | None:
    """The attrs of a complete store at `store`, or None (absent or unfinished)."""
    try:
        group = open_store(store)
    except InvalidInput:
        return None
    attrs = dict(group.attrs)
    return attrs if attrs.get(cv.ATTR_COMPLETE) else None


def up_to_date_attrs(store: StoreLocation, fingerprint: str) -> dict[str, Any] | None:
    """The attrs of the complete store at `store` if the same ingest made it, else None."""
    existing = finished_store_attrs(store)
    return existing if existing and existing.get(ATTR_FINGERPRINT) == fingerprint else None


# A resume reads the done runs' records (one object each) in tasks of this many.
RECORDS_PER_TASK = 1024


@dataclass(frozen=True)
class Progress:
    """What an interrupted ingest of the same inputs and settings finished: `done`, {record
    number: record} (as written, or `counted_record`'s);
    `records`, how many runs it has (None: none begun); `attributes`, those `create_progress`
    was given. (An append's coverage of the store's old blocks stays in the store, `BASE_VAR`,
    read where the coverage is written.)"""

    done: dict[int, dict[str, list]] = field(default_factory=dict)
    records: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


def unfinished_progress(
    store: StoreLocation, fingerprint: str, counted: bool = False
) -> Progress | None:
    """The progress of an interrupted ingest of the same inputs and settings at `store`, or
    None (no store, a complete one, or another ingest's). Reads the records written (one
    listing, then those chunks alone: by tasks, `RECORDS_PER_TASK` each, when there are more;
    one object a record, so a resume of 10^5 runs reads in parallel, not here one at a time);
    `counted`: each record's problems counted, not listed (`counted_record`: a client resuming
    holds no line; the records keep them)."""
    found = _progress_array(store, fingerprint)
    if found is None:
        return None
    _, array = found
    numbers = written_chunks(array)
    if len(numbers) <= RECORDS_PER_TASK:
        done = read_records(array, numbers, counted)
    else:
        import dask

        ranges = [
            numbers[i : i + RECORDS_PER_TASK] for i in range(0, len(numbers), RECORDS_PER_TASK)
        ]
        tasks = [dask.delayed(_records_at)(store, some, counted) for some in ranges]
        done = {n: record for part in compute(*tasks, quiet=True) for n, record in part.items()}
    return Progress(done, array.shape[0], dict(array.attrs))


def _records_at(store: StoreLocation, numbers: Sequence[int], counted: bool) -> dict[int, Any]:
    """`read_records` of the progress array of `store` (a task's)."""
    return read_records(open_store(store)[PROGRESS_VAR], numbers, counted)


def read_records(array: Any, numbers: Sequence[int], counted: bool = False) -> dict[int, Any]:
    """{number: record} of the records `numbers` of the progress `array` that are written,
    `counted` (`counted_record`) or as written."""
    texts = array.get_orthogonal_selection((np.array(numbers, dtype=np.int64),)) if numbers else []
    read = counted_record if counted else (lambda record: record)
    return {n: read(json.loads(text)) for n, text in zip(numbers, texts, strict=True) if text}


def unfinished_records(
    store: StoreLocation, fingerprint: str, numbers: Sequence[int]
) -> tuple[dict[str, Any], dict[int, dict[str, list]]] | None:
    """(the progress array's attributes, {number: record} of the runs `numbers` alone) of the
    interrupted ingest `unfinished_progress` would find, or None: no listing, no other record
    and not the coverage an append keeps."""
    found = _progress_array(store, fingerprint)
    if found is None:
        return None
    _, array = found
    return dict(array.attrs), read_records(array, sorted(numbers))


def _progress_array(store: StoreLocation, fingerprint: str) -> tuple[Any, Any] | None:
    """(group, its progress array) of the unfinished ingest of `fingerprint` at `store`, or
    None (no store, a complete one, or another ingest's)."""
    try:
        group = open_store(store)
    except InvalidInput:
        return None
    if group.attrs.get(cv.ATTR_COMPLETE) or PROGRESS_VAR not in group:
        return None
    array = group[PROGRESS_VAR]
    if array.attrs.get(ATTR_FINGERPRINT) != fingerprint or array.ndim != 1:
        return None
    return group, array


def written_chunks(array: Any) -> list[int]:
    """The chunk numbers of a 1-D zarr v3 array that are stored, sorted (one listing of its
    chunk prefix: O(chunks written), whatever its length)."""
    from zarr.core.sync import sync

    inner = array._async_array
    prefix = inner.metadata.encode_chunk_key((0,)).rsplit("0", 1)[0]  # "c/" by default
    path = f"{inner.store_path.path}/{prefix}"

    async def listed() -> list[str]:
        return [key async for key in inner.store_path.store.list_prefix(path)]

    names = (key[len(path) :] for key in sync(listed()))
    return sorted(int(name) for name in names if name.isdigit())  # not a write's temporary file


def create_progress(
    group: Any, records: int, fingerprint: str, attributes: Mapping[str, Any] | None = None
) -> None:
    """The progress array, `records` empty strings, one chunk per record (replacing any).
    Written last when a store is created or reopened (after an append's kept coverage,
    `coverage_parts.write_base`), in one metadata write: a store that has it (with this
    fingerprint) is resumable."""
    if PROGRESS_VAR in group:
        del group[PROGRESS_VAR]
    group.create_array(
        PROGRESS_VAR,
        shape=(records,),
        chunks=(1,),
        dtype=str,
        fill_value="",
        dimension_names=(RECORD,),
        attributes={ATTR_FINGERPRINT: fingerprint, **(attributes or {})},
    )


def coverage_of(values: np.ndarray) -> float:
    """Fraction of valid (non-NaN) samples of a block."""
    return float(np.count_nonzero(~np.isnan(values)) / values.size)


def run_record(
    coverage: Sequence[float], problems: Sequence[Sequence[str]], **lists: Any
) -> dict[str, list]:
    """A finished run's record: per block of the run its coverage, its problems and any other
    `lists` (each a list with one JSON list per block)."""
    return {"coverage": list(coverage), "problems": [list(p) for p in problems], **lists}


def counted_record(record: dict[str, list]) -> dict[str, Any]:
    """A run's record as a task returns it to the client (and a resume reads it there): its
    problems counted (`problem_count`), and its `lost` items when it has any. Neither its lines
    (a task reads them in the progress array, `problem_lines.decode_problems`) nor its coverage
    (tasks write the coverage from the progress array, `coverage_parts`): a few bytes a run,
    not a list per block."""
    counted: dict[str, Any] = {"problem_count": sum(len(found) for found in record["problems"])}
    if any(record.get("lost") or ()):
        counted["lost"] = record["lost"]
    return counted


def record_write(progress: Any, number: int, record: dict[str, list]) -> tuple:
    """The `chunk_writes.write_chunks` item storing `record` as record `number`, JSON
    (`progress`: a ChunkWriter of the progress array)."""
    return (progress, (number,), np.array([json.dumps(record)], dtype=object))


class Collected:
    """`runs_with_problems` (the numbers of the runs whose records have problems, listed or
    counted: `counted_record`; a task reads those records alone for the lines) and the (block
    index, *item) of every `lost` item of the finished runs, added one record at a time
    (`add`): those done before this run (`progress.done`, added here) and those this run
    writes, as each wave of them ends (so no run's record is kept). `blocks_of(n)`: the block
    indices of run n, in its record's order. The coverage is not collected: tasks write it from
    the records in the store (`coverage_parts.write_coverage`)."""

    def __init__(self, progress: Progress, blocks_of: Callable[[int], Sequence[Any]]):
        self.runs_with_problems: set[int] = set()
        self.lost: set[tuple] = set()
        self.blocks_of = blocks_of
        for number, record in progress.done.items():
            self.add(number, record)

    def add(self, number: int, record: Mapping[str, list]) -> None:
        """Run `number`'s record (`run_record`: coverage, problems and lost items per block)."""
        if record.get("problem_count") or any(record.get("problems") or ()):  # counted or listed
            self.runs_with_problems.add(number)
        if any(record.get("lost") or ()):
            for index, items in zip(self.blocks_of(number), record["lost"], strict=True):
                self.lost.update((index, *item) for item in items)

    def fold(self, numbers: Sequence[int]) -> Callable[[int, list], None]:
        """What `cluster.compute_in_waves` takes as `fold` for the runs `numbers` (task i: run
        numbers[i]): each wave's records added as it ends."""

        def add_wave(first: int, records: list) -> None:
            for offset, record in enumerate(records):
                self.add(numbers[first + offset], record)

        return add_wave


def reopen_for_append(store: StoreLocation) -> Any:
    """The group of a complete store an append changes: its completion marker goes off first
    (from here on the store is being changed)."""
    group = open_store(store, mode="r+")
    group.attrs[cv.ATTR_COMPLETE] = False
    return group


def appendable_attrs(store: StoreLocation, record: str) -> tuple[Any, dict]:
    """(group, attrs) of the store to append to: complete, or an interrupted append (its
    progress array and its old `record` attr still there: resumable)."""
    try:
        group = open_store(store)
    except InvalidInput:
        raise InvalidInput(
            store.url, "{append} needs an existing store; ingest without it", parameters=["append"]
        ) from None
    attrs = dict(group.attrs)
    if not attrs.get(cv.ATTR_COMPLETE) and not (PROGRESS_VAR in group and record in attrs):
        raise InvalidInput(
            store.url,
            "{append} needs a complete store (this one is unfinished)",
            parameters=["append"],
        )
    return group, attrs


def pending_append(url: str) -> InvalidInput:
    """The error of an append over another, interrupted append."""
    return InvalidInput(
        url,
        "an interrupted append of other files is pending: re-run that append, "
        "or ingest all files without {append}",
        parameters=["append"],
    )


def changed_input(path: str, url: str, recorded: str, now: str) -> InvalidInput:
    """The error of an input whose sha256 changed since it was ingested into `url`."""
    return InvalidInput(
        path,
        f"changed since it was ingested into {url} (sha256 {recorded[:12]}… "
        f"now {now[:12]}…); ingest without {{append}} to rebuild",
        parameters=["append"],
    )


def finish(store: StoreLocation, attrs: Mapping[str, Any]) -> None:
    """Delete the progress array (and an append's kept coverage), then write the attrs and the
    completion marker; after the coverage (`coverage_parts.write_coverage`, which reads
    both)."""
    group = open_store(store, mode="r+")
    del group[PROGRESS_VAR]
    if BASE_VAR in group:
        del group[BASE_VAR]
    with emptied_folders_ignored(PROGRESS_VAR, BASE_VAR):
        storage.finish_group(store, dict(attrs))


@contextlib.contextmanager
def emptied_folders_ignored(*names: str) -> Iterator[None]:
    """Quiet zarr's word on the folders of the deleted arrays or groups `names`. An object store
    with folders (SeaweedFS's filer) keeps a deleted array's emptied folders; zarr's
    consolidation lists the group's folders and says of each "ZarrUserWarning: Object at
    ingest_progress is not recognized as a component of a Zarr hierarchy". The folder holds
    nothing and the consolidated metadata leaves it out, as it should: the warning says nothing
    a user can act on."""
    alternatives = "|".join(re.escape(name) for name in names)
    pattern = f"Object at ({alternatives}) is not recognized as a component of a Zarr hierarchy"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=pattern, category=ZarrUserWarning)
        yield
