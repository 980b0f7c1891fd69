"""Scale section `ctf`: `seisctf score ctf`, the whole command as a user runs it, against the eager
numpy scorer, on bundles from 0.1 GB to 10+ GB, in both conventions.

A bundle is a truth group and a submission of 9 random test arrays of rows × 2048 sensors (the
seismo width), float32, with the truth's block commitment (`bench_ctf_memory.build`: written
blockwise by Dask, so building never holds a bundle in memory); its size is truth + submission
bytes on disk (random floats do not compress: about their array bytes). Bundles are built once
under DATA/ctf/ and reused.

Per size and convention, interleaved (command, eager, command, eager … so load drift hits both):
- the command `seisctf score ctf --truth T --submission S --json OUT --convention C
  --cluster FILE.yaml`, dashboard on (no `--quiet`), on a `distributed.LocalCluster` of one
  in-process worker with a thread per core, limited to `WORKER_LIMIT` (the largest bundle is then
  ≥ 4× the worker's memory): on two cores the cheapest cluster for this command (measured: a
  1 GB bundle, paper convention, 9.5-10 CPU s in all against 17 s for the embedded cluster of
  two single-threaded worker processes and 26-29 s for a configured LocalCluster of spawned
  worker processes, which pay for imports and for moving 4 MiB blocks between workers); wall
  time of the process tree and the peak RSS of its processes (`scale_report.run_command`; with an
  in-process worker the client's peak is the worker's);
- the eager scorer (`bench_ctf_scoring.py --eager`: every test array loaded into memory, then the
  reference scorer's formulas: SVD 2-norms, eager FFT), where its estimated need fits in the
  machine's available memory; wall time and peak RSS of its process. Its `reference` SVDs cost
  many minutes above 1 GB (O(rows · sensors²) each), so above `EAGER_SVD_MAX_GB` the eager
  `reference` time is bounded below by the eager `paper` run of the same size (the same loads
  and float64 copies, with Frobenius norms instead of SVDs): the ratio is then a lower bound (≥).
The ratio is eager seconds ÷ command seconds; the scores must agree (max |difference| of the raw
scores, the eager scorer being the independent check).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
from bench_ctf_memory import build as build_random_bundle
from bench_ctf_scoring import eager_command, load_average, run_child, score_difference
from scale_report import (
    MiB,
    ScaleOptions,
    Section,
    run_command,
    seisctf_command,
    tree_bytes,
    verdict,
)

SENSORS = 2048
TEST_ARRAYS = 9
FULL_SIZES_GB = (0.1, 0.5, 1.0, 3.0, 10.0)
QUICK_SIZES_GB = (0.02, 0.05)
TINY_SIZES_GB = (0.02,)  # the tests' size: one bundle, both conventions
GOAL_RATIO, GOAL_FROM_GB = 1.5, 0.5
CONVENTIONS = ("reference", "paper")
# Memory limit of the command's worker: the 10 GB bundle is then 4.7x the worker's memory.
WORKER_LIMIT = "2GiB"
EAGER_SVD_MAX_GB = 1.0  # the eager reference scorer runs its SVDs up to this size


@dataclass(frozen=True)
class Bundle:
    size_gb: float  # nominal: truth + submission bytes
    rows: int
    truth: str
    submission: str
    disk_bytes: int  # truth + submission groups on disk


def rows_for(size_gb: float) -> int:
    """Rows of each test array so that truth + submission hold `size_gb` × 10⁹ bytes."""
    return max(64, round(size_gb * 1e9 / (2 * TEST_ARRAYS * SENSORS * 4)))


def bundle(root: Path, size_gb: float) -> Bundle:
    """The bundle of `size_gb` under `root`, built the first time (a `ready.json` marks it
    complete)."""
    from seisctf.cluster import dask_client

    rows = rows_for(size_gb)
    folder = root / f"random-{rows}x{SENSORS}-float32"
    ready = folder / "ready.json"
    if not ready.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        with dask_client(quiet=True):
            build_random_bundle(folder, rows, SENSORS, quiet=True)
        disk = tree_bytes(folder / "truth.zarr") + tree_bytes(folder / "random.zarr")
        ready.write_text(json.dumps({"rows": rows, "sensors": SENSORS, "disk_bytes": disk}))
    disk = json.loads(ready.read_text())["disk_bytes"]
    return Bundle(size_gb, rows, str(folder / "truth.zarr"), str(folder / "random.zarr"), disk)


def cluster_file(workdir: Path) -> Path:
    """A LocalCluster of one in-process worker with a thread per core, limited to
    `WORKER_LIMIT`."""
    path = workdir / "ctf-cluster.yaml"
    threads = len(os.sched_getaffinity(0))
    path.write_text(
        "class: distributed.LocalCluster\n"
        f"options: {{n_workers: 1, threads_per_worker: {threads}, processes: false, "
        f"memory_limit: {WORKER_LIMIT}}}\n"
    )
    return path


def command(bundle: Bundle, convention: str, cluster: Path, out: Path) -> list[str]:
    """`seisctf score ctf` as a user types it (dashboard on, results to a JSON file)."""
    return [
        *seisctf_command(),
        "score",
        "ctf",
        "--truth",
        bundle.truth,
        "--submission",
        bundle.submission,
        "--convention",
        convention,
        "--cluster",
        str(cluster),
        "--json",
        str(out),
    ]


def eager_need_bytes(bundle: Bundle) -> int:
    """Both float32 sets in memory, plus float64 truth, submission, difference and the SVD's
    copy of one array."""
    array = bundle.rows * SENSORS
    return 2 * TEST_ARRAYS * array * 4 + 4 * array * 8


@dataclass(frozen=True)
class Pair:
    cli_s: list[float]
    eager_s: list[float]  # empty: the eager scorer did not run
    cli_peaks: dict[str, int]  # peak RSS by role (client, worker N)
    eager_peak: int
    difference: float  # max |raw score difference|, command vs eager
    eager_load_s: float
    load: str
    bound: bool = False  # eager_s is a lower bound (the paper run), not a reference run


def measure(
    bundle: Bundle, convention: str, cluster: Path, workdir: Path, repeat: int, eager: bool
) -> Pair:
    """The command and (with `eager`, where it fits in memory) the eager scorer, interleaved
    `repeat` times each."""
    out = workdir / f"ctf-{bundle.rows}-{convention}.json"
    eager = eager and eager_need_bytes(bundle) < 0.8 * psutil.virtual_memory().available
    cli_s, eager_s, peaks, eager_peak, differences, loads = [], [], {}, 0, [], []
    for _ in range(repeat):
        run = run_command(command(bundle, convention, cluster, out))
        cli_s.append(run.seconds)
        for role, peak in run.memory.peaks().items():
            peaks[role] = max(peaks.get(role, 0), peak)
        result = json.loads(out.read_text())
        if eager:
            child = run_child(eager_command(bundle.truth, bundle.submission, convention))
            eager_s.append(child.seconds)
            eager_peak = max(eager_peak, child.peak_rss_bytes)
            loads.append(child.output["load_s"])
            differences.append(score_difference(result, child.output, "raw_scores"))
    return Pair(
        cli_s,
        eager_s,
        peaks,
        eager_peak,
        max(differences, default=float("nan")),
        statistics.median(loads) if loads else float("nan"),
        load_average(),
    )


def bounded(pair: Pair, paper: Pair) -> Pair:
    """`pair` (a reference run of the command alone) with the paper run's eager figures as the
    lower bound of the eager reference scorer's."""
    return replace(
        pair,
        eager_s=paper.eager_s,
        eager_peak=paper.eager_peak,
        eager_load_s=paper.eager_load_s,
        bound=bool(paper.eager_s),
    )


COLUMNS = [
    "bundle GB: arrays (on disk)",
    "rows × sensors × 9",
    "convention",
    "command s (median)",
    "eager s (median; its load s)",
    "eager ÷ command",
    "command peak RSS MiB (client; workers)",
    "eager peak MiB",
    "max abs raw score diff",
    "load average after",
]


def ratio_of(pair: Pair) -> float | None:
    if not pair.eager_s:
        return None
    return statistics.median(pair.eager_s) / statistics.median(pair.cli_s)


def row(bundle: Bundle, convention: str, pair: Pair) -> list[object]:
    cli = statistics.median(pair.cli_s)
    ratio = ratio_of(pair)
    workers = sorted(role for role in pair.cli_peaks if role.startswith("worker"))
    peaks = f"{pair.cli_peaks.get('client', 0) / MiB:.0f}"
    if workers:
        peaks += "; " + " / ".join(f"{pair.cli_peaks[w] / MiB:.0f}" for w in workers)
    else:
        peaks += " (worker in-process)"
    if ratio is None:
        eager, shown = "not run (memory)", "—"
    elif pair.bound:
        eager = f"≥ {statistics.median(pair.eager_s):.2f} (paper run)"
        shown = f"≥ {ratio:.2f}"
    else:
        eager = f"{statistics.median(pair.eager_s):.2f} ({pair.eager_load_s:.2f})"
        shown = ratio
    return [
        f"{bundle.size_gb:g} ({bundle.disk_bytes / 1e9:.2f})",
        f"{bundle.rows:,} × {SENSORS}",
        convention,
        cli,
        eager,
        shown,
        peaks,
        pair.eager_peak / MiB if pair.eager_s else "—",
        "—" if pair.bound or ratio is None else f"{pair.difference:.1e}",
        pair.load,
    ]


def goal(convention: str, ratios: list[tuple[float, float, bool]]) -> str | None:
    """The verdict on the ratios (size, ratio, bounded) of one convention: measured ratios are
    judged; a size where only a lower bound below the goal is known is left unjudged."""
    name = f"≥ {GOAL_RATIO}× eager at every size ≥ {GOAL_FROM_GB} GB, {convention}"
    judged = [item for item in ratios if item[0] >= GOAL_FROM_GB]
    measured = [item for item in judged if not item[2]]
    figure = ", ".join(
        f"{'≥ ' * bound}{ratio:.2f}× at {size:g} GB" for size, ratio, bound in judged
    )
    if not judged:
        return None  # no size the goal applies to (--quick)
    if any(ratio < GOAL_RATIO for _, ratio, _ in measured):
        return verdict(name, figure, False)
    if any(ratio < GOAL_RATIO for _, ratio, _ in judged):
        return f"{name}: {figure}, **not judged where only a bound is known** (eager SVDs not run)"
    return verdict(name, figure, True)


def sections(options: ScaleOptions, sizes: tuple[float, ...] = ()) -> Iterator[Section]:
    """The table over `sizes` (GB; default QUICK_SIZES_GB or FULL_SIZES_GB)."""
    sizes = sizes or (QUICK_SIZES_GB if options.quick else FULL_SIZES_GB)
    repeat = 1
    root = options.data / "ctf"
    root.mkdir(parents=True, exist_ok=True)
    cluster = cluster_file(options.workdir)
    section = Section(
        "score ctf: the whole command vs eager numpy, 0.1 → 10 GB bundles, both conventions",
        COLUMNS,
    )
    ratios: dict[str, list[tuple[float, float, bool]]] = {c: [] for c in CONVENTIONS}
    builds = []
    for size in sizes:
        start = time.perf_counter()
        made = bundle(root, size)
        builds.append(f"{size:g} GB {time.perf_counter() - start:.0f} s")
        paper = measure(made, "paper", cluster, options.workdir, repeat, eager=True)
        svd = size <= EAGER_SVD_MAX_GB
        reference = measure(made, "reference", cluster, options.workdir, repeat, eager=svd)
        if not svd:
            reference = bounded(reference, paper)
        for convention, pair in (("reference", reference), ("paper", paper)):
            section.rows.append(row(made, convention, pair))
            if (ratio := ratio_of(pair)) is not None:
                ratios[convention].append((size, ratio, pair.bound))
    verdicts = [goal(convention, ratios[convention]) for convention in CONVENTIONS]
    section.goals += [line for line in verdicts if line]
    section.notes.append(
        f"Command: `seisctf score ctf --truth T --submission S --convention C --cluster "
        f"{cluster.name} --json OUT` (dashboard on), the cluster file: "
        f"`{' '.join(cluster.read_text().split())}`; {repeat} run of each, the paper runs "
        f"first, each command run followed by the eager scorer's. Bundles: 9 random float32 "
        f"test arrays of rows × {SENSORS} in truth and in the submission, with the truth's "
        f"block commitment; GB = 10⁹ bytes of truth + submission arrays (on disk: lz4 + "
        f"bitshuffle); built (or reused) in {', '.join(builds)}. Eager `reference` above "
        f"{EAGER_SVD_MAX_GB:g} GB: bounded below by the eager `paper` run (module docstring)."
    )
    yield section
