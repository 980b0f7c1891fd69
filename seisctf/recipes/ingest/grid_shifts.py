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

from typing import TYPE_CHECKING

import numpy as np

from seisctf.catalogs.seed_ids import channel_id

if TYPE_CHECKING:
    from seisctf.recipes.ingest.placed_traces import PlacedTrace, PlacedTraces

TOLERANCE_SAMPLES = 0.01


def shift_problems(placed: PlacedTraces, rate: float) -> list[str]:
    """One problem line per (station, channel) with a trace moved by more than
    `TOLERANCE_SAMPLES` of a sample onto the `rate` Hz grid, naming the file of its largest
    move, in station, channel order."""
    moved: dict[tuple[str, str], list[PlacedTrace]] = {}
    far = np.abs(placed.offset_s) * rate > TOLERANCE_SAMPLES
    for trace in placed.where(far):  # (objects for the moved traces alone)
        moved.setdefault((trace.header.station, trace.header.channel), []).append(trace)
    if not moved:
        return []
    scans = placed.scans
    pairs, tally = np.unique(
        np.stack([placed.column("station"), placed.column("channel")]), axis=1, return_counts=True
    )
    counts = {
        (scans.station_ids[station], scans.channel_codes[channel]): int(n)
        for (station, channel), n in zip(pairs.T.tolist(), tally.tolist(), strict=True)
    }
    lines = []
    for key in sorted(moved):
        worst = max(moved[key], key=lambda trace: (abs(trace.offset_s), trace.header.path))
        offset = worst.offset_s
        side, stored = ("after", "earlier") if offset > 0 else ("before", "later")
        lines.append(
            f"{worst.header.path}: {channel_id(*key)} starts {abs(offset):.6g} s {side} its "
            f"grid sample ({abs(offset) * rate:.3g} of a sample): its samples are stored "
            f"{abs(offset):.6g} s {stored} than recorded ({len(moved[key])} of its "
            f"{counts[key]} trace(s) moved by more than {TOLERANCE_SAMPLES:.0%} of a sample; "
            "every offset is in `time_offsets_s`)"
        )
    return lines
