"""A DAS store's gaps and overlaps (between patches, in grid samples), bounded in its root attrs.

The root attrs `gaps` and `overlaps` hold the first `conventions.ATTR_DAS_SPANS` of each kind,
as before. A kind with more spans also has its number in the root attr `gap_count` or
`overlap_count`, and all of them in the group of its name (`gaps`, `overlaps`): a table of
columns along the dimension `gap` or `overlap` (`first_sample`, `samples` (grid samples),
`start_time` (ISO 8601), `duration_s`, and the files on each side: `after`, `before`; `earlier`,
`later`, `kept`), in time order. A real recording cut in files of a minute with jitter between
them has a gap or an overlap at every file boundary: the root `zarr.json`, read on every open,
keeps its size whatever the file count. `read_spans` reads any store's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.formats.das.das_plan import NS_PER_S
from seisctf.formats.shared.input_manifest import TEXT, write_column
from seisctf.formats.shared.resumable import iso_time, open_store
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


def write_spans(
    store: StoreLocation, spans: Mapping[str, Sequence[dict]], limit: int | None = None
) -> None:
    """The group of each kind of `spans` that the root attrs (`span_attrs`, of the same
    `limit`) cannot hold whole, replacing any; none (an older one deleted) for a kind they can.
    Before the store is marked complete (its consolidated metadata then lists the groups): by
    the task that finds the spans (`das_parts.record_spans`)."""
    limit = cv.ATTR_DAS_SPANS if limit is None else limit
    over = {kind: list(found) for kind, found in spans.items() if len(found) > limit}
    group = open_store(store, mode="r+")
    for kind, (dim, _, texts) in SPAN_KINDS.items():
        if kind in group:
            del group[kind]
        if kind not in over:
            continue
        table = group.create_group(kind)
        for name, dtype in SPAN_NUMBERS.items():
            write_column(table, name, dim, np.array([s[name] for s in over[kind]], dtype=dtype))
        for name in texts:
            write_column(table, name, dim, np.asarray([s[name] for s in over[kind]], dtype=TEXT))


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
