"""Benchmark: `seisctf ingest waveforms` against a bare `obspy.read` of the same archive, and
against the kernels every ingest runs (its floor), in one run.

Writes a synthetic archive with obspy: --stations stations × 3 channels × --days day files at
--rate Hz (default 20 × 3 × 1 day at 20 Hz), STEIM2-compressed integer counts (a random walk,
like a broadband record), one miniSEED file per station, channel and day. Then, on a cluster of
1 worker and then on one of 2 workers, --repeat times each, interleaved:

  (a) bare obspy: `obspy.read` of every file, one after the other, in this process;
  (b) the kernel floor, in this process (no Dask, no zarr): per file, read, sha256, header scan
      and decode (the project's own `scan_file` and `read_stream`), then float32 samples in
      chunks of the store's size, each encoded with the store's codec and written to a file;
  (c) the ingest (`ingest_waveforms`: header scan, sha256, decode, merge, write zarr, progress
      marks) on an embedded LocalCluster (`seisctf.cluster.dask_client(n_workers=…)`) of 1
      worker, then of 2 workers (cluster start-up excluded; each ingest writes a fresh store).

Throughput is samples per second; medians of the runs. Goals (issue 23): ingest with 1 worker
per core ≥ 0.5 × bare obspy, or ≥ 0.9 × the kernel floor; the 1 → 2 worker speed-up ≥ 1.8
(issue 5). Prints markdown tables: the runs and, per ingest, where its time went (the two Dask
computes and the client's own work between them). `per_core_rows(files, repeat)` gives the
first table's rows for any list of files (the scale benchmark's ingest section).

    cd benchmarks && ../.venv/bin/python bench_ingest.py [--stations 20] [--days 1] [--rate 20]
        [--repeat 3] [--data-codec CNAME,CLEVEL,SHUFFLE]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_ctf_scoring import load_average, machine_facts

from seisctf.location import StoreLocation

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


def kernel_floor(files: list[Path], workdir: Path) -> float:
    """Seconds of the kernels every ingest runs, in this process (no Dask, no zarr, no merge,
    no progress marks): per file, read its bytes, sha256 them, scan the headers
    (`waveform_files.scan_file`) and decode (`waveform_files.read_stream`); then each trace's
    samples as float32, cut into chunks of the store's size (channels × block_samples), each
    encoded with the store's codec and written to a file of its own under `workdir`."""
    import hashlib

    import numcodecs.blosc

    from seisctf.formats.obspy_archive.waveform_files import read_stream, scan_file
    from seisctf.formats.obspy_archive.waveform_plan import DEFAULT_BLOCK_SAMPLES

    codec = store_codec()
    numcodecs.blosc.use_threads = False  # one core, as in a worker
    chunk = len(CHANNELS) * DEFAULT_BLOCK_SAMPLES
    workdir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    written = 0
    for path in files:
        raw = path.read_bytes()
        hashlib.sha256(raw).hexdigest()
        scan_file(str(path), raw)
        for trace in read_stream(raw):
            samples = trace.data.astype(np.float32)
            for first in range(0, len(samples), chunk):
                (workdir / f"{written}").write_bytes(codec.encode(samples[first : first + chunk]))
                written += 1
    seconds = time.perf_counter() - began
    shutil.rmtree(workdir)
    return seconds


def floor_parts(files: list[Path], workdir: Path) -> dict[str, float]:
    """CPU seconds of each kernel of `kernel_floor`, timed one by one over all files, and, for
    comparison, of what integer counts would cost instead of float32 + the store's codec:
    encoding the int32 counts with byte shuffle (same LZ4 level). Also the stored sizes."""
    import hashlib

    import numcodecs.blosc
    from numcodecs import Blosc

    from seisctf.formats.obspy_archive.waveform_files import read_stream, scan_file
    from seisctf.formats.obspy_archive.waveform_plan import DEFAULT_BLOCK_SAMPLES

    codec, codec_int = store_codec(), Blosc(store_codec().cname, store_codec().clevel,
                                            Blosc.SHUFFLE, typesize=4)  # fmt: skip
    numcodecs.blosc.use_threads = False
    chunk = len(CHANNELS) * DEFAULT_BLOCK_SAMPLES
    workdir.mkdir(parents=True, exist_ok=True)
    spent: dict[str, float] = {}
    sizes = {"float32": 0, "int32": 0}

    def timed(name, make, *args):
        began = time.process_time()
        found = make(*args)
        spent[name] = spent.get(name, 0.0) + time.process_time() - began
        return found

    for index, path in enumerate(files):
        raw = timed("read the file", path.read_bytes)
        timed("sha256", hashlib.sha256, raw)
        timed("header scan (scan_file)", scan_file, str(path), raw)
        for trace in timed("decode (read_stream)", read_stream, raw):
            samples = timed("float32", trace.data.astype, np.float32)
            for first in range(0, len(samples), chunk):
                encoded = timed("encode float32, store codec", codec.encode,
                                samples[first : first + chunk])  # fmt: skip
                sizes["float32"] += len(encoded)
                timed("write the chunk file", (workdir / f"{index}-{first}").write_bytes, encoded)
                counts = trace.data[first : first + chunk]
                if counts.dtype == np.int32:
                    sizes["int32"] += len(timed("diagnostic: encode int32, byte shuffle",
                                                codec_int.encode, counts))  # fmt: skip
    shutil.rmtree(workdir)
    return {**spent, "bytes float32": sizes["float32"], "bytes int32": sizes["int32"]}


def store_codec():
    """numcodecs' Blosc with the store's data codec settings (`waveforms.DATA_CODEC`)."""
    from numcodecs import Blosc

    from seisctf.formats.obspy_archive import waveforms

    shuffle = {"noshuffle": Blosc.NOSHUFFLE, "shuffle": Blosc.SHUFFLE,
               "bitshuffle": Blosc.BITSHUFFLE}  # fmt: skip
    codec = waveforms.DATA_CODEC
    return Blosc(codec["cname"], codec["clevel"], shuffle[codec["shuffle"]], typesize=4)


def sample_count(files: list[Path]) -> int:
    """Samples in the files (their headers)."""
    import obspy

    return sum(tr.stats.npts for path in files for tr in obspy.read(str(path), headonly=True))


def cpu_seconds() -> float:
    """CPU time (user + system, all threads) of the calling process."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ingest_seconds(client, sources: list[str], store: Path) -> dict[str, float]:
    """One ingest of `sources` into a fresh `store` on the running cluster: total seconds, scan
    and block computes, the client's own time outside them, and CPU seconds of the workers and
    of this process (client and scheduler)."""
    from seisctf import cluster
    from seisctf.formats.obspy_archive import waveforms
    from seisctf.formats.shared import resumable

    phases: dict[str, float] = {}
    compute = cluster.compute  # the blocks' (through compute_in_waves) and the scan's

    def timed(*collections, label="", quiet=False):
        began = time.perf_counter()
        found = compute(*collections, label=label, quiet=quiet)
        phases[label] = phases.get(label, 0.0) + time.perf_counter() - began
        return found

    workers_before, client_before = client.run(cpu_seconds), cpu_seconds()
    cluster.compute = resumable.compute = timed
    try:
        began = time.perf_counter()
        waveforms.ingest_waveforms(sources, StoreLocation(store), quiet=True)
        total = time.perf_counter() - began
    finally:
        cluster.compute = resumable.compute = compute
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


@dataclass
class Measured:
    """Seconds of every run, interleaved: bare obspy, its CPU seconds and the kernel floor (in
    this process, `repeat` times beside each cluster's ingests), the ingests by worker count,
    this machine's 1 → 2 process speed-ups, and the first store's data bytes."""

    samples: int
    bare: list[float] = field(default_factory=list)
    bare_cpu: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    floor_cpu: list[float] = field(default_factory=list)
    ingests: dict[int, list[dict[str, float]]] = field(default_factory=lambda: {1: [], 2: []})
    scaling: list[float] = field(default_factory=list)
    stored_bytes: int = 0
    parts: list[dict[str, float]] = field(default_factory=list)


def measure(files: list[Path], repeat: int, workdir: Path, scaling: bool = False) -> Measured:
    """Interleaved runs on `files`: on a cluster of 1 worker, then on one of 2, `repeat` times
    each: bare obspy, its CPU time, the kernel floor and an ingest into a fresh store under
    `workdir` (removed after each run); with `scaling`, the machine's own 1 → 2 process
    speed-up beside the 2-worker runs. Cluster start-up is excluded."""
    from seisctf.cluster import dask_client
    from seisctf.formats.obspy_archive.waveforms import ingest_waveforms

    found = Measured(sample_count(files))
    sources = [str(path) for path in files]
    bare_obspy(files)  # warm the page cache and obspy's imports
    kernel_floor(files, workdir / "floor")
    for n_workers in (1, 2):
        with dask_client(n_workers=n_workers, memory_limit="2GiB", quiet=True) as client:
            ingest_waveforms(sources, StoreLocation(workdir / "warmup.zarr"), quiet=True)  # imports
            shutil.rmtree(workdir / "warmup.zarr")
            for _ in range(repeat):
                found.bare.append(bare_obspy(files))
                found.bare_cpu.append(bare_obspy_cpu(files))
                cpu_before = cpu_seconds()
                found.floor.append(kernel_floor(files, workdir / "floor"))
                found.floor_cpu.append(cpu_seconds() - cpu_before)
                if scaling:  # `main`'s diagnostics
                    found.parts.append(floor_parts(files, workdir / "parts"))
                if scaling and n_workers == 2:  # the 2-worker cluster idles meanwhile
                    found.scaling.append(machine_scaling(files))
                store = workdir / f"w{n_workers}.zarr"
                found.ingests[n_workers].append(ingest_seconds(client, sources, store))
                if not found.stored_bytes:
                    chunks = (store / "data").rglob("*")
                    found.stored_bytes = sum(p.stat().st_size for p in chunks if p.is_file())
                shutil.rmtree(store)
    return found


def rows_of(found: Measured) -> list[list]:
    """[label, seconds (median), samples/s per core, ratio to bare obspy] per run kind."""
    median = statistics.median
    base = found.samples / median(found.bare)
    rows = []
    for label, runs, cores in (
        ("bare obspy.read (1 process)", found.bare, 1),
        ("kernel floor: read, sha256, header scan, decode, float32, encode, write (1 process)",
         found.floor, 1),
        ("ingest, 1 worker", [r["total"] for r in found.ingests[1]], 1),
        ("ingest, 2 workers", [r["total"] for r in found.ingests[2]], 2),
    ):  # fmt: skip
        seconds = median(runs)
        rate = found.samples / seconds / cores
        rows.append([label, seconds, rate, rate / base])
    return rows


def per_core_rows(files: list[Path], repeat: int, workdir: Path | None = None) -> list[list]:
    """Ingest per core on `files` (miniSEED or any obspy format, one sampling rate), measured
    in one run (`measure`): rows [label, seconds, samples_per_s_per_core, ratio_to_obspy] for
    bare obspy.read, the kernel floor, the ingest on 1 worker and on 2 workers."""
    if workdir is not None:
        return rows_of(measure([Path(f) for f in files], repeat, Path(workdir)))
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        return rows_of(measure([Path(f) for f in files], repeat, Path(tmp)))


def print_tables(found: Measured) -> None:
    """The markdown tables of `main`."""
    median = statistics.median
    rows = rows_of(found)
    runs = {0: found.bare, 1: found.floor, 2: [r["total"] for r in found.ingests[1]],
            3: [r["total"] for r in found.ingests[2]]}  # fmt: skip
    print("| run (median) | seconds | runs (s) | samples/s per core | per core ÷ bare obspy |")
    print("|---|---:|---|---:|---:|")
    for index, (label, seconds, rate, ratio) in enumerate(rows):
        listed = ", ".join(f"{s:.2f}" for s in runs[index])
        print(f"| {label} | {seconds:.2f} | {listed} | {rate:,.0f} | {ratio:.2f} |")
    print("\n| ingest (medians, s) | total | scan compute | block compute | client, outside "
          "computes | CPU s, workers | CPU s, client + scheduler |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n_workers, ingests in found.ingests.items():
        keys = ("total", "scan", "blocks", "client", "workers_cpu", "client_cpu")
        cells = " | ".join(f"{median(r[k] for r in ingests):.2f}" for k in keys)
        print(f"| {n_workers} worker{'s' if n_workers > 1 else ''} | {cells} |")
    one_cpu = median(r["workers_cpu"] + r["client_cpu"] for r in found.ingests[1])
    workers_cpu = median(r["workers_cpu"] for r in found.ingests[1])
    floor_cpu = median(found.floor_cpu)
    print(f"\nCPU time (it too grows when other processes share the cores): bare obspy.read "
          f"{median(found.bare_cpu):.2f} s; kernel floor {floor_cpu:.2f} s; ingest on 1 worker "
          f"{one_cpu:.2f} s (workers + client + scheduler): "
          f"{median(found.bare_cpu) / one_cpu:.2f} × bare obspy and "
          f"{floor_cpu / one_cpu:.2f} × the floor per CPU second; the worker alone "
          f"{workers_cpu:.2f} s: {floor_cpu / workers_cpu:.2f} × the floor")  # fmt: skip
    if found.scaling:
        listed = ", ".join(f"{x:.2f}" for x in found.scaling)
        print(f"\nThis machine's own 1 → 2 process speed-up (bare obspy.read in two processes "
              f"at once, between the 2-worker runs): median {median(found.scaling):.2f} "
              f"({listed})")  # fmt: skip
    if found.parts:
        print_parts(found)
    one, two = rows[2][1], rows[3][1]
    print(f"\n1 → 2 workers speed-up: {one / two:.2f} (goal ≥ 1.8); 1 worker ÷ bare obspy: "
          f"{rows[2][3]:.2f} (goal ≥ 0.5); 1 worker ÷ kernel floor: {rows[1][1] / one:.2f} "
          "(goal ≥ 0.9)")  # fmt: skip


def print_parts(found: Measured) -> None:
    """Where the kernel floor's time goes: CPU seconds of each kernel (medians)."""
    median = statistics.median
    decode = median(p["decode (read_stream)"] for p in found.parts)
    print("\n| kernel (CPU s, median, all files) | seconds | ÷ decode |")
    print("|---|---:|---:|")
    for name in found.parts[0]:
        if not name.startswith("bytes"):
            seconds = median(p[name] for p in found.parts)
            print(f"| {name} | {seconds:.3f} | {seconds / decode:.2f} |")
    floats, ints = found.parts[0]["bytes float32"], found.parts[0]["bytes int32"]
    print(f"\nEncoded: float32 with the store's codec {floats / 2**20:.1f} MiB; int32 counts "
          f"with byte shuffle {ints / 2**20:.1f} MiB")  # fmt: skip


def main() -> None:
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
    from seisctf.formats.obspy_archive import waveforms

    if args.data_codec:  # the client creates the arrays: the workers follow their metadata
        cname, clevel, shuffle = args.data_codec.split(",")
        waveforms.DATA_CODEC = {"cname": cname, "clevel": int(clevel), "shuffle": shuffle}
    facts = machine_facts()  # before the runs: its load average is the one at start
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        root = Path(tmp) / "archive"
        root.mkdir()
        files, samples = write_archive(root, args.stations, args.days, args.rate)
        megabytes = sum(path.stat().st_size for path in files) / 2**20
        found = measure(files, args.repeat, Path(tmp), scaling=True)
    print(f"data codec: Blosc {waveforms.DATA_CODEC}")
    print(f"archive: {len(files)} files, {megabytes:.1f} MiB, {samples:,} samples "
          f"({args.stations} stations x {len(CHANNELS)} channels x {args.days} day(s) at "
          f"{args.rate:g} Hz, STEIM2); store's data chunks: {found.stored_bytes / 2**20:.1f} "
          f"MiB ({samples * 4 / found.stored_bytes:.2f}x smaller than float32)")  # fmt: skip
    for fact in facts:
        print(fact)
    print(f"load average after: {load_average()}\n")
    print_tables(found)


if __name__ == "__main__":
    main()
