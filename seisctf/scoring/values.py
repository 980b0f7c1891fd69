"""Non-finite values of a submission, found lazily in the scoring pass: a Dask reduction per
array (`value_report`) and the error naming every array holding NaN or Inf
(`raise_if_nonfinite`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np

from seisctf.blocks import named
from seisctf.errors import InvalidInput


def _block_values(
    block: np.ndarray, start: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int, int, float]:
    """(NaN/Inf count, global C-order flat index of the first or −1, max |value|) of one block.
    A block's first in its own C order is its first globally: C order is lexicographic, like a
    block's."""
    if not block.size:
        return 0, -1, 0.0
    # max |value| from the extremes (no |block| temporary); NaN or Inf shows in them.
    low, high = float(np.min(block)), float(np.max(block))
    largest = max(high, -low)
    count, first = 0, -1
    if not (math.isfinite(low) and math.isfinite(high)):
        bad = ~np.isfinite(block)
        count = int(np.count_nonzero(bad))
        local = np.unravel_index(int(np.argmax(bad)), block.shape)
        first = int(np.ravel_multi_index([i + s for i, s in zip(local, start, strict=True)], shape))
        largest = float(np.max(np.abs(block)))
    return count, first, largest


def _total_values(reports: list[tuple[int, int, float]]) -> tuple[int, int, float]:
    firsts = [first for _, first, _ in reports if first >= 0]
    return (
        sum(count for count, _, _ in reports),
        min(firsts) if firsts else -1,
        max((largest for _, _, largest in reports), default=0.0),
    )


def value_report(array: da.Array) -> Any:
    """Lazy (Delayed) `(count, first flat index, max |value|)`: NaN/Inf values in C order (−1
    when none) and the largest magnitude, chunk by chunk, so they are found in the same pass as
    the scores."""
    blocks = array.to_delayed(optimize_graph=False)
    edges = [np.cumsum((0, *chunks)) for chunks in array.chunks]
    parts = [
        named(
            _block_values,
            "value_report",
            blocks[index],
            tuple(int(edges[axis][i]) for axis, i in enumerate(index)),
            array.shape,
        )
        for index in np.ndindex(*blocks.shape)
    ]
    return named(_total_values, "value_report_total", parts)


def describe_nonfinite(name: str, count: int, first_flat_index: int, shape: Any) -> str:
    """'X3test: 12 non-finite values (NaN or Inf), first at [17, 5]'."""
    if count <= 0:
        return f"{name}: all values finite"
    where = ", ".join(str(int(i)) for i in np.unravel_index(int(first_flat_index), tuple(shape)))
    return f"{name}: {count} non-finite value{'s' * (count != 1)} (NaN or Inf), first at [{where}]"


def raise_if_nonfinite(source: str, reports: Mapping[str, Any], shapes: Mapping[str, Any]) -> None:
    """Raise InvalidInput naming every array whose report `(count, first index)` counts NaN/Inf."""
    bad = [
        describe_nonfinite(name, int(count), int(first), shapes[name])
        for name, (count, first) in reports.items()
        if int(count) > 0
    ]
    if bad:
        raise InvalidInput(source, "; ".join(bad))
