"""Overlapping traces whose samples disagree: problem lines, and the files none of whose
samples the store took.

Where traces of one channel overlap on the grid, the merge (`waveform_blocks.merged_rows`:
obspy's `Stream.merge(method=1)`, as `trace_merge` does it) keeps one copy: per channel, traces
in order of start, end, file path and record; a trace that ends later than everything before
it wins the overlap from its start; one that ends no later (it lies within the data before it,
or is a second copy of the same span) is dropped whole if any of its samples differ.
So of two copies of one day the file whose path sorts first is stored. Identical overlaps are
silent; a disagreeing one is a problem line naming both files, the channel, the span, how many
samples differ and by how much, and whose samples the store keeps (read off the merged result,
so the line says what is stored). A trace whose every sample lost such an overlap is "lost":
a file all of whose traces are lost gave the store nothing (`files_not_stored`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from seisctf.catalogs.seed_ids import channel_id
from seisctf.formats.obspy_archive.trace_merge import held


@dataclass(frozen=True)
class Piece:
    """A trace of one file on the grid, as the merge takes it: channel, grid index of its first
    sample, samples (int32 counts or float32)."""

    path: str
    channel: str
    first: int
    samples: np.ndarray

    @property
    def stop(self) -> int:
        return self.first + len(self.samples)


@dataclass(frozen=True)
class Conflict:
    """Two pieces of one channel that overlap on [start, stop) (grid indices) with different
    samples: how many differ, the largest difference, the piece whose samples are stored there
    (None: neither's, a third trace's)."""

    earlier: Piece
    later: Piece
    start: int
    stop: int
    differing: int
    largest: float
    kept: Piece | None


def _same_type(pieces: Sequence[Piece]) -> list[Piece]:
    """The pieces as the merge compares them: a channel whose pieces differ in type in float32."""
    types: dict[str, set] = {}
    for piece in pieces:
        types.setdefault(piece.channel, set()).add(piece.samples.dtype)
    return [
        piece
        if len(types[piece.channel]) == 1
        else Piece(piece.path, piece.channel, piece.first, piece.samples.astype(np.float32))
        for piece in pieces
    ]


def find_conflicts(
    pieces: Sequence[Piece], stored: dict[str, list[tuple[int, np.ndarray]]]
) -> tuple[list[Conflict], set[tuple[str, str]]]:
    """Every pair of overlapping `pieces` of a channel whose samples differ, with the piece
    whose samples the merged rows (`stored[channel]`: (first grid index, samples) in order,
    none overlapping) hold there;
    and the (path, channel) of the files' channels none of whose samples are stored (each of
    their pieces covered, end to end, by overlaps it lost)."""
    pieces = _same_type(pieces)
    lost_spans: list[list[tuple[int, int]]] = [[] for _ in pieces]
    order = sorted(range(len(pieces)), key=lambda i: (pieces[i].channel, pieces[i].first))
    found = []
    for position, i in enumerate(order):
        earlier = pieces[i]
        for j in order[position + 1 :]:
            later = pieces[j]
            if later.channel != earlier.channel or later.first >= earlier.stop:
                break
            start, stop = later.first, min(earlier.stop, later.stop)
            a = earlier.samples[start - earlier.first : stop - earlier.first]
            b = later.samples[start - later.first : stop - later.first]
            differ = a != b
            if not differ.any():
                continue
            largest = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            kept = _kept(stored.get(earlier.channel), start, stop, ((earlier, a), (later, b)))
            found.append(Conflict(earlier, later, start, stop, int(differ.sum()), largest, kept))
            for index, piece in ((i, earlier), (j, later)):
                if kept is not piece:
                    lost_spans[index].append((start, stop))
    whole: dict[tuple[str, str], bool] = {}
    for piece, spans in zip(pieces, lost_spans, strict=True):
        key = (piece.path, piece.channel)
        whole[key] = whole.get(key, True) and _covered(piece, spans)
    return found, {key for key, lost in whole.items() if lost}


def _kept(
    rows: Sequence[tuple[int, np.ndarray]] | None,
    start: int,
    stop: int,
    candidates: Sequence[tuple[Piece, np.ndarray]],
) -> Piece | None:
    """The candidate whose samples the merged `rows` hold on [start, stop), if one does."""
    found = held(rows or (), start, stop)
    if found is None:
        return None
    for piece, samples in candidates:
        if np.array_equal(found, samples.astype(found.dtype)):
            return piece
    return None


def conflict_problems(
    found: Sequence[Conflict], station: str, time_of: Callable[[int], object]
) -> list[str]:
    """The problem lines of `found` (`time_of(grid index)` gives a sample's time), one per
    copy the store did not keep and span: a trace overlapping two identical copies of the
    stored data is named once."""
    lines: dict[tuple, str] = {}
    for conflict in found:
        kept, earlier, later = conflict.kept, conflict.earlier, conflict.later
        dropped = earlier if kept is later else later
        key = (dropped.path, dropped.channel, dropped.first, conflict.start, conflict.stop)
        if key not in lines:
            lines[key] = _line(conflict, dropped, station, time_of)
    return list(lines.values())


def _line(conflict: Conflict, dropped: Piece, station: str, time_of: Callable) -> str:
    """One conflict's line, led by the path of the copy the store did not keep there."""
    kept, earlier, later = conflict.kept, conflict.earlier, conflict.later
    other = later if dropped is earlier else earlier
    where = "another trace of the same file" if other.path == dropped.path else other.path
    keeps = f"{kept.path}'s" if kept is not None else "a third trace's"
    if kept is not None and earlier.path == later.path:
        keeps = "the " + ("earlier" if kept is earlier else "later") + " trace's"
    return (
        f"{dropped.path}: {channel_id(station, dropped.channel)} from "
        f"{time_of(conflict.start)} to {time_of(conflict.stop - 1)} "
        f"({conflict.stop - conflict.start} samples) overlaps {where} with other values "
        f"({conflict.differing} differ, by up to {conflict.largest:g}); the store keeps "
        f"{keeps} samples there"
    )


def _covered(piece: Piece, spans: Iterable[tuple[int, int]]) -> bool:
    """Whether `spans` (grid index ranges) cover the piece from its first sample to its last."""
    reach = piece.first
    for start, stop in sorted(spans):
        if start > reach:
            return False
        reach = max(reach, stop)
    return reach >= piece.stop


def files_not_stored(
    traces: Iterable[tuple[str, str, str]], lost: set[tuple[str, str, str]]
) -> set[str]:
    """Paths of the files all of whose `traces` (path, station, channel) are `lost`."""
    candidates = {path for path, _, _ in lost}
    for key in traces:
        if key[0] in candidates and key not in lost:
            candidates.discard(key[0])
    return candidates
