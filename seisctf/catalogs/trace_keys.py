"""What the contract calls a trace's station, event and kind of window, and great-circle
distances between the stations and sources of a trace table (`trace_table.read_trace_table`).

- station: `NET.STA` (network and station code; the location code is not part of it);
- event: the `source_id`, else the trace alone (a window without a source);
- earthquake window: one with a P or S arrival sample; any other is a noise window;
- distances: great-circle, in km on a sphere of `EARTH_RADIUS_KM`, between (latitude,
  longitude) points in degrees.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from seisctf import conventions as cv

EARTH_RADIUS_KM = 6371.0088  # IUGG mean radius


def station_keys(table: pd.DataFrame) -> pd.Series:
    """`NET.STA` per trace (the contract's station), as Python str objects (object dtype:
    mapped, hashed and sorted element by element without a conversion each time)."""
    keys = table[cv.NETWORK_CODE].astype(str) + "." + table[cv.STATION_CODE].astype(str)
    return keys.astype(object)


def has_arrival(table: pd.DataFrame) -> np.ndarray:
    """Earthquake windows: a P or S arrival sample (the contract's rule); the rest is noise."""
    arrival = np.zeros(len(table), dtype=bool)
    for column in (cv.P_ARRIVAL_SAMPLE, cv.S_ARRIVAL_SAMPLE):
        if column in table:
            arrival |= np.isfinite(pd.to_numeric(table[column], errors="coerce").to_numpy())
    return arrival


def event_keys(table: pd.DataFrame) -> pd.Series:
    """The event of each trace: `event:<source_id>`, else `trace:<trace_name>`."""
    names = "trace:" + table[cv.TRACE_NAME].astype(str)
    if cv.SOURCE_ID not in table:
        return names
    source = table[cv.SOURCE_ID].astype(str)
    empty = source.isin(["", "nan", "None"])
    return ("event:" + source).where(~empty, names).astype(object)  # as station_keys


def haversine_tree(latitude: np.ndarray, longitude: np.ndarray):
    """A scikit-learn BallTree of the points (degrees) under the haversine metric: its
    distances are in radians of arc (times EARTH_RADIUS_KM for km)."""
    from sklearn.neighbors import BallTree

    return BallTree(np.radians(np.column_stack([latitude, longitude])), metric="haversine")


def min_distance_km(a: np.ndarray, b: np.ndarray) -> float | None:
    """Smallest great-circle distance (km) between points a (n, 2) and b (m, 2), lat/lon
    degrees; None if either is empty."""
    if len(a) == 0 or len(b) == 0:
        return None
    if _share_a_point(a, b):
        return 0.0  # what the tree gives for a point in both: haversine(p, p) is exactly 0
    if len(a) > len(b):  # the haversine formula is symmetric: query with the smaller set
        a, b = b, a
    distance, _ = haversine_tree(b[:, 0], b[:, 1]).query(np.radians(a), k=1)
    return float(distance.min() * EARTH_RADIUS_KM)


def _share_a_point(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether some row of a (n, 2) equals some row of b (m, 2)."""
    left = pd.MultiIndex.from_arrays([a[:, 0], a[:, 1]])
    right = pd.MultiIndex.from_arrays([b[:, 0], b[:, 1]])
    return bool(left.isin(right).any())
