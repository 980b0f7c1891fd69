"""Benchmark: `seisctf ingest waveforms` against a bare `obspy.read` of the same archive.

Writes a synthetic archive with obspy: --stations stations × 3 channels × --days day files at
--rate Hz (default 20 × 3 × 1 day at 20 Hz), STEIM2-compressed integer counts (a random walk,
like a broadband record), one miniSEED file per station, channel and day. Then, in one run:

  (a) bare obspy: `obspy.read` of every file, one after the other, in this process;
  (b) the ingest (`ingest_waveforms`: header scan, sha256, decode, merge, write zarr) on an
      embedded LocalCluster (`seisctf.cluster.dask_client(n_workers=…)`) of 1 worker, then of
      2 workers (cluster start-up excluded; each ingest writes a fresh store).

Throughput is samples per second. Goals: ingest with 1 worker per core ≥ 0.8 × bare obspy, and
the 1 → 2 worker speed-up ≥ 1.8. Prints a markdown table.

    .venv/bin/python benchmarks/bench_ingest.py [--stations 20] [--days 1] [--rate 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_ctf_scoring import load_average, machine_facts

CHANNELS = ("HHE", "HHN", "HHZ")


def write_archive(root: Path, n_stations: int, n_days: int, rate: float) -> tuple[list[Path], int]:
    """Day files (STEIM2, 4096-byte records): (paths, total samples)."""
    import obspy

    rng = np.random.default_rng(2026)
    start = obspy.UTCDateTime("2024-01-01")
    npts = int(86400 * rate)
    files, total = [], 0
    for station in range(n_stations):
        for channel in CHANNELS:
            for day in range(n_days):
                steps = rng.integers(-50, 51, npts)
                data = np.cumsum(steps).astype(np.int32)
                header = {"network": "XB", "station": f"S{station:03d}", "location": "",
                          "channel": channel, "starttime": start + day * 86400,
                          "sampling_rate": rate}  # fmt: skip
                path = root / f"XB.S{station:03d}..{channel}.{2024}.{day + 1:03d}.mseed"
                obspy.Trace(data, header).write(
                    str(path), format="MSEED", encoding="STEIM2", reclen=4096
                )
                files.append(path)
                total += npts
    return files, total


def bare_obspy(files: list[Path]) -> float:
    import obspy

    began = time.perf_counter()
    for path in files:
        obspy.read(str(path))
    return time.perf_counter() - began


def ingest_seconds(root: Path, out: Path, n_workers: int) -> float:
    from seisctf.cluster import dask_client
    from seisctf.recipes.waveforms import ingest_waveforms

    with dask_client(n_workers=n_workers, memory_limit="2GiB", quiet=True):
        ingest_waveforms([str(root)], str(out / "warmup.zarr"), quiet=True)  # imports, caches
        began = time.perf_counter()
        ingest_waveforms([str(root)], str(out / f"w{n_workers}.zarr"), quiet=True)
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stations", type=int, default=20)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    facts = machine_facts()  # before the runs: its load average is the one at start
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        root, out = Path(tmp) / "archive", Path(tmp) / "stores"
        root.mkdir()
        out.mkdir()
        files, samples = write_archive(root, args.stations, args.days, args.rate)
        megabytes = sum(path.stat().st_size for path in files) / 2**20
        bare_obspy(files)  # warm the page cache and obspy's imports
        obspy_s = bare_obspy(files)
        one = ingest_seconds(root, out, 1)
        two = ingest_seconds(root, out, 2)
    rows = [
        ("bare obspy.read (1 process)", obspy_s, 1),
        ("ingest, 1 worker", one, 1),
        ("ingest, 2 workers", two, 2),
    ]
    print(f"archive: {len(files)} files, {megabytes:.1f} MiB, {samples:,} samples "
          f"({args.stations} stations x {len(CHANNELS)} channels x {args.days} day(s) at "
          f"{args.rate:g} Hz, STEIM2)")  # fmt: skip
    for fact in facts:
        print(fact)
    print(f"load average after: {load_average()}\n")
    print("| run | seconds | samples/s | samples/s per core | per core ÷ bare obspy |")
    print("|---|---:|---:|---:|---:|")
    base = samples / obspy_s
    for name, seconds, cores in rows:
        rate = samples / seconds
        print(f"| {name} | {seconds:.2f} | {rate:,.0f} | {rate / cores:,.0f} | "
              f"{rate / cores / base:.2f} |")  # fmt: skip
    print(f"\n1 → 2 workers speed-up: {one / two:.2f} (goal ≥ 1.8); "
          f"1 worker ÷ bare obspy: {obspy_s / one:.2f} (goal ≥ 0.8)")  # fmt: skip


if __name__ == "__main__":
    main()
