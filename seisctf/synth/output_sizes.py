"""How many bytes a synthetic source writes, from its options alone: arithmetic on the sizes,
no array built, so `seisctf synth` and `seisctf demo` can refuse an output that cannot fit
before a cluster starts. The count is of the data variables' samples, uncompressed (zarr's
compression usually saves 10-30 %; the coordinates add well under 1 %).

Each estimate mirrors its generator's shapes (`synth.sources`); the tests compare it
with the bytes of the lazy dataset the generator returns. The DAS record's slot length is
computed here for both (`das_slot_plan`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from seisctf.errors import InvalidInput
from seisctf.plugins.layouts import LAYOUTS, Layout

FLOAT32_BYTES = 4
# Realisations of the global and DAS generators (one per CTF role) and the crustal core group.
CORE_REALISATIONS = 10
# The crustal store's velocity components: u (up), u_north, u_east.
CRUSTAL_COMPONENTS = 3


@dataclass(frozen=True)
class OutputSize:
    """The bytes `what` writes: the product of `factors` ((count, noun), e.g. (10,
    "realisations")) and `item_bytes`, uncompressed."""

    what: str
    factors: tuple[tuple[int, str], ...]
    item_bytes: int = FLOAT32_BYTES

    @property
    def bytes(self) -> int:
        return math.prod(count for count, _ in self.factors) * self.item_bytes

    def formula(self) -> str:
        """'10 realisations × 3000 steps × 2048 sensors × 4 bytes'."""
        terms = [f"{count} {noun}" for count, noun in self.factors]
        return " × ".join([*terms, f"{self.item_bytes} bytes"])


def human_bytes(count: float) -> str:
    """`count` bytes in decimal units: '245.8 MB', '12.3 TB', '512 bytes'."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} bytes"


def steps(duration_s: float, sampling_rate_hz: float) -> int:
    """Samples of a record of `duration_s` s at `sampling_rate_hz` Hz, as the generators count."""
    return int(round(duration_s * sampling_rate_hz))


def das_slot_plan(layout: Layout, sampling_rate_hz: float, ctf_rate_hz: float) -> tuple[int, int]:
    """(slot samples at the record's rate, guard steps at the CTF rate) of the synthetic DAS
    record's slots for `layout` (`pipeline.bundles.das_wavefield` cuts the same slots)."""
    # filter_design loads scipy: imported only when a DAS record is sized.
    from seisctf.signal.filter_design import ctf_ratio, guard_steps

    up, down = ctf_ratio(sampling_rate_hz, ctf_rate_hz, "synth das")
    guard = guard_steps(sampling_rate_hz, ctf_rate_hz, layout.required_steps)
    return (guard + layout.required_steps) * down // up, guard


def global_size(
    *, sensors: int = 2048, duration_s: float = 3000.0, sampling_rate_hz: float = 1.0, **_: Any
) -> OutputSize:
    """`synthetic_global`: u(realisation, time, sensor) float32."""
    factors = (
        (CORE_REALISATIONS, "realisations"),
        (steps(duration_s, sampling_rate_hz), "steps"),
        (int(sensors), "sensors"),
    )
    return OutputSize("synth global", factors)


def das_size(
    *,
    channels: int = 3000,
    sampling_rate_hz: float = 5.0,
    ctf_rate_hz: float = 1.0,
    layout: Layout | None = None,
    **_: Any,
) -> OutputSize:
    """`synthetic_das`: strain_rate(time, distance) float32, ten slots laid end to end."""
    slot_samples, _guard = das_slot_plan(layout or LAYOUTS["das"], sampling_rate_hz, ctf_rate_hz)
    factors = ((CORE_REALISATIONS, "slots"), (slot_samples, "samples"), (int(channels), "channels"))
    return OutputSize("synth das", factors)


def crustal_size(
    *,
    sensors: int = 94 * 94,
    sampling_rate_hz: float = 100.0,
    duration_s: float | None = None,
    parametric: int = 4,
    initial_conditions: int = 4,
    layout: Layout | None = None,
    **_: Any,
) -> OutputSize:
    """`synthetic_crustal`: u, u_north, u_east (realisation, time, sensor) float32; the
    duration is the layout's (default `crustal`) unless given."""
    if duration_s is None:
        duration_s = (layout or LAYOUTS["crustal"]).required_steps / sampling_rate_hz
    # The extended groups: the sweep and its test, the new initial conditions and their test.
    extended = parametric + 1 + initial_conditions + 1 if parametric else 0
    factors = (
        (CRUSTAL_COMPONENTS, "components"),
        (CORE_REALISATIONS + extended, "simulations"),
        (steps(duration_s, sampling_rate_hz), "steps"),
        (int(sensors), "sensors"),
    )
    return OutputSize("synth crustal", factors)


SIZES: dict[str, Callable[..., OutputSize]] = {
    "synthetic_global": global_size,
    "synthetic_das": das_size,
    "synthetic_crustal": crustal_size,
}


def source_size(
    source: str, options: Mapping[str, Any], layout: Layout | None = None
) -> OutputSize:
    """The bytes the synthetic `source` (its `SYNTHS` name) writes with `options` (its defaults
    for those not given) and the build's `layout`."""
    if source not in SIZES:
        raise InvalidInput("source", f"no size estimate for {source!r}; known: {sorted(SIZES)}")
    return SIZES[source](**options, layout=layout)
