"""Benchmark: CTF scoring with seisctf (Dask, embedded LocalCluster) against an eager numpy scorer.

Builds one global synthetic wavefield and its task bundle at the `seismo` layout's size (2048
sensors, 3000 one-second steps by default), writes public and truth groups to a temporary folder,
writes a noisy submission (truth + 10 % of the truth's RMS in Gaussian noise), then times

  (a) `seisctf.scoring.ctf.score_ctf` on an embedded LocalCluster (`seisctf.cluster.dask_client`),
      reading truth and submission from zarr (it also checks the truth's SHA-256 commitment,
      in the client process; that part is timed separately as well);
  (b) an eager numpy scorer written here from the contract's formulas (matrix 2-norm by SVD with
      `np.linalg.norm(ord=2)`, eager FFT) on the same arrays loaded fully in memory beforehand.

and prints a table: method, seconds (median of --repeat runs), ratio to (a), max |score
difference| between the two, peak memory. Peak memory of (b) is the tracemalloc peak above the
loaded inputs; of (a), the peak RSS of each Dask worker (restarted before scoring, so it
includes the worker's own imports) and the tracemalloc peak of the client process. Memory is
measured in one extra run of each, so the timings carry no tracemalloc overhead.

    .venv/bin/python benchmarks/bench_ctf_scoring.py [--sensors 2048] [--steps 3000] [--workers 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import dask.array as da
import numpy as np

from seisctf import conventions as cv
from seisctf import storage
from seisctf.pipeline.layouts import Layout, load_layout

SECRET = "seisctf-benchmark-not-a-secret"
SEISMO = load_layout("seismo")


def layout_for(steps: int, n_sensors: int) -> Layout:
    """The seismo layout at its own size (3000 steps); scaled proportionally for other sizes."""
    if steps == SEISMO.required_steps and n_sensors - n_sensors // 2 >= SEISMO.modes:
        return SEISMO
    train = round(steps * SEISMO.train_steps / SEISMO.required_steps)
    few_start = round(steps * SEISMO.few_start / SEISMO.required_steps)
    forecast = steps - train
    return Layout(f"seismo-scaled-{steps}", train_steps=train, few_start=few_start,
                  few_steps=train - few_start, forecast_start=train, forecast_steps=forecast,
                  k_short=min(SEISMO.k_short, forecast), k_long=min(SEISMO.k_long, forecast),
                  modes=min(SEISMO.modes, n_sensors - n_sensors // 2))


# --- the eager reference scorer ------------------------------------------------------------------


def eager_scores(truth: dict[str, np.ndarray], submission: dict[str, np.ndarray],
                 manifest: dict) -> tuple[dict[str, float], dict[str, float]]:
    """(clipped, raw) E1..E12 by the contract's `reference` formulas, all in memory, float64."""
    k_short, k_long, modes = manifest["k_short"], manifest["k_long"], manifest["modes"]

    def spectrum(rows: np.ndarray) -> np.ndarray:
        power = np.fft.fftshift(np.abs(np.fft.fft(rows, axis=1)) ** 2, axes=1).mean(axis=0)
        zero = rows.shape[1] // 2
        return power[zero : zero + modes]

    scores, raw_scores, index = {}, {}, 1
    for pair in manifest["pairs"]:
        t = truth[pair["test"]].astype(np.float64)
        s = submission[pair["test"]].astype(np.float64)
        for metric in pair["metrics"]:
            if metric == cv.METRIC_LONG:
                p_truth, p_submission = spectrum(t[-k_long:]), spectrum(s[-k_long:])
                error = np.linalg.norm(p_truth - p_submission) / np.linalg.norm(p_truth)
            else:
                rows = slice(0, k_short) if metric == cv.METRIC_SHORT else slice(None)
                error = np.linalg.norm(t[rows] - s[rows], 2) / np.linalg.norm(t[rows], 2)
            raw_scores[f"E{index}"] = float(100.0 * (1.0 - error))
            scores[f"E{index}"] = float(np.clip(raw_scores[f"E{index}"], -100.0, 100.0))
            index += 1
    return scores, raw_scores


# --- setup -------------------------------------------------------------------------------------


def build(root: Path, n_sensors: int, steps: int, quiet: bool) -> tuple[str, str, dict]:
    """Wavefield -> bundle (public, truth) -> noisy submission; returns (truth, submission,
    manifest)."""
    from seisctf.pipeline.tasks import build_bundle, write_bundle
    from seisctf.recipes.global_wavefield import synthesize_global

    wavefield_url, truth_url = str(root / "wavefield.zarr"), str(root / "truth.zarr")
    public_url, submission_url = str(root / "public.zarr"), str(root / "noisy.zarr")
    wavefield = synthesize_global(n_sensors=n_sensors, duration_s=float(steps), seed=2026)
    storage.write_dataset(wavefield, wavefield_url, label="synth global", quiet=quiet)
    bundle = build_bundle(storage.open_dataset(wavefield_url), layout_for(steps, n_sensors),
                          SECRET, what=wavefield_url)
    manifest = write_bundle(bundle, public_url, truth_url, SECRET, quiet=quiet)
    rng = da.random.default_rng(7)
    noisy = {}
    for pair in manifest["pairs"]:
        truth = storage.read_array(truth_url, pair["test"]).astype(np.float64)
        rms = da.sqrt((truth**2).mean())
        noise = rng.standard_normal(truth.shape, chunks=truth.chunks)
        noisy[pair["test"]] = (truth + 0.1 * rms * noise).astype(np.float32)
    storage.write_arrays(noisy, submission_url, {"model": "noisy truth"}, label="submission",
                         quiet=quiet)
    return truth_url, submission_url, manifest


def load_all(url: str, names: list[str]) -> dict[str, np.ndarray]:
    import zarr

    group = zarr.open_group(url, mode="r")
    return {name: group[name][...] for name in names}


# --- timing ------------------------------------------------------------------------------------


def timed(function, repeat: int) -> tuple[float, list[float], object]:
    seconds, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), seconds, value


def traced_peak(function) -> int:
    """Bytes allocated above the starting point at the peak of `function()` (tracemalloc)."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _worker_peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def machine_facts(n_workers: int) -> list[str]:
    import dask
    import distributed
    import psutil
    import zarr

    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown")
    return [
        f"date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"cpu: {model}; usable cores: {len(os.sched_getaffinity(0))}; "
        f"RAM: {psutil.virtual_memory().total / 2**30:.1f} GiB",
        f"load average at start (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"python {platform.python_version()}, numpy {np.__version__}, dask {dask.__version__}, "
        f"distributed {distributed.__version__}, zarr {zarr.__version__}; "
        f"{platform.system()} {platform.release()}",
        f"dask: embedded LocalCluster, {n_workers} single-threaded worker processes",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=2048, help="sensors (space axis)")
    parser.add_argument("--steps", type=int, default=SEISMO.required_steps,
                        help="time steps of the wavefield (default: the seismo layout's 3000)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each scorer")
    parser.add_argument("--verbose", action="store_true", help="progress bars while building")
    args = parser.parse_args()

    from seisctf.cluster import dask_client
    from seisctf.scoring.ctf import open_truth, score_ctf, verify_commitment

    facts = machine_facts(args.workers)
    with tempfile.TemporaryDirectory(prefix="seisctf-bench-") as tmp, \
            dask_client(n_workers=args.workers, quiet=True) as client:
        start = time.perf_counter()
        truth_url, submission_url, manifest = build(Path(tmp), args.sensors, args.steps,
                                                    quiet=not args.verbose)
        build_s = time.perf_counter() - start
        names = [pair["test"] for pair in manifest["pairs"]]
        test_bytes = sum(int(np.prod(p["shape"])) * 4 for p in manifest["pairs"])

        # (a) seisctf on the LocalCluster, fresh workers so their peak RSS is the scoring's.
        client.restart()
        baseline_rss = max(client.run(_worker_peak_rss_bytes).values())
        dask_s, dask_runs, dask_results = timed(
            lambda: score_ctf(truth_url, {"noisy": submission_url}, quiet=True), args.repeat)
        worker_rss = max(client.run(_worker_peak_rss_bytes).values())
        client_peak = traced_peak(lambda: score_ctf(truth_url, {"noisy": submission_url},
                                                    quiet=True))
        _, salt, truth_lazy = open_truth(truth_url)
        hash_s, _, verified = timed(lambda: verify_commitment(truth_lazy, manifest, salt), 1)
        dask_result = dask_results[0]

        # (b) eager numpy on the same arrays, loaded fully beforehand (load time reported).
        start = time.perf_counter()
        truth = load_all(truth_url, names)
        submission = load_all(submission_url, names)
        load_s = time.perf_counter() - start
        eager_s, eager_runs, (eager, eager_raw) = timed(
            lambda: eager_scores(truth, submission, manifest), args.repeat)
        eager_peak = traced_peak(lambda: eager_scores(truth, submission, manifest))
    facts.append(f"load average at end (1, 5, 15 min): "
                 f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")

    difference = max(abs(dask_result["scores"][name] - eager[name]) for name in eager)
    raw_difference = max(abs(dask_result["raw_scores"][name] - eager_raw[name]) for name in eager)
    avg_difference = abs(dask_result["avg_score"] - statistics.fmean(eager.values()))
    mib = 2**20
    rows = [
        ("(a) seisctf score_ctf, LocalCluster, from zarr", dask_s, dask_runs, f"{difference:.1e}",
         f"workers ≤ {worker_rss / mib:.0f} MiB RSS each (idle {baseline_rss / mib:.0f}); "
         f"client +{client_peak / mib:.0f} MiB"),
        ("&nbsp;&nbsp;of which truth SHA-256 check (client, sync)", hash_s, [hash_s], "—", "—"),
        ("(b) eager numpy (SVD 2-norm, eager FFT), in memory", eager_s, eager_runs, "reference",
         f"+{eager_peak / mib:.0f} MiB above {2 * test_bytes / mib:.0f} MiB of float32 inputs"),
    ]
    layout = layout_for(args.steps, args.sensors)
    print(f"\nCTF scoring benchmark: {args.sensors} sensors, {args.steps} steps, layout "
          f"{layout.name!r}; 9 test arrays, {test_bytes / mib:.0f} MiB of float32 truth "
          f"(and as much submission); build {build_s:.0f} s; eager load {load_s:.2f} s")
    for fact in facts:
        print(f"- {fact}")
    print()
    print("| method | seconds (median) | runs (s) | ratio to (a) | max abs score diff "
          "| peak memory |")
    print("|---|---:|---|---:|---:|---|")
    for label, seconds, runs, score_difference, memory in rows:
        runs_text = ", ".join(f"{r:.2f}" for r in runs)
        print(f"| {label} | {seconds:.2f} | {runs_text} | {seconds / dask_s:.2f} "
              f"| {score_difference} | {memory} |")
    print(f"\nmax |Δ raw score| = {raw_difference:.2e}; |ΔAvgScore| = {avg_difference:.2e}; "
          f"truth_sha256_verified = "
          f"{dask_result['truth_sha256_verified']} (recomputed: {verified}); "
          f"AvgScore = {dask_result['avg_score']:.4f}")
    print("raw scores (a): " + ", ".join(f"{k}={v:.4f}"
                                         for k, v in dask_result["raw_scores"].items()))


if __name__ == "__main__":
    main()
