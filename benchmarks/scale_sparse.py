"""Scale section `sparse`: what empty time and an append cost `seisctf ingest waveforms`.

Every run is the command as a user types it (a subprocess), attached with `--scheduler` to a fresh
cluster of its own (`scale_cluster.Cluster`: an external scheduler with the task probe, 2 workers,
or 1 for the identity checks; at the tests' size, TINY, one cluster per worker count serves
every run: starting and stopping one takes longer than such a run). Per run: wall seconds
(spawn to exit), the client's peak RSS and that above its imports (`scale_ingest.import_rss`),
the Dask tasks the scheduler ran, the most progress objects seen in the store at once (every
file under the store's `ingest_progress…` entries, polled in a thread while the command runs)
and the data chunks the run wrote.

- Time gap: one station (XA.GAP.00, HHZ/HHN/HHE), two 10-minute 100 Hz files written by obspy,
  the second starting 1 hour, 1 year or 5 years after the first (`--quick`: 1 hour, 1 year).
  Goals (issue 38): wall time and client peak RSS at the largest gap within 1.3x of 1 hour; no
  progress object for an empty block (progress records, zarr metadata aside, at most the
  blocks holding data).
- Append: a store of 10^4 small files (`make_archive.py sds --files`, the file-count curve's
  archive; `--quick`: 10^3), then `--append` of one new file (the next day of XA.S0000's VHZ),
  against ingesting that file alone into a new store. Goal: at most 2x. Then a store of 10x
  the files and the same append onto it: the client's peak above its imports at most 1.2x that
  onto the smaller store (issue 38's flat client: the store's record is read by tasks).
- Same stores: data and coverage objects byte for byte between 1 and 2 workers (each gap, and the
  append, made on a copy of the same base store); the appended store's arrays equal (numpy) those
  of a one-shot ingest of every file; each store's samples equal the files' (numpy).
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scale_cluster
import scale_ingest
from bench_ctf_scoring import load_average
from scale_report import (
    MiB,
    Sampler,
    ScaleOptions,
    Section,
    run_command,
    seisctf_command,
    verdict,
)

DAY_S = 86400
YEAR_S = 365 * DAY_S
FILE_S = 600  # each time-gap file: 10 minutes
RATE_HZ = 100.0
GAP_STATION = ("XA", "GAP", "00")
GAP_START = "2020-01-01T00:00:00"
PROGRESS_PREFIX = "ingest_progress"  # a store entry (array, folder or file) holding progress
METADATA = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})
WALL_GOAL, MEMORY_GOAL, APPEND_GOAL, FLAT_GOAL = 1.3, 1.3, 2.0, 1.2


@dataclass(frozen=True)
class Sizes:
    """What the section runs: (label, seconds from the first file's start to the second's) per
    time gap; the append's base archive in files and days."""

    gaps: tuple[tuple[str, float], ...]
    append_files: int
    append_days: int
    larger_files: int  # a second base store, 10x the files: the append's client stays flat
    fresh_clusters: bool = True  # a cluster per run, else one per worker count for every run
    warm_up: bool = True  # an unmeasured run first (no figure in the tests depends on it)


FULL = Sizes((("1 hour", 3600.0), ("1 year", YEAR_S), ("5 years", 5 * YEAR_S)), 10_000, 30, 100_000)
QUICK = Sizes((("1 hour", 3600.0), ("1 year", YEAR_S)), 1_000, 10, 10_000)
TINY = Sizes(
    (("1 hour", 3600.0), ("1 day", DAY_S)), 60, 10, 600, fresh_clusters=False, warm_up=False
)


@dataclass(frozen=True)
class Run:
    """One measured ingest."""

    label: str
    workers: int
    seconds: float
    client_peak: int  # bytes
    client_imports: int  # bytes: what its imports alone take (`import_rss`)
    tasks: int
    progress_peak: int  # objects under the progress entries, the most seen at once
    progress_records: int  # of those, not zarr metadata
    chunks_written: int  # data chunk objects written (or rewritten) by this run
    load: str
    store: Path

    def row(self, blocks: object = "") -> list[object]:
        return [
            self.label, self.workers, self.seconds, self.client_peak / MiB,
            (self.client_peak - self.client_imports) / MiB, self.tasks, self.progress_peak,
            self.progress_records, blocks, self.chunks_written, self.load,
        ]  # fmt: skip


COLUMNS = [
    "run", "workers", "wall s", "client MiB", "client above imports MiB", "Dask tasks",
    "progress objects (peak)", "progress records (peak)", "blocks with data",
    "data chunks written", "load",
]  # fmt: skip


# --- measuring ----------------------------------------------------------------------------


def progress_objects(store: Path) -> tuple[int, int]:
    """(objects, of which zarr metadata) under every store entry named `ingest_progress…`."""
    total = metadata = 0
    try:
        entries = [entry for entry in os.scandir(store) if entry.name.startswith(PROGRESS_PREFIX)]
    except FileNotFoundError:
        return 0, 0
    for entry in entries:
        if entry.is_file():
            total += 1
            continue
        for _, _, names in os.walk(entry.path):
            total += len(names)
            metadata += sum(name in METADATA for name in names)
    return total, metadata


class ProgressPoller(Sampler):
    """Count a store's progress objects in a thread until stopped; keep the largest count. The
    pause between counts is 9x the last count's duration (at least 50 ms): the poller takes at
    most a tenth of a core from the run it watches."""

    def __init__(self, store: Path):
        super().__init__()
        self.store = store
        self.peak = (0, 0)  # (objects, records) of the count with the most objects

    def sample(self) -> None:
        total, metadata = progress_objects(self.store)
        self.peak = max(self.peak, (total, total - metadata))

    def pause(self, took_s: float) -> float:
        return max(0.05, 9 * took_s)


def data_chunks(store: Path, since_ns: int = 0) -> int:
    """Chunk objects of the store's `data` array modified at or after `since_ns`."""
    return sum(
        1
        for path in (store / "data").rglob("*")
        if path.is_file() and path.name not in METADATA and path.stat().st_mtime_ns >= since_ns
    )


def measured_ingest(
    clusters: scale_cluster.Clusters, label: str, sources: Sequence[Path], store: Path, *extra: str,
    workers: int = scale_cluster.N_WORKERS, imports: int = 0,
) -> Run:  # fmt: skip
    """`seisctf ingest waveforms SOURCES --out STORE EXTRA --scheduler …` on a cluster of
    `workers` workers, measured."""
    command = [*seisctf_command(), "ingest", "waveforms", *map(str, sources), "--out", str(store)]
    with clusters.of(workers) as cluster:
        cluster.probe()  # the wait for workers: cleared
        load = load_average()
        began_ns = time.time_ns()
        with ProgressPoller(store) as poller:
            run = run_command([*command, *extra, "--scheduler", cluster.address])
        probe = cluster.probe()
    measured = Run(
        label=label,
        workers=workers,
        seconds=run.seconds,
        client_peak=run.memory.peaks().get("client", 0),
        client_imports=imports,
        tasks=int(sum(entry["tasks"] for entry in probe.values())),
        progress_peak=poller.peak[0],
        progress_records=poller.peak[1],
        chunks_written=data_chunks(store, began_ns),
        load=f"{load} / {load_average()}",
        store=store,
    )
    print("  " + " | ".join(str(cell) for cell in measured.row()), flush=True)
    return measured


# --- comparing stores -----------------------------------------------------------------------


def object_digests(store: Path, names: Sequence[str] = ("data", "coverage")) -> dict[str, str]:
    """sha256 of every object under the store's `names` entries, by path in the store."""
    return {
        str(path.relative_to(store)): hashlib.sha256(path.read_bytes()).hexdigest()
        for name in names
        for path in sorted((store / name).rglob("*"))
        if path.is_file()
    }


def differing_objects(first: Path, second: Path) -> list[str]:
    """Paths of the data and coverage objects that differ (or exist in one store only)."""
    a, b = object_digests(first), object_digests(second)
    return sorted(path for path in a.keys() | b.keys() if a.get(path) != b.get(path))


def open_group(store: Path):
    import zarr

    return zarr.open_group(str(store), mode="r", use_consolidated=False)


def differing_arrays(first: Path, second: Path, rows: int = 16) -> list[str]:
    """Names of the root arrays whose shape or values differ (NaN equal to NaN), read `rows`
    of the first axis at a time; an array in one store only differs."""
    a, b = open_group(first), open_group(second)
    names_a, names_b = set(a.array_keys()), set(b.array_keys())
    differ = sorted(names_a ^ names_b)
    for name in sorted(names_a & names_b):
        x, y = a[name], b[name]
        if x.shape != y.shape or x.dtype != y.dtype:
            differ.append(name)
            continue
        nan = x.dtype.kind in "fc"
        for lo in range(0, max(x.shape[0], 1) if x.ndim else 1, rows):
            part = slice(lo, lo + rows) if x.ndim else ()
            if not np.array_equal(x[part], y[part], equal_nan=nan):
                differ.append(name)
                break
    return differ


@dataclass(frozen=True)
class Trace:
    """Samples a file holds: channel code, first sample (ns since 1970), int32 counts."""

    channel: str
    start_ns: int
    counts: np.ndarray


def store_grid(store: Path) -> tuple[int, float, int]:
    """(first grid sample, ns since 1970; rate, Hz; samples per time block) of a store."""
    group = open_group(store)
    attrs = group.attrs
    return int(attrs["start_time_ns"]), float(attrs["sampling_rate"]), int(group["data"].chunks[-1])


def sample_index(start_ns: int, grid_ns: int, rate: float) -> int:
    return round((start_ns - grid_ns) * rate / 1e9)


def blocks_with_data(store: Path, traces: Sequence[Trace]) -> tuple[int, int]:
    """(blocks, runs of consecutive blocks) that hold a sample of `traces`, on the store's grid."""
    grid_ns, rate, block = store_grid(store)
    found: set[int] = set()
    for trace in traces:
        first = sample_index(trace.start_ns, grid_ns, rate)
        found.update(range(first // block, (first + len(trace.counts) - 1) // block + 1))
    ordered = sorted(found)
    return len(ordered), sum(1 for i, b in enumerate(ordered) if i == 0 or b != ordered[i - 1] + 1)


def samples_match(store: Path, station: str, traces: Sequence[Trace]) -> bool:
    """Whether the store's samples of `station` equal every trace's counts (as float32)."""
    group = open_group(store)
    grid_ns, rate, _ = store_grid(store)
    row = list(group["station"][:]).index(station)
    channels = list(group["channel"][:])
    for trace in traces:
        first = sample_index(trace.start_ns, grid_ns, rate)
        stored = group["data"][
            row, channels.index(trace.channel), first : first + len(trace.counts)
        ]
        if not np.array_equal(stored, trace.counts.astype(np.float32)):
            return False
    return True


# --- inputs ---------------------------------------------------------------------------------


def write_file(path: Path, network_station_location: tuple[str, str, str], traces: Sequence[Trace],
               rate: float) -> Path:  # fmt: skip
    """One STEIM2 miniSEED file of `traces` (obspy)."""
    import obspy

    network, station, location = network_station_location
    stream = obspy.Stream([
        obspy.Trace(trace.counts, {
            "network": network, "station": station, "location": location,
            "channel": trace.channel, "sampling_rate": rate,
            "starttime": obspy.UTCDateTime(ns=trace.start_ns),
        })
        for trace in traces
    ])  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    stream.write(str(path), format="MSEED", encoding="STEIM2")
    return path


def gap_files(folder: Path, gap_s: float) -> tuple[list[Path], list[Trace]]:
    """Two 10-minute 100 Hz 3-channel files of one station, `gap_s` from start to start."""
    import obspy

    first_ns = obspy.UTCDateTime(GAP_START).ns
    n = int(FILE_S * RATE_HZ)
    paths, traces = [], []
    for index, start_ns in enumerate((first_ns, first_ns + int(gap_s * 1e9))):
        rng = np.random.default_rng([38, index])
        these = [Trace(f"HH{c}", start_ns, rng.integers(-5000, 5000, n).astype(np.int32))
                 for c in "ZNE"]  # fmt: skip
        paths.append(write_file(folder / f"gap{index}.mseed", GAP_STATION, these, RATE_HZ))
        traces += these
    return paths, traces


def base_archive(options: ScaleOptions, sizes: Sizes, files: int = 0) -> scale_ingest.Archive:
    """The append's base of `files` (default `sizes.append_files`): the file-count curve's
    archive of that size where it is the same one (full run), else one of its own."""
    files = files or sizes.append_files
    if sizes.append_days == scale_ingest.SMALL_FILE_DAYS and not options.quick:
        return scale_ingest.file_archive(options, files)
    out = options.data / f"sds_files_{files}_{sizes.append_days}d"
    arguments = ("--files", str(files), "--days", str(sizes.append_days))
    return scale_ingest.make_sds(out, *arguments, "--workers", "2")


def next_day_file(archive: scale_ingest.Archive, folder: Path) -> tuple[Path, Trace]:
    """The day after the archive's last of its first station's first channel (same rate), as
    an SDS-named file under `folder`, and its trace."""
    import obspy

    entry = archive.summary["file_list"][0]
    arguments = archive.summary["arguments"]
    network, station, location, channel = entry["id"].split(".")
    start = obspy.UTCDateTime(arguments["start"]) + arguments["days"] * DAY_S
    n = int(round(DAY_S * arguments["rate"]))
    trace = Trace(channel, start.ns, np.random.default_rng(38).integers(-2000, 2000, n, np.int32))
    name = f"{entry['id']}.D.{start.year}.{start.julday:03d}"
    return write_file(
        folder / name, (network, station, location), [trace], arguments["rate"]
    ), trace


# --- the sections ---------------------------------------------------------------------------


Finding = tuple[str, str, bool]  # check, result, whether it holds


def identity(check: str, differ: Sequence[str]) -> Finding:
    """A finding of stores compared: identical, or the first few objects or arrays differing."""
    return check, "identical" if not differ else f"differ: {', '.join(differ[:5])}", not differ


def matching(check: str, matches: Sequence[bool]) -> Finding:
    return check, "yes" if all(matches) else f"no ({matches})", all(matches)


def ratio_verdict(name: str, top: float, base: float, goal: float, unit: str = "") -> str:
    ratio = top / base if base > 0 else math.inf
    figure = f"{top:.1f}{unit} / {base:.1f}{unit} = {ratio:.2f}x"
    return verdict(f"{name} <= {goal}x", figure, ratio <= goal)


def gap_section(
    options: ScaleOptions, sizes: Sizes, imports: int, clusters: scale_cluster.Clusters
) -> tuple[Section, list[Finding]]:
    """The time-gap runs (2 workers measured, 1 worker for the identity check); the table and
    the identity findings."""
    rows: list[list[object]] = []
    runs: list[tuple[Run, int]] = []
    same: list[Finding] = []
    for label, gap_s in sizes.gaps:
        slug = label.replace(" ", "")
        paths, traces = gap_files(options.workdir / f"gap_{slug}", gap_s)
        pair = [
            measured_ingest(clusters, label, paths, options.workdir / f"gap_{slug}_{workers}w.zarr",
                            workers=workers, imports=imports)
            for workers in (2, 1)
        ]  # fmt: skip
        blocks, block_runs = blocks_with_data(pair[0].store, traces)
        rows += [run.row(f"{blocks} ({block_runs} runs)") for run in pair]
        runs.append((pair[0], blocks))
        same += [
            identity(f"gap {label}: data and coverage objects, 1 vs 2 workers",
                     differing_objects(pair[0].store, pair[1].store)),
            matching(f"gap {label}: samples equal the files' (1 and 2 workers)",
                     [samples_match(run.store, ".".join(GAP_STATION), traces) for run in pair]),
        ]  # fmt: skip
    section = Section("Sparse time: one station, two 10-minute 100 Hz files", COLUMNS, rows)
    (first, _), (last, _) = runs[0], runs[-1]
    section.goals += [
        ratio_verdict(f"wall, {last.label} / {first.label}", last.seconds, first.seconds,
                      WALL_GOAL, " s"),
        ratio_verdict(f"client peak RSS, {last.label} / {first.label}", last.client_peak / MiB,
                      first.client_peak / MiB, MEMORY_GOAL, " MiB"),
        verdict("no progress object for an empty block (records <= blocks with data)",
                ", ".join(f"{run.progress_records} <= {blocks}" for run, blocks in runs),
                all(run.progress_records <= blocks for run, blocks in runs)),
    ]  # fmt: skip
    section.notes += [
        f"{GAP_STATION[0]}.{GAP_STATION[1]}: the first file at {GAP_START} UTC, the second the "
        "gap later (start to start). `client above imports`: the peak less the peak of a process "
        f"that only imports what the command loads ({imports / MiB:.0f} MiB). `progress objects`"
        f": files under `{PROGRESS_PREFIX}…` (polled); `records`: those less zarr metadata. "
        "`blocks with data`: on the store's grid, from the files' times. `load`: before / after."
    ]
    return section, same


def append_section(
    options: ScaleOptions, sizes: Sizes, imports: int, clusters: scale_cluster.Clusters
) -> tuple[Section, list[Finding]]:
    """Base store, `--append` of one file (2 workers; 1 worker on a copy of the base), that
    file alone into a new store, and a one-shot ingest of every file."""
    archive = base_archive(options, sizes)
    sds = archive.root / archive.summary["sds_root"]
    new_file, trace = next_day_file(archive, options.workdir / "append_new")
    inventory = ("--inventory", str(archive.inventory))
    store = options.workdir / "append_2w.zarr"
    copy = options.workdir / "append_1w.zarr"
    n = archive.summary["files"]
    base = measured_ingest(
        clusters, f"base: {n:,} files", [sds], store, *inventory, imports=imports
    )
    shutil.copytree(store, copy)
    runs = [
        base,
        measured_ingest(clusters, "--append 1 file", [new_file], store, "--append", *inventory,
                        imports=imports),
        measured_ingest(clusters, "--append 1 file", [new_file], copy, "--append", *inventory,
                        workers=1, imports=imports),
        measured_ingest(clusters, "1 file alone, new store", [new_file],
                        options.workdir / "append_alone.zarr", *inventory, imports=imports),
        measured_ingest(clusters, f"one shot: {n + 1:,} files", [sds, new_file],
                        options.workdir / "append_oneshot.zarr", *inventory, imports=imports),
    ]  # fmt: skip
    larger_files, larger = larger_append(options, sizes, imports, clusters)
    section = Section(f"Append: 1 file onto a {n:,}-file store", COLUMNS,
                      [run.row() for run in runs + larger])  # fmt: skip
    appended, alone = runs[1], runs[3]
    section.goals.append(ratio_verdict("--append of 1 file / that file alone", appended.seconds,
                                       alone.seconds, APPEND_GOAL, " s"))  # fmt: skip
    above = [run.client_peak - run.client_imports for run in (appended, larger[1])]
    section.goals.append(ratio_verdict(
        f"--append's client above imports, onto {larger_files:,} / {n:,} files",
        above[1] / MiB, above[0] / MiB, FLAT_GOAL, " MiB"))  # fmt: skip
    section.notes += [
        f"Base: {archive.root} (`make_archive.py sds --files {sizes.append_files} --days "
        f"{sizes.append_days}`, with its StationXML); the new file: {new_file.name}, the day "
        "after the archive's last. Each run on a fresh cluster (TINY: one per worker count)."
    ]
    station = ".".join(new_file.name.split(".")[:3])
    same = [
        identity("append: data and coverage objects, 1 vs 2 workers",
                 differing_objects(store, copy)),
        identity("append vs a one-shot ingest of every file: root arrays (numpy)",
                 differing_arrays(store, runs[4].store)),
        matching("append: the new file's samples equal the file's (1 and 2 workers, alone)",
                 [samples_match(path, station, [trace]) for path in (store, copy, alone.store)]),
    ]  # fmt: skip
    return section, same


def larger_append(
    options: ScaleOptions, sizes: Sizes, imports: int, clusters: scale_cluster.Clusters
) -> tuple[int, list[Run]]:
    """A base store of `sizes.larger_files` files and `--append` of one file onto it (2
    workers): its record is read in ranges by tasks (`record_parts`), so the client's work
    does not grow with the store's files."""
    archive = base_archive(options, sizes, sizes.larger_files)
    sds = archive.root / archive.summary["sds_root"]
    new_file, _ = next_day_file(archive, options.workdir / "append_new_larger")
    inventory = ("--inventory", str(archive.inventory))
    store = options.workdir / "append_larger.zarr"
    n = archive.summary["files"]
    return n, [
        measured_ingest(clusters, f"base: {n:,} files", [sds], store, *inventory,
                        imports=imports),
        measured_ingest(clusters, f"--append 1 file onto {n:,}", [new_file], store, "--append",
                        *inventory, imports=imports),
    ]  # fmt: skip


def same_section(findings: Sequence[Finding]) -> Section:
    rows = [[check, result] for check, result, _ in findings]
    section = Section("Same stores as today's ingest semantics", ["check", "result"], rows)
    failed = sum(not holds for _, _, holds in findings)
    section.goals.append(verdict("every check holds", f"{failed} failed", not failed))
    return section


def warm_up(options: ScaleOptions, sizes: Sizes, clusters: scale_cluster.Clusters) -> None:
    """One unmeasured ingest of the first gap's files: else the first measured run alone pays
    for a cold page cache (Python's modules, the inputs)."""
    paths, _ = gap_files(options.workdir / "warm_up", sizes.gaps[0][1])
    measured_ingest(clusters, "warm-up (not measured)", paths, options.workdir / "warm_up.zarr")


def sparse_sections(options: ScaleOptions, sizes: Sizes) -> Iterator[Section]:
    """The time-gap, append and same-store tables of `sizes`."""
    imports = scale_ingest.import_rss()
    with scale_cluster.Clusters(options.workdir, sizes.fresh_clusters) as clusters:
        if sizes.warm_up:
            warm_up(options, sizes, clusters)
        gaps, same_gaps = gap_section(options, sizes, imports, clusters)
        yield gaps
        append, same_append = append_section(options, sizes, imports, clusters)
        yield append
    yield same_section(same_gaps + same_append)


def sections(options: ScaleOptions) -> Iterator[Section]:
    """The time-gap, append and same-store tables (`bench_scale.py --only sparse`)."""
    yield from sparse_sections(options, QUICK if options.quick else FULL)
