"""Benchmark: training reads — samples/s through SeisBench's `GenericGenerator` with the PhaseNet
tutorial's augmentations and a torch DataLoader (`formats.seisbench.seisbench_training`), from
SeisBench's own HDF5 dataset and from the event-window store ingested from it (local, and on S3:
SeaweedFS on loopback, started here), with 0 and 2 DataLoader workers; the peak RSS of every
loader process.

Data, under --data DIR (made when missing, not timed): `sb/`, a chunked SeisBench dataset
(`make_archive.py seisbench DIR/sb --windows N --samples S`: 3 × S float32 windows at 100 Hz,
noise with P and S arrivals), and `sb.zarr`, `seisctf ingest seisbench DIR/sb --out DIR/sb.zarr`.
For the S3 rows the store is uploaded into a SeaweedFS started for the run (data in
DIR/seaweedfs, removed at the end; the upload is not timed; 1 MB chunks and an in-memory chunk
cache twice the store's size: `weed_options`), then read twice, untimed, so that the server
answers from memory as the page cache answers the local rows (`warm_server_cache`); the time
of one window-sized ranged GET is measured beside (presigned on a kept connection, as the
reader reads; s3fs).

Each row runs in a fresh process (`--row NAME --workers N`): opens its dataset (SeisBench:
`WaveformDataset(DIR/sb, component_order="ZNE")`, its defaults: `cache=None`; store:
`seisctf.catalogs.seisbench_dataset(URL)`, its defaults: `cache_bytes` 256 MiB), builds
`phasenet_loader(dataset, seed=0, num_workers=N, batch_size=--batch, batch_reads=B)` (shuffled,
seeded; B: the row's, False for SeisBench: its own plain GenericGenerator; on S3 one row of
each), skips --warmup batches (worker start-up), then times --batches batches: samples/s;
then times --reads `get_sample` calls alone (random rows, no augmentation): the reads, which is
what the two kinds of dataset differ in (the augmentations cost both the same).
Peak RSS (VmHWM) of the loader's main process and of each worker, read from /proc before the
workers stop; on S3 also the server's CPU time (its process's user + system seconds over the
row) per sample read. Before each row its files are read once and the other dataset's dropped
from the page cache (`page_cache_only`). Every row runs --rounds times, the rows in turn within
a round, SeisBench first: the table gives medians over the rounds, and the median and range of
each round's ratio to SeisBench's run of the same round with the same workers (this machine's
speed drifts by 10-20 % from minute to minute).

Then the same readers once more, in this one process and interleaved block by block (the same
rows and augmentation draws for each): medians of the generator's and of `get_sample`'s time a
sample, which the machine's other work hits alike (`interleaved`).

Rows are the entries of ROWS (name → a function opening the dataset a row reads): a reader of
another kind (say xarray random batches) is one more entry there, plus its line in ORDER.

    .venv/bin/python benchmarks/bench_training_reads.py --data /path/to/train [--windows 144000]
        [--samples 3000] [--batch 64] [--batches 150] [--rounds 3] [--warmup 4] [--skip-s3]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))
sys.path.insert(2, str(HERE.parent / "tests"))

from bench_ctf_scoring import load_average  # noqa: E402

from seisctf.formats.seisbench.seisbench_training import (  # noqa: E402
    BatchReads,
    phasenet_generator,
    phasenet_loader,
)
from seisctf.location import StoreLocation  # noqa: E402

MIB = 2**20
BUCKET = "train"


def open_seisbench(args: argparse.Namespace) -> Any:
    import seisbench.data as sbd

    return sbd.WaveformDataset(Path(args.data) / "sb", component_order="ZNE")


def open_store(args: argparse.Namespace) -> Any:
    from seisctf.catalogs import seisbench_dataset

    return seisbench_dataset(str(Path(args.data) / "sb.zarr"))


def open_store_s3(args: argparse.Namespace) -> Any:
    from seisctf.catalogs import seisbench_dataset

    return seisbench_dataset(f"s3://{BUCKET}/sb.zarr", json.loads(args.storage_options))


# name -> (opener, what the row reads, batch_reads: the loader's `BatchReads`, else SeisBench's
# plain GenericGenerator, the folder under --data its files are in: None on S3, read from the
# server's memory); ORDER: the table's rows, SeisBench (the reference) first.
ROWS: dict[str, tuple[Callable[[argparse.Namespace], Any], str, bool, str | None]] = {
    "seisbench": (open_seisbench, "SeisBench WaveformDataset, HDF5 (local)", False, "sb"),
    "store": (open_store, "seisctf store, local", True, "sb.zarr"),
    "store-s3": (open_store_s3, "seisctf store, S3 (SeaweedFS, loopback)", True, None),
    "store-s3-per-sample": (
        open_store_s3,
        "seisctf store, S3, one read a sample (plain GenericGenerator)",
        False,
        None,
    ),
}
ORDER = ["seisbench", "store", "store-s3", "store-s3-per-sample"]


def peak_rss_bytes(pid: int | str = "self") -> int:
    """VmHWM of a process (its peak resident set), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run_row(args: argparse.Namespace) -> dict[str, Any]:
    """One row, in this process: samples/s and peak RSS of the loader's processes."""
    logging.getLogger("seisbench").setLevel(logging.ERROR)
    opener, _, batch_reads, _ = ROWS[args.row]
    began = time.perf_counter()
    dataset = opener(args)
    opened_s = time.perf_counter() - began
    batches = iter(
        phasenet_loader(
            dataset,
            seed=0,
            num_workers=args.workers,
            batch_size=args.batch,
            batch_reads=batch_reads,
        )
    )
    for _ in range(args.warmup):
        next(batches)
    began = time.perf_counter()
    samples = sum(len(next(batches)["X"]) for _ in range(args.batches))
    seconds = time.perf_counter() - began
    workers = [peak_rss_bytes(w.pid) for w in getattr(batches, "_workers", [])]
    del batches
    rows = np.random.default_rng(1).integers(0, len(dataset), args.reads).tolist()
    began = time.perf_counter()
    for row in rows:  # the dataset's reads alone, no augmentation: what the readers differ in
        dataset.get_sample(row)
    get_sample_s = (time.perf_counter() - began) / len(rows)
    return {
        "get_sample_ms": 1e3 * get_sample_s,
        "samples": samples,
        "seconds": seconds,
        "samples_per_s": samples / seconds,
        "open_s": opened_s,
        "rss_main": peak_rss_bytes(),
        "rss_workers": workers,
    }


def child(args: argparse.Namespace, row: str, workers: int, options: dict) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--data", args.data,
        "--row", row,
        "--workers", str(workers),
        "--batch", str(args.batch),
        "--batches", str(args.batches),
        "--warmup", str(args.warmup),
        "--reads", str(args.reads),
        "--storage-options", json.dumps(options),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"row {row} ({workers} workers) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_data(args: argparse.Namespace) -> None:
    """DIR/sb (make_archive.py seisbench) and DIR/sb.zarr (ingest), when missing."""
    root = Path(args.data)
    if not (root / "sb" / "chunks").is_file():
        subprocess.run(
            [sys.executable, str(HERE / "make_archive.py"), "seisbench", str(root / "sb"),
             "--windows", str(args.windows), "--samples", str(args.samples)],
            check=True,
        )  # fmt: skip
    if not (root / "sb.zarr" / "zarr.json").is_file():
        from seisctf.formats.seisbench.ingest import ingest_seisbench

        ingest_seisbench(str(root / "sb"), StoreLocation(root / "sb.zarr"), quiet=True)


def page_cache_only(root: Path, keep: set[str]) -> None:
    """Hold in the page cache the files of the folders `keep` under `root` (each read once)
    and none of the other datasets' (`posix_fadvise` DONTNEED), so that every row reads from
    memory and runs with only its own files cached. This machine hands idle page cache back
    to its host within minutes: without the reads, a row read from disk what the one before it
    read from memory. In sequences run by hand with both datasets cached (9 GiB), the store's
    2-worker row was at times 10-20 % slower, one worker spending two to three times the kernel
    time a sample for the same page faults; whole runs of this script showed no clear
    difference (2026-12-03)."""
    for name in {ROWS[row][3] for row in ROWS} - {None}:
        for path in sorted((root / name).rglob("*")):
            if not path.is_file():
                continue
            descriptor = os.open(path, os.O_RDONLY)
            try:
                if name in keep:
                    while os.read(descriptor, 16 * MIB):
                        pass
                else:
                    os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(descriptor)


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# SeaweedFS stores an object in chunks of `-filer.maxMB` (default 4 MB) and reads a whole chunk
# to serve a ranged GET inside it: 2.05 ms of server CPU for a 30 KB GET at 4 MB, 1.02 ms at
# 1 MB (1,500 random GETs over 32 objects of 16 MB, 2026-12-03); 1 MB is its smallest setting.
# Its S3 gateway keeps chunks in memory (`-s3.cacheCapacityMB`, sized here to twice the store:
# at 1.2 times some chunks were still read again): with the store in it, 0.32-0.39 ms a GET
# (0.69-0.71 without). The local rows read from the page cache; the S3 rows, from the server's
# memory, filled by reading the store twice before them (`warm_server_cache`).
WEED_OPTIONS = ("-filer.maxMB=1",)


def weed_options(store_bytes: int) -> tuple[str, ...]:
    return (*WEED_OPTIONS, f"-s3.cacheCapacityMB={2 * store_bytes // MIB + 64}")


def s3_store(args: argparse.Namespace):
    """SeaweedFS on loopback with the store uploaded: (server, storage options, upload s)."""
    from servers import start_s3

    folder = Path(args.data) / "seaweedfs"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    server = start_s3(folder, options=weed_options(tree_bytes(Path(args.data) / "sb.zarr")))
    fs = server.filesystem()
    fs.mkdir(BUCKET)
    began = time.perf_counter()
    fs.put(str(Path(args.data) / "sb.zarr"), f"{BUCKET}/sb.zarr", recursive=True)
    return server, server.storage_options, time.perf_counter() - began


def warm_server_cache(server, passes: int = 2) -> float:
    """Read every object of the uploaded store `passes` times in 1 MB ranges (a stored chunk
    each): the S3 gateway's chunk cache then holds the store, as the page cache holds the local
    rows' files (one pass of whole GETs left it part-filled: 2.6 GiB of 4.3). Seconds."""
    fs = server.filesystem()
    began = time.perf_counter()
    objects = fs.find(f"{BUCKET}/sb.zarr", detail=True)
    for _ in range(passes):
        for path, info in objects.items():
            for start in range(0, int(info["size"]), MIB):
                fs.cat_file(path, start=start, end=min(start + MIB, int(info["size"])))
    return time.perf_counter() - began


def s3_request_ms(server, n: int = 300) -> dict[str, float]:
    """Median ms of one 30 KB ranged GET of a shard of the uploaded store (a window's size):
    through the store's reader (`byte_ranges.SignedRanges`: a presigned URL on a kept
    http.client connection) and through s3fs's `cat_file` (`signed_urls=False`)."""
    import statistics

    from seisctf.catalogs.byte_ranges import SignedRanges

    fs = server.filesystem()
    shards = [p for p in fs.find(f"{BUCKET}/sb.zarr/waveforms/c") if fs.size(p) > 2**20]
    rng = np.random.default_rng(2)
    picks = [(shards[rng.integers(len(shards))], int(rng.integers(0, 2**20))) for _ in range(n)]
    signed, times = SignedRanges(fs), {"signed": [], "s3fs": []}
    for path, start in picks:
        began = time.perf_counter()
        signed.read(path, start, start + 30_000)
        times["signed"].append(time.perf_counter() - began)
        began = time.perf_counter()
        fs.cat_file(path, start=start, end=start + 30_000)
        times["s3fs"].append(time.perf_counter() - began)
    return {name: 1e3 * statistics.median(values) for name, values in times.items()}


def interleaved(args: argparse.Namespace, names: list[str], blocks: int = 30) -> list[str]:
    """The readers `names` in this one process, interleaved block by block (64 random rows a
    block, the same rows and the same augmentation draws for each): median ms a sample through
    the generator and of `get_sample` alone, so the machine's load changes hit all alike."""
    import statistics

    logging.getLogger("seisbench").setLevel(logging.ERROR)
    datasets = {name: ROWS[name][0](args) for name in names}
    batch = {}  # name -> the samples of a list of rows, as the row's loader makes them
    for name, dataset in datasets.items():
        generator = phasenet_generator(dataset)
        batch[name] = (
            BatchReads(generator).__getitems__
            if ROWS[name][2]
            else (lambda rows, generator=generator: [generator[row] for row in rows])
        )
    rng = np.random.default_rng(3)
    times: dict[str, dict[str, list[float]]] = {n: {"gen": [], "get": []} for n in names}
    for block in range(blocks):
        rows, other = rng.integers(0, len(datasets[names[0]]), (2, 64)).tolist()
        for name in names:
            np.random.seed(block)
            began = time.perf_counter()
            batch[name](rows)
            middle = time.perf_counter()
            for row in other:  # other rows: none in a reader's cache from the generator's reads
                datasets[name].get_sample(row)
            times[name]["gen"].append((middle - began) / len(rows))
            times[name]["get"].append((time.perf_counter() - middle) / len(rows))
    median = {n: {k: 1e3 * statistics.median(v) for k, v in t.items()} for n, t in times.items()}
    lines = [
        "| reader (one process, interleaved) | generator ms / sample | × SeisBench | get_sample ms "
        "| × SeisBench |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        gen, get = median[name]["gen"], median[name]["get"]
        lines.append(
            f"| {ROWS[name][1]} | {gen:.2f} | {median[names[0]]['gen'] / gen:.2f} "
            f"| {get:.2f} | {median[names[0]]['get'] / get:.2f} |"
        )
    return lines


def cpu_seconds(server: Any) -> float:
    """User + system CPU seconds of the S3 server's process so far (0 without a server)."""
    if server is None:
        return 0.0
    import psutil

    times = psutil.Process(server.process.pid).cpu_times()
    return times.user + times.system


def table(results: dict[tuple[str, int], list[dict]], workers: list[int]) -> list[str]:
    """One line a row and worker count: medians over the rounds (samples/s, `get_sample`, open
    time, server CPU), the median and range of the round-by-round ratios to SeisBench (its run
    of the same round), the highest peak RSS."""
    import statistics

    lines = [
        "| reader | workers | samples/s | × SeisBench | range of rounds | get_sample alone (ms) "
        "| peak RSS main (MiB) | peak RSS per worker (MiB) | open (s) "
        "| S3 server CPU ms / sample |",
        "|---|---:|---:|---:|---|---:|---:|---|---:|---:|",
    ]
    for row in ORDER:
        for n in workers:
            if (row, n) not in results:
                continue
            rounds = results[(row, n)]
            ratios = [
                got["samples_per_s"] / reference["samples_per_s"]
                for got, reference in zip(rounds, results[("seisbench", n)], strict=True)
            ]

            def median(key: str, rounds=rounds) -> float:
                return statistics.median(got[key] for got in rounds)

            per_worker = [max(r) for r in zip(*(got["rss_workers"] for got in rounds), strict=True)]
            server = "—" if rounds[0]["server_cpu_ms"] is None else f"{median('server_cpu_ms'):.2f}"
            lines.append(
                f"| {ROWS[row][1]} | {n} | {median('samples_per_s'):.0f} "
                f"| {statistics.median(ratios):.2f} | {min(ratios):.2f}–{max(ratios):.2f} "
                f"| {median('get_sample_ms'):.2f} "
                f"| {max(got['rss_main'] for got in rounds) / MIB:.0f} "
                f"| {', '.join(f'{r / MIB:.0f}' for r in per_worker) or '—'} "
                f"| {median('open_s'):.1f} "
                f"| {server} |"
            )
    return lines


def run_child(
    args: argparse.Namespace, root: Path, row: str, workers: int, options: dict, server: Any
) -> dict[str, Any]:
    """One row in a fresh process, its files read just before (local rows); on S3 with the
    server's CPU over the row, per sample the row read (timed batches, warm-up and the
    get_sample calls; a few batches more sit in the workers' queues)."""
    page_cache_only(root, {ROWS[row][3]} - {None})
    server_cpu_before = cpu_seconds(server)
    got = child(args, row, workers, options)
    samples = (args.warmup + args.batches) * args.batch + args.reads
    server_ms = 1e3 * (cpu_seconds(server) - server_cpu_before) / samples
    got["server_cpu_ms"] = server_ms if "-s3" in row else None
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder of sb/ and sb.zarr (made if missing)")
    parser.add_argument("--windows", type=int, default=144_000)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3, help="runs of every row, in turn")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--reads", type=int, default=500, help="get_sample calls timed alone")
    parser.add_argument("--blocks", type=int, default=30, help="of the interleaved part")
    parser.add_argument("--workers", type=int, nargs="*", default=[0, 2])
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--row", choices=sorted(ROWS), help=argparse.SUPPRESS)
    parser.add_argument("--storage-options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        args.workers = args.workers[0]
        print(json.dumps(run_row(args)))
        return
    make_data(args)
    root = Path(args.data)
    print(
        f"SeisBench dataset {tree_bytes(root / 'sb') / 2**30:.2f} GiB, store "
        f"{tree_bytes(root / 'sb.zarr') / 2**30:.2f} GiB; load average at start {load_average()}"
    )
    server, options, upload_s = (None, {}, 0.0) if args.skip_s3 else s3_store(args)
    if server:
        cache_s = warm_server_cache(server)
        floor = s3_request_ms(server)
        print(
            f"uploaded the store to SeaweedFS in {upload_s:.0f} s, read it twice in "
            f"{cache_s:.0f} s "
            f"(server RSS {peak_rss_bytes(server.process.pid) / 2**30:.1f} GiB); a 30 KB GET: "
            f"{floor['signed']:.2f} ms (presigned, the reader's), {floor['s3fs']:.2f} ms (s3fs), "
            "medians"
        )
    results: dict[tuple[str, int], list[dict]] = {}
    try:
        for round_number in range(1, args.rounds + 1):
            for row in ORDER:
                if "-s3" in row and server is None:
                    continue
                for n in args.workers:
                    got = run_child(args, root, row, n, options, server)
                    results.setdefault((row, n), []).append(got)
                    print(
                        f"round {round_number}, {row}, {n} workers: "
                        f"{got['samples_per_s']:.0f} samples/s"
                    )
        same_process = [name for name in ORDER if server or "-s3" not in name]
        args.storage_options = json.dumps(options)
        page_cache_only(root, {ROWS[name][3] for name in same_process} - {None})
        one_process = interleaved(args, same_process, args.blocks)
    finally:
        if server is not None:
            from servers import stop_process

            stop_process(server.process)
            shutil.rmtree(root / "seaweedfs", ignore_errors=True)
    print(
        f"\nload average at end {load_average()}; batch {args.batch}, {args.batches} timed, "
        f"{args.rounds} rounds"
    )
    print("\n".join(table(results, args.workers)))
    print("\nThe readers interleaved in one process (medians of", args.blocks, "blocks):")
    print("\n".join(one_process))


if __name__ == "__main__":
    main()
