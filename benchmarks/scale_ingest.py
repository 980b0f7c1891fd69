"""Scale section `ingest`: cost curves of `seisctf ingest waveforms`, as a user runs it.

Two curves, each run on a fresh Dask cluster of its own (`--quick`: one cluster serves every
run, as its start and stop take longer than such a run; `scale_cluster.Cluster`): an external
`dask scheduler` (with `task_probe` preloaded: task count and the time each task started) and
two `dask worker` processes of one thread each (no nanny; the embedded cluster's malloc and
spill settings), the command attached with `--scheduler`. Peak RSS by role: the command's own
process tree (the client), the scheduler's process, each worker's.

- bytes: symlink trees of the first day files of an SDS archive (`make_archive.py sds`; the
  full run's 10 GB archive is `DATA/sds10g`, written there once), day-major (every
  station and channel of day 1, then day 2, …), at 0.03, 0.1, 0.3, 1 and 3 GB (100x; `--quick`:
  2 sizes of a small archive, 12x apart);
- files: small-file archives (`make_archive.py sds --files N`, 0.1 Hz day files of ~12 KiB) of
  10^3, 10^4 and 10^5 files (`--quick`: 60 and 600).

Per run: bytes, files, samples decoded (the archive summary's count), wall seconds (spawn to
exit), samples/s, peak RSS (MiB) of client, scheduler and each worker, Dask tasks, the time from
the command's start to its first task (the header scan) and to its first write task (scan, plan
and store creation done: "planning"), and planning as a fraction of the run. Goals (issue 23):
time grows no faster than bytes (fitted exponent <= 1.05); client and scheduler <= 1 GiB at 10^5
files and <= 4 KiB per file (the slope of peak RSS against files); planning <= 10 % of the run.
Acceptance at the largest byte size: `seisctf.open_store` of the store in a fresh process
(< 2 s) and random station-hour reads (< 0.5 s), each read twice (first: nothing of it cached in
the process; second: warm).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import bench_ingest  # the per-core table's rows (`per_core_section`)
import numpy as np
import psutil
from bench_ctf_scoring import load_average
from scale_cluster import N_WORKERS, Clusters
from scale_report import (
    GiB,
    MiB,
    ScaleOptions,
    Section,
    fitted_exponent,
    format_cell,
    run_command,
    seisctf_command,
    tree_bytes,
    verdict,
)

HERE = Path(__file__).resolve().parent
MAKE_ARCHIVE = HERE / "make_archive.py"
GB = 1e9
# 100x in bytes. (10 GB, the whole shared archive, takes over an hour on 2 loaded cores.)
SIZES_GB = (0.03, 0.1, 0.3, 1.0, 3.0)
QUICK_FRACTIONS = (1 / 12, 1.0)  # of the quick archive's files
FILE_COUNTS = (1_000, 10_000, 100_000)
QUICK_FILE_COUNTS = (60, 600)
SMALL_FILE_DAYS = 30
READ_HOURS = 5  # station-hours read at the largest size
COLUMNS = [
    "size", "bytes", "files", "samples", "wall s", "samples/s", "client MiB", "scheduler MiB",
    "worker 1 MiB", "worker 2 MiB", "Dask tasks", "first task s", "planning s", "planning %",
    "load",
]  # fmt: skip


@dataclass(frozen=True)
class Archive:
    """An SDS archive made by `make_archive.py sds`: its folder and summary."""

    root: Path
    summary: dict

    @property
    def inventory(self) -> Path:
        return self.root / self.summary["inventory"]


@dataclass(frozen=True)
class IngestRun:
    """One measured `seisctf ingest waveforms`."""

    label: str
    files: int
    bytes: int
    samples: int
    seconds: float
    peaks: dict[str, int]  # peak RSS (bytes) by role
    tasks: int
    first_task_s: float
    planning_s: float
    load: str
    store: Path
    probe: dict[str, dict[str, float]]  # task_probe's record of the run
    began: float  # the scheduler's time.time() at the command's start (`Cluster.now`)
    scheduler_idle: int = 0  # the scheduler's RSS (bytes) just before the command

    def span(self, prefix: str) -> tuple[float, float, float]:
        """(first start, last stop, compute seconds summed) of one task prefix, the first two
        from the command's start."""
        entry = self.probe.get(prefix, {})
        first = entry.get("first_start", math.nan) - self.began
        return first, entry.get("last_stop", math.nan) - self.began, entry.get("compute_s", 0.0)

    def planning_row(self) -> list[object]:
        """Where the time before the first write task goes."""
        scan_first, scan_last, scan_compute = self.span(SCAN_PREFIX)
        write_first, write_last, write_compute = self.span(WRITE_PREFIX)
        return [
            self.label, self.files, scan_first, scan_last - scan_first,  # (listing tasks first)
            1e3 * scan_compute / self.files, write_first - scan_last, self.planning_s,
            1e3 * write_compute / self.files, self.seconds - write_last, self.seconds,
        ]  # fmt: skip

    def row(self) -> list[object]:
        mib = [self.peaks.get(role, 0) / MiB for role in ROLES]
        return [
            self.label, self.bytes, self.files, self.samples, self.seconds,
            self.samples / self.seconds, *mib, self.tasks, self.first_task_s, self.planning_s,
            100 * self.planning_s / self.seconds, self.load,
        ]  # fmt: skip


ROLES = ("client", "scheduler", "worker 1", "worker 2")
SCAN_PREFIX = "scan_files"  # the header scan's tasks (`scan_table.scan_files`)
WRITE_PREFIX = "ingest_block"  # the write tasks (`waveforms.ingest_blocks`)
PLANNING_COLUMNS = [
    "size", "files", "first task s", "scan s", "scan task ms/file", "plan + store s",
    "planning s", "write task ms/file", "finish s", "wall s",
]  # fmt: skip


def planning_section(title: str, runs: Sequence[IngestRun]) -> Section:
    """Where each run's planning went: start-up to the first task (imports, cluster, file
    listing), the scan's tasks, the client's plan and store creation; then the writes."""
    section = Section(title, PLANNING_COLUMNS, [run.planning_row() for run in runs])
    section.notes += [
        "`first task`: command start to the first scan task (imports, connecting, listing "
        "the files); `scan`: first scan task start to last scan task end; `scan task "
        "ms/file`: scan task compute seconds summed, per file (read, sha256, header parse); "
        "`plan + store`: last scan task end to first write task start (results gathered, "
        "inventory read, plan, store created, graph sent); `write task ms/file`: write task "
        "compute seconds summed, per file; `finish`: last write task end to exit (coverage, "
        "attrs, consolidated metadata, shutdown)."
    ]
    return section


# --- inputs -------------------------------------------------------------------------------


def make_sds(out: Path, *arguments: str) -> Archive:
    """`make_archive.py sds OUT ARGUMENTS` unless OUT already holds its summary."""
    if not (out / "summary.json").exists():
        command = [sys.executable, str(MAKE_ARCHIVE), "sds", str(out), *arguments]
        subprocess.run(command, check=True, capture_output=True, text=True)
    return Archive(out, json.loads((out / "summary.json").read_text()))


def byte_archive(options: ScaleOptions) -> Archive:
    """The archive the byte curve cuts: a small one (--quick), else the 10 GB one in --data
    (`DATA/sds10g`, generated there once)."""
    if options.quick:
        arguments = ("--stations", "4", "--days", "3", "--rate", "20", "--workers", "2")
        return make_sds(options.data / "sds_quick", *arguments)
    arguments = ("--stations", "46", "--days", "5", "--workers", "2")  # 10.4 GB
    return make_sds(options.data / "sds10g", *arguments)


def file_archive(options: ScaleOptions, n_files: int) -> Archive:
    days = 10 if options.quick else SMALL_FILE_DAYS
    arguments = ("--files", str(n_files), "--days", str(days), "--workers", "2")
    return make_sds(options.data / f"sds_files_{n_files}", *arguments)


def day_major(entry: dict) -> tuple[str, str]:
    """(day `YEAR.DOY`, channel id) of a file entry (SDS names end `.YEAR.DOY`): the order the
    byte curve takes files in."""
    year, day = entry["path"].rsplit(".", 2)[1:]
    return f"{year}.{day}", entry["id"]


def first_bytes(archive: Archive, target: float) -> list[dict]:
    """The first files, day-major, whose total is nearest `target` bytes (at least one)."""
    entries = sorted(archive.summary["file_list"], key=day_major)
    totals = np.cumsum([entry["bytes"] for entry in entries])
    return entries[: int(np.argmin(np.abs(totals - target))) + 1]


def symlink_tree(archive: Archive, entries: Sequence[dict], out: Path) -> Path:
    """A tree of symlinks to `entries` (same relative paths) under `out`; its SDS root."""
    for entry in entries:
        link = out / entry["path"]
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(archive.root / entry["path"])
    return out / archive.summary["sds_root"]


def import_rss() -> int:
    """Peak RSS (bytes, VmHWM: ru_maxrss keeps the parent's across a vfork and exec) of a fresh
    process importing what `seisctf ingest waveforms` loads (the CLI, its own ingest module
    alone, distributed; `-P`: as the command finds them), the second of two (the first may
    compile bytecode): a client's peak above it is its work."""
    code = (
        "import distributed, seisctf.cli; from seisctf.cli.ingest import _registered; "
        "_registered('waveforms'); "
        "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
    )
    command = [sys.executable, "-P", "-c", code]
    runs = [subprocess.run(command, check=True, capture_output=True, text=True) for _ in range(2)]
    return int(runs[-1].stdout) * 1024  # kB


# --- one run ----------------------------------------------------------------------------------


def ingest(
    options: ScaleOptions, clusters: Clusters, label: str, archive: Archive,
    entries: Sequence[dict], sds: Path,
) -> IngestRun:  # fmt: skip
    """`seisctf ingest waveforms SDS --inventory … --out STORE --scheduler …` on a cluster of
    `clusters`, measured."""
    store = options.workdir / f"store_{label}.zarr"
    command = [*seisctf_command(), "ingest", "waveforms", str(sds), "--inventory",
               str(archive.inventory), "--out", str(store)]  # fmt: skip
    with clusters.of(N_WORKERS) as cluster:
        cluster.probe()  # nothing but the wait for workers: cleared
        samplers = cluster.samplers()
        for sampler in samplers:
            sampler.__enter__()
        load = load_average()
        idle = psutil.Process(cluster.scheduler.pid).memory_info().rss
        began = cluster.now()  # on the clock of the probe's times
        try:
            run = run_command([*command, "--scheduler", cluster.address])
        finally:
            for sampler in samplers:
                sampler.__exit__(None, None, None)
        probe = cluster.probe()
    peaks = {"client": run.memory.peaks().get("client", 0)}
    for sampler in samplers:
        peaks.update({role: peak for role, peak in sampler.memory.peaks().items()})
    starts = [entry["first_start"] for entry in probe.values()]
    writes = probe.get(WRITE_PREFIX, {}).get("first_start", math.nan)
    return IngestRun(
        label=label,
        files=len(entries),
        bytes=sum(entry["bytes"] for entry in entries),
        samples=sum(entry["samples"] for entry in entries),
        seconds=run.seconds,
        peaks=peaks,
        tasks=int(sum(entry["tasks"] for entry in probe.values())),
        first_task_s=min(starts) - began if starts else math.nan,
        planning_s=writes - began,
        load=f"{load} / {load_average()}",
        store=store,
        probe=probe,
        began=began,
        scheduler_idle=idle,
    )


# --- the sections ---------------------------------------------------------------------------


def print_run(run: IngestRun) -> None:
    """One run's row and where its planning went, as soon as it ends (the tables come after
    the last size)."""
    cells = [format_cell(cell) for cell in run.row() + run.planning_row()[1:]]
    print("  " + " | ".join(cells), flush=True)


def byte_curve(
    options: ScaleOptions, clusters: Clusters
) -> tuple[Section, list[IngestRun], Archive]:
    archive = byte_archive(options)
    total = sum(entry["bytes"] for entry in archive.summary["file_list"])
    targets = [f * total for f in QUICK_FRACTIONS] if options.quick else [s * GB for s in SIZES_GB]
    runs = []
    for target in targets:
        entries = first_bytes(archive, target)
        label = f"{sum(e['bytes'] for e in entries) / GB:.3g} GB"
        sds = symlink_tree(archive, entries, options.workdir / f"bytes_{len(entries)}")
        runs.append(ingest(options, clusters, f"bytes_{len(entries)}", archive, entries, sds))
        runs[-1] = replace(runs[-1], label=label)
        print_run(runs[-1])
    section = Section(
        "Ingest cost curve: bytes (`seisctf ingest waveforms`, 2 workers)", COLUMNS,
        [run.row() for run in runs],
    )  # fmt: skip
    exponent = fitted_exponent([r.bytes for r in runs], [r.seconds for r in runs])
    worst = max(r.planning_s / r.seconds for r in runs)
    span = runs[-1].bytes / runs[0].bytes
    section.goals += [
        verdict("time vs bytes, fitted exponent <= 1.05", f"{exponent:.2f} over {span:.0f}x",
                exponent <= 1.05),
        verdict("planning <= 10 % of the run", f"at most {100 * worst:.1f} %", worst <= 0.10),
        large_planning(runs),
    ]  # fmt: skip
    section.notes += [
        f"Archive: {archive.root} ({archive.summary['files']} files); its first day files "
        "(day-major: all stations and channels of a day, then the next) as symlink trees; "
        "`--inventory` its StationXML. `first task`: command start to the first Dask task (the "
        "header scan); `planning`: to the first write task (scan, plan, store created). "
        "`load`: load average before / after."
    ]
    return section, runs, archive


def large_planning(runs: Sequence[IngestRun]) -> str:
    """Issue 38's planning goal: start to first write task <= 10 % of the run at >= 1 GB."""
    large = [(run.planning_s / run.seconds, run.label) for run in runs if run.bytes >= GB]
    if not large:
        return "planning at >= 1 GB: no run that large here (full sizes: `--only ingest-files`)"
    figure = ", ".join(f"{100 * share:.1f} % at {label}" for share, label in large)
    return verdict("planning <= 10 % of the run at >= 1 GB", figure, max(large)[0] <= 0.10)


def file_ratios(runs: Sequence[IngestRun], client_imports: int) -> list[str]:
    """Issue 38's goals over the curve's top step (10^4 -> 10^5 files in the full run): peak
    RSS above the imports (client) or the idle scheduler flat, and per-file time."""
    low, top = runs[-2], runs[-1]
    found = []
    for role, base in (("client", "imports"), ("scheduler", "idle")):
        above = [run.peaks[role] - (run.scheduler_idle if base == "idle" else client_imports)
                 for run in (low, top)]  # fmt: skip
        ratio = above[1] / above[0] if above[0] > 0 else math.inf
        figure = f"{above[1] / MiB:.0f} / {above[0] / MiB:.0f} MiB = {ratio:.2f}x"
        found.append(verdict(f"{role} peak RSS above {base}, {top.files:,} / {low.files:,} files"
                             " <= 1.2x, and <= 300 MiB", figure,
                             ratio <= 1.2 and above[1] <= 300 * MiB))  # fmt: skip
    exponent = fitted_exponent([low.files, top.files], [low.seconds, top.seconds])
    found.append(verdict(f"time vs files, {low.files:,} -> {top.files:,} alone: exponent <= 1.05",
                         f"{exponent:.2f}", exponent <= 1.05))  # fmt: skip
    return found


def file_curve(options: ScaleOptions, clusters: Clusters) -> tuple[Section, list[IngestRun]]:
    runs = []
    for count in QUICK_FILE_COUNTS if options.quick else FILE_COUNTS:
        archive = file_archive(options, count)
        entries = archive.summary["file_list"]
        run = ingest(options, clusters, f"files_{count}", archive, entries, archive.root / "sds")
        runs.append(replace(run, label=f"{len(entries):,} files"))
        print_run(runs[-1])
    columns = [*COLUMNS, "client B/file", "scheduler B/file"]
    rows = [
        [*run.row(), run.peaks["client"] / run.files, run.peaks["scheduler"] / run.files]
        for run in runs
    ]
    section = Section("Ingest cost curve: files (0.1 Hz day files, 2 workers)", columns, rows)
    files = [run.files for run in runs]
    top = runs[-1]
    for role in ("client", "scheduler"):
        slope = float(np.polyfit(files, [run.peaks[role] for run in runs], 1)[0])
        section.goals += [
            verdict(f"{role} peak RSS <= 1 GiB at {top.files:,} files",
                    f"{top.peaks[role] / MiB:.0f} MiB", top.peaks[role] <= GiB),
            verdict(f"{role} <= 4 KiB per file (slope of peak RSS over files)",
                    f"{slope:.0f} B/file", slope <= 4096),
        ]  # fmt: skip
    worst = max(r.planning_s / r.seconds for r in runs)
    exponent = fitted_exponent(files, [r.seconds for r in runs])
    imports = import_rss()
    section.goals += [
        verdict("planning <= 10 % of the run", f"at most {100 * worst:.1f} %", worst <= 0.10),
        f"time vs files: fitted exponent {exponent:.2f}",
        *file_ratios(runs, imports),
        large_planning(runs),
    ]
    section.notes += [
        f"Archives: `make_archive.py sds --files N --days {30 if not options.quick else 10}` "
        "(0.1 Hz VH day files, 3 channels; stations = N / (3 x days)). Imports: "
        f"{imports / MiB:.0f} MiB, the peak RSS of a process importing what the command loads "
        "(`import_rss`); idle scheduler: its RSS just before each command "
        f"({', '.join(f'{run.scheduler_idle / MiB:.0f}' for run in runs)} MiB)."
    ]
    return section, runs


def read_probe(url: str, n_reads: int, seed: int) -> dict:
    """In this (fresh) process: seconds of the imports a session reading a store makes once
    (xarray, zarr, fsspec, dask.array, distributed, which dask's first compute looks for, and
    seisctf's store view), of `seisctf.open_store(url)`, and of `n_reads` random station-hours,
    each read twice (first and warm): {"import_s", "open_s", "reads": [...]}."""
    began = time.perf_counter()
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
    import fsspec  # noqa: F401
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import seisctf.store_view

    imported = time.perf_counter() - began
    began = time.perf_counter()
    ds = seisctf.store_view.open_store(url)
    opened = time.perf_counter() - began
    rng = np.random.default_rng(seed)
    hours = int(ds.sizes["time"] / (3600 * float(ds.attrs["sampling_rate"])))
    start = ds["time"][0].values  # one label, not the whole axis
    reads = []
    for _ in range(n_reads):
        station = str(ds.station.values[rng.integers(ds.sizes["station"])])
        first = start + np.timedelta64(int(rng.integers(max(hours, 1))), "h")
        window = slice(first, first + np.timedelta64(3600, "s") - np.timedelta64(1, "ns"))
        seconds = []
        for _ in range(2):
            began = time.perf_counter()
            values = ds["data"].sel(station=station, time=window).values
            seconds.append(time.perf_counter() - began)
        valid = int(np.count_nonzero(~np.isnan(values)))
        reads.append({"station": station, "start": str(first), "shape": list(values.shape),
                      "valid": valid, "seconds": seconds})  # fmt: skip
    return {"import_s": imported, "open_s": opened, "reads": reads}


def acceptance(options: ScaleOptions, run: IngestRun) -> Section:
    """open_store and station-hour reads of the largest store, in a fresh process."""
    command = [sys.executable, __file__, "read-probe", str(run.store), str(READ_HOURS)]
    found = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    rows: list[list[object]] = [
        ["imports (once a process)", "", "", found["import_s"], "", load_average()],
        ["open_store", "", "", found["open_s"], "", load_average()],
    ]
    for read in found["reads"]:
        first, warm = read["seconds"]
        rows.append(["station-hour", f"{read['station']} {read['start'][:13]}",
                     "x".join(map(str, read["shape"])), first, warm, read["valid"]])  # fmt: skip
    section = Section(
        f"Ingest acceptance: the {run.label} store read back (`seisctf.open_store`)",
        ["read", "what", "shape", "seconds (first)", "seconds (warm)", "valid samples / load"],
        rows,
    )
    slowest = max(max(read["seconds"]) for read in found["reads"])
    section.goals += [
        verdict("opens lazily in < 2 s", f"{found['open_s']:.2f} s", found["open_s"] < 2),
        verdict("any station-hour in < 0.5 s", f"slowest {slowest:.3f} s", slowest < 0.5),
    ]
    section.notes += [
        f"Store {tree_bytes(run.store) / GB:.2f} GB on local disk; a fresh process: the "
        "imports first (measured apart), then the open, then the reads; station and hour "
        "drawn at random (seed 23)."
    ]
    return section


# --- ingest per core ------------------------------------------------------------------------
# The third table: `bench_ingest.per_core_rows(files, repeat)` (rows: label, seconds,
# samples/s per core, ratio to bare obspy) on the smallest byte size's files, where
# bench_ingest provides that function.


def per_core_section(archive: Archive, entries: Sequence[dict], repeat: int) -> Section | None:
    per_core_rows = getattr(bench_ingest, "per_core_rows", None)
    if per_core_rows is None:
        return None
    files = [archive.root / entry["path"] for entry in entries]
    columns = ["run", "seconds", "samples/s per core", "per core / bare obspy"]
    return Section("Ingest per core", columns, [list(row) for row in per_core_rows(files, repeat)])


def sections(options: ScaleOptions, per_core: bool = True) -> Iterator[Section]:
    """The byte curve, its acceptance reads, the file curve, where planning goes (and the
    per-core table, unless not `per_core`)."""
    with Clusters(options.workdir, fresh=not options.quick) as clusters:
        bytes_section, byte_runs, archive = byte_curve(options, clusters)
        yield bytes_section
        yield acceptance(options, byte_runs[-1])
        files_section, file_runs = file_curve(options, clusters)
    yield files_section
    yield planning_section("Ingest planning, where it goes: bytes", byte_runs)
    yield planning_section("Ingest planning, where it goes: files", file_runs)
    if not per_core:
        return
    smallest = first_bytes(archive, byte_runs[0].bytes)
    table = per_core_section(archive, smallest, 1 if options.quick else 5)
    if table is not None:
        yield table


def more_days(options: ScaleOptions, clusters: Clusters, low: IngestRun) -> Section:
    """Issue 38's flat-client goal where an archive grows as a network's does, in time: the
    stations of the curve's second archive (`low`, 10^4 files in the full run) over ten times
    its days (10^5 files), against that archive. On the file curve the stations grow with the
    files, and with them what is per station (root attrs, coordinates)."""
    days = 10 * (10 if options.quick else SMALL_FILE_DAYS)
    arguments = ("--files", str(10 * low.files), "--days", str(days), "--workers", "2")
    archive = make_sds(options.data / f"sds_days_{days}", *arguments)
    entries = archive.summary["file_list"]
    run = ingest(options, clusters, f"days_{days}", archive, entries, archive.root / "sds")
    run = replace(run, label=f"{len(entries):,} files over {days} days")
    print_run(run)
    section = Section("Ingest cost: the same stations over ten times the days", COLUMNS,
                      [low.row(), run.row()])  # fmt: skip
    section.goals += file_ratios([low, run], import_rss())
    section.notes += [f"Archives: `make_archive.py sds --files N --days D`, {days // 10} and "
                      f"{days} days of the same stations (N / (3 x D) of them)."]  # fmt: skip
    return section


def file_sections(options: ScaleOptions) -> Iterator[Section]:
    """The file-count curve, where its planning went, and the same stations over ten times the
    days (`bench_scale.py --only ingest-files`)."""
    with Clusters(options.workdir, fresh=not options.quick) as clusters:
        files_section, file_runs = file_curve(options, clusters)
        days_section = more_days(options, clusters, file_runs[-2])
    yield files_section
    yield planning_section("Ingest planning, where it goes: files", file_runs)
    yield days_section


if __name__ == "__main__" and sys.argv[1:2] == ["read-probe"]:
    print(json.dumps(read_probe(sys.argv[2], int(sys.argv[3]), seed=23)))
