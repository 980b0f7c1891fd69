"""Ten guarded segments cut from a continuous record, the one cut behind `archive_wavefield`
(a waveform store's stations) and `das_wavefield` (a DAS fibre's channels).

`guarded_segments(data, trace_dim, layout, sampling_rate_hz=…)` takes `data(trace, time)` (attr
`sampling_rate`, Hz) and returns `GuardedSegments`: `u(segment, time, trace)` float64, lazy,
one segment of `layout.required_steps` CTF samples per role of `SEGMENT_ROLES`, and the slot
geometry. Only the gap check is computed.

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
  CTF row k depends on raw samples at or before k / sampling_rate_hz only. Truth may depend on
  public samples, never the reverse.
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

Steps, each from `filters.py` where it is signal processing (step 1, choosing the record's
traces, and step 6, their order, belong to `archive_wavefield` and `das_wavefield`; a station
here is any trace of the record, e.g. a DAS fibre's channel):

2. Slots: the raw record is cut into consecutive slots of (`guard` + L) CTF samples, i.e.
   (`guard` + L)·down/up raw samples (the resampling ratio is up/down; `guard` is rounded up
   so that this is whole), from its first sample; L = `layout.required_steps`. A slot is
   usable for a station when all its raw samples are finite, but for a leading gap of less
   than half a CTF sample inside the guard (`lead_limit`): as the ingest puts a trace at its
   nearest grid sample, such a station starts at the slot's start, its first `lead` raw samples
   held at its first sample (`hold_leads`: the filters start in the steady state of that
   sample, as they would at the slot's start; the held samples are guard samples, in no array).
   A store's traces that start 0.5 raw samples or more after a grid sample start at the next
   one (the ingest's rule), so at equal rates no gap is held.
3. Gaps: the CTF needs finite data. Of all runs of ten consecutive slots, the one where the most
   stations are usable throughout is used (the earliest among equals); the other stations are
   dropped and listed in the attrs. Too few stations for the layout's `modes`, or a record
   shorter than ten slots, is an error (InvalidInput). The check runs in bounded waves of slots
   and skips the slots a store's coverage shows empty (`gap_check`).
4. Per used slot: chunks of `time_chunk_samples` from the slot's start and of as many stations
   as fill about that many samples (`stations_per_chunk`: 1 when a slot is that long; a function
   of the data's shape only, so the bundle's bytes never depend on how the store was chunked,
   and each station is filtered alone whatever its neighbours in a chunk), then to the CTF rate
   with the causal filters (`to_ctf_rate`):
   `filters.decimate` when the store's rate is an integer multiple of `sampling_rate_hz`
   (Butterworth anti-alias filter of order 8 at 0.8 × the new Nyquist frequency, then every
   factor-th sample), else `filters.resample` (the same filter, then the delayed polyphase
   FIR); nothing when the rates are equal. The first `guard` CTF samples are dropped; the L
   that follow are the segment, whose sample k sits at its slot's start + (guard + k) /
   sampling_rate_hz.
5. The offset removal above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.bundles.gap_check import (
    TIME_CHUNK_SAMPLES,
    BlockCoverage,
    detached,
    stations_per_chunk,
    usable_run,
)
from seisctf.pipeline.transforms import filters
from seisctf.pipeline.transforms.history import recorded
from seisctf.plugins.layouts import (
    Layout,
    check_trace_count,
    length_note,
    small_network_note,
    stations_note,
    traces_needed,
)
from seisctf.signal.filter_design import FILTER_TOLERANCE, ctf_ratio, guard_steps

SEGMENT_ROLES = cv.SEGMENT_ROLES
N_SEGMENTS = len(SEGMENT_ROLES)
assert sorted(SEGMENT_ROLES) == sorted(cv.BUNDLE_ROLES)

GAP_POLICY = (
    "ten consecutive slots of guard_steps + segment_steps CTF samples on a slot grid from the "
    "record's first sample, each processed alone; the run of ten slots where the most stations "
    "have finite raw samples throughout (earliest among equals); other stations dropped; "
    "stations whose first raw sample in a slot lies less than half a CTF sample after the "
    "slot's start (inside the guard) start at the slot's start, the gap held at that sample"
)
OFFSET_POLICY = (
    "per station and segment, the mean of the segment's rows before its forecast window is "
    "subtracted from the whole segment"
)


def to_ctf_rate(
    data: xr.DataArray,
    sampling_rate_hz: float,
    time_chunk_samples: int,
    what: str,
    trace_chunks: Mapping[str, int] | None = None,
) -> xr.DataArray:
    """`data(station, time)` (attr `sampling_rate`) brought to `sampling_rate_hz` with the causal
    filters (module docstring), float64, in chunks of `stations_per_chunk` stations ×
    `time_chunk_samples` from its first sample (`trace_chunks`: other chunks along the trace
    dims, e.g. {"distance": 128}):
    sample k depends on input samples at or before k / sampling_rate_hz s only. NaN where a gap is
    within the filters' reach before the sample (`filters.py`'s causal NaN policy)."""
    source_rate_hz = cv.sampling_rate_hz(data.attrs, what)
    up, down = ctf_ratio(source_rate_hz, sampling_rate_hz, what)
    stations = stations_per_chunk(data.sizes[cv.TIME], time_chunk_samples)
    data = data.chunk({**(trace_chunks or {cv.STATION: stations}), cv.TIME: time_chunk_samples})
    tolerance = FILTER_TOLERANCE
    if up == 1 and down > 1:
        return filters.decimate(data, factor=down, tolerance=tolerance, zero_phase=False)
    if down > 1:
        return filters.resample(
            data, sampling_rate=sampling_rate_hz, tolerance=tolerance, zero_phase=False
        )
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


def lead_limit(up: int, down: int, guard: int) -> int:
    """The most raw samples a trace's first sample in a slot may lie after the slot's start and
    still count as at it: less than half a CTF sample (lead · up / down < 1/2, the ingest's
    rule for the grid) and inside the guard (`guard` CTF samples); 0 at equal rates."""
    half = -(-down // (2 * up)) - 1  # the largest lead with 2 · lead · up < down
    return max(0, min(half, guard * down // up - 1))


def hold_leads(raw: xr.DataArray, leads: np.ndarray, trace_dim: str) -> xr.DataArray:
    """`raw(trace, time)` (one slot) with each trace's first `leads[i]` samples (its leading
    gap) set to its first finite sample: the trace is taken as starting at the slot's start, as
    the causal filters' steady state of that sample gives. Unchanged when no lead is > 0."""
    if not (leads > 0).any():
        return raw
    lead = xr.DataArray(leads, dims=trace_dim)
    first = raw.isel({cv.TIME: lead})
    index = xr.DataArray(np.arange(raw.sizes[cv.TIME]), dims=cv.TIME)
    return raw.where(index >= lead, first).assign_attrs(raw.attrs)


def iso_time(start_time: str, offset_s: float) -> str:
    """`start_time` (ISO 8601, UTC) plus `offset_s` seconds, in ISO 8601 with a Z."""
    start = np.datetime64(str(start_time).rstrip("Z"), "ns")
    instant = start + np.timedelta64(round(offset_s * 1e9), "ns")
    return np.datetime_as_string(instant, unit="auto") + "Z"


@dataclass(frozen=True, eq=False)
class GuardedSegments:
    """Ten guarded segments cut from a continuous record (`guarded_segments`): `u` (segment,
    time, trace) float64 (lazy), the kept traces (indices into the record's trace dim, in the
    order given), which traces were usable, the first slot used, and the slot geometry in CTF
    samples: `starts` (each segment's first sample from the record's start), `guard`, `steps`;
    `leads` (kept trace, segment): raw samples from each slot's start to the trace's first
    sample there, held at that sample (`hold_leads`; 0 for a trace with data from the start)."""

    u: da.Array
    kept: list[int]
    complete: np.ndarray
    first_slot: int
    starts: list[int]
    guard: int
    steps: int
    transforms: list[dict[str, Any]]
    leads: np.ndarray

    def start_offsets(self, ids: Sequence[Any], source_rate_hz: float) -> dict[str, list[float]]:
        """{id: seconds from each segment's slot start to the trace's first sample} of the kept
        traces with a held leading gap (`ids`: the record's trace ids, by index)."""
        return {
            str(ids[trace]): [int(lead) / source_rate_hz for lead in self.leads[k]]
            for k, trace in enumerate(self.kept)
            if self.leads[k].any()
        }


def guarded_segments(
    data: xr.DataArray,
    trace_dim: str,
    layout: Layout,
    *,
    sampling_rate_hz: float,
    order: list[int] | None = None,
    trace_chunks: Mapping[str, int] | None = None,
    time_chunk_samples: int = TIME_CHUNK_SAMPLES,
    slot_steps: int | None = None,
    source: str = "the record",
    trace_noun: str = "station",
    what: str = "store",
    coverage: BlockCoverage | None = None,
    quiet: bool = False,
) -> GuardedSegments:
    """Steps 2–5 of the module docstring on `data(trace_dim, time)` (attr `sampling_rate`; any
    dim order): slots of guard + `layout.required_steps` CTF samples (`slot_steps`: a longer
    slot, whose extra samples lengthen the guard), the gap check, each of the ten slots used
    processed alone (causal filters to `sampling_rate_hz`, guard dropped, offset from public rows
    removed).
    `order`: the traces' order in the result (default: as stored). `source` and `trace_noun`
    name the record and its traces in error messages; `coverage`: the store's, which spares the
    gap check reading the slots it shows empty (`gap_check.store_coverage`). Computes only the
    gap check."""
    check_trace_count(layout, data.sizes[trace_dim], trace_noun, what)
    source_rate_hz = cv.sampling_rate_hz(data.attrs, what)
    up, down = ctf_ratio(source_rate_hz, sampling_rate_hz, what)
    steps = layout.required_steps
    guard = guard_steps(source_rate_hz, sampling_rate_hz, steps)
    if slot_steps is not None:
        if slot_steps < guard + steps or (slot_steps * down) % up:
            raise InvalidInput(
                what,
                f"slots of {slot_steps} samples at {sampling_rate_hz} Hz cannot hold a guard of "
                f"{guard} and a segment of {steps} (layout {layout.name!r}) on whole raw samples",
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
            f"{sampling_rate_hz} Hz ({n_out / sampling_rate_hz:g} s); {N_SEGMENTS} segments of "
            f"{steps} samples, each after a guard of {guard} samples while the causal anti-alias "
            f"filter settles, need {N_SEGMENTS * slot_steps} "
            f"({N_SEGMENTS * slot_steps / sampling_rate_hz:g} s)"
            + length_note(n_out, source_rate_hz, sampling_rate_hz),
        )
    max_lead = lead_limit(up, down, guard)
    run = usable_run(data, slot_samples, max_lead, trace_dim, N_SEGMENTS, coverage, quiet=quiet)
    first_slot, complete = run.first_slot, run.complete
    needed = traces_needed(layout)
    if complete.sum() < needed:
        raise InvalidInput(
            what,
            f"only {int(complete.sum())} {trace_noun}(s) have gap-free {source} data over "
            f"{N_SEGMENTS} consecutive slots of {slot_steps} samples at {sampling_rate_hz} Hz "
            f"({guard} of guard + a segment of {steps}); layout {layout.name!r} "
            f"(modes={layout.modes}) needs at least {needed}"
            + stations_note(layout, source_rate_hz, sampling_rate_hz)
            + small_network_note(int(complete.sum()), trace_noun),
        )
    order = list(range(data.sizes[trace_dim])) if order is None else order
    kept = [i for i in order if complete[i]]
    slots = [first_slot + j for j in range(N_SEGMENTS)]
    segments = []
    for slot in slots:
        # One slot alone: no filter state, halo or statistic crosses slots (module docstring).
        raw = detached(
            data.isel(
                {trace_dim: kept, cv.TIME: slice(slot * slot_samples, (slot + 1) * slot_samples)}
            )
        )
        raw = hold_leads(raw, run.leads[kept, slot - first_slot], trace_dim)
        ctf = to_ctf_rate(raw, sampling_rate_hz, time_chunk_samples, what, trace_chunks)
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
        leads=run.leads[kept],
    )


def segment_start_hours(starts: list[int], sampling_rate_hz: float) -> list[float]:
    """Segment starts (CTF samples from the record's start) in hours: the parameter of the
    parametric pairs for a real record."""
    return [start / sampling_rate_hz / 3600.0 for start in starts]
