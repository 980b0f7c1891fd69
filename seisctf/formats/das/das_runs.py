"""A DAS ingest's runs: the time blocks some patch touches, in time order, cut into runs of
equal length (`run_length`: RUN_BLOCKS at most; fewer, down to one, while that leaves fewer
than MIN_RUNS runs, so a small ingest still spreads over a cluster). A run is one Dask task,
which writes its blocks one after another (`das_blocks.block_values`: one block in memory at a
time), and one progress record: a year of 1,000 channels at 1 kHz is ~3·10^7 blocks of 4 MiB,
which as a task and a record each would cost the scheduler and the store more than the data.

The client holds the merged spans of touched blocks (`RunLayout`), not a task per block nor a
patch: a run's blocks' pieces are found when the run's task is made, wave by wave, where the
plan's partitions are (`PieceIndex`, `das_parts.wave_runs`). Where the runs fall depends on the
plan alone (never on the cluster), so a resume on any cluster finds the same runs; the store's
bytes do not depend on them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.formats.das.das_blocks import (
    DasBlockTask,
    PieceRead,
    block_values,
    read_pieces,
)
from seisctf.formats.das.das_plan import DasPlan, PlacedPatch
from seisctf.formats.shared import input_locality, resumable
from seisctf.formats.shared.chunk_writes import ChunkWriter, write_chunks
from seisctf.formats.shared.coverage_parts import SpanRuns
from seisctf.formats.shared.resumable import PROGRESS_VAR, open_store
from seisctf.location import StoreLocation

# Blocks a run writes at most: ~128 MiB of float32 at the default block size, a second or two
# of work, so that the tasks (and records) are ~RUN_BLOCKS times fewer than the blocks.
RUN_BLOCKS = 32
MIN_RUNS = 16


def run_length(n_blocks: int) -> int:
    """Blocks of each run (the last may have fewer) of an ingest writing `n_blocks` blocks."""
    return max(1, min(RUN_BLOCKS, n_blocks // MIN_RUNS))


@dataclass(frozen=True)
class DasRun:
    """The blocks one task writes, in time order, and its progress record's `number`."""

    number: int
    blocks: tuple[DasBlockTask, ...]

    def digests(self) -> list[str]:
        """The sha256 (hex) of every file the run reads."""
        return [piece[4] for block in self.blocks for piece in block.pieces]


class RunLayout:
    """The runs of `plan` over the blocks of `touched` ([first, stop) block ranges: every
    block some patch touches, or an append's), by block arithmetic alone: where the runs fall
    depends on the plan alone, never on the cluster."""

    def __init__(self, plan: DasPlan, touched: Iterable[tuple[int, int]]):
        self.plan = plan
        self._starts, self._lengths = merged_spans(touched)
        self._before = np.concatenate([[0], np.cumsum(self._lengths)])
        self.run_blocks = run_length(self.n_blocks)

    @classmethod
    def of_patches(cls, plan: DasPlan) -> RunLayout:
        """The runs over every block a patch of `plan.placed` touches."""
        spans = [(p.first_index, p.stop_index) for p in plan.placed if p.stop_index > p.first_index]
        return cls(plan, [(r.start, r.stop) for r in (plan.blocks_between(*s) for s in spans)])

    @property
    def n_blocks(self) -> int:
        """Blocks the runs write."""
        return int(self._before[-1])

    def __len__(self) -> int:
        return math.ceil(self.n_blocks / self.run_blocks)

    def runs_of(self, blocks: np.ndarray) -> np.ndarray:
        """The run writing each of `blocks` (int64), -1 where no run writes the block."""
        if not len(self._starts):
            return np.full(len(blocks), -1, dtype=np.int64)
        span = np.maximum(np.searchsorted(self._starts, blocks, side="right") - 1, 0)
        offset = blocks - self._starts[span]
        inside = (offset >= 0) & (offset < self._lengths[span])
        return np.where(inside, (self._before[span] + offset) // self.run_blocks, -1)

    def cells(self) -> SpanRuns:
        """Which run wrote which block, for the tasks writing the coverage
        (`coverage_parts.write_coverage`)."""
        return SpanRuns(self._starts, self._lengths, self._before[:-1], self.run_blocks)

    def blocks_of(self, number: int) -> list[int]:
        """The block indices run `number` writes, in order."""
        ordinals = np.arange(
            number * self.run_blocks, min((number + 1) * self.run_blocks, self.n_blocks)
        )
        span = np.searchsorted(self._before, ordinals, side="right") - 1
        return (self._starts[span] + ordinals - self._before[span]).tolist()


class PieceIndex:
    """The pieces of `placed` (patches on `plan`'s grid, in painting order) in any block.
    `files`: {path: (sha256 hex, size)} of their files; `cache_run`: the input-cache run whose
    copies the tasks read."""

    def __init__(
        self,
        plan: DasPlan,
        placed: Sequence[PlacedPatch],
        files: Mapping[str, tuple[str, int]],
        cache_run: str = "",
    ):
        self.plan, self.placed, self.files, self.cache_run = plan, placed, files, cache_run
        self._firsts = np.array([p.first_index for p in placed], dtype=np.int64)
        self._stops = np.array([p.stop_index for p in placed], dtype=np.int64)
        # Patches come in painting order, by first sample: those before index i reach no
        # further than `reach[i - 1]`, which finds the first patch a block can overlap.
        self._reach = np.maximum.accumulate(self._stops) if len(placed) else self._stops

    def run(self, number: int, blocks: Sequence[int]) -> DasRun:
        """Run `number` of `blocks`: each block with its pieces in painting order."""
        return DasRun(number, tuple(self.block(block) for block in blocks))

    def block(self, block: int) -> DasBlockTask:
        first, stop = self.plan.block_span(block)
        lo = int(np.searchsorted(self._reach, first, side="right"))
        hi = int(np.searchsorted(self._firsts, stop, side="left"))
        pieces = []
        for index in range(lo, hi):
            if self._stops[index] <= first:
                continue
            placed = self.placed[index]
            k0 = max(first, placed.first_index) - placed.first_index
            k1 = min(stop, placed.stop_index) - placed.first_index
            found = (placed.patch, k0, k1, placed.first_index + k0 - first)
            pieces.append((*found, *self.files[placed.patch.path]))
        return DasBlockTask(
            block, first, stop, self.plan.axis.n_distance, tuple(pieces), cache_run=self.cache_run
        )


def merged_spans(spans: Iterable[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths) of the union of [first, stop) ranges, in order, as disjoint ranges."""
    starts: list[int] = []
    stops: list[int] = []
    for first, stop in sorted((int(a), int(b)) for a, b in spans if b > a):
        if stops and first <= stops[-1]:
            stops[-1] = max(stops[-1], stop)
        else:
            starts.append(first)
            stops.append(stop)
    begun = np.array(starts, dtype=np.int64)
    return begun, np.array(stops, dtype=np.int64) - begun


# Pieces a run's blocks read elsewhere: (position of the block in the run, its pieces read).
RunPieces = list[tuple[int, list[PieceRead]]]


def read_run_pieces(
    run: DasRun, store: StoreLocation, which: Sequence[tuple[int, Sequence[int]]]
) -> RunPieces:
    """The pieces `which` ((block position in the run, piece indices)) of a run, read on the
    host that keeps their files (`das_blocks.read_pieces`)."""
    return [
        (position, read_pieces(run.blocks[position], store, indices)) for position, indices in which
    ]


def ingest_run(
    run: DasRun, store: StoreLocation, variable: str, read: Sequence[RunPieces] = ()
) -> dict[str, list]:
    """Read (but the pieces in `read`, read elsewhere), paint and write each block of the run,
    then the run's progress record, which it returns with its problems counted, not listed
    (`resumable.counted_record`: the lines stay in the store)."""
    elsewhere: dict[int, list[list[PieceRead]]] = {}
    for part in read:
        for position, pieces in part:
            elsewhere.setdefault(position, []).append(pieces)
    group = open_store(store, mode="r+")
    data = group[variable].with_config({"write_empty_chunks": True})
    coverage, problems = [], []
    for position, block in enumerate(run.blocks):
        values, found = block_values(block, store, elsewhere.get(position, ()))
        fraction = resumable.coverage_of(values)
        if fraction > 0:  # a block without any sample is not written (its chunks stay absent)
            data[block.first : block.stop, :] = values
        coverage.append(fraction)
        problems.append(found)
    record = resumable.run_record(coverage, problems)
    write_chunks([resumable.record_write(ChunkWriter(group[PROGRESS_VAR]), run.number, record)])
    return resumable.counted_record(record)


def run_task(
    run: DasRun,
    store: StoreLocation,
    variable: str,
    name: str,
    placement: input_locality.Placement | None,
) -> Any:
    """The Dask task of one run (key suffix `name`), on the host keeping most bytes of its
    files (`placement`, several hosts); the pieces of files another host keeps are read there
    (`read_run_pieces`), so that no file is read from storage twice."""
    import dask

    if placement is None:
        return dask.delayed(ingest_run)(run, store, variable,
                                        dask_key_name=f"ingest_das_run-{name}")  # fmt: skip
    main = placement.host_of(run.digests())
    by_host: dict[str, dict[int, list[int]]] = {}
    for position, block in enumerate(run.blocks):
        for index, piece in enumerate(block.pieces):
            host = placement.host_of([piece[4]])
            if host is not None and host != main:
                by_host.setdefault(host, {}).setdefault(position, []).append(index)
    read = []
    for number, (host, which) in enumerate(sorted(by_host.items())):
        key = f"read_das_pieces-{name}-{number}"
        with dask.annotate(**placement.annotations(host)):
            read.append(dask.delayed(read_run_pieces)(run, store, sorted(which.items()),
                                                      dask_key_name=key))  # fmt: skip
    with dask.annotate(**placement.annotations(main)):
        return dask.delayed(ingest_run)(run, store, variable, read,
                                        dask_key_name=f"ingest_das_run-{name}")  # fmt: skip
