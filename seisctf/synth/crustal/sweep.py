"""The realisations of a crustal store, and the store: one Dask task per simulation.

`default_sweep(seed, config, parametric=P, initial_conditions=Q)` draws, in this order from
`numpy.random.default_rng(seed)` (the seed derives from the organiser's secret): the medium's
perturbation seed (shared by every realisation: one crust), the site terms' seed (shared: the
sensors stay where they are), then per catalogue a seed for its own generator, which draws the
catalogue (`events.py`: a main event with sub-events, aftershocks and background events at secret
times) and then, per realisation using it, an ambient-field seed (`ambient.py`). Catalogues: five
independent ones (roles `forecast` … `few_noisy`), one shared by the parametric group
(`param_train` at vp = 4600, 5000, 5400 m/s, `param_interp` 5200, `param_extrap` 5800), one
shared by the sweep group (P values of vp evenly spaced over 4500–5500 m/s, `sweep_train`, and one
more drawn uniformly inside that range, `sweep_test`), and Q + 1 for the initial-condition group
(`initial_train` × Q, `initial_test`), all in the default medium (vp 5000 m/s) unless their group
varies it. Every realisation has its own ambient field (vertical RMS `ambient_rms_m_s`).

The events' pulses are the shortest the grid carries in the slowest medium of the sweep
(`min_event_duration_s`), 5 % longer for margin.

`synthesize_crustal(config, realisations, medium_seed, site_seed)` is the lazy store: variables
`u` (up), `u_north`, `u_east`, each `(realisation, time, sensor)` float32 m/s, chunks (1,
`time_space_chunks`), computed by one `simulate` task per realisation; per-sensor `x`, `y` (m;
row-major sensor order), per-realisation main-event and medium parameters and the number of
further events. No seed is recorded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import dask
import dask.array as da
import numpy as np
import xarray as xr

from seisctf import __version__
from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.synth.crustal.ambient import AmbientField
from seisctf.synth.crustal.events import CatalogueBox, main_event, other_events
from seisctf.synth.crustal.medium import MediumParameters
from seisctf.synth.crustal.recording import COMPONENTS, SensorGrid
from seisctf.synth.crustal.simulation import (
    CrustalConfig,
    Realisation,
    check_resolution,
    simulate,
    time_plan,
)
from seisctf.synth.crustal.source import SOURCE_BAND_FACTOR

DATASET = "crustal"
START_TIME = "2000-01-01T00:00:00Z"
PARAMETER_NAME = "vp_m_s"
PARAM_TRAIN_VP = (4600.0, 5000.0, 5400.0)
PARAM_INTERP_VP = 5200.0
PARAM_EXTRAP_VP = 5800.0
SWEEP_VP_RANGE = (4500.0, 5500.0)
MEAN_OTHER_EVENTS = 6.0
AMBIENT_RMS_M_S = 1.0e-5
VARIABLES = {"up": cv.WAVEFIELD_VAR, "north": "u_north", "east": "u_east"}
SENSOR_ORDER = (
    "row-major over the surface grid: sensor = row × n_y + column, row r at x = r × spacing "
    "(north), column c at y = c × spacing (east)"
)
FRAME = "x north, y east, z down (Aki & Richards); sensor grid from x = y = 0 on the surface"
SCHEME = (
    "3D elastic velocity-stress, staggered grid, 2nd order in time (leapfrog), 4th order in "
    "space; free surface by stress imaging with mirrored velocities (energy-conserving); "
    "C-PML on the sides and bottom; causal multiple-pulse double couples; ambient Rayleigh "
    "waves; per-sensor site resonances"
)


def min_event_duration_s(config: CrustalConfig, medium: MediumParameters) -> float:
    """The shortest pulse duration (s) the grid resolves in the slowest medium of the sweep
    (vp 4500 m/s or the default's, if slower), plus 5 %."""
    slowest = replace(medium, vp_m_s=min(medium.vp_m_s, SWEEP_VP_RANGE[0], PARAM_TRAIN_VP[0]))
    band = config.min_points_per_wavelength * config.spacing_m / slowest.vs_min_m_s
    return 1.05 * SOURCE_BAND_FACTOR * band


def catalogue_box(
    config: CrustalConfig, medium: MediumParameters, mean_other_events: float
) -> CatalogueBox:
    """Where the events of a store may be: over the sensor grid, 1.5–5 km deep (at most the
    grid's core)."""
    extent_x, extent_y = config.sensors.extent_m
    deepest = min(5000.0, config.grid().core_bounds_m()["depth"][1] - config.spacing_m)
    shallowest = min(1500.0, deepest)
    return CatalogueBox(
        x_m=(0.0, extent_x),
        y_m=(0.0, extent_y),
        depth_m=(shallowest, deepest),
        duration_s=config.duration_s,
        min_duration_s=min_event_duration_s(config, medium),
        mean_other_events=mean_other_events,
    )


def default_sweep(
    seed: int,
    config: CrustalConfig | None = None,
    *,
    parametric: int = 4,
    initial_conditions: int = 4,
    medium: MediumParameters | None = None,
    mean_other_events: float = MEAN_OTHER_EVENTS,
    ambient_rms_m_s: float = AMBIENT_RMS_M_S,
) -> tuple[list[Realisation], int, int]:
    """(realisations, medium seed, site seed) of the default store (module docstring).
    `parametric` ≥ 2 and `initial_conditions` ≥ 1 size the extended groups; 0 for both leaves
    them out."""
    config = config or CrustalConfig()
    medium = medium or MediumParameters()
    if (parametric, initial_conditions) != (0, 0) and (parametric < 2 or initial_conditions < 1):
        raise InvalidInput(
            "sweep",
            f"needs parametric ≥ 2 and initial_conditions ≥ 1 (or both 0), got {parametric} "
            f"and {initial_conditions}",
        )
    if not (mean_other_events >= 0 and ambient_rms_m_s >= 0):
        raise InvalidInput("sweep", "the mean number of events and the ambient RMS must be ≥ 0")
    rng = np.random.default_rng(seed)
    medium_seed = int(rng.integers(0, 2**63 - 1))
    site_seed = int(rng.integers(0, 2**63 - 1))
    box = catalogue_box(config, medium, mean_other_events)

    def group(members: list[tuple[str, float]]) -> list[Realisation]:
        """Realisations sharing one catalogue: (role, vp or NaN for the default medium)."""
        own = np.random.default_rng(int(rng.integers(0, 2**63 - 1)))
        main, magnitude = main_event(own, box)
        others = other_events(own, box, main, magnitude)
        out = []
        for role, vp in members:
            at = medium if np.isnan(vp) else replace(medium, vp_m_s=float(vp))
            ambient = AmbientField(int(own.integers(0, 2**63 - 1)), ambient_rms_m_s, at.vs_m_s)
            out.append(Realisation(main, at, role, vp, others, ambient))
        return out

    nan = math.nan
    realisations = [r for role in cv.ROLES[:5] for r in group([(role, nan)])]
    varied = [("param_train", vp) for vp in PARAM_TRAIN_VP]
    varied += [("param_interp", PARAM_INTERP_VP), ("param_extrap", PARAM_EXTRAP_VP)]
    realisations += group(varied)
    if parametric:
        values = np.linspace(*SWEEP_VP_RANGE, parametric)
        test_value = float(rng.uniform(*SWEEP_VP_RANGE))
        sweep = [("sweep_train", float(v)) for v in values] + [("sweep_test", test_value)]
        realisations += group(sweep)
        roles = ["initial_train"] * initial_conditions + ["initial_test"]
        realisations += [r for role in roles for r in group([(role, nan)])]
    return realisations, medium_seed, site_seed


def _coordinates(realisations: Sequence[Realisation]) -> dict[str, tuple]:
    """Per-realisation coordinates: role, the varied parameter, source and medium parameters."""
    columns = {
        cv.PARAMETER_VALUE: [r.parameter_value for r in realisations],
        "source_x_m": [r.source.x_m for r in realisations],
        "source_y_m": [r.source.y_m for r in realisations],
        "source_depth_m": [r.source.depth_m for r in realisations],
        "strike_deg": [r.source.strike_deg for r in realisations],
        "dip_deg": [r.source.dip_deg for r in realisations],
        "rake_deg": [r.source.rake_deg for r in realisations],
        "origin_time_s": [r.source.origin_time_s for r in realisations],
        "moment_nm": [r.source.moment_nm for r in realisations],
        "duration_s": [r.source.duration_s for r in realisations],
        "n_other_events": [len(r.others) for r in realisations],
        "vp_m_s": [r.medium.vp_m_s for r in realisations],
        "vs_m_s": [r.medium.vs_m_s for r in realisations],
        "density_kg_m3": [r.medium.density_kg_m3 for r in realisations],
        "perturbation_std": [r.medium.perturbation_std for r in realisations],
        "correlation_length_m": [r.medium.correlation_length_m for r in realisations],
        "hurst": [r.medium.hurst for r in realisations],
    }
    coords = {
        name: (cv.REALISATION, np.asarray(values, dtype=np.float64))
        for name, values in columns.items()
    }
    coords[cv.ROLE] = (cv.REALISATION, np.array([r.role for r in realisations], dtype=object))
    coords["medium_kind"] = (
        cv.REALISATION,
        np.array([r.medium.kind for r in realisations], dtype=object),
    )
    return coords


def check_realisations(config: CrustalConfig, realisations: Sequence[Realisation]) -> None:
    """Refuse unknown roles, bad media and sources outside the grid before any work."""
    if not realisations:
        raise InvalidInput("sweep", "needs at least one realisation")
    grid = config.checked().grid()
    known = cv.ROLES + cv.EXTENDED_ROLES
    for index, realisation in enumerate(realisations):
        what = f"realisation {index} ({realisation.role})"
        if realisation.role not in known:
            raise InvalidInput(what, f"role must be one of {known}")
        realisation.medium.checked(what)
        for event in realisation.sources:
            event.checked(grid, what)
        check_resolution(config, realisation)
        time_plan(config, realisation)


def synthesize_crustal(
    config: CrustalConfig,
    realisations: Sequence[Realisation],
    medium_seed: int,
    site_seed: int | None = None,
) -> xr.Dataset:
    """The lazy crustal store (module docstring): one `simulate` task per realisation."""
    check_realisations(config, realisations)
    n_time, n_sensors = config.n_time, config.sensors.n_sensors
    records = [
        da.from_delayed(
            dask.delayed(simulate, pure=True)(config, realisation, medium_seed, site_seed),
            shape=(len(COMPONENTS), n_time, n_sensors),
            dtype=np.float32,
        )
        for realisation in realisations
    ]
    stacked = da.stack(records, axis=0)
    chunks = (1, *cv.time_space_chunks(n_time, n_sensors))
    dims = (cv.REALISATION, cv.TIME, cv.SENSOR)
    variables = {
        VARIABLES[component]: xr.Variable(
            dims,
            stacked[:, index].rechunk(chunks),
            attrs={"long_name": f"{component} ground velocity", "units": "m/s"},
        )
        for index, component in enumerate(COMPONENTS)
    }
    x, y = config.sensors.coordinates()
    coords = _coordinates(realisations)
    coords[cv.TIME] = (cv.TIME, np.arange(n_time) / float(config.sampling_rate_hz))
    coords[cv.X] = (cv.SENSOR, x)
    coords[cv.Y] = (cv.SENSOR, y)
    grid = config.grid()
    attrs = {
        cv.ATTR_DATASET: DATASET,
        cv.ATTR_START_TIME: START_TIME,
        cv.ATTR_SAMPLING_RATE: float(config.sampling_rate_hz),
        cv.ATTR_SENSOR_ORDER: SENSOR_ORDER,
        cv.ATTR_PARAMETER_NAME: PARAMETER_NAME,
        cv.ATTR_SENSOR_GRID: config.as_dict()["sensor_grid"],
        "units": "m/s",
        "quantity": "ground velocity",
        "components": {name: component for component, name in VARIABLES.items()},
        "frame": FRAME,
        "crustal": {
            **config.as_dict(),
            "grid": grid.as_dict(),
            "scheme": SCHEME,
            "site_distribution": config.site_dict(),
        },
        "generator": f"seisctf {__version__} recipes.crustal: {SCHEME}",
    }
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def isqrt_sensors(n_sensors: int) -> int:
    """The side of a square sensor grid of `n_sensors` (InvalidInput unless a square)."""
    side = math.isqrt(max(n_sensors, 0))
    if side < 1 or side * side != n_sensors:
        raise InvalidInput(
            "sensors", f"the crustal grid is square: give a square number, got {n_sensors}"
        )
    return side


def crustal_store(
    *,
    seed: int,
    grid: int = 94,
    sensor_spacing_m: float = 100.0,
    sampling_rate_hz: float = 100.0,
    duration_s: float = 6.0,
    spacing_m: float = 200.0,
    depth_m: float = 6000.0,
    time_step_s: float | None = None,
    parametric: int = 4,
    initial_conditions: int = 4,
    perturbation_std: float = 0.05,
    correlation_length_m: float = 500.0,
    medium_kind: str = "von_karman",
    mean_other_events: float = MEAN_OTHER_EVENTS,
    ambient_rms_m_s: float = AMBIENT_RMS_M_S,
) -> xr.Dataset:
    """The default sweep's lazy store (`seisctf synth crustal`) at the given sizes."""
    config = CrustalConfig(
        sensors=SensorGrid(grid, grid, sensor_spacing_m),
        sampling_rate_hz=sampling_rate_hz,
        duration_s=duration_s,
        spacing_m=spacing_m,
        depth_m=depth_m,
        time_step_s=time_step_s,
    ).checked()
    medium = MediumParameters(
        perturbation_std=perturbation_std,
        correlation_length_m=correlation_length_m,
        kind=medium_kind,
    ).checked()
    realisations, medium_seed, site_seed = default_sweep(
        seed,
        config,
        parametric=parametric,
        initial_conditions=initial_conditions,
        medium=medium,
        mean_other_events=mean_other_events,
        ambient_rms_m_s=ambient_rms_m_s,
    )
    return synthesize_crustal(config, realisations, medium_seed, site_seed)
