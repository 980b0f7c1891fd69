"""Benchmark: `seisctf score ctf` as a user runs it, against an eager numpy scorer, same bundle.

Builds one global synthetic wavefield and its task bundle at the `seismo` layout's size (2048
sensors, 3000 one-second steps by default), writes public and truth groups to a temporary folder,
writes a noisy submission (truth + 10 % of the truth's RMS in Gaussian noise), closes the build's
cluster, then runs, --repeat times each and interleaved (so load drift hits all alike):

  (a) the command `seisctf score ctf --truth T --submission S --quiet` in a child process (the
      installed entry point; the embedded LocalCluster starts and stops inside it: one
      single-threaded worker per usable core), and the same with `--convention paper`;
  (b) an eager numpy scorer, this file's `--eager` mode, in a child process: loads every test
      array of truth and submission from zarr into memory, then applies the contract's formulas
      the reference way (matrix 2-norm by SVD, `np.linalg.norm(ord=2)`; eager FFT), for each
      convention. It imports numpy and zarr only.

Both are timed as whole processes (start-up, imports, reading, scoring, exit). It prints a table:
median seconds, the runs, speed-up of the command over the eager scorer, max |score difference|.
Then it profiles where the command's time goes: this file's `--trace` mode runs the same
command through `seisctf.cli.main` in a child process with timestamps around its pieces
(interpreter start, imports, the main thread's work until its one Dask compute, the embedded
cluster's start in its background thread, the wait for it, the compute, what follows, exit), with
worker-seconds per task kind from the Dask task stream.
Finally it runs part 2, `bench_ctf_memory.py` (peak memory on a bundle larger than a worker),
unless --skip-memory.

    .venv/bin/python benchmarks/bench_ctf_scoring.py [--sensors 2048] [--steps 3000] [--repeat 3]
        [--skip-memory]
    .venv/bin/python benchmarks/bench_ctf_scoring.py --eager TRUTH SUBMISSION [--convention paper]

The child modes `--trace TRUTH SUBMISSION` and `--threaded TRUTH SUBMISSION` (score_ctf on Dask's
threaded scheduler, no LocalCluster: a diagnostic row of the table) print JSON likewise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Only numpy and zarr at import time: the eager child must not pay for Dask or xarray imports.
# The contract's names, repeated here for that reason (checked against seisctf.conventions).
ATTR_CTF, METRIC_SHORT, METRIC_LONG = "ctf", "short_time", "long_time"
SECRET = "seisctf-benchmark-not-a-secret"
MIB = 2**20


# --- the eager reference scorer (child process) ---------------------------------------------------


def eager_scores(
    truth: dict[str, np.ndarray],
    submission: dict[str, np.ndarray],
    manifest: dict,
    convention: str,
) -> tuple[dict[str, float], dict[str, float]]:
    """(clipped, raw) E1..E12 by the contract's formulas, all in memory, float64.

    `reference`: matrix 2-norm by SVD, long-time error on the row-mean power spectrum (bins from
    zero frequency upward). `paper`: Frobenius norms, per-row log power spectra on the symmetric
    window n//2 − modes … n//2 + modes."""
    k_short, k_long, modes = manifest["k_short"], manifest["k_long"], manifest["modes"]

    def spectrum(rows: np.ndarray) -> np.ndarray:
        power = np.fft.fftshift(np.abs(np.fft.fft(rows, axis=1)) ** 2, axes=1)
        zero = rows.shape[1] // 2
        if convention == "reference":
            return power.mean(axis=0)[zero : zero + modes]
        window = power[:, max(0, zero - modes) : zero + modes + 1]
        return np.log(window, out=np.zeros_like(window), where=window > 0)

    norm_order = 2 if convention == "reference" else "fro"
    scores, raw_scores, index = {}, {}, 1
    for pair in manifest["pairs"]:
        t = truth[pair["test"]].astype(np.float64)
        s = submission[pair["test"]].astype(np.float64)
        for metric in pair["metrics"]:
            if metric == METRIC_LONG:
                p_truth, p_submission = spectrum(t[-k_long:]), spectrum(s[-k_long:])
                error = np.linalg.norm(p_truth - p_submission) / np.linalg.norm(p_truth)
            else:
                rows = slice(0, k_short) if metric == METRIC_SHORT else slice(None)
                error = np.linalg.norm(t[rows] - s[rows], norm_order) / np.linalg.norm(
                    t[rows], norm_order
                )
            raw_scores[f"E{index}"] = float(100.0 * (1.0 - error))
            scores[f"E{index}"] = float(np.clip(raw_scores[f"E{index}"], -100.0, 100.0))
            index += 1
    return scores, raw_scores


def eager_main(truth_url: str, submission_url: str, convention: str) -> None:
    """Load both groups' test arrays fully, score, print JSON (scores and timings) on stdout."""
    import zarr

    start = time.perf_counter()
    truth_group = zarr.open_group(truth_url, mode="r")
    manifest = dict(truth_group.attrs)[ATTR_CTF]
    names = [pair["test"] for pair in manifest["pairs"]]
    truth = {name: truth_group[name][...] for name in names}
    submission_group = zarr.open_group(submission_url, mode="r")
    submission = {name: submission_group[name][...] for name in names}
    loaded = time.perf_counter()
    scores, raw_scores = eager_scores(truth, submission, manifest, convention)
    print(
        json.dumps(
            {
                "scores": scores,
                "raw_scores": raw_scores,
                "avg_score": statistics.fmean(scores.values()),
                "load_s": loaded - start,
                "score_s": time.perf_counter() - loaded,
            }
        )
    )


# --- child processes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ChildRun:
    started_at: float  # time.time() at spawn
    seconds: float
    peak_rss_bytes: int  # wait4: the child's, or a descendant's it reaped if larger
    output: dict


def run_child(command: list[str], env: dict[str, str] | None = None) -> ChildRun:
    """Run a command that prints JSON; wall seconds from spawn to exit, and its peak RSS."""
    with tempfile.TemporaryFile("w+") as stdout:
        started_at, start = time.time(), time.perf_counter()
        process = subprocess.Popen(command, stdout=stdout, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise RuntimeError(f"exit {process.returncode}: {' '.join(command)}")
        stdout.seek(0)
        return ChildRun(started_at, seconds, usage.ru_maxrss * 1024, json.loads(stdout.read()))


def cli_command(
    truth_url: str, submission_url: str, convention: str = "reference", scheduler: str | None = None
) -> list[str]:
    """`seisctf score ctf …` by the installed entry point (as a user types it)."""
    entry = Path(sys.executable).with_name("seisctf")
    command = [str(entry)] if entry.exists() else [sys.executable, "-m", "seisctf.cli"]
    command += ["score", "ctf", "--truth", truth_url, "--submission", submission_url, "--quiet"]
    command += ["--convention", convention] * (convention != "reference")
    return command + ["--scheduler", scheduler] * bool(scheduler)


def eager_command(truth_url: str, submission_url: str, convention: str = "reference") -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--eager",
        truth_url,
        submission_url,
        "--convention",
        convention,
    ]


def score_difference(cli: dict, eager: dict, key: str = "scores") -> float:
    return max(abs(cli[key][name] - eager[key][name]) for name in eager[key])


# --- machine ------------------------------------------------------------------------------------


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_facts() -> list[str]:
    import datetime as dt
    import platform

    import dask
    import distributed
    import psutil
    import zarr

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    return [
        f"date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"cpu: {model}; usable cores: {len(os.sched_getaffinity(0))}; "
        f"RAM: {psutil.virtual_memory().total / 2**30:.1f} GiB",
        f"python {platform.python_version()}, numpy {np.__version__}, dask {dask.__version__}, "
        f"distributed {distributed.__version__}, zarr {zarr.__version__}; "
        f"{platform.system()} {platform.release()}",
        f"seisctf sources (sha256 of seisctf/**/*.py, edits in progress elsewhere): "
        f"{source_fingerprint()}",
        f"load average at start (1, 5, 15 min): {load_average()}",
    ]


def source_fingerprint() -> str:
    """Short hash of the library's sources, to tie numbers to the code that produced them."""
    import hashlib

    import seisctf

    digest = hashlib.sha256()
    for path in sorted(Path(seisctf.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


# --- part 1: bundle ----------------------------------------------------------------------------


def layout_for(steps: int, n_sensors: int):
    """The seismo layout at its own size (3000 steps); scaled proportionally for other sizes."""
    from seisctf.plugins.layouts import Layout, load_layout

    seismo = load_layout("seismo")
    if steps == seismo.required_steps and n_sensors - n_sensors // 2 >= seismo.modes:
        return seismo
    train = round(steps * seismo.train_steps / seismo.required_steps)
    few_start = round(steps * seismo.few_start / seismo.required_steps)
    forecast = steps - train
    return Layout(
        f"seismo-scaled-{steps}",
        train_steps=train,
        few_start=few_start,
        few_steps=train - few_start,
        forecast_start=train,
        forecast_steps=forecast,
        k_short=min(seismo.k_short, forecast),
        k_long=min(seismo.k_long, forecast),
        modes=min(seismo.modes, n_sensors - n_sensors // 2),
    )


def build(root: Path, n_sensors: int, steps: int, quiet: bool) -> tuple[str, str, dict]:
    """Wavefield -> bundle (public, truth) -> noisy submission; returns (truth, submission,
    manifest). Needs an active Dask client."""
    import dask.array as da

    from seisctf import storage
    from seisctf.location import StoreLocation
    from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
    from seisctf.synth.global_wavefield import synthesize_global

    wavefield_url, truth_url = str(root / "wavefield.zarr"), str(root / "truth.zarr")
    public_url, submission_url = str(root / "public.zarr"), str(root / "noisy.zarr")
    wavefield_store, truth_store, public_store, target = map(
        StoreLocation, (wavefield_url, truth_url, public_url, submission_url)
    )
    wavefield = synthesize_global(n_sensors=n_sensors, duration_s=float(steps), seed=2026)
    storage.write_dataset(wavefield, wavefield_store, label="synth global", quiet=quiet)
    layout = layout_for(steps, n_sensors)
    wavefield = storage.open_dataset(wavefield_store)
    bundle = build_bundle(wavefield, layout, SECRET, what=wavefield_url)
    manifest = write_bundle(bundle, public_store, truth_store, SECRET, quiet=quiet)
    rng = da.random.default_rng(7)
    noisy = {}
    for pair in manifest["pairs"]:
        truth = storage.read_array(truth_store, pair["test"]).astype(np.float64)
        rms = da.sqrt((truth**2).mean())
        noise = rng.standard_normal(truth.shape, chunks=truth.chunks)
        noisy[pair["test"]] = (truth + 0.1 * rms * noise).astype(np.float32)
    storage.write_arrays(noisy, target, {"model": "noisy truth"}, label="submission", quiet=quiet)
    return truth_url, submission_url, manifest


# --- part 1: where the command's time goes (child process) --------------------------------------


def trace_main(truth_url: str, submission_url: str) -> None:
    """Child mode: run `seisctf score ctf --truth T --submission S --quiet` in this process
    (`seisctf.cli.main`, after importing only `seisctf.cli`, as the entry point does) with
    timestamps around its pieces: the embedded cluster's start in its background thread, the
    main thread's work until its one Dask compute (imports, opening stores, building the graph),
    the wait for the cluster, the compute (with the Dask task stream) and what follows. Prints
    one JSON object."""
    import contextlib
    import io

    marks = {"python_started": time.time()}
    import seisctf.cli
    import seisctf.cluster as cluster

    marks["imported"] = time.time()
    tasks = []
    original_start, original_ready = cluster._start_local, cluster._ready_client
    original_compute = cluster.compute

    def start_local(*args, **kwargs):
        marks["cluster_thread_start"] = time.time()
        started = original_start(*args, **kwargs)
        marks["cluster_up"] = time.time()
        return started

    def ready_client():
        marks.setdefault("waiting_for_cluster", time.time())
        client = original_ready()
        marks["cluster_ready"] = time.time()
        return client

    def compute(*args, **kwargs):
        import distributed

        marks["compute_called"] = time.time()
        client = cluster.active_client()
        with distributed.get_task_stream(client) as stream:
            computed = original_compute(*args, **kwargs)
        tasks.extend(stream.data)
        marks["compute_done"] = time.time()
        return computed

    # Patched before seisctf.scoring is imported (the command imports it lazily), so its
    # `from seisctf.cluster import compute` binds the timed one.
    cluster._start_local, cluster._ready_client, cluster.compute = (
        start_local,
        ready_client,
        compute,
    )
    arguments = ["score", "ctf", "--truth", truth_url, "--submission", submission_url, "--quiet"]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        seisctf.cli.main(arguments)
    marks["main_returned"] = time.time()

    from distributed.utils import key_split

    worker_seconds, counts = defaultdict(float), defaultdict(int)
    for task in tasks:
        for interval in task["startstops"]:
            action = interval["action"]
            kind = key_split(task["key"]) if action == "compute" else f"({action})"
            worker_seconds[kind] += interval["stop"] - interval["start"]
            counts[kind] += 1
    intervals = [i for task in tasks for i in task["startstops"]]
    print(
        json.dumps(
            {
                "marks": marks,
                "result": json.loads(printed.getvalue()),
                "worker_seconds": worker_seconds,
                "counts": counts,
                "span": max(i["stop"] for i in intervals) - min(i["start"] for i in intervals),
            }
        )
    )
    seisctf.cli.fast_exit(0)  # as the `seisctf` entry point ends


def threaded_main(truth_url: str, submission_url: str) -> None:
    """Child mode (diagnostic): the command's library call, `score_ctf`, with no Dask client, so
    on Dask's local threaded scheduler: what the command would cost without a LocalCluster."""
    from seisctf.location import StoreLocation
    from seisctf.scoring.ctf import score_ctf

    submission = {"noisy": StoreLocation(submission_url)}
    print(json.dumps(score_ctf(StoreLocation(truth_url), submission, quiet=True)[0]))


def command_pieces(run: ChildRun) -> dict[str, float]:
    """Seconds of each piece of one traced command, from the child's wall-clock marks."""
    marks = run.output["marks"]
    compute_start = max(marks["compute_called"], marks["cluster_ready"])
    return {
        "interpreter start": marks["python_started"] - run.started_at,
        "imports": marks["imported"] - marks["python_started"],
        "main until compute": marks["compute_called"] - marks["imported"],
        "cluster start": marks["cluster_up"] - marks["cluster_thread_start"],
        "cluster wait": max(0.0, marks["cluster_ready"] - marks["compute_called"]),
        "compute": marks["compute_done"] - compute_start,
        "after compute": marks["main_returned"] - marks["compute_done"],
        "interpreter exit": run.started_at + run.seconds - marks["main_returned"],
        "total": run.seconds,
    }


# --- part 1: main ------------------------------------------------------------------------------


def fmt_runs(runs: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=2048, help="sensors (space axis)")
    parser.add_argument(
        "--steps",
        type=int,
        default=3000,
        help="time steps of the wavefield (default: the seismo layout's 3000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command")
    parser.add_argument("--verbose", action="store_true", help="progress bars while building")
    parser.add_argument(
        "--skip-memory",
        action="store_true",
        help="skip part 2 (bench_ctf_memory.py, run afterwards by default)",
    )
    parser.add_argument(
        "--eager",
        nargs=2,
        metavar=("TRUTH", "SUBMISSION"),
        help="child mode: run the eager scorer only and print JSON",
    )
    parser.add_argument(
        "--convention", default="reference", choices=["reference", "paper"], help="with --eager"
    )
    parser.add_argument(
        "--trace",
        nargs=2,
        metavar=("TRUTH", "SUBMISSION"),
        help="child mode: run the command with timers and print JSON",
    )
    parser.add_argument(
        "--threaded",
        nargs=2,
        metavar=("TRUTH", "SUBMISSION"),
        help="child mode: score_ctf on Dask's threaded scheduler, print JSON",
    )
    args = parser.parse_args()
    if args.eager:
        eager_main(*args.eager, args.convention)
        return
    if args.trace:
        trace_main(*args.trace)
        return
    if args.threaded:
        threaded_main(*args.threaded)
        return

    from seisctf import conventions as cv
    from seisctf.cluster import SCHEDULER_ENV, dask_client, machine_workers

    assert (ATTR_CTF, METRIC_SHORT, METRIC_LONG) == (cv.ATTR_CTF, cv.METRIC_SHORT, cv.METRIC_LONG)
    facts = machine_facts()
    n_workers = machine_workers()
    env = {key: value for key, value in os.environ.items() if key != SCHEDULER_ENV}
    conventions = ("reference", "paper")
    with tempfile.TemporaryDirectory(prefix="seisctf-bench-") as tmp:
        start = time.perf_counter()
        with dask_client(quiet=True):
            truth_url, submission_url, manifest = build(
                Path(tmp), args.sensors, args.steps, quiet=not args.verbose
            )
        build_s = time.perf_counter() - start
        test_bytes = sum(int(np.prod(p["shape"])) * 4 for p in manifest["pairs"])

        cli = {c: [] for c in conventions}
        eager = {c: [] for c in conventions}
        threaded = []
        this_file = str(Path(__file__).resolve())
        for _ in range(args.repeat):
            for convention in conventions:
                cli[convention].append(
                    run_child(cli_command(truth_url, submission_url, convention), env)
                )
                eager[convention].append(
                    run_child(eager_command(truth_url, submission_url, convention), env)
                )
            threaded.append(
                run_child([sys.executable, this_file, "--threaded", truth_url, submission_url], env)
            )

        # Where the command's time goes: the same command, traced, in a child process.
        traces = [
            run_child([sys.executable, this_file, "--trace", truth_url, submission_url], env)
            for _ in range(args.repeat)
        ]
    facts.append(f"load average at end (1, 5, 15 min): {load_average()}")

    layout = layout_for(args.steps, args.sensors)
    print(
        f"\nPart 1: CTF scoring, whole command vs eager numpy. {args.sensors} sensors, "
        f"{args.steps} steps, layout {layout.name!r}; 9 test arrays, {test_bytes / MIB:.0f} MiB "
        f"of float32 truth and as much submission; build {build_s:.0f} s; "
        f"embedded LocalCluster of {n_workers} single-threaded workers"
    )
    for fact in facts:
        print(f"- {fact}")
    print(
        "\n| process | seconds (median) | runs (s) | speed-up over eager (eager s ÷ this) "
        "| max abs score diff (clipped / raw) | peak RSS |"
    )
    print("|---|---:|---|---:|---|---:|")
    for convention in conventions:
        cli_s = statistics.median(r.seconds for r in cli[convention])
        eager_s = statistics.median(r.seconds for r in eager[convention])
        reference = eager[convention][0].output
        differences = [
            max(score_difference(r.output, reference, key) for r in cli[convention])
            for key in ("scores", "raw_scores")
        ]
        load_s = statistics.median(r.output["load_s"] for r in eager[convention])
        score_s = statistics.median(r.output["score_s"] for r in eager[convention])
        eager_rss = max(r.peak_rss_bytes for r in eager[convention])
        print(
            f"| `seisctf score ctf --quiet`{' --convention paper' * (convention == 'paper')} "
            f"| {cli_s:.2f} | {fmt_runs([r.seconds for r in cli[convention]])} "
            f"| **{eager_s / cli_s:.2f}×** | {differences[0]:.1e} / {differences[1]:.1e} "
            "| — |"
        )
        print(
            f"| eager numpy, {convention} (load {load_s:.2f} s + score {score_s:.2f} s) "
            f"| {eager_s:.2f} | {fmt_runs([r.seconds for r in eager[convention]])} | 1.00 "
            f"| reference | {eager_rss / MIB:.0f} MiB |"
        )
        if convention == "reference":
            threaded_s = statistics.median(r.seconds for r in threaded)
            threaded_difference = max(score_difference(r.output, reference) for r in threaded)
            threaded_rss = max(r.peak_rss_bytes for r in threaded)
            print(
                f"| diagnostic: `score_ctf` on Dask's threaded scheduler, no LocalCluster "
                f"(`--threaded` child) | {threaded_s:.2f} | "
                f"{fmt_runs([r.seconds for r in threaded])} | {eager_s / threaded_s:.2f}× "
                f"| {threaded_difference:.1e} | {threaded_rss / MIB:.0f} MiB |"
            )

    cli_s = statistics.median(r.seconds for r in cli["reference"])
    pieces = [command_pieces(trace) for trace in traces]
    piece = {key: statistics.median(p[key] for p in pieces) for key in pieces[0]}
    last = traces[-1].output
    print(
        f"\nWhere `seisctf score ctf --quiet` (reference, {cli_s:.2f} s above) spends its time: "
        f"the same command run {args.repeat} times more by `seisctf.cli.main` in a child "
        f"process with timestamps around its pieces (medians; traced total "
        f"{piece['total']:.2f} s). The cluster starts in a background thread while the main "
        "thread imports and builds the graph, so its row overlaps the one above it.\n"
    )
    print("| piece | seconds | share |")
    print("|---|---:|---:|")
    for label, key in (
        ("Python interpreter start", "interpreter start"),
        ("import seisctf.cli", "imports"),
        (
            "main thread until its Dask compute (imports of Dask, zarr, scoring; open stores; "
            "build the graph)",
            "main until compute",
        ),
        (
            f"&nbsp;&nbsp;meanwhile: LocalCluster start in the background ({n_workers} workers "
            "forked from a preloaded fork server)",
            "cluster start",
        ),
        ("waiting for the cluster after that", "cluster wait"),
        (
            "the one Dask compute (read, commitment, Grams and their largest eigenvalues, "
            "spectra, checks)",
            "compute",
        ),
        ("after it (scores, JSON output, cluster close)", "after compute"),
        ("interpreter exit", "interpreter exit"),
    ):
        print(f"| {label} | {piece[key]:.2f} | {piece[key] / piece['total']:.0%} |")
    print(
        f"\nWorker-seconds by task kind in the last traced compute ({n_workers} workers; its "
        f"tasks spanned {last['span']:.2f} s of wall time): ",
        end="",
    )
    ranked = sorted(last["worker_seconds"].items(), key=lambda item: -item[1])
    print(
        ", ".join(
            f"{kind} {seconds:.2f} s ({last['counts'][kind]} tasks)"
            for kind, seconds in ranked[:12]
        )
    )
    result = cli["reference"][0].output
    print(
        f"\ntruth_sha256_verified = {result['truth_sha256_verified']}; AvgScore reference "
        f"{result['avg_score']:.4f}, paper {cli['paper'][0].output['avg_score']:.4f}"
    )
    print(
        "raw scores (reference): "
        + ", ".join(f"{k}={v:.4f}" for k, v in result["raw_scores"].items())
    )
    if not args.skip_memory:
        print(flush=True)
        memory = Path(__file__).resolve().with_name("bench_ctf_memory.py")
        subprocess.run([sys.executable, str(memory)], check=True)


if __name__ == "__main__":
    main()
