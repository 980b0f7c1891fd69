"""Non-finite input samples (NaN, ±Inf in float SAC or miniSEED): they are no samples.

A trace is cut into its runs of finite samples (`finite_pieces`), each then treated as a
contiguous trace of its own (response removal, resampling, merge), so a non-finite sample is a
gap (NaN) in the store and never spreads through a filter or an FFT. Each file's non-finite
samples are one problem line (`non_finite_problem`): how many, in which traces, the first time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def finite_runs(samples: np.ndarray) -> list[tuple[int, int]]:
    """[(start, stop)) index ranges of the runs of finite samples, in order (all of an integer
    array)."""
    if samples.dtype.kind in "iub":
        return [(0, len(samples))] if len(samples) else []
    finite = np.isfinite(samples)
    if finite.all():
        return [(0, len(samples))]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], finite.view(np.int8), [0]))))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[::2], edges[1::2], strict=True)]


def finite_pieces(trace: Any) -> tuple[list[tuple[int, Any]], int, int | None]:
    """The obspy `trace` as [(index of its first sample in `trace`, trace of finite samples)]
    (the trace itself when all are finite), the number of non-finite samples and the index of
    the first (None if none)."""
    npts = trace.stats.npts
    runs = finite_runs(np.asarray(trace.data))
    if runs == [(0, npts)]:
        return [(0, trace)], 0, None
    bad = npts - sum(hi - lo for lo, hi in runs)
    first = runs[0][1] if runs and runs[0][0] == 0 else 0
    return [(lo, _slice(trace, lo, hi)) for lo, hi in runs], bad, first


def _slice(trace: Any, lo: int, hi: int) -> Any:
    """Samples lo:hi of an obspy trace as a trace of their own (its start moved by lo samples)."""
    import obspy

    stats = trace.stats.copy()
    stats.starttime = stats.starttime + lo / stats.sampling_rate
    return obspy.Trace(np.asarray(trace.data[lo:hi]), header=stats)


def non_finite_problem(path: str, found: Sequence[tuple[str, int, Any]]) -> str | None:
    """The problem line of one file's non-finite samples, `found` = [(trace id, count, time of
    its first)] of its traces that have any; None if none has."""
    if not found:
        return None
    count = sum(n for _, n, _ in found)
    first = min(when for _, _, when in found)
    ids = ", ".join(sorted({trace_id for trace_id, _, _ in found}))
    return (
        f"{path}: {count} non-finite sample(s) (NaN or Inf) in {ids}, the first at {first}; "
        "stored as gaps (NaN)"
    )
