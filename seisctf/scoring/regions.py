"""Windows of truth − submission, reduced region by region in the task that assembles them.

A score reduces windows (first k_short rows, last k_long rows, all rows) of scale · (truth −
submission), or of one array alone, on all columns or on a chosen subset of them (a part of the
truth's sensors, `seisctf.scoring.parts`). `Difference.reduce` hands one task the stored blocks
that cover a region (`seisctf.blocks`); the task writes scale · (minuend − subtrahend) into one
float64 array and reduces it at once. The values are those of the Dask expression element by
element (a float's conversion to float64 is exact, the arithmetic the same), without Dask's
rechunk, astype and subtraction tasks, each of which would copy the data. A window of chosen
columns is indexed by its own column positions; a region of it is assembled over the stored
columns its chosen ones span and narrowed to them in the same task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import dask.array as da
import numpy as np

from seisctf.blocks import Cover, Span, Stored, assemble, named, restrict, subtract, tiles


def region_values(
    shape: tuple[int, int],
    minuend: Cover,
    subtrahend: Cover | None,
    scale: float,
    select: np.ndarray | None = None,
) -> np.ndarray:
    """scale · (minuend − subtrahend) on one region, float64, from the computed covers; with
    `select`, only those columns of the region (indices into its `shape[1]` columns)."""
    values = assemble(shape, minuend, np.float64)
    if subtrahend is not None:
        subtract(values, subtrahend)
    if select is not None:
        values = values[:, select]
    if scale != 1.0:
        values *= scale
    return values


def _reduce_region(kernel, shape, minuend, subtrahend, scale, select, *args) -> Any:
    return kernel(region_values(shape, minuend, subtrahend, scale, select), *args)


def _restricted(
    rows: Span, cols: Span, minuend: Cover, subtrahend: Cover | None
) -> tuple[tuple[int, int], Cover, Cover | None]:
    part_subtrahend = None if subtrahend is None else restrict(subtrahend, rows, cols)
    return (rows[1] - rows[0], cols[1] - cols[0]), restrict(minuend, rows, cols), part_subtrahend


def region_parts(
    shape: tuple[int, int],
    axis: int,
    length: int,
    minuend: Cover,
    subtrahend: Cover | None,
    scale: float,
    select: np.ndarray | None = None,
) -> Iterator[np.ndarray]:
    """The region's values (as `region_values`) in consecutive parts of `length` rows (axis 0)
    or columns (axis 1, counted among `select` when given), each assembled when asked for: one
    part in memory at a time."""
    width = shape[1] if select is None else len(select)
    for rows, cols in tiles(
        (shape[0], width), (length, width) if axis == 0 else (shape[0], length)
    ):
        if select is None:
            yield region_values(*_restricted(rows, cols, minuend, subtrahend), scale)
            continue
        chosen = select[cols[0] : cols[1]]
        span = (int(chosen[0]), int(chosen[-1]) + 1)
        covered = _restricted(rows, span, minuend, subtrahend)
        yield region_values(*covered, scale, chosen - span[0])


def _reduce_parts(kernel, shape, axis, length, minuend, subtrahend, scale, select, *args) -> Any:
    return kernel(region_parts(shape, axis, length, minuend, subtrahend, scale, select), *args)


@dataclass(frozen=True)
class Difference:
    """The window scale · (minuend − subtrahend), or scale · minuend, of rows `rows` and of the
    columns `columns` (increasing stored column indices; None: all) of two stored arrays of one
    shape."""

    minuend: Stored
    subtrahend: Stored | None = None
    scale: float = 1.0
    rows: Span | None = None
    columns: tuple[int, ...] | None = None

    @property
    def span(self) -> Span:
        return self.rows or (0, self.minuend.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        start, stop = self.span
        width = self.minuend.shape[1] if self.columns is None else len(self.columns)
        return stop - start, width

    def window(self, rows: slice) -> Difference:
        """Rows `rows` (a slice, relative to this window) of this window."""
        start, stop, _ = rows.indices(self.shape[0])
        offset = self.span[0]
        return replace(self, rows=(offset + start, offset + stop))

    def of_columns(self, columns: np.ndarray) -> Difference:
        """This window (of all columns) on the stored columns `columns` alone (increasing)."""
        chosen = tuple(int(column) for column in columns)
        if self.columns is not None or not chosen or list(chosen) != sorted(set(chosen)):
            raise ValueError("of_columns takes increasing, distinct columns of a whole window")
        return replace(self, columns=chosen)

    def reduce(self, kernel: Callable[..., Any], rows: Span, cols: Span, *args: Any) -> Any:
        """Delayed `kernel(values, *args)` of the region rows × cols of this window."""
        label = kernel.__name__.strip("_")
        return named(_reduce_region, label, kernel, *self._covered(rows, cols), *args)

    def reduce_in_parts(
        self, kernel: Callable[..., Any], rows: Span, cols: Span, axis: int, length: int, *args
    ) -> Any:
        """Delayed `kernel(parts, *args)` of the region rows × cols of this window, `parts` an
        iterator over its values `length` rows (axis 0) or columns (axis 1) at a time."""
        shape, minuend, subtrahend, scale, select = self._covered(rows, cols)
        label = kernel.__name__.strip("_")
        return named(
            _reduce_parts,
            label,
            kernel,
            shape,
            axis,
            length,
            minuend,
            subtrahend,
            scale,
            select,
            *args,
        )

    def _covered(self, rows: Span, cols: Span) -> tuple[Any, ...]:
        """(shape, minuend's cover, subtrahend's cover or None, scale, select) of the region:
        the covers span the stored columns of the region's columns, `select` (None when they are
        all of them) picks those among them."""
        select = None
        if self.columns is not None:
            chosen = np.asarray(self.columns[cols[0] : cols[1]])
            cols = (int(chosen[0]), int(chosen[-1]) + 1)
            if len(chosen) < cols[1] - cols[0]:
                select = chosen - cols[0]
        offset = self.span[0]
        absolute = (offset + rows[0], offset + rows[1])
        minuend = self.minuend.cover(absolute, cols)
        subtrahend = None if self.subtrahend is None else self.subtrahend.cover(absolute, cols)
        return (rows[1] - rows[0], cols[1] - cols[0]), minuend, subtrahend, self.scale, select

    def as_float64(self) -> da.Array:
        """The window as a lazy float64 Dask array (for reductions that need Dask's blocks)."""
        start, stop = self.span
        columns = slice(None) if self.columns is None else list(self.columns)
        minuend = self.minuend.array[start:stop, columns]
        if self.subtrahend is None:
            values = minuend.astype(np.float64)
        else:
            values = minuend.astype(np.float64) - self.subtrahend.array[start:stop, columns]
        return values * self.scale if self.scale != 1.0 else values
