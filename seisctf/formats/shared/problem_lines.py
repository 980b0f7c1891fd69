"""An ingest's problem lines (every bad input, by name), kept so that the root `zarr.json`, read
on every open, stays small however many inputs are bad.

A store with at most `conventions.ATTR_PROBLEM_LINES` of them keeps them all in its root attr
`ingest_problems`, as before. One with more keeps the first that many there, their number in
`ingest_problem_count`, and all of them in the group `problems` (array `line`, dimension
`problem`, in the report's order, chunks of `input_manifest.ROWS_PER_CHUNK` lines). `read`
takes any store's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.formats.shared.input_manifest import TEXT, write_column
from seisctf.formats.shared.resumable import open_store
from seisctf.location import StoreLocation


def problem_attrs(problems: Sequence[str]) -> dict[str, Any]:
    """The root attrs of an ingest's `problems`: the first ATTR_PROBLEM_LINES, and, when there
    are more, their number."""
    attrs: dict[str, Any] = {cv.ATTR_PROBLEMS: list(problems[: cv.ATTR_PROBLEM_LINES])}
    if len(problems) > cv.ATTR_PROBLEM_LINES:
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


def _write(store: StoreLocation, problems: list[str]) -> None:
    group = open_store(store, mode="r+")
    if cv.PROBLEMS_GROUP in group:
        del group[cv.PROBLEMS_GROUP]
    if len(problems) > cv.ATTR_PROBLEM_LINES:
        lines = np.asarray(list(problems), dtype=TEXT)
        write_column(group.create_group(cv.PROBLEMS_GROUP), cv.PROBLEM_LINES, cv.PROBLEM_DIM, lines)


def read_problems(group: Any) -> list[str]:
    """Every problem line of the store `group` (zarr, open), in the report's order."""
    if cv.ATTR_PROBLEM_COUNT in group.attrs:
        return [str(line) for line in group[cv.PROBLEMS_GROUP][cv.PROBLEM_LINES][:]]
    return list(group.attrs.get(cv.ATTR_PROBLEMS, []))
