"""Each input byte read from storage once across two hosts (issue 38): two `dask worker`s, each
with an input-cache folder of its own (as two machines have), ingest waveforms and DAS files from
SeaweedFS, which counts the bytes it sends (its metrics): at most 1.05x the input bytes, and the
stores byte for byte those of a one-worker ingest. Then a block task placed on a host whose only
worker has left runs on another (`input_locality`'s fallback)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import obspy
import pytest
from das_vendor_files import write_dasdae, write_prodml
from s3_metrics import bucket_sent_bytes, metrics_options
from servers import (
    CLUSTER_CREDENTIALS,
    start_dask_cluster,
    start_s3,
    stop_dask_cluster,
    stop_s3,
)

from seisctf.cluster import dask_client
from seisctf.formats.shared import input_cache, input_locality

BUCKET = "twohosts"
GOAL = 1.05
STATIONS, SEGMENTS, RATE_HZ, SEGMENT_S = 3, 3, 50.0, 3600
DAS_FILES, DAS_CHANNELS, DAS_SAMPLES, DAS_RATE_HZ = 4, 256, 4000, 50.0


def _waveform_files(folder: Path) -> list[Path]:
    """STATIONS stations of one channel, each SEGMENTS consecutive hour files of int32 counts
    (Steim-2), scanned a file a task: 5 files on one host, 4 on the other, so the middle
    station's files are kept on both (its runs ask the other host for its file there)."""
    rng = np.random.default_rng(38)
    start = obspy.UTCDateTime(2024, 1, 2)
    files = []
    for station in range(STATIONS):
        for segment in range(SEGMENTS):
            samples = rng.normal(0, 500, int(SEGMENT_S * RATE_HZ)).astype(np.int32)
            header = {"network": "XX", "station": f"S{station:02d}", "channel": "HHZ",
                      "sampling_rate": RATE_HZ,
                      "starttime": start + segment * SEGMENT_S}  # fmt: skip
            path = folder / f"S{station:02d}" / f"XX.S{station:02d}..HHZ.{segment}.mseed"
            path.parent.mkdir(parents=True, exist_ok=True)
            obspy.Trace(samples, header).write(str(path), format="MSEED", encoding="STEIM2")
            files.append(path)
    return files


def _das_files(folder: Path) -> list[Path]:
    """DAS_FILES recordings end to end, PRODML and DASDAE alternating: time blocks straddle
    files, and one straddles the two hosts' files."""
    rng = np.random.default_rng(38)
    start = np.datetime64("2024-01-02T03:04:05", "ns")
    step = np.timedelta64(round(1e9 / DAS_RATE_HZ), "ns")
    folder.mkdir(parents=True)
    files = []
    for index in range(DAS_FILES):
        write = write_prodml if index % 2 == 0 else write_dasdae
        values = rng.standard_normal((DAS_SAMPLES, DAS_CHANNELS)).astype(np.float32)
        path = folder / f"das_{index:03d}.h5"
        write(path, values, start + index * DAS_SAMPLES * step, DAS_RATE_HZ)
        files.append(path)
    return files


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """(server, metrics port, {kind: input bytes}) of a SeaweedFS of its own holding the
    waveform files under `waveforms/` and the DAS files under `das/` of one bucket."""
    folder = tmp_path_factory.mktemp("two-host-inputs")
    options, port = metrics_options()
    server = start_s3(tmp_path_factory.mktemp("seaweedfs-two-hosts"), options=options)
    fs = server.filesystem()
    fs.mkdir(BUCKET)
    sizes = {}
    for kind, files in (("waveforms", _waveform_files(folder / "waveforms")),
                        ("das", _das_files(folder / "das"))):  # fmt: skip
        for path in files:
            fs.put_file(str(path), f"{BUCKET}/{kind}/{path.relative_to(folder / kind)}")
        sizes[kind] = sum(path.stat().st_size for path in files)
    yield server, port, sizes
    stop_s3(server)


def _ingest(server, kind: str, out: Path, address: str) -> None:
    """`seisctf ingest <kind>` of the bucket's `kind/` folder on the cluster at `address`."""
    command = [sys.executable, "-m", "seisctf.cli", "ingest", kind, f"s3://{BUCKET}/{kind}/",
               "--out", str(out), "--quiet", f"--storage-option=endpoint_url={server.endpoint_url}",
               "--scheduler", address]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **CLUSTER_CREDENTIALS})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def _store_digest(store: Path) -> dict[str, str]:
    """sha256 of every chunk file of the store at `store` (by path) but the progress
    records'."""
    return {
        str(path.relative_to(store)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(store.rglob("*"))
        if path.is_file() and path.name != "zarr.json" and "progress" not in str(path)
    }


def _two_hosts(folder: Path):
    """A cluster of two single-threaded workers with a cache folder each (two hosts)."""
    hosts = [{input_cache.DIR_ENV: str(folder / f"host-{n}")} for n in (1, 2)]
    return start_dask_cluster(2, worker_environments=hosts)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """{"one": a one-worker cluster, "two": two workers standing for two hosts}."""
    folder = tmp_path_factory.mktemp("two-host-clusters")
    one = start_dask_cluster(1, worker_environments=[{input_cache.DIR_ENV: str(folder / "one")}])
    try:
        two = _two_hosts(folder)
    except BaseException:
        stop_dask_cluster(one)
        raise
    yield {"one": one, "two": two}
    stop_dask_cluster(two)
    stop_dask_cluster(one)


@pytest.mark.parametrize("kind", ["waveforms", "das"])
def test_two_hosts_read_each_input_byte_once_and_store_a_one_worker_ingests_bytes(
    archives, clusters, tmp_path, kind
):
    server, port, sizes = archives
    _ingest(server, kind, tmp_path / "one.zarr", clusters["one"].address)
    before = bucket_sent_bytes(port, BUCKET)
    _ingest(server, kind, tmp_path / "two.zarr", clusters["two"].address)
    ratio = (bucket_sent_bytes(port, BUCKET) - before) / sizes[kind]
    assert ratio <= GOAL, f"{kind}: {ratio:.3f} x the input bytes read across two hosts"
    reference = _store_digest(tmp_path / "one.zarr")
    assert len([name for name in reference if "coverage" not in name]) > 1
    assert _store_digest(tmp_path / "two.zarr") == reference


def test_a_task_placed_on_a_host_whose_workers_left_runs_on_another(tmp_path):
    """A task placed (strictly) on the host keeping its file runs elsewhere once that host's
    only worker is gone, instead of waiting for it."""
    cluster = _two_hosts(tmp_path)
    try:
        with dask_client(cluster.address, quiet=True) as client:
            client.wait_for_workers(2, timeout=60)
            pids = client.run(os.getpid)
            holder = max(pids, key=lambda worker: pids[worker])
            survivor = next(worker for worker in pids if worker != holder)

            @input_cache.cache_run
            def placed_then_lost() -> list[int]:
                run = input_cache.current_run()
                client.run(input_cache.keep, run, "ab" * 32, b"kept", workers=[holder])
                assert input_locality.run_placement().strict  # the fallback registered
                make = input_locality.near_inputs(
                    lambda i: dask.delayed(os.getpid)(dask_key_name=f"pid-{run}-{i}"),
                    lambda i: ["ab" * 32],
                )
                tasks = [make(i) for i in range(3)]  # placed on the holder's host only
                client.retire_workers([holder], close_workers=True)
                return list(dask.compute(*tasks))

            assert placed_then_lost() == [pids[survivor]] * 3
    finally:
        stop_dask_cluster(cluster)
