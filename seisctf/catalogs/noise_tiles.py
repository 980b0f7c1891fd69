"""A record's noise-window tiles per station, counted and found in spans of bounded size.

The record is tiled by windows of `window_samples` from its first sample (tile t starts at sample
t · window_samples). A tile is clear at a station when no busy time (a pick at the station, an
origin time: fractional grid samples) lies in (start − window, start + 2 · window), and free when
it is clear and, with coverage, lies in blocks whose coverage(station, block) is 1 (NaN, a block
never written, counts as a gap).

The client holds one span at a time: at most `TILES_PER_SPAN` tiles of a station and
`COVERAGE_VALUES_PER_READ` coverage values (a group of stations × the span's blocks), read from
the store's `coverage` array as they are needed, so planning costs the same memory whatever the
store's length. The tiles near a busy time are found from the busy times alone (a tile is near
one only within three tiles of it), and the free ones only in the spans where the station has a
gap-free block, so a sparse record's planning time is its coverage's and its picks', not its
tiles'.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Tiles of one station evaluated at once (a few int64 / bool arrays of this length).
TILES_PER_SPAN = 2**16
# Coverage values read at once (float32, as stored: 4 MiB).
COVERAGE_VALUES_PER_READ = 2**20
# A busy time at fractional tile q can only be near tiles floor(q) − 1 … floor(q) + 1; the margin
# absorbs the rounding of q.
NEAR_TILES = np.arange(-3, 4)


@dataclass(frozen=True)
class TileCounts:
    """One station's tiles: how many (`candidates`), within a window length of a busy time
    (`near_picks`), clear but in blocks with gaps (`with_gaps`), free (`n_free`); `spans`:
    (first tile, end tile, free tiles) of each span holding free tiles, to find them again."""

    candidates: int
    near_picks: int
    with_gaps: int
    n_free: int
    spans: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class TileGrid:
    """The tiling of a record of `n_time` samples by `window_samples`; `coverage`: the store's
    coverage(station, block), any 2-D array whose slices read as numpy (a zarr array: only the
    chunks sliced are read), or None; `block_samples`: samples per coverage block."""

    n_time: int
    window_samples: int
    coverage: Any = None
    block_samples: int | None = None

    @property
    def n_tiles(self) -> int:
        return self.n_time // self.window_samples

    @property
    def has_coverage(self) -> bool:
        return self.coverage is not None and bool(self.block_samples)

    @property
    def samples_per_block(self) -> int:
        """`block_samples` of a grid with coverage (`has_coverage`)."""
        assert self.block_samples, "a grid without coverage has no blocks"
        return self.block_samples

    @property
    def tiles_per_span(self) -> int:
        """Tiles per span: `TILES_PER_SPAN`, fewer when their blocks would exceed one read."""
        if not self.has_coverage:
            return TILES_PER_SPAN
        per_read = COVERAGE_VALUES_PER_READ * self.samples_per_block // self.window_samples
        return max(1, min(TILES_PER_SPAN, per_read))

    def spans(self) -> Iterator[tuple[int, int]]:
        """(first tile, end tile) of consecutive spans covering every tile."""
        step = self.tiles_per_span
        for first in range(0, self.n_tiles, step):
            yield first, min(first + step, self.n_tiles)

    def station_groups(self, n_station: int) -> Iterator[slice]:
        """Rows of stations read together: a row of the coverage's chunks (each read decodes
        one or two chunks), at most a read's worth over one span's blocks."""
        if not self.has_coverage:
            yield slice(0, n_station)
            return
        blocks = self.tiles_per_span * self.window_samples // self.samples_per_block + 2
        step = max(1, COVERAGE_VALUES_PER_READ // blocks)
        chunks = getattr(self.coverage, "chunks", None)
        if isinstance(chunks, tuple) and isinstance(chunks[0], int):
            step = min(step, chunks[0])
        for first in range(0, n_station, step):
            yield slice(first, min(first + step, n_station))


class CoverageReader:
    """Reads the grid's coverage for spans of tiles, a window to the end of a column of its
    chunks at a time (at most `COVERAGE_VALUES_PER_READ` values held), so that consecutive
    spans of the same rows decode each stored chunk about once."""

    def __init__(self, grid: TileGrid) -> None:
        self.grid = grid
        self.rows: tuple[int, int] | None = None
        self.first, self.values = 0, np.zeros((0, 0), dtype=np.float32)
        chunks = getattr(grid.coverage, "chunks", None)
        last = chunks[-1] if isinstance(chunks, tuple) else None
        self.chunk_blocks = last if isinstance(last, int) else 1

    def read(self, rows: slice, first: int, end: int) -> tuple[np.ndarray | None, int]:
        """(coverage of `rows` over the blocks tiles first … end − 1 touch, (station, block) as
        stored, or None without coverage; the first of those blocks)."""
        grid = self.grid
        if not grid.has_coverage:
            return None, 0
        n_blocks = grid.coverage.shape[1]
        first_block = first * grid.window_samples // grid.samples_per_block
        end_block = min(n_blocks, (end * grid.window_samples - 1) // grid.samples_per_block + 1)
        held = self.first <= first_block and end_block <= self.first + self.values.shape[1]
        if self.rows != (rows.start, rows.stop) or not held:
            column_end = -(-(first_block + 1) // self.chunk_blocks) * self.chunk_blocks
            most = COVERAGE_VALUES_PER_READ // (rows.stop - rows.start)
            stop = min(n_blocks, max(end_block, first_block + min(column_end - first_block, most)))
            self.values = np.asarray(grid.coverage[rows, first_block:stop])
            self.rows, self.first = (rows.start, rows.stop), first_block
        return self.values[:, first_block - self.first : end_block - self.first], first_block


def clear_tiles(starts: np.ndarray, window_samples: int, *busy: np.ndarray) -> np.ndarray:
    """Bool per tile start (samples): no time of any sorted `busy` array (finite fractional
    samples) lies in (start − window, start + 2 · window)."""
    clear = np.ones(starts.shape, dtype=bool)
    for times in busy:
        after = np.searchsorted(times, starts - window_samples, side="right")
        clear &= np.searchsorted(times, starts + 2 * window_samples, side="left") == after
    return clear


def in_whole_blocks(
    starts: np.ndarray, grid: TileGrid, coverage_row: np.ndarray, first_block: int
) -> np.ndarray:
    """Bool per tile start: every block the tile touches has coverage 1 (`coverage_row`: the
    station's coverage from block `first_block` on)."""
    gappy = np.concatenate([[0], np.cumsum(~(coverage_row >= 1.0))])
    n_blocks = grid.coverage.shape[1]
    first = starts // grid.samples_per_block - first_block
    last = np.minimum((starts + grid.window_samples - 1) // grid.samples_per_block, n_blocks - 1)
    return gappy[last - first_block + 1] == gappy[first]


def span_masks(
    grid: TileGrid,
    first: int,
    end: int,
    busy: Sequence[np.ndarray],
    coverage_row: np.ndarray | None,
    first_block: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, clear, free) of tiles first … end − 1 at one station."""
    starts = np.arange(first, end, dtype=np.int64) * grid.window_samples
    clear = clear_tiles(starts, grid.window_samples, *busy)
    if coverage_row is None:
        return starts, clear, clear
    return starts, clear, clear & in_whole_blocks(starts, grid, coverage_row, first_block)


def near_tiles(grid: TileGrid, busy: Sequence[np.ndarray]) -> np.ndarray:
    """The tiles that are not clear (sorted tile numbers), from the tiles near each busy time
    alone: at most seven a busy time, whatever the record's length."""
    window = grid.window_samples
    near = [np.zeros(0, dtype=np.int64)]
    for times in busy:
        near.append((np.floor(times / window).astype(np.int64)[:, None] + NEAR_TILES).ravel())
    tiles = np.unique(np.concatenate(near))
    tiles = tiles[(tiles >= 0) & (tiles < grid.n_tiles)]
    return tiles[~clear_tiles(tiles * window, window, *busy)]


def count_tiles(grid: TileGrid, busy: Sequence[Sequence[np.ndarray]]) -> list[TileCounts]:
    """Per station (`busy[i]`: its sorted busy-time arrays, e.g. its picks and the origins), its
    tiles counted (module doc): those near a busy time from the busy times, the free ones span
    by span, in the spans where the station has a gap-free block."""
    n_station = len(busy)
    near = np.array([near_tiles(grid, times).size for times in busy], dtype=np.int64)
    free = np.zeros(n_station, dtype=np.int64)
    spans: list[list[tuple[int, int, int]]] = [[] for _ in range(n_station)]
    reader = CoverageReader(grid)
    for rows in grid.station_groups(n_station):
        for first, end in grid.spans():
            coverage, first_block = reader.read(rows, first, end)
            with_data = np.arange(rows.start, rows.stop)
            if coverage is not None:
                with_data = with_data[(coverage >= 1.0).any(axis=1)]
            for row in with_data:
                coverage_row = None if coverage is None else coverage[row - rows.start]
                _, _, free_mask = span_masks(grid, first, end, busy[row], coverage_row, first_block)
                span_free = int(free_mask.sum())
                free[row] += span_free
                if span_free:
                    spans[row].append((first, end, span_free))
    return [
        TileCounts(
            grid.n_tiles,
            int(near[i]),
            int(grid.n_tiles - near[i] - free[i]),
            int(free[i]),
            tuple(spans[i]),
        )
        for i in range(n_station)
    ]


def free_starts(
    grid: TileGrid,
    row: int,
    busy: Sequence[np.ndarray],
    counts: TileCounts,
    positions: np.ndarray,
) -> np.ndarray:
    """Starts (samples, int64) of station `row`'s free tiles at `positions` (ascending) in its
    list of free tiles, from the spans holding them alone."""
    ends = np.cumsum([span_free for *_, span_free in counts.spans])
    which = np.searchsorted(ends, positions, side="right")
    found = [np.zeros(0, dtype=np.int64)]
    reader = CoverageReader(grid)
    for span in np.unique(which):
        first, end, span_free = counts.spans[span]
        coverage, first_block = reader.read(slice(row, row + 1), first, end)
        coverage_row = None if coverage is None else coverage[0]
        starts, _, free = span_masks(grid, first, end, busy, coverage_row, first_block)
        found.append(starts[free][positions[which == span] - (ends[span] - span_free)])
    return np.concatenate(found)
