"""The synthetic ocean-bottom DAS record as a CTF source: ten realisations of `das_synth`, one
per guarded slot of a CTF layout (`pipeline.bundles.das_wavefield` cuts them back out), each
long enough for the causal decimation to the CTF rate to settle (`filter_design.guard_steps`).
"""

from __future__ import annotations

import xarray as xr

from seisctf import conventions as cv
from seisctf.plugins.layouts import Layout, load_layout
from seisctf.signal.filter_design import DEFAULT_RATE_HZ
from seisctf.synth import das_synth

# (slot samples, guard steps) of `das_wavefield`'s slots: computed where the record is sized.
from seisctf.synth.output_sizes import das_slot_plan as slot_plan

SYNTHETIC_PARAMETER = "swell_peak_period_s"


def synthetic_das_record(
    *,
    channels: int = 3000,
    channel_spacing_m: float = 10.0,
    gauge_length_m: float = 20.0,
    depth_profile: list[list[float]] | None = None,
    sampling_rate_hz: float = 5.0,
    ctf_rate_hz: float = DEFAULT_RATE_HZ,
    layout: str | Layout | None = "das",
    seed: int = 0,
    earthquakes: bool = True,
    noise_rms: float = 3e-9,
    parameter_values: tuple[float, float, float] = (10.0, 12.0, 14.0),
    interpolation: float = 11.0,
    extrapolation: float = 16.0,
) -> xr.Dataset:
    """The synthetic ocean-bottom DAS record (`synth.das_synth`), lazy: ten realisations (one
    per role of `conventions.SEGMENT_ROLES`, in that order) laid end to end, each one slot of
    `das_wavefield` for `layout` at `ctf_rate_hz`, with attr `ctf_segments` naming the roles and
    the parameter (the swell's peak period, s). Realisations from `default_slots(seed)`; the seed
    is not recorded."""
    layout = layout if isinstance(layout, Layout) else load_layout(layout or "das")
    slot_samples, guard = slot_plan(layout, sampling_rate_hz, ctf_rate_hz)
    profile = None
    if depth_profile is not None:
        profile = tuple((float(distance), float(depth)) for distance, depth in depth_profile)
    cable = das_synth.Cable(int(channels), float(channel_spacing_m), float(gauge_length_m), profile)
    cable.check()
    slot_duration_s = slot_samples / sampling_rate_hz
    slots = das_synth.default_slots(
        seed,
        cv.SEGMENT_ROLES,
        slot_duration_s,
        cable.length_m,
        parameter_values=tuple(parameter_values),
        interpolation=interpolation,
        extrapolation=extrapolation,
        earthquakes=earthquakes,
    )
    segments = {
        "slot_duration_s": slot_duration_s,
        "segment_steps": layout.required_steps,
        "guard_steps": guard,
        "sampling_rate_hz": float(ctf_rate_hz),
        "layout": layout.name,
        "roles": list(cv.SEGMENT_ROLES),
        "parameter_name": SYNTHETIC_PARAMETER,
        "parameter_values": [slot.describe()["parameter_value"] for slot in slots],
    }
    return das_synth.synthesize_das(
        cable,
        slots,
        slot_samples,
        sampling_rate_hz=sampling_rate_hz,
        seed=seed,
        noise_rms=noise_rms,
        attrs={cv.ATTR_DATASET: "das-synthetic", cv.ATTR_CTF_SEGMENTS: segments},
    )
