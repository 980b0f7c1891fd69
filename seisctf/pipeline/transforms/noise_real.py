"""`add_real_noise`: recorded noise windows (an event-window store's noise traces) added to
data, one window per trace at a counter-chosen start, level set per trace (the counter
generator and the levels are `noise.py`'s, so the result is bit-identical for any chunking)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.options import Location, option
from seisctf.pipeline.transforms.noise import (
    RmsFraction,
    Seed,
    SnrDb,
    checked_time_axis,
    float64_values,
    noise_level,
    noise_sigma,
    noisy_copy,
    sampling_rate_of,
    trace_rms_now,
)
from seisctf.plugins.context import BuildContext
from seisctf.registry import TRANSFORMS
from seisctf.signal.counter_rng import (
    counter_choice,
    flat_positions,
    noise_key,
    substream_key,
)

# Noise-bank dims (event-window store contract: waveforms(trace, channel, sample)).
NOISE_TRACE = "trace"
NOISE_CHANNEL = "channel"


NOISE_SAMPLE = "sample"
NOISE_CATEGORY = "trace_category"


def _noise_windows(noise: xr.DataArray, data: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
    """(windows, channels_or_1, samples) float64 noise bank matched to data's channels, and the
    index along `trace` of each window in `noise` (for messages)."""
    if not isinstance(noise, xr.DataArray):
        raise InvalidInput("noise", f"expected an xarray.DataArray, got {type(noise).__name__}")
    allowed = ({NOISE_TRACE, NOISE_SAMPLE}, {NOISE_TRACE, NOISE_CHANNEL, NOISE_SAMPLE})
    if set(noise.dims) not in allowed or len(noise.dims) != len(set(noise.dims)):
        raise InvalidInput(
            "noise", f"dims must be (trace, sample) or (trace, channel, sample), got {noise.dims}"
        )
    noise_rate = noise.attrs.get(cv.ATTR_SAMPLING_RATE)
    if noise_rate is not None and float(noise_rate) != sampling_rate_of(data):
        raise InvalidInput(
            "noise", f"sampled at {noise_rate} Hz, data at {data.attrs[cv.ATTR_SAMPLING_RATE]} Hz"
        )
    window_index = np.arange(noise.sizes[NOISE_TRACE])
    if NOISE_CATEGORY in noise.coords:
        # Labels may be fixed-width, variable-length (numpy StringDType) or bytes.
        categories = [
            value.decode() if isinstance(value, bytes) else str(value)
            for value in noise[NOISE_CATEGORY].values
        ]
        is_noise = np.array(categories) == "noise"
        window_index = window_index[is_noise]
        noise = noise.isel({NOISE_TRACE: window_index})
    if window_index.size == 0 or noise.sizes[NOISE_SAMPLE] == 0:
        raise InvalidInput("noise", "holds no noise window with samples")
    if NOISE_CHANNEL in noise.dims:
        noise = _matched_channels(noise, data)
    else:
        noise = noise.expand_dims(NOISE_CHANNEL, axis=1)
    bank = np.asarray(noise.transpose(NOISE_TRACE, NOISE_CHANNEL, NOISE_SAMPLE).values, np.float64)
    return bank, window_index


def _matched_channels(noise: xr.DataArray, data: xr.DataArray) -> xr.DataArray:
    """`noise` with its channels in data's channel order (by label when both have labels)."""
    if NOISE_CHANNEL not in data.dims:
        raise InvalidInput("noise", f"has a {NOISE_CHANNEL!r} dim but data has none")
    if NOISE_CHANNEL in noise.coords and NOISE_CHANNEL in data.coords:
        wanted, available = data[NOISE_CHANNEL].values, set(noise[NOISE_CHANNEL].values)
        missing = [label for label in wanted if label not in available]
        if missing:
            raise InvalidInput("noise", f"has no channel {missing} of data")
        return noise.sel({NOISE_CHANNEL: wanted})
    if noise.sizes[NOISE_CHANNEL] != data.sizes[NOISE_CHANNEL]:
        raise InvalidInput(
            "noise",
            f"has {noise.sizes[NOISE_CHANNEL]} channels, data {data.sizes[NOISE_CHANNEL]}",
        )
    return noise


def _centred_bank(bank: np.ndarray, window_index: np.ndarray, unit_rms: bool) -> np.ndarray:
    """Each (window, channel) minus its mean, divided by its RMS if `unit_rms`; non-finite
    samples become 0 (no noise). Refuses NaN-only and zero-RMS windows."""
    finite = np.isfinite(bank)
    count = finite.sum(axis=-1, keepdims=True)
    mean = np.where(finite, bank, 0.0).sum(axis=-1, keepdims=True) / np.maximum(count, 1)
    centred = np.where(finite, bank - mean, 0.0)
    rms = np.sqrt((centred * centred).sum(axis=-1, keepdims=True) / np.maximum(count, 1))
    peak = np.where(finite, np.abs(bank), 0.0).max(axis=-1, keepdims=True)
    for problem, bad in (
        ("has only NaN (non-finite) samples", count == 0),
        ("has zero RMS after removing its mean", rms <= 1e-12 * peak),
    ):
        if bad.any():
            window, channel, _ = np.argwhere(bad)[0]
            where = f" (channel {channel})" if bank.shape[1] > 1 else ""
            raise InvalidInput(f"noise window {window_index[window]}", problem + where)
    return centred / rms if unit_rms else centred


def _real_noise_block(
    bank: np.ndarray,
    keys: tuple[int, int],
    trace_axes: tuple[int, ...],
    trace_shape: tuple[int, ...],
    channel_axis: int | None,
    time_axis: int,
    block_info: dict | None = None,
) -> np.ndarray:
    """Noise-bank samples of one block: trace i takes window `choice(keys[0], i)` from sample
    `choice(keys[1], i)` on, wrapping around (tiling) the window."""
    assert block_info is not None  # given by map_blocks
    location = block_info[None]["array-location"]
    trace_index = flat_positions([location[axis] for axis in trace_axes], trace_shape)
    windows = counter_choice(keys[0], trace_index, bank.shape[0])
    offsets = counter_choice(keys[1], trace_index, bank.shape[-1])
    samples = (offsets[..., None] + np.arange(*location[time_axis])) % bank.shape[-1]
    if channel_axis is None:
        noise = bank[windows[..., None], 0, samples]
        order = (*trace_axes, time_axis)
    else:
        channels = np.arange(*location[channel_axis])
        noise = bank[windows[..., None, None], channels[:, None], samples[..., None, :]]
        order = (*trace_axes, channel_axis, time_axis)
    return np.transpose(noise, np.argsort(order))


def open_noise_windows(context: BuildContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """A recipe's `noise_store: URL` (an event-window store: `waveforms(trace, channel, sample)`
    with a `trace_category` coord), and `channel` for data without a channel dim → the `noise`
    windows `add_real_noise` takes."""
    url = context.resolve(arguments.pop("noise_store"))
    store = storage.open_dataset(context.location(url))
    if "waveforms" not in store:
        raise InvalidInput(url, "is not an event-window store (no `waveforms` variable)")
    windows = store["waveforms"]
    channel = arguments.pop("channel", None)
    if channel is not None:  # data without a channel dim takes one channel of the windows
        try:
            windows = (
                windows.isel(channel=channel)
                if isinstance(channel, int)
                else windows.sel(channel=channel)
            )
        except (KeyError, IndexError, ValueError) as error:
            raise InvalidInput(url, f"no channel {channel!r} ({error})") from None
    return {**arguments, "noise": windows}


@dataclass(frozen=True)
class RealNoiseOptions:
    """A recipe's options of `add_real_noise`: the store its noise windows come from, which
    `open_noise_windows` opens into the function's `noise` (so they are declared here, not read
    from its signature)."""

    noise_store: Location = option(help="event-window store of recorded noise windows")
    channel: str | int | None = option(None, "the windows' channel, for data without one")
    seed: Seed = option(None)
    snr_db: SnrDb = option(None)
    rms_fraction: RmsFraction = option(None)
    scale: float | None = option(None, "noise times this factor", exclusive_minimum=0)


@TRANSFORMS.register(
    "add_real_noise",
    options=RealNoiseOptions,
    seeded=True,
    two_pass=True,
    prepare=open_noise_windows,
)
def add_real_noise(
    data: xr.DataArray,
    *,
    seed: int,
    variable: str,
    noise: xr.DataArray,
    snr_db: float | None = None,
    rms_fraction: float | None = None,
    scale: float | None = None,
) -> xr.DataArray:
    """`data` plus recorded noise windows, one window per trace, level set per trace.

    noise: windows with dims (trace, sample), or (trace, channel, sample) matched to data's
    `channel` dim (by label when both have `channel` coords, else by position); when it has a
    `trace_category` coord only windows with "noise" are used. It is loaded into memory.
    Trace i (C-order index over data's dims other than time and a matched channel) takes window
    SplitMix64(i ^ SplitMix64(k_w)) mod n_windows and starts at sample
    SplitMix64(i ^ SplitMix64(k_o)) mod window_length, wrapping around to tile it to the trace
    length; k_w and k_o derive from `noise_key(seed, variable)`. Channels of a station share the
    window and start. Each window channel has its mean (over its finite samples) removed; its
    non-finite samples add nothing. Level (give exactly one): the window scaled to RMS
    `rms_fraction × RMS(trace)` or `RMS(trace) / 10**(snr_db / 20)`, or multiplied by `scale`.
    NaN in data stays NaN. Returns a lazy DataArray like `data`.
    """
    time_axis = checked_time_axis(data)
    level = noise_level(snr_db=snr_db, rms_fraction=rms_fraction, scale=scale)
    key = noise_key(seed, variable)
    bank, window_index = _noise_windows(noise, data)
    bank = _centred_bank(bank, window_index, unit_rms="scale" not in level)
    channel_axis = data.dims.index(NOISE_CHANNEL) if NOISE_CHANNEL in noise.dims else None
    trace_axes = tuple(axis for axis in range(data.ndim) if axis not in (time_axis, channel_axis))
    values = float64_values(data)
    unit_noise = da.map_blocks(
        _real_noise_block,
        dask.delayed(bank),
        (substream_key(key, "window"), substream_key(key, "offset")),
        trace_axes,
        tuple(values.shape[axis] for axis in trace_axes),
        channel_axis,
        time_axis,
        chunks=values.chunks,
        dtype=np.float64,
        meta=np.empty((0,) * values.ndim),
    )
    sigma = (
        level["scale"] if "scale" in level else noise_sigma(trace_rms_now(values, time_axis), level)
    )
    parameters = {**level, "noise_windows": int(bank.shape[0])}
    return noisy_copy(data, values, sigma, unit_noise, "add_real_noise", parameters)
