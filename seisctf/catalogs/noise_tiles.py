"""A record's noise-window tiles per station, counted and found in spans of bounded size.

The record is tiled by windows of `window_samples` from its first sample (tile t starts at sample
t · window_samples). A tile is clear at a station when no busy time (a pick at the station, an
origin time: fractional grid samples) lies in (start − window, start + 2 · window), and free when
it is clear and, with coverage, lies in blocks whose coverage(station, block) is 1 (NaN, a block
never written, counts as a gap).

The client holds one span at a time: at most `TILES_PER_SPAN` tiles of a station and
`COVERAGE_VALUES_PER_READ` coverage values (a group of stations × the span's blocks), read from
the store's `coverage` array as they are needed, so planning costs the same memory whatever the
store's length. A station's span without a gap-free block holds no free tile: its clear tiles are
counted from the busy times near it alone (a tile is near a busy time only within three tiles of
it), so a sparse record's planning time is its coverage's and its picks', not its tiles'.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Tiles of one station evaluated at once (a few int64 / bool arrays of this length).
TILES_PER_SPAN = 2**18
# Coverage values read at once (float64: 16 MiB).
COVERAGE_VALUES_PER_READ = 2**21
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
    def tiles_per_span(self) -> int:
        """Tiles per span: `TILES_PER_SPAN`, fewer when their blocks would exceed one read."""
        if not self.has_coverage:
            return TILES_PER_SPAN
        per_read = COVERAGE_VALUES_PER_READ * self.block_samples // self.window_samples
        return max(1, min(TILES_PER_SPAN, per_read))

    def spans(self) -> Iterator[tuple[int, int]]:
        """(first tile, end tile) of consecutive spans covering every tile."""
        step = self.tiles_per_span
        for first in range(0, self.n_tiles, step):
            yield first, min(first + step, self.n_tiles)

    def station_groups(self, n_station: int) -> Iterator[slice]:
        """Rows of stations whose coverage over one span is read at once."""
        blocks = self.tiles_per_span * self.window_samples // (self.block_samples or 1) + 2
        step = max(1, COVERAGE_VALUES_PER_READ // blocks) if self.has_coverage else n_station
        for first in range(0, n_station, max(1, step)):
            yield slice(first, min(first + step, n_station))

    def read(self, rows: slice, first: int, end: int) -> tuple[np.ndarray | None, int]:
        """(coverage of `rows` over the blocks tiles first … end − 1 touch, float64 (station,
        block), or None without coverage; the first of those blocks)."""
        if not self.has_coverage:
            return None, 0
        n_blocks = self.coverage.shape[1]
        first_block = first * self.window_samples // self.block_samples
        end_block = min(n_blocks, (end * self.window_samples - 1) // self.block_samples + 1)
        values = self.coverage[rows, first_block:end_block]
        return np.asarray(values, dtype=np.float64), first_block


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
    first = starts // grid.block_samples - first_block
    last = np.minimum((starts + grid.window_samples - 1) // grid.block_samples, n_blocks - 1)
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


def near_count(grid: TileGrid, first: int, end: int, busy: Sequence[np.ndarray]) -> int:
    """How many of tiles first … end − 1 are not clear, from the busy times near them alone."""
    window = grid.window_samples
    near = [np.zeros(0, dtype=np.int64)]
    for times in busy:
        low = np.searchsorted(times, (first - 2) * window, side="left")
        high = np.searchsorted(times, (end + 2) * window, side="right")
        tiles = np.floor(times[low:high] / window).astype(np.int64)
        near.append((tiles[:, None] + NEAR_TILES).ravel())
    tiles = np.unique(np.concatenate(near))
    tiles = tiles[(tiles >= first) & (tiles < end)]
    return int(tiles.size - clear_tiles(tiles * window, window, *busy).sum())


def count_tiles(grid: TileGrid, busy: Sequence[Sequence[np.ndarray]]) -> list[TileCounts]:
    """Per station (`busy[i]`: its sorted busy-time arrays, e.g. its picks and the origins), its
    tiles counted span by span (module doc)."""
    n_station = len(busy)
    near, with_gaps, free = (np.zeros(n_station, dtype=np.int64) for _ in range(3))
    spans: list[list[tuple[int, int, int]]] = [[] for _ in range(n_station)]
    for rows in grid.station_groups(n_station):
        for first, end in grid.spans():
            coverage, first_block = grid.read(rows, first, end)
            for row in range(rows.start, rows.stop):
                coverage_row = None if coverage is None else coverage[row - rows.start]
                if coverage_row is not None and not (coverage_row >= 1.0).any():
                    span_near, span_free = near_count(grid, first, end, busy[row]), 0
                else:
                    _, clear, free_mask = span_masks(
                        grid, first, end, busy[row], coverage_row, first_block
                    )
                    span_near, span_free = end - first - int(clear.sum()), int(free_mask.sum())
                near[row] += span_near
                with_gaps[row] += end - first - span_near - span_free
                free[row] += span_free
                if span_free:
                    spans[row].append((first, end, span_free))
    return [
        TileCounts(grid.n_tiles, int(near[i]), int(with_gaps[i]), int(free[i]), tuple(spans[i]))
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
    for span in np.unique(which):
        first, end, span_free = counts.spans[span]
        coverage, first_block = grid.read(slice(row, row + 1), first, end)
        coverage_row = None if coverage is None else coverage[0]
        starts, _, free = span_masks(grid, first, end, busy, coverage_row, first_block)
        found.append(starts[free][positions[which == span] - (ends[span] - span_free)])
    return np.concatenate(found)
