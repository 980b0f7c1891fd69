"""Non-finite input samples (NaN, ±Inf in float SAC or miniSEED): they are no samples.

A trace is cut into its runs of finite samples (`finite_pieces`), each then treated as a
contiguous trace of its own (response removal, resampling, merge), so a non-finite sample is a
gap (NaN) in the store and never spreads through a filter or an FFT. A float64 sample beyond
float32's range (|x| > 3.4e38) has no stored value either (it would be stored as ±Inf): it is
a gap too. Each file's are one problem line (`non_finite_problem`): how many, in which traces,
the first time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)


def storable(samples: np.ndarray) -> np.ndarray:
    """Whether each float sample has a float32 value: finite, and within float32's range."""
    finite = np.isfinite(samples)
    if samples.dtype.itemsize > 4:
        with np.errstate(invalid="ignore"):
            finite &= np.abs(samples) <= FLOAT32_MAX
    return finite


def finite_runs(samples: np.ndarray) -> list[tuple[int, int]]:
    """[(start, stop)) index ranges of the runs of storable samples (`storable`), in order (all
    of an integer array)."""
    if samples.dtype.kind in "iub":
        return [(0, len(samples))] if len(samples) else []
    finite = storable(samples)
    if finite.all():
        return [(0, len(samples))]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], finite.view(np.int8), [0]))))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[::2], edges[1::2], strict=True)]


def finite_pieces(trace: Any) -> tuple[list[tuple[int, Any]], int, int | None, int]:
    """The obspy `trace` as [(index of its first sample in `trace`, trace of storable
    samples)] (the trace itself when all are), the number of samples left out, the index of the
    first (None if none) and how many of them are finite but beyond float32's range."""
    npts = trace.stats.npts
    samples = np.asarray(trace.data)
    runs = finite_runs(samples)
    if runs == [(0, npts)]:
        return [(0, trace)], 0, None, 0
    bad = npts - sum(hi - lo for lo, hi in runs)
    first = runs[0][1] if runs and runs[0][0] == 0 else 0
    beyond = int(np.count_nonzero(np.isfinite(samples))) - (npts - bad)
    return [(lo, _slice(trace, lo, hi)) for lo, hi in runs], bad, first, beyond


def _slice(trace: Any, lo: int, hi: int) -> Any:
    """Samples lo:hi of an obspy trace as a trace of their own (its start moved by lo samples)."""
    import obspy

    stats = trace.stats.copy()
    stats.starttime = stats.starttime + lo / stats.sampling_rate
    return obspy.Trace(np.asarray(trace.data[lo:hi]), header=stats)


def non_finite_problem(path: str, found: Sequence[tuple[str, int, Any, int]]) -> str | None:
    """The problem line of one file's samples left out, `found` = [(trace id, count, time of
    its first, how many are beyond float32's range)] of its traces that have any; None if none
    has."""
    if not found:
        return None
    count = sum(n for _, n, _, _ in found)
    beyond = sum(n for *_, n in found)
    first = min(when for _, _, when, _ in found)
    ids = ", ".join(sorted({trace_id for trace_id, *_ in found}))
    what = "non-finite sample(s) (NaN or Inf)"
    if beyond:
        what += f" or beyond float32's range (±3.4e38: {beyond} of them)"
    return f"{path}: {count} {what} in {ids}, the first at {first}; stored as gaps (NaN)"
