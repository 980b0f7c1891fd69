"""A CTF wavefield cut from a DAS store, and the synthetic DAS record sized for it.

`das_wavefield(store, layout, sampling_rate_hz=1)` is the documented adapter from a DAS store
(`strain_rate(time, distance)` or another quantity, conventions.py) to what
`tasks.build_bundle` takes: `u(realisation, time, sensor)` float64, ten realisations with the
bundle's roles. It is the archive path's cut (`guarded_segments.py`), with the fibre's
channels as traces: the record is cut into ten consecutive slots of guard + L CTF
samples, each slot is processed alone with the causal anti-alias filter and decimated (5 Hz →
1 Hz: `filters.decimate(factor=5, zero_phase=False)`, an order 8 Butterworth at 0.4 Hz run
forward only), the guard is dropped and each channel's mean over the public rows removed. So no
withheld sample reaches a public array, whether the record is one continuous recording (an
ingested store: gaps drop channels, as they drop stations there) or realisations laid end to end
(the synthetic record). Roles in time order: `conventions.SEGMENT_ROLES`.

Sensors: the kept channels in fibre order (the store's order along `distance`, normally
increasing distance from the interrogator; the synthetic cable's channel 0 is at the coast).
Sensor i carries the channel's index in the store (`sensor`) and its `distance` (m). The
long-time score's FFT runs along this order, so its wavenumbers are wavenumbers along the fibre
(channels with gaps dropped make the spacing uneven there; the synthetic record has none).

Parameter of the parametric pairs: a store with attr `ctf_segments` (the synthetic record) names
it and its value per slot (`swell_peak_period_s`: the peak period of the swell; training 10, 12,
14 s, interpolation 11 s, extrapolation 16 s by default); its slots must be the ones cut here
(its `slot_duration_s` fixes the slot, the first ten slots are used). Any other DAS store: the
segment's start in hours from the store's start (`segment_start_h`), as for an archive.

Provenance (`das` attr): all of it in the truth group; the public group gets `PUBLIC_DAS_KEYS`
(no channel positions, no times).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.bundles.gap_check import store_coverage
from seisctf.pipeline.bundles.guarded_segments import (
    GAP_POLICY,
    N_SEGMENTS,
    guarded_segments,
    iso_time,
    segment_start_hours,
)
from seisctf.plugins.layouts import Layout
from seisctf.signal.filter_design import DEFAULT_RATE_HZ
from seisctf.synth.das_record import SYNTHETIC_PARAMETER as SYNTHETIC_PARAMETER
from seisctf.synth.das_record import slot_plan as slot_plan
from seisctf.synth.das_record import synthetic_das_record as synthetic_das_record

# Chunks of each slot's raw samples before the causal filters: 128 channels × 2**14 samples
# (16 MiB of float64), from the slot's start whatever the store's chunks.
TIME_CHUNK_SAMPLES = 2**14
CHANNEL_CHUNK = 128
SENSOR_ORDER = (
    "DAS channels in fibre order (the store's order along distance, m); sensor = the channel's "
    "index in the store; channels with gaps dropped"
)
PUBLIC_DAS_KEYS = (
    "quantity",
    "units",
    "sampling_rate_hz",
    "source_sampling_rate_hz",
    "transforms",
    "time_chunk_samples",
    "channel_chunk",
    "segment_steps",
    "guard_steps",
    "n_channels",
    "n_channels_dropped",
    "gauge_length_m",
    "channel_spacing_m",
    "gap_policy",
)


def _segments_attr(store: xr.Dataset, sampling_rate_hz: float, what: str) -> dict[str, Any] | None:
    segments = store.attrs.get(cv.ATTR_CTF_SEGMENTS)
    if not segments:
        return None
    roles = list(segments.get("roles") or [])
    values = list(segments.get("parameter_values") or [])
    if roles[:N_SEGMENTS] != list(cv.SEGMENT_ROLES) or len(values) < N_SEGMENTS:
        raise InvalidInput(
            what,
            f"attr {cv.ATTR_CTF_SEGMENTS!r} must list roles {list(cv.SEGMENT_ROLES)} and a "
            "parameter value per slot",
        )
    slot_steps = float(segments["slot_duration_s"]) * sampling_rate_hz
    if abs(slot_steps - round(slot_steps)) > 1e-6:
        raise InvalidInput(
            what,
            f"its slots of {segments['slot_duration_s']} s are not a whole number of samples "
            f"at {sampling_rate_hz} Hz",
        )
    return {**segments, "slot_steps": round(slot_steps)}


def das_wavefield(
    store: xr.Dataset,
    layout: Layout,
    *,
    sampling_rate_hz: float = DEFAULT_RATE_HZ,
    what: str = "DAS store",
    quiet: bool = False,
) -> xr.Dataset:
    """The wavefield `build_bundle` takes, cut from a DAS store (module docstring):
    `u(realisation, time, sensor)` float64, 10 realisations of `layout.required_steps` samples
    at `sampling_rate_hz` (Hz), one per role in `conventions.SEGMENT_ROLES`. Lazy, but for the
    gap check."""
    variable = cv.validate_das_store(store, what)
    source_rate_hz = cv.sampling_rate_hz(store.attrs, what)
    data = store[variable].assign_attrs({cv.ATTR_SAMPLING_RATE: source_rate_hz})
    segments = _segments_attr(store, sampling_rate_hz, what)
    cut = guarded_segments(
        data,
        cv.DISTANCE,
        layout,
        sampling_rate_hz=sampling_rate_hz,
        trace_chunks={cv.DISTANCE: CHANNEL_CHUNK},
        time_chunk_samples=TIME_CHUNK_SAMPLES,
        slot_steps=segments["slot_steps"] if segments else None,
        source=f"the DAS record ({variable})",
        trace_noun="channel",
        what=what,
        coverage=store_coverage(store, data, cv.DISTANCE),
        quiet=quiet,
    )
    if segments and cut.first_slot != 0:
        raise InvalidInput(
            what, "its realisations (attr ctf_segments) start at slot 0, but slot 0 has gaps"
        )
    if segments:
        parameter_name = str(segments["parameter_name"])
        values = [math.nan if v is None else float(v) for v in segments["parameter_values"]]
        parameter = values[:N_SEGMENTS]
    else:
        parameter_name = cv.SEGMENT_PARAMETER
        parameter = segment_start_hours(cut.starts, sampling_rate_hz)
    is_parametric = [role.startswith("param_") for role in cv.SEGMENT_ROLES]
    start_time = str(store.attrs[cv.ATTR_START_TIME])
    distance = np.asarray(store[cv.DISTANCE].values, dtype=np.float64)
    n_channels = store.sizes[cv.DISTANCE]
    provenance = {
        "source": what,
        "source_fingerprint": store.attrs.get("ingest_fingerprint"),
        "source_start_time": start_time,
        "source_sampling_rate_hz": source_rate_hz,
        "quantity": variable,
        "units": store.attrs.get(cv.ATTR_UNITS) or store[variable].attrs.get(cv.ATTR_UNITS),
        "interrogator": store.attrs.get(cv.ATTR_INTERROGATOR),
        "gauge_length_m": store.attrs.get(cv.ATTR_GAUGE_LENGTH),
        "channel_spacing_m": store.attrs.get(cv.ATTR_CHANNEL_SPACING),
        "sampling_rate_hz": float(sampling_rate_hz),
        "transforms": cut.transforms,
        "time_chunk_samples": TIME_CHUNK_SAMPLES,
        "channel_chunk": CHANNEL_CHUNK,
        "segment_steps": cut.steps,
        "guard_steps": cut.guard,
        "segment_roles": list(cv.SEGMENT_ROLES),
        "segment_start_times": [iso_time(start_time, s / sampling_rate_hz) for s in cut.starts],
        "n_channels": len(cut.kept),
        "n_channels_dropped": n_channels - len(cut.kept),
        "channels_dropped": [i for i in range(n_channels) if not cut.complete[i]],
        "start_offsets_s": cut.start_offsets(range(n_channels), source_rate_hz),
        "gap_policy": GAP_POLICY.replace("stations", "channels"),
    }
    return xr.Dataset(
        {cv.WAVEFIELD_VAR: ((cv.REALISATION, cv.TIME, cv.SENSOR), cut.u)},
        coords={
            cv.REALISATION: np.arange(N_SEGMENTS),
            cv.TIME: np.arange(cut.steps) / sampling_rate_hz,
            cv.SENSOR: np.asarray(cut.kept, dtype=np.int64),
            cv.DISTANCE: (cv.SENSOR, distance[cut.kept]),
            cv.ROLE: (cv.REALISATION, np.array(cv.SEGMENT_ROLES, dtype=object)),
            cv.PARAMETER_VALUE: (cv.REALISATION, np.where(is_parametric, parameter, np.nan)),
            cv.SEGMENT_START_TIME: (
                cv.REALISATION,
                np.array(provenance["segment_start_times"], dtype=object),
            ),
        },
        attrs={
            cv.ATTR_DATASET: cv.DAS_DATASET,
            cv.ATTR_START_TIME: start_time,
            cv.ATTR_SAMPLING_RATE: float(sampling_rate_hz),
            cv.ATTR_SENSOR_ORDER: SENSOR_ORDER,
            cv.ATTR_PARAMETER_NAME: parameter_name,
            cv.ATTR_DAS: provenance,
        },
    )


def das_attrs(wavefield: xr.Dataset) -> tuple[dict[str, Any], dict[str, Any]]:
    """(public attrs, truth attrs) of a bundle built from `das_wavefield`'s result."""
    provenance = wavefield.attrs[cv.ATTR_DAS]
    public = {key: provenance[key] for key in PUBLIC_DAS_KEYS}
    return {cv.ATTR_DAS: public}, {cv.ATTR_DAS: provenance}
