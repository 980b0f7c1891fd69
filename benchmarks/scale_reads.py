"""Scale section `reads`: the bytes `seisctf ingest waveforms` and `seisctf ingest das` read from
object storage, counted by the storage server itself.

An SDS archive (`make_archive.py sds`: 8 stations x 3 days of 100 Hz, 1.1 GB; `--quick`: the
quick byte archive of `scale_ingest`, 4 stations x 3 days at 20 Hz) and DAS recordings (PRODML
and DASDAE files, alternating, end to end, written by the tests' generators
`tests/das_vendor_files.py`: 8 files of 1024 channels x 15,000 float32 samples at 50 Hz, 0.5 GB;
`--quick`: 4 files of 256 channels x 4,000) are uploaded to a SeaweedFS started for the section
(data under WORKDIR/reads-seaweedfs, removed at the end; its metrics on a loopback port), one
bucket each, and ingested from `s3://` into a local store once per row, each on a fresh cluster
(`scale_cluster.Cluster`: an external scheduler and 2 single-threaded workers, the S3 key in
their environment), the command as a user types it:

- cache off: `SEISCTF_INPUT_CACHE_BYTES=0` on both workers: the scan and the decode each read
  every file;
- cache on, one host: both workers share one cache folder (`SEISCTF_INPUT_CACHE_DIR`), as the
  workers of one machine do;
- cache on, two hosts: each worker has a cache folder of its own, as workers on two machines
  have: a block task reads storage again unless it runs where its files were scanned
  (`input_locality` sends it there; a DAS block's pieces of files kept on the other host are
  read on that host).

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

import numpy as np
import psutil
import scale_cluster
import scale_ingest
import zarr
from scale_report import ScaleOptions, Section, run_command, seisctf_command, verdict

sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests"))

from das_vendor_files import write_dasdae, write_prodml  # noqa: E402
from s3_metrics import bucket_requests, bucket_sent_bytes, metrics_options  # noqa: E402
from servers import S3_KEY, start_s3, stop_process  # noqa: E402

from seisctf.formats.shared.input_cache import BYTES_ENV, DIR_ENV  # noqa: E402

GOAL = 1.05
CREDENTIALS = {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_KEY}
FULL_ARCHIVE = ("--stations", "8", "--days", "3", "--workers", "2")  # 1.1 GB
# DAS recordings: (files, channels, samples a file); float32 at DAS_RATE_HZ, end to end.
DAS_FULL, DAS_QUICK = (8, 1024, 15_000), (4, 256, 4_000)
DAS_RATE_HZ = 50.0


@dataclass(frozen=True)
class Archive:
    """What one set of rows ingests: its name, bucket, local root and files, the `seisctf
    ingest` kind and options, and the store's data variable."""

    name: str
    bucket: str
    root: Path
    files: list[Path]
    kind: str
    options: tuple[str, ...]
    variable: str


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


class HostsCluster(scale_cluster.Cluster):
    """`scale_cluster.Cluster` whose i-th worker has `worker_envs[i]` in its environment."""

    def __init__(self, workdir: Path, worker_envs: tuple[dict[str, str], ...]):
        super().__init__(workdir, n_workers=len(worker_envs))
        self.worker_envs = worker_envs

    def _start(self, *argv: str, env: dict[str, str]):
        if argv[0] == "worker":  # started after the scheduler, in order
            env = {**env, **self.worker_envs[len(self.processes) - 1]}
        return super()._start(*argv, env=env)


def waveform_archive(options: ScaleOptions) -> Archive:
    """The SDS archive, ingested at its files' sampling rate (a few files have half of it: the
    ingest resamples them)."""
    if options.quick:
        archive = scale_ingest.byte_archive(options)
    else:
        archive = scale_ingest.make_sds(options.data / "sds_reads", *FULL_ARCHIVE)
    root = archive.root / archive.summary["sds_root"]
    files = sorted(path for path in root.rglob("*") if path.is_file())
    rate = ("--rate", str(float(archive.summary["arguments"]["rate"])))
    return Archive("waveforms", "archive", root, files, "waveforms", rate, "data")


def das_archive(options: ScaleOptions) -> Archive:
    """The DAS recordings (module doc), written once under the data folder."""
    count, channels, samples = DAS_QUICK if options.quick else DAS_FULL
    root = options.data / f"das_reads_{count}x{channels}x{samples}"
    done = root / "done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        rng = np.random.default_rng(38)
        start = np.datetime64("2024-01-02T03:04:05", "ns")
        step = np.timedelta64(round(1e9 / DAS_RATE_HZ), "ns")
        for index in range(count):
            write = write_prodml if index % 2 == 0 else write_dasdae
            values = rng.standard_normal((samples, channels)).astype(np.float32)
            write(root / f"das_{index:03d}.h5", values, start + index * samples * step, DAS_RATE_HZ)
        done.write_text("")
    files = sorted(root.glob("*.h5"))
    return Archive("DAS", "das", root, files, "das", (), "strain_rate")


def store_digest(store: Path, variable: str) -> str:
    """sha256 of every chunk file of `variable` (by relative path) and of the `coverage`
    values."""
    digest = hashlib.sha256()
    for path in sorted((store / variable).rglob("*")):
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


def measure(folder: Path, server, port: int, row: Row, archive: Archive) -> Measured:
    """One ingest of the archive's bucket on a fresh cluster configured as `row`."""
    envs = tuple(
        {**CREDENTIALS, **{k: str(folder / v) if k == DIR_ENV else v for k, v in env.items()}}
        for env in row.workers
    )
    name = f"{archive.name}-{row.label}".replace(" ", "-").replace(",", "")
    store = folder / f"store-{name}.zarr"
    bucket = archive.bucket
    command = [*seisctf_command(), "ingest", archive.kind, f"s3://{bucket}/", "--out", str(store),
               *archive.options, "--quiet",
               f"--storage-option=endpoint_url={server.endpoint_url}"]  # fmt: skip
    with HostsCluster(folder, envs) as cluster:
        workers = [worker.pid for worker in cluster.workers]
        before = (bucket_sent_bytes(port, bucket), bucket_requests(port, bucket),
                  cpu_seconds(workers), cpu_seconds([server.process.pid]))  # fmt: skip
        run = run_command([*command, "--scheduler", cluster.address], env=CREDENTIALS)
        after = (bucket_sent_bytes(port, bucket), bucket_requests(port, bucket),
                 cpu_seconds(workers), cpu_seconds([server.process.pid]))  # fmt: skip
    sent, gets, worker_cpu, server_cpu = (a - b for a, b in zip(after, before, strict=True))
    digest = store_digest(store, archive.variable)
    return Measured(int(sent), int(gets), run.seconds, worker_cpu, server_cpu, digest)


def sections(options: ScaleOptions) -> Iterator[Section]:
    archives = (waveform_archive(options), das_archive(options))
    folder = options.workdir / "reads"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    weed_options, port = metrics_options()
    server = start_s3(folder / "seaweedfs", options=weed_options)
    section = Section(
        "Bytes read from storage by an ingest (`scale_reads.py`)",
        [
            "archive",
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
    digests: dict[tuple[str, str], str] = {}
    try:
        fs = server.filesystem()
        for archive in archives:
            fs.mkdir(archive.bucket)
            fs.put(str(archive.root) + "/", f"{archive.bucket}/", recursive=True)
        for archive in archives:
            input_bytes = sum(path.stat().st_size for path in archive.files)
            for row in ROWS:
                found = measure(folder, server, port, row, archive)
                digests[archive.name, row.label] = found.digest
                ratio = found.sent / input_bytes
                section.rows.append(
                    [archive.name, row.label, len(archive.files), input_bytes, found.sent, ratio,
                     found.gets, found.seconds, found.worker_cpu_s, found.server_cpu_s]
                )  # fmt: skip
                print(f"  {archive.name}, {row.label}: {ratio:.3f} x the input bytes", flush=True)
    finally:
        stop_process(server.process)
        shutil.rmtree(folder, ignore_errors=True)
    ratios = {(row[0], row[1]): row[5] for row in section.rows}
    for archive in archives:
        for label in ("cache on, one host", "cache on, two hosts"):
            met = ratios[archive.name, label] <= GOAL
            figure = f"{ratios[archive.name, label]:.3f}"
            name = f"{archive.name}, {label}: bytes read ≤ {GOAL} × input"
            section.goals.append(verdict(name, figure, met))
        same = len({digests[archive.name, row.label] for row in ROWS}) == 1
        name = f"{archive.name}: every row's store, the same data chunks and coverage"
        section.goals.append(verdict(name, str(same).lower(), same))
    made = "scale_ingest's quick archive" if options.quick else " ".join(FULL_ARCHIVE)
    das = DAS_QUICK if options.quick else DAS_FULL
    section.notes.append(
        "Bytes read: the S3 gateway's own count of body bytes sent from the archive's bucket "
        "(SeaweedFS_s3_bucket_traffic_sent_bytes_total), before and after each run. Archives: "
        f"`make_archive.py sds` ({made}); DAS: {das[0]} PRODML and DASDAE files of {das[1]} "
        f"channels x {das[2]} float32 samples at {DAS_RATE_HZ:g} Hz "
        f"(`tests/das_vendor_files.py`). Load average at the end: {os.getloadavg()[0]:.1f}."
    )
    yield section
