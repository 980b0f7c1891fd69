"""Storage credentials never travel inside a Dask graph, through the CLI against a SeaweedFS
that checks signatures (an identity whose key and secret appear nowhere else).

Every task the scheduler receives is pickled as distributed pickles it for a worker
(tests/graph_probe.py, a scheduler preload) and searched for the key and the secret. The
embedded cluster's workers get the credentials given on the command line from their
environment at start, so an ingest to S3, a score and a picker from S3 still work; a cluster
given by address gets none (one line says which its workers need), so its workers without
credentials of their own cannot read the bucket. The Python API, given a plain dict holding
the credentials, keeps them out of its graphs too; run without a cluster, its tasks (threads of
this process) take them from the dict."""

from __future__ import annotations

import json
import os
import pickle
import secrets
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import obspy
import pandas as pd
import pytest
import s3fs
import xarray as xr
from conftest import noisy_copy, write_tiny_truth
from das_vendor_files import write_prodml
from distributed import Client
from distributed.protocol.pickle import dumps
from event_window_fixtures import write_picking_windows
from graph_probe import PROBE_FILE_ENV, read_records
from servers import S3_KEY, start_dask_cluster, start_s3, stop_dask_cluster, stop_s3
from submission_writers import write_zarr

from seisctf import s3, storage
from seisctf.baselines.stalta import stalta_picks
from seisctf.build.engine import build_file
from seisctf.cluster import active_client
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

TESTS = Path(__file__).resolve().parent
SEISCTF = [sys.executable, "-m", "seisctf.cli"]
TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"
MSEED_FILES = sorted(TSINDEX.rglob("*.mseed"))  # CU.TGUH.00, IU.ANMO.10, IU.COLA.10 BHZ
KEY = f"PROBEKEY{secrets.token_hex(6).upper()}"
SECRET = secrets.token_urlsafe(30)
BUCKET = "guarded"


@pytest.fixture(scope="module")
def guarded_s3(tmp_path_factory):
    """SeaweedFS that checks every request's signature against two identities: the tests' key
    (the server's readiness probe uses it) and `KEY`/`SECRET`, which only the commands get."""
    directory = tmp_path_factory.mktemp("guarded-s3")
    actions = ["Admin", "Read", "Write", "List", "Tagging"]
    identities = [
        {"name": name, "credentials": [{"accessKey": key, "secretKey": secret}], "actions": actions}
        for name, key, secret in (("tests", S3_KEY, S3_KEY), ("probe", KEY, SECRET))
    ]
    (directory / "s3.json").write_text(json.dumps({"identities": identities}))
    server = start_s3(directory / "data", options=[f"-s3.config={directory / 's3.json'}"])
    try:
        server.filesystem().mkdir(BUCKET)
        yield server
    finally:
        stop_s3(server)


def credential_options(server) -> list[str]:
    return [
        f"--storage-option=endpoint_url={server.endpoint_url}",
        f"--storage-option=key={KEY}",
        f"--storage-option=secret={SECRET}",
    ]


def seisctf(*argv: str, probe: Path) -> subprocess.CompletedProcess:
    """The command in its own process, with no AWS credentials in its environment and
    `graph_probe` preloaded into any scheduler it starts, writing to `probe`."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "SEISCTF_SCHEDULER", "SEISCTF_CLUSTER"))
    }
    environment.update(
        {
            "PYTHONPATH": os.pathsep.join([str(TESTS), environment.get("PYTHONPATH", "")]),
            "DASK_DISTRIBUTED__SCHEDULER__PRELOAD": "graph_probe",
            PROBE_FILE_ENV: str(probe),
            "HOME": str(probe.parent),  # no ~/.aws
        }
    )
    return subprocess.run(
        [*SEISCTF, *argv], capture_output=True, text=True, env=environment, timeout=300
    )


def assert_no_credentials_in(probe: Path, least_tasks: int) -> None:
    """The probe saw at least `least_tasks` tasks, and none of their pickles holds the key or
    the secret (nor their pickled forms)."""
    tasks = read_records(probe)
    assert len(tasks) >= least_tasks, len(tasks)
    leaking = [index for index, task in enumerate(tasks) if carries_credentials(task)]
    assert leaking == [], f"{len(leaking)} of {len(tasks)} tasks carry the credentials"


def carries_credentials(pickled: bytes) -> bool:
    """Whether `pickled` holds the key or the secret (or their pickled forms)."""
    forbidden = [text.encode() for text in (KEY, SECRET)]
    forbidden += [pickle.dumps(text)[2:-1] for text in (KEY, SECRET)]  # a pickled str's bytes
    return any(text in pickled for text in forbidden)


def plain_credentials(server) -> dict:
    """Storage options as a Python caller writes them: a plain dict holding the key and secret."""
    return {"endpoint_url": server.endpoint_url, "key": KEY, "secret": SECRET}


def s3_objects(server, url: str) -> dict[str, bytes]:
    fs = server.filesystem()
    prefix = url.removeprefix("s3://").rstrip("/")
    return {key[len(prefix) + 1 :]: fs.cat(key) for key in fs.find(prefix)}


def data_objects(server, url: str) -> dict[str, bytes]:
    """A store's objects but its metadata and the manifest of its inputs (which name them)."""
    return {
        name: data
        for name, data in s3_objects(server, url).items()
        if not (name.endswith("zarr.json") or name.startswith("inputs/"))
    }


@pytest.fixture(scope="module")
def waveform_sources(guarded_s3) -> list[str]:
    """`MSEED_FILES` copied to the bucket: their URLs."""
    fs = guarded_s3.filesystem()
    for path in MSEED_FILES:
        fs.put(str(path), f"{BUCKET}/mseed/{path.name}")
    return [f"s3://{BUCKET}/mseed/{path.name}" for path in MSEED_FILES]


@pytest.fixture(scope="module")
def in_process_ingest(guarded_s3, waveform_sources, tmp_path_factory) -> dict[str, bytes]:
    """The data objects of `ingest_waveforms` of `waveform_sources` into the bucket given a plain
    dict of credentials, run without a cluster (its tasks are threads of this process) and with
    no AWS credentials in the environment: the tasks can only take them from the dict."""
    url = f"s3://{BUCKET}/in-process.zarr"
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("AWS_")]:
            patch.delenv(name)
        patch.setenv("HOME", str(tmp_path_factory.mktemp("no-aws-home")))  # no ~/.aws
        assert active_client() is None
        options = plain_credentials(guarded_s3)
        ingest_waveforms(waveform_sources, StoreLocation(url, options), quiet=True)
    return data_objects(guarded_s3, url)


def test_ingest_to_s3_on_the_embedded_cluster_sends_no_credentials(
    guarded_s3, waveform_sources, in_process_ingest, tmp_path
):
    out = f"s3://{BUCKET}/ingested.zarr"
    probe = tmp_path / "ingest.probe"
    result = seisctf(
        "ingest", "waveforms", *waveform_sources, "--out", out, *credential_options(guarded_s3),
        "--quiet", probe=probe,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # the embedded cluster: nothing to say about credentials
    assert_no_credentials_in(probe, least_tasks=len(MSEED_FILES))
    assert in_process_ingest and data_objects(guarded_s3, out) == in_process_ingest


@pytest.fixture(scope="module")
def scoring_stores(guarded_s3, tmp_path_factory):
    """A tiny truth bundle and a noisy submission, locally and copied to the bucket: (local
    truth, local submission, S3 truth, S3 submission)."""
    root = tmp_path_factory.mktemp("scoring")
    truth_url, _, truth = write_tiny_truth(root, "credentials-test-secret")
    submission = write_zarr(noisy_copy(truth, seed=3, level=0.2), root / "submission.zarr")
    fs = guarded_s3.filesystem()
    urls = []
    for local in (Path(truth_url), submission):
        fs.put(str(local), f"{BUCKET}/scoring/{local.name}", recursive=True)
        urls.append(f"s3://{BUCKET}/scoring/{local.name}")
    return truth_url, str(submission), *urls


def test_score_from_s3_on_the_embedded_cluster_sends_no_credentials(scoring_stores, guarded_s3,
                                                                    tmp_path):  # fmt: skip
    truth, submission, s3_truth, s3_submission = scoring_stores
    probe = tmp_path / "score.probe"
    remote = seisctf("score", "ctf", "--truth", s3_truth, "--submission", s3_submission,
                     *credential_options(guarded_s3), "--quiet", probe=probe)  # fmt: skip
    assert remote.returncode == 0, remote.stderr
    assert_no_credentials_in(probe, least_tasks=20)
    local = seisctf("score", "ctf", "--truth", truth, "--submission", submission, "--quiet",
                    probe=tmp_path / "local.probe")  # fmt: skip
    assert local.returncode == 0, local.stderr
    scores = [json.loads(run.stdout)["scores"] for run in (remote, local)]
    assert scores[0] == scores[1] and np.isfinite(list(scores[0].values())).all()


def probed_cluster(folder: Path, key: str, secret: str):
    """A `dask scheduler` with the probe preloaded and a worker whose environment holds `key`
    and `secret` as its AWS credentials (as a remote machine's set-up gives them; empty: none),
    and no ~/.aws: yields (address, the probe's file)."""
    probe = folder / "tasks.probe"
    environment = {
        "AWS_ACCESS_KEY_ID": key,
        "AWS_SECRET_ACCESS_KEY": secret,
        "HOME": str(folder),
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        PROBE_FILE_ENV: str(probe),
    }
    cluster = start_dask_cluster(
        n_workers=1, environment=environment, scheduler_options=["--preload", "graph_probe"]
    )
    yield cluster.address, probe
    stop_dask_cluster(cluster)


@pytest.fixture(scope="module")
def cluster_without_credentials(tmp_path_factory):
    yield from probed_cluster(tmp_path_factory.mktemp("remote-probe"), "", "")


@pytest.fixture(scope="module")
def cluster_with_credentials(tmp_path_factory):
    yield from probed_cluster(tmp_path_factory.mktemp("credentialed-probe"), KEY, SECRET)


def test_a_cluster_given_by_address_gets_no_credentials_and_says_which_it_needs(
    scoring_stores, guarded_s3, cluster_without_credentials, tmp_path
):
    """The credentials stay with the command: its own requests (the truth's metadata) work,
    the worker's reads of the chunks find no credentials of its own."""
    _, _, s3_truth, s3_submission = scoring_stores
    address, probe = cluster_without_credentials
    result = seisctf("score", "ctf", "--truth", s3_truth, "--submission", s3_submission,
                     *credential_options(guarded_s3), "--scheduler", address, "--quiet",
                     probe=tmp_path / "unused.probe")  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3 and len(lines) == 2, result.stderr
    assert lines[0].startswith("seisctf: storage credentials given as options are not sent")
    assert "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY in its environment" in lines[0]
    assert "profile=NAME" in lines[0] and "instance role" in lines[0]
    assert lines[1].startswith(f"seisctf: invalid input: {s3_truth}: no S3 credentials for ")
    assert_no_credentials_in(probe, least_tasks=1)


def test_credentials_at_any_depth_stay_out_of_pickles(guarded_s3):
    """Every credential option, top-level or in client_kwargs, is left behind when the options,
    or a filesystem made from them, are pickled; this process's own requests still use them."""
    given = [f"endpoint_url={guarded_s3.endpoint_url}", f"key={KEY}", f"secret={SECRET}"]
    given += ["token=", "client_kwargs.region_name=us-east-1"]
    options = storage.parse_storage_options(given)
    url = f"s3://{BUCKET}/probe.txt"
    fs = s3.WatchedS3FileSystem(**StoreLocation(url, options).options, skip_instance_cache=True)
    fs.pipe(url, b"written with the held credentials")
    for carrier in (options, fs, {"deep": [options]}):
        pickled = pickle.dumps(carrier)
        assert KEY.encode() not in pickled and SECRET.encode() not in pickled
    assert pickle.loads(pickle.dumps(options)) == {
        "endpoint_url": guarded_s3.endpoint_url,
        "client_kwargs": {"region_name": "us-east-1"},
    }
    assert s3.credentials_environ(options) == {
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": "",
    }
    nested = {"client_kwargs": {"aws_access_key_id": KEY, "aws_secret_access_key": SECRET}}
    public, held = s3.split_credentials({**nested, "anon": False})
    assert public == {"client_kwargs": {}, "anon": False} and held == nested


def test_stores_opened_after_other_code_registered_plain_s3fs_keep_credentials_out(
    guarded_s3, request
):
    """Code in the same process registers plain s3fs for s3:// (fsspec's registry is global to
    the process; a test's clean-up once did): a store seisctf opens after that, given a plain
    dict of credentials, still has none in its graph (pickled as distributed pickles a task),
    and reads back what was written."""
    fsspec.register_implementation("s3", s3fs.S3FileSystem, clobber=True)
    request.addfinalizer(
        lambda: fsspec.register_implementation("s3", s3.WatchedS3FileSystem, clobber=True)
    )
    url = f"s3://{BUCKET}/after-plain-s3fs.zarr"
    values = np.arange(24, dtype=np.float32).reshape(3, 8)
    options = s3.held_apart(plain_credentials(guarded_s3))
    written = xr.Dataset({"values": (("station", "time"), values)}).chunk({"time": 4})
    storage.write_dataset(written, StoreLocation(url, options), quiet=True)
    opened = storage.open_dataset(StoreLocation(url, options))
    graph = dict(opened["values"].data.__dask_graph__())
    assert len(graph) >= 2
    assert not any(carries_credentials(dumps(task)) for task in graph.values())
    np.testing.assert_array_equal(opened["values"].values, values)


def put_das_files(server, folder: Path) -> np.ndarray:
    """Two PRODML files, contiguous at 50 Hz, written to `folder` and copied to the bucket's
    `das/`: their values (time x distance) as the store holds them (float32)."""
    rng = np.random.default_rng(5)
    start = np.datetime64("2024-01-02T03:04:05", "ns")
    parts = [rng.standard_normal((200, 8)) for _ in range(2)]
    for index, values in enumerate(parts):
        path = write_prodml(folder / f"part{index}.h5", values, start + index * 4_000_000_000, 50.0)
        server.filesystem().put(str(path), f"{BUCKET}/das/{path.name}")
    return np.vstack(parts).astype(np.float32)


def test_the_python_api_keeps_a_plain_dicts_credentials_out_of_graphs(
    guarded_s3, waveform_sources, in_process_ingest, cluster_with_credentials, tmp_path
):
    """`ingest_waveforms` and a recipe build (`build_file`, a DAS source), given a plain dict
    of credentials, on a cluster whose worker has the credentials in its environment: both
    done (the ingest's chunks as the in-process run's, the DAS store holding the files'
    values), and no task carries the key or the secret."""
    address, probe = cluster_with_credentials
    out = f"s3://{BUCKET}/python-api.zarr"
    das_values = put_das_files(guarded_s3, tmp_path)
    recipe = tmp_path / "recipe.yaml"
    built = f"s3://{BUCKET}/built/das.zarr"
    recipe.write_text(
        f"recipe: 1\nsource:\n  das_files:\n    sources: ['s3://{BUCKET}/das/']\n"
        f"    store: s3://{BUCKET}/raw/das.zarr\noutputs:\n  store: {{url: {built}}}\n"
    )
    with Client(address):
        ingest_waveforms(
            waveform_sources, StoreLocation(out, plain_credentials(guarded_s3)), quiet=True
        )
        context = build_file(recipe, storage_options=plain_credentials(guarded_s3), quiet=True)
    assert data_objects(guarded_s3, out) == in_process_ingest
    assert context.written == [built]
    stored = xr.open_zarr(built, storage_options=guarded_s3.storage_options)
    np.testing.assert_array_equal(stored["strain_rate"].values, das_values)
    assert_no_credentials_in(probe, least_tasks=len(MSEED_FILES) + 2)


def test_picks_from_s3_on_the_embedded_cluster_send_no_credentials(guarded_s3, tmp_path):
    """`seisctf pick stalta` of a store in the bucket: its pick tasks carry no credentials, and
    its picks are those of the same store picked from disk in this process."""
    local = str(tmp_path / "windows.zarr")
    write_picking_windows(local)
    guarded_s3.filesystem().put(local, f"{BUCKET}/picking/windows.zarr", recursive=True)
    probe = tmp_path / "picks.probe"
    out = tmp_path / "picks.csv"
    result = seisctf("pick", "stalta", f"s3://{BUCKET}/picking/windows.zarr", "--out", str(out),
                     "--tune-split", "none", *credential_options(guarded_s3), "--quiet",
                     probe=probe)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert_no_credentials_in(probe, least_tasks=2)
    expected = tmp_path / "expected.csv"
    stalta_picks(StoreLocation(local), StoreLocation(expected), tune_split=None, quiet=True)
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(expected))
