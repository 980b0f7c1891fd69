"""Small event-window stores built with xarray as the contract describes them: stations on a grid
that record events from several source clusters, noise windows, NaN-padded short windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv

N_SAMPLE = 40
RATE = 100.0


def station_grid() -> pd.DataFrame:
    """25 stations on a 5 × 5 grid (lat 30…50, lon 0…20), two networks, and three outposts
    beyond the grid's north and south edges (recording mostly the outermost events)."""
    rows = []
    for i, lat in enumerate(np.linspace(30, 50, 5)):
        for j, lon in enumerate(np.linspace(0, 20, 5)):
            rows.append(("AA" if j < 3 else "BB", f"S{i}{j}", lat + 0.1 * j, lon + 0.05 * i))
    rows += [("CC", "N1", 53.0, 4.0), ("CC", "N2", 53.0, 16.0), ("CC", "S1", 27.0, 10.0)]
    return pd.DataFrame(rows, columns=["network", "station", "lat", "lon"])


def event_window_dataset(
    n_events: int = 160, per_event: int = 4, noise_per_station: int = 2, seed: int = 1
) -> xr.Dataset:
    """Each event is recorded at its `per_event` nearest stations (so a station records events
    of several clusters); every station has `noise_per_station` noise windows."""
    rng = np.random.default_rng(seed)
    stations = station_grid()
    event_lat = rng.uniform(28, 52, n_events)
    event_lon = rng.uniform(-2, 22, n_events)
    origin = pd.Timestamp("2020-01-01", tz="UTC") + pd.to_timedelta(
        np.sort(rng.uniform(0, 3e7, n_events)), unit="s"
    )
    rows = []
    for e in range(n_events):
        distance = np.hypot(stations["lat"] - event_lat[e], stations["lon"] - event_lon[e])
        for s in np.argsort(distance.to_numpy(), kind="stable")[:per_event]:
            rows.append(
                {
                    "event": e,
                    "station": s,
                    "category": "earthquake_local",
                    "p": float(rng.uniform(5, 15)),
                    "s": float(rng.uniform(20, 35)) if rng.uniform() < 0.8 else np.nan,
                    "time": origin[e] + pd.Timedelta(seconds=float(distance.iloc[s])),
                }
            )
    for s in range(len(stations)):
        for k in range(noise_per_station):
            time = pd.Timestamp("2020-03-01", tz="UTC") + pd.Timedelta(hours=3 * s + k)
            rows.append(
                {
                    "event": -1,
                    "station": s,
                    "category": "noise",
                    "p": np.nan,
                    "s": np.nan,
                    "time": time,
                }
            )
    table = pd.DataFrame(rows)
    n = len(table)
    st = stations.iloc[table["station"].to_numpy()].reset_index(drop=True)
    quake = table["event"].to_numpy() >= 0
    ev = np.where(quake, table["event"].to_numpy(), 0)
    npts = np.full(n, N_SAMPLE, dtype=np.int64)
    npts[::7] = N_SAMPLE - 9  # shorter windows, NaN-padded
    waveforms = rng.standard_normal((n, 3, N_SAMPLE)).astype(np.float32)
    pad = np.arange(N_SAMPLE)[None, :] >= npts[:, None]
    waveforms[np.broadcast_to(pad[:, None, :], waveforms.shape)] = np.nan

    def text(values) -> np.ndarray:
        return np.array([str(v) for v in values], dtype=object)

    def iso(times) -> np.ndarray:
        return text(t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for t in times)

    coords = {
        cv.TRACE_NAME: (
            cv.TRACE,
            text(f"{st.network[i]}.{st.station[i]}_{i:05d}" for i in range(n)),
        ),
        cv.TRACE_NPTS: (cv.TRACE, npts),
        cv.TRACE_CATEGORY: (cv.TRACE, text(table["category"])),
        cv.P_ARRIVAL_SAMPLE: (cv.TRACE, table["p"].to_numpy() * RATE / 10),
        cv.S_ARRIVAL_SAMPLE: (cv.TRACE, table["s"].to_numpy() * RATE / 10),
        "trace_start_time": (cv.TRACE, iso(table["time"])),
        "trace_sampling_rate_hz": (cv.TRACE, np.full(n, RATE)),
        cv.NETWORK_CODE: (cv.TRACE, text(st.network)),
        cv.STATION_CODE: (cv.TRACE, text(st.station)),
        "station_location_code": (cv.TRACE, text([""] * n)),
        cv.STATION_LATITUDE: (cv.TRACE, st.lat.to_numpy()),
        cv.STATION_LONGITUDE: (cv.TRACE, st.lon.to_numpy()),
        cv.SOURCE_ID: (
            cv.TRACE,
            text(f"ev{e:04d}" if q else "" for e, q in zip(ev, quake, strict=True)),
        ),
        "source_origin_time": (
            cv.TRACE,
            np.where(quake, iso(origin[ev]), ""),
        ),
        cv.SOURCE_LATITUDE: (cv.TRACE, np.where(quake, event_lat[ev], np.nan)),
        cv.SOURCE_LONGITUDE: (cv.TRACE, np.where(quake, event_lon[ev], np.nan)),
        "source_magnitude": (cv.TRACE, np.where(quake, 1.0 + ev % 3, np.nan)),
        cv.CHANNEL: (cv.CHANNEL, np.array(list("ZNE"), dtype=object)),
    }
    coords["source_origin_time"] = (cv.TRACE, text(coords["source_origin_time"][1]))
    return xr.Dataset(
        {cv.EVENT_WINDOWS_VAR: (cv.EVENT_WINDOWS_DIMS, waveforms)},
        coords=coords,
        attrs={cv.ATTR_SAMPLING_RATE: RATE, "component_order": "ZNE"},
    )


def write_event_windows(
    url: str, shard_traces: int | None = 64, chunk_traces: int = 1, **options
) -> xr.Dataset:
    """Write the fixture store with seisctf's event-window writer (`chunk_traces` windows per
    chunk, shards of `shard_traces` windows, None: no shards; Parquet catalogue beside);
    returns it."""
    from seisctf.catalogs import event_windows

    dataset = event_window_dataset(**options)
    layout = event_windows.WindowLayout(chunk_traces=chunk_traces, shard_traces=shard_traces)
    event_windows.write_event_windows(dataset, url, layout=layout, quiet=True)
    return dataset


def trace_frame(ds: xr.Dataset) -> pd.DataFrame:
    """Per-trace variables and coordinates as a DataFrame (text as str), read independently of
    seisctf's own reader."""
    return pd.DataFrame(
        {
            str(name): (
                np.array([str(v) for v in var.values.tolist()], dtype=object)
                if var.dtype.kind in "OTU"
                else var.values
            )
            for name, var in ds.variables.items()
            if var.dims == (cv.TRACE,)
        }
    )
