"""The plan of a DAS ingest made partition by partition of its scan, and what needs every patch
made where the partitions are: the client holds a summary per partition, never a patch.

A partition is a run of consecutive files' scans (`DasFileScan`s, path order). Each round is a
function of one partition and of what the merges before it agreed (`partition_tasks.Each`: in
this process, or as Dask tasks where the scan's partitions are kept), so the plan of any split
of the scan is the plan of the whole (`tests/formats/test_das_parts.py`):

1. `axis_groups`: the partition's patches grouped by axis key, each group's size and earliest
   patch; merge `candidates`: the earliest patches of the CANDIDATES largest groups (a few ns
   of jitter in DASCore's step splits a group, not the agreement);
2. `agreement`: per candidate axis, how many patches agree with it (`DasAxis.mismatch`) and the
   earliest start among them; merge `chosen`: the axis most patches agree with (ties: the axis
   of the earliest patch, then path), and the grid's start;
3. `place_part` (kept): the partition's accepted patches on the grid, in painting order, and a
   problem line for each other; `summary` of it: the grid's extent, the blocks it touches, the
   interrogators, the problems and any patch before the grid's start.

The fingerprint (`fingerprint_of_parts`) and a wave's runs (`wave_runs`) each need what many
partitions hold: one task where the partitions are (`partition_tasks.merged`) merges them (in
painting order by `heapq.merge`: each partition is sorted), from what each keeps for it (its
files' hashes, its patches' pieces) where that is less than the partition, and returns what is
small. Gaps and overlaps (`record_spans`) are found and written group by group of partitions
in time order (`ordered_parts`), and the inputs table (`write_table_of_parts`) partition by
partition (`table_pieces`).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.formats.das import das_inputs, das_spans
from seisctf.formats.das.das_inputs import RecordedDas
from seisctf.formats.das.das_plan import (
    DasAxis,
    DasFileScan,
    DasPatch,
    DasPlan,
    PlacedPatch,
    Reach,
    chunk_rows,
    gaps_and_overlaps,
    painting_order,
    place,
    reach,
    reaches_before,
    span_rows,
)
from seisctf.formats.das.das_runs import DasRun, PieceIndex, RunLayout, merged_spans
from seisctf.formats.shared import table_pieces
from seisctf.formats.shared.input_listing import SHOWN, nothing_readable
from seisctf.formats.shared.input_manifest import InputStats
from seisctf.formats.shared.ordered_parts import ordered
from seisctf.formats.shared.partition_tasks import Each, in_process, merged
from seisctf.formats.shared.problem_parts import LineCount, ProblemLines, first_lines, line_count
from seisctf.formats.shared.resumable import fingerprint_of
from seisctf.formats.shared.table_pieces import Piece
from seisctf.location import StoreLocation

CANDIDATES = 16  # axes whose agreement is counted: the largest groups of equal axis keys


def patches_of(scans: Iterable[DasFileScan]) -> Iterator[DasPatch]:
    return (patch for scan in scans for patch in scan.patches)


def _age(patch: DasPatch) -> tuple:
    return (patch.start_ns, patch.path, patch.index)


# --- round 1: the candidate axes --------------------------------------------------------------


def axis_groups(scans: Sequence[DasFileScan]) -> dict[tuple, tuple[int, DasPatch]]:
    """{axis key: (patches with it, the earliest of them)} of a partition."""
    groups: dict[tuple, tuple[int, DasPatch]] = {}
    for patch in patches_of(scans):
        key = DasAxis.of(patch).key()
        count, first = groups.get(key, (0, patch))
        groups[key] = (count + 1, min(first, patch, key=_age))
    return groups


def candidates(found: Sequence[dict[tuple, tuple[int, DasPatch]]]) -> list[DasPatch]:
    """The earliest patch of each of the CANDIDATES largest groups of all partitions (`found`:
    their `axis_groups`), largest first (ties: earliest)."""
    groups: dict[tuple, tuple[int, DasPatch]] = {}
    for part in found:
        for key, (count, first) in part.items():
            total, earliest = groups.get(key, (0, first))
            groups[key] = (total + count, min(earliest, first, key=_age))
    ranked = sorted(groups.values(), key=lambda group: (-group[0], *_age(group[1])))
    return [first for _, first in ranked[:CANDIDATES]]


# --- round 2: the axis and the grid's start ---------------------------------------------------


def agreement(axes: Sequence[DasAxis], scans: Sequence[DasFileScan]) -> list[tuple[int, Any]]:
    """Per axis of `axes`: (the partition's patches that agree with it, the earliest start
    (ns) among them or None)."""
    found = []
    for axis in axes:
        starts = [p.start_ns for p in patches_of(scans) if axis.mismatch(p) is None]
        found.append((len(starts), min(starts) if starts else None))
    return found


def chosen(
    firsts: Sequence[DasPatch], found: Sequence[list[tuple[int, Any]]]
) -> tuple[DasAxis, int]:
    """The axis of `firsts` (the candidates' earliest patches) most patches agree with (`found`:
    the partitions' `agreement`; ties: the earliest patch, then path) and the earliest start
    among the patches that agree with it."""
    totals = [sum(part[i][0] for part in found) for i in range(len(firsts))]
    best = min(range(len(firsts)), key=lambda i: (-totals[i], *_age(firsts[i])))
    return DasAxis.of(firsts[best]), min(s for part in found if (s := part[best][1]) is not None)


# --- round 3: the partition on the grid ---------------------------------------------------------


@dataclass(frozen=True)
class PlacedPart:
    """A partition on the grid: its files' scans, its accepted patches (`placed`, painting
    order), a problem line for each other patch (patch order) and the first patch before the
    grid's start (path order; None: none); `old`: the paths of its files an append found in
    the store (their patches placed as the store holds them)."""

    scans: tuple[DasFileScan, ...]
    placed: tuple[PlacedPatch, ...]
    problems: tuple[str, ...]
    early: str | None = None
    old: frozenset[str] = frozenset()


def place_part(
    axis: DasAxis,
    start_ns: int,
    scans: Sequence[DasFileScan],
    record: RecordedDas | None = None,
    kept: Sequence[PlacedPatch] = (),
) -> PlacedPart:
    """The partition's patches on the grid of `axis` from `start_ns`, with `kept` (patches
    already in the store). With `record` (an append's, of the partition's range), the files it
    records keep the patches it places and are not placed again."""
    old: frozenset[str] = frozenset()
    if record is not None:
        recorded = set(record.paths())
        old = frozenset(scan.path for scan in scans if scan.path in recorded)
        kept = [*kept, *(p for p in record.placed if p.patch.path in old)]
    problems, placed = [], []
    for patch in patches_of(scan for scan in scans if scan.path not in old):
        why = axis.mismatch(patch)
        if why:
            problems.append(f"{patch.path}: patch {patch.index}: {why}; not ingested")
        else:
            placed.append(place(patch, start_ns, axis.step_ns))
    early = next((p.patch.path for p in placed if p.first_index < 0), None)
    ordered = tuple(sorted([*kept, *placed], key=painting_order))
    return PlacedPart(tuple(scans), ordered, tuple(problems), early, old)


@dataclass(frozen=True)
class PartSummary:
    """What the client keeps of a partition: files, the first SHOWN + 1 paths, the grid samples
    [first, stop) its patches span (stop 0: no patch), the blocks they touch (merged [first,
    stop) ranges) and those the patches of its files not `old` touch (`fresh_touched`), its
    interrogators, the scan's problem lines (of its files not `old`) and the axis' (patch
    order), counted (`problem_parts.LineCount`: the lines stay with the partition), and the
    first patch before the grid's start; `patches`: how many it places."""

    files: int
    paths: tuple[str, ...]
    patches: int
    first_index: int
    stop_index: int
    touched: tuple[tuple[int, int], ...]
    interrogators: frozenset[str]
    scan_problems: LineCount
    axis_problems: LineCount
    early: str | None
    fresh_touched: tuple[tuple[int, int], ...] = ()


def _touched(block_samples: int, placed: Iterable[PlacedPatch]) -> tuple[tuple[int, int], ...]:
    """The [first, stop) block ranges (merged) the samples of `placed` fall in."""
    spans = [(p.first_index, p.stop_index) for p in placed if p.stop_index > p.first_index]
    starts, lengths = merged_spans(
        (max(first, 0) // block_samples, (stop - 1) // block_samples + 1) for first, stop in spans
    )
    return tuple(zip(starts.tolist(), (starts + lengths).tolist(), strict=True))


def summary(block_samples: int, part: PlacedPart) -> PartSummary:
    """The partition's `PartSummary` on blocks of `block_samples`."""
    touched = _touched(block_samples, part.placed)
    fresh = [p for p in part.placed if p.patch.path not in part.old] if part.old else part.placed
    return PartSummary(
        files=len(part.scans),
        paths=tuple(scan.path for scan in part.scans[: SHOWN + 1]),
        patches=len(part.placed),
        first_index=min((p.first_index for p in part.placed), default=0),
        stop_index=max((p.stop_index for p in part.placed), default=0),
        touched=touched,
        interrogators=frozenset(_interrogator(p.patch) for p in part.placed),
        scan_problems=line_count(scan_problems_of(part)),
        axis_problems=line_count(part.problems),
        early=part.early,
        fresh_touched=touched if fresh is part.placed else _touched(block_samples, fresh),
    )


def _interrogator(patch: DasPatch) -> str:
    name = f"{patch.file_format} {patch.file_version}".strip()
    return f"{name} ({patch.instrument_id})" if patch.instrument_id else name


# --- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartedPlan:
    """A plan whose patches stay in its partitions: the grid (`plan`, no `placed`), each
    partition placed (`parts`: kept where they were made) and its `summaries`."""

    plan: DasPlan
    parts: list[Any]
    summaries: list[PartSummary]

    @property
    def interrogator(self) -> str:
        """The interrogators (format and version, instrument id) of the ingested patches."""
        return "; ".join(sorted(set().union(*(s.interrogators for s in self.summaries))))

    def layout(self) -> RunLayout:
        """The runs over every block a patch touches."""
        return RunLayout(self.plan, [span for s in self.summaries for span in s.touched])

    def parts_between(self, first: int, stop: int) -> list[Any]:
        """The partitions holding a patch with samples in grid samples [first, stop)."""
        return [
            part
            for part, s in zip(self.parts, self.summaries, strict=True)
            if s.stop_index > max(s.first_index, first) and s.first_index < stop
        ]


def plan_parts(
    scan_parts: Sequence[Any],
    each: Each,
    block_samples: int | None = None,
    *,
    axis: DasAxis | None = None,
    start_ns: int | None = None,
    kept: Sequence[PlacedPatch] = (),
    records: Sequence[Any] | None = None,
) -> PartedPlan:
    """Check the scanned patches of the partitions `scan_parts` (lists of `DasFileScan`) and
    lay out the store (`das_plan` module doc). `axis`, `start_ns`: the store's axis and grid
    start when appending; its patches either `kept` (joining every partition) or, per
    partition, in the `records` of their ranges (`place_part`)."""
    if axis is None:
        firsts = candidates(each(axis_groups, scan_parts))
        if not firsts:  # no patch in any file
            found = each(_summary_of_scans, scan_parts)
            paths = [path for s in found for path in s.paths][: SHOWN + 1]
            counts = [s.scan_problems for s in found]
            raise nothing_readable(paths, first_lines(counts), sum(s.files for s in found),
                                   problem_count=sum(c.count for c in counts))  # fmt: skip
        axes = [DasAxis.of(first) for first in firsts]
        axis, earliest = chosen(firsts, each(functools.partial(agreement, axes), scan_parts))
        start_ns = earliest if start_ns is None else start_ns
    if start_ns is None:
        raise ValueError("an axis is given with its grid's start")
    if block_samples is None:
        block_samples = chunk_rows(axis.n_distance)
    if block_samples < 1:
        raise InvalidInput("block_samples", f"must be positive, got {block_samples}")
    placing = functools.partial(place_part, axis, start_ns, kept=kept)
    records = [None] * len(scan_parts) if records is None else records
    placed = each(placing, scan_parts, records, keep=True)
    summaries = each(functools.partial(summary, block_samples), placed)
    if not any(s.patches for s in summaries):
        first = next((path for s in summaries for path in s.paths), "inputs")
        line = first_lines([s.axis_problems for s in summaries], 1)[0]
        raise InvalidInput(first, "no patch agrees with the others: " + line)
    early = next((s.early for s in summaries if s.early is not None), None)
    if early is not None:
        raise InvalidInput(
            early, "starts before the store; ingest without {append}", parameters=["append"]
        )
    plan = DasPlan(
        axis=axis,
        start_ns=start_ns,
        n_time=max(s.stop_index for s in summaries),
        block_samples=block_samples,
        placed=(),
        problems=_kept_lines(scan_problems_of, placed, [s.scan_problems for s in summaries], each)
        + _kept_lines(_axis_problems_of, placed, [s.axis_problems for s in summaries], each),
    )
    return PartedPlan(plan, placed, summaries)


def scan_problems_of(part: PlacedPart) -> tuple[str, ...]:
    """The scan's problem lines of the partition's files (not `old`: an append's store has
    those of its own)."""
    return tuple(p for scan in part.scans if scan.path not in part.old for p in scan.problems)


def _axis_problems_of(part: PlacedPart) -> tuple[str, ...]:
    return part.problems


def _kept_lines(
    lines_of: Any, placed: Sequence[Any], counts: Sequence[LineCount], each: Each
) -> ProblemLines:
    """The lines `lines_of` each partition, kept where it is (none: no task)."""
    if not any(count.count for count in counts):
        return ProblemLines()
    return ProblemLines.kept(each(lines_of, placed, keep=True), counts)


def _summary_of_scans(scans: Sequence[DasFileScan]) -> PartSummary:
    return summary(1, PlacedPart(tuple(scans), (), ()))


def make_das_plan(
    scans: Sequence[DasFileScan],
    block_samples: int | None = None,
    *,
    axis: DasAxis | None = None,
    start_ns: int | None = None,
    kept: Sequence[PlacedPatch] = (),
) -> DasPlan:
    """The plan of `scans` as one partition, in this process, its patches in `placed`."""
    parted = plan_parts([list(scans)], in_process, block_samples, axis=axis, start_ns=start_ns,
                        kept=kept)  # fmt: skip
    plan = parted.plan
    return dataclasses.replace(plan, placed=parted.parts[0].placed, problems=tuple(plan.problems))


# --- what needs every partition ---------------------------------------------------------------


def in_painting_order(parts: Sequence[PlacedPart]) -> Iterator[PlacedPatch]:
    return heapq.merge(*(part.placed for part in parts), key=painting_order)


def _span_rows(part: PlacedPart) -> list[tuple[int, str, int, int]]:
    return list(span_rows(part.placed))


def _timed_spans(grid: tuple[int, int], rows: Sequence[tuple], before: Reach) -> dict:
    return das_spans.timed(*gaps_and_overlaps(rows, before), *grid)


def record_spans(store: StoreLocation, parted: PartedPlan, each: Each) -> dict[str, Any]:
    """Write the groups of the gaps and overlaps the root attrs cannot hold (`das_spans`) and
    return the root attrs of them. Each partition's patch spans (`span_rows`, kept) are put in
    time order by groups (`ordered_parts.ordered`: a partition apart from the others in time is
    a group as it is); each group's spans are found where it is, from what the groups before it
    reach (`reaches_before`), and written there."""
    grid = (parted.plan.start_ns, parted.plan.axis.step_ns)
    limit = cv.ATTR_DAS_SPANS  # the client's (read here, not where the task runs)
    groups, reaches = ordered(each(_span_rows, parted.parts, keep=True), each, reach)
    spans = each(functools.partial(_timed_spans, grid), groups, reaches_before(reaches), keep=True)
    return das_spans.write_span_parts(store, spans, each, limit)


def das_fingerprint(hashes: Iterable[str], block_samples: int) -> str:
    """What determines the store's bytes: the input files' sha256 (hex) and the block size
    (paths excluded: moving an archive does not change the data; seisctf's version too: a
    release leaves stores up to date)."""
    return fingerprint_of({"kind": "das", "inputs": sorted(hashes), "block_samples": block_samples})


def _hashes(part: PlacedPart) -> list[str]:
    return [scan.entry["sha256"] for scan in part.scans]


def _fingerprint(block_samples: int, *hashes: list[str]) -> str:
    return das_fingerprint((h for part in hashes for h in part), block_samples)


def fingerprint_of_parts(parted: PartedPlan, each: Each) -> str:
    """`das_fingerprint` of every partition's files: their hashes (kept), by one task."""
    hashes = each(_hashes, parted.parts, keep=True)
    return merged(functools.partial(_fingerprint, parted.plan.block_samples), hashes)


def _table_piece(part: PlacedPart, stats: InputStats) -> Piece:
    """The partition's rows of the inputs table (`das_inputs.table_columns`)."""
    scans = list(part.scans)
    made = das_inputs.table_columns(scans, das_inputs.modified_of(scans, stats), part.placed)
    return Piece({name: (dim, make()) for name, (dim, make) in made.items()})


def write_table_of_parts(
    store: StoreLocation, stats: Sequence[Any], parted: PartedPlan, each: Each, name: str
) -> None:
    """The store's inputs table (`das_inputs`, in group `name`) of every partition, with the
    files' `stats` (`InputStats`: one or one a partition), written piece by piece where the
    partitions are (`table_pieces`)."""
    parts = parted.parts
    stats = list(stats) if len(stats) == len(parts) else [stats[0]] * len(parts)
    pieces = each(_table_piece, parts, stats, keep=True)
    files = {das_inputs.PATCH: "patch_file", das_inputs.PROBLEM: "problem_file"}
    table_pieces.write_pieces(store, name, pieces, each, files)


def _piece_counts(layout: RunLayout, part: PlacedPart) -> tuple[np.ndarray, np.ndarray]:
    """(run numbers, pieces of the partition's patches in each) of the runs of `layout`."""
    size = layout.plan.block_samples
    spans = [
        (max(p.first_index, 0) // size, (p.stop_index - 1) // size + 1)
        for p in part.placed
        if p.stop_index > p.first_index
    ]
    blocks = np.concatenate([np.arange(a, b) for a, b in spans]) if spans else np.zeros(0, int)
    runs = layout.runs_of(blocks.astype(np.int64))
    numbers, counts = np.unique(runs[runs >= 0], return_counts=True)
    return numbers, counts


def run_pieces(parted: PartedPlan, layout: RunLayout, each: Each) -> np.ndarray:
    """(run,) int64: the patch pieces each run of `layout` paints (what its graph carries),
    counted where the partitions are."""
    pieces = np.zeros(len(layout), dtype=np.int64)
    for numbers, counts in each(functools.partial(_piece_counts, layout), parted.parts):
        np.add.at(pieces, numbers, counts)
    return pieces


def _wave_runs(
    layout: RunLayout, numbers: Sequence[int], cache_run: str, *parts: PlacedPart
) -> list[DasRun]:
    files = {scan.path: (scan.entry["sha256"], scan.entry["size"])
             for part in parts for scan in part.scans}  # fmt: skip
    index = PieceIndex(layout.plan, list(in_painting_order(parts)), files, cache_run)
    return [index.run(number, layout.blocks_of(number)) for number in numbers]


def wave_runs(
    parted: PartedPlan, layout: RunLayout, numbers: Sequence[int], cache_run: str
) -> list[DasRun]:
    """Runs `numbers` of `layout` with their pieces, made by one task where the partitions
    holding them are."""
    blocks = [block for number in numbers for block in layout.blocks_of(number)]
    if not blocks:
        return [DasRun(number, ()) for number in numbers]
    first = parted.plan.block_span(min(blocks))[0]
    stop = parted.plan.block_span(max(blocks))[1]
    parts = parted.parts_between(first, stop)
    return merged(functools.partial(_wave_runs, layout, list(numbers), cache_run), parts)
