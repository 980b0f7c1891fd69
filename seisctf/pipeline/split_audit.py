"""The leakage audit of a split, and its map.

Audit (docs/contract.md, "Splits and the leakage audit"; a station is `NET.STA`, an earthquake
window one with a P or S arrival sample, any other a noise window):

- `counts`: traces per split; `stations`: stations per split;
- `shared_stations`: stations with traces in both train and test; the test windows recorded at
  them, as fractions of the test earthquake windows and of the test noise windows
  (`test_earthquake_fraction_at_shared_stations`, `test_noise_fraction_at_shared_stations`;
  null when test has no such window);
- dev, separately: `dev.shared_stations_with_train`, `dev.shared_stations_with_test` and the
  fractions of dev windows at stations that train has;
- `events_in_several_splits`: source ids with traces in more than one split;
- `min_train_test_source_distance_km`: the smallest great-circle distance between a train and a
  test source location (null when either has none);
- `budgets`: the seeded draws of training clusters (seisctf.pipeline.splits).

Map: sources (dots) and stations (triangles) by longitude and latitude, coloured by split; a
station with traces in several splits is drawn in black.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf.catalogs.trace_keys import has_arrival, min_distance_km, station_keys
from seisctf.wording import counted

TRAIN, DEV, TEST = cv.SPLIT_VALUES

COLOURS = {TRAIN: "#1f77b4", DEV: "#ff7f0e", TEST: "#d62728"}
SHARED_COLOUR = "#000000"


def fraction(mask: np.ndarray, within: np.ndarray) -> float | None:
    """Share of the `within` rows where `mask` holds; None when there are none."""
    total = int(within.sum())
    return None if total == 0 else float((mask & within).sum() / total)


def source_points(table: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    if cv.SOURCE_LATITUDE not in table or cv.SOURCE_LONGITUDE not in table:
        return np.zeros((0, 2))
    points = table.loc[rows, [cv.SOURCE_LATITUDE, cv.SOURCE_LONGITUDE]].to_numpy(np.float64)
    points = points[np.isfinite(points).all(axis=1)]
    return np.unique(points, axis=0)


def leakage_audit(
    table: pd.DataFrame, strategy: str, budgets: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The audit of a trace table with a `split` column (module doc)."""
    split = table[cv.SPLIT_VAR].to_numpy(dtype=object)
    codes, _ = pd.factorize(station_keys(table))  # stations as integers: fast set tests
    quake = has_arrival(table)
    by_split = {name: set(codes[split == name].tolist()) for name in cv.SPLIT_VALUES}
    shared = by_split[TRAIN] & by_split[TEST]
    at_shared = np.isin(codes, list(shared))
    at_train = np.isin(codes, list(by_split[TRAIN]))
    test, dev = split == TEST, split == DEV
    events = 0
    if cv.SOURCE_ID in table:
        source = table[cv.SOURCE_ID].astype(str)
        with_id = ~source.isin(["", "nan", "None"]).to_numpy()
        per_event = pd.Series(split[with_id]).groupby(source[with_id].to_numpy()).nunique()
        events = int((per_event > 1).sum())
    return {
        "strategy": strategy,
        "counts": {name: int((split == name).sum()) for name in cv.SPLIT_VALUES},
        "stations": {name: len(by_split[name]) for name in cv.SPLIT_VALUES},
        "shared_stations": len(shared),
        "test_earthquake_fraction_at_shared_stations": fraction(at_shared, test & quake),
        "test_noise_fraction_at_shared_stations": fraction(at_shared, test & ~quake),
        "dev": {
            "shared_stations_with_train": len(by_split[DEV] & by_split[TRAIN]),
            "shared_stations_with_test": len(by_split[DEV] & by_split[TEST]),
            "earthquake_fraction_at_train_stations": fraction(at_train, dev & quake),
            "noise_fraction_at_train_stations": fraction(at_train, dev & ~quake),
        },
        "events_in_several_splits": events,
        "min_train_test_source_distance_km": min_distance_km(
            source_points(table, split == TRAIN), source_points(table, test)
        ),
        "budgets": budgets or {},
    }


def split_map(table: pd.DataFrame, path: str, title: str = "") -> str:
    """PNG map of sources and stations coloured by split (module doc); returns `path`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 7), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    split = table[cv.SPLIT_VAR].to_numpy(dtype=object)
    for name in cv.SPLIT_VALUES:
        rows = split == name
        points = source_points(table, rows)
        axes.scatter(
            points[:, 1],
            points[:, 0],
            s=8,
            c=COLOURS[name],
            alpha=0.6,
            label=f"{name} sources ({counted(int(rows.sum()), 'trace')})",
        )
    if cv.STATION_LATITUDE in table and cv.STATION_LONGITUDE in table:
        frame = pd.DataFrame(
            {
                "station": station_keys(table).to_numpy(),
                "lat": table[cv.STATION_LATITUDE].to_numpy(np.float64),
                "lon": table[cv.STATION_LONGITUDE].to_numpy(np.float64),
                "split": split,
            }
        )
        stations = frame.groupby("station").agg(
            lat=("lat", "mean"),
            lon=("lon", "mean"),
            splits=("split", "nunique"),
            split=("split", "first"),
        )
        for name in cv.SPLIT_VALUES:
            only = stations[(stations["splits"] == 1) & (stations["split"] == name)]
            axes.scatter(
                only["lon"],
                only["lat"],
                marker="^",
                s=70,
                c=COLOURS[name],
                edgecolors="white",
                label=f"{name}-only stations ({len(only)})",
            )
        several = stations[stations["splits"] > 1]
        axes.scatter(
            several["lon"],
            several["lat"],
            marker="^",
            s=70,
            c=SHARED_COLOUR,
            label=f"stations in several splits ({len(several)})",
        )
    latitudes = table.get(cv.STATION_LATITUDE, table.get(cv.SOURCE_LATITUDE))
    known = np.asarray(latitudes if latitudes is not None else [], dtype=float)
    known = known[np.isfinite(known)]  # stations without a position have no place on the map
    if known.size:
        middle = float(known.mean())  # a degree of longitude is cos(latitude) of one of latitude
        axes.set_aspect(1 / max(math.cos(math.radians(middle)), 0.1))
    axes.set_xlabel("longitude (°)")
    axes.set_ylabel("latitude (°)")
    axes.set_title(title or "split")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    figure.savefig(path)
    return str(path)
