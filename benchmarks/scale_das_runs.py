"""Scale section `das-runs`: what the number of time blocks costs `ingest das`.

The same DAS recordings (PRODML files written by the tests' generator `das_vendor_files`, end to
end at 1 kHz) ingested into fresh stores at the store's own block size (4 MiB of float32 a
chunk: `das_plan.chunk_rows`) and at DIVISORS times fewer samples a block, so the blocks are
that many times more for the same bytes: what a longer archive does to the block count. Each
run is `seisctf.formats.das.das_files.ingest_das` called by a process of its own (the command's
client; `block_samples` is not a command-line option) attached to a fresh cluster
(`scale_cluster.Cluster`: an external scheduler with the task probe, 2 workers).

Per run: blocks written (the store's `coverage` > 0), the run tasks (`ingest_das_run-…` keys)
and all Dask tasks, progress objects (the most seen at once under `ingest_progress`, polled in a
thread), wall seconds (spawn to exit), the client's peak RSS above its own RSS after its imports
(both VmHWM, printed by the process). Goals (issue 38: the client's work does not grow with the
archive): run tasks and progress records at most blocks / RUN_BLOCKS + MIN_RUNS (before: one of
each a block); the client's peak above imports at the most blocks at most 1.2x that at half as
many, both beyond one wave (`cluster.MAX_TASKS_PER_WAVE` blocks: the client holds one wave's
tasks). Same bytes: every store's data equal (numpy) and equal DASCore's read.

A second table (`file_section`) ingests FILE_COUNTS short files, then appends one file after
them (`--append`): the client's peak above its imports per file, for the ingest and for the
append (which joins the store's record range by range on the workers: `record_parts`), each at
the most files at most 1.2x that at the fewest; the appended file's samples are stored after
the others'.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scale_cluster
from bench_ctf_scoring import load_average
from scale_report import MiB, ScaleOptions, Section, run_command, verdict
from scale_sparse import ProgressPoller

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from das_vendor_files import write_prodml  # noqa: E402

from seisctf.formats.das.das_plan import chunk_rows  # noqa: E402
from seisctf.formats.das.das_runs import MIN_RUNS, RUN_BLOCKS  # noqa: E402

RATE_HZ = 1000.0
# The files axis (`file_section`): as many files of (channels, samples) each, end to end.
# A piece a file here: 5,000 files are one wave of `das_files.MAX_PIECES_PER_WAVE` pieces,
# 50,000 are ten.
FILE_COUNTS, QUICK_FILE_COUNTS, FILE_SHAPE = (5_000, 50_000), (10, 40), (16, 500)
DIVISORS = (1, 512, 1024)  # of the store's block size
# (files, channels, samples a file): 20 minutes of 64 channels (154 MB); quick: 16 s of 16.
FULL, QUICK = (20, 64, 60_000), (4, 16, 4_000)
CLIENT_GOAL = 1.2
COLUMNS = [
    "block samples", "blocks written", "run tasks", "Dask tasks", "progress objects (peak)",
    "wall s", "client above imports MiB", "load",
]  # fmt: skip
# The client: its RSS peak after its imports, then ingest_das on the cluster, then its peak.
CLIENT = """
import json, sys
from seisctf.cluster import dask_client
from seisctf.formats.das.das_files import ingest_das
from seisctf.location import StoreLocation
hwm = lambda: int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
imports = hwm()
source, out, block_samples, address, append = sys.argv[1:]
with dask_client(address, quiet=True):
    ingest_das([source], StoreLocation(out), block_samples=int(block_samples), quiet=True,
               append=append == "append")
print(json.dumps({"imports": imports, "peak": hwm()}))
"""


@dataclass(frozen=True)
class Run:
    block_samples: int
    blocks: int
    run_tasks: int
    tasks: int
    progress_peak: int
    seconds: float
    above_imports: int  # bytes
    load: str
    store: Path

    def row(self) -> list[object]:
        return [
            self.block_samples, self.blocks, self.run_tasks, self.tasks, self.progress_peak,
            self.seconds, self.above_imports / MiB, self.load,
        ]  # fmt: skip


def recordings(
    options: ScaleOptions, shape: tuple[int, int, int] | None = None
) -> tuple[Path, int]:
    """The PRODML files of `shape` (files, channels, samples a file; default FULL or QUICK),
    end to end, written once under the data folder, and their channel count."""
    count, channels, samples = shape or (QUICK if options.quick else FULL)
    root = options.data / f"das_runs_{count}x{channels}x{samples}"
    if not (root / "done").exists():
        root.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        start = np.datetime64("2024-03-01T00:00:00", "ns")
        step = np.timedelta64(round(1e9 / RATE_HZ), "ns")
        for index in range(count):
            values = rng.standard_normal((samples, channels)).astype(np.float32)
            write_prodml(root / f"das_{index:03d}.h5", values, start + index * samples * step,
                         RATE_HZ)  # fmt: skip
        (root / "done").write_text("")
    return root, channels


def one_more(options: ScaleOptions, count: int, channels: int, samples: int) -> Path:
    """A folder holding one PRODML file of (samples, channels) right after the `count` files of
    `recordings`: its values are `appended_values(channels, samples)`."""
    root = options.data / f"das_runs_{count}x{channels}x{samples}_next"
    if not (root / "done").exists():
        root.mkdir(parents=True, exist_ok=True)
        start = np.datetime64("2024-03-01T00:00:00", "ns")
        step = np.timedelta64(round(1e9 / RATE_HZ), "ns")
        write_prodml(root / f"das_{count:03d}.h5", appended_values(channels, samples),
                     start + count * samples * step, RATE_HZ)  # fmt: skip
        (root / "done").write_text("")
    return root


def appended_values(channels: int, samples: int) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((samples, channels)).astype(np.float32)


def measured(
    source: Path,
    out: Path,
    block_samples: int,
    clusters: scale_cluster.Clusters,
    append: bool = False,
) -> Run:
    with clusters.of() as cluster:
        cluster.probe()  # the wait for workers: cleared
        load = load_average()
        command = [sys.executable, "-c", CLIENT, str(source), str(out), str(block_samples),
                   cluster.address, "append" if append else "new"]  # fmt: skip
        with ProgressPoller(out) as poller:
            run = run_command(command)
        probe = cluster.probe()
    client = json.loads(run.stdout.strip().splitlines()[-1])
    import zarr

    coverage = np.asarray(zarr.open_group(str(out), mode="r")["coverage"][:])
    measured = Run(
        block_samples=block_samples,
        blocks=int(np.count_nonzero(coverage)),
        run_tasks=int(probe.get("ingest_das_run", {}).get("tasks", 0)),
        tasks=int(sum(entry["tasks"] for entry in probe.values())),
        progress_peak=poller.peak[1],
        seconds=run.seconds,
        above_imports=client["peak"] - client["imports"],
        load=f"{load} / {load_average()}",
        store=out,
    )
    print("  " + " | ".join(str(cell) for cell in measured.row()), flush=True)
    return measured


def same_data(runs: list[Run], source: Path) -> bool:
    """Both stores' samples equal each other and DASCore's read of the files, end to end."""
    import dascore as dc
    import zarr

    patches = sorted(dc.spool(str(source)).update(), key=lambda p: p.get_coord("time").min())
    expected = np.concatenate(
        [np.asarray(p.transpose("time", "distance").data, dtype=np.float32) for p in patches]
    )
    stored = [np.asarray(zarr.open_group(str(r.store), mode="r")["strain_rate"][:]) for r in runs]
    return all(np.array_equal(values, expected) for values in stored)


def sections(options: ScaleOptions) -> Iterator[Section]:
    source, channels = recordings(options)
    workdir = options.workdir / "das_runs"
    workdir.mkdir(parents=True, exist_ok=True)
    sizes = [chunk_rows(channels) // divisor for divisor in DIVISORS]
    print(f"das-runs: {source.name}, block samples {', '.join(map(str, sizes))}")
    # A fresh cluster for each run; one for all at the quick size (the tests' runs, whose task
    # counts are the probe's since the run began: `probe` clears it).
    with scale_cluster.Clusters(workdir, fresh=not options.quick) as clusters:
        runs = [measured(source, workdir / f"store_{size}.zarr", size, clusters) for size in sizes]
        files = file_section(options, workdir, clusters)
    section = Section(
        "`ingest das`: the same recordings at the store's block size and "
        f"{' and '.join(map(str, DIVISORS[1:]))}x smaller blocks",
        COLUMNS,
        [run.row() for run in runs],
    )
    for run in runs:
        bound = math.ceil(run.blocks / RUN_BLOCKS) + MIN_RUNS
        section.goals.append(verdict(
            f"run tasks and progress records <= blocks / {RUN_BLOCKS} + {MIN_RUNS} = {bound} "
            f"at {run.block_samples} samples a block",
            f"{run.run_tasks} tasks, {run.progress_peak} records for {run.blocks} blocks",
            run.run_tasks <= bound and run.progress_peak <= bound,
        ))  # fmt: skip
    top, half = runs[-1], runs[-2]
    section.goals.append(client_verdict(top, half, f"{top.blocks:,} blocks", f"{half.blocks:,}"))
    section.goals.append(verdict("same data, and DASCore's", "equal", same_data(runs, source)))
    yield section
    yield files


def file_section(options: ScaleOptions, workdir: Path, clusters: scale_cluster.Clusters) -> Section:
    """The client against the file count: FILE_COUNTS files of FILE_SHAPE each at the store's
    block size, then one more appended. The scans and the plan stay on the workers
    (`das_parts`; an append's join with the store's record too: `record_parts`); the client
    holds per-partition summaries and one wave's runs, of at most `MAX_PIECES_PER_WAVE`
    pieces."""
    import zarr

    counts = QUICK_FILE_COUNTS if options.quick else FILE_COUNTS
    channels, samples = FILE_SHAPE
    ingests, appends, stored = [], [], []
    for count in counts:
        source, _ = recordings(options, (count, channels, samples))
        out = workdir / f"store_files_{count}.zarr"
        ingests.append(measured(source, out, chunk_rows(channels), clusters))
        later = one_more(options, count, channels, samples)
        appends.append(measured(later, out, chunk_rows(channels), clusters, append=True))
        data = zarr.open_group(str(out), mode="r")["strain_rate"]
        stored.append(data.shape[0] == (count + 1) * samples and np.array_equal(
            data[count * samples :], appended_values(channels, samples)))  # fmt: skip
    section = Section(
        f"`ingest das`: the client against the file count ({channels} channels x {samples} "
        "samples a file), an ingest and an append of one file onto it",
        ["files", "run", *COLUMNS],
        [[count, kind, *run.row()]
         for count, pair in zip(counts, zip(ingests, appends, strict=True), strict=True)
         for kind, run in zip(("ingest", "append 1 file"), pair, strict=True)],
    )  # fmt: skip
    few, many = counts
    low, top = ingests
    slope = (top.above_imports - low.above_imports) / (many - few)
    section.goals.append(f"client above imports: {slope:,.0f} bytes a file ({few:,} -> {many:,})")
    section.goals.append(client_verdict(top, low, f"{many:,} files", f"{few:,}"))
    section.goals.append(client_verdict(appends[1], appends[0], f"an append onto {many:,} files",
                                        f"onto {few:,}"))  # fmt: skip
    found = f"{sum(stored)} of {len(stored)} stores"
    section.goals.append(verdict("the appended file's samples after the others'", found,
                                 all(stored)))  # fmt: skip
    return section


def client_verdict(top: Run, low: Run, at_top: str, at_low: str) -> str:
    """The goal: the client's peak above imports at the larger run (`at_top`) at most
    CLIENT_GOAL times that at the smaller (`at_low`)."""
    ratio = top.above_imports / max(low.above_imports, 1)
    return verdict(
        f"client above imports at {at_top} <= {CLIENT_GOAL}x that at {at_low}",
        f"{top.above_imports / MiB:.1f} / {low.above_imports / MiB:.1f} MiB = {ratio:.2f}x",
        ratio <= CLIENT_GOAL,
    )
