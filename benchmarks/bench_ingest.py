"""Benchmark: `seisctf ingest waveforms` against a bare `obspy.read` of the same archive.

Writes a synthetic archive with obspy: --stations stations × 3 channels × --days day files at
--rate Hz (default 20 × 3 × 1 day at 20 Hz), STEIM2-compressed integer counts (a random walk,
like a broadband record), one miniSEED file per station, channel and day. Then, on a cluster of
1 worker and then on one of 2 workers, --repeat times each, interleaved:

  (a) bare obspy: `obspy.read` of every file, one after the other, in this process;
  (b) the ingest (`ingest_waveforms`: header scan, sha256, decode, merge, write zarr) on an
      embedded LocalCluster (`seisctf.cluster.dask_client(n_workers=…)`) of 1 worker, then of
      2 workers (cluster start-up excluded; each ingest writes a fresh store);
  (c) diagnostic, the kernels alone in this process (no Dask, no zarr): obspy's miniSEED
      reader, float32 conversion and the store's chunk codec on every 3 × block_samples chunk.

Throughput is samples per second; medians of the runs. Goals: ingest with 1 worker per core
≥ 0.8 × bare obspy, and the 1 → 2 worker speed-up ≥ 1.8. Prints markdown tables: the runs and,
per ingest, where its time went (the two Dask computes and the client's own work between them).

    cd benchmarks && ../.venv/bin/python bench_ingest.py [--stations 20] [--days 1] [--rate 20]
        [--repeat 3] [--data-codec CNAME,CLEVEL,SHUFFLE]
"""

from __future__ import annotations

import argparse
import io
import statistics
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


def bare_obspy_cpu(files: list[Path]) -> float:
    began = cpu_seconds()
    bare_obspy(files)
    return cpu_seconds() - began


def machine_scaling(files: list[Path]) -> float:
    """This machine's own 1 → 2 process speed-up on embarrassingly parallel work, measured
    now: `bare_obspy` of every file in one process alone, then in two processes at once
    (throughput ratio). A ceiling for the ingest's speed-up on the same cores."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(bare_obspy, [files[:2]] * 2)  # imports
        alone = pool.apply(bare_obspy, (files,))
        both = pool.map(bare_obspy, [files, files], chunksize=1)
    return 2 * alone / max(both)


def kernels(files: list[Path]) -> float:
    """Decode (obspy's miniSEED reader on the bytes), float32, encode every chunk with the
    store's codec, per station (its three channels side by side, as the store lays them out)."""
    import numcodecs.blosc
    from numcodecs import Blosc
    from obspy.io.mseed.core import _read_mseed

    from seisctf.recipes.ingest.waveform_plan import DEFAULT_BLOCK_SAMPLES
    from seisctf.recipes.ingest.waveforms import DATA_CODEC

    shuffle = {
        "noshuffle": Blosc.NOSHUFFLE,
        "shuffle": Blosc.SHUFFLE,
        "bitshuffle": Blosc.BITSHUFFLE,
    }
    blosc = Blosc(DATA_CODEC["cname"], DATA_CODEC["clevel"], shuffle[DATA_CODEC["shuffle"]],
                  typesize=4)  # fmt: skip
    numcodecs.blosc.use_threads = False  # one core, as in a worker (zarr sets the same)
    began = time.perf_counter()
    for first in range(0, len(files), len(CHANNELS)):
        rows = [
            _read_mseed(io.BytesIO(path.read_bytes()))[0].data.astype(np.float32)
            for path in files[first : first + len(CHANNELS)]
        ]
        station = np.stack(rows)
        for start in range(0, station.shape[1], DEFAULT_BLOCK_SAMPLES):
            blosc.encode(np.ascontiguousarray(station[:, start : start + DEFAULT_BLOCK_SAMPLES]))
    return time.perf_counter() - began


def cpu_seconds() -> float:
    """CPU time (user + system, all threads) of the calling process."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ingest_seconds(client, root: Path, out: Path, run: int) -> dict[str, float]:
    """One ingest on the running cluster: total seconds, scan and block computes, the client's
    own time outside them, and CPU seconds of the workers and of this process (client and
    scheduler)."""
    from seisctf.recipes.ingest import resumable, waveforms

    phases: dict[str, float] = {}
    compute = waveforms.compute

    def timed(*collections, label="", quiet=False):
        began = time.perf_counter()
        found = compute(*collections, label=label, quiet=quiet)
        phases[label] = phases.get(label, 0.0) + time.perf_counter() - began
        return found

    n_workers = len(client.scheduler_info()["workers"])
    workers_before, client_before = client.run(cpu_seconds), cpu_seconds()
    waveforms.compute = resumable.compute = timed  # the blocks' and the scan's
    try:
        began = time.perf_counter()
        waveforms.ingest_waveforms([str(root)], str(out / f"w{n_workers}-{run}.zarr"), quiet=True)
        total = time.perf_counter() - began
    finally:
        waveforms.compute = resumable.compute = compute
    workers_after, client_after = client.run(cpu_seconds), cpu_seconds()
    scan, blocks = phases.get("scan", 0.0), phases.get("ingest waveforms", 0.0)
    return {
        "total": total,
        "scan": scan,
        "blocks": blocks,
        "client": total - scan - blocks,
        "workers_cpu": sum(workers_after[w] - workers_before[w] for w in workers_before),
        "client_cpu": client_after - client_before,
    }


def main() -> None:
    from seisctf.cluster import dask_client
    from seisctf.recipes.ingest.waveforms import ingest_waveforms

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stations", type=int, default=20)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data-codec",
        metavar="CNAME,CLEVEL,SHUFFLE",
        help="diagnostic: another Blosc codec for the data chunks (e.g. lz4,0,noshuffle: none)",
    )
    args = parser.parse_args()
    if args.data_codec:  # the client creates the arrays: the workers follow their metadata
        from seisctf.recipes.ingest import waveforms

        cname, clevel, shuffle = args.data_codec.split(",")
        waveforms.DATA_CODEC = {"cname": cname, "clevel": int(clevel), "shuffle": shuffle}
    facts = machine_facts()  # before the runs: its load average is the one at start
    bare, bare_cpu, kernel, scaling, ingests = [], [], [], [], {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        root, out = Path(tmp) / "archive", Path(tmp) / "stores"
        root.mkdir()
        out.mkdir()
        files, samples = write_archive(root, args.stations, args.days, args.rate)
        megabytes = sum(path.stat().st_size for path in files) / 2**20
        bare_obspy(files)  # warm the page cache and obspy's imports
        kernels(files)
        for n_workers in (1, 2):
            with dask_client(n_workers=n_workers, memory_limit="2GiB", quiet=True) as client:
                ingest_waveforms([str(root)], str(out / "warmup.zarr"), quiet=True)  # imports
                for run in range(args.repeat):
                    bare.append(bare_obspy(files))
                    bare_cpu.append(bare_obspy_cpu(files))
                    kernel.append(kernels(files))
                    if n_workers == 2:  # the 2-worker cluster idles meanwhile
                        scaling.append(machine_scaling(files))
                    ingests[n_workers].append(ingest_seconds(client, root, out, run))
        stored = sum(
            p.stat().st_size for p in (out / "w1-0.zarr" / "data").rglob("*") if p.is_file()
        )
    from seisctf.recipes.ingest.waveforms import DATA_CODEC

    print(f"data codec: Blosc {DATA_CODEC}")
    print(f"archive: {len(files)} files, {megabytes:.1f} MiB, {samples:,} samples "
          f"({args.stations} stations x {len(CHANNELS)} channels x {args.days} day(s) at "
          f"{args.rate:g} Hz, STEIM2); store's data chunks: {stored / 2**20:.1f} MiB "
          f"({samples * 4 / stored:.2f}x smaller than float32)")  # fmt: skip
    for fact in facts:
        print(fact)
    print(f"load average after: {load_average()}\n")
    median = statistics.median
    obspy_s = median(bare)
    one = median(r["total"] for r in ingests[1])
    two = median(r["total"] for r in ingests[2])
    rows = [
        ("bare obspy.read (1 process)", bare, 1),
        ("kernels only: decode + float32 + chunk codec (1 process)", kernel, 1),
        ("ingest, 1 worker", [r["total"] for r in ingests[1]], 1),
        ("ingest, 2 workers", [r["total"] for r in ingests[2]], 2),
    ]
    print("| run (median) | seconds | runs (s) | samples/s per core | "
          "per core ÷ bare obspy |")  # fmt: skip
    print("|---|---:|---|---:|---:|")
    base = samples / obspy_s
    for name, runs, cores in rows:
        seconds = median(runs)
        rate = samples / seconds / cores
        listed = ", ".join(f"{s:.2f}" for s in runs)
        print(f"| {name} | {seconds:.2f} | {listed} | {rate:,.0f} | {rate / base:.2f} |")
    print("\n| ingest (medians, s) | total | scan compute | block compute | client, outside "
          "computes | CPU s, workers | CPU s, client + scheduler |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n_workers, runs in ingests.items():
        keys = ("total", "scan", "blocks", "client", "workers_cpu", "client_cpu")
        cells = " | ".join(f"{median(r[k] for r in runs):.2f}" for k in keys)
        print(f"| {n_workers} worker{'s' if n_workers > 1 else ''} | {cells} |")
    one_cpu = median(r["workers_cpu"] + r["client_cpu"] for r in ingests[1])
    print(f"\nCPU time (it too grows when other processes share the cores): bare obspy.read "
          f"{median(bare_cpu):.2f} s; ingest on 1 worker {one_cpu:.2f} s (workers + client + "
          "scheduler): "
          f"{median(bare_cpu) / one_cpu:.2f} × bare obspy per CPU second")  # fmt: skip
    listed = ", ".join(f"{x:.2f}" for x in scaling)
    print(f"\nThis machine's own 1 → 2 process speed-up (bare obspy.read in two processes at "
          f"once, between the 2-worker runs): median {median(scaling):.2f} ({listed})")  # fmt: skip
    print(f"\n1 → 2 workers speed-up: {one / two:.2f} (goal ≥ 1.8); "
          f"1 worker ÷ bare obspy: {obspy_s / one:.2f} (goal ≥ 0.8)")  # fmt: skip


if __name__ == "__main__":
    main()
