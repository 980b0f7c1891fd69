"""Capacity model: measured per-unit costs -> wall time, tasks, S3 requests and bytes at scale.

    .venv/bin/python benchmarks/capacity_model.py            # the tables of docs/scaling.md

The unit costs are the figures `bench_scale.py` measured (benchmarks/RESULTS.md, "Scale"); the
projections are arithmetic on them. Every input is listed in `BASIS` as measured (with its
command and figure), assumed (with why) or the code's own default, and printed with its value.
The scan keeps each input in its host's cache, so the block tasks read it from storage again
only beyond the cache's size (`Settings.read_passes`, `Limits.worker_cache_bytes`); the client
plans on columns and finishes serially (per-file costs measured up to 10^5 files, sub-linear
there, extrapolated linearly: an upper bound). The client holds the measured bytes a file;
the coverage, 4 bytes a (station, block), is written by tasks from the runs' records (a GET a
run, a PUT a chunk of it), not held by the client. A projection is a lower bound on wall time:
it assumes the per-core rates measured on 2 cores hold on every worker and that storage
delivers the bytes (the S3 limits it hits are flagged). Not modelled: opening a store (its
metadata and the chunk counts along its axes: `bench_scale.py --only open`, 0.05 s at 10^8
chunks), the inputs table (a few objects per 2^17 files).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Store bytes per sample: float32 under Blosc LZ4 + bit shuffle, as measured on make_archive.py's
# broadband counts (the 3 GB byte-curve store: 2.79 GB for 1.66e9 samples).
STORE_BYTES_PER_SAMPLE = 2.79e9 / 1.66e9
# The scheduler's own CPU per task it runs, and its memory per task of a graph it holds
# (scale_scheduler.py at 1.01 M graph keys, RESULTS.md): 673 us of CPU a key, and a fused
# blockwise graph runs one task per 2.94 keys, so ~2 ms a task run; 2.51 KiB a key held.
SCHEDULER_S_PER_TASK = 673e-6 * 1_010_754 / (333_333 + 10_753)
SCHEDULER_BYTES_PER_TASK = 2.51 * 1024
# The coverage array: float32 per (station, time block), written by tasks from the runs'
# records in zarr's chunks of it (`coverage_parts`): 1.50 MB for (552, 334,000), 18 x 20,875.
COVERAGE_BYTES = 4
COVERAGE_CHUNK_BYTES = 18 * 20_875 * COVERAGE_BYTES
MB = 1e6
GB = 1e9
TB = 1e12


@dataclass(frozen=True)
class UnitCosts:
    """Per-unit costs measured by the benchmarks (benchmarks/RESULTS.md, "Scale")."""

    ingest_cpu_s_per_sample: float  # all processes' CPU per miniSEED sample ingested
    ingest_s_per_file: float  # per-file task time beyond the samples (scan + write, small files)
    client_bytes_per_file: float  # client peak RSS growth per input file
    client_plan_s_per_file: float  # the client's serial planning (gather, check, plan, store)
    client_finish_s_per_file: float  # the client's serial finish (coverage, attrs, metadata)
    seisbench_cpu_s_per_window: float  # all processes' CPU per 3 x 3000 window ingested
    seisbench_fixed_s: float  # `ingest seisbench`'s fixed wall time (imports, cluster, catalogue)
    split_s_per_row: float  # `seisctf split --audit`, source clusters, whole command
    split_client_bytes_per_row: float
    score_picks_s_per_row: float  # `seisctf score picks`, Parquet submission, whole command
    scheduler_s_per_task: float  # the scheduler's own time per task (it is one process)
    scheduler_bytes_per_task: float  # scheduler memory per task of a graph it holds
    parallel_efficiency: float = 0.9  # assumed: measured 1 -> 2 speed-ups here are load-bound


@dataclass(frozen=True)
class Limits:
    """Outside limits the projections are checked against (documented, not measured here)."""

    s3_put_per_s_per_prefix: float = 3_500  # AWS S3 request rate guideline per prefix
    s3_get_per_s_per_prefix: float = 5_500  # the same, GET and HEAD
    s3_list_keys_per_request: int = 1_000  # ListObjectsV2 page size
    s3_request_s: float = 0.02  # one small request's latency inside a region (assumed)
    s3_requests_per_file_read: int = 2  # s3fs: a HEAD when the file opens, one GET to read it
    scheduler_memory_bytes: float = 16 * 2**30  # a generous scheduler host
    client_memory_bytes: float = 16 * 2**30
    worker_gbps: float = 1.0  # sustained S3 bytes/s one worker can pull (Gbit/s, assumed)
    worker_cache_bytes: float = 50e9  # local disk a worker's input cache may use (assumed)


@dataclass(frozen=True)
class Archive:
    """A continuous archive of miniSEED files, one per channel and `file_seconds`, to ingest
    into one waveform store; its file count follows from its bytes."""

    name: str
    bytes: float
    mseed_bytes_per_sample: float
    sample_rate_hz: float = 100.0
    file_seconds: float = 86_400.0  # day files
    channels: int = 3

    @property
    def samples(self) -> float:
        return self.bytes / self.mseed_bytes_per_sample

    @property
    def files(self) -> int:
        return math.ceil(self.samples / (self.sample_rate_hz * self.file_seconds))


@dataclass(frozen=True)
class Settings:
    """The ingest's own sizes (seisctf's defaults, read from the code by `defaults()`)."""

    block_samples: int  # samples per store chunk along time
    run_max_blocks: int  # blocks one ingest task writes at most
    scan_tasks_min: int  # scan tasks (the plan's partitions) at least
    scan_tasks_per_worker: int  # scan tasks a worker of the cluster
    wave_tasks: int  # tasks a phase holds on the scheduler at most
    read_passes: int = 2  # the scan, then the block tasks; 1 where the input cache holds it


def defaults() -> Settings:
    from seisctf.cluster import MAX_TASKS_PER_WAVE
    from seisctf.formats.obspy_archive import waveform_blocks, waveform_plan
    from seisctf.formats.shared import resumable

    return Settings(
        block_samples=waveform_plan.DEFAULT_BLOCK_SAMPLES,
        run_max_blocks=waveform_blocks.RUN_MAX_BLOCKS,
        scan_tasks_min=resumable.SCAN_TASKS,
        scan_tasks_per_worker=resumable.SCAN_TASKS_PER_WORKER,
        wave_tasks=MAX_TASKS_PER_WAVE,
    )


@dataclass(frozen=True)
class Projection:
    workers: int
    wall_s: float
    compute_s: float
    list_s: float
    client_serial_s: float
    scheduler_s: float
    scan_tasks: int
    ingest_tasks: int
    waves: int
    gets: int
    puts: int
    read_bytes: float
    written_bytes: float
    wave_graph_bytes: float
    client_bytes: float
    get_per_s: float
    put_per_s: float
    pressures: dict[str, float]

    @property
    def first_limit(self) -> str:
        name, ratio = max(self.pressures.items(), key=lambda item: item[1])
        return f"{name} at {ratio:.2f} of its limit" if ratio >= 0.05 else "none above 0.05"


def project_ingest(
    archive: Archive, costs: UnitCosts, settings: Settings, limits: Limits, workers: int
) -> Projection:
    """`seisctf ingest waveforms` of `archive` on `workers` single-threaded workers: the listing,
    the header scan in batches, the client's plan, the blocks in waves of runs, the client's
    finish. The S3 request rates are over the parallel phase, where the requests are made."""
    efficiency = costs.parallel_efficiency if workers > 1 else 1.0
    samples, files = archive.samples, archive.files
    chunks = math.ceil(samples / (settings.block_samples * archive.channels))
    ingest_tasks = math.ceil(chunks / settings.run_max_blocks)
    scan_tasks = min(files, max(settings.scan_tasks_min, settings.scan_tasks_per_worker * workers))
    waves = math.ceil(ingest_tasks / settings.wave_tasks)
    # The scan keeps each file in its worker's input cache, up to the cache's size; the block
    # tasks read the rest from storage again.
    share = archive.bytes / workers
    uncached = max(0.0, share - limits.worker_cache_bytes) / share
    passes = 1 + (settings.read_passes - 1) * uncached
    read = archive.bytes * passes
    written = samples * STORE_BYTES_PER_SAMPLE
    cpu_s = samples * costs.ingest_cpu_s_per_sample + files * costs.ingest_s_per_file
    transfer_s = (read + written) / (workers * limits.worker_gbps * 1e9 / 8)
    compute_s = max(cpu_s / (workers * efficiency), transfer_s)
    list_s = math.ceil(files / limits.s3_list_keys_per_request) * limits.s3_request_s
    client_serial_s = files * (costs.client_plan_s_per_file + costs.client_finish_s_per_file)
    scheduler_s = (ingest_tasks + scan_tasks) * costs.scheduler_s_per_task
    wall_s = list_s + client_serial_s + max(compute_s, scheduler_s)
    coverage_chunks = math.ceil(chunks * COVERAGE_BYTES / COVERAGE_CHUNK_BYTES)
    # The data chunks (station x block), a progress record a run, the coverage's chunks.
    puts = chunks + ingest_tasks + coverage_chunks
    # The inputs read, then each run's record read again where the coverage is written.
    gets = math.ceil(files * passes) * limits.s3_requests_per_file_read + ingest_tasks
    busy_s = max(compute_s, scheduler_s, 1e-9)
    get_per_s, put_per_s = gets / busy_s, puts / busy_s
    wave_graph_bytes = min(ingest_tasks, settings.wave_tasks) * costs.scheduler_bytes_per_task
    client_bytes = files * costs.client_bytes_per_file  # the measured slope; no coverage

    pressures = {
        "scheduler task rate": scheduler_s / max(compute_s, 1e-9),
        "scheduler memory (one wave)": wave_graph_bytes / limits.scheduler_memory_bytes,
        "client memory (per file)": client_bytes / limits.client_memory_bytes,
        "client plan + finish (serial share of the wall)": client_serial_s / wall_s,
        "S3 GET rate (one prefix)": get_per_s / limits.s3_get_per_s_per_prefix,
        "S3 PUT rate (one prefix)": put_per_s / limits.s3_put_per_s_per_prefix,
        "S3 listing": list_s / max(wall_s, 1e-9),
        "too few tasks for the workers": workers / max(ingest_tasks, 1),
    }
    if limits.worker_cache_bytes:  # beyond it, the blocks read their files again
        pressures["input cache (a worker's share of the archive)"] = (
            share / limits.worker_cache_bytes
        )
    return Projection(
        workers, wall_s, compute_s, list_s, client_serial_s, scheduler_s, scan_tasks,
        ingest_tasks, waves, gets, puts, read, written, wave_graph_bytes, client_bytes,
        get_per_s, put_per_s, pressures,
    )  # fmt: skip


def picking_row(name: str, windows: int, costs: UnitCosts, store_bytes_per_window: float,
                shard_windows: int) -> str:  # fmt: skip
    """A SeisBench picking set of `windows` 3 x 3000 windows: the ingest on 10, 100 and 1,000
    workers (its fixed time, then the larger of the windows' CPU over the workers and the
    scheduler's time for one write task a shard), then `split` and `score picks` (one client
    process each, as measured)."""
    shards = math.ceil(windows / shard_windows)
    ingest = [
        duration(
            costs.seisbench_fixed_s
            + max(
                windows * costs.seisbench_cpu_s_per_window / (n * costs.parallel_efficiency),
                shards * costs.scheduler_s_per_task,
            )
        )
        for n in (10, 100, 1000)
    ]
    return (
        f"| {name} | {windows:,} | {' / '.join(ingest)} | "
        f"{duration(windows * costs.split_s_per_row)} | "
        f"{windows * costs.split_client_bytes_per_row / 2**30:.1f} GiB | "
        f"{duration(windows * costs.score_picks_s_per_row)} | "
        f"{shards:,} | "
        f"{windows * store_bytes_per_window / GB:,.0f} GB |"
    )


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def ingest_table(archive: Archive, costs: UnitCosts, settings: Settings, limits: Limits) -> str:
    rows = [
        "| workers | wall | compute | list | client plan + finish | scheduler busy | "
        "scan + ingest tasks | waves | read | written | S3 GET + HEAD | GET/s (× one prefix) | "
        "S3 PUT | PUT/s (× one prefix) | first limit |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for workers in (10, 100, 1000):
        p = project_ingest(archive, costs, settings, limits, workers)
        rows.append(
            f"| {workers:,} | {duration(p.wall_s)} | {duration(p.compute_s)} | "
            f"{duration(p.list_s)} | {duration(p.client_serial_s)} | {duration(p.scheduler_s)} | "
            f"{p.scan_tasks:,} + {p.ingest_tasks:,} | {p.waves:,} | "
            f"{p.read_bytes / TB:.0f} TB | {p.written_bytes / TB:.1f} TB | {p.gets:.2e} | "
            f"{p.get_per_s:,.0f} ({p.get_per_s / limits.s3_get_per_s_per_prefix:.2f}×) | "
            f"{p.puts:.2e} | "
            f"{p.put_per_s:,.0f} ({p.put_per_s / limits.s3_put_per_s_per_prefix:.2f}×) | "
            f"{p.first_limit} |"
        )
    return "\n".join(rows)


def archives_table(
    archives: tuple[Archive, ...], costs: UnitCosts, settings: Settings, limits: Limits
) -> str:
    """One row an archive: its geometry, the client's serial work and memory, and the wall time
    and first limit on 10, 100 and 1,000 workers."""
    rows = [
        "| archive | day files | read (input × passes) | written | client plan + finish | "
        "client memory | wall on 10 / 100 / 1,000 workers | first limit on 10 / 100 / 1,000 |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for archive in archives:
        p = [project_ingest(archive, costs, settings, limits, n) for n in (10, 100, 1000)]
        rows.append(
            f"| {archive.name} | {archive.files:.2e} | {p[0].read_bytes / TB:,.0f} TB | "
            f"{p[0].written_bytes / TB:,.1f} TB | {duration(p[0].client_serial_s)} | "
            f"{p[0].client_bytes / GB:,.1f} GB | {' / '.join(duration(x.wall_s) for x in p)} | "
            f"{' / '.join(x.first_limit for x in p)} |"
        )
    return "\n".join(rows)


def inputs_table(costs: UnitCosts, limits: Limits, settings: Settings, archive: Archive) -> str:
    """Every input of the model with its value, its basis and where that comes from."""
    holders = (costs, limits, settings, archive)
    rows = ["| input | value | basis | from |", "|---|---:|---|---|"]
    for name, (basis, source) in BASIS.items():
        if name == "store_bytes_per_sample":
            value: object = STORE_BYTES_PER_SAMPLE
        else:
            value = next(getattr(h, name) for h in holders if hasattr(h, name))
        shown = f"{value:.4g}" if isinstance(value, float) else f"{value:,}"
        rows.append(f"| `{name}` | {shown} | {basis} | {source} |")
    return "\n".join(rows)


def picking_table(costs: UnitCosts, store_bytes_per_window: float, shard_windows: int) -> str:
    rows = [
        "| set | windows | ingest on 10 / 100 / 1,000 workers | split | split client memory | "
        "score picks | shards (objects) | store |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, windows in (("STEAD / INSTANCE", 1_200_000), ("CEED", 4_100_000),
                          ("SCEDC", 8_100_000)):  # fmt: skip
        rows.append(picking_row(name, windows, costs, store_bytes_per_window, shard_windows))
    return "\n".join(rows)


# Measured from 2026-12-02 to 2026-12-07 (benchmarks/RESULTS.md, "Scale"; 2 cores shared with
# other work, so wall-time figures are upper bounds and CPU figures the better guide).
MEASURED = UnitCosts(
    # bench_ingest.py: 1.44 CPU s (worker, client, scheduler) for 103.68 M samples
    ingest_cpu_s_per_sample=1.44 / 103.68e6,
    # scale_ingest.py, 10^5 small files: scan 0.27 ms + write 0.42 ms of task time a file
    ingest_s_per_file=(0.27 + 0.42) / 1e3,
    # scale_ingest.py, 10^3 -> 10^5 files: slope of the client's peak RSS (scan, plan and
    # listing in partitions on the workers)
    client_bytes_per_file=35,
    # the same run at 100,080 files: plan + store 3.64 s (the plan's rounds on the workers
    # included), finish 1.13 s
    client_plan_s_per_file=3.64 / 100_080,
    client_finish_s_per_file=1.13 / 100_080,
    # scale_picking.py, 300,000 windows: 0.195 CPU ms a window, all processes
    seisbench_cpu_s_per_window=0.195e-3,
    # the same, fitted through 8,000 and 300,000 windows: 13.2 s fixed + 0.342 ms a window (wall)
    seisbench_fixed_s=13.2,
    # scale_picking.py, 1.2 M rows: 41.98 s, client 1,483 MiB
    split_s_per_row=41.98 / 1.2e6,
    split_client_bytes_per_row=1483 * 2**20 / 1.2e6,
    # scale_picking.py, 1.2 M rows, Parquet: 13.31 s
    score_picks_s_per_row=13.31 / 1.2e6,
    # scale_scheduler.py (see RESULTS.md)
    scheduler_s_per_task=SCHEDULER_S_PER_TASK,
    scheduler_bytes_per_task=SCHEDULER_BYTES_PER_TASK,
)

# SCEDC's continuous archive on S3: ~50 TB, 552 stations; its bytes per sample are
# make_archive.py's 100 Hz broadband figure (sds10g: 10,442 MB for 5.82e9 samples). Its file count
# follows from them (100 Hz day files per channel), as it does for 1 TB and 1 PB.
BYTES_PER_SAMPLE_100HZ = 10442.3e6 / 5819823012
SCEDC = Archive(
    "SCEDC continuous, 50 TB", bytes=50 * TB, mseed_bytes_per_sample=BYTES_PER_SAMPLE_100HZ
)
ARCHIVES = (
    Archive("1 TB", bytes=TB, mseed_bytes_per_sample=BYTES_PER_SAMPLE_100HZ),
    SCEDC,
    Archive("1 PB", bytes=1000 * TB, mseed_bytes_per_sample=BYTES_PER_SAMPLE_100HZ),
)
# The picking sets' store bytes per window: the 300 k store, 9.58 GB.
STORE_BYTES_PER_WINDOW = 9.58e9 / 300_000

_SCALE = "RESULTS.md, Scale"
_FILES = "`bench_scale.py --only ingest-files`, 100,080 files (RESULTS.md, Scale; 2026-12-07)"
_PICK = "`bench_scale.py --only picking`"
_AWS = "AWS's documented guideline per prefix; no real S3 measured here"
# Each input's basis: measured (the command and figure) or assumed (why); `code` where the value
# is seisctf's own default, read from the source by `defaults()`.
BASIS: dict[str, tuple[str, str]] = {
    "ingest_cpu_s_per_sample": ("measured", "`bench_ingest.py`: 1.44 CPU s (worker, client, "
                                "scheduler) for 103.68 M samples"),
    "ingest_s_per_file": ("measured", "`bench_scale.py --only ingest-files`, 100,080 small files: "
                          "scan 0.27 + write 0.42 ms of task time (2026-12-07, load 0.5-2.0)"),
    "client_bytes_per_file": ("measured", "slope of the client's peak RSS over 1,080 → 100,080 "
                              f"files ({_FILES})"),
    "client_plan_s_per_file": ("measured", f"{_FILES}: plan + store 3.64 s; 1.23 s at 10,080 "
                               "(exponent 0.47 over that decade: linear is an upper bound)"),
    "client_finish_s_per_file": ("measured", f"{_FILES}: finish 1.13 s; 0.44 s at 10,080 "
                                 "(exponent 0.41)"),
    "seisbench_cpu_s_per_window": ("measured", f"{_PICK}, 300,000 windows: 0.195 CPU ms each"),
    "seisbench_fixed_s": ("measured", f"{_PICK}: fitted through 8,000 and 300,000 windows"),
    "split_s_per_row": ("measured", f"{_PICK}, 1.2 M rows: 41.98 s"),
    "split_client_bytes_per_row": ("measured", f"{_PICK}, 1.2 M rows: client 1,483 MiB"),
    "score_picks_s_per_row": ("measured", f"{_PICK}, 1.2 M rows, Parquet: 13.31 s"),
    "scheduler_s_per_task": ("measured", "`scale_scheduler.py`: 673 µs of CPU a key at 1.01 M "
                             "keys (516 at 10⁵), 2.94 keys a task run"),
    "scheduler_bytes_per_task": ("measured", "`scale_scheduler.py`: 2.51 KiB a key held at "
                                 "1.01 M keys"),
    "store_bytes_per_sample": ("measured", "the 3 GB byte-curve store: 2.79 GB for 1.66e9 "
                               "samples"),
    "mseed_bytes_per_sample": ("measured", "`make_archive.py` sds10g, 100 Hz broadband: "
                               "10,442 MB for 5.82e9 samples"),
    "parallel_efficiency": ("assumed", "1 → 2 worker speed-ups here were not measurable "
                            "(load 18–28)"),
    "worker_gbps": ("assumed", "no S3 bandwidth measured (SeaweedFS on loopback only)"),
    "s3_request_s": ("assumed", "no S3 latency measured"),
    "s3_requests_per_file_read": ("assumed", "from the code: `read_input` opens the file (an "
                                  "s3fs HEAD) and reads it whole (one GET below s3fs's 50 MiB "
                                  "block); not counted on a server"),
    "read_passes": ("code", "the scan reads each whole file, the block tasks again unless the "
                    "worker's input cache (`input_cache`) still holds it: 1 pass for what fits"),
    "worker_cache_bytes": ("assumed", "local disk a worker host gives the input cache "
                           "(`SEISCTF_INPUT_CACHE_BYTES`); its default depends on the disk"),
    "s3_get_per_s_per_prefix": ("assumed", _AWS),
    "s3_put_per_s_per_prefix": ("assumed", _AWS),
    "s3_list_keys_per_request": ("assumed", "ListObjectsV2's page size; fsspec lists a prefix "
                                 "serially"),
    "client_memory_bytes": ("assumed", "a 16 GiB client host"),
    "scheduler_memory_bytes": ("assumed", "a 16 GiB scheduler host"),
    "sample_rate_hz": ("assumed", "broadband channels at 100 Hz"),
    "file_seconds": ("assumed", "day files, one per channel (SDS)"),
    "channels": ("assumed", "3 components a station"),
    "block_samples": ("code", "`waveform_plan.DEFAULT_BLOCK_SAMPLES`"),
    "run_max_blocks": ("code", "`waveform_blocks.RUN_MAX_BLOCKS`"),
    "scan_tasks_min": ("code", "`resumable.SCAN_TASKS`"),
    "scan_tasks_per_worker": ("code", "`resumable.SCAN_TASKS_PER_WORKER`"),
    "wave_tasks": ("code", "`cluster.MAX_TASKS_PER_WAVE`"),
}  # fmt: skip


def main() -> None:
    settings, limits = defaults(), Limits()
    print("## The model's inputs\n")
    print(inputs_table(MEASURED, limits, settings, SCEDC))
    print(f"\n## {SCEDC.name}: {SCEDC.files:,} day files\n")
    print(ingest_table(SCEDC, MEASURED, settings, limits))
    print("\n## 1 TB, 50 TB and 1 PB\n")
    print(archives_table(ARCHIVES, MEASURED, settings, limits))
    print("\n## SeisBench picking sets (3 x 3000 windows)\n")
    from seisctf.catalogs.event_windows import default_shard_traces

    print(picking_table(MEASURED, STORE_BYTES_PER_WINDOW, default_shard_traces(3, 3000)))


if __name__ == "__main__":
    main()
