"""One crustal simulation end to end: grid, medium, source, time stepping, surface record.

`CrustalConfig` holds what every realisation of a store shares (sensors, output rate and
duration, the finite-difference grid and its absorbing layers); `Realisation` what varies
(source, medium parameters, CTF role). `simulate(config, realisation, medium_seed)` is a pure
function of them: (3, n_time, n_sensors) float32, components up, north, east (m/s).

Time: the output's sample m is at t = m / rate. The internal step is the sample interval divided
by an integer `substeps` (the fewest keeping the Courant number ≤ 0.9 × the CFL limit, or
`time_step_s` when given: it must divide the sample interval and obey the limit, else
InvalidInput). Both use the fastest P velocity the medium's clipped perturbations allow,
vp0 (1 + 3ε), so they are known, and checked, before anything runs. The simulation starts `lead`
samples before t = 0 when the source would otherwise start before it (origin time < 4
half-widths), so a record may begin mid-event, and runs `resampling_tail_samples` past the end
for the resampling filter.

Resolution: the grid must carry at least `min_points_per_wavelength` (4) nodes per S wavelength
at the source's highest frequency (where its spectrum falls to 1 %, 0.683 / τ) at the slowest S
velocity the perturbations allow, vs0 (1 − 3ε); coarser is refused (InvalidInput), since
4th-order differences disperse beyond that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.recipes.crustal import medium as crustal_medium
from seisctf.recipes.crustal.medium import Grid, MediumParameters
from seisctf.recipes.crustal.recording import SensorGrid, SurfaceRecorder, resampling_tail_samples
from seisctf.recipes.crustal.solver import (
    CFL_LIMIT,
    Solver,
    check_time_step,
    courant_number,
    run,
    stable_substeps,
)
from seisctf.recipes.crustal.source import STOP_HALF_WIDTHS, PointSource, injection

SOURCE_BAND_FACTOR = 0.683  # f_max = 0.683 / τ: the Gaussian moment rate's spectrum at 1 %


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


@dataclass(frozen=True)
class Realisation:
    """One simulation of a store: its source, medium parameters, CTF role and the varied
    parameter's value (NaN when it belongs to no parametric group)."""

    source: PointSource
    medium: MediumParameters = field(default_factory=MediumParameters)
    role: str = "forecast"
    parameter_value: float = math.nan


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
    source = realisation.source
    lead_s = max(0.0, STOP_HALF_WIDTHS * source.half_duration_s - source.origin_time_s)
    lead = math.ceil(lead_s * config.sampling_rate_hz - 1e-9)
    samples = lead + config.n_time + resampling_tail_samples(substeps)
    courant = courant_number(vp_max_m_s, time_step, config.spacing_m)
    return TimePlan(time_step, substeps, lead, samples * substeps, courant)


def check_resolution(config: CrustalConfig, realisation: Realisation) -> float:
    """Nodes per S wavelength at the source's highest frequency; InvalidInput below the
    config's minimum."""
    source, vs_min_m_s = realisation.source, realisation.medium.vs_min_m_s
    f_max = SOURCE_BAND_FACTOR / source.half_duration_s
    points = vs_min_m_s / (f_max * config.spacing_m)
    if points < config.min_points_per_wavelength:
        raise InvalidInput(
            "source",
            f"half_duration_s={source.half_duration_s} radiates up to {f_max:.2f} Hz: "
            f"{points:.1f} nodes per S wavelength (vs_min {vs_min_m_s:.0f} m/s, h "
            f"{config.spacing_m:g} m); needs ≥ {config.min_points_per_wavelength}: lengthen "
            "the half-duration or refine the grid",
        )
    return points


def dominant_frequency_hz(source: PointSource) -> float:
    """Peak of the far-field velocity spectrum ω exp(−(ωτ)²/4): f = √2 / (2π τ)."""
    return math.sqrt(2.0) / (2.0 * math.pi * source.half_duration_s)


def simulate(config: CrustalConfig, realisation: Realisation, medium_seed: int) -> np.ndarray:
    """The surface record of one realisation, (3, n_time, n_sensors) float32: up, north, east
    ground velocity (m/s) at the sensors, sample m at t = m / rate."""
    config = config.checked()
    grid = config.grid()
    source = realisation.source.checked(grid)
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
    solver.add_source(injection(grid, source), source)
    recorder = SurfaceRecorder(grid, config.sensors, plan.n_steps, plan.substeps)
    start_s = -plan.lead_samples / config.sampling_rate_hz
    run(solver, start_s, plan.n_steps, [recorder])
    return recorder.traces(plan.lead_samples, config.n_time)


__all__ = ["CFL_LIMIT", "CrustalConfig", "Realisation", "TimePlan", "simulate", "time_plan"]
