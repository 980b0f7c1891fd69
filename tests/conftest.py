"""Shared fixtures: real S3 (SeaweedFS), Dask clusters and PostgreSQL on loopback, small
wavefields."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import dask.array as da
import numpy as np
import pytest
import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))
# The red team's code lives in `benchmarks/`, beside the package (tests/benchmarks_red_team).
sys.path.insert(1, str(Path(__file__).parents[1]))

from servers import (  # noqa: E402
    start_dask_cluster,
    start_postgres,
    start_s3,
    stop_dask_cluster,
    stop_postgres,
    stop_s3,
)

from seisctf import conventions as cv  # noqa: E402
from seisctf.ctf_json import CtfManifest, CtfPair  # noqa: E402
from seisctf.location import StoreLocation
from seisctf.plugins.layouts import Layout  # noqa: E402

T = TypeVar("T")

# Small shapes of the seismo layout's structure: 200 training steps, 50 few-snapshot steps from
# 150, 100 forecast steps from 200.
TINY_LAYOUT = Layout(
    "tiny",
    train_steps=200,
    few_start=150,
    few_steps=50,
    forecast_start=200,
    forecast_steps=100,
    k_short=20,
    k_long=20,
    modes=16,
)
# The same layout as a layout file's YAML (its name comes from the file name).
TINY_LAYOUT_YAML = "".join(
    f"{key}: {value}\n" for key, value in TINY_LAYOUT.as_dict().items() if key != "name"
)

# The sizes of the global demo `embedded_demo` runs (64 sensors, 300 steps), for runs compared
# with it.
DEMO_SIZES = ("--sensors", "64", "--duration", "300")

# A layout of 12-sample segments (8 public rows, then a forecast window of 4), as a layout file's
# YAML: bundles from records of a few minutes.
SHORT_LAYOUT_YAML = """train_steps: 8
few_start: 6
few_steps: 2
forecast_start: 8
forecast_steps: 4
k_short: 2
k_long: 2
modes: 2
"""


def smooth_wavefield(
    n_time: int = 300, n_sensor: int = 48, seed: int = 0, chunks: tuple[int, int] = (64, 16)
) -> xr.Dataset:
    """A wavefield store as the contract describes (10 realisations with the bundle's roles), made
    of travelling plane waves with random wavenumbers, frequencies and phases."""
    rng = np.random.default_rng(seed)
    roles = list(cv.BUNDLE_ROLES)
    parameter = [np.nan] * 5 + [30.0, 10.0, 50.0, 40.0, 70.0]
    time = np.arange(n_time, dtype=np.float64)
    space = np.arange(n_sensor, dtype=np.float64)
    fields = []
    for _ in roles:
        field = np.zeros((n_time, n_sensor))
        for _ in range(6):
            k, w, phase, amp = (
                rng.uniform(0, np.pi),
                rng.uniform(0.01, 0.3),
                rng.uniform(0, 6.3),
                rng.uniform(0.5, 2),
            )
            field += amp * np.sin(k * space[None, :] - w * time[:, None] + phase)
        fields.append(field.astype(np.float32))
    data = da.from_array(np.stack(fields), chunks=(1, *chunks))
    return xr.Dataset(
        {cv.WAVEFIELD_VAR: ((cv.REALISATION, cv.TIME, cv.SENSOR), data)},
        coords={
            cv.TIME: time,
            cv.ROLE: (cv.REALISATION, np.array(roles, dtype=object)),
            cv.PARAMETER_VALUE: (cv.REALISATION, parameter),
            cv.LATITUDE: (cv.SENSOR, np.linspace(89, -89, n_sensor)),
            cv.LONGITUDE: (cv.SENSOR, np.zeros(n_sensor)),
        },
        attrs={
            cv.ATTR_DATASET: "test",
            cv.ATTR_SAMPLING_RATE: 1.0,
            cv.ATTR_START_TIME: "2000-01-01T00:00:00Z",
            cv.ATTR_PARAMETER_NAME: "depth_km",
            cv.ATTR_SENSOR_ORDER: "index",
        },
    )


def synthetic_manifest(rows: int, n_space: int, k: int, modes: int) -> CtfManifest:
    """The nine pairs, every test array (rows, n_space), read from JSON as a bundle's is."""
    pairs = [
        {
            "id": spec.id,
            "train": list(spec.train),
            "test": spec.test,
            "metrics": list(spec.metrics),
            "shape": [rows, n_space],
            "start_index": 0,
        }
        for spec in cv.CTF_PAIRS
    ]
    document = {"dataset": "synthetic", "k_short": k, "k_long": k, "modes": modes, "pairs": pairs}
    return CtfManifest.from_json(document, "synthetic manifest")


def shapes_manifest(shapes: Mapping[str, tuple[int, int]]) -> CtfManifest:
    """A manifest of test arrays with these (time steps, sensors) shapes and nothing else the
    submission intake reads."""
    pairs = tuple(
        CtfPair(id=i, train=(), test=name, metrics=(), start_index=0, shape=shape)
        for i, (name, shape) in enumerate(shapes.items(), start=1)
    )
    return CtfManifest(dataset="shapes", k_short=1, k_long=1, modes=1, pairs=pairs)


def noisy_copy(truth: dict[str, np.ndarray], seed: int, level: float) -> dict[str, np.ndarray]:
    """A float32 prediction: each truth array plus `level` × standard normal noise."""
    rng = np.random.default_rng(seed)
    return {
        name: (array + level * rng.standard_normal(array.shape)).astype(np.float32)
        for name, array in truth.items()
    }


def write_tiny_truth(root: Path, secret: str) -> tuple[str, dict, dict[str, np.ndarray]]:
    """Build and write a TINY_LAYOUT bundle under root: (truth URL, manifest, truth as numpy)."""
    from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
    from seisctf.scoring.ctf import open_truth

    truth_url = str(root / "truth.zarr")
    built = build_bundle(smooth_wavefield(), TINY_LAYOUT, secret)
    write_bundle(
        built, StoreLocation(root / "public.zarr"), StoreLocation(truth_url), secret, quiet=True
    )
    manifest, _, truth = open_truth(StoreLocation(truth_url))
    return truth_url, manifest, {name: array.compute() for name, array in truth.items()}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    server = start_s3(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    stop_s3(server)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on loopback for the whole run: its URL
    (postgresql://postgres@127.0.0.1:PORT/postgres, trusted). Its folder is made in /tmp, where
    the postgres user can reach it, and removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="seisctf-postgres-"))
    try:
        server = start_postgres(directory)
        try:
            yield server.url
        finally:
            stop_postgres(server)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def s3_bucket(s3_server, request):
    """A fresh bucket per test: returns its s3:// URL."""
    name = "t-" + "".join(c for c in request.node.name.lower() if c.isalnum())[:40]
    fs = s3_server.filesystem()
    if not fs.exists(name):
        fs.mkdir(name)
    return f"s3://{name}"


@pytest.fixture(scope="session")
def dask_cluster():
    """A real `dask scheduler` + two `dask worker` processes on loopback."""
    cluster = start_dask_cluster(n_workers=2)
    yield cluster
    stop_dask_cluster(cluster)


@pytest.fixture(scope="session")
def dask_cluster_one_worker():
    cluster = start_dask_cluster(n_workers=1)
    yield cluster
    stop_dask_cluster(cluster)


@pytest.fixture(scope="session")
def embedded_demo(tmp_path_factory) -> tuple[Path, str]:
    """`seisctf demo` of the global dataset (DEMO_SIZES, TINY_LAYOUT) in a process of its own on
    its embedded cluster, run once for the tests that only read what it wrote: (its workdir, the
    layout file it was given). Its stdout is in workdir/demo-stdout.txt."""
    root = tmp_path_factory.mktemp("embedded-demo")
    layout = root / "tiny.yaml"
    layout.write_text(TINY_LAYOUT_YAML)
    workdir = root / "demo"
    argv = ["demo", "--workdir", str(workdir), *DEMO_SIZES]
    run = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *argv, "--layout", str(layout), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    (workdir / "demo-stdout.txt").write_text(run.stdout)
    return workdir, str(layout)


def on_one_and_two_workers(run: Callable[[Path], T], root: Path) -> tuple[T, T]:
    """(run(root / "1worker"), run(root / "2workers")), each on its own embedded LocalCluster
    of that many worker processes: both sides of a worker-count comparison in one test."""
    from seisctf.cluster import dask_client

    results = []
    for n_workers, name in ((1, "1worker"), (2, "2workers")):
        (root / name).mkdir(parents=True)
        with dask_client(n_workers=n_workers, memory_limit="2GiB", quiet=True):
            results.append(run(root / name))
    return results[0], results[1]


@pytest.fixture(scope="module", params=[1, 2], ids=["1worker", "2workers"])
def local_cluster_address(request):
    """An embedded LocalCluster of worker processes, as seisctf makes it, with 1 or 2 workers,
    started once per module: its scheduler address (no client is active meanwhile)."""
    from seisctf.cluster import embedded_cluster

    with embedded_cluster(n_workers=request.param, memory_limit="2GiB") as address:
        yield address


@pytest.fixture
def local_client(local_cluster_address):
    """The active client of `local_cluster_address`, for this test only: the module's other
    tests run on the local threaded scheduler whatever their order."""
    from seisctf.cluster import dask_client

    with dask_client(local_cluster_address, quiet=True) as client:
        yield client
