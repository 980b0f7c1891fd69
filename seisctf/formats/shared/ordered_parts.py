"""Rows kept in partitions, each partition's rows sorted and unique, put in one global order
(equal rows once) without one task holding them all where the partitions' ranges lie apart.

Each partition reports the first and last of its rows (`span_of`). Partitions whose ranges
overlap or touch are merged by one task (`heapq.merge`, equal rows once); a partition apart
from every other stays where it is. The groups (`overlap_groups`), in the order of their first
rows, are the rows in global order: a group's rows all sort before the next group's. A DAS
recording cut in files named by time gives partitions in time order, each a group of its own,
so no task holds more than a partition; partitions interleaved in time are merged (at worst,
every one: the one task there was before). Rows compare as they are (tuples: their first
items first; problem lines: as text).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Sequence
from typing import Any

from seisctf.formats.shared.partition_tasks import Each


def span_of(rows: Sequence[Any]) -> tuple[Any, Any] | None:
    """(first row, last row) of a partition's sorted `rows`; None without any."""
    return (rows[0], rows[-1]) if len(rows) else None


def overlap_groups(spans: Sequence[tuple[Any, Any] | None]) -> list[list[int]]:
    """The partitions (indices into `spans`, each `span_of` a partition) grouped so that each
    group's rows all sort before the next group's: partitions whose [first, last] ranges
    overlap or touch, directly or through others, share a group; empty ones are in none. Groups
    in order, each group's partitions in their own order."""
    order = sorted((span[0], index) for index, span in enumerate(spans) if span is not None)
    groups: list[list[int]] = []
    reach = None  # the last row of the current group
    for first, index in order:
        last = spans[index][1]  # type: ignore[index]
        if groups and first <= reach:
            groups[-1].append(index)
            reach = max(reach, last)
        else:
            groups.append([index])
            reach = last
    return [sorted(group) for group in groups]


def merged_rows(*parts: Sequence[Any]) -> list[Any]:
    """The rows of `parts` (each sorted and unique) in one sorted list, equal rows once."""
    rows: list[Any] = []
    for row in heapq.merge(*parts):
        if not rows or row != rows[-1]:
            rows.append(row)
    return rows


def sorted_unique(rows: Sequence[Any]) -> list[Any]:
    """`rows` sorted, equal rows once (a partition as `ordered` takes it)."""
    return sorted(set(rows))


def ordered(
    parts: Sequence[Any], each: Each, summary: Callable[[Sequence[Any]], Any] = len
) -> tuple[list[Any], list[Any]]:
    """The rows of `parts` (an `Each`'s kept results: each partition's rows, sorted and unique)
    as groups in global order (`overlap_groups`), and `summary` of each group's rows: a
    partition apart from the others, as it is kept; the others merged by a task of each group,
    kept where it ran. One round for the partitions' spans and summaries, one more for the
    merged groups' summaries when there are any."""
    found = each(functools.partial(_span_and, summary), parts)
    groups = overlap_groups([span for span, _ in found])
    merging = [group for group in groups if len(group) > 1]
    merges = each(_merged_group, [[parts[i] for i in g] for g in merging], keep=True)
    merged = iter(zip(merges, each(summary, merges) if merges else [], strict=True))
    rows, summaries = [], []
    for group in groups:
        held, summarised = (
            (parts[group[0]], found[group[0]][1]) if len(group) == 1 else next(merged)
        )
        rows.append(held)
        summaries.append(summarised)
    return rows, summaries


def _span_and(summary: Callable[[Sequence[Any]], Any], rows: Sequence[Any]) -> tuple:
    return span_of(rows), summary(rows)


def covering(parts: Sequence[Any], counts: Sequence[int], limit: int) -> list[Any]:
    """The first of `parts` (in order, of `counts` rows each) that hold the first `limit` rows:
    all a task making the first `limit` rows needs of them."""
    chosen, held = [], 0
    for part, count in zip(parts, counts, strict=True):
        if held >= limit:
            break
        if count:
            chosen.append(part)
            held += count
    return chosen


def _merged_group(parts: Sequence[Sequence[Any]]) -> list[Any]:
    return merged_rows(*parts)
