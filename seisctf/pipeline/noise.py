"""Counter-based Gaussian noise: the value at a global position depends on (key, position) only.

Each element's two uniforms come from SplitMix64's output function applied to its global flat
index (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number generators"), mixed with a
64-bit key; Box-Muller turns them into one standard normal. Nothing depends on how the array is
chunked or which worker computes a block, so noisy arrays are bit-identical on any cluster.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(values: np.ndarray) -> np.ndarray:
    z = values * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _uniform_open(bits: np.ndarray) -> np.ndarray:
    """Top 53 bits -> uniform in (0, 1], never 0 so the logarithm below is finite."""
    return ((bits >> np.uint64(11)).astype(np.float64) + 1.0) * (1.0 / 2.0**53)


def standard_normal_at(key: int, flat_index: np.ndarray) -> np.ndarray:
    """Standard normal float64 values at the given global flat indices (any shape)."""
    with np.errstate(over="ignore"):
        base = (np.asarray(flat_index, dtype=np.uint64) << np.uint64(1)) ^ _splitmix64(
            np.array([key], dtype=np.uint64)
        )
        first = _uniform_open(_splitmix64(base))
        second = _uniform_open(_splitmix64(base + np.uint64(1)))
    return np.sqrt(-2.0 * np.log(first)) * np.cos(2.0 * np.pi * second)


def _noise_block(key: int, n_columns: int, block_info: dict | None = None) -> np.ndarray:
    (row_start, row_stop), (col_start, col_stop) = block_info[None]["array-location"]
    rows = np.arange(row_start, row_stop, dtype=np.uint64)[:, None]
    cols = np.arange(col_start, col_stop, dtype=np.uint64)[None, :]
    return standard_normal_at(key, rows * np.uint64(n_columns) + cols)


def gaussian_noise(key: int, shape: tuple[int, int], chunks: tuple[int, int]) -> da.Array:
    """Lazy (time, space) float64 standard normal noise keyed by `key` and global position."""
    return da.map_blocks(
        _noise_block,
        key,
        shape[1],
        chunks=da.core.normalize_chunks(chunks, shape),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
