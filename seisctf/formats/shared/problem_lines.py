"""An ingest's problem lines (every bad input, by name), kept so that the root `zarr.json`, read
on every open, stays small however many inputs are bad.

A store with at most `conventions.ATTR_PROBLEM_LINES` of them keeps them all in its root attr
`ingest_problems`, as before. One with more keeps the first that many there, their number in
`ingest_problem_count`, and all of them in the group `problems` (array `line`, dimension
`problem`, in the report's order, chunks of `input_manifest.ROWS_PER_CHUNK` lines). `read`
takes any store's.

A resumable ingest's lines never come to the client whole, nor to one task
(`write_ingest_problems`): the plan's lines stay with their partitions (`problem_parts`) and are
cut into the group's chunks there (`table_pieces`); a task gathers the decode problems of the
runs' records in the store's progress array (one more piece), and another the first lines the
root attrs hold. `ingest das`'s lines, sorted and unique, likewise (`write_sorted_problems`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import compute, kept
from seisctf.formats.shared.input_manifest import TEXT, write_column
from seisctf.formats.shared.ordered_parts import covering, ordered, sorted_unique
from seisctf.formats.shared.partition_tasks import Each
from seisctf.formats.shared.problem_parts import ProblemLines, joined
from seisctf.formats.shared.resumable import open_store, unfinished_records
from seisctf.formats.shared.table_pieces import Piece, write_pieces
from seisctf.location import StoreLocation


def problem_attrs(problems: Sequence[str], limit: int | None = None) -> dict[str, Any]:
    """The root attrs of an ingest's `problems`: the first `limit` (default ATTR_PROBLEM_LINES),
    and, when there are more, their number."""
    limit = cv.ATTR_PROBLEM_LINES if limit is None else limit
    attrs: dict[str, Any] = {cv.ATTR_PROBLEMS: list(problems[:limit])}
    if len(problems) > limit:
        attrs[cv.ATTR_PROBLEM_COUNT] = len(problems)
    return attrs


def write_problems(store: StoreLocation, problems: Sequence[str]) -> None:
    """The group of `problems` in the store at `store` when the root attrs cannot hold them all,
    replacing any; none (an older one deleted) when they can. Before the store is marked
    complete (its consolidated metadata then lists the group). Written by a task: zarr's
    encoding of text takes several times its size for a moment (3.7 MiB of the client's peak
    for 4,000 lines)."""
    import dask

    compute(dask.delayed(_write)(store, list(problems)), quiet=True)


def _write(store: StoreLocation, problems: list[str], limit: int | None = None) -> None:
    group = open_store(store, mode="r+")
    if cv.PROBLEMS_GROUP in group:
        del group[cv.PROBLEMS_GROUP]
    if len(problems) > (cv.ATTR_PROBLEM_LINES if limit is None else limit):
        lines = np.asarray(list(problems), dtype=TEXT)
        write_column(group.create_group(cv.PROBLEMS_GROUP), cv.PROBLEM_LINES, cv.PROBLEM_DIM, lines)


def write_ingest_problems(
    store: StoreLocation,
    found: ProblemLines,
    fingerprint: str,
    each: Each,
    runs: Sequence[int],
) -> dict[str, Any]:
    """`write_problems` of an ingest's lines: `found` (the plan's, in order), then the decode
    problems (`decode_problems` of the runs `runs`, those whose records have any) it does not
    have; the root attrs of them (`problem_attrs`) come back, not the lines. Each part of
    `found` (kept where `each` ran it) is written where it is, into the chunks it spans
    (`table_pieces.write_pieces`): no task holds the plan's lines of more than one partition
    (the decode problems are gathered by one task, and the root attrs' first lines, at most
    `limit` of each partition, by another)."""
    import dask

    limit = cv.ATTR_PROBLEM_LINES  # the client's (read here, not where the task runs)
    parts = found.nonempty_parts()
    counts = [count for count in found.counts if count]
    decoded = kept_decode_problems(store, fingerprint, runs)
    held = each(_held, parts, [decoded] * len(parts), keep=True)
    (extra,) = kept([dask.delayed(_not_held)(decoded, *held)], quiet=True)
    extra_count = compute(dask.delayed(len)(extra), quiet=True)[0]
    parts, counts = [*parts, extra], [*counts, extra_count]
    total = sum(counts)
    if total <= limit:
        task = dask.delayed(_write)(store, [], limit)  # none beyond the attrs: any old group goes
        compute(task, quiet=True)
    else:
        pieces = each(_piece, parts, keep=True)
        write_pieces(store, cv.PROBLEMS_GROUP, pieces, each, {}, marked=False)
    heads = [dask.delayed(_first)(part, limit) for part in covering(parts, counts, limit)]
    head = compute(dask.delayed(_head)(limit, *heads), quiet=True)[0]
    return problem_attrs(head, limit) | ({cv.ATTR_PROBLEM_COUNT: total} if total > limit else {})


def _held(lines: Sequence[str], decoded: list[str]) -> set[str]:
    """The lines of `decoded` that `lines` (a partition's) hold."""
    return set(decoded).intersection(lines)


def _not_held(decoded: list[str], *held: set[str]) -> list[str]:
    """The lines of `decoded` no partition holds, in order."""
    known = set().union(*held)
    return [line for line in decoded if line not in known]


def _piece(lines: Sequence[str]) -> Piece:
    return Piece({cv.PROBLEM_LINES: (cv.PROBLEM_DIM, np.asarray(list(lines), dtype=TEXT))})


def _first(lines: Sequence[str], limit: int) -> list[str]:
    """The first `limit` of a partition's `lines` (cut where they are kept)."""
    return list(lines[:limit])


def _head(limit: int, *parts: Sequence[str]) -> list[str]:
    return joined(parts)[:limit]


def write_sorted_problems(
    store: StoreLocation,
    found: ProblemLines | Sequence[str],
    more: Any,
    carry: bool,
    each: Each,
) -> dict[str, Any]:
    """`write_problems` of the sorted, unique lines of `found` (kept where they are, or here),
    `more` (lines, here or kept where a task found them: `kept_decode_problems`) and, with
    `carry`, the store's own (an append keeps them); the root attrs of them
    (`problem_attrs`) come back, not the lines (`ingest das`'s order). Each part's lines are
    sorted where it is kept, parts whose lines interleave are merged by a task of each group
    (`ordered_parts`: a partition of its own files' lines is apart from the others), the
    store's own are read a chunk a task, and each group is written into the chunks it spans
    there: no task holds every line."""
    import dask

    lines = found if isinstance(found, ProblemLines) else ProblemLines.of(found)
    limit = cv.ATTR_PROBLEM_LINES  # the client's (read here, not where the task runs)
    parts = [*lines.nonempty_parts(), tuple(more) if isinstance(more, list | tuple) else more]
    if carry:
        ranges = compute(dask.delayed(_line_ranges)(store), quiet=True)[0]
        parts += each(functools.partial(_store_lines, store), ranges, keep=True)
    groups, counts = ordered(each(sorted_unique, parts, keep=True), each)
    total = sum(counts)
    heads = [dask.delayed(_first)(group, limit) for group in covering(groups, counts, limit)]
    head_task = dask.delayed(_head)(limit, *heads)
    if total <= limit:  # any old group goes, in the round that brings the lines back
        head = compute(head_task, dask.delayed(_write)(store, [], limit), quiet=True)[0]
    else:
        write_pieces(store, cv.PROBLEMS_GROUP, each(_piece, groups, keep=True), each, {},
                     marked=False)  # fmt: skip
        head = compute(head_task, quiet=True)[0]
    return problem_attrs(head, limit) | ({cv.ATTR_PROBLEM_COUNT: total} if total > limit else {})


def _line_ranges(store: StoreLocation) -> list[tuple[int, int]]:
    """[first, stop) of each chunk of the store's own problem lines (one range for those its
    root attrs hold)."""
    group = open_store(store)
    if cv.ATTR_PROBLEM_COUNT not in group.attrs:
        return [(0, len(group.attrs.get(cv.ATTR_PROBLEMS, [])))]
    column = group[cv.PROBLEMS_GROUP][cv.PROBLEM_LINES]
    rows, total = int(column.chunks[0]), int(column.shape[0])
    return [(first, min(first + rows, total)) for first in range(0, total, rows)]


def _store_lines(store: StoreLocation, bounds: tuple[int, int]) -> list[str]:
    """The store's own problem lines `bounds` [first, stop) (`read_problems`' order)."""
    return read_problems(open_store(store), slice(*bounds))


def decode_problems(store: StoreLocation, fingerprint: str, runs: Sequence[int]) -> list[str]:
    """The decode problems of the ingest of `fingerprint` being written at `store`, sorted, each
    once: those of the records of the runs `runs` in its progress array (the runs with any,
    `resumable.Collected.runs_with_problems`: the others' records are not read) and those an
    append carries over (its attr `carried_problems`). Run by a task (`compute_decode_problems`
    brings them here)."""
    progress = unfinished_records(store, fingerprint, runs)
    if progress is None:
        return []
    attributes, records = progress
    found = set(attributes.get("carried_problems", []))
    for record in records.values():
        for lines in record["problems"]:
            found.update(lines)
    return sorted(found)


def kept_decode_problems(store: StoreLocation, fingerprint: str, runs: Sequence[int]) -> Any:
    """`decode_problems`, kept where the task that read them ran (for tasks to come)."""
    import dask

    return kept([dask.delayed(decode_problems)(store, fingerprint, runs)], quiet=True)[0]


def compute_decode_problems(
    store: StoreLocation, fingerprint: str, runs: Sequence[int]
) -> list[str]:
    """`decode_problems`, here (strict mode's error names them all)."""
    import dask

    return list(compute(dask.delayed(decode_problems)(store, fingerprint, runs), quiet=True)[0])


def carried_problems(store: StoreLocation, found: ProblemLines) -> list[str]:
    """The problem lines of the complete store at `store` an append keeps (those of its kept
    blocks): the old ones not in `found` (the new plan's), by a task."""
    import dask

    task = dask.delayed(_carried)(store, found.nonempty_parts())
    return list(compute(task, quiet=True)[0])


def _carried(store: StoreLocation, parts: list[Sequence[str]]) -> list[str]:
    known = set(joined(parts))
    return [line for line in read_problems(open_store(store)) if line not in known]


def read_problems(group: Any, rows: slice = slice(None)) -> list[str]:
    """Every problem line of the store `group` (zarr, open), in the report's order (`rows`: those
    of these positions only)."""
    if cv.ATTR_PROBLEM_COUNT in group.attrs:
        return [str(line) for line in group[cv.PROBLEMS_GROUP][cv.PROBLEM_LINES][rows]]
    return list(group.attrs.get(cv.ATTR_PROBLEMS, []))[rows]
