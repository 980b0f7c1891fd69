"""Windows of truth − submission, reduced region by region in the task that assembles them.

A score reduces windows (first k_short rows, last k_long rows, all rows) of scale · (truth −
submission), or of one array alone. `Difference.reduce` hands one task the stored blocks that
cover a region (`seisctf.blocks`); the task writes scale · (minuend − subtrahend) into one float64
array and reduces it at once. The values are those of the Dask expression element by element (a
float's conversion to float64 is exact, the arithmetic the same), without Dask's rechunk, astype
and subtraction tasks, each of which would copy the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from seisctf.blocks import Cover, Span, Stored, assemble, named, restrict, subtract, tiles


def region_values(
    shape: tuple[int, int], minuend: Cover, subtrahend: Cover | None, scale: float
) -> np.ndarray:
    """scale · (minuend − subtrahend) on one region, float64, from the computed covers."""
    values = assemble(shape, minuend, np.float64)
    if subtrahend is not None:
        subtract(values, subtrahend)
    if scale != 1.0:
        values *= scale
    return values


def _reduce_region(kernel, shape, minuend, subtrahend, scale, *args) -> Any:
    return kernel(region_values(shape, minuend, subtrahend, scale), *args)


def region_parts(
    shape: tuple[int, int],
    axis: int,
    length: int,
    minuend: Cover,
    subtrahend: Cover | None,
    scale: float,
) -> Iterator[np.ndarray]:
    """The region's values (as `region_values`) in consecutive parts of `length` rows (axis 0)
    or columns (axis 1), each assembled when asked for: one part in memory at a time."""
    for rows, cols in tiles(shape, (length, shape[1]) if axis == 0 else (shape[0], length)):
        part_subtrahend = None if subtrahend is None else restrict(subtrahend, rows, cols)
        part_shape = (rows[1] - rows[0], cols[1] - cols[0])
        yield region_values(part_shape, restrict(minuend, rows, cols), part_subtrahend, scale)


def _reduce_parts(kernel, shape, axis, length, minuend, subtrahend, scale, *args) -> Any:
    return kernel(region_parts(shape, axis, length, minuend, subtrahend, scale), *args)


@dataclass(frozen=True)
class Difference:
    """The window scale · (minuend − subtrahend), or scale · minuend, of rows `rows` (all
    columns) of two stored arrays of one shape."""

    minuend: Stored
    subtrahend: Stored | None = None
    scale: float = 1.0
    rows: Span | None = None

    @property
    def span(self) -> Span:
        return self.rows or (0, self.minuend.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        start, stop = self.span
        return stop - start, self.minuend.shape[1]

    def window(self, rows: slice) -> Difference:
        """Rows `rows` (a slice, relative to this window) of this window."""
        start, stop, _ = rows.indices(self.shape[0])
        offset = self.span[0]
        return Difference(
            self.minuend, self.subtrahend, self.scale, (offset + start, offset + stop)
        )

    def reduce(self, kernel: Callable[..., Any], rows: Span, cols: Span, *args: Any) -> Any:
        """Delayed `kernel(values, *args)` of the region rows × cols of this window."""
        label = kernel.__name__.strip("_")
        return named(_reduce_region, label, kernel, *self._covered(rows, cols), *args)

    def reduce_in_parts(
        self, kernel: Callable[..., Any], rows: Span, cols: Span, axis: int, length: int, *args
    ) -> Any:
        """Delayed `kernel(parts, *args)` of the region rows × cols of this window, `parts` an
        iterator over its values `length` rows (axis 0) or columns (axis 1) at a time."""
        shape, minuend, subtrahend, scale = self._covered(rows, cols)
        label = kernel.__name__.strip("_")
        return named(
            _reduce_parts, label, kernel, shape, axis, length, minuend, subtrahend, scale, *args
        )

    def _covered(self, rows: Span, cols: Span) -> tuple[Any, ...]:
        """(shape, minuend's cover, subtrahend's cover or None, scale) of the region."""
        offset = self.span[0]
        absolute = (offset + rows[0], offset + rows[1])
        minuend = self.minuend.cover(absolute, cols)
        subtrahend = None if self.subtrahend is None else self.subtrahend.cover(absolute, cols)
        return (rows[1] - rows[0], cols[1] - cols[0]), minuend, subtrahend, self.scale

    def as_float64(self) -> da.Array:
        """The window as a lazy float64 Dask array (for reductions that need Dask's blocks)."""
        start, stop = self.span
        minuend = self.minuend.array[start:stop]
        if self.subtrahend is None:
            values = minuend.astype(np.float64)
        else:
            values = minuend.astype(np.float64) - self.subtrahend.array[start:stop]
        return values * self.scale if self.scale != 1.0 else values
