"""iasp91 travel times of the global synthetic's body waves, tabulated once per source depth.

First P (p or P) and first S (s or S) arrivals (Kennett & Engdahl 1991, iasp91) from obspy.taup
(Crotwell et al. 1999) every 0.5° from 0° to 100°, with their ray parameters (s/°) and take-off
angles (degrees from the downward vertical), and the first P-type arrival beyond the core shadow
(Pdiff, PKP, PKIKP, PKiKP) every 2° from 100° to 180°. Times between nodes are a cubic Hermite
interpolation whose slopes are the ray parameters dT/dΔ = p (Bullen & Bolt 1985, §4.2): within
0.02 s of TauP's refined times away from triplications (tested against TauP at random
distances); take-off angles are interpolated linearly.

`first_arrival_s` is the first P where there is one, else the first core phase (at most ~2°
beyond the shadow's edge its value is the one at 100°, a few seconds late): the time before
which a trace of the event carries nothing (the onset of the surface-wave taper,
`global_synthesis`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.interpolate import CubicHermiteSpline

BODY_STEP_DEG = 0.5
BODY_MAX_DEG = 100.0
CORE_STEP_DEG = 2.0
CORE_PHASES = ("Pdiff", "PKP", "PKIKP", "PKiKP")


@dataclass(frozen=True, eq=False)
class TravelTimeTable:
    """P and S first arrivals (s after origin, NaN where none) with ray parameters (s/°) and
    take-off angles (°) on `distance_deg`; the first P-type arrival of any kind on `core_deg`."""

    depth_km: float
    distance_deg: np.ndarray
    p_time_s: np.ndarray
    p_slowness_s_per_deg: np.ndarray
    p_takeoff_deg: np.ndarray
    s_time_s: np.ndarray
    s_slowness_s_per_deg: np.ndarray
    s_takeoff_deg: np.ndarray
    core_deg: np.ndarray
    core_time_s: np.ndarray

    def arrival(self, phase: str, distance_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(time s, take-off angle °) of the first `phase` ("P" or "S") at `distance_deg`;
        NaN where the table has none (beyond the last node with an arrival)."""
        time, slowness, takeoff = (
            (self.p_time_s, self.p_slowness_s_per_deg, self.p_takeoff_deg)
            if phase == "P"
            else (self.s_time_s, self.s_slowness_s_per_deg, self.s_takeoff_deg)
        )
        distance = np.asarray(distance_deg, dtype=np.float64)
        present = np.isfinite(time)
        last = self.distance_deg[present].max()
        spline = CubicHermiteSpline(
            self.distance_deg[present], time[present], slowness[present], extrapolate=False
        )
        inside = distance <= last
        arrival_s = np.where(inside, spline(np.minimum(distance, last)), np.nan)
        angle = np.interp(distance, self.distance_deg[present], takeoff[present])
        return arrival_s, np.where(inside, angle, np.nan)

    def first_arrival_s(self, distance_deg: np.ndarray) -> np.ndarray:
        """Earliest arrival of any P-type phase (s after origin) at `distance_deg`."""
        p_time_s, _ = self.arrival("P", distance_deg)
        core_s = np.interp(distance_deg, self.core_deg, self.core_time_s)
        return np.where(np.isfinite(p_time_s), p_time_s, core_s)


def _first(arrivals, names):
    chosen = [a for a in arrivals if a.name in names]
    return min(chosen, key=lambda a: a.time) if chosen else None


_UNREAD: Any = object()


class _AngleWhenRead:
    """An arrival's angle (degrees), computed by its phase's `method` from its ray parameter
    when first read, then kept; a value set is kept as it is."""

    def __init__(self, method: str) -> None:
        self.method = method

    def __set_name__(self, owner: type, name: str) -> None:
        self.stored = f"_{name}"

    def __get__(self, arrival: Any, owner: type | None = None) -> Any:
        if arrival is None:
            return self
        value = arrival.__dict__.get(self.stored, _UNREAD)
        if value is _UNREAD:
            value = getattr(arrival.phase, self.method)(arrival.ray_param)
            arrival.__dict__[self.stored] = value
        return value

    def __set__(self, arrival: Any, value: Any) -> None:
        arrival.__dict__[self.stored] = value


@contextmanager
def _angles_when_read() -> Iterator[None]:
    """Within, the arrivals obspy.taup makes compute their take-off and incident angles when
    first read (the same calls, so the same values), not when made. Refining one arrival makes
    about four (the bracketing rays, each shot ray), whose angles are never read: computing them
    was ~70 % of a table's time (0.17-0.31 s a depth, 0.06-0.11 s without them; 2026-12-07).
    The swap is process-wide while a table is made: an arrival another thread's TauP call makes
    then is of this class (the same values; a local class, so it does not pickle)."""
    from obspy.taup import seismic_phase
    from obspy.taup.helper_classes import Arrival

    class ArrivalAnglesWhenRead(Arrival):
        takeoff_angle = _AngleWhenRead("calc_takeoff_angle")
        incident_angle = _AngleWhenRead("calc_incident_angle")

        def __init__(self, *fields: Any) -> None:  # obspy makes them with positional fields
            super().__init__(*fields, takeoff_angle=_UNREAD, incident_angle=_UNREAD)

    made_by_obspy = seismic_phase.Arrival
    seismic_phase.Arrival = ArrivalAnglesWhenRead
    try:
        yield
    finally:
        seismic_phase.Arrival = made_by_obspy


def _arrivals_at(model, depth_km: float, phases: list[str]):
    """`arrivals(distance_deg)`: what `model.get_travel_times(depth_km, distance_deg, phases,
    ray_param_tol=1e9)` returns, with the model split at the source once and the phases set up
    once for every distance (get_travel_times deep-copies the model for each distance, most of
    its time)."""
    from obspy.taup.taup_time import TauPTime

    taup = TauPTime(model.model, phases, depth_km, 0.0, 0.0, ray_param_tol=1e9)
    taup.depth_correct(depth_km, 0.0)
    taup.recalc_phases()

    def arrivals(distance_deg: float) -> list:
        taup.calc_time(float(distance_deg))
        return taup.arrivals

    return arrivals


@lru_cache(maxsize=1)
def _iasp91() -> Any:
    """obspy's iasp91 model, loaded once (35 ms a load); each table corrects it for its depth
    into a model of its own."""
    from obspy.taup import TauPyModel

    return TauPyModel("iasp91")


@lru_cache(maxsize=64)
def travel_time_table(depth_km: float) -> TravelTimeTable:
    """The table for a source at `depth_km` (cached and shared: its arrays are read-only)."""
    with _angles_when_read():
        return _table(_iasp91(), float(depth_km))


def _table(model, depth_km: float) -> TravelTimeTable:
    body = _arrivals_at(model, depth_km, ["p", "P", "s", "S"])
    core = _arrivals_at(model, depth_km, [*CORE_PHASES, "P"])
    distance_deg = np.arange(0.0, BODY_MAX_DEG + BODY_STEP_DEG / 2, BODY_STEP_DEG)
    columns = {name: np.full(distance_deg.shape, np.nan) for name in range(6)}
    for i, distance in enumerate(distance_deg):
        arrivals = body(distance)
        for offset, names in ((0, ("p", "P")), (3, ("s", "S"))):
            first = _first(arrivals, names)
            if first is not None:
                columns[offset][i] = first.time
                columns[offset + 1][i] = first.ray_param_sec_degree
                columns[offset + 2][i] = first.takeoff_angle
    core_deg = np.arange(BODY_MAX_DEG, 180.0 + CORE_STEP_DEG / 2, CORE_STEP_DEG)
    core_time_s = np.empty(core_deg.shape)
    for i, distance in enumerate(core_deg):
        core_time_s[i] = min(a.time for a in core(distance))
    arrays = [distance_deg, *columns.values(), core_deg, core_time_s]
    for array in arrays:
        array.flags.writeable = False
    return TravelTimeTable(depth_km, *arrays)
