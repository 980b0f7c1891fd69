"""One crustal simulation end to end: grid, medium, source, time stepping, surface record.

`CrustalConfig` holds what every realisation of a store shares (sensors, output rate and
duration, the finite-difference grid and its absorbing layers); `Realisation` what varies
(its events, medium parameters, ambient field, CTF role). `simulate(config, realisation,
medium_seed, site_seed)` is a pure function of them: (3, n_time, n_sensors) float32, components
up, north, east (m/s): the surface record of every event of the realisation (all injected in the
same run: the wave equation is linear), plus its ambient field (`ambient.py`), both filtered by
the sensors' site terms (`site.py`) when a site seed is given.

Time: the output's sample m is at t = m / rate. The internal step is the sample interval divided
by an integer `substeps` (the fewest keeping the Courant number ≤ 0.9 × the CFL limit, or
`time_step_s` when given: it must divide the sample interval and obey the limit, else
InvalidInput). Both use the fastest P velocity the medium's clipped perturbations allow,
vp0 (1 + 3ε), so they are known, and checked, before anything runs. The simulation starts `lead`
samples before t = 0 when an event's onset is before it, and runs `resampling_tail_samples` past
the end for the resampling filter.

Resolution: the grid must carry at least `min_points_per_wavelength` (4) nodes per S wavelength
at each event's highest frequency (where its spectrum falls to 1 %, 2.75 / D) at the slowest S
velocity the perturbations allow, vs0 (1 − 3ε); coarser is refused (InvalidInput), since
4th-order differences disperse beyond that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.synth.crustal import medium as crustal_medium
from seisctf.synth.crustal.ambient import AmbientField, ambient_record
from seisctf.synth.crustal.medium import Grid, MediumParameters
from seisctf.synth.crustal.recording import (
    SensorGrid,
    SurfaceRecorder,
    resampling_tail_samples,
)
from seisctf.synth.crustal.site import SiteParameters, apply_site, site_terms
from seisctf.synth.crustal.solver import (
    CFL_LIMIT,
    Solver,
    check_time_step,
    courant_number,
    run,
    stable_substeps,
)
from seisctf.synth.crustal.source import VELOCITY_PEAK_FACTOR, PointSource, injection


@dataclass(frozen=True)
class CrustalConfig:
    """What all realisations of a store share. Lengths in m, rate in Hz, times in s."""

    sensors: SensorGrid = field(default_factory=SensorGrid)
    sampling_rate_hz: float = 100.0
    duration_s: float = 6.0
    spacing_m: float = 200.0
    depth_m: float = 6000.0
    margin_m: float = 600.0
    pml_cells: int = 10
    pml_reflection: float = 1e-3
    time_step_s: float | None = None
    min_points_per_wavelength: float = 4.0
    site: SiteParameters = field(default_factory=SiteParameters)

    @property
    def n_time(self) -> int:
        return int(round(self.duration_s * self.sampling_rate_hz))

    def grid(self) -> Grid:
        extent_x, extent_y = self.sensors.checked().extent_m
        return crustal_medium.grid_for_extent(
            extent_x,
            extent_y,
            spacing_m=self.spacing_m,
            depth_m=self.depth_m,
            margin_m=self.margin_m,
            pml_cells=self.pml_cells,
        )

    def checked(self) -> CrustalConfig:
        rate, duration = self.sampling_rate_hz, self.duration_s
        if not (math.isfinite(rate) and rate > 0 and math.isfinite(duration)):
            raise InvalidInput("crustal config", "sampling_rate_hz must be positive")
        if self.n_time < 1:
            raise InvalidInput("duration_s", f"must give at least one sample, got {duration}")
        if self.pml_cells < 0 or not 0 < self.pml_reflection < 1:
            raise InvalidInput("pml", "pml_cells must be ≥ 0 and pml_reflection in (0, 1)")
        self.grid()
        return self

    def as_dict(self) -> dict:
        """The config as JSON-able attrs (no seeds here: they never are in a config)."""
        return {
            "sensor_grid": {
                "n_x": self.sensors.n_x,
                "n_y": self.sensors.n_y,
                "spacing_m": self.sensors.spacing_m,
            },
            "sampling_rate_hz": self.sampling_rate_hz,
            "duration_s": self.duration_s,
            "spacing_m": self.spacing_m,
            "depth_m": self.depth_m,
            "margin_m": self.margin_m,
            "pml_cells": self.pml_cells,
            "pml_reflection": self.pml_reflection,
            "time_step_s": self.time_step_s,
            "min_points_per_wavelength": self.min_points_per_wavelength,
        }

    def site_dict(self) -> dict:
        """The site terms' distribution (not their values), JSON-able."""
        return {name: getattr(self.site, name) for name in self.site.__dataclass_fields__}


@dataclass(frozen=True)
class Realisation:
    """One simulation of a store: its main event `source`, medium parameters, CTF role, the
    varied parameter's value (NaN when it belongs to no parametric group), the further events of
    its catalogue (`others`) and its ambient field (None: none)."""

    source: PointSource
    medium: MediumParameters = field(default_factory=MediumParameters)
    role: str = "forecast"
    parameter_value: float = math.nan
    others: tuple[PointSource, ...] = ()
    ambient: AmbientField | None = None

    @property
    def sources(self) -> tuple[PointSource, ...]:
        return (self.source, *self.others)


@dataclass(frozen=True)
class TimePlan:
    """Internal stepping of one simulation: step Δt (s), steps per output sample, output samples
    simulated before t = 0 (`lead`), total steps, and the Courant number."""

    time_step_s: float
    substeps: int
    lead_samples: int
    n_steps: int
    courant: float


def time_plan(config: CrustalConfig, realisation: Realisation) -> TimePlan:
    """The stepping of `realisation` (module docstring); InvalidInput for an unstable or
    non-dividing time step."""
    vp_max_m_s = realisation.medium.vp_max_m_s
    interval = 1.0 / config.sampling_rate_hz
    if config.time_step_s is None:
        substeps = stable_substeps(interval, vp_max_m_s, config.spacing_m)
    else:
        ratio = interval / config.time_step_s
        substeps = int(round(ratio))
        if substeps < 1 or abs(ratio - substeps) > 1e-6 * ratio:
            raise InvalidInput(
                "time step",
                f"{config.time_step_s} s must divide the sample interval {interval} s",
            )
    time_step = interval / substeps
    check_time_step(time_step, vp_max_m_s, config.spacing_m)
    lead_s = max(0.0, -min(source.origin_time_s for source in realisation.sources))
    lead = math.ceil(lead_s * config.sampling_rate_hz - 1e-9)
    samples = lead + config.n_time + resampling_tail_samples(substeps)
    courant = courant_number(vp_max_m_s, time_step, config.spacing_m)
    return TimePlan(time_step, substeps, lead, samples * substeps, courant)


def check_resolution(config: CrustalConfig, realisation: Realisation) -> float:
    """Nodes per S wavelength at the highest frequency of the realisation's events; InvalidInput
    below the config's minimum."""
    vs_min_m_s = realisation.medium.vs_min_m_s
    source = min(realisation.sources, key=lambda event: event.duration_s)
    f_max = source.band_limit_hz
    points = vs_min_m_s / (f_max * config.spacing_m)
    if points < config.min_points_per_wavelength:
        raise InvalidInput(
            "source",
            f"duration_s={source.duration_s} radiates up to {f_max:.2f} Hz: "
            f"{points:.1f} nodes per S wavelength (vs_min {vs_min_m_s:.0f} m/s, h "
            f"{config.spacing_m:g} m); needs ≥ {config.min_points_per_wavelength}: lengthen "
            "the duration or refine the grid",
        )
    return points


def dominant_frequency_hz(source: PointSource) -> float:
    """Peak of the far-field velocity spectrum f |P(f)| of the source's pulse: 1.10 / D."""
    return VELOCITY_PEAK_FACTOR / source.duration_s


def simulate(
    config: CrustalConfig,
    realisation: Realisation,
    medium_seed: int,
    site_seed: int | None = None,
) -> np.ndarray:
    """The surface record of one realisation, (3, n_time, n_sensors) float32: up, north, east
    ground velocity (m/s) at the sensors, sample m at t = m / rate (module docstring)."""
    config = config.checked()
    grid = config.grid()
    sources = [event.checked(grid) for event in realisation.sources]
    source = sources[0]
    material = crustal_medium.staggered(
        crustal_medium.material(grid, realisation.medium, medium_seed)
    )
    check_resolution(config, realisation)
    plan = time_plan(config, realisation)
    solver = Solver(
        grid,
        material,
        plan.time_step_s,
        source_frequency_hz=dominant_frequency_hz(source),
        pml_reflection=config.pml_reflection,
    )
    for event in sources:
        solver.add_source(injection(grid, event), event)
    recorder = SurfaceRecorder(grid, config.sensors, plan.n_steps, plan.substeps)
    start_s = -plan.lead_samples / config.sampling_rate_hz
    run(solver, start_s, plan.n_steps, [recorder])
    record = recorder.traces(plan.lead_samples, config.n_time).astype(np.float64)
    if realisation.ambient is not None:
        x, y = config.sensors.coordinates()
        time_s = np.arange(config.n_time) / config.sampling_rate_hz
        record += ambient_record(realisation.ambient, x, y, time_s)
    if site_seed is not None:
        terms = site_terms(config.sensors, site_seed, config.site)
        record = apply_site(record, terms, config.sampling_rate_hz)
    return record.astype(np.float32)


__all__ = ["CFL_LIMIT", "CrustalConfig", "Realisation", "TimePlan", "simulate", "time_plan"]
