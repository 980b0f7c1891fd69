"""Realisations of the synthetic ocean-bottom DAS record: one sea state, its components and
an earthquake catalogue per slot, drawn from a seed.

Realisations: the record is `slots` laid end to end, each `slot_samples` long and an
independent realisation (its own sea state, components, earthquakes) on its own clock; the record
jumps at slot boundaries. `default_slots` draws them from a seed; the caller sizes the slots so
that each is one guarded CTF segment (pipeline/bundles/das_wavefield.py). The parametric slots share
everything (components, H_s, directions, earthquakes) but the peak period T_p.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.synth.das_synth_quake import Earthquake, draw_catalogue
from seisctf.synth.das_synth_swell import (
    FREQUENCY_BAND_HZ,
    MAX_DIRECTION_DEG,
    N_COMPONENTS,
    Components,
    SeaState,
)


@dataclass(frozen=True, eq=False)
class DasSlot:
    """One realisation: its CTF role, the parametric pairs' parameter (NaN if none), its sea,
    its components and its earthquakes (origin-time order; none for swell and noise only)."""

    role: str
    parameter_value: float
    sea: SeaState
    components: Components
    earthquakes: tuple[Earthquake, ...] = ()

    def describe(self) -> dict[str, Any]:
        """Description for the private store: role, parameter, sea state, earthquakes."""
        return {
            "role": self.role,
            "parameter_value": None if math.isnan(self.parameter_value) else self.parameter_value,
            "sea_state": asdict(self.sea),
            "earthquakes": [asdict(quake) for quake in self.earthquakes],
        }


def default_slots(
    seed: int,
    roles: tuple[str, ...],
    slot_duration_s: float,
    cable_length_m: float,
    *,
    parameter_values: tuple[float, ...] = (10.0, 12.0, 14.0),
    interpolation: float = 11.0,
    extrapolation: float = 16.0,
    earthquakes: bool = True,
    n_components: int = N_COMPONENTS,
) -> list[DasSlot]:
    """One slot per entry of `roles` (in record order). Every non-parametric role is an
    independent sea (H_s 0.8–2.5 m, T_p 9–15 s, mean direction −40…40°, s 8–25, uniform) with
    its own components and earthquake catalogue (`das_synth_quake.draw_catalogue`: Poisson
    count, Gutenberg–Richter magnitudes; none if not `earthquakes`). The parametric roles
    share one such draw and differ only in T_p: `parameter_values` for param_train (in the
    order those roles appear), `interpolation` and `extrapolation`. All drawn from
    numpy.random.default_rng(seed), the shared family first."""
    rng = np.random.default_rng(seed)

    def draw() -> tuple[SeaState, Components, tuple[Earthquake, ...]]:
        sea = SeaState(
            significant_wave_height_m=float(rng.uniform(0.8, 2.5)),
            peak_period_s=float(rng.uniform(9.0, 15.0)),
            mean_direction_deg=float(rng.uniform(-40.0, 40.0)),
            spreading_s=float(rng.uniform(8.0, 25.0)),
        )
        components = Components.draw(rng, n_components)
        quakes = draw_catalogue(rng, slot_duration_s, cable_length_m)
        return sea, components, quakes if earthquakes else ()

    family_sea, family_components, family_quakes = draw()
    train = iter(parameter_values)
    slots = []
    for role in roles:
        if role.startswith("param_"):
            value = {"param_interp": interpolation, "param_extrap": extrapolation}.get(role)
            value = float(next(train) if value is None else value)
            sea = SeaState(**{**asdict(family_sea), "peak_period_s": value})
            slots.append(DasSlot(role, value, sea, family_components, family_quakes))
        else:
            sea, components, quakes = draw()
            slots.append(DasSlot(role, math.nan, sea, components, quakes))
    return slots


def check_slot(index: int, slot: DasSlot) -> None:
    """InvalidInput naming the realisation if its sea state, components or earthquakes are not
    usable."""
    what = f"realisation {index} ({slot.role})"
    sea = slot.sea
    if not (math.isfinite(sea.significant_wave_height_m) and sea.significant_wave_height_m >= 0):
        raise InvalidInput(what, "significant wave height must be >= 0 m")
    if not (math.isfinite(sea.peak_period_s) and sea.peak_period_s > 0):
        raise InvalidInput(what, f"peak period must be positive, got {sea.peak_period_s}")
    peak_hz = 1.0 / sea.peak_period_s
    if not FREQUENCY_BAND_HZ[0] < peak_hz < FREQUENCY_BAND_HZ[1]:
        raise InvalidInput(
            what,
            f"peak period {sea.peak_period_s} s is outside the swell band "
            f"{1 / FREQUENCY_BAND_HZ[1]:.3g}-{1 / FREQUENCY_BAND_HZ[0]:.3g} s",
        )
    if not (math.isfinite(sea.spreading_s) and sea.spreading_s >= 0):
        raise InvalidInput(what, f"spreading exponent must be >= 0, got {sea.spreading_s}")
    if not abs(sea.mean_direction_deg) < MAX_DIRECTION_DEG:
        raise InvalidInput(what, f"mean direction must be within ±{MAX_DIRECTION_DEG} degrees")
    sizes = {slot.components.jitter.size, slot.components.quantile.size}
    if sizes != {slot.components.phase_rad.size} or not slot.components.jitter.size:
        raise InvalidInput(what, "components need equal, non-zero numbers of draws")

    for quake in slot.earthquakes:
        values = (quake.peak_strain_rate, quake.duration_s, quake.depth_m, quake.offset_m)
        if not (all(math.isfinite(v) for v in values) and quake.duration_s > 0):
            raise InvalidInput(what, f"earthquake {quake} needs finite values, duration > 0")
