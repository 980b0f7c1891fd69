"""Offline synthetic ocean-bottom DAS record: swell, earthquakes and instrument noise.

A straight cable runs offshore from its landing (distance x = 0 m at the coast) over a seafloor
whose depth varies along the cable; channels every `channel_spacing_m` measure the axial strain
rate averaged over `gauge_length_m`. The record is the sum of

- swell: a random sea refracted and shoaling along the cable, seen as seafloor strain rate
  (`das_synth_swell`: equations and sources in its docstring);
- earthquakes: a Gutenberg–Richter catalogue per realisation, each a causal P and S pulse with
  its moveout along the cable (`das_synth_quake`);
- instrument noise: white Gaussian strain rate of standard deviation `noise_rms` (1/s) at the
  record's rate, from numpy's Philox generator keyed by the seed, one stream per tile of 256 rows
  × 256 channels with the counter at the tile's position (the same values for any chunking).

Realisations (`das_synth_slots`): the record is `slots` laid end to end, each `slot_samples`
long and an independent realisation on its own clock.

Bitwise reproducibility for any chunking: every sample's value is computed from its own slot,
sample index and channel alone, by the same operations in the same order whatever block holds
it (the swell's exact integer products: `das_synth_swell`; the earthquakes summed in catalogue
order; the noise tiles).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr
from dask.typing import Key

from seisctf import __version__
from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.synth.das_synth_quake import (
    Earthquake,
    catalogue_strain_rate,
    causal_pulse,
    earthquake_strain_rate,
)
from seisctf.synth.das_synth_slots import DasSlot, check_slot, default_slots
from seisctf.synth.das_synth_swell import (
    FREQUENCY_BAND_HZ,
    N_COMPONENTS,
    Cable,
    Components,
    SeaState,
    SwellModes,
    component_amplitudes,
    component_directions,
    component_frequencies,
    envelope_coefficients,
    envelope_weights,
    group_velocity,
    jonswap_shape,
    mode_bound,
    swell_bound,
    swell_modes,
    swell_strain_rate,
    wavenumber,
)

__all__ = [
    "FREQUENCY_BAND_HZ",
    "N_COMPONENTS",
    "Cable",
    "Components",
    "DasSlot",
    "Earthquake",
    "SeaState",
    "SwellModes",
    "catalogue_strain_rate",
    "causal_pulse",
    "check_slot",
    "component_amplitudes",
    "component_directions",
    "component_frequencies",
    "default_slots",
    "earthquake_strain_rate",
    "group_velocity",
    "jonswap_shape",
    "envelope_coefficients",
    "envelope_weights",
    "mode_bound",
    "swell_bound",
    "noise_block",
    "swell_modes",
    "swell_strain_rate",
    "synthesize_das",
    "wavenumber",
]

START_TIME = "2000-01-01T00:00:00Z"
QUANTITY = cv.DAS_DEFAULT_VAR  # strain_rate
UNITS = "1/s"
INTERROGATOR = "synthetic"
WATER_DEPTH = "water_depth"  # per-channel coordinate, m
ATTR_REALISATIONS = "synthetic_realisations"  # per slot: role, parameter, sea, earthquakes
_NOISE_STREAM = 0x4E4F495345  # "NOISE": the noise key's seed-sequence entropy beside the seed
_NOISE_TILE = 256  # rows and channels of one noise stream (noise_block)


def noise_block(key: int, rows: tuple[int, int], channels: tuple[int, int]) -> np.ndarray:
    """Standard normals for rows [r0, r1) × channels [c0, c1) of the record: tile (i, j) of
    256 × 256 samples is Philox(key) with its counter at (0, 0, i, j), its normals in C order,
    so every sample's value depends on its position alone."""
    (r0, r1), (c0, c1) = rows, channels
    out = np.empty((r1 - r0, c1 - c0))
    tile = _NOISE_TILE
    for i in range(r0 // tile, -(-r1 // tile)):
        for j in range(c0 // tile, -(-c1 // tile)):
            counter = [0, 0, i, j]
            normals = np.random.Generator(np.random.Philox(key=key, counter=counter))
            block = normals.standard_normal((tile, tile))
            top, left = max(r0, i * tile), max(c0, j * tile)
            bottom, right = min(r1, (i + 1) * tile), min(c1, (j + 1) * tile)
            out[top - r0 : bottom - r0, left - c0 : right - c0] = block[
                top - i * tile : bottom - i * tile, left - j * tile : right - j * tile
            ]
    return out


# --- Dask wiring ------------------------------------------------------------------------------


def _record_block(
    row_start: int,
    row_stop: int,
    channel_start: int,
    channel_stop: int,
    swells: list[SwellModes],
    *,
    first_slot: int,
    earthquakes: tuple[tuple[Earthquake, ...], ...],
    bounds: tuple[float, ...],
    slot_samples: int,
    sampling_rate_hz: float,
    cable: Cable,
    noise_key: int,
    noise_rms: float,
) -> np.ndarray:
    """Strain rate, rows [row_start, row_stop) × channels [channel_start, channel_stop), float32."""
    field = np.empty((row_stop - row_start, channel_stop - channel_start))
    distance = cable.distance_m(channel_start, channel_stop)
    for offset, swell in enumerate(swells):
        slot = first_slot + offset
        lo = max(row_start, slot * slot_samples)
        hi = min(row_stop, (slot + 1) * slot_samples)
        sample = np.arange(lo, hi) - slot * slot_samples
        tau_s = sample / sampling_rate_hz
        part = swell_strain_rate(sample, sampling_rate_hz, swell, bounds[slot])
        if earthquakes[slot]:
            part += catalogue_strain_rate(tau_s, distance, earthquakes[slot])
        field[lo - row_start : hi - row_start] = part
    if noise_rms > 0:
        field += noise_rms * noise_block(
            noise_key, (row_start, row_stop), (channel_start, channel_stop)
        )
    return field.astype(np.float32)


def _noise_key(seed: int) -> int:
    entropy = np.random.SeedSequence([int(seed), _NOISE_STREAM])
    return int(entropy.generate_state(1, np.uint64)[0])


def _edges(chunks: tuple[int, ...]) -> list[int]:
    return [int(edge) for edge in np.cumsum((0, *chunks))]


def synthesize_das(
    cable: Cable,
    slots: Sequence[DasSlot],
    slot_samples: int,
    *,
    sampling_rate_hz: float = 5.0,
    seed: int = 0,
    noise_rms: float = 3e-9,
    time_chunk: int | None = None,
    channel_chunk: int | None = None,
    attrs: dict[str, Any] | None = None,
) -> xr.Dataset:
    """Lazy DAS store (conventions: `strain_rate(time, distance)` float32, 1/s, no time
    coordinate, `distance` and `water_depth` per channel, m), `len(slots) × slot_samples` rows
    at `sampling_rate_hz`. Chunks from `conventions.time_space_chunks` unless given; the values
    are bitwise the same for any chunking and worker count. `seed` keys the instrument noise
    only (the slots carry their own draws) and is not recorded; `attrs` are added."""
    cable.check()
    if not slots:
        raise InvalidInput("slots", "needs at least one realisation")
    for index, slot in enumerate(slots):
        check_slot(index, slot)
    if not (math.isfinite(sampling_rate_hz) and sampling_rate_hz > 0):
        raise InvalidInput("sampling_rate_hz", f"must be positive, got {sampling_rate_hz}")
    if FREQUENCY_BAND_HZ[1] >= sampling_rate_hz / 2:
        raise InvalidInput(
            "sampling_rate_hz",
            f"must exceed twice the swell band's {FREQUENCY_BAND_HZ[1]} Hz, got {sampling_rate_hz}",
        )
    if int(slot_samples) != slot_samples or slot_samples < 1:
        raise InvalidInput("slot_samples", f"must be a positive integer, got {slot_samples!r}")
    if not (math.isfinite(noise_rms) and noise_rms >= 0):
        raise InvalidInput("noise_rms", f"must be >= 0, got {noise_rms!r}")
    from dask._task_spec import List, Task, TaskRef
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    slots = tuple(slots)
    n_time, n_channels = len(slots) * int(slot_samples), int(cable.n_channels)
    rows, columns = cv.time_space_chunks(n_time, n_channels)
    rows, columns = time_chunk or rows, channel_chunk or columns
    time_chunks = (rows,) * (n_time // rows) + ((n_time % rows,) if n_time % rows else ())
    channel_chunks = (columns,) * (n_channels // columns) + (
        (n_channels % columns,) if n_channels % columns else ()
    )
    row_edges, channel_edges = _edges(time_chunks), _edges(channel_chunks)
    duration_s = int(slot_samples) / sampling_rate_hz
    bounds = tuple(swell_bound(slot, cable, duration_s) for slot in slots)
    noise_key = _noise_key(seed)
    token = tokenize(
        cable,
        [slot.describe() for slot in slots],
        slot_samples,
        sampling_rate_hz,
        noise_key,
        noise_rms,
        time_chunks,
        channel_chunks,
        [
            (c.jitter, c.quantile, c.phase_rad, c.envelope_key)
            for c in (slot.components for slot in slots)
        ],
    )
    name, modes_name = f"das-synth-{token}", f"das-swell-modes-{token}"
    layer: dict[Key, Task] = {}
    for slot_index, slot in enumerate(slots):
        for c in range(len(channel_chunks)):
            key = (modes_name, slot_index, c)
            layer[key] = Task(key, swell_modes, slot, cable, channel_edges[c], channel_edges[c + 1])
    options: dict[str, Any] = {
        "earthquakes": tuple(slot.earthquakes for slot in slots),  # small: every task has them
        "bounds": bounds,
        "slot_samples": int(slot_samples),
        "sampling_rate_hz": float(sampling_rate_hz),
        "cable": cable,
        "noise_key": noise_key,
        "noise_rms": float(noise_rms),
    }
    for t in range(len(time_chunks)):
        first = row_edges[t] // slot_samples
        last = (row_edges[t + 1] - 1) // slot_samples
        for c in range(len(channel_chunks)):
            key = (name, t, c)
            swells = List(*(TaskRef((modes_name, s, c)) for s in range(first, last + 1)))
            layer[key] = Task(
                key,
                _record_block,
                row_edges[t],
                row_edges[t + 1],
                channel_edges[c],
                channel_edges[c + 1],
                swells,
                first_slot=first,
                **options,
            )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[])
    strain_rate = da.Array(
        graph,
        name,
        (time_chunks, channel_chunks),
        dtype=np.float32,
        meta=np.empty((0, 0), dtype=np.float32),
    )
    distance = cable.distance_m()
    shallow, deep = cable.depth_range_m()
    store_attrs = {
        cv.ATTR_START_TIME: START_TIME,
        cv.ATTR_SAMPLING_RATE: float(sampling_rate_hz),
        cv.ATTR_QUANTITY: QUANTITY,
        cv.ATTR_UNITS: UNITS,
        cv.ATTR_GAUGE_LENGTH: float(cable.gauge_length_m),
        cv.ATTR_CHANNEL_SPACING: float(cable.channel_spacing_m),
        cv.ATTR_INTERROGATOR: INTERROGATOR,
        "depth_profile_m": [[float(x), float(h)] for x, h in zip(*cable.knots(), strict=True)],
        "slot_samples": int(slot_samples),
        "noise_rms": float(noise_rms),
        ATTR_REALISATIONS: [slot.describe() for slot in slots],
        "generator": (
            f"seisctf {__version__} recipes.das_synth: JONSWAP × cos^2s swell on "
            f"ω² = g k tanh(k h) (WKB, Snell), seafloor pressure → half-space strain, "
            "Gutenberg-Richter earthquakes (causal P/S pulses), white noise; "
            f"depth {shallow:g}-{deep:g} m"
        ),
        **(attrs or {}),
    }
    return xr.Dataset(
        {QUANTITY: ((cv.TIME, cv.DISTANCE), strain_rate, {cv.ATTR_UNITS: UNITS})},
        coords={
            cv.DISTANCE: (cv.DISTANCE, distance, {cv.ATTR_UNITS: "m"}),
            WATER_DEPTH: (cv.DISTANCE, cable.depth_m(distance), {cv.ATTR_UNITS: "m"}),
        },
        attrs=store_attrs,
    )
