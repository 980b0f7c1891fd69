"""Fixtures of the fault tests, a pytest plugin (`pytest_plugins = ("fault_fixtures",)` in the
test modules; not a conftest.py, which `from conftest import …` elsewhere would then reach): a
Dask cluster whose workers may be killed (their nannies start new ones), and small inputs for
every kind of job: a miniSEED archive, PRODML DAS files, a recipe, and a CTF bundle with
baseline submissions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_LAYOUT_YAML
from das_vendor_files import write_prodml
from faults import N_WORKERS, SECRET, Inputs
from servers import start_dask_cluster, stop_dask_cluster

# The recipe: a synthetic wavefield, a filter, noise (its input checkpointed to a scratch store),
# the store and a CTF bundle of the tiny layout.
RECIPE_YAML = """\
recipe: 1
name: reliability
source:
  synthetic_global:
    sensors: 64
    duration_s: 300
transforms:
  - butterworth:
      freqmax: 0.2
  - add_gaussian_noise:
      rms_fraction: 0.1
splits:
  ctf:
    layout: {layout}
outputs:
  store:
    url: wavefield.zarr
  ctf_bundle:
    public: public.zarr
    truth: truth.zarr
"""
BASELINES = ("zeros", "persistence", "mean")


@dataclass(frozen=True)
class Cluster:
    """A scheduler with nanny-managed workers, and the test's own client of it."""

    address: str
    client: object


@pytest.fixture(scope="session")
def restarting_cluster():
    """A real scheduler and two `dask worker` processes, each under a nanny that starts a new
    worker when one dies. Only for the tests that kill workers or storage (not shared with the
    others); the test's client is not the default one, so library calls in the test process
    keep to the local scheduler."""
    from distributed import Client

    cluster = start_dask_cluster(n_workers=N_WORKERS)
    client = Client(cluster.address, set_as_default=False)
    try:
        yield Cluster(cluster.address, client)
    finally:
        client.close()
        stop_dask_cluster(cluster)


@pytest.fixture
def killable_cluster(restarting_cluster):
    """The restarting cluster, with all its workers up (a previous test may have killed one)."""
    restarting_cluster.client.wait_for_workers(N_WORKERS, timeout=300)
    return restarting_cluster


def write_waveform_archive(root: Path, stations: int = 4, samples: int = 2**21) -> Path:
    """One STEIM2 miniSEED file per station (100 Hz random walk counts): `samples` samples are
    eight 2**18-sample blocks, so an ingest runs 16 block tasks of two blocks each."""
    import obspy

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    start = obspy.UTCDateTime("2021-03-04T00:00:00")
    for index in range(stations):
        counts = np.cumsum(rng.integers(-50, 51, samples)).astype(np.int32)
        header = {"network": "XR", "station": f"S{index:02d}", "location": "", "channel": "HHZ",
                  "starttime": start, "sampling_rate": 100.0}  # fmt: skip
        trace = obspy.Trace(counts, header)
        trace.write(str(root / f"XR.S{index:02d}.mseed"), format="MSEED", encoding="STEIM2",
                    reclen=4096)  # fmt: skip
    return root


def write_das_files(root: Path, files: int = 4, channels: int = 64) -> Path:
    """PRODML files of `channels` loci at 50 Hz, end to end, two time blocks each (a block of
    64 channels is 16384 samples)."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(12)
    samples = 2 * 16384
    start = np.datetime64("2024-01-02T03:04:05", "ns")
    for index in range(files):
        data = rng.standard_normal((samples, channels)).astype(np.float32)
        first = start + np.timedelta64(index * samples * 20_000_000, "ns")
        write_prodml(root / f"das_{index}.h5", data, first, 50.0)
    return root


@pytest.fixture(scope="session")
def miniseed_archive(tmp_path_factory) -> Path:
    return write_waveform_archive(tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="session")
def job_inputs(tmp_path_factory, miniseed_archive) -> Inputs:
    """Every job's inputs, made once (the bundle with the library, on the local scheduler)."""
    import dask

    from seisctf.baselines.ctf import write_baseline
    from seisctf.build import engine as recipes
    from seisctf.location import StoreLocation

    root = tmp_path_factory.mktemp("inputs")
    layout = root / "tiny.yaml"
    layout.write_text(TINY_LAYOUT_YAML)
    recipe = root / "recipe.yaml"
    recipe.write_text(RECIPE_YAML.format(layout=layout))
    bundle = root / "bundle"
    submissions = []
    with dask.config.set(scheduler="threads"):
        recipes.build_file(recipe, workdir=bundle, secret=SECRET, quiet=True)
        for model in BASELINES:
            path = bundle / f"{model}.zarr"
            public = StoreLocation(bundle / "public.zarr")
            write_baseline(model, public, StoreLocation(path), quiet=True)
            submissions.append(path)
    return Inputs(
        archive=miniseed_archive,
        das=write_das_files(root / "das"),
        recipe=recipe,
        truth=bundle / "truth.zarr",
        submissions=tuple(submissions),
    )
