"""Traces moved onto the store's time grid: a problem when the move exceeds a tolerance.

Every trace starts at its nearest grid sample (no interpolation): its samples are stored up to
half a sample away from the times its file records, and `time_offsets_s` keeps each offset. A
move of more than `TOLERANCE_SAMPLES` of a sample (1 %) is a problem line per station and
channel: two channels of one station sampled at different sub-sample phases (CH.BALST's LHE
0.375 s off LHZ's samples), or stations whose clocks start samples at different fractions of a
second, are stored with shifted times, and a picker or a beamformer reading the store would
see the shift as signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from seisctf.catalogs.seed_ids import channel_id

if TYPE_CHECKING:
    from seisctf.formats.obspy_archive.placed_traces import PlacedTraces

TOLERANCE_SAMPLES = 0.01


@dataclass(frozen=True)
class ShiftTally:
    """The moves onto the grid of one (station, channel)'s traces: how many moved by more than
    TOLERANCE_SAMPLES of a sample, of how many, and the largest move (s, trace minus grid) with
    its file (the path sorting last among equal moves)."""

    moved: int
    total: int
    worst_offset_s: float = 0.0
    worst_path: str = ""

    def worst(self) -> tuple[float, str]:
        return abs(self.worst_offset_s), self.worst_path


def tallies(placed: PlacedTraces, rate: float) -> dict[tuple[str, str], ShiftTally]:
    """{(station, channel): ShiftTally} of the placed traces on the `rate` Hz grid."""
    scans = placed.scans
    pairs, tally = np.unique(
        np.stack([placed.column("station"), placed.column("channel")]), axis=1, return_counts=True
    ) if len(placed) else (np.zeros((2, 0), np.int64), np.zeros(0, np.int64))  # fmt: skip
    found = {
        (scans.station_ids[station], scans.channel_codes[channel]): ShiftTally(0, int(n))
        for (station, channel), n in zip(pairs.T.tolist(), tally.tolist(), strict=True)
    }
    far = np.abs(placed.offset_s) * rate > TOLERANCE_SAMPLES
    for trace in placed.where(far):  # (objects for the moved traces alone)
        key = (trace.header.station, trace.header.channel)
        old = found[key]
        moved = ShiftTally(old.moved + 1, old.total, trace.offset_s, trace.header.path)
        found[key] = moved if old.moved == 0 or moved.worst() > old.worst() else (
            ShiftTally(old.moved + 1, old.total, old.worst_offset_s, old.worst_path))  # fmt: skip
    return found


def merged_tallies(
    parts: Sequence[dict[tuple[str, str], ShiftTally]],
) -> dict[tuple[str, str], ShiftTally]:
    """The tallies of traces split among `parts`, as if tallied together."""
    merged: dict[tuple[str, str], ShiftTally] = {}
    for part in parts:
        for key, tally in part.items():
            old = merged.get(key)
            if old is None:
                merged[key] = tally
                continue
            pick = tally if tally.moved and (not old.moved or tally.worst() > old.worst()) else old
            merged[key] = ShiftTally(old.moved + tally.moved, old.total + tally.total,
                                     pick.worst_offset_s, pick.worst_path)  # fmt: skip
    return merged


def shift_lines(found: dict[tuple[str, str], ShiftTally], rate: float) -> list[str]:
    """One problem line per (station, channel) with a trace moved by more than
    `TOLERANCE_SAMPLES` of a sample onto the `rate` Hz grid, naming the file of its largest
    move, in station, channel order."""
    lines = []
    for key in sorted(k for k, tally in found.items() if tally.moved):
        tally = found[key]
        offset = tally.worst_offset_s
        side, stored = ("after", "earlier") if offset > 0 else ("before", "later")
        lines.append(
            f"{tally.worst_path}: {channel_id(*key)} starts {abs(offset):.6g} s {side} its "
            f"grid sample ({abs(offset) * rate:.3g} of a sample): its samples are stored "
            f"{abs(offset):.6g} s {stored} than recorded ({tally.moved} of its "
            f"{tally.total} trace(s) moved by more than {TOLERANCE_SAMPLES:.0%} of a sample; "
            "every offset is in `time_offsets_s`)"
        )
    return lines


def shift_problems(placed: PlacedTraces, rate: float) -> list[str]:
    """`shift_lines` of the placed traces."""
    return shift_lines(tallies(placed, rate), rate)
