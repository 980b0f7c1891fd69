"""Benchmark: random batches of event windows from an event-window store (xarray) against
SeisBench's `WaveformDataset` on the same traces.

Writes a SeisBench-format dataset with SeisBench's own `WaveformDataWriter` (default bucket size
1024): --traces three-component windows of --samples samples at 100 Hz (default 8192 × 6000, a
STEAD-like 60 s; 563 MiB of float32), integer counts (a random walk plus noise, like a broadband
record) stored as float32. Ingests it with `seisctf ingest seisbench` (`ingest_seisbench`, threaded
scheduler) into one store per layout (--layouts; default: the layouts compared in
benchmarks/RESULTS.md). Then draws --batches batches of --batch random trace indices (unsorted,
as a training loop draws them) and reads each batch, interleaved, with

  (a) SeisBench: `WaveformDataset(path, cache=None).get_waveforms(idx)` (dimension order NCW,
      component order ZNE: the same windows; the dataset opened once, before timing);
  (b) xarray on zarr-python, per layout: `ds = xr.open_zarr(store, chunks=None)` once, then
      `ds["waveforms"].isel(trace=idx).values` per batch;
  (c) xarray on TensorStore, per layout: `ds = seisctf.catalogs.event_windows.
      open_event_windows(store)` once (the same Dataset, `waveforms` read through TensorStore),
      then the same `isel(trace=idx).values` per batch (the recommended read path);
  (d) xarray's own entry point, per layout: `ds = xr.open_dataset(store, engine="seisctf")`
      once (seisctf's backend: `open_event_windows` behind `xr.open_dataset`), then the same
      `isel(trace=idx).values` per batch (the path xarray users take);

and checks that both return the same values on the first batch (NaN padding aside: every window
has its full length here). Files are read from the page cache (every file was read once before
the timed batches: warm cache; the machine has far more RAM than the data). Prints the medians,
the ratio SeisBench ÷ store per layout (> 1: the store is faster), the store sizes and the
ingest times, as a markdown table.

    cd benchmarks && ../.venv/bin/python bench_event_windows.py [--traces 8192] [--samples 6000]
        [--batch 256] [--batches 30] [--layouts 1/none/raw,1/256/raw,...] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_ctf_scoring import load_average, machine_facts

from seisctf.location import StoreLocation

DEFAULT_LAYOUTS = "1/none/raw,1/none/lz4,1/256/raw,1/256/lz4,1/1024/lz4,4/256/lz4"


def open_with_engine(url):
    """The store through xarray's own entry point: seisctf's backend."""
    import xarray as xr

    return xr.open_dataset(url, engine="seisctf")


def parse_layout(text: str):
    """`CHUNK/SHARD|none/raw|lz4` -> WindowLayout."""
    from seisctf.catalogs.event_windows import WindowLayout

    chunk, shard, codec = text.split("/")
    return WindowLayout(
        chunk_traces=int(chunk),
        shard_traces=None if shard == "none" else int(shard),
        compress=codec == "lz4",
    )


def write_seisbench(folder: Path, n_traces: int, n_samples: int) -> None:
    import seisbench.data as sbd

    rng = np.random.default_rng(2026)
    with sbd.WaveformDataWriter(folder / "metadata.csv", folder / "waveforms.hdf5") as writer:
        writer.data_format = {"dimension_order": "CW", "component_order": "ZNE",
                              "sampling_rate": 100.0, "unit": "counts"}  # fmt: skip
        for i in range(n_traces):
            walk = np.cumsum(rng.integers(-20, 21, (3, n_samples)), axis=1)
            counts = walk + rng.integers(-200, 201, (3, n_samples))
            quake = i % 5 != 0
            meta = {
                "trace_name": f"XB.S{i % 97:03d}_{i:07d}",
                "station_network_code": "XB",
                "station_code": f"S{i % 97:03d}",
                "trace_category": "earthquake_local" if quake else "noise",
                "trace_p_arrival_sample": float(rng.integers(500, 1500)) if quake else np.nan,
                "trace_s_arrival_sample": float(rng.integers(1600, 3000)) if quake else np.nan,
                "source_id": f"ev{i // 4:06d}" if quake else "",
            }
            writer.add_trace(meta, counts.astype(np.float32))


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def warm(path: Path) -> None:
    for file in path.rglob("*"):
        if file.is_file():
            with open(file, "rb") as handle:
                while handle.read(2**24):
                    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=8192)
    parser.add_argument("--samples", type=int, default=6000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--layouts", default=DEFAULT_LAYOUTS)
    parser.add_argument("--workdir", help="keep the dataset and stores here (default: a temp dir)")
    args = parser.parse_args()

    logging.getLogger("seisbench").setLevel(logging.ERROR)
    import seisbench.data as sbd
    import xarray as xr

    from seisctf.catalogs.event_windows import open_event_windows
    from seisctf.formats.seisbench.ingest import ingest_seisbench

    with tempfile.TemporaryDirectory(prefix="seisctf-bench-") as scratch:
        root = Path(args.workdir or scratch)
        source = root / f"seisbench-{args.traces}x{args.samples}"
        if not (source / "metadata.csv").is_file():
            write_seisbench(source, args.traces, args.samples)
        layouts = {text: parse_layout(text) for text in args.layouts.split(",")}
        stores, ingest_s = {}, {}
        for text, layout in layouts.items():
            url = root / f"store-{text.replace('/', '-')}.zarr"
            start = time.perf_counter()
            ingest_seisbench(str(source), StoreLocation(url), layout=layout, quiet=True)
            ingest_s[text] = time.perf_counter() - start
            stores[text] = url
        sizes = {text: tree_size(url) for text, url in stores.items()}
        for path in (source, *stores.values()):
            warm(path)

        dataset = sbd.WaveformDataset(
            source, component_order="ZNE", dimension_order="NCW", cache=None
        )
        opened = {
            (path, text): opener(url)
            for path, opener in (
                ("xr.open_zarr (zarr-python)", lambda url: xr.open_zarr(url, chunks=None)),
                ("open_event_windows (TensorStore)", open_event_windows),
                ('xr.open_dataset(engine="seisctf")', open_with_engine),
            )
            for text, url in stores.items()
        }
        rng = np.random.default_rng(7)
        batches = [rng.choice(args.traces, args.batch, replace=False) for _ in range(args.batches)]

        readers = {"seisbench WaveformDataset.get_waveforms": lambda idx: dataset.get_waveforms(
            idx=idx.tolist())}  # fmt: skip
        for (path, text), ds in opened.items():
            readers[f"{path}, layout {text}"] = lambda idx, ds=ds: (
                ds["waveforms"].isel(trace=idx).values
            )
        reference = readers["seisbench WaveformDataset.get_waveforms"](batches[0])
        for name, read in readers.items():
            values = read(batches[0])
            assert np.array_equal(values, reference), name  # the same windows, exactly
        load_before = load_average()
        times: dict[str, list[float]] = {name: [] for name in readers}
        for idx in batches:
            for name, read in readers.items():
                start = time.perf_counter()
                read(idx)
                times[name].append(time.perf_counter() - start)
        load_after = load_average()

        tree_size_mib = tree_size(source) / 2**20
    baseline = statistics.median(times["seisbench WaveformDataset.get_waveforms"])
    print("```")
    for line in machine_facts():
        print(line)
    print(f"dataset: {args.traces} windows x 3 x {args.samples} float32 "
          f"({args.traces * 3 * args.samples * 4 / 2**20:.0f} MiB), SeisBench bucket size 1024; "
          f"batches: {args.batches} x {args.batch} random windows; warm page cache")  # fmt: skip
    from importlib.metadata import version

    print(", ".join(f"{name} {version(name)}" for name in ("seisbench", "h5py", "xarray",
                                                           "tensorstore")))  # fmt: skip
    print(f"load average before (1, 5, 15 min): {load_before}; after: {load_after}")
    print("```")
    print()
    print("| reader | median ms / batch | windows/s | SeisBench ÷ reader | store MiB | ingest s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, runs in times.items():
        median = statistics.median(runs)
        layout = name.rpartition("layout ")[2]
        size = f"{sizes[layout] / 2**20:.0f}" if layout in sizes else f"{tree_size_mib:.0f}"
        ingest = f"{ingest_s[layout]:.1f}" if layout in ingest_s else "—"
        print(
            f"| {name} | {median * 1e3:.1f} | {args.batch / median:,.0f} | "
            f"{baseline / median:.2f} | {size} | {ingest} |"
        )


if __name__ == "__main__":
    main()
