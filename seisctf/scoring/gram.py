"""2-norms of windows from their Gram matrices, summed panel by panel in place.

The 2-norm of a window A (m × n or n × m, m ≤ n) is the square root of the largest eigenvalue of
its m × m Gram matrix G (AAᵀ or AᵀA). G is a sum over panels of whole m-long vectors; a panel's
task assembles the panel a part at a time and adds each part's product into the upper triangle
of its partial G with BLAS `syrk` (half a matrix product, into G itself), so a task holds its
input blocks, G and one part, never the whole panel or a second G. The partial Gs are added in a
fixed tree and the last task mirrors the triangle and takes the eigenvalue. Panel and part
bounds depend on the window's shape only: the same sums in the same order for any chunking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dask
import numpy as np

from seisctf.blocks import named, tiles, tree_sum
from seisctf.scoring import metrics
from seisctf.scoring.regions import Difference

# A panel holds as much float64 as its Gram (m² · 8 bytes, so partial Grams never outweigh the
# data they sum), within these bounds: fewer, larger panels mean fewer m² partial Grams to add.
PANEL_MIN_BYTES, PANEL_MAX_BYTES = 16 * 2**20, 32 * 2**20
PART_BYTES = 4 * 2**20  # float64 of a panel assembled at a time


def spectral_norm(window: Difference) -> Any:
    """Lazy 2-norm (a Delayed float) of `window` from the Gram matrix of its smaller side."""
    rows, cols = window.shape
    transpose = rows > cols  # panels are then blocks of whole rows, and the Gram is AᵀA
    m = min(rows, cols)
    panel_bytes = min(max(8 * m * m, PANEL_MIN_BYTES), PANEL_MAX_BYTES)
    step = max(1, panel_bytes // (8 * m))
    part = max(1, PART_BYTES // (8 * m))
    axis = 0 if transpose else 1  # the panel's long side, along which its parts follow
    spans = tiles(window.shape, (step, cols) if transpose else (rows, step))
    if len(spans) == 1:
        # A window in one panel: its Gram and eigenvalue are one of the longest tasks; the
        # biggest go first, since left to the end they run alone.
        with dask.annotate(priority=m):
            return window.reduce_in_parts(_panel_norm, *spans[0], axis, part, m, transpose)
    # Several panels: Dask's own order, which adds partial Grams (m² each) as they come instead
    # of computing every panel first.
    grams = [window.reduce_in_parts(_panel_gram, *s, axis, part, m, transpose) for s in spans]
    return named(_norm_of_upper, "spectral_norm_from_gram", tree_sum(grams))


def _gram(window: Difference, transpose: bool | None = None) -> Any:
    """Lazy upper triangle of the Gram matrix of `window`'s smaller side, or with `transpose`
    given of AᵀA (True) or AAᵀ (False) (`spectral_norm`'s panels, summed in its fixed tree)."""
    rows, cols = window.shape
    transpose = rows > cols if transpose is None else transpose
    m = cols if transpose else rows
    panel_bytes = min(max(8 * m * m, PANEL_MIN_BYTES), PANEL_MAX_BYTES)
    step = max(1, panel_bytes // (8 * m))
    part = max(1, PART_BYTES // (8 * m))
    axis = 0 if transpose else 1
    spans = tiles(window.shape, (step, cols) if transpose else (rows, step))
    with dask.annotate(priority=m):
        grams = [window.reduce_in_parts(_panel_gram, *s, axis, part, m, transpose) for s in spans]
    return tree_sum(grams)


def spectral_norms(window: Difference, columns: Mapping[str, tuple[int, ...] | None]) -> Any | None:
    """Lazy {view: 2-norm of `window` on the columns `columns[view]` names (None: all)}, from
    Gram matrices shared between the views: with more rows than columns the Gram is AᵀA over the
    columns, and a view's Gram is the whole's on its columns; otherwise it is AAᵀ summed over
    columns, and when the views other than the whole partition the columns, the whole's Gram is
    the sum of theirs. None when neither holds (then each view needs its own Gram)."""
    rows, cols = window.shape
    subsets = [chosen for chosen in columns.values() if chosen is not None]
    if rows > cols:
        return named(_norms_of_columns, "spectral_norms_from_gram", _gram(window), dict(columns))
    covered = sorted(column for chosen in subsets for column in chosen)
    if covered != list(range(cols)) or not subsets:
        return None
    grams = {
        view: _gram(window.of_columns(np.array(chosen)), transpose=False)
        for view, chosen in columns.items()
        if chosen is not None
    }
    wholes = [view for view, chosen in columns.items() if chosen is None]
    return named(_norms_of_summed, "spectral_norms_from_gram", grams, wholes)


def _norms_of_columns(
    upper: np.ndarray, columns: Mapping[str, tuple[int, ...] | None]
) -> dict[str, float]:
    """{view: 2-norm} from the whole window's AᵀA (upper triangle, mirrored in place: idempotent)
    and each view's columns."""
    gram = mirror_upper(upper)
    return {
        view: metrics.spectral_norm_from_gram(
            gram if chosen is None else gram[np.ix_(chosen, chosen)]
        )
        for view, chosen in columns.items()
    }


def _norms_of_summed(uppers: Mapping[str, np.ndarray], wholes: list[str]) -> dict[str, float]:
    """{view: 2-norm} from each view's AAᵀ (upper triangles, mirrored in place: idempotent; the
    views partition the columns), and for each view of `wholes` (all columns) from their sum."""
    norms = {view: _norm_of_upper(upper) for view, upper in uppers.items()}
    if wholes:
        whole = np.zeros_like(next(iter(uppers.values())), order="F")
        for view in sorted(uppers):  # a fixed order of addition
            whole += uppers[view]
        norms |= dict.fromkeys(wholes, metrics.spectral_norm_from_gram(whole))
    return norms


def _panel_gram(parts: Iterable[np.ndarray], m: int, transpose: bool) -> np.ndarray:
    """Upper triangle (the rest zero) of the panel's m × m Gram, Σ over its parts P of PᵀP
    (`transpose`: parts of whole rows) or PPᵀ (parts of whole columns), Fortran-ordered."""
    from scipy.linalg.blas import dsyrk

    gram = np.zeros((m, m), order="F")
    for part in parts:
        # A C-ordered part is a Fortran-ordered transpose: syrk reads it without a copy.
        # syrk(a, trans=0) is a·aᵀ and syrk(a, trans=1) is aᵀ·a; here a = partᵀ.
        gram = dsyrk(1.0, part.T, beta=1.0, c=gram, trans=0 if transpose else 1, overwrite_c=1)
        del part  # before the next part is assembled
    return gram


def _panel_norm(parts: Iterable[np.ndarray], m: int, transpose: bool) -> float:
    """The 2-norm of a window that is one panel: its Gram and that Gram's eigenvalue, one task."""
    return _norm_of_upper(_panel_gram(parts, m, transpose))


def _norm_of_upper(upper: np.ndarray) -> float:
    return metrics.spectral_norm_from_gram(mirror_upper(upper))


def mirror_upper(gram: np.ndarray, band: int = 256) -> np.ndarray:
    """`gram` made symmetric from its upper triangle, in place (band by band: no m × m
    temporary) and returned. Idempotent, so a task retried on the same input is unharmed."""
    m = gram.shape[0]
    for start in range(0, m, band):
        stop = min(start + band, m)
        gram[stop:, start:stop] = gram[start:stop, stop:].T
        block = gram[start:stop, start:stop]
        lower = np.tril_indices(stop - start, -1)
        block[lower] = block.T[lower]
    return gram
