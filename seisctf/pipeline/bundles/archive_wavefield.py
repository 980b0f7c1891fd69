"""A CTF wavefield cut from a continuous waveform store, so real archives feed the same referee.

`archive_wavefield(store, layout, channel=…, rate_hz=…)` returns a wavefield dataset that
`tasks.build_bundle` accepts: `u(realisation, time, sensor)` float64 with the bundle's ten roles.
Everything is lazy (Dask) except one small pass that finds where the data are gap-free.

No leak of withheld samples into public ones. Every segment ends with withheld truth (the
forecast window, rows `forecast_start` … L - 1) after its public rows, and segments follow each
other in time, so processing that looks ahead or across segments would let withheld samples
shape public ones (a zero-phase anti-alias filter reaches about 1 / corner frequency into the
future; a trend fitted over the whole record includes the withheld windows). Here every public
array is a function of raw samples that no truth array covers: raw samples at or before its own
rows' times in its own segment's slot. The exceptions are by the task's design: the
reconstruction targets X2test and X4test are the clean version of the public noisy X2train and
X3train. The rules that give this:

- Causal processing only: the anti-alias low-pass runs forward (`zero_phase=False` in
  `filters.decimate` / `filters.resample`; resample's FIR is delayed so it is causal too), so
  CTF row k depends on raw samples at or before k / rate_hz only. Truth may depend on public
  samples, never the reverse.
- One slot per segment, processed alone: the raw record is cut into slots (below) and each of
  the ten slots used is filtered as a separate array, starting in the steady state of its
  first raw sample. No state, halo or statistic crosses from one slot to the next, so nothing of
  a segment's truth reaches the next segment, at any tolerance (bit for bit).
- A guard band of `guard` CTF samples opens each slot, before its segment: the causal filters'
  warm-up (`filters.causal_warmup`: their halo, in CTF samples, rounded up, plus the delayed
  FIR's reach when resampling). Its raw samples belong to no array; they let the filter state
  settle, so a segment equals (to about the filters' tolerance, 1e-8 of the signal's variation)
  what the causal filter gives on the continuous record.
- Offset removal from public rows only: per station and segment, the mean of the segment's rows
  before its forecast window (CTF rows 0 … forecast_start - 1: public or unused in every role,
  the reconstruction target in the noisy roles) is subtracted from the whole segment. Raw counts
  carry offsets, and the bundle normalises without centring. No trend is removed: a line fitted
  to the public rows and extrapolated over the forecast window would add its slope error there.

The price: the causal low-pass delays the signal by its group delay (the order 8 Butterworth at
0.8 × the CTF Nyquist frequency: about 2 CTF samples at 0 Hz, rising towards the corner), plus
10 CTF samples for the delayed FIR when resampling by a non-integer ratio. The delay is the same
in every array and every station, so scores stay fair; recorded in `transforms`.

Steps, each from `filters.py` where it is signal processing:

1. One channel of `data(station, channel, time)`: an exact code (`BHZ`) or a component letter
   (`Z`: the one channel whose code ends with it).
2. Slots: the raw record is cut into consecutive slots of (`guard` + L) CTF samples, i.e.
   (`guard` + L)·down/up raw samples (the resampling ratio is up/down; `guard` is rounded up
   so that this is whole), from its first sample; L = `layout.required_steps`. A slot is
   usable for a station when all its raw samples are finite.
3. Gaps: the CTF needs finite data. Of all runs of ten consecutive slots, the one where the most
   stations are usable throughout is used (the earliest among equals); the other stations are
   dropped and listed in the attrs. Too few stations for the layout's `modes`, or a record
   shorter than ten slots, is an error (InvalidInput).
4. Per used slot and kept station: chunks of 1 station × `time_chunk_samples` from the slot's
   start (a function of the data's shape only, so the bundle's bytes never depend on how the
   store was chunked), then to the CTF rate with the causal filters (`to_ctf_rate`):
   `filters.decimate` when the store's rate is an integer multiple of `rate_hz` (Butterworth
   anti-alias filter of order 8 at 0.8 × the new Nyquist frequency, then every factor-th
   sample), else `filters.resample` (the same filter, then the delayed polyphase FIR); nothing
   when the rates are equal. The first `guard` CTF samples are dropped; the L that follow are
   the segment, whose sample k sits at its slot's start + (guard + k) / rate_hz.
5. The offset removal above.
6. Sensors are the kept stations, ordered by longitude, then latitude, then id (stations without
   coordinates last, by id): `SENSOR_ORDER`. The long-time score's FFT runs along this order; for
   scattered stations it is a convention, not a physical line.

Segment roles, in time order (`SEGMENT_ROLES`): forecast, few_clean, param_extrap, param_train,
noise_medium, few_noisy, param_interp, param_train, param_train, noise_high. With the guard
bands and slot-by-slot processing no order leaks; this one keeps the parametric pairs' meaning:
the interpolation segment lies between the training segments in time, the extrapolation segment
before all of them.

Parameter of the parametric pairs (`parameter_name` = `segment_start_h`): the segment's start,
in hours from the store's `start_time`. Training segments 4, 8 and 9; interpolation segment 7;
extrapolation segment 3.

The same cut serves DAS stores, with the fibre's channels as traces (`guarded_segments`, used
by `das_wavefield.py`).

Provenance (`archive` attr): the source store, its fingerprint and rate, the channel, the CTF
rate, the transforms, the guard, the segment start times and the stations used and dropped. The
truth group gets all of it; the public group only `PUBLIC_ARCHIVE_KEYS` (no station ids, no
absolute times): with them, anyone with access to the archive could fetch the withheld samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.pipeline.bundles.layouts import Layout
from seisctf.pipeline.transforms import filters
from seisctf.pipeline.transforms.history import recorded
from seisctf.recipes.filter_design import (
    DEFAULT_RATE_HZ,
    FILTER_TOLERANCE,
    ctf_ratio,
    guard_steps,
)

SEGMENT_ROLES = cv.SEGMENT_ROLES
N_SEGMENTS = len(SEGMENT_ROLES)
assert sorted(SEGMENT_ROLES) == sorted(cv.BUNDLE_ROLES)

# Time chunk of each slot's raw samples (store's rate): 2 MiB of float64.
TIME_CHUNK_SAMPLES = 2**18
SENSOR_ORDER = (
    "stations (NET.STA.LOC) by longitude, then latitude (degrees, ascending), then id; "
    "stations without coordinates last, by id"
)
GAP_POLICY = (
    "ten consecutive slots of guard_steps + segment_steps CTF samples on a slot grid from the "
    "record's first sample, each processed alone; the run of ten slots where the most stations "
    "have finite raw samples throughout (earliest among equals); other stations dropped"
)
OFFSET_POLICY = (
    "per station and segment, the mean of the segment's rows before its forecast window is "
    "subtracted from the whole segment"
)
PUBLIC_ARCHIVE_KEYS = (
    "channel",
    "sampling_rate_hz",
    "source_sampling_rate_hz",
    "transforms",
    "time_chunk_samples",
    "segment_steps",
    "guard_steps",
    "n_stations",
    "n_stations_dropped",
    "gap_policy",
)


def select_channel(store: xr.Dataset, channel: str | None, what: str) -> tuple[str, xr.DataArray]:
    """(code, `data(station, time)`) of one channel: an exact code, a component letter that
    ends exactly one channel's code, or None when the store has only one channel."""
    codes = [str(code) for code in store[cv.CHANNEL].values]
    if channel is None:
        matches = codes if len(codes) == 1 else []
        problem = f"has channels {codes}; choose one with --channel"
    elif channel in codes:
        matches = [channel]
    else:
        letter = len(channel) == 1
        matches = [code for code in codes if letter and code.endswith(channel)]
        problem = f"has no channel {channel!r} (channels: {codes})"
        if len(matches) > 1:
            problem = f"component {channel!r} matches channels {matches}; give the full code"
    if len(matches) != 1:
        raise InvalidInput(what, problem)
    data = store[cv.WAVEFORM_VAR].isel({cv.CHANNEL: codes.index(matches[0])}, drop=True)
    data = data.assign_attrs({cv.ATTR_SAMPLING_RATE: float(store.attrs[cv.ATTR_SAMPLING_RATE])})
    return matches[0], recorded(data, data, "select_channel", {"channel": matches[0]})


def to_ctf_rate(
    data: xr.DataArray,
    rate_hz: float,
    time_chunk_samples: int,
    what: str,
    trace_chunks: Mapping[str, int] | None = None,
) -> xr.DataArray:
    """`data(station, time)` (attr `sampling_rate`) brought to `rate_hz` with the causal
    filters (module docstring), float64, in chunks of 1 station × `time_chunk_samples` from its
    first sample (`trace_chunks`: other chunks along the trace dims, e.g. {"distance": 128}):
    sample k depends on input samples at or before k / rate_hz s only. NaN where a gap is
    within the filters' reach before the sample (`filters.py`'s causal NaN policy)."""
    source_rate_hz = float(data.attrs[cv.ATTR_SAMPLING_RATE])
    up, down = ctf_ratio(source_rate_hz, rate_hz, what)
    data = data.chunk({**(trace_chunks or {cv.STATION: 1}), cv.TIME: time_chunk_samples})
    tolerance = FILTER_TOLERANCE
    if up == 1 and down > 1:
        return filters.decimate(data, factor=down, tolerance=tolerance, zero_phase=False)
    if down > 1:
        return filters.resample(data, sampling_rate=rate_hz, tolerance=tolerance, zero_phase=False)
    return data.astype(np.float64)


def remove_offset(segment: xr.DataArray, public_rows: int) -> xr.DataArray:
    """`segment(station, time)` minus, per station, the mean of its first `public_rows` rows
    (`OFFSET_POLICY`; nothing when `public_rows` is 0)."""
    result = segment
    if public_rows > 0:
        result = segment - segment.isel({cv.TIME: slice(0, public_rows)}).mean(cv.TIME)
    return recorded(
        result,
        segment,
        "remove_offset",
        {"statistic": "mean", "rows": [0, int(public_rows)], "policy": OFFSET_POLICY},
    )


def finite_slots(data: xr.DataArray, slot_steps: int, trace_dim: str = cv.STATION) -> da.Array:
    """Lazy bool (trace, slot): data finite throughout each consecutive `slot_steps` samples."""
    n_slots = data.sizes[cv.TIME] // slot_steps
    finite = da.isfinite(data.transpose(trace_dim, cv.TIME).data[:, : n_slots * slot_steps])
    per_chunk = slot_steps * max(1, TIME_CHUNK_SAMPLES // slot_steps)
    finite = finite.rechunk({0: 1, 1: per_chunk})
    return finite.reshape(finite.shape[0], n_slots, slot_steps).all(axis=2)


def choose_segments(valid: np.ndarray, n_segments: int = N_SEGMENTS) -> tuple[int, np.ndarray]:
    """First slot of the run of `n_segments` consecutive slots where the most stations are
    valid throughout (earliest among equals), and those stations (bool per station)."""
    n_runs = valid.shape[1] - n_segments + 1
    complete = np.stack([valid[:, s : s + n_segments].all(axis=1) for s in range(n_runs)], axis=1)
    first = int(np.argmax(complete.sum(axis=0)))
    return first, complete[:, first]


def sensor_order(ids: list[str], latitude: np.ndarray, longitude: np.ndarray) -> list[int]:
    """Indices of stations in `SENSOR_ORDER`."""
    located = np.isfinite(latitude) & np.isfinite(longitude)

    def key(i: int) -> tuple:
        return (0, longitude[i], latitude[i], ids[i]) if located[i] else (1, 0.0, 0.0, ids[i])

    return sorted(range(len(ids)), key=key)


def _iso(start_time: str, offset_s: float) -> str:
    start = np.datetime64(start_time.rstrip("Z"), "ns")
    instant = start + np.timedelta64(round(offset_s * 1e9), "ns")
    return np.datetime_as_string(instant, unit="auto") + "Z"


def _coordinate(store: xr.Dataset, name: str) -> np.ndarray:
    if name not in store.coords:
        return np.full(store.sizes[cv.STATION], np.nan)
    return np.asarray(store[name].values, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class GuardedSegments:
    """Ten guarded segments cut from a continuous record (`guarded_segments`): `u` (segment,
    time, trace) float64 (lazy), the kept traces (indices into the record's trace dim, in the
    order given), which traces were usable, the first slot used, and the slot geometry in CTF
    samples: `starts` (each segment's first sample from the record's start), `guard`, `steps`."""

    u: da.Array
    kept: list[int]
    complete: np.ndarray
    first_slot: int
    starts: list[int]
    guard: int
    steps: int
    transforms: list[dict[str, Any]]


def guarded_segments(
    data: xr.DataArray,
    trace_dim: str,
    layout: Layout,
    *,
    rate_hz: float,
    order: list[int] | None = None,
    trace_chunks: Mapping[str, int] | None = None,
    time_chunk_samples: int = TIME_CHUNK_SAMPLES,
    slot_steps: int | None = None,
    source: str = "the record",
    trace_noun: str = "station",
    what: str = "store",
    quiet: bool = False,
) -> GuardedSegments:
    """Steps 2–5 of the module docstring on `data(trace_dim, time)` (attr `sampling_rate`; any
    dim order): slots of guard + `layout.required_steps` CTF samples (`slot_steps`: a longer
    slot, whose extra samples lengthen the guard), the gap check, each of the ten slots used
    processed alone (causal filters to `rate_hz`, guard dropped, offset from public rows removed).
    `order`: the traces' order in the result (default: as stored). `source` and `trace_noun`
    name the record and its traces in error messages. Computes only the gap check."""
    source_rate_hz = float(data.attrs[cv.ATTR_SAMPLING_RATE])
    up, down = ctf_ratio(source_rate_hz, rate_hz, what)
    steps = layout.required_steps
    guard = guard_steps(source_rate_hz, rate_hz, steps)
    if slot_steps is not None:
        if slot_steps < guard + steps or (slot_steps * down) % up:
            raise InvalidInput(
                what,
                f"slots of {slot_steps} samples at {rate_hz} Hz cannot hold a guard of {guard} "
                f"and a segment of {steps} (layout {layout.name!r}) on whole raw samples",
            )
        guard = slot_steps - steps
    slot_steps = guard + steps
    slot_samples = slot_steps * down // up  # raw samples per slot
    n_samples = data.sizes[cv.TIME]
    if n_samples < N_SEGMENTS * slot_samples:
        n_out = -(-n_samples * up // down)
        raise InvalidInput(
            what,
            f"too short for layout {layout.name!r}: {source} gives {n_out} samples at "
            f"{rate_hz} Hz ({n_out / rate_hz:g} s); {N_SEGMENTS} segments of {steps} samples, "
            f"each after a guard of {guard} samples while the causal anti-alias filter "
            f"settles, need {N_SEGMENTS * slot_steps} ({N_SEGMENTS * slot_steps / rate_hz:g} s)",
        )
    (valid,) = compute(finite_slots(data, slot_samples, trace_dim), label="gap check", quiet=quiet)
    first_slot, complete = choose_segments(valid)
    needed = max(1, 2 * layout.modes - 1)
    if complete.sum() < needed:
        raise InvalidInput(
            what,
            f"only {int(complete.sum())} {trace_noun}(s) have gap-free {source} data over "
            f"{N_SEGMENTS} consecutive slots of {slot_steps} samples at {rate_hz} Hz "
            f"({guard} of guard + a segment of {steps}); layout {layout.name!r} "
            f"(modes={layout.modes}) needs at least {needed}",
        )
    order = list(range(data.sizes[trace_dim])) if order is None else order
    kept = [i for i in order if complete[i]]
    slots = [first_slot + j for j in range(N_SEGMENTS)]
    segments = []
    for slot in slots:
        # One slot alone: no filter state, halo or statistic crosses slots (module docstring).
        raw = data.isel(
            {trace_dim: kept, cv.TIME: slice(slot * slot_samples, (slot + 1) * slot_samples)}
        )
        ctf = to_ctf_rate(raw, rate_hz, time_chunk_samples, what, trace_chunks)
        segment = ctf.isel({cv.TIME: slice(guard, slot_steps)})
        segments.append(remove_offset(segment, min(layout.forecast_start, steps)))
    u = da.stack([segment.transpose(cv.TIME, trace_dim).data for segment in segments])
    u = u.rechunk((1, *cv.time_space_chunks(steps, len(kept), u.dtype.itemsize)))
    return GuardedSegments(
        u=u,
        kept=kept,
        complete=complete,
        first_slot=first_slot,
        starts=[slot * slot_steps + guard for slot in slots],
        guard=guard,
        steps=steps,
        transforms=segments[0].attrs[cv.ATTR_TRANSFORMS],
    )


def segment_start_hours(starts: list[int], rate_hz: float) -> list[float]:
    """Segment starts (CTF samples from the record's start) in hours: the parameter of the
    parametric pairs for a real record."""
    return [start / rate_hz / 3600.0 for start in starts]


def archive_wavefield(
    store: xr.Dataset,
    layout: Layout,
    *,
    channel: str | None = None,
    rate_hz: float = DEFAULT_RATE_HZ,
    time_chunk_samples: int = TIME_CHUNK_SAMPLES,
    what: str = "waveform store",
    quiet: bool = False,
) -> xr.Dataset:
    """The wavefield `build_bundle` takes, cut from a continuous waveform store (see the module
    docstring): `u(realisation, time, sensor)` float64, 10 realisations of
    `layout.required_steps` samples at `rate_hz` (Hz), one per role in `SEGMENT_ROLES`.

    Computes one small thing, the gap check (bool per station and slot); `u` stays lazy.
    """
    cv.validate_waveform_store(store, what)
    code, data = select_channel(store, channel, what)
    source_rate_hz = float(store.attrs[cv.ATTR_SAMPLING_RATE])
    ids = [str(station) for station in store[cv.STATION].values]
    latitude, longitude = _coordinate(store, cv.LATITUDE), _coordinate(store, cv.LONGITUDE)
    cut = guarded_segments(
        data,
        cv.STATION,
        layout,
        rate_hz=rate_hz,
        order=sensor_order(ids, latitude, longitude),
        time_chunk_samples=time_chunk_samples,
        source=f"channel {code}",
        trace_noun="station",
        what=what,
        quiet=quiet,
    )
    kept, complete, steps, starts, u = cut.kept, cut.complete, cut.steps, cut.starts, cut.u

    start_time = str(store.attrs[cv.ATTR_START_TIME])
    start_h = segment_start_hours(starts, rate_hz)
    is_parametric = [role.startswith("param_") for role in SEGMENT_ROLES]
    archive = {
        "source": what,
        "source_fingerprint": store.attrs.get("ingest_fingerprint"),
        "source_start_time": start_time,
        "source_sampling_rate_hz": source_rate_hz,
        "channel": code,
        "sampling_rate_hz": float(rate_hz),
        "transforms": cut.transforms,
        "time_chunk_samples": int(time_chunk_samples),
        "segment_steps": steps,
        "guard_steps": cut.guard,
        "segment_roles": list(SEGMENT_ROLES),
        "segment_start_times": [_iso(start_time, start / rate_hz) for start in starts],
        "n_stations": len(kept),
        "n_stations_dropped": len(ids) - len(kept),
        "stations": [ids[i] for i in kept],
        "stations_dropped": [ids[i] for i in range(len(ids)) if not complete[i]],
        "gap_policy": GAP_POLICY,
    }
    return xr.Dataset(
        {cv.WAVEFIELD_VAR: ((cv.REALISATION, cv.TIME, cv.SENSOR), u)},
        coords={
            cv.REALISATION: np.arange(N_SEGMENTS),
            cv.TIME: np.arange(steps) / rate_hz,
            cv.SENSOR: np.array(archive["stations"], dtype=object),
            cv.LATITUDE: (cv.SENSOR, latitude[kept]),
            cv.LONGITUDE: (cv.SENSOR, longitude[kept]),
            cv.ELEVATION: (cv.SENSOR, _coordinate(store, cv.ELEVATION)[kept]),
            cv.ROLE: (cv.REALISATION, np.array(SEGMENT_ROLES, dtype=object)),
            cv.PARAMETER_VALUE: (
                cv.REALISATION,
                np.where(is_parametric, start_h, np.nan),
            ),
            cv.SEGMENT_START_TIME: (
                cv.REALISATION,
                np.array(archive["segment_start_times"], dtype=object),
            ),
        },
        attrs={
            cv.ATTR_DATASET: cv.ARCHIVE_DATASET,
            cv.ATTR_START_TIME: start_time,
            cv.ATTR_SAMPLING_RATE: float(rate_hz),
            cv.ATTR_SENSOR_ORDER: SENSOR_ORDER,
            cv.ATTR_PARAMETER_NAME: cv.SEGMENT_PARAMETER,
            cv.ATTR_ARCHIVE: archive,
        },
    )


def archive_attrs(wavefield: xr.Dataset) -> tuple[dict[str, Any], dict[str, Any]]:
    """(public attrs, truth attrs) of a bundle built from `archive_wavefield`'s result: the
    truth group gets all the provenance, the public group `PUBLIC_ARCHIVE_KEYS` only."""
    archive = wavefield.attrs[cv.ATTR_ARCHIVE]
    public = {key: archive[key] for key in PUBLIC_ARCHIVE_KEYS}
    return {cv.ATTR_ARCHIVE: public}, {cv.ATTR_ARCHIVE: archive}


def wavefield_for_tasks(
    store: xr.Dataset,
    layout: Layout,
    *,
    channel: str | None = None,
    rate_hz: float | None = None,
    what: str = "store",
    quiet: bool = False,
) -> tuple[xr.Dataset, dict[str, Any], dict[str, Any]]:
    """What `seisctf tasks` builds its bundle from: (wavefield, public attrs, truth attrs).

    A continuous waveform store goes through `archive_wavefield`, a DAS store through
    `das_wavefield.das_wavefield` (no `channel`); a wavefield store is used as it is, and then
    `channel` and `rate_hz` must not be given."""
    if cv.WAVEFIELD_VAR not in store.data_vars and cv.das_variable(store) is not None:
        from seisctf.pipeline.bundles.das_wavefield import das_attrs, das_wavefield

        if channel is not None:
            raise InvalidInput(what, "--channel is only for a continuous waveform store")
        wavefield = das_wavefield(
            store,
            layout,
            rate_hz=DEFAULT_RATE_HZ if rate_hz is None else rate_hz,
            what=what,
            quiet=quiet,
        )
        return wavefield, *das_attrs(wavefield)
    if cv.is_waveform_store(store):
        wavefield = archive_wavefield(
            store,
            layout,
            channel=channel,
            rate_hz=DEFAULT_RATE_HZ if rate_hz is None else rate_hz,
            what=what,
            quiet=quiet,
        )
        return wavefield, *archive_attrs(wavefield)
    given = [
        option
        for option, value in (("--channel", channel), ("--rate", rate_hz))
        if value is not None
    ]
    if given:
        raise InvalidInput(
            what,
            f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} only for a continuous "
            f"waveform store (variable {cv.WAVEFORM_VAR!r} with dims {cv.WAVEFORM_DIMS}) or a "
            "DAS store; this store is neither",
        )
    return store, {}, {}
