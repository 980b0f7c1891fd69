"""Scale section `open`: opening a store costs its metadata, not its chunks (issue 38).

Continuous waveform stores laid out as `ingest waveforms` lays them out (data(station, channel,
time) float32 in chunks (1, 3, 2**18), fill NaN; `create_network_store`), metadata only plus one
written chunk, declared at:

- 552 stations × 10^6, 10^7 and 10^8 chunks (1,812 / 18,116 / 181,160 chunks along time);
- the 552-station network over 25 years at 100 Hz (1.66e8 chunks, 300,957 along time);
- one station × 10^7 chunks along time: every chunk on one axis, the layout that costs most
  (Dask keeps per axis each chunk's size and running sums: opening is O(chunks along the axes),
  552 + 1 + 181,160 for the 10^8 store, 10^7 here).

Per store and opener, each in a fresh process (`--child`), after the imports, a
`distributed.LocalCluster` of one worker process and the same open and selection of a 2-chunk
store (so every import they need is done): the opener's wall time and the peak RSS above the
RSS before it (Linux's VmHWM, reset through /proc/self/clear_refs); then a 10-minute selection
of one station (`isel`, positions around the written chunk's start, so half of it is NaN): the
pickled size of its graph (what a distributed client ships with it; Dask keeps in it each
chunk's size along each axis), its load through the cluster (time, and the process's peak RSS
since the opener began) and a check of its values against the chunk written (numpy). Median of
FULL_REPEATS runs (QUICK_REPEATS with --quick).

Openers: `seisctf.open_store` (now), and `xarray.open_dataset(chunks={}, inline_array=True)`,
which is how `storage.open_dataset` opened stores before (the reference; no size guard).

Goal: `open_store` of the store declared at 10^8 chunks < 2 s and < 300 MB.

    .venv/bin/python benchmarks/bench_scale.py --only open [--quick]
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scale_report import MiB, ScaleOptions, Section, tree_bytes, verdict

from seisctf.location import StoreLocation

BLOCK_SAMPLES = 2**18
CHANNELS = ("HHE", "HHN", "HHZ")
RATE_HZ = 100.0
START_ISO = "2000-01-01T00:00:00"
SAMPLES_PER_YEAR = 3.15576e9  # 365.25 days at 100 Hz
SELECTION_SAMPLES = 60_000  # 10 minutes at 100 Hz
GOAL_SECONDS, GOAL_BYTES = 2.0, 300e6  # for the store declared at 10^8 chunks
OPENERS = {
    "seisctf.open_store": "seisctf",
    "xarray chunks={} (before)": "xarray",
}


@dataclass(frozen=True)
class StoreShape:
    """A waveform store: `n_station` × 3 channels × `n_time` samples in 2**18-sample chunks."""

    label: str
    n_station: int
    n_time: int

    @property
    def n_chunks(self) -> int:
        return self.n_station * math.ceil(self.n_time / BLOCK_SAMPLES)

    @property
    def along_axes(self) -> int:
        return self.n_station + 1 + math.ceil(self.n_time / BLOCK_SAMPLES)

    @property
    def written(self) -> tuple[int, int]:
        """(station row, time chunk) of the one chunk written: mid-network, mid-record."""
        return self.n_station // 2, math.ceil(self.n_time / BLOCK_SAMPLES) // 2


def network(n_chunks: int, n_station: int = 552) -> StoreShape:
    """`n_station` stations declared at about `n_chunks` chunks."""
    blocks = max(2, round(n_chunks / n_station))
    stations = f"{n_station} station" + "s" * (n_station != 1)
    label = f"{stations}, 10^{round(math.log10(n_chunks))} chunks"
    return StoreShape(label, n_station, blocks * BLOCK_SAMPLES)


GOAL_STORE = network(10**8)
NETWORK_25_YEARS = StoreShape("552 stations × 25 years", 552, round(25 * SAMPLES_PER_YEAR))
FULL_STORES = (
    network(10**6),
    network(10**7),
    GOAL_STORE,
    NETWORK_25_YEARS,
    network(10**7, n_station=1),
)
QUICK_STORES = (network(10**5), network(10**6), NETWORK_25_YEARS)
FULL_REPEATS, QUICK_REPEATS = 3, 1


def create_network_store(url: str, n_station: int, n_time: int, time_chunk: int) -> None:
    """A complete, empty continuous waveform store as `ingest waveforms` lays it out: data
    (station, channel, time) float32 in chunks (1, channels, `time_chunk`), fill NaN, the
    ingest's codec; station ids `XX.Snnnn.00`, channels HHE/HHN/HHZ, positions; the grid's
    attrs (start 2000-01-01, 100 Hz). No chunk is written."""
    import pandas as pd
    import zarr
    from zarr.codecs import BloscCodec

    from seisctf import conventions as cv
    from seisctf import storage

    group = zarr.open_group(url, mode="w", zarr_format=3)
    data = group.create_array(
        cv.WAVEFORM_VAR,
        shape=(n_station, len(CHANNELS), n_time),
        chunks=(1, len(CHANNELS), time_chunk),
        dtype="float32",
        fill_value=np.nan,
        compressors=BloscCodec(**cv.DATA_CODEC),
        dimension_names=cv.WAVEFORM_DIMS,
    )
    data.attrs["coordinates"] = "latitude longitude"
    stations = np.array([f"XX.S{row:04d}.00" for row in range(n_station)], dtype=object)
    for name, values in ((cv.STATION, stations), (cv.CHANNEL, np.array(CHANNELS, dtype=object))):
        array = group.create_array(name, shape=values.shape, dtype=str, dimension_names=(name,))
        array[:] = values
    for name, values in (
        (cv.LATITUDE, np.linspace(-60, 60, n_station)),
        (cv.LONGITUDE, np.linspace(-170, 170, n_station)),
    ):
        array = group.create_array(
            name, shape=values.shape, dtype="float64", dimension_names=(cv.STATION,)
        )
        array[:] = values
    start_ns = int(pd.Timestamp(START_ISO).value)
    attrs = {cv.ATTR_START_TIME: START_ISO + "Z", "start_time_ns": start_ns}
    storage.finish_group(StoreLocation(url), {**attrs, cv.ATTR_SAMPLING_RATE: RATE_HZ})


def written_values() -> np.ndarray:
    """The chunk written into each store (3 × 2**18 float32, seeded)."""
    return np.random.default_rng(38).standard_normal((3, BLOCK_SAMPLES)).astype(np.float32)


def make_store(url: str, shape: StoreShape) -> float:
    """Write the store (metadata and its one chunk); return the seconds it took."""
    import zarr

    start = time.perf_counter()
    create_network_store(url, shape.n_station, shape.n_time, BLOCK_SAMPLES)
    row, block = shape.written
    data = zarr.open_group(url, mode="r+")["data"]
    data[row, :, block * BLOCK_SAMPLES : (block + 1) * BLOCK_SAMPLES] = written_values()
    return time.perf_counter() - start


# --- the measuring process -------------------------------------------------------------------


def _status_kib(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE).group(1))


def _reset_peak() -> int:
    """Reset the process's peak RSS to its current RSS; return that (bytes)."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib("VmRSS") * 1024


def _peak() -> int:
    return _status_kib("VmHWM") * 1024


def open_with(opener: str, url: str):
    import xarray as xr

    import seisctf

    if opener == "seisctf":
        return seisctf.open_store(url)
    return xr.open_dataset(url, engine="zarr", chunks={}, inline_array=True, zarr_format=3)


def selection(ds, row: int, block: int):
    """Ten minutes of station `row` from SELECTION_SAMPLES / 2 before chunk `block`."""
    first = block * BLOCK_SAMPLES - SELECTION_SAMPLES // 2
    return ds["data"].isel(station=row, time=slice(first, first + SELECTION_SAMPLES))


def child(url: str, opener: str, row: int, block: int, warm_up: str) -> dict[str, float]:
    """Open the store at `url` with `opener` and load one selection (module doc), after the
    same on the small store `warm_up` (so every import they need is done)."""
    import cloudpickle
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, Client(cluster):
        selection(open_with(opener, warm_up), 0, 1).load()
        base = _reset_peak()
        start = time.perf_counter()
        ds = open_with(opener, url)
        open_s, open_peak = time.perf_counter() - start, _peak() - base
        part = selection(ds, row, block)
        graph_bytes = len(cloudpickle.dumps(part.data.__dask_graph__()))
        start = time.perf_counter()
        part = part.load()
        select_s, select_peak = time.perf_counter() - start, _peak() - base
    expected = np.full((3, SELECTION_SAMPLES), np.nan, dtype=np.float32)
    expected[:, SELECTION_SAMPLES // 2 :] = written_values()[:, : SELECTION_SAMPLES // 2]
    np.testing.assert_array_equal(part.values, expected)
    return {
        "open_s": open_s,
        "open_peak": open_peak,
        "select_s": select_s,
        "select_peak": select_peak,
        "graph_bytes": graph_bytes,
        "partitions": ds["data"].data.npartitions,
    }


def measure(
    url: str, shape: StoreShape, opener: str, repeats: int, warm_up: str
) -> dict[str, float]:
    """Median figures of `repeats` fresh processes."""
    row, block = shape.written
    runs = []
    for _ in range(repeats):
        command = [sys.executable, __file__, "--child", url, opener, str(row), str(block)]
        command.append(warm_up)
        run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if run.returncode:
            raise RuntimeError(f"{shape.label}, {opener}: exit {run.returncode}\n{run.stderr}")
        runs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    figures = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    assert figures["partitions"] == shape.n_chunks, (figures, shape)
    return figures


def sections(options: ScaleOptions) -> Iterator[Section]:
    stores = QUICK_STORES if options.quick else FULL_STORES
    repeats = QUICK_REPEATS if options.quick else FULL_REPEATS
    section = Section(
        "Opening a store (`scale_open.py`)",
        [
            "store",
            "chunks",
            "chunks along axes",
            "opener",
            "open s",
            "open MiB",
            "10-min selection s",
            "open + selection MiB",
            "selection graph KiB",
        ],
    )
    goal_row = None
    warm_up = str(options.workdir / "open" / "warm-up.zarr")
    create_network_store(warm_up, 1, 2 * BLOCK_SAMPLES, BLOCK_SAMPLES)
    for shape in stores:
        url = str(options.workdir / "open" / f"{shape.n_station}x{shape.n_time}.zarr")
        created_s = make_store(url, shape)
        section.notes.append(
            f"{shape.label}: created in {created_s:.1f} s, {tree_bytes(Path(url)):,} bytes on "
            "disk (metadata and one chunk)"
        )
        for label, opener in OPENERS.items():
            figures = measure(url, shape, opener, repeats, warm_up)
            section.rows.append(
                [
                    shape.label,
                    f"{shape.n_chunks:.3g}",
                    shape.along_axes,
                    label,
                    figures["open_s"],
                    figures["open_peak"] / MiB,
                    figures["select_s"],
                    figures["select_peak"] / MiB,
                    figures["graph_bytes"] / 1024,
                ]
            )
            if opener == "seisctf" and shape == GOAL_STORE:
                goal_row = (shape, figures)
            if opener == "seisctf" and shape == NETWORK_25_YEARS:
                section.goals.append(
                    verdict(
                        "a 552-station × 25-year 100 Hz store can be created and opened",
                        f"created in {created_s:.1f} s, opened in {figures['open_s']:.2f} s, "
                        "its selection read back",
                        True,
                    )
                )
    if goal_row is not None:
        shape, figures = goal_row
        seconds, peak = figures["open_s"], figures["open_peak"]
        section.goals += [
            verdict(
                f"open_store at {shape.n_chunks:.3g} chunks < {GOAL_SECONDS:g} s",
                f"{seconds:.2f} s ({seconds / GOAL_SECONDS:.2f}× the limit)",
                seconds < GOAL_SECONDS,
            ),
            verdict(
                f"its peak RSS above imports < {GOAL_BYTES / 1e6:g} MB",
                f"{peak / 1e6:.0f} MB ({peak / GOAL_BYTES:.2f}× the limit)",
                peak < GOAL_BYTES,
            ),
        ]
    section.notes.append(
        f"Median of {repeats} fresh processes per row; MiB above the RSS after imports, a "
        "one-worker LocalCluster and the same open and selection of a 2-chunk store; the "
        "selection's values checked against the chunk written."
    )
    yield section


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    url, opener, row, block, warm_up = sys.argv[2:7]
    print(json.dumps(child(url, opener, int(row), int(block), warm_up)))
