"""Scale section `reads`: the bytes `seisctf ingest waveforms` reads from object storage, counted
by the storage server itself.

An SDS archive (`make_archive.py sds`: 8 stations x 3 days of 100 Hz, 1.1 GB; `--quick`: the
quick byte archive of `scale_ingest`, 4 stations x 3 days at 20 Hz) is uploaded to a SeaweedFS
started for the section (data under WORKDIR/reads-seaweedfs, removed at the end; its metrics on
a loopback port) and ingested from `s3://` into a local store once per row, each on a fresh
cluster (`scale_ingest.Cluster`: an external scheduler and 2 single-threaded workers, the S3 key
in their environment), the command as a user types it:

- cache off: `SEISCTF_INPUT_CACHE_BYTES=0` on both workers: the scan and the decode each read
  every file;
- cache on, one host: both workers share one cache folder (`SEISCTF_INPUT_CACHE_DIR`), as the
  workers of one machine do;
- cache on, two hosts: each worker has a cache folder of its own, as workers on two machines
  have: a block task reads storage again unless it runs where its files were scanned
  (`input_locality`).

Per row: the input bytes (the objects' sizes), the bytes the S3 gateway sent from the bucket (its
counter `SeaweedFS_s3_bucket_traffic_sent_bytes_total` before and after the run: an independent
count, not seisctf's), their ratio, the GET requests it answered, the wall time, and the CPU
seconds of the two workers and of the S3 server during the run (the better guide on a loaded
machine; the server shares the workers' cores). Goal (issue
38): bytes read at most 1.05x the input bytes with the cache. The rows' stores must hold the
same data chunks and coverage, byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import scale_ingest
import zarr
from scale_report import ScaleOptions, Section, run_command, seisctf_command, verdict

sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))

from s3_metrics import bucket_requests, bucket_sent_bytes, metrics_options  # noqa: E402
from servers import S3_KEY, start_s3, stop_process  # noqa: E402

from seisctf.recipes.ingest.input_cache import BYTES_ENV, DIR_ENV  # noqa: E402

BUCKET = "archive"
GOAL = 1.05
CREDENTIALS = {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_KEY}
FULL_ARCHIVE = ("--stations", "8", "--days", "3", "--workers", "2")  # 1.1 GB


@dataclass(frozen=True)
class Row:
    """One configuration: its label and what each of the 2 workers has in its environment
    (folders relative to the section's folder)."""

    label: str
    workers: tuple[dict[str, str], dict[str, str]]


ROWS = (
    Row("cache off", ({BYTES_ENV: "0"}, {BYTES_ENV: "0"})),
    Row("cache on, one host", ({DIR_ENV: "cache-shared"}, {DIR_ENV: "cache-shared"})),
    Row("cache on, two hosts", ({DIR_ENV: "cache-host-1"}, {DIR_ENV: "cache-host-2"})),
)


class HostsCluster(scale_ingest.Cluster):
    """`scale_ingest.Cluster` whose i-th worker has `worker_envs[i]` in its environment."""

    def __init__(self, workdir: Path, worker_envs: tuple[dict[str, str], ...]):
        super().__init__(workdir, n_workers=len(worker_envs))
        self.worker_envs = worker_envs

    def _start(self, *argv: str, env: dict[str, str]):
        if argv[0] == "worker":  # started after the scheduler, in order
            env = {**env, **self.worker_envs[len(self.processes) - 1]}
        return super()._start(*argv, env=env)


def archive_files(options: ScaleOptions) -> tuple[Path, list[Path], float]:
    """The archive's SDS root, its files and their sampling rate (Hz; a few files have half of
    it: the ingest resamples them)."""
    if options.quick:
        archive = scale_ingest.byte_archive(options)
    else:
        archive = scale_ingest.make_sds(options.data / "sds_reads", *FULL_ARCHIVE)
    root = archive.root / archive.summary["sds_root"]
    files = sorted(path for path in root.rglob("*") if path.is_file())
    return root, files, float(archive.summary["arguments"]["rate"])


def store_digest(store: Path) -> str:
    """sha256 of every `data` chunk file (by relative path) and of the `coverage` values."""
    digest = hashlib.sha256()
    for path in sorted((store / "data").rglob("*")):
        if path.is_file() and path.name != "zarr.json":
            digest.update(str(path.relative_to(store)).encode() + path.read_bytes())
    digest.update(zarr.open_group(str(store), mode="r")["coverage"][:].tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Measured:
    """One row's ingest: bytes the S3 gateway sent, GET requests, wall seconds, CPU seconds of
    the workers and of the S3 server during the run, the store's digest."""

    sent: int
    gets: int
    seconds: float
    worker_cpu_s: float
    server_cpu_s: float
    digest: str


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes `pids` have used so far."""
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def measure(folder: Path, server, port: int, row: Row, rate: float) -> Measured:
    """One ingest of the bucket on a fresh cluster configured as `row`."""
    envs = tuple(
        {**CREDENTIALS, **{k: str(folder / v) if k == DIR_ENV else v for k, v in env.items()}}
        for env in row.workers
    )
    store = folder / f"store-{row.label.replace(' ', '-').replace(',', '')}.zarr"
    command = [*seisctf_command(), "ingest", "waveforms", f"s3://{BUCKET}/", "--out", str(store),
               "--rate", str(rate), "--quiet",
               f"--storage-option=endpoint_url={server.endpoint_url}"]  # fmt: skip
    with HostsCluster(folder, envs) as cluster:
        workers = [worker.pid for worker in cluster.workers]
        before = (bucket_sent_bytes(port, BUCKET), bucket_requests(port, BUCKET),
                  cpu_seconds(workers), cpu_seconds([server.process.pid]))  # fmt: skip
        run = run_command([*command, "--scheduler", cluster.address], env=CREDENTIALS)
        after = (bucket_sent_bytes(port, BUCKET), bucket_requests(port, BUCKET),
                 cpu_seconds(workers), cpu_seconds([server.process.pid]))  # fmt: skip
    sent, gets, worker_cpu, server_cpu = (a - b for a, b in zip(after, before, strict=True))
    return Measured(int(sent), int(gets), run.seconds, worker_cpu, server_cpu, store_digest(store))


def sections(options: ScaleOptions) -> Iterator[Section]:
    root, files, rate = archive_files(options)
    input_bytes = sum(path.stat().st_size for path in files)
    folder = options.workdir / "reads"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    weed_options, port = metrics_options()
    server = start_s3(folder / "seaweedfs", options=weed_options)
    section = Section(
        "Bytes read from storage by an ingest (`scale_reads.py`)",
        [
            "run",
            "files",
            "input bytes",
            "bytes read",
            "read / input",
            "GET requests",
            "wall s",
            "worker CPU s",
            "S3 server CPU s",
        ],  # fmt: skip
    )
    try:
        fs = server.filesystem()
        fs.mkdir(BUCKET)
        fs.put(str(root) + "/", f"{BUCKET}/", recursive=True)
        digests = {}
        for row in ROWS:
            found = measure(folder, server, port, row, rate)
            digests[row.label] = found.digest
            ratio = found.sent / input_bytes
            section.rows.append(
                [row.label, len(files), input_bytes, found.sent, ratio, found.gets,
                 found.seconds, found.worker_cpu_s, found.server_cpu_s]
            )  # fmt: skip
            print(f"  {row.label}: {ratio:.3f} x the input bytes", flush=True)
    finally:
        stop_process(server.process)
        shutil.rmtree(folder, ignore_errors=True)
    ratios = {row[0]: row[4] for row in section.rows}
    for label in ("cache on, one host", "cache on, two hosts"):
        met = ratios[label] <= GOAL
        section.goals.append(
            verdict(f"{label}: bytes read ≤ {GOAL} × input", f"{ratios[label]:.3f}", met)
        )
    same = len(set(digests.values())) == 1
    section.goals.append(
        verdict("every row's store: the same data chunks and coverage", str(same).lower(), same)
    )
    made = "scale_ingest's quick archive" if options.quick else " ".join(FULL_ARCHIVE)
    section.notes.append(
        "Bytes read: the S3 gateway's own count of body bytes sent from the archive's bucket "
        "(SeaweedFS_s3_bucket_traffic_sent_bytes_total), before and after each run. Archive: "
        f"`make_archive.py sds` ({made}). Load average at the end: {os.getloadavg()[0]:.1f}."
    )
    yield section
