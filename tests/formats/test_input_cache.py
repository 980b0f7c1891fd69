"""Each input byte read once from storage: the scan keeps the files it read on its host
(`input_cache`) and the decode reads them there. Counted by the S3 server itself (SeaweedFS's
metrics of bytes sent per bucket), through the command line, on 1 and 2 workers, with the cache
and without: the same store bytes either way. Then the cache's own rules (budget, damaged
copies, stale runs, a bad setting) on real files, and block tasks placed on the host that keeps
their inputs (two cache folders standing for two hosts)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dask
import obspy
import pytest
import zarr
from bounded_run import run_bounded
from s3_metrics import bucket_sent_bytes, metrics_options
from servers import S3_KEY, start_s3, stop_process, stop_s3, tied_to_this_process

from seisctf.errors import InvalidInput
from seisctf.formats.shared import input_cache
from seisctf.formats.shared.input_locality import in_path_order, near_inputs

MSEED = Path(obspy.__file__).parent / "io/mseed/tests/data"
# One station's day of two channels (1 Hz, 2025-11-10), and one of them again in a day file.
ARCHIVE = [MSEED / "CH.BALST..LH_two_channels", MSEED / "CH.BALST..LHE.D.2025.314"]
BUCKET = "reads"
CACHE_OFF = {input_cache.BYTES_ENV: "0"}


@pytest.fixture(scope="module")
def counted_s3(tmp_path_factory):
    """A SeaweedFS of its own whose metrics count the bytes it sends: (server, metrics port),
    with the archive in bucket `reads`."""
    options, port = metrics_options()
    server = start_s3(tmp_path_factory.mktemp("seaweedfs-metrics"), options=options)
    fs = server.filesystem()
    fs.mkdir(BUCKET)
    for path in ARCHIVE:
        fs.put_file(str(path), f"{BUCKET}/archive/{path.name}")
    yield server, port
    stop_s3(server)


def _local_cluster_file(folder: Path, n_workers: int) -> Path:
    """A `--cluster` file of a LocalCluster of `n_workers` worker processes (they inherit the
    command's environment, and so its cache settings)."""
    path = folder / f"local-{n_workers}.yaml"
    path.write_text(
        "class: distributed.LocalCluster\n"
        f"options: {{n_workers: {n_workers}, threads_per_worker: 1, processes: true, "
        'dashboard_address: "127.0.0.1:0"}\n'
    )
    return path


def _ingest(server, out: Path, env: dict[str, str], *cluster: str) -> None:
    """`seisctf ingest waveforms` of the bucket's archive; the workers (local processes) have
    the S3 key from their environment."""
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "waveforms", f"s3://{BUCKET}/archive/",
               "--out", str(out), "--quiet", f"--storage-option=endpoint_url={server.endpoint_url}",
               *cluster]  # fmt: skip
    credentials = {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_KEY}
    done = run_bounded(command, 300, env={**os.environ, **credentials, **env})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def _store_bytes(store: Path) -> dict[str, bytes]:
    """The stored bytes of every `data` chunk, and the `coverage` values' bytes."""
    chunks = {
        str(path.relative_to(store)): path.read_bytes()
        for path in sorted((store / "data").rglob("*"))
        if path.is_file() and path.name != "zarr.json"
    }
    coverage = zarr.open_group(str(store), mode="r")["coverage"][:]
    return {**chunks, "coverage": coverage.tobytes()}


def test_the_decode_reads_the_scans_copy_not_storage_and_writes_the_same_bytes(
    counted_s3, tmp_path
):
    server, port = counted_s3
    input_bytes = sum(path.stat().st_size for path in ARCHIVE)
    cache = tmp_path / "cache"
    ratios, stores = {}, {}
    # The cache off on 2 workers (the other ingest tests show 1 and 2 workers agree), on with 1
    # and 2: each the same bytes.
    for label, n_workers in (("off", 2), ("on", 1), ("on", 2)):
        env = CACHE_OFF if label == "off" else {input_cache.DIR_ENV: str(cache)}
        cluster = ["--cluster", str(_local_cluster_file(tmp_path, n_workers))]
        store = tmp_path / f"{label}-{n_workers}.zarr"
        before = bucket_sent_bytes(port, BUCKET)
        _ingest(server, store, env, *cluster)
        ratios[label, n_workers] = (bucket_sent_bytes(port, BUCKET) - before) / input_bytes
        stores[label, n_workers] = _store_bytes(store)
    # Without the cache the scan and the decode each read every file; with it, the scan only.
    assert 1.95 <= ratios["off", 2] <= 2.05, ratios
    assert ratios["on", 1] <= 1.05 and ratios["on", 2] <= 1.05, ratios
    reference = stores["off", 2]
    assert len(reference) > 1 and any(name.startswith("data/") for name in reference)
    for key, found in stores.items():
        assert found == reference, key
    # Each run cleared its files when it ended.
    assert not [p for p in (cache / input_cache.FOLDER).iterdir()], "a run's files were left"


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        (input_cache.BYTES_ENV, "lots", "expected a size in bytes"),
        (input_cache.DIR_ENV, "s3://bucket/cache", "expected an absolute local folder"),
        (input_cache.DIR_ENV, "cache", "expected an absolute local folder"),
    ],
)
def test_a_bad_cache_setting_is_exit_3_and_nothing_is_written(tmp_path, name, value, said):
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "waveforms", str(ARCHIVE[0]),
               "--out", str(tmp_path / "x.zarr")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, name: value})  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{name}: {said}" in done.stderr
    assert repr(value) in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no store, no s3: or cache folder


# --- the cache's rules, on this process's host ----------------------------------------------


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(input_cache.DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(input_cache.BYTES_ENV, raising=False)
    return tmp_path / "cache" / input_cache.FOLDER


def _file(path: Path) -> tuple[bytes, str]:
    raw = path.read_bytes()
    return raw, hashlib.sha256(raw).hexdigest()


def test_kept_files_are_read_back_by_digest_until_cleared(cache_dir):
    raw, digest = _file(ARCHIVE[0])
    assert input_cache.read(digest) is None
    assert not input_cache.keep("", digest, raw)  # no run: nothing kept
    assert input_cache.keep("run-a", digest, raw, source=f"s3://{BUCKET}/x")
    assert (cache_dir / "run-a" / digest).read_bytes() == raw
    assert input_cache.read(digest) == raw
    assert input_cache.held("run-a") == {digest: len(raw)}
    input_cache.clear("run-a")
    assert input_cache.read(digest) is None
    assert not (cache_dir / "run-a").exists()


def test_a_damaged_copy_is_not_served_and_is_removed(cache_dir):
    raw, digest = _file(ARCHIVE[1])
    assert input_cache.keep("run-a", digest, raw)
    copy = cache_dir / "run-a" / digest
    copy.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # one bit flipped
    assert input_cache.read(digest) is None
    assert not copy.exists()


def test_the_budget_bounds_what_a_run_keeps_and_zero_keeps_nothing(cache_dir, monkeypatch):
    (first, first_digest), (second, second_digest) = map(_file, ARCHIVE)
    monkeypatch.setenv(input_cache.BYTES_ENV, str(len(first) + len(second) - 1))
    assert input_cache.keep("run-a", first_digest, first)
    assert not input_cache.keep("run-a", second_digest, second)  # over the budget
    assert input_cache.read(second_digest) is None  # the decode reads storage
    assert input_cache.held("run-a") == {first_digest: len(first)}
    monkeypatch.setenv(input_cache.BYTES_ENV, "0")
    assert not input_cache.keep("run-b", second_digest, second)
    monkeypatch.setenv(input_cache.BYTES_ENV, "-5")
    with pytest.raises(InvalidInput, match="expected a size in bytes") as error:
        input_cache.keep("run-c", second_digest, second)
    assert error.value.what == input_cache.BYTES_ENV


def test_the_default_budget_is_a_share_of_the_free_space(cache_dir):
    free = shutil.disk_usage(cache_dir.parent.parent).free
    budget = input_cache.budget_bytes(cache_dir)
    assert abs(budget - input_cache.DEFAULT_FREE_FRACTION * free) <= 0.01 * free


def test_a_new_run_sweeps_folders_untouched_for_a_day(cache_dir):
    raw, digest = _file(ARCHIVE[1])
    stale, recent = cache_dir / "killed-run", cache_dir / "running-run"
    for folder in (stale, recent):
        folder.mkdir(parents=True)
        (folder / "x").write_bytes(b"x")
    day_ago = time.time() - input_cache.STALE_S - 60
    os.utime(stale, (day_ago, day_ago))
    assert input_cache.keep("run-new", digest, raw)
    assert not stale.exists()
    assert (recent / "x").exists()


def test_a_local_file_on_the_caches_own_file_system_is_not_copied(cache_dir, tmp_path):
    raw, digest = _file(ARCHIVE[1])
    local = tmp_path / "input.mseed"
    local.write_bytes(raw)
    assert not input_cache.keep("run-a", digest, raw, source=str(local))
    assert input_cache.read(digest) is None


# --- placing block tasks near their inputs ---------------------------------------------------


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    """(folder, client) of a cluster of two hosts (`_two_host_cluster`), for this module."""
    from seisctf.cluster import dask_client

    folder = tmp_path_factory.mktemp("two-hosts")
    processes = _two_host_cluster(folder)
    try:
        with dask_client((folder / "address").read_text(), quiet=True) as client:
            client.wait_for_workers(2, timeout=60)
            yield folder, client
    finally:
        # The workers first: a worker whose scheduler is gone waits to reconnect, out to
        # stop_process's 5 s grace.
        for process in reversed(processes):
            stop_process(process)


def test_tasks_run_on_the_host_that_keeps_their_inputs(two_hosts):
    """Two `dask worker`s with cache folders of their own stand for two hosts; each keeps some
    of the files; every task built by `near_inputs` runs on the worker keeping its inputs."""
    folder, client = two_hosts
    files = [path.read_bytes() for path in ARCHIVE]
    digests = [hashlib.sha256(raw).hexdigest() for raw in files]
    inputs = [[digests[0]]] * 4 + [[digests[1]]] * 4  # tasks 0-3 read file 0, 4-7 file 1

    @input_cache.cache_run
    def placed_tasks(client, holder: dict[str, str]) -> list[int]:
        """The process id each task ran in, file i kept by worker holder[digest i] only."""
        run = input_cache.current_run()
        for raw, digest in zip(files, digests, strict=True):
            client.run(input_cache.keep, run, digest, raw, workers=[holder[digest]])
        make = near_inputs(
            lambda i: dask.delayed(os.getpid)(dask_key_name=f"pid-{run}-{i}"), lambda i: inputs[i]
        )
        return list(dask.compute(*[make(i) for i in range(len(inputs))]))

    pids = client.run(os.getpid)
    workers = sorted(pids)
    for holder in (
        {digests[0]: workers[1], digests[1]: workers[0]},
        {digests[0]: workers[0], digests[1]: workers[1]},
    ):
        ran_in = placed_tasks(client, holder)
        assert ran_in == [pids[holder[task[0]]] for task in inputs], (holder, pids)
        for host in ("host-1", "host-2"):  # the run's files cleared on both hosts
            assert not list((folder / host / input_cache.FOLDER).glob("*/*"))


def test_consecutive_scan_batches_go_to_one_host_each(two_hosts):
    """Scan batches in path order: the first half on one host, the second on the other
    (`in_path_order`), so a station's neighbouring files are kept on one host."""
    _, client = two_hosts

    @input_cache.cache_run
    def hosts_of_tasks(client, count: int) -> list[str]:
        run = input_cache.current_run()
        make = in_path_order(
            lambda i: dask.delayed(input_cache.host_cache)(dask_key_name=f"host-{run}-{i}"), count
        )
        return [Path(host).parent.name for host in dask.compute(*[make(i) for i in range(count)])]

    assert hosts_of_tasks(client, 8) == ["host-1"] * 4 + ["host-2"] * 4
    assert hosts_of_tasks(client, 3) == ["host-1", "host-1", "host-2"]


def _two_host_cluster(folder: Path) -> list[subprocess.Popen]:
    """A `dask scheduler` (address in folder/address) and two single-threaded `dask worker`s,
    each with a `$SEISCTF_INPUT_CACHE_DIR` of its own (folder/host-1, folder/host-2)."""
    dask_command = str(Path(sys.executable).with_name("dask"))
    scheduler_file = folder / "scheduler.json"
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
    processes = [
        subprocess.Popen(
            tied_to_this_process([dask_command, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", scheduler_file]),
            **common,
        )
    ]  # fmt: skip
    deadline = time.monotonic() + 60
    while not scheduler_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.3)  # written whole
    for host in ("host-1", "host-2"):
        env = {**os.environ, input_cache.DIR_ENV: str(folder / host)}
        env.pop(input_cache.BYTES_ENV, None)
        processes.append(
            subprocess.Popen(
                tied_to_this_process([dask_command, "worker", "--scheduler-file", scheduler_file,
                                      "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
                                      "--local-directory", folder / f"{host}-local"]),
                env=env, **common,
            )
        )  # fmt: skip
    (folder / "address").write_text(json.loads(scheduler_file.read_text())["address"])
    return processes


@pytest.fixture
def half_reserved_disk(tmp_path):
    """A 64 MiB ext4 file system of its own, half of it reserved for root (`mkfs.ext4 -m 50`),
    mounted from a loop device: (its mount point, its usable size in bytes)."""
    if os.geteuid() != 0:
        pytest.fail("mounting a loop device needs root (the suite runs as root)")
    image, mount_point = tmp_path / "disk.img", tmp_path / "disk"
    mount_point.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(64 * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-m", "50", "-O", "^has_journal", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount_point)], check=True)
    try:
        usage = shutil.disk_usage(mount_point)
        yield mount_point, usage.used + usage.free
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_the_reserve_is_a_share_of_the_usable_space_not_of_the_raw_total(
    half_reserved_disk, monkeypatch
):
    """On a volume with a large reserved part, a file that leaves more than RESERVE_FRACTION of
    the usable size free is kept (counted from the raw total, half of it reserved, it was not),
    and one that would leave less is not."""
    mount_point, usable = half_reserved_disk
    monkeypatch.setenv(input_cache.DIR_ENV, str(mount_point))
    monkeypatch.setenv(input_cache.BYTES_ENV, "1GB")
    reserve = input_cache.RESERVE_FRACTION * usable
    free = shutil.disk_usage(mount_point).free - 64 * 1024  # the run's folder and ledger
    fits = os.urandom(int(free - 1.5 * reserve))  # leaves 1.5 reserves: < 5 % of the raw total
    assert free - len(fits) < input_cache.RESERVE_FRACTION * shutil.disk_usage(mount_point).total
    assert input_cache.keep("run-a", hashlib.sha256(fits).hexdigest(), fits)
    too_much = os.urandom(int(reserve))  # would leave half a reserve
    assert not input_cache.keep("run-a", hashlib.sha256(too_much).hexdigest(), too_much)
    assert input_cache.read(hashlib.sha256(fits).hexdigest()) == fits
    input_cache.clear("run-a")
