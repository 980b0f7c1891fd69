"""The block runs of a waveform ingest, laid out from the partitions of its placed traces.

Each partition (`partition_plan`: kept where it was placed) gives the block intervals its
traces touch; the client cuts them into runs (`placed_traces.run_spans`: the same runs as of all
the traces at once), each partition pairs its traces with the runs they read
(`placed_traces.run_pairs`, kept there) and tells the client how many traces of each run it
holds. A run's task is made on a worker from those pieces (`run_task`): the client holds the
runs (station, blocks, partitions, trace counts) and futures of one wave's runs, never their
traces (`runs_by_wave`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.cluster import kept
from seisctf.formats.obspy_archive.placed_traces import (
    PlacedTraces,
    RunTable,
    block_intervals,
    run_pairs,
    run_spans,
    runs_of,
)
from seisctf.formats.obspy_archive.waveform_blocks import (
    RUN_MAX_BLOCKS,
    RUN_TASKS,
    BlockRun,
    RunSettings,
    run_key,
)
from seisctf.formats.obspy_archive.waveform_plan import WaveformPlan
from seisctf.formats.shared.partition_tasks import Each

Pairs = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class RunLayout:
    """The runs (`table`: station, first block, blocks; no traces) and, per run, the
    partitions holding its traces (`parts_of`) with how many each (`counts_of`); the kept
    placed traces and (trace, run) pairs of each partition."""

    table: RunTable
    part: np.ndarray  # (run-partition pair,) int64, grouped by run
    count: np.ndarray  # (run-partition pair,) int64: traces of the run in the partition
    start: np.ndarray  # (run + 1,) int64: each run's pairs
    placed: list[Any]
    pairs: list[Any]

    def __len__(self) -> int:
        return len(self.table)

    def parts_of(self, run: int) -> list[tuple[int, int]]:
        """(partition, traces) of each partition holding traces of `run`, in path order."""
        cut = slice(int(self.start[run]), int(self.start[run + 1]))
        return list(zip(self.part[cut].tolist(), self.count[cut].tolist(), strict=True))

    def traces(self) -> np.ndarray:
        """(run,) int64: the traces each run reads."""
        return np.add.reduceat(self.count, self.start[:-1]) if len(self.count) else (
            np.zeros(len(self.table), np.int64))  # fmt: skip


def run_layout(
    plan: WaveformPlan,
    placed: list[Any],
    each: Each,
    only: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> RunLayout:
    """The runs of the blocks the partitions' traces touch (`only`: of those blocks, {station
    index: [(first, last block)]}), laid out from the partitions (module doc)."""
    grid = (plan.n_time, plan.block_samples)
    intervals = each(functools.partial(_intervals, plan.stations, grid), placed)
    spans = run_spans(intervals, *grid, RUN_TASKS, RUN_MAX_BLOCKS, only)
    pairs = each(functools.partial(_pairs, plan.stations, grid, spans), placed, keep=True)
    held = each(_runs_held, pairs)
    runs = np.concatenate([r for r, _ in held] or [np.zeros(0, np.int64)])
    part = np.repeat(np.arange(len(held), dtype=np.int64), [len(r) for r, _ in held])
    count = np.concatenate([c for _, c in held] or [np.zeros(0, np.int64)])
    order = np.lexsort((part, runs))
    start = np.searchsorted(runs[order], np.arange(len(spans[0]) + 1), side="left")
    empty = np.zeros(0, np.int64)
    table = runs_of(spans, (empty, empty), *grid)
    return RunLayout(table, part[order], count[order], start.astype(np.int64), placed, pairs)


def _intervals(stations: Sequence[str], grid: tuple[int, int], placed: PlacedTraces) -> tuple:
    return block_intervals(placed, stations, *grid)


def _pairs(stations: Sequence[str], grid: tuple[int, int], spans: tuple, placed: PlacedTraces
           ) -> Pairs:  # fmt: skip
    return run_pairs(placed, stations, *grid, spans)


def _runs_held(pairs: Pairs) -> tuple[np.ndarray, np.ndarray]:
    """The runs a partition's pairs read, and how many of its traces each."""
    runs, counts = np.unique(pairs[1], return_counts=True)
    return runs.astype(np.int64), counts.astype(np.int64)


def run_traces(number: int, placed: PlacedTraces, pairs: Pairs) -> list[tuple]:
    """The traces of run `number` in one partition, as `BlockRun` takes them: (path, channel,
    first grid index, samples on the grid, file sha256), in trace order."""
    pair_trace, pair_run = pairs
    low, high = np.searchsorted(pair_run, (number, number + 1))
    rows = pair_trace[low:high]
    scans = placed.scans
    files = placed.files()[rows].tolist()
    channels = placed.column("channel")[rows].tolist()
    return [
        (scans.paths[file], scans.channel_codes[channel], int(placed.first_index[row]),
         int(placed.n_samples[row]), scans.sha256(file))
        for file, channel, row in zip(files, channels, rows.tolist(), strict=True)
    ]  # fmt: skip


def block_run(
    number: int,
    where: tuple[str, int, int, int],
    settings: RunSettings,
    own_rows: tuple[int, ...],
    *pieces: list[tuple],
) -> BlockRun:
    """Run `number` (`where`: station, its index, first block, blocks) of its traces in
    `pieces` (`run_traces` of each partition holding some, in path order)."""
    station, station_index, first_block, blocks = where
    traces = [trace for piece in pieces for trace in piece]
    return BlockRun(number, station, station_index, first_block, blocks, traces, settings,
                    own_rows)  # fmt: skip


def run_task(layout: RunLayout, number: int, plan: WaveformPlan, settings: RunSettings) -> Any:
    """A task making run `number`'s `BlockRun` on a worker from the partitions holding its
    traces."""
    import dask

    table = layout.table
    station_index = int(table.station[number])
    station = plan.stations[station_index]
    own = tuple(plan.channels.index(c) for c in plan.station_channels()[station])
    pieces = [dask.delayed(run_traces)(number, layout.placed[part], layout.pairs[part])
              for part, _ in layout.parts_of(number)]  # fmt: skip
    where = (station, station_index, int(table.first_block[number]), int(table.blocks[number]))
    return dask.delayed(block_run)(number, where, settings, own, *pieces)


def runs_by_wave(
    layout: RunLayout,
    plan: WaveformPlan,
    settings: RunSettings,
    pending: Sequence[int],
    waves: Sequence[tuple[int, int]],
) -> Callable[[int], Any]:
    """`BlockRun` of `pending[index]` as a task argument: the runs of its wave (`waves`: (first,
    stop) indices of `pending`, `cluster.wave_bounds`) are made on the workers at once when the
    first of them is asked for and kept there (`cluster.kept`: futures), dropped with the next
    wave. Neither the client nor the graph holds a run's traces, and the block tasks, whose
    only arguments are made already, run in the order of their keys (station-major)."""
    made: dict[int, Any] = {}

    def run_at(index: int) -> Any:
        if index not in made:
            first, stop = next((a, b) for a, b in waves if a <= index < b)
            made.clear()
            tasks = [run_task(layout, pending[i], plan, settings) for i in range(first, stop)]
            made.update(zip(range(first, stop), kept(tasks, quiet=True), strict=True))
        return made[index]

    return run_at


def file_digests(placed: PlacedTraces) -> list[str]:
    """The hex sha256 of each file of a partition's scan (where its runs' files are kept:
    `input_locality.near_partitions`)."""
    return [digest.tobytes().hex() for digest in placed.scans.digests]


def key_of(table: RunTable, number: int) -> str:
    """Run `number`'s `BlockRun.key`, from the table."""
    return run_key(int(table.station[number]), int(table.first_block[number]))
