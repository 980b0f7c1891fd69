"""The one-dimensional arrays of a continuous waveform store: `station` ids with their SEED codes
(`seed_ids.CODE_ARRAYS`: `network`, `station_code`, `location`), and the other coordinates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.catalogs.seed_ids import CODE_ARRAYS, split_station


def write_array(group: Any, name: str, values: np.ndarray, dim: str) -> None:
    """A 1-D array `name` along `dim` in the zarr `group` (replacing one of that name); text
    as variable-length UTF-8."""
    dtype = str if values.dtype == object else values.dtype
    array = group.create_array(
        name, shape=values.shape, dtype=dtype, dimension_names=(dim,), overwrite=True
    )
    array[:] = values


def write_station_ids(group: Any, stations: Sequence[str], coordinates: dict[str, str]) -> None:
    """`station` (the ids) and its SEED codes, and `coordinates` (CF's attr naming them) on
    `data`; an append rewrites them, so a store from before the ids' current rule gets them as a
    one-shot ingest would."""
    codes = np.array([split_station(station) for station in stations], dtype=object)
    write_array(group, cv.STATION, np.array(stations, dtype=object), cv.STATION)
    for index, name in enumerate(CODE_ARRAYS):
        write_array(group, name, codes[:, index], cv.STATION)
    group[cv.WAVEFORM_VAR].attrs.update(coordinates)
