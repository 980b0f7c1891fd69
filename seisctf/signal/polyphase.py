"""`resample`'s polyphase step on Dask arrays: `scipy.signal.resample_poly` chunk by chunk with
halos, optionally delayed so that it is causal, and the resampled time coordinate (the NaN
policy is in `filters.py`'s docstring)."""

from __future__ import annotations

import dask.array as da
import numpy as np
from scipy import signal

from seisctf.signal.filter_design import POLYPHASE_HALF_LENGTH, POLYPHASE_WINDOW, ceil_div
from seisctf.signal.halo import with_min_chunks


def polyphase_taps(up: int, down: int) -> np.ndarray:
    """resample_poly's default FIR (2·half_len + 1 taps, gain `up`)."""
    half_length = POLYPHASE_HALF_LENGTH * max(up, down)
    taps = signal.firwin(2 * half_length + 1, 1.0 / max(up, down), window=POLYPHASE_WINDOW)
    return taps * up


def polyphase_block(
    block: np.ndarray,
    *,
    taps: np.ndarray,
    up: int,
    down: int,
    time_axis: int,
    bounds: tuple[int, ...],
    halo_samples: int,
    delay: int = 0,
    block_id: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Outputs k with k·down/up in this block's core,
    y[k] = Σ_n x[n]·taps[half + (k - delay)·down - n·up] (x = 0 outside the trace, as
    resample_poly with padtype="constant", whose output is the one for delay = 0)."""
    assert block_id is not None  # given by map_blocks
    chunk = block_id[time_axis]
    core_start, core_stop = bounds[chunk], bounds[chunk + 1]
    block_start = max(0, core_start - halo_samples)
    half_length = (len(taps) - 1) // 2
    # upfirdn(taps') gives z[m] = Σ_j x[block_start + j]·taps'[m·down - j·up]; leading zeros on
    # the taps make m·down - (pre_pad + half_length) a multiple of down, so y[k] = z[k + offset];
    # `delay`·down more leading zeros delay the taps by `delay` outputs.
    pre_pad = (block_start * up - half_length) % down
    lead = np.zeros(pre_pad + delay * down)
    offset = (half_length + pre_pad - block_start * up) // down
    kept = [slice(None)] * block.ndim
    kept[time_axis] = slice(
        offset + ceil_div(core_start * up, down), offset + ceil_div(core_stop * up, down)
    )
    gaps = np.isnan(block)
    padded_taps = np.concatenate([lead, taps])
    resampled = signal.upfirdn(padded_taps, np.where(gaps, 0.0, block), up, down, axis=time_axis)
    resampled = resampled[tuple(kept)]
    if gaps.any():
        support = np.concatenate([lead, np.ones(len(taps))])
        gaps_seen = signal.upfirdn(support, gaps.astype(np.float64), up, down, axis=time_axis)
        resampled[gaps_seen[tuple(kept)] > 0.5] = np.nan
    return resampled


def polyphase(values: da.Array, axis: int, up: int, down: int, delay: int = 0) -> da.Array:
    """resample_poly(values, up, down, axis=axis) (padtype "constant") chunk by chunk, its
    output delayed by `delay` samples (y[k] = resample_poly's y[k - delay], with zeros before
    the trace); ceil(n·up/down) samples along `axis`, chunked like the input scaled."""
    taps = polyphase_taps(up, down)
    half_length = (len(taps) - 1) // 2
    # Output k in a core [a, b) (a·up <= k·down < b·up + down) reads inputs n with
    # |(k - delay)·down - n·up| <= half_length: from a - (half_length + down + delay·down)/up
    # to b + (half_length + down - delay·down)/up (the causal FIR, delay·down >= half_length,
    # reads nothing right of its core).
    left = ceil_div(half_length + down + delay * down, up)
    right = max(0, ceil_div(half_length + down - delay * down, up))
    values = with_min_chunks(values, axis, max(left, right))
    time_chunks = values.chunks[axis]
    bounds = tuple(int(b) for b in np.cumsum((0, *time_chunks)))
    if len(time_chunks) == 1:
        left = right = 0
    depth = left if left == right else (left, right)
    overlapped = da.overlap.overlap(values, depth={axis: depth}, boundary="none")
    output_bounds = [ceil_div(bound * up, down) for bound in bounds]
    output_chunks = list(values.chunks)
    output_chunks[axis] = tuple(int(size) for size in np.diff(output_bounds))
    return da.map_blocks(
        polyphase_block,
        overlapped,
        chunks=tuple(output_chunks),
        dtype=np.float64,
        meta=np.empty((0,) * values.ndim, dtype=np.float64),
        taps=taps,
        up=up,
        down=down,
        time_axis=axis,
        bounds=bounds,
        halo_samples=left,
        delay=delay,
    )


def resampled_time(time: np.ndarray, n_out: int, up: int, down: int) -> np.ndarray:
    """Regular time coordinate of the output: first value + k·(step·down/up), k < n_out."""
    sample = np.arange(n_out, dtype=np.int64)
    if time.dtype.kind in "mM":
        # Whole input steps exactly, the fraction rounded to the nanosecond.
        time = time.astype(f"{time.dtype.name.split('[')[0]}[ns]")
        step_ns = (time[1] - time[0]).astype(np.int64)
        whole, remainder = np.divmod(sample * down, up)
        offset_ns = whole * step_ns + np.round(remainder * step_ns / up).astype(np.int64)
        return time[0] + offset_ns.astype("timedelta64[ns]")
    return time[0] + sample * (down / up) * (time[1] - time[0])
