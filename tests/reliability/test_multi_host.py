"""A cluster of hosts that share only object storage: a `dask scheduler` and SeaweedFS S3 on a
private test network's bridge, and two `dask worker`s, each in its own network namespace (its
own address on the subnet) and its own mount namespace (no view of the test run's temporary
folders, its own scratch space), as workers on other machines are (tests/namespaces.py).

The demo chain and an ingest from s3:// run there and write the same stores, byte for byte, as
on the embedded cluster with local stores; a command that gives these workers a local path
fails at once with one line naming it. Needs root, `ip` and `unshare` (skipped otherwise, saying
which is missing)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import obspy
import pytest
from conftest import TINY_LAYOUT_YAML
from namespaces import missing_requirement, namespaced_cluster, private_network, worker_address
from servers import CLUSTER_CREDENTIALS, start_s3, stop_s3

from seisctf.cli import main
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation

SMALL = ["--sensors", "64", "--duration", "300"]
SECRET = "multi-host-test-secret-long-enough"
TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"
MSEED_FILES = sorted(TSINDEX.rglob("*.mseed"))  # CU.TGUH.00, IU.ANMO.10, IU.COLA.10 BHZ, 40 Hz
BUCKET = "multihost"
# What legitimately differs between the two runs of a command: the ingest's table of its inputs
# (its chunks: paths as given, an s3:// URL on one side and a local path on the other, and their
# modification, an ETag or an mtime) and its problem lines name each input as given (compared
# on their own, the names aside). Nothing else differs: no store records when it was written or
# on which cluster, so every other attribute, every array's metadata and every stored chunk
# must be byte-identical.
INGEST_INPUTS = "inputs/"
INGEST_PROBLEMS = "ingest_problems"


@pytest.fixture(scope="module")
def network():
    """The bridge and two namespaces; skipped, saying why, where they cannot be made (not root,
    no `ip` or `unshare`, no bridges, the subnet in use)."""
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(f"no private test network: {reason}")
    with contextlib.ExitStack() as stack:
        try:
            made = stack.enter_context(private_network(2))
        except RuntimeError as error:  # raised before the network exists: nothing to remove
            pytest.skip(f"no private test network: {error}")
        yield made


@pytest.fixture(scope="module")
def bridge_s3(network, tmp_path_factory):
    """SeaweedFS S3 on the bridge's address, with the bucket `BUCKET`."""
    server = start_s3(tmp_path_factory.mktemp("seaweedfs-bridge"), host=network.host_address)
    try:
        server.filesystem().mkdir(BUCKET)
        yield server
    finally:
        stop_s3(server)


@pytest.fixture(scope="module")
def remote_cluster(network, tmp_path_factory):
    """The scheduler on the bridge and two workers in their namespaces; this run's pytest
    temporary folders are hidden from the workers (the rest of /tmp is not: a clone of the
    project there keeps its virtualenv)."""
    base = tmp_path_factory.getbasetemp().resolve()
    logs = tmp_path_factory.mktemp("cluster-logs")
    with namespaced_cluster(network, [base], logs) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def tiny_layout(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("layout") / "tiny.yaml"
    path.write_text(TINY_LAYOUT_YAML)
    return str(path)


def seisctf(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """The command line in its own process, in `cwd`, with no scheduler from the environment."""
    env = {k: v for k, v in os.environ.items() if k != "SEISCTF_SCHEDULER"}
    result = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"seisctf {' '.join(args)} -> {result.returncode}\n{result.stderr}")
    return result


@pytest.fixture(autouse=True)
def s3_credentials_in_the_environment(monkeypatch):
    """The commands take their S3 credentials from the environment, as the remote workers take
    theirs: credentials on a command line are never sent to a cluster's workers."""
    for name, value in CLUSTER_CREDENTIALS.items():
        monkeypatch.setenv(name, value)


def remote_options(cluster, server) -> list[str]:
    return ["--scheduler", cluster.scheduler, "--quiet", *server.endpoint_options()]


def local_objects(root: Path) -> dict[str, bytes]:
    """Every file of a local store, by path relative to it."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def s3_objects(server, url: str) -> dict[str, bytes]:
    """Every object of an s3:// store, by key relative to it."""
    fs = server.filesystem()
    prefix = url.removeprefix("s3://").rstrip("/")
    return {key[len(prefix) + 1 :]: fs.cat(key) for key in fs.find(prefix)}


def without(document: dict, varying: tuple[str, ...]) -> dict:
    """A zarr.json document without the attributes named in `varying`."""
    attributes = {k: v for k, v in document.get("attributes", {}).items() if k not in varying}
    return {**document, "attributes": attributes}


def assert_same_store(
    local: dict[str, bytes],
    remote: dict[str, bytes],
    what: str,
    varying: tuple[str, ...] = (),
    varying_chunks: str | None = None,
) -> None:
    """The same objects; chunks byte-identical (but those below `varying_chunks`); metadata
    documents equal but for the attributes named in `varying`."""
    assert sorted(local) == sorted(remote), what
    assert any(not key.endswith("zarr.json") for key in local), f"{what}: no chunk stored"
    for key, content in local.items():
        if key.endswith("zarr.json"):
            mine, theirs = (without(json.loads(c), varying) for c in (content, remote[key]))
            differing = {k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k)}
            differing |= {
                f"attributes.{k}"
                for k in {*mine["attributes"], *theirs["attributes"]}
                if mine["attributes"].get(k) != theirs["attributes"].get(k)
            }
            assert not differing, f"{what}/{key}: {sorted(differing)} differ"
        elif not (varying_chunks and key.startswith(varying_chunks)):
            assert content == remote[key], f"{what}/{key}"


def test_workers_have_their_own_network_and_files(
    remote_cluster, bridge_s3, tmp_path, tmp_path_factory
):
    """The isolation the other tests rely on: each worker on its own address of the test
    subnet, the client's temporary folder hidden from it, its scratch space its own, the
    package seen; the rest of /tmp is the host's (a virtualenv under /tmp must be seen)."""
    from distributed import Client

    (tmp_path / "client-only.txt").write_text("here only")
    base = tmp_path_factory.getbasetemp().resolve()
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="seisctf-multi-host-") as shared:
        with Client(remote_cluster.scheduler, timeout="10s") as client:
            addresses = sorted(client.scheduler_info()["workers"])
            seen = client.run(os.path.exists, str(tmp_path / "client-only.txt"))
            shared_seen = client.run(os.path.exists, shared.name)
            scratch = client.run(lambda dask_worker: dask_worker.local_directory)
            package = client.run(lambda: __import__("seisctf").__file__)
    assert [a.rsplit(":", 1)[0] for a in addresses] == [
        f"tcp://{worker_address(1)}",
        f"tcp://{worker_address(2)}",
    ]
    assert list(seen.values()) == [False, False]
    assert list(shared_seen.values()) == [True, True]
    assert all(Path(folder).is_relative_to(base) for folder in scratch.values()), scratch
    assert not any(Path(folder).exists() for folder in scratch.values())  # not on the host
    assert set(package.values()) == {str(Path(__file__).parents[2] / "seisctf/__init__.py")}


@pytest.mark.slow
def test_demo_chain_on_s3_is_byte_identical_to_the_embedded_local_run(
    remote_cluster, bridge_s3, tiny_layout, tmp_path, monkeypatch
):
    monkeypatch.delenv("SEISCTF_SCHEDULER", raising=False)
    names = ("wavefield", "public", "truth", "persistence")
    remote = {name: f"s3://{BUCKET}/chain/{name}.zarr" for name in names}
    local = {name: str(tmp_path / f"{name}.zarr") for name in names}
    results = {}
    for urls, options in (
        (remote, remote_options(remote_cluster, bridge_s3)),
        (local, ["--quiet"]),
    ):
        # In this process: the second synthesis reuses the first's travel-time tables (computed
        # by the client while it builds the graph, most of a small synthesis's time).
        synth = ["synth", "global", "--out", urls["wavefield"], *SMALL, "--secret", SECRET]
        assert main([*synth, *options]) == 0
        seisctf("tasks", urls["wavefield"], "--public", urls["public"], "--truth", urls["truth"],
                "--layout", tiny_layout, "--secret", SECRET, *options, cwd=tmp_path)  # fmt: skip
        seisctf("baseline", "persistence", "--public", urls["public"], "--out",
                urls["persistence"], *options, cwd=tmp_path)  # fmt: skip
        score = seisctf("score", "ctf", "--truth", urls["truth"], "--submission",
                        urls["persistence"], *options, cwd=tmp_path)  # fmt: skip
        results[urls is remote] = json.loads(score.stdout)
    for name in names:
        assert_same_store(
            local_objects(Path(local[name])), s3_objects(bridge_s3, remote[name]), name
        )
    assert results[True] == results[False]
    assert results[True]["truth_sha256_verified"] is True
    assert np.isfinite(list(results[True]["scores"].values())).all()


@pytest.mark.slow
def test_ingest_from_s3_equals_the_embedded_local_ingest(remote_cluster, bridge_s3, tmp_path):
    fs = bridge_s3.filesystem()
    sources, copies = [], []
    for path in MSEED_FILES:
        fs.put(str(path), f"{BUCKET}/mseed/{path.name}")
        sources.append(f"s3://{BUCKET}/mseed/{path.name}")
        copies.append(str(shutil.copy(path, tmp_path / path.name)))
    out = f"s3://{BUCKET}/ingested.zarr"
    seisctf("ingest", "waveforms", *sources, "--out", out,
            *remote_options(remote_cluster, bridge_s3), cwd=tmp_path)  # fmt: skip
    local_out = tmp_path / "ingested.zarr"
    seisctf("ingest", "waveforms", *copies, "--out", str(local_out), "--quiet", cwd=tmp_path)
    local, remote = local_objects(local_out), s3_objects(bridge_s3, out)
    assert_same_store(local, remote, "ingested.zarr", (INGEST_PROBLEMS,), INGEST_INPUTS)
    # The inputs' tables differ only by where each file was read from.
    for key, content in remote.items():
        (tmp_path / "remote.zarr" / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "remote.zarr" / key).write_bytes(content)
    manifests = [
        recorded_inputs(StoreLocation(root)) for root in (local_out, tmp_path / "remote.zarr")
    ]
    assert [(e["size"], e["sha256"]) for e in manifests[0]] == [
        (e["size"], e["sha256"]) for e in manifests[1]
    ]
    assert [e["path"] for e in manifests[1]] == sources
    problems = [
        json.loads(store["zarr.json"])["attributes"].get(INGEST_PROBLEMS, [])
        for store in (local, remote)
    ]
    named_locally = list(problems[1])
    for source, copy in zip(sources, copies, strict=True):
        named_locally = [problem.replace(source, copy) for problem in named_locally]
    assert named_locally == problems[0]
    assert len(manifests[0]) == 3


def assert_refused(result: subprocess.CompletedProcess, path: str, address: str) -> None:
    """Exit 3 and one line naming the path, the cluster and the remedy."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert path in lines[0] and f"the workers at {address} cannot see" in lines[0], lines[0]
    assert "give s3://" in lines[0], lines[0]


def test_local_paths_given_to_remote_workers_fail_in_one_line(remote_cluster, bridge_s3, tmp_path):
    options = remote_options(remote_cluster, bridge_s3)
    source = str(shutil.copy(MSEED_FILES[0], tmp_path / MSEED_FILES[0].name))
    started = time.monotonic()
    out = f"s3://{BUCKET}/never.zarr"
    refused = seisctf("ingest", "waveforms", source, "--out", out, *options, cwd=tmp_path,
                      check=False)  # fmt: skip
    assert_refused(refused, source, remote_cluster.scheduler)
    assert not bridge_s3.filesystem().exists(out.removeprefix("s3://"))
    uploaded = f"s3://{BUCKET}/refused/{MSEED_FILES[0].name}"
    bridge_s3.filesystem().put(str(MSEED_FILES[0]), uploaded.removeprefix("s3://"))
    local_out = tmp_path / "out" / "local.zarr"
    refused = seisctf("ingest", "waveforms", uploaded, "--out", str(local_out), *options,
                      cwd=tmp_path, check=False)  # fmt: skip
    assert_refused(refused, str(local_out), remote_cluster.scheduler)
    # The writer lock made the output's folder while it held the output; it is gone again.
    assert f"the folder {tmp_path / 'out'} of this output" in refused.stderr
    assert sorted(os.listdir(tmp_path)) == [MSEED_FILES[0].name]  # no probe, no store left
    # A relative output is the client's folder too (the subprocess runs in tmp_path).
    refused = seisctf("synth", "global", "--out", "relative.zarr", *SMALL, *options,
                      cwd=tmp_path, check=False)  # fmt: skip
    assert_refused(refused, "relative.zarr", remote_cluster.scheduler)
    assert time.monotonic() - started < 60  # three commands: seconds each, no hang
