"""Benchmark: peak memory of `seisctf score ctf` on a bundle that does not fit in a worker.

Builds, as `tests/scoring/test_memory.py` does, a truth group and a submission of random float32
arrays (9 test arrays of --rows × --sensors each; default 12 000 × 2048, the seismo width: 844 MiB
of truth and as much submission, 4.2× a worker's 400 MiB) with a `truth_sha256_blocks` manifest,
on a LocalCluster of --workers workers limited to --worker-mib each. Then it restarts the workers
(so their peak RSS measures the scoring only, imports included) and runs the command

    seisctf score ctf --scheduler ADDRESS --truth T --submission S --quiet

in a child process against that cluster, and reads every worker's peak RSS
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`), the client process's peak RSS (`os.wait4`) and
the wall time. For comparison, after closing the cluster, it runs the eager numpy scorer
(`bench_ctf_scoring.py --eager`: every array loaded into memory, SVD 2-norms) in a child process
on the same bundle, if its estimated need fits in the machine's available memory.

    .venv/bin/python benchmarks/bench_ctf_memory.py [--rows 12000] [--sensors 2048]
        [--worker-mib 400] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_ctf_scoring import (
    MIB,
    cli_command,
    eager_command,
    load_average,
    machine_facts,
    run_child,
    score_difference,
)

from seisctf.location import StoreLocation

SALT = "00" * 16


def _spilled_bytes(dask_worker) -> int:
    """Bytes this worker wrote to its spill directory since it started."""
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return int(metrics.get(("disk-write", "bytes"), 0))


def build(root: Path, rows: int, n_sensors: int, quiet: bool) -> tuple[str, str, dict]:
    """Random truth (with its block commitment) and an independent random submission; returns
    (truth URL, submission URL, manifest). Needs an active Dask client."""
    import dask.array as da

    from seisctf import commitment, storage
    from seisctf import conventions as cv
    from seisctf.cluster import compute

    def random_arrays(seed: int) -> dict:
        rng = da.random.default_rng(seed)
        chunks = cv.time_space_chunks(rows, n_sensors)
        return {
            name: rng.standard_normal((rows, n_sensors), chunks=chunks, dtype=np.float32)
            for name in cv.TEST_NAMES
        }

    truth_url, submission_url = str(root / "truth.zarr"), str(root / "random.zarr")
    pairs = [
        {
            "id": spec.id,
            "train": list(spec.train),
            "test": spec.test,
            "metrics": list(spec.metrics),
            "shape": [rows, n_sensors],
            "start_index": 0,
            **({"burn_in": spec.burn_in} if spec.burn_in else {}),
        }
        for spec in cv.CTF_PAIRS
    ]
    manifest = {
        "dataset": "memory-benchmark",
        "k_short": 20,
        "k_long": 20,
        "modes": 64,
        "pairs": pairs,
    }
    storage.write_arrays(
        random_arrays(1), StoreLocation(truth_url), {}, label="truth", quiet=quiet, finish=False
    )
    block_rows = commitment.block_rows(n_sensors)
    stored = {name: storage.read_array(StoreLocation(truth_url), name) for name in cv.TEST_NAMES}
    digests = compute(
        {name: commitment.block_digests(array, SALT, block_rows) for name, array in stored.items()},
        label="commitments",
        quiet=quiet,
    )[0]
    manifest["truth_sha256_blocks"] = {
        "block_rows": block_rows,
        **{name: commitment.block_root(digest, SALT) for name, digest in digests.items()},
    }
    storage.finish_group(StoreLocation(truth_url), {cv.ATTR_CTF: manifest, cv.ATTR_CTF_SALT: SALT})
    storage.write_arrays(
        random_arrays(2), StoreLocation(submission_url), {}, label="submission", quiet=quiet
    )
    return truth_url, submission_url, manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12_000, help="rows (time) of each test array")
    parser.add_argument("--sensors", type=int, default=2048, help="sensors (space axis)")
    parser.add_argument("--worker-mib", type=int, default=400, help="memory limit per worker")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--verbose", action="store_true", help="progress bars while building")
    args = parser.parse_args()

    import psutil

    from seisctf.cluster import dask_client, peak_memory_bytes, reset_peak_memory

    facts = machine_facts()
    limit = args.worker_mib * MIB
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="seisctf-bench-memory-") as tmp:
        with dask_client(n_workers=args.workers, memory_limit=limit, quiet=True) as client:
            start = time.perf_counter()
            truth_url, submission_url, manifest = build(
                Path(tmp), args.rows, args.sensors, quiet=not args.verbose
            )
            build_s = time.perf_counter() - start
            client.restart()  # fresh workers: their peak RSS now measures the scoring only
            client.run(reset_peak_memory)  # forked workers start with the server's peak
            idle = client.run(peak_memory_bytes)
            pids = client.run(os.getpid)
            command = cli_command(truth_url, submission_url, scheduler=client.scheduler.address)
            cli = run_child(command, env)
            peaks = client.run(peak_memory_bytes)
            spilled = client.run(_spilled_bytes)
            survived = client.run(os.getpid) == pids
        bundle_bytes = 2 * sum(int(np.prod(pair["shape"])) * 4 for pair in manifest["pairs"])
        # Eager need: both float32 sets, float64 truth, submission and difference of one array,
        # and the SVD's copy of it.
        array_bytes = args.rows * args.sensors * 8
        eager_need = bundle_bytes + 4 * array_bytes
        available = psutil.virtual_memory().available
        eager = None
        if eager_need < 0.8 * available:
            eager = run_child(eager_command(truth_url, submission_url), env)
    facts.append(f"load average at end (1, 5, 15 min): {load_average()}")

    print(
        f"\nPart 2: peak memory on a bundle larger than a worker. 9 random float32 test "
        f"arrays of {args.rows} × {args.sensors}: truth + submission = "
        f"{bundle_bytes / MIB:.0f} MiB = {bundle_bytes / limit:.1f}× a worker's limit of "
        f"{args.worker_mib} MiB; {args.workers} single-threaded workers; build {build_s:.0f} s"
    )
    for fact in facts:
        print(f"- {fact}")
    print(f"- command: {' '.join([Path(command[0]).name, *command[1:]])}")
    print("\n| process | wall s | peak RSS MiB | peak ÷ worker limit | note |")
    print("|---|---:|---:|---:|---|")
    for index, (address, peak) in enumerate(sorted(peaks.items())):
        # A worker its nanny killed comes back at a new address: what it measured died with it.
        history = (
            f"idle after restart {idle[address] / MIB:.0f} MiB"
            if address in idle
            else "a replacement started during scoring (its predecessor was killed)"
        )
        print(
            f"| Dask worker {index} | — | {peak / MIB:.0f} | {peak / limit:.2f} "
            f"| {history}; spilled {spilled[address] / MIB:.0f} MiB to disk |"
        )
    print(
        f"| `seisctf score ctf` client process | {cli.seconds:.2f} "
        f"| {cli.peak_rss_bytes / MIB:.0f} | — | scores and checks the commitment; workers "
        f"{'all survived' if survived else 'were RESTARTED (a worker died)'} |"
    )
    if eager is None:
        print(
            f"| eager numpy (not run) | — | ~{eager_need / MIB:.0f} needed | — "
            f"| would not fit: {available / MIB:.0f} MiB available |"
        )
    else:
        difference = score_difference(cli.output, eager.output, "raw_scores")
        times_worker = eager.peak_rss_bytes / max(peaks.values())
        print(
            f"| eager numpy, reference (load {eager.output['load_s']:.1f} s + score "
            f"{eager.output['score_s']:.1f} s) | {eager.seconds:.2f} "
            f"| {eager.peak_rss_bytes / MIB:.0f} | {eager.peak_rss_bytes / limit:.2f} "
            f"| {times_worker:.1f}× the largest worker's peak; {eager.seconds / cli.seconds:.2f}"
            f"× the command's wall time; max abs raw score diff {difference:.1e} |"
        )
    scores = cli.output["raw_scores"]
    print(
        f"\ntruth_sha256_verified = {cli.output['truth_sha256_verified']}; raw scores of "
        f"independent random fields: " + ", ".join(f"{k}={v:.2f}" for k, v in scores.items())
    )


if __name__ == "__main__":
    main()
