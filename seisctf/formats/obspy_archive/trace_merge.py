"""One channel's traces on the store's grid merged as obspy merges them, in numpy.

obspy's `Stream.merge(method=1, interpolation_samples=0)` works in two passes over a channel's
traces, each sorted by start and end (ties in their given order), joining arrays at every step:

1. `Stream._cleanup` joins each trace to the one it follows if they meet back to back or agree
   sample for sample where they overlap (a trace inside the other adds nothing); a trace that
   disagrees, or follows a gap, starts a new one.
2. `Trace.__add__(method=1, interpolation_samples=0)` folds what is left: a trace that ends
   after what is merged so far replaces it from its own first sample on (the samples between
   the merged end and its first, a gap, are masked); one that ends within it changes nothing
   (it could only fill a masked sample if it started before the merged trace's last piece,
   which the sort rules out).

On the grid a trace is (first grid index, samples) and times compare as indices. `merged_channel`
keeps each pass's traces as lists of pieces of the given samples (views): the merge copies
nothing, and a block is cut straight from its pieces. tests/formats/test_trace_merge.py holds
it to obspy's merge itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Pieces = list[tuple[int, np.ndarray]]  # (first grid index, samples), back to back


def merged_channel(pieces: Sequence[tuple[int, np.ndarray]]) -> Pieces:
    """obspy's merge of one channel's `pieces` (first grid index, samples; one dtype) as pieces
    of them (views, nothing copied): in order, none overlapping, none where obspy's merged
    trace is masked (its gaps); empty if every piece is empty (obspy keeps no trace). Laid on
    a grid they give obspy's samples; where obspy masks, nothing."""
    kept = [(first, samples) for first, samples in pieces if len(samples)]
    ordered = sorted(kept, key=lambda piece: (piece[0], piece[0] + len(piece[1])))
    merged: Pieces = []
    for trace in _sorted(_cleaned(ordered)) if ordered else []:
        if merged and _end(trace) <= _end(merged):  # within: obspy keeps what is there
            continue
        cut = _first(trace)  # a trace that ends later wins from its first sample on
        while merged and merged[-1][0] >= cut:
            merged.pop()
        if merged and _end(merged) > cut:
            first, samples = merged[-1]
            merged[-1] = (first, samples[: cut - first])
        merged += trace
    return merged


def _cleaned(ordered: Sequence[tuple[int, np.ndarray]]) -> list[Pieces]:
    """`Stream._cleanup`'s traces of `ordered` pieces (sorted by start and end), as pieces."""
    traces: list[Pieces] = []
    current: Pieces = [ordered[0]]
    for first, samples in ordered[1:]:
        end, stop = _end(current), first + len(samples)
        # The overlap, all of it in `current` (its pieces are back to back).
        common = held(current, first, min(end, stop)) if first < end else None
        if common is not None and np.array_equal(common, samples[: min(end, stop) - first]):
            if stop > end:
                current.append((end, samples[end - first :]))
        elif first == end:
            current.append((first, samples))
        else:  # a gap, or an overlap of other values
            traces.append(current)
            current = [(first, samples)]
    traces.append(current)
    return traces


def _sorted(traces: list[Pieces]) -> list[Pieces]:
    """`traces` by start, then end (stable: obspy's `Stream.sort` by those keys)."""
    return sorted(traces, key=lambda trace: (_first(trace), _end(trace)))


def _first(trace: Pieces) -> int:
    return trace[0][0]


def _end(trace: Pieces) -> int:
    """The grid index after the trace's last sample."""
    first, samples = trace[-1]
    return first + len(samples)


def held(pieces: Sequence[tuple[int, np.ndarray]], lo: int, hi: int) -> np.ndarray | None:
    """The samples `pieces` (in order, none overlapping) hold at grid indices lo…hi-1; None
    unless they hold every one."""
    parts, reach = [], lo
    for first, samples in pieces:
        if first + len(samples) <= reach or first >= hi:
            continue
        if first > reach:
            return None
        parts.append(samples[reach - first : hi - first])
        reach = first + len(samples)
    if reach < hi:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
