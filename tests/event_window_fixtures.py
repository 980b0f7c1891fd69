"""Small event-window stores built with xarray as the contract describes them: stations on a grid
that record events from several source clusters, noise windows, NaN-padded short windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv
from seisctf.location import StoreLocation

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
    returns it, with the `trace_gap_fraction` the writer adds."""
    from seisctf.catalogs import event_windows

    dataset = event_window_dataset(**options)
    layout = event_windows.WindowLayout(chunk_traces=chunk_traces, shard_traces=shard_traces)
    written = event_windows.write_event_windows(
        dataset, StoreLocation(url), layout=layout, quiet=True
    )
    return dataset.assign_coords({cv.TRACE_GAP_FRACTION: written[cv.TRACE_GAP_FRACTION]})


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


def picking_window_dataset(
    n_earthquake: int = 24, n_noise: int = 12, seconds: float = 30.0, seed: int = 3
) -> xr.Dataset:
    """Three-component windows (Z, N, E at RATE) with known arrivals, split train/dev/test in
    turn. Unit white noise everywhere; an earthquake window adds at its integer
    `trace_p_arrival_sample` (4–12 s) a P wavelet (8 Hz sine under a 0.8 s exponential decay,
    amplitude 2–10, on Z and a third of it on N and E) and at `trace_s_arrival_sample` (P + 3–9
    s) an S wavelet (4 Hz, decay 1.5 s, twice the P amplitude on N and E, a third on Z); every
    fourth earthquake window has neither S wave nor S arrival. Per trace also: `station_code`
    of 4 stations, `source_magnitude` (NaN for noise), `trace_snr_db` as STEAD writes it."""
    rng = np.random.default_rng(seed)
    n = n_earthquake + n_noise
    n_sample = int(seconds * RATE)
    time = np.arange(n_sample) / RATE
    waveforms = rng.standard_normal((n, 3, n_sample))
    p_sample = np.full(n, np.nan)
    s_sample = np.full(n, np.nan)
    for i in range(n_earthquake):
        amplitude = rng.uniform(2, 10)
        p_sample[i] = int(rng.uniform(4, 12) * RATE)
        lag = time - p_sample[i] / RATE
        p_wave = np.where(lag >= 0, np.exp(-lag / 0.8) * np.sin(2 * np.pi * 8 * lag), 0.0)
        waveforms[i] += amplitude * p_wave * np.array([1.0, 1 / 3, 1 / 3])[:, None]
        if i % 4 != 3:
            s_sample[i] = p_sample[i] + int(rng.uniform(3, 9) * RATE)
            lag = time - s_sample[i] / RATE
            s_wave = np.where(lag >= 0, np.exp(-lag / 1.5) * np.sin(2 * np.pi * 4 * lag), 0.0)
            waveforms[i] += 2 * amplitude * s_wave * np.array([1 / 3, 1.0, 1.0])[:, None]
    order = rng.permutation(n)  # earthquake and noise windows interleaved in store order
    waveforms, p_sample, s_sample = waveforms[order], p_sample[order], s_sample[order]
    quake = ~np.isnan(p_sample)
    text = np.array  # object arrays of str
    snr = [f"[{a:.1f} {b:.1f} {c:.1f}]" for a, b, c in rng.uniform(0, 40, (n, 3))]
    coords = {
        cv.TRACE_NAME: (cv.TRACE, text([f"PK.ST{i % 4}_{i:04d}" for i in range(n)], dtype=object)),
        cv.TRACE_NPTS: (cv.TRACE, np.full(n, n_sample, dtype=np.int64)),
        cv.TRACE_CATEGORY: (
            cv.TRACE,
            text(np.where(quake, "earthquake_local", "noise").tolist(), dtype=object),
        ),
        cv.P_ARRIVAL_SAMPLE: (cv.TRACE, p_sample),
        cv.S_ARRIVAL_SAMPLE: (cv.TRACE, s_sample),
        cv.NETWORK_CODE: (cv.TRACE, text(["PK"] * n, dtype=object)),
        cv.STATION_CODE: (cv.TRACE, text([f"ST{i % 4}" for i in range(n)], dtype=object)),
        "source_magnitude": (cv.TRACE, np.where(quake, 1.0 + np.arange(n) % 3 * 0.7, np.nan)),
        "trace_snr_db": (cv.TRACE, text(snr, dtype=object)),
        cv.CHANNEL: (cv.CHANNEL, text(list("ZNE"), dtype=object)),
    }
    split = text([cv.SPLIT_VALUES[i % 3] for i in range(n)], dtype=object)
    return xr.Dataset(
        {
            cv.EVENT_WINDOWS_VAR: (cv.EVENT_WINDOWS_DIMS, waveforms.astype(np.float32)),
            cv.SPLIT_VAR: (cv.TRACE, split),
        },
        coords=coords,
        attrs={cv.ATTR_SAMPLING_RATE: RATE, "component_order": "ZNE", "dataset": "synthpick"},
    )


def write_picking_windows(url: str, shard_traces: int | None = 8, **options) -> xr.Dataset:
    """Write `picking_window_dataset(**options)` with seisctf's writer (shards of
    `shard_traces` windows, so a small store still makes several picking tasks); returns it."""
    from seisctf.catalogs import event_windows

    dataset = picking_window_dataset(**options)
    layout = event_windows.WindowLayout(chunk_traces=1, shard_traces=shard_traces)
    event_windows.write_event_windows(dataset, StoreLocation(url), layout=layout, quiet=True)
    return dataset


def write_training_seisbench(folder, n_per_chunk: int = 24, samples: int = 3400, seed: int = 5):
    """A chunked SeisBench dataset (chunks `a` and `b`, blocks of 4 traces) in `folder`, written
    by SeisBench's own WaveformDataWriter, long enough for PhaseNet's training windows: RATE Hz,
    float32 noise with P and S onsets at their arrival samples, every fifth trace in ENZ order
    (`trace_component_order`), every third one shorter, every fourth a noise window (no
    arrivals), split train/dev/test in turn. Returns `folder`."""
    import seisbench.data as sbd

    rng = np.random.default_rng(seed)
    for chunk in ("a", "b"):
        with sbd.WaveformDataWriter(
            folder / f"metadata{chunk}.csv", folder / f"waveforms{chunk}.hdf5"
        ) as writer:
            writer.data_format = {"dimension_order": "CW", "component_order": "ZNE"}
            writer.bucket_size = 4
            for i in range(n_per_chunk):
                length = samples - (int(rng.integers(100, 600)) if i % 3 == 0 else 0)
                waveform = rng.normal(size=(3, length)).astype(np.float32)
                quake = i % 4 != 0
                p = int(rng.integers(300, length - 1500)) if quake else np.nan
                s = p + int(rng.integers(200, 1000)) if quake else np.nan
                if quake:
                    waveform[:, p:] *= 4.0
                    waveform[:, s:] *= 3.0
                writer.add_trace(
                    {
                        "trace_name": f"{chunk}{i:03d}",
                        "trace_sampling_rate_hz": RATE,
                        "trace_component_order": "ENZ" if i % 5 == 2 else "ZNE",
                        "station_network_code": "TR",
                        "station_code": f"S{i % 5}",
                        "trace_category": "earthquake_local" if quake else "noise",
                        "trace_p_arrival_sample": p,
                        "trace_s_arrival_sample": s,
                        "source_origin_time": f"2021-05-0{1 + i % 9}T10:00:{i % 60:02d}.5Z"
                        if quake
                        else None,
                        "source_magnitude": float(rng.uniform(1, 4)) if quake else np.nan,
                        "split": cv.SPLIT_VALUES[i % 3],
                    },
                    waveform,
                )
    (folder / "chunks").write_text("a\nb\n")
    return folder


def seisbench_original(folder, **options):
    """SeisBench's own WaveformDataset of a folder (ZNE), what a store's samples must equal."""
    import seisbench.data as sbd

    return sbd.WaveformDataset(folder, component_order="ZNE", **options)


def loader_batches(
    dataset, seed: int, num_workers: int, batch_reads: bool = True
) -> list[dict[str, np.ndarray]]:
    """Every batch of the training tutorial's generator over `dataset`, shuffled."""
    from seisctf.catalogs import phasenet_loader

    loader = phasenet_loader(
        dataset, seed=seed, num_workers=num_workers, batch_size=8, batch_reads=batch_reads
    )
    return [{key: value.numpy() for key, value in batch.items()} for batch in loader]


def assert_same_batches(expected: list[dict], got: list[dict]) -> None:
    assert len(got) == len(expected) > 1
    for want, have in zip(expected, got, strict=True):
        assert want.keys() == have.keys()
        for key in want:
            np.testing.assert_array_equal(have[key], want[key], err_msg=key)
