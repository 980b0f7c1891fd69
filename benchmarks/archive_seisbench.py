"""One chunk of the SeisBench dataset of `make_archive.py seisbench` (its docstring says what is
written), with SeisBench's own `WaveformDataWriter`: `metadata{chunk}.csv` and
`waveforms{chunk}.hdf5`."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
from archive_signals import event_windows

BATCH = 256  # windows generated at once (numpy), then handed to the writer one by one
N_STATIONS = 997
EVENTS_PER_STATION_WINDOW = 4  # about four windows per event
SPLITS = ("train", "dev", "test")
SPLIT_P = (0.7, 0.1, 0.2)
START_S = 1_704_067_200.0  # 2024-01-01T00:00:00Z


def _iso(seconds: float) -> str:
    return np.datetime64(int(seconds * 1e6), "us").astype(str) + "Z"


def event_table(seed: int, n_events: int) -> dict[str, np.ndarray]:
    """Per event: origin time (s since 1970), latitude, longitude (degrees), depth (km),
    magnitude and split; drawn from the seed alone, so every chunk agrees."""
    rng = np.random.default_rng([seed, 11])
    return {
        "origin": START_S + np.sort(rng.uniform(0, 3 * 365 * 86400, n_events)),
        "lat": rng.uniform(32.0, 37.0, n_events),
        "lon": rng.uniform(-120.0, -114.0, n_events),
        "depth": rng.uniform(1.0, 25.0, n_events),
        "mag": rng.uniform(0.5, 5.0, n_events),
        "split": rng.choice(len(SPLITS), n_events, p=SPLIT_P),
    }


def station_table(seed: int) -> np.ndarray:
    """(N_STATIONS, 3): latitude, longitude (degrees), elevation (m)."""
    rng = np.random.default_rng([seed, 12])
    return np.column_stack([rng.uniform(33.0, 36.0, N_STATIONS),
                            rng.uniform(-119.0, -115.0, N_STATIONS),
                            rng.uniform(0.0, 2500.0, N_STATIONS)])  # fmt: skip


def write_seisbench(
    folder: str, chunk: str, first: int, count: int, samples: int, rate: float, seed: int
) -> int:
    """Write windows `first` … `first + count - 1` as chunk `chunk` of the dataset in `folder`
    (each batch of windows drawn from its own seeded generator); the number written."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # the writer's progress bar
    import seisbench.data as sbd

    logging.getLogger("seisbench").setLevel(logging.ERROR)
    n_events = max(1, first + count) // EVENTS_PER_STATION_WINDOW + 1
    quakes, sites = event_table(seed, n_events), station_table(seed)
    root = Path(folder)
    written = 0
    with sbd.WaveformDataWriter(
        root / f"metadata{chunk}.csv", root / f"waveforms{chunk}.hdf5"
    ) as writer:
        writer.data_format = {
            "dimension_order": "CW",
            "component_order": "ZNE",
            "sampling_rate": rate,
            "measurement": "velocity",
            "unit": "counts",
            "instrument_response": "not restituted",
        }
        for lo in range(first, first + count, BATCH):
            n = min(BATCH, first + count - lo)
            rng = np.random.default_rng([seed, 13, lo])
            windows, p, s = event_windows(rng, n, samples, rate)
            for k in range(n):
                writer.add_trace(
                    _metadata(lo + k, int(p[k]), int(s[k]), rate, quakes, sites), windows[k]
                )
                written += 1
    return written


def _metadata(index: int, p: int, s: int, rate: float, quakes: dict, sites: np.ndarray) -> dict:
    """The SeisBench metadata row of window `index` (P and S at samples `p`, `s`)."""
    event = index // EVENTS_PER_STATION_WINDOW
    station = (index * 7919) % N_STATIONS
    origin = float(quakes["origin"][event])
    start = origin + 5.0 - p / rate
    return {
        "trace_name": f"XA.S{station:04d}.{event:08d}",
        "station_network_code": "XA",
        "station_code": f"S{station:04d}",
        "station_location_code": "00",
        "station_latitude_deg": float(sites[station, 0]),
        "station_longitude_deg": float(sites[station, 1]),
        "station_elevation_m": float(sites[station, 2]),
        "trace_channel": "HH",
        "trace_start_time": _iso(start),
        "trace_sampling_rate_hz": rate,
        "trace_category": "earthquake_local",
        "trace_p_arrival_sample": p,
        "trace_p_status": "manual",
        "trace_s_arrival_sample": s,
        "trace_s_status": "manual",
        "source_id": f"ev{event:08d}",
        "source_origin_time": _iso(origin),
        "source_latitude_deg": float(quakes["lat"][event]),
        "source_longitude_deg": float(quakes["lon"][event]),
        "source_depth_km": float(quakes["depth"][event]),
        "source_magnitude": round(float(quakes["mag"][event]), 2),
        "source_magnitude_type": "ML",
        "split": SPLITS[int(quakes["split"][event])],
    }
