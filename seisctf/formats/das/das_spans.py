"""A DAS store's gaps and overlaps (between patches, in grid samples), bounded in its root attrs.

The root attrs `gaps` and `overlaps` hold the first `conventions.ATTR_DAS_SPANS` of each kind,
as before. A kind with more spans also has its number in the root attr `gap_count` or
`overlap_count`, and all of them in the group of its name (`gaps`, `overlaps`): a table of
columns along the dimension `gap` or `overlap` (`first_sample`, `samples` (grid samples),
`start_time` (ISO 8601), `duration_s`, and the files on each side: `after`, `before`; `earlier`,
`later`, `kept`), in time order. A real recording cut in files of a minute with jitter between
them has a gap or an overlap at every file boundary: the root `zarr.json`, read on every open,
keeps its size whatever the file count. `read_spans` reads any store's.

The spans are found and written by tasks, group by group of the patches in time order
(`das_parts.record_spans`): `write_span_parts` writes each group's spans into the chunks they
span where the group is kept (`table_pieces`), so no task holds every span.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.formats.das.das_plan import NS_PER_S
from seisctf.formats.shared.input_manifest import TEXT
from seisctf.formats.shared.ordered_parts import covering
from seisctf.formats.shared.partition_tasks import Each
from seisctf.formats.shared.resumable import iso_time, open_store
from seisctf.formats.shared.table_pieces import Piece, write_pieces
from seisctf.location import StoreLocation

# Per kind (its root attr and group): the dimension, the count attr and the columns beside
# `SPAN_NUMBERS`, all text.
SPAN_KINDS = {
    "gaps": ("gap", "gap_count", ("start_time", "after", "before")),
    "overlaps": ("overlap", "overlap_count", ("start_time", "earlier", "later", "kept")),
}
SPAN_NUMBERS = {"first_sample": np.int64, "samples": np.int64, "duration_s": np.float64}


def span_attrs(spans: Mapping[str, Sequence[dict]], limit: int | None = None) -> dict:
    """The root attrs of `spans` ({kind: spans in time order}): the first `limit` (None:
    `conventions.ATTR_DAS_SPANS`) of each kind, and, for a kind with more, their number."""
    limit = cv.ATTR_DAS_SPANS if limit is None else limit
    attrs: dict[str, Any] = {}
    for kind, (_, count, _) in SPAN_KINDS.items():
        found = spans[kind]
        attrs[kind] = list(found[:limit])
        if len(found) > limit:
            attrs[count] = len(found)
    return attrs


def write_span_parts(
    store: StoreLocation, parts: Sequence[Any], each: Each, limit: int | None = None
) -> dict[str, Any]:
    """Write the group of each kind of the spans of `parts` (`timed` of consecutive groups of
    patches, in time order; an `Each`'s kept results) that the root attrs (`span_attrs`, of the
    same `limit`) cannot hold whole, replacing any, each part's spans into the chunks they
    span where the part is; none (an older one deleted) for a kind they can. Returns the root
    attrs (`span_attrs` of every span). Before the store is marked complete (its consolidated
    metadata then lists the groups)."""
    import dask

    limit = cv.ATTR_DAS_SPANS if limit is None else limit
    counts = each(_counts, parts)
    attrs: dict[str, Any] = {}
    tasks = []  # the old groups to drop and the first spans of each kind: one round for all
    for kind, (_, count, _) in SPAN_KINDS.items():
        numbers = [found[kind] for found in counts]
        if sum(numbers) > limit:
            pieces = each(functools.partial(_piece, kind), parts, keep=True)
            write_pieces(store, kind, pieces, each, {}, marked=False)
            attrs[count] = sum(numbers)
        else:
            tasks.append(dask.delayed(_drop_group)(store, kind))
        tasks.append(dask.delayed(_head)(kind, limit, *covering(parts, numbers, limit)))
    heads = iter(head for head in compute(*tasks, quiet=True) if head is not None)
    found: dict[str, Any] = {}  # in `span_attrs`' order: each kind's first, then its count
    for kind, (_, count, _) in SPAN_KINDS.items():
        found[kind] = next(heads)
        if count in attrs:
            found[count] = attrs[count]
    return found


def _counts(spans: Mapping[str, Sequence[dict]]) -> dict[str, int]:
    return {kind: len(found) for kind, found in spans.items()}


def _piece(kind: str, spans: Mapping[str, Sequence[dict]]) -> Piece:
    """A part's spans of `kind` as rows of its group's columns."""
    dim, _, texts = SPAN_KINDS[kind]
    found = spans[kind]
    columns = {name: (dim, np.array([s[name] for s in found], dtype=dtype))
               for name, dtype in SPAN_NUMBERS.items()}  # fmt: skip
    for name in texts:
        columns[name] = (dim, np.asarray([s[name] for s in found], dtype=TEXT))
    return Piece(columns)


def _drop_group(store: StoreLocation, kind: str) -> None:
    group = open_store(store, mode="r+")
    if kind in group:
        del group[kind]


def _head(kind: str, limit: int, *parts: Mapping[str, Sequence[dict]]) -> list[dict]:
    return [span for part in parts for span in part[kind]][:limit]


def timed(
    gaps: Sequence[dict], overlaps: Sequence[dict], start_ns: int, step_ns: int
) -> dict[str, list[dict]]:
    """{"gaps": …, "overlaps": …} of a grid from `start_ns` every `step_ns` (ns), each span
    with the ISO time of its first sample and its duration (s)."""

    def with_time(span: dict) -> dict:
        return {
            **span,
            "start_time": iso_time(start_ns + span["first_sample"] * step_ns),
            "duration_s": span["samples"] * step_ns / NS_PER_S,
        }

    return {"gaps": list(map(with_time, gaps)), "overlaps": list(map(with_time, overlaps))}


def read_spans(group: Any, kind: str) -> list[dict]:
    """Every span of `kind` (`gaps` or `overlaps`) of the DAS store `group` (zarr, open), in
    time order, each as in the root attrs."""
    dim, count, texts = SPAN_KINDS[kind]
    if count not in group.attrs:
        return list(group.attrs.get(kind, []))
    table = group[kind]
    columns = {name: table[name][:].tolist() for name in (*SPAN_NUMBERS, *texts)}
    order = list(group.attrs[kind][0]) if group.attrs[kind] else [*SPAN_NUMBERS, *texts]
    return [{name: columns[name][row] for name in order} for row in range(int(group.attrs[count]))]


def span_count(attrs: Mapping[str, Any], kind: str) -> int:
    """How many spans of `kind` the store with root `attrs` has (the attrs hold the first)."""
    _, count, _ = SPAN_KINDS[kind]
    return int(attrs.get(count, len(attrs.get(kind, []))))
