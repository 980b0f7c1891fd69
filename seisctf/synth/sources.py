"""The synthetic sources of a recipe (and of `seisctf synth`), registered in `SYNTHS`: each is
`function(context, **options) -> xr.Dataset`, its seed from the build's secret unless given,
its sizes from the build's parsed CTF layout (`context.layout`) where it fills one."""

from __future__ import annotations

from typing import Any

import xarray as xr

from seisctf import keys
from seisctf.plugins.context import BuildContext
from seisctf.plugins.layouts import LAYOUTS
from seisctf.plugins.schema import NUMBER, POSITIVE, POSITIVE_INT, SEED, parameters
from seisctf.registry import SYNTHS
from seisctf.synth.crustal.sweep import crustal_store, isqrt_sensors
from seisctf.synth.das_record import synthetic_das_record
from seisctf.synth.global_wavefield import synthesize_global


@SYNTHS.register(
    "synthetic_global",
    options=parameters(
        {"sensors": POSITIVE_INT, "duration_s": POSITIVE, "sampling_rate_hz": POSITIVE, **SEED}
    ),
)
def synthetic_global(
    context: BuildContext,
    *,
    sensors: int = 2048,
    duration_s: float = 3000.0,
    sampling_rate_hz: float = 1.0,
    seed: int | None = None,
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


@SYNTHS.register(
    "synthetic_das",
    options=parameters(
        {
            "channels": {"type": "integer", "minimum": 2},
            "channel_spacing_m": POSITIVE,
            "gauge_length_m": POSITIVE,
            "depth_profile": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2},
            },
            "sampling_rate_hz": POSITIVE,
            "ctf_rate_hz": POSITIVE,
            "earthquakes": {"type": "boolean"},
            "noise_rms": {"type": "number", "minimum": 0},
            **SEED,
        }
    ),
)
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


# Options of `synthetic_crustal` besides `sensors`, `perturbation_std`, `medium` and `seed`.
CRUSTAL_COUNTS = ("parametric", "initial_conditions")
CRUSTAL_POSITIVE = (
    "sensor_spacing_m",
    "sampling_rate_hz",
    "duration_s",
    "spacing_m",
    "depth_m",
    "correlation_length_m",
)


@SYNTHS.register(
    "synthetic_crustal",
    options=parameters(
        {
            "sensors": POSITIVE_INT,
            **{name: {"type": "integer", "minimum": 0} for name in CRUSTAL_COUNTS},
            **{name: POSITIVE for name in CRUSTAL_POSITIVE},
            "perturbation_std": {"type": "number", "minimum": 0},
            "medium": {"enum": ["von_karman", "gaussian"]},
            **SEED,
        }
    ),
)
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
