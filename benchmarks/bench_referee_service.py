"""Referee service benchmark (issue 40): `seisctf serve` on the demo's `seismo` bundle (global
dataset, 2048 sensors), scoring on a 2-worker Dask cluster (`scale_cluster.Cluster`), the
server with two scoring threads.

1. Latency: `--latency-runs` submissions sent one at a time to the idle service, upload to
   scored, against the plain command on the same file and cluster (`seisctf score ctf --truth
   … --submission F --scheduler ADDR --quiet`, process start included). Goal: plain / service
   >= 0.8 (the service adds little).
2. Throughput: `--submissions` distinct submissions of ten teams uploaded `--concurrency` at
   a time, then followed until scored: scored per hour, the status page's (`GET
   /api/submissions/{id}`) p50/p95 latency meanwhile, the server's peak RSS (process tree), and
   that each submission was recorded exactly once.

Submissions are the demo's persistence baseline scaled by 1 + k/1000 (`service_load`), as .npz.
Command: `.venv/bin/python benchmarks/bench_referee_service.py [--quick] [--workdir DIR]`
(the demo is made in DIR/demo when missing; `--quick`: 20 submissions, 3 latency runs).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from bench_ctf_scoring import load_average, machine_facts
from scale_cluster import Cluster
from scale_report import TreeSampler

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent / "tests" / "service")]
from running_service import Service, add_team, seisctf, upload, wait_finished  # noqa: E402
from service_load import distinct_submissions, load  # noqa: E402

from seisctf.scoring import leaderboard  # noqa: E402

TEAMS = 10


def demo(workdir: Path) -> Path:
    folder = workdir / "demo"
    if not (folder / "public" / "bundle-global.zarr").is_dir():
        seisctf("demo", "--workdir", str(folder), "--quiet")
    return folder


def competition_of(workdir: Path, bundle: Path, quota: int) -> Path:
    folder = workdir / "competition"
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    seisctf(
        "referee",
        "create",
        str(folder),
        "--name",
        "bench",
        "--dataset",
        "global",
        str(bundle / "public" / "bundle-global.zarr"),
        str(bundle / "private" / "truth-global.zarr"),
        "--quota",
        str(quota),
        "--max-upload-bytes",
        str(1 << 30),
    )
    return folder


def plain_seconds(bundle: Path, submission: Path, scheduler: str, out: Path) -> float:
    began = time.monotonic()
    seisctf(
        "score",
        "ctf",
        "--truth",
        str(bundle / "private" / "truth-global.zarr"),
        "--submission",
        str(submission),
        "--scheduler",
        scheduler,
        "--quiet",
        "--json",
        str(out),
    )
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/seisctf-bench-service"))
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency-runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20 submissions, 3 latency runs")
    args = parser.parse_args()
    if args.quick:
        args.submissions, args.latency_runs = 20, 3
    args.workdir.mkdir(parents=True, exist_ok=True)
    print("\n".join(machine_facts()))
    print(f"- load average at start: {load_average()}")
    bundle = demo(args.workdir)
    count = args.latency_runs + args.submissions
    variants = distinct_submissions(
        bundle / "submissions" / "global" / "persistence.zarr", count, args.workdir / "variants"
    )
    folder = competition_of(args.workdir, bundle, quota=count)
    tokens = [add_team(folder, f"team {n}") for n in range(TEAMS)]
    with Cluster(args.workdir) as cluster:
        service = Service(folder, scheduler=cluster.address, workers=2).start()
        try:
            with TreeSampler(service.process.pid, interval=0.2) as sampler:
                service_s, plain_s = [], []
                with service.client(tokens[0]) as client:
                    for k in range(args.latency_runs):
                        began = time.monotonic()
                        ident = upload(client, variants[k], dataset="global").json()["id"]
                        assert wait_finished(client, ident, 900)["state"] == "scored"
                        service_s.append(time.monotonic() - began)
                        plain_s.append(
                            plain_seconds(
                                bundle, variants[k], cluster.address, args.workdir / "plain.json"
                            )
                        )
                work = [
                    (tokens[k % TEAMS], path)
                    for k, path in enumerate(variants[args.latency_runs :])
                ]
                run = load(service.url, work, args.concurrency, dataset="global", timeout_s=7200)
            peak_mib = max(sampler.memory.peak_by_pid.values()) / 2**20
            tree_mib = sum(sampler.memory.peak_by_pid.values()) / 2**20
        finally:
            service.stop()
    recorded = Counter(
        row["metadata"]["submission"]
        for row in leaderboard.entries(str(folder / "leaderboard.sqlite"))
    )
    scored = sum(1 for ident in run.ids if recorded.get(ident) == 1)
    finish = list(run.upload_to_finished_s.values())
    ratio = statistics.median(plain_s) / statistics.median(service_s)
    print(f"- load average at end: {load_average()}")
    print("\n| measure | figure |\n|---|---|")
    rows = [
        (
            "latency, upload to scored (median / p95, s)",
            f"{statistics.median(service_s):.2f} / {np.percentile(service_s, 95):.2f}",
        ),
        (
            "plain `score ctf` on the same cluster (median / p95, s)",
            f"{statistics.median(plain_s):.2f} / {np.percentile(plain_s, 95):.2f}",
        ),
        ("plain / service (goal >= 0.8)", f"**{ratio:.2f}**"),
        (
            f"{len(work)} submissions uploaded {args.concurrency} at a time: uploads accepted",
            f"{sum(s == 201 for s in run.statuses)} of {len(work)}",
        ),
        ("scored exactly once (one leaderboard row each)", f"{scored} of {len(work)}"),
        ("wall, first upload to last scored (s)", f"{run.wall_s:.1f}"),
        ("scored per hour on 2 workers", f"{len(work) / run.wall_s * 3600:,.0f}"),
        (
            "upload to scored under load (median / p95, s)",
            f"{np.median(finish):.1f} / {np.percentile(finish, 95):.1f}",
        ),
        (
            "status page under load (p50 / p95, ms)",
            f"{run.percentile(50) * 1e3:.0f} / {run.percentile(95) * 1e3:.0f} "
            f"({len(run.status_latency_s)} requests)",
        ),
        ("server peak RSS (largest process / tree, MiB)", f"{peak_mib:.0f} / {tree_mib:.0f}"),
    ]
    for name, figure in rows:
        print(f"| {name} | {figure} |")


if __name__ == "__main__":
    main()
