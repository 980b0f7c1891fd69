"""Random chunkings (hypothesis) for the tests that results do not depend on them."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


def chunk_sizes(draw, size: int, max_cuts: int = 6, min_step_fraction: int = 40) -> tuple[int, ...]:
    """Chunk sizes along an axis of `size`: irregular ones from up to `max_cuts` random cuts, or
    regular ones of a random size (at least size // `min_step_fraction`)."""
    if size > 1 and draw(st.booleans()):
        cuts = draw(st.lists(st.integers(1, size - 1), max_size=max_cuts, unique=True))
        return tuple(int(n) for n in np.diff([0, *sorted(cuts), size]))
    step = draw(st.integers(max(1, size // min_step_fraction), size))
    return (step,) * (size // step) + ((size % step,) if size % step else ())
