"""The synthetic sources of a recipe (and of `seisctf synth`), registered in `SYNTHS`: each is
`function(context, **options) -> xr.Dataset`, its seed from the build's secret unless given,
its sizes from the build's parsed CTF layout (`context.layout`) where it fills one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import xarray as xr

from seisctf import keys
from seisctf.options import option, spec
from seisctf.plugins.context import BuildContext
from seisctf.plugins.layouts import LAYOUTS
from seisctf.plugins.schema import SynthSeed
from seisctf.registry import SYNTHS
from seisctf.synth.crustal import medium as medium_kinds
from seisctf.synth.crustal.sweep import crustal_store, isqrt_sensors
from seisctf.synth.das_record import synthetic_das_record
from seisctf.synth.global_wavefield import synthesize_global

# Bounds the sources' options share.
Positive = Annotated[float, spec(exclusive_minimum=0)]
Count = Annotated[int, spec(minimum=0)]


@SYNTHS.register("synthetic_global")
def synthetic_global(
    context: BuildContext,
    *,
    sensors: Annotated[int, spec("sensors on the sphere", minimum=1)] = 2048,
    duration_s: Annotated[Positive, spec("record length, s")] = 3000.0,
    sampling_rate_hz: Annotated[Positive, spec("sampling rate, Hz")] = 1.0,
    seed: SynthSeed = None,
) -> xr.Dataset:
    """global wavefield on a Fibonacci sphere

    `sensors` on the sphere, `duration_s` s at `sampling_rate_hz` Hz
    (`global_wavefield.synthesize_global`)."""
    if seed is None:
        seed = keys.derive_seed(
            context.require_secret("source.synthetic_global"), keys.Purpose.SYNTH_GLOBAL
        )
    return synthesize_global(
        n_sensors=sensors,
        duration_s=duration_s,
        sampling_rate_hz=sampling_rate_hz,
        seed=seed,
    )


@dataclass(frozen=True, kw_only=True)
class SyntheticDasOptions:
    """A recipe's options of `synthetic_das`, passed on to `das_record.synthetic_das_record` as
    given (one left out, None here, takes its default there)."""

    channels: int = option(None, "channels of the cable", minimum=2)
    channel_spacing_m: Positive = option(None, "between channels, m")
    gauge_length_m: Positive = option(None, "gauge length, m")
    depth_profile: list[tuple[float, float]] = option(
        None, "the cable's (distance, depth) points, m", min_items=1
    )
    sampling_rate_hz: Positive = option(None, "sampling rate, Hz")
    ctf_rate_hz: Positive = option(None, "the CTF layout's rate, Hz")
    earthquakes: bool = option(None, "add earthquakes")
    noise_rms: float = option(None, "instrument noise RMS, strain rate, 1/s", minimum=0)
    seed: SynthSeed = None


@SYNTHS.register("synthetic_das", options=SyntheticDasOptions)
def synthetic_das(context: BuildContext, *, seed: int | None = None, **options: Any) -> xr.Dataset:
    """ocean-bottom DAS record: swell on a shoaling cable, earthquakes, noise (5 Hz)

    Ten realisations, one per guarded slot of the build's CTF layout (default `das`), lazy
    (`das_record.synthetic_das_record`)."""
    if seed is None:
        seed = keys.derive_seed(
            context.require_secret("source.synthetic_das"), keys.Purpose.SYNTH_DAS
        )
    return synthetic_das_record(
        layout=context.layout or LAYOUTS["das"],
        seed=seed,
        **options,
    )


@dataclass(frozen=True, kw_only=True)
class SyntheticCrustalOptions:
    """A recipe's options of `synthetic_crustal` (`sensors`, `medium`: `crustal_store`'s `grid`,
    `medium_kind`), the others passed on to `crustal.sweep.crustal_store` as given (one left
    out, None here, takes its default: `synthetic_crustal`'s, else `crustal_store`'s)."""

    sensors: int = option(None, "sensors, a square grid", minimum=1)
    parametric: Count = option(None, "parametric simulations")
    initial_conditions: Count = option(None, "initial-condition simulations")
    sensor_spacing_m: Positive = option(None, "between sensors, m")
    sampling_rate_hz: Positive = option(None, "sampling rate, Hz")
    duration_s: Positive = option(None, "record length, s (default: the layout's)")
    spacing_m: Positive = option(None, "finite-difference grid spacing, m")
    depth_m: Positive = option(None, "depth of the model, m")
    correlation_length_m: Positive = option(None, "of the medium's perturbation, m")
    perturbation_std: float = option(None, "of the medium's perturbation", minimum=0)
    medium: str = option(
        None, "the perturbation's kind", schema={"enum": list(medium_kinds.MEDIUM_KINDS)}
    )
    seed: SynthSeed = None


@SYNTHS.register("synthetic_crustal", options=SyntheticCrustalOptions)
def synthetic_crustal(
    context: BuildContext,
    *,
    sensors: int = 94 * 94,
    sampling_rate_hz: float = 100.0,
    duration_s: float | None = None,
    medium: str = "von_karman",
    seed: int | None = None,
    **options: Any,
) -> xr.Dataset:
    """crustal surface wavefields: 3D elastic finite differences, one Dask task per simulation
    (see docs/crustal.md)

    A square grid of `sensors` (`crustal.sweep.crustal_store`); the duration is the build's CTF
    layout's (default `crustal`) at the rate unless given."""
    if seed is None:
        seed = keys.derive_seed(
            context.require_secret("source.synthetic_crustal"), keys.Purpose.SYNTH_CRUSTAL
        )
    if duration_s is None:
        duration_s = (context.layout or LAYOUTS["crustal"]).required_steps / sampling_rate_hz
    return crustal_store(
        seed=seed,
        grid=isqrt_sensors(sensors),
        sampling_rate_hz=sampling_rate_hz,
        duration_s=duration_s,
        medium_kind=medium,
        **options,
    )
