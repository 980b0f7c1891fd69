"""Event-window stores on an HTTPS S3 endpoint whose certificate a private CA issued (an
institution's MinIO or Ceph): the window reader's own connections trust what s3fs's client
trusts, the CA named by `client_kwargs["verify"]` or by `AWS_CA_BUNDLE`, and name the object
and the certificate failure when nothing does; the command line says at once, as bad input,
what to set. A real SeaweedFS with an HTTPS listener; the samples compared with SeisBench's own
on the folder the store was ingested from."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pytest
from event_window_fixtures import assert_same_batches, write_training_seisbench
from event_window_fixtures import loader_batches as batches
from event_window_fixtures import seisbench_original as original
from servers import LOOPBACK, S3_KEY, https_options, start_s3, stop_s3

from seisctf.catalogs import seisbench_dataset
from seisctf.catalogs.byte_ranges import SignedRanges
from seisctf.formats.seisbench.ingest import ingest_seisbench
from seisctf.location import StoreLocation

logging.getLogger("seisbench").setLevel(logging.ERROR)

STORE = "s3://training/training.zarr"


@pytest.fixture(scope="module")
def https_endpoint(tmp_path_factory):
    """A SeaweedFS serving S3 over HTTPS too: (its HTTPS endpoint URL, the CA's PEM file)."""
    directory = tmp_path_factory.mktemp("seaweedfs-https")
    options, port, authority = https_options(directory / "tls")
    server = start_s3(directory / "data", options=options)
    yield f"https://{LOOPBACK}:{port}", str(authority)
    stop_s3(server)


def https_options_for(endpoint: str, **client_kwargs) -> dict:
    # A fresh filesystem each time (seisctf's s3fs class, as "s3" URLs open): fsspec's cache
    # would hand back a client made before an environment variable the test sets.
    options = {"endpoint_url": endpoint, "key": S3_KEY, "secret": S3_KEY}
    return {**options, "client_kwargs": client_kwargs, "skip_instance_cache": True}


@pytest.fixture(scope="module")
def training(https_endpoint, tmp_path_factory):
    """The SeisBench folder, and its store written over HTTPS (s3fs trusting the CA)."""
    endpoint, authority = https_endpoint
    folder = write_training_seisbench(tmp_path_factory.mktemp("training"))
    options = https_options_for(endpoint, verify=authority)
    fsspec.filesystem("s3", **options).mkdir("training")
    ingest_seisbench(str(folder), StoreLocation(STORE, options), shard_traces=8, quiet=True)
    return folder


def test_the_ca_in_client_kwargs_is_trusted_in_this_process_and_forked_workers(
    https_endpoint, training
):
    endpoint, authority = https_endpoint
    dataset = seisbench_dataset(STORE, https_options_for(endpoint, verify=authority))
    theirs = original(training)
    np.testing.assert_array_equal(dataset.get_waveforms(), theirs.get_waveforms())
    assert_same_batches(batches(theirs, 5, 2), batches(dataset, 5, 2))


def test_the_ca_in_aws_ca_bundle_is_trusted(https_endpoint, training, monkeypatch):
    endpoint, authority = https_endpoint
    monkeypatch.setenv("AWS_CA_BUNDLE", authority)
    dataset = seisbench_dataset(STORE, https_options_for(endpoint))
    np.testing.assert_array_equal(
        dataset.get_waveforms([3, 40, 7]), original(training).get_waveforms([3, 40, 7])
    )


def test_an_untrusted_certificate_is_an_error_naming_the_object_unless_verify_is_off(
    https_endpoint, training, monkeypatch
):
    endpoint, authority = https_endpoint
    for variable in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(variable, raising=False)
    trusted = fsspec.filesystem("s3", **https_options_for(endpoint, verify=authority))
    shard = sorted(trusted.find(STORE.removeprefix("s3://") + "/waveforms/c"))[0]
    head = trusted.cat_file(shard, start=0, end=64)
    # Signing is local: an s3fs that trusts nothing private still makes the URLs.
    untrusted = fsspec.filesystem("s3", **https_options_for(endpoint))
    (failed,) = SignedRanges(untrusted).read_many([shard], [0], [64])
    assert isinstance(failed, OSError) and shard in str(failed)
    assert "CERTIFICATE_VERIFY_FAILED" in str(failed)
    unchecked = fsspec.filesystem("s3", **https_options_for(endpoint, verify=False))
    assert SignedRanges(unchecked).read(shard, 0, 64) == head
    missing = fsspec.filesystem("s3", **https_options_for(endpoint, verify=os.devnull + ".pem"))
    with pytest.raises(OSError, match="CA bundle"):
        SignedRanges(missing).read(shard, 0, 64)


def seisctf(*argv: str, environment: dict[str, str]) -> subprocess.CompletedProcess:
    """The `seisctf` console script, as a user runs it."""
    command = [str(Path(sys.executable).parent / "seisctf"), *argv]
    return subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_command_line_names_an_untrusted_certificate_at_once_and_reads_with_the_ca(
    https_endpoint, training, tmp_path
):
    endpoint, authority = https_endpoint
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE")
    }
    options = [f"--storage-option=endpoint_url={endpoint}", f"--storage-option=key={S3_KEY}"]
    options.append(f"--storage-option=secret={S3_KEY}")
    subset = [STORE, "--query", "index % 2 == 0", "--quiet", *options]

    refused = seisctf(
        "subset", *subset, "--out", str(tmp_path / "refused.zarr"), environment=environment
    )
    assert refused.returncode == 3, refused.stderr
    assert STORE in refused.stderr and "does not trust" in refused.stderr
    assert (
        "AWS_CA_BUNDLE" in refused.stderr
        and "--storage-option client_kwargs.verify" in refused.stderr
    )
    assert "retrying" not in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "refused.zarr").exists()

    out = tmp_path / "even.zarr"
    trusted = [*subset, f"--storage-option=client_kwargs.verify={authority}"]
    done = seisctf("subset", *trusted, "--out", str(out), environment=environment)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Task exception" not in done.stderr, done.stderr
    even = np.arange(len(original(training))) % 2 == 0
    np.testing.assert_array_equal(
        seisbench_dataset(str(out)).get_waveforms(), original(training).get_waveforms(mask=even)
    )
