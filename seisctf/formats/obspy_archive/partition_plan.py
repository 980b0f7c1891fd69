"""The plan of a waveform ingest, made partition by partition of its scan.

A partition is any run of consecutive files of the scan (`scan_table.ScanTable`, path order).
Each round is a function of one partition and of what the merges before it agreed; each merge
takes the partitions' results in path order and keeps from them only what is small (rates,
counts, stations, problem counts and first lines, tallies), so the plan of any split of the
scan is the plan of the whole (`tests/formats/test_partition_plan.py`):

1. `accept`: the traces the inventory accepts (`inventory_checks.findings` of the partition;
   all without one); merge `grid_rate`: the given rate, else the highest of the accepted;
2. `rate_check`: with a given rate, the traces that can be resampled to it (a problem line for
   each other); without, the traces off the grid's rate (bad input); merge: the grid's first
   sample, the earliest start of the traces kept;
3. `place`: the kept traces on the grid (`PlacedTraces`); merge `placed_layout` (one task
   where the partitions' summaries are: the client receives the merge alone): stations,
   channels, the time axis and the moves onto the grid (`grid_shifts`); the station
   metadata is merged in pieces of stations, kept where they are made (`station_pieces`).

`plan_rounds` runs the rounds with a given `each` (`partition_tasks`): in this process
(`plan_of_parts`, `make_plan`: one partition, the whole scan) or as Dask tasks on partitions kept
on a cluster's workers, where the client sees only each partition's summary (`PartSummary`)
and the merge of their placed traces (`PlacedLayout`). The problem lines of partitions stay
with them too: the plan's `problems` (`problem_parts.ProblemLines`) holds handles of them, their
counts and the merged lines.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.grid_shifts import (
    ShiftTally,
    merged_tallies,
    shift_lines,
    tallies,
)
from seisctf.formats.obspy_archive.placed_traces import PlacedTraces
from seisctf.formats.obspy_archive.scan_table import ScanTable
from seisctf.formats.obspy_archive.station_pieces import (
    holding_of,
    positions_of,
    station_pieces,
)
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.obspy_archive.waveform_plan import (
    DEFAULT_BLOCK_SAMPLES,
    NS_PER_S,
    WaveformPlan,
    coordinates_source,
    needs_resampling,
    no_ratio_problem,
    resampled_npts,
)
from seisctf.formats.shared.input_listing import SHOWN, nothing_readable
from seisctf.formats.shared.partition_tasks import Each, in_process, merged
from seisctf.formats.shared.problem_parts import (
    LineCount,
    ProblemLines,
    first_lines,
    last_line,
    line_count,
)

if TYPE_CHECKING:
    from seisctf.formats.obspy_archive.inventory_checks import InventoryFindings


@dataclass(frozen=True, eq=False)
class Accepted:
    """Round 1 of a partition: its scan, the rows (int64, of its trace columns) of the traces
    the inventory accepts, the inventory's contradictions (lines, trace order), the stations it
    does not know ({station: the start of its problem line}), and its station metadata."""

    scans: ScanTable
    rows: np.ndarray
    contradictions: tuple[str, ...] = ()
    unknown: dict[str, str] | None = None
    metadata: dict[str, dict[str, Any]] | None = None
    known: frozenset[str] = frozenset()

    def top_rate(self) -> float:
        """The highest rate (Hz) of the accepted traces (-inf without any)."""
        rates = self.scans.traces["sampling_rate"][self.rows]
        return float(rates.max()) if len(rates) else -np.inf

    def summary(self) -> PartSummary:
        """What the merges need of this partition (`PartSummary`)."""
        scans = self.scans
        return PartSummary(
            problems=line_count(scans.problems),
            readable=scans.readable_with_traces(),
            paths_head=scans.paths[: SHOWN + 1],
            n_files=len(scans.paths),
            n_accepted=len(self.rows),
            top_rate=self.top_rate(),
            contradictions=line_count(self.contradictions),
            unknown=self.unknown or {},
            header_positions=scans.header_positions,
            station_span=holding_of(self).span(),
        )


@dataclass(frozen=True)
class PartSummary:
    """Round 1's partition as the merges see it: its scan problems (counted, `LineCount`: the
    lines stay with the partition), whether a file of it is
    readable with traces, its first SHOWN + 1 paths and its file count, how many traces were
    accepted and their highest rate (Hz), the inventory's findings but its station metadata
    (`Accepted`; its contradictions counted), its files' header positions and the first and
    last station it holds metadata of (`station_pieces.Holding.span`)."""

    problems: LineCount
    readable: bool
    paths_head: tuple[str, ...]
    n_files: int
    n_accepted: int
    top_rate: float
    contradictions: LineCount
    unknown: dict[str, str]
    header_positions: tuple[tuple[str, str, float, float, float], ...]
    station_span: tuple[str, str] | None


def summary_of(part: Accepted) -> PartSummary:
    return part.summary()


def scan_problems_of(part: Accepted) -> tuple[str, ...]:
    """The partition's scan problem lines (kept on its worker)."""
    return part.scans.problems


def contradictions_of(part: Accepted) -> tuple[str, ...]:
    """The partition's inventory contradictions (kept on its worker)."""
    return part.contradictions


def resampling_count(pair: tuple[np.ndarray, list[str]]) -> LineCount:
    """The `LineCount` of round 2's problem lines (`resampleable`)."""
    return line_count(pair[1])


def accept(scans: ScanTable, findings: InventoryFindings | None) -> Accepted:
    """Round 1 (see the module doc)."""
    if findings is None:
        return Accepted(scans, np.arange(scans.n_traces))
    return Accepted(scans, findings.rows, findings.problems, findings.unknown,
                    findings.metadata, findings.known)  # fmt: skip


def _paths_head(parts: Sequence[PartSummary]) -> tuple[list[str], int]:
    head: list[str] = []
    for part in parts:
        head += part.paths_head[: SHOWN + 1 - len(head)]
    return head, sum(part.n_files for part in parts)


def grid_rate(parts: Sequence[PartSummary], rate: float | None) -> tuple[float, list[str]]:
    """Merge 1: the grid's rate and the inventory's unknown stations' lines (the problems so
    far are the scans', then the inventory's contradictions, kept with their partitions, then
    these); bad input when nothing can be ingested."""
    scanned = [part.problems for part in parts]
    if not any(part.readable for part in parts):
        head, count = _paths_head(parts)
        raise nothing_readable(head, first_lines(scanned), count,
                               sum(part.count for part in scanned))  # fmt: skip
    if not any(part.n_accepted for part in parts):
        first = first_lines([*scanned, *(part.contradictions for part in parts)], 1)
        raise InvalidInput(_paths_head(parts)[0][0],
                           "no trace agrees with the inventory: " + first[0])  # fmt: skip
    unknown = {station: start for part in parts for station, start in part.unknown.items()}
    positions = positions_of(parts)
    problems = []
    for station in sorted(unknown):  # coordinates from the first header that gives them
        header_path = positions[station][0][0] if positions.get(station) else None
        problems.append(unknown[station] + coordinates_source(header_path))
    if rate is not None:
        if not (np.isfinite(rate) and rate > 0):
            raise InvalidInput("rate", f"must be a positive number of Hz, got {rate}")
        return float(rate), problems
    return max(part.top_rate for part in parts), problems


def off_rate(chosen: float, part: Accepted) -> list[TraceHeader]:
    """Round 2 without a given rate: the first SHOWN traces whose rate is off `chosen` Hz."""
    other = part.rows[part.scans.traces["sampling_rate"][part.rows] != chosen]
    off = []
    for header in part.scans.headers_of(other):
        if needs_resampling(header, chosen):
            off.append(header)
            if len(off) == SHOWN:
                break
    return off


def resampleable(rate: float, part: Accepted) -> tuple[np.ndarray, list[str]]:
    """Round 2 with a given rate: the rows that can be resampled to `rate` Hz, and a problem
    line for each other (trace order)."""
    unresampled = [no_ratio_problem(h, rate) for h in part.scans.headers_of(part.rows)]
    kept = part.rows[[not problem for problem in unresampled]]
    return kept, [problem for problem in unresampled if problem]


def check_rates(off: Sequence[Sequence[TraceHeader]], chosen: float) -> None:
    """Merge 2 without a given rate: bad input naming the first traces off the grid's rate."""
    first = [header for headers in off for header in headers][:SHOWN]
    if first:
        listed = "; ".join(f"{h.path} ({h.sampling_rate} Hz)" for h in first)
        raise InvalidInput(
            first[0].path,
            f"sampling rates differ from {chosen} Hz: {listed}; give {{rate}} HZ to resample",
            parameters=["rate"],
        )


def first_start(part: Accepted, rows: np.ndarray) -> int | None:
    """The earliest start (ns) of the traces at `rows`, None without any (merge 2: the least)."""
    return int(part.scans.traces["start_ns"][rows].min()) if len(rows) else None


def place(
    rate: float, start_ns: int, resampling: bool, part: Accepted, rows: np.ndarray
) -> PlacedTraces:
    """Round 3: the traces at `rows` on the grid of `rate` Hz whose first sample is at
    `start_ns`, each at its nearest grid sample; `resampling` (a rate was given): those whose
    rate is off are resampled, their lengths those of the resampled traces."""
    scans = part.scans
    start = scans.traces["start_ns"][rows]
    position = (start - start_ns) * rate / NS_PER_S  # in float64, as `place_trace` computes it
    first = np.floor(position + 0.5).astype(np.int64)
    n_samples = scans.traces["npts"][rows].copy()
    resample = np.zeros(len(rows), dtype=bool)
    if resampling:
        for k, header in enumerate(scans.headers_of(rows)):
            if needs_resampling(header, rate):
                resample[k], n_samples[k] = True, resampled_npts(header, rate)
    return PlacedTraces(scans, rows, first, n_samples, (position - first) / rate, resample)


@dataclass(frozen=True)
class PlacedSummary:
    """What the layout needs of a partition's placed traces: its station ids, channel codes,
    the end (grid index after its last sample) and the moves onto the grid (`grid_shifts`)."""

    stations: frozenset[str]
    channels: frozenset[str]
    end: int
    shifts: dict[tuple[str, str], ShiftTally]
    offsets: dict[str, frozenset[float]] = field(default_factory=dict)


def placed_summary(rate: float, placed: PlacedTraces) -> PlacedSummary:
    """The partition's `PlacedSummary`; `offsets`: per station, the distinct offsets (s,
    rounded to 1 ns) of its traces from their grid samples."""
    scans = placed.scans
    codes = placed.column("station").astype(np.float64)
    offsets: dict[str, set[float]] = {}
    for code, offset in np.unique(np.column_stack([codes, placed.offset_s]), axis=0).tolist():
        offsets.setdefault(scans.station_ids[int(code)], set()).add(round(offset, 9))
    return PlacedSummary(
        stations=frozenset(scans.station_ids[c] for c in np.unique(placed.column("station"))),
        channels=frozenset(scans.channel_codes[c] for c in np.unique(placed.column("channel"))),
        end=int((placed.first_index + placed.n_samples).max()) if len(placed) else 0,
        shifts=tallies(placed, rate),
        offsets={station: frozenset(values) for station, values in offsets.items()},
    )


@dataclass(frozen=True)
class PlacedLayout:
    """Merge 3 of the partitions' `PlacedSummary`s (`placed_layout`, one task where they are:
    the client receives this, not a summary a partition): stations and channels (sorted), the
    end of the time axis (grid index), the problem lines of the moves onto the grid
    (`grid_shifts.shift_lines`), each station's own channels and offsets."""

    stations: tuple[str, ...]
    channels: tuple[str, ...]
    end: int
    shift_lines: tuple[str, ...]
    own_channels: dict[str, tuple[str, ...]]
    offsets: dict[str, list[float]]


def placed_layout(rate: float, *summaries: PlacedSummary) -> PlacedLayout:
    """The `PlacedLayout` of the partitions' `summaries` (path order) on the `rate` Hz grid."""
    stations = tuple(sorted(frozenset().union(*(s.stations for s in summaries))))
    return PlacedLayout(
        stations=stations,
        channels=tuple(sorted(frozenset().union(*(s.channels for s in summaries)))),
        end=max(s.end for s in summaries),
        shift_lines=tuple(shift_lines(merged_tallies([s.shifts for s in summaries]), rate)),
        own_channels=own_channels(summaries, stations),
        offsets=station_offsets(summaries, stations),
    )


def own_channels(
    summaries: Sequence[PlacedSummary], stations: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """{station: the channel codes its traces have, sorted} (`WaveformPlan.station_channels`);
    stations of one channel set share one tuple (one copy once pickled, too)."""
    own: dict[str, set[str]] = {station: set() for station in stations}
    for part in summaries:
        for station, channel in part.shifts:
            own[station].add(channel)
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    found = {}
    for station, codes in own.items():
        key = tuple(sorted(codes))
        found[station] = shared.setdefault(key, key)
    return found


def station_offsets(
    summaries: Sequence[PlacedSummary], stations: Sequence[str]
) -> dict[str, list[float]]:
    """Per station: the distinct offsets (s) of its traces from their grid samples, sorted."""
    return {station: sorted(frozenset().union(*(part.offsets.get(station, ()) for part in
                                                 summaries)))
            for station in stations}  # fmt: skip


def plan_rounds(
    accepted: list[Any],
    each: Each,
    rate: float | None = None,
    block_samples: int = DEFAULT_BLOCK_SAMPLES,
) -> tuple[WaveformPlan, list[Any]]:
    """Rounds and merges (module doc) over the partitions `accepted` (round 1's, in path order),
    each round run by `each` (`partition_tasks`): the plan and each partition's placed traces
    (`PlacedTraces`, or a handle of them kept where `each` ran it)."""
    if block_samples < 1:
        raise InvalidInput("block_samples", f"must be positive, got {block_samples}")
    parts = each(summary_of, accepted)
    chosen, unknown = grid_rate(parts, rate)
    contradictions = [part.contradictions for part in parts]
    problems = (ProblemLines.kept(each(scan_problems_of, accepted, keep=True),
                                  [part.problems for part in parts])
                + ProblemLines.kept(each(contradictions_of, accepted, keep=True), contradictions)
                + unknown)  # fmt: skip
    if rate is None:
        check_rates(each(functools.partial(off_rate, chosen), accepted), chosen)
        kept = each(rows_of, accepted, keep=True)
    else:
        checked = each(functools.partial(resampleable, chosen), accepted, keep=True)
        kept = each(first_of, checked, keep=True)
        unresampled = each(resampling_count, checked)
        problems += ProblemLines.kept(each(second_of, checked, keep=True), unresampled)
        if not any(each(len, kept)):
            last = (
                last_line(unresampled)
                or (unknown[-1] if unknown else "")
                or last_line(contradictions)
                or last_line([p.problems for p in parts])
            )
            raise InvalidInput(_paths_head(parts)[0][0],
                               "no trace can be resampled: " + last)  # fmt: skip
    start_ns = min(s for s in each(first_start, accepted, kept) if s is not None)
    placed = each(functools.partial(place, chosen, start_ns, rate is not None), accepted, kept,
                  keep=True)  # fmt: skip
    layout = merged(functools.partial(placed_layout, chosen),
                    each(functools.partial(placed_summary, chosen), placed, keep=True))  # fmt: skip
    problems += list(layout.shift_lines)
    stations, channels = layout.stations, layout.channels
    holdings = each(holding_of, accepted, keep=True)
    pieces, coordinates, disagreements = station_pieces(
        each, holdings, [part.station_span for part in parts], stations, channels
    )
    plan = WaveformPlan(
        stations=stations,
        channels=channels,
        sampling_rate=chosen,
        start_ns=start_ns,
        n_time=layout.end,
        block_samples=block_samples,
        problems=problems + disagreements,
        station_metadata=tuple(pieces),
        coordinates=coordinates,
        own_channels=layout.own_channels,
        offsets=layout.offsets,
    )
    return plan, placed


def rows_of(part: Accepted) -> np.ndarray:
    return part.rows


def first_of(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def second_of(pair: tuple[Any, Any]) -> Any:
    return pair[1]


def plan_of_parts(
    parts: Sequence[Accepted],
    rate: float | None = None,
    block_samples: int = DEFAULT_BLOCK_SAMPLES,
) -> tuple[WaveformPlan, list[PlacedTraces]]:
    """`plan_rounds` of `parts` (in path order) in this process: the plan and each partition's
    placed traces."""
    return plan_rounds(list(parts), in_process, rate, block_samples)


def make_plan(
    scans: ScanTable,
    findings: InventoryFindings | None,
    rate: float | None = None,
    block_samples: int = DEFAULT_BLOCK_SAMPLES,
) -> tuple[WaveformPlan, PlacedTraces]:
    """Lay out the store of the scanned headers, with what the inventory, if any, says of them
    (`inventory_checks.findings`), and its placed traces: the rounds on one partition, the
    whole scan."""
    plan, (placed,) = plan_of_parts([accept(scans, findings)], rate, block_samples)
    return plan, placed
