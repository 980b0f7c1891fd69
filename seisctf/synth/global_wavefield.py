"""Offline synthetic global wavefield: vertical ground velocity on a Fibonacci sphere.

Ten realisations (one per CTF role), each the record of a main earthquake and, unless switched
off, its aftershocks, background earthquakes elsewhere and the ambient microseism field, through
a laterally heterogeneous Earth to stations with their own sites and seismometers:

- `global_events`: double-couple moment tensors, causal moment-rate functions, Gutenberg–Richter
  catalogues (aftershocks following Omori's law, background seismicity);
- `global_earth`: random spherical-harmonic phase-velocity and slowness maps integrated along
  each great-circle orbit, station site amplifications and seismometer responses;
- `global_traveltimes`: iasp91 body-wave travel times from obspy.taup;
- `global_synthesis`: the traces (travelling Rayleigh-wave orbits R1, R2, … by a Fourier sum,
  causal P and S pulses at the TauP times, microseisms), with their equations and sources.

Everything is causal: nothing reaches a sensor before an event's first arrival (tested against
an independent obspy TauP computation), and P and S start at their TauP times in the 1D Earth.

Hidden part: the main events' magnitudes and moment tensors (`default_sources`), the maps, the
stations, the catalogues and the microseism field are drawn from the seed (derived from the
organiser's secret; never recorded); about 10^3 numbers per realisation and 10^4 for the Earth
and stations. The store records each realisation's main epicentre, depth, origin time and
parameter value only (the store is private; the public bundle carries the parametric depths).

Sensors: `fibonacci_sensors`; realisations and their parameters: `GlobalSource`,
`default_sources`, `GlobalPhysics`. The unit is m/s on an arbitrary scale (a Mw 7.5 event's
R1 at 90° peaks near 1), the same for all realisations.

Bitwise reproducibility for any chunking: each value depends only on its time, its sensor and the
realisation (`global_synthesis`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import __version__
from seisctf.conventions import (
    ATTR_DATASET,
    ATTR_PARAMETER_NAME,
    ATTR_SAMPLING_RATE,
    ATTR_SENSOR_ORDER,
    ATTR_START_TIME,
    LATITUDE,
    LONGITUDE,
    REALISATION,
    ROLE,
    ROLES,
    SENSOR,
    TIME,
    WAVEFIELD_VAR,
    time_space_chunks,
)
from seisctf.errors import InvalidInput
from seisctf.synth.global_earth import Earth, random_earth
from seisctf.synth.global_events import (
    MAIN_MAGNITUDE_RANGE,
    REFERENCE_MAGNITUDE,
    Event,
    catalogue,
    random_tensor,
)
from seisctf.synth.global_synthesis import (
    AMBIENT_BAND_HZ,
    AMBIENT_RMS,
    Ambient,
    ambient_field,
    event_field,
)
from seisctf.synth.global_traveltimes import travel_time_table

GOLDEN_ANGLE_DEG = 180.0 * (3.0 - math.sqrt(5.0))
START_TIME = "2000-01-01T00:00:00Z"
PARAMETER_NAME = "source_depth_km"
SENSOR_ORDER = (
    "Fibonacci lattice, north to south: sensor i of N at latitude asin(1 - (2i+1)/N) and "
    f"longitude (i * {GOLDEN_ANGLE_DEG:.10f}) mod 360 mapped to (-180, 180] degrees"
)
VERTICAL_DIP_SLIP = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0))
STORMS = 3


@dataclass(frozen=True)
class GlobalSource:
    """A realisation's main event: epicentre (degrees), depth (km), origin time (s after
    start_time), moment magnitude, unit moment tensor (rows; x north, y east, z down), its CTF
    role and the varied parameter's value (NaN when not parametric)."""

    latitude_deg: float
    longitude_deg: float
    depth_km: float
    origin_time_s: float
    magnitude: float = REFERENCE_MAGNITUDE
    tensor: tuple = VERTICAL_DIP_SLIP
    role: str = "forecast"
    parameter_value: float = math.nan

    @property
    def event(self) -> Event:
        return Event(
            self.latitude_deg,
            self.longitude_deg,
            self.depth_km,
            self.origin_time_s,
            self.magnitude,
            self.tensor,
        )


@dataclass(frozen=True)
class GlobalPhysics:
    """What the realisations contain: `heterogeneity` scales every lateral perturbation and
    station delay (0: the 1D Earth), `sites` gives stations their amplification and seismometer
    (False: flat unit response), `other_events` adds aftershocks and background events,
    `ambient_rms` is the microseism level (0: none)."""

    heterogeneity: float = 1.0
    sites: bool = True
    other_events: bool = True
    ambient_rms: float = AMBIENT_RMS


@dataclass(frozen=True, eq=False)
class Realisation:
    """Everything one realisation's blocks need: its events (main first) and microseisms."""

    events: tuple[Event, ...]
    ambient: Ambient
    tables: dict = field(default_factory=dict)


def realisation(
    source: GlobalSource, seed: int, index: int, duration_s: float, physics: GlobalPhysics
) -> Realisation:
    """The events and microseism field of realisation `index` (drawn from the seed)."""
    main = source.event
    events = catalogue(main, seed, index, duration_s) if physics.other_events else (main,)
    rng = np.random.default_rng([int(seed), 3, int(index)])
    storm_lat = tuple(float(v) for v in np.degrees(np.arcsin(rng.uniform(-1, 1, STORMS))))
    storm_lon = tuple(float(v) for v in rng.uniform(-180.0, 180.0, STORMS))
    key = int(rng.integers(0, 2**63))
    ambient = Ambient(key, storm_lat, storm_lon, float(physics.ambient_rms))
    tables = {depth: travel_time_table(depth) for depth in {e.depth_km for e in events}}
    return Realisation(events, ambient, tables)


def wavefield_block(
    times_s: np.ndarray,
    sensor_index: np.ndarray,
    latitude_deg: np.ndarray,
    longitude_deg: np.ndarray,
    realisation: Realisation,
    earth: Earth,
    record_end_s: float,
    sampling_rate_hz: float = 1.0,
) -> np.ndarray:
    """Vertical velocity (time, sensor) float32 at `times_s` (s after start_time) and sensors
    (their lattice indices and positions in degrees). Each element depends only on its own time,
    sensor and the realisation: any block of a larger grid is bitwise equal to the same slice of
    the whole. The microseisms need `times_s` on the record's sample grid (consecutive)."""
    times_s = np.asarray(times_s, dtype=np.float64)
    lat = np.asarray(latitude_deg, dtype=np.float64)
    lon = np.asarray(longitude_deg, dtype=np.float64)
    stations = earth.station_terms(np.asarray(sensor_index), lat, lon)
    total = np.zeros((times_s.size, lat.size))
    for event in realisation.events:
        table = realisation.tables.get(event.depth_km) or travel_time_table(event.depth_km)
        total += event_field(times_s, lat, lon, stations, event, table, earth, record_end_s)
    if realisation.ambient.rms > 0:
        samples = np.rint(times_s * sampling_rate_hz).astype(np.int64)
        total += ambient_field(
            samples, sensor_index, lat, lon, realisation.ambient, sampling_rate_hz
        )
    return total.astype(np.float32)


def fibonacci_sensors(n_sensors: int) -> tuple[np.ndarray, np.ndarray]:
    """Latitudes and longitudes (degrees, float64, shape (n_sensors,)) of the Fibonacci lattice,
    north to south; longitudes in (−180, 180]."""
    if int(n_sensors) != n_sensors or n_sensors < 1:
        raise InvalidInput("n_sensors", f"must be a positive integer, got {n_sensors!r}")
    index = np.arange(int(n_sensors), dtype=np.float64)
    latitude = np.degrees(np.arcsin(1.0 - (2.0 * index + 1.0) / n_sensors))
    longitude = np.mod(index * GOLDEN_ANGLE_DEG, 360.0)
    longitude[longitude > 180.0] -= 360.0
    return latitude, longitude


def default_sources(
    seed: int,
    parameter_values: tuple[float, ...] = (10.0, 30.0, 50.0),
    interpolation: float = 40.0,
    extrapolation: float = 70.0,
) -> list[GlobalSource]:
    """The default realisations' main events: five independent random events (roles forecast …
    few_noisy), then one shared random epicentre, origin time, magnitude and moment tensor at the
    source depths (km) `parameter_values` (param_train), `interpolation` (param_interp) and
    `extrapolation` (param_extrap).

    Epicentres are uniform on the sphere, depths uniform in 10–100 km, origin times in 0–200 s,
    magnitudes uniform in 7.0–8.0, random double couples, all from numpy default_rng(seed)."""
    rng = np.random.default_rng(seed)

    def draw() -> dict:
        latitude = float(np.degrees(np.arcsin(rng.uniform(-1.0, 1.0))))
        longitude = float(rng.uniform(-180, 180))
        depth_km, origin_s = float(rng.uniform(10.0, 100.0)), float(rng.uniform(0.0, 200.0))
        magnitude = float(rng.uniform(*MAIN_MAGNITUDE_RANGE))
        return {
            "latitude_deg": latitude,
            "longitude_deg": longitude,
            "depth_km": depth_km,
            "origin_time_s": origin_s,
            "magnitude": magnitude,
            "tensor": random_tensor(rng),
        }

    sources = [GlobalSource(**draw(), role=role) for role in ROLES[:5]]
    shared = draw()
    varied = [("param_train", float(v)) for v in parameter_values]
    varied += [("param_interp", float(interpolation)), ("param_extrap", float(extrapolation))]
    for role, depth_km in varied:
        shared["depth_km"] = depth_km
        sources.append(GlobalSource(**shared, role=role, parameter_value=depth_km))
    return sources


def _check_source(index: int, source: GlobalSource) -> None:
    what = f"source {index} ({source.role})"
    if source.role not in ROLES:
        raise InvalidInput(what, f"role must be one of {ROLES}")
    if not (-90.0 <= source.latitude_deg <= 90.0 and math.isfinite(source.longitude_deg)):
        raise InvalidInput(what, "needs latitude in [-90, 90] and a finite longitude (degrees)")
    if not 0.0 <= source.depth_km < 700.0:
        raise InvalidInput(what, f"depth must be in [0, 700) km, got {source.depth_km}")
    if not (math.isfinite(source.origin_time_s) and math.isfinite(source.magnitude)):
        raise InvalidInput(what, "origin_time_s and magnitude must be finite")
    tensor = np.asarray(source.tensor, dtype=np.float64)
    if tensor.shape != (3, 3) or not np.allclose(tensor, tensor.T) or not tensor.any():
        raise InvalidInput(what, "tensor must be a non-zero symmetric 3x3 matrix (rows)")


def _realisation_block(time_index, sensor_index, lat, lon, *, sampling_rate_hz, **kwargs):
    return wavefield_block(
        time_index / sampling_rate_hz,
        sensor_index,
        lat,
        lon,
        sampling_rate_hz=sampling_rate_hz,
        **kwargs,
    )


def synthesize_global(
    n_sensors: int = 2048,
    duration_s: float = 3000.0,
    sampling_rate_hz: float = 1.0,
    seed: int = 0,
    sources: list[GlobalSource] | None = None,
    physics: GlobalPhysics = GlobalPhysics(),
    time_chunk: int | None = None,
    sensor_chunk: int | None = None,
) -> xr.Dataset:
    """Lazy global wavefield store: `u(realisation, time, sensor)` float32 (Dask, one realisation
    per chunk, time × sensor chunks from `conventions.time_space_chunks` unless given), with
    per-sensor `latitude`, `longitude` and each realisation's main epicentre, depth, origin time
    and parameter value. `sources` defaults to `default_sources(seed)`; the seed also draws the
    Earth, stations, catalogues and microseisms (`GlobalPhysics` says which are present) and is
    not recorded. The values are bitwise the same for any `time_chunk` / `sensor_chunk`."""
    if not (math.isfinite(sampling_rate_hz) and sampling_rate_hz > 0):
        raise InvalidInput("sampling_rate_hz", f"must be positive, got {sampling_rate_hz}")
    if not (math.isfinite(duration_s) and duration_s * sampling_rate_hz >= 0.5):
        raise InvalidInput("duration_s", f"must give at least one sample, got {duration_s}")
    if not (math.isfinite(physics.heterogeneity) and physics.heterogeneity >= 0):
        raise InvalidInput("physics.heterogeneity", "must be a finite number >= 0")
    if not (math.isfinite(physics.ambient_rms) and physics.ambient_rms >= 0):
        raise InvalidInput("physics.ambient_rms", "must be a finite number >= 0")
    if physics.ambient_rms > 0 and sampling_rate_hz <= 2.0 * AMBIENT_BAND_HZ[1]:
        raise InvalidInput(
            "sampling_rate_hz",
            f"the microseisms ({AMBIENT_BAND_HZ[0]}-{AMBIENT_BAND_HZ[1]} Hz) need a rate above "
            f"{2.0 * AMBIENT_BAND_HZ[1]} Hz, got {sampling_rate_hz}",
        )
    n_time = int(round(duration_s * sampling_rate_hz))
    latitude, longitude = fibonacci_sensors(n_sensors)
    sources = default_sources(seed) if sources is None else list(sources)
    if not sources:
        raise InvalidInput("sources", "needs at least one source")
    for index, source in enumerate(sources):
        _check_source(index, source)
    earth = random_earth(seed, physics.heterogeneity, physics.sites)
    record_end_s = n_time / float(sampling_rate_hz)
    default_time_chunk, default_sensor_chunk = time_space_chunks(n_time, n_sensors)
    time_index = da.arange(n_time, chunks=time_chunk or default_time_chunk, dtype=np.int64)
    sensor_chunks = sensor_chunk or default_sensor_chunk
    sensor_index = da.arange(n_sensors, chunks=sensor_chunks, dtype=np.int64)
    latitude_dask = da.from_array(latitude, chunks=sensor_chunks)
    longitude_dask = da.from_array(longitude, chunks=sensor_chunks)
    realisations = [
        da.blockwise(
            _realisation_block,
            "ts",
            time_index,
            "t",
            sensor_index,
            "s",
            latitude_dask,
            "s",
            longitude_dask,
            "s",
            dtype=np.float32,
            sampling_rate_hz=float(sampling_rate_hz),
            realisation=realisation(source, seed, index, record_end_s, physics),
            earth=earth,
            record_end_s=record_end_s,
        )
        for index, source in enumerate(sources)
    ]
    per_realisation = {
        "source_latitude": [s.latitude_deg for s in sources],
        "source_longitude": [s.longitude_deg for s in sources],
        "source_depth_km": [s.depth_km for s in sources],
        "origin_time_s": [s.origin_time_s for s in sources],
        "parameter_value": [s.parameter_value for s in sources],
    }
    coords = {
        name: (REALISATION, np.asarray(v, dtype=np.float64)) for name, v in per_realisation.items()
    }
    coords[ROLE] = (REALISATION, np.array([s.role for s in sources], dtype=object))  # zarr "string"
    coords[TIME] = (TIME, np.arange(n_time) / float(sampling_rate_hz))
    coords[LATITUDE] = (SENSOR, latitude)
    coords[LONGITUDE] = (SENSOR, longitude)
    attrs = {
        ATTR_DATASET: "global",
        ATTR_START_TIME: START_TIME,
        ATTR_SAMPLING_RATE: float(sampling_rate_hz),
        ATTR_SENSOR_ORDER: SENSOR_ORDER,
        ATTR_PARAMETER_NAME: PARAMETER_NAME,
        "units": "m/s, arbitrary scale (a Mw 7.5 event's R1 at 90 degrees peaks near 1)",
        "quantity": "vertical ground velocity",
        "generator": (
            f"seisctf {__version__} recipes.global_wavefield: Rayleigh-wave orbits and iasp91 "
            "P and S pulses from main events, aftershocks and background events through a "
            "laterally heterogeneous Earth to stations with sites and seismometers, plus "
            "microseisms"
        ),
    }
    u = xr.Variable(
        (REALISATION, TIME, SENSOR),
        da.stack(realisations, axis=0),
        attrs={"long_name": "vertical ground velocity"},
    )
    return xr.Dataset({WAVEFIELD_VAR: u}, coords=coords, attrs=attrs)
