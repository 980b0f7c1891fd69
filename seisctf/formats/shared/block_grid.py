"""The time-block grid of an ingest: a store's time axis of `n_time` samples cut into blocks of
`block_samples` (the chunk length along time, and the unit of work and of resume)."""

from __future__ import annotations

import math


class BlockGrid:
    """Blocks of `block_samples` samples over a time axis of `n_time` samples (the last one
    partial). Mixed into the ingest plans (`WaveformPlan`, `DasPlan`), which hold both fields."""

    n_time: int
    block_samples: int

    @property
    def n_blocks(self) -> int:
        return math.ceil(self.n_time / self.block_samples)

    def block_span(self, block: int) -> tuple[int, int]:
        """[first, stop) grid indices of time block `block`."""
        first = block * self.block_samples
        return first, min(first + self.block_samples, self.n_time)

    def blocks_between(self, first: int, stop: int) -> range:
        """The blocks that samples [first, stop) touch, clipped to the time axis."""
        first, last = max(first, 0), min(stop, self.n_time) - 1
        return range(first // self.block_samples, last // self.block_samples + 1)
