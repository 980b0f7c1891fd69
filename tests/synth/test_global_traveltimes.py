"""The global synthetic's travel-time tables: obspy.taup's first arrivals within the documented
0.02 s (take-off angles within half a degree), and the same bytes as a table whose arrivals
compute their angles when made (obspy's way), with obspy's class restored after."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from obspy.taup import TauPyModel, seismic_phase
from obspy.taup.helper_classes import Arrival

from seisctf.synth import global_traveltimes
from seisctf.synth.global_traveltimes import TravelTimeTable, travel_time_table

DEPTHS_KM = (0.0, 12.5, 33.0, 187.3, 641.0)


def eager_table(depth_km: float) -> TravelTimeTable:
    """The table built with obspy's `Arrival` as it is (angles computed for every arrival)."""
    assert seismic_phase.Arrival is Arrival
    return global_traveltimes._table(TauPyModel("iasp91"), depth_km)


@pytest.mark.parametrize("depth_km", DEPTHS_KM)
def test_the_table_is_the_bytes_obspy_s_own_arrivals_give(depth_km: float) -> None:
    table = travel_time_table.__wrapped__(depth_km)
    assert seismic_phase.Arrival is Arrival  # restored
    expected = eager_table(depth_km)
    for field in dataclasses.fields(TravelTimeTable):
        got, want = getattr(table, field.name), getattr(expected, field.name)
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), field.name
        else:
            assert got == want


def test_times_are_taup_s_first_arrivals_within_a_fiftieth_of_a_second() -> None:
    depth_km = 33.0
    table = travel_time_table(depth_km)
    model = TauPyModel("iasp91")
    rng = np.random.default_rng(7)
    for distance in [*table.distance_deg[::40], *rng.uniform(1.0, 95.0, 12)]:
        for phase, names in (("P", ["p", "P"]), ("S", ["s", "S"])):
            arrivals = model.get_travel_times(depth_km, float(distance), names)
            time_s, takeoff_deg = table.arrival(phase, np.array([distance]))
            if not arrivals:
                assert np.isnan(time_s[0])
                continue
            first = arrivals[0]
            assert abs(time_s[0] - first.time) < 0.02, (phase, distance)
            # The table's rays are refined less (ray_param_tol) and its angles interpolated
            # linearly: within half a degree.
            assert takeoff_deg[0] == pytest.approx(first.takeoff_angle, abs=0.5), distance


def test_obspy_s_arrival_class_is_restored_when_a_table_fails(monkeypatch) -> None:
    def broken(model, depth_km):
        assert seismic_phase.Arrival is not Arrival  # the angles-when-read class, within
        raise RuntimeError("a table that fails")

    monkeypatch.setattr(global_traveltimes, "_table", broken)
    with pytest.raises(RuntimeError, match="a table that fails"):
        travel_time_table.__wrapped__(5.0)
    assert seismic_phase.Arrival is Arrival
