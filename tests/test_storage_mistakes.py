"""S3 mistakes a first user makes, through the CLI against the real SeaweedFS server: a bucket
that does not exist (written to or read from), no credentials, an endpoint nobody listens on.
Each is one line on stderr naming the URL or endpoint and what to do, no traceback, nothing
written; a wrong port says what it retries while retrying and gives up within seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import obspy
import pytest
from servers import CLUSTER_CREDENTIALS, free_port

from seisctf import s3
from seisctf.cli import EXIT_INVALID_INPUT, EXIT_STORAGE_UNAVAILABLE, main

ROOT = Path(__file__).resolve().parents[1]
SEISCTF = [sys.executable, "-m", "seisctf.cli"]
SMALL_SYNTH = ["synth", "global", "--sensors", "16", "--duration", "64", "--seed", "1"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """A one-file miniSEED archive: 60 s of one channel at 100 Hz."""
    folder = tmp_path_factory.mktemp("archive")
    header = {"network": "XX", "station": "S1", "channel": "HHZ", "sampling_rate": 100.0}
    trace = obspy.Trace(np.arange(6000, dtype=np.int32), header=header)
    trace.stats.starttime = obspy.UTCDateTime(2020, 1, 1)
    trace.write(str(folder / "a.mseed"), format="MSEED")
    return folder


def one_line(err: str) -> str:
    """The single line the command printed to stderr."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def bucket_exists(s3_server, bucket: str) -> bool:
    """Independently of seisctf: one HeadBucket through s3fs."""
    fs = s3_server.filesystem()
    fs.invalidate_cache()
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        return False
    return True


@pytest.mark.parametrize("verb", ["synth", "ingest"])
def test_writing_into_a_missing_bucket_names_it(verb, s3_server, dask_cluster, archive, capsys):
    bucket = f"nobucket-{verb}"
    url = f"s3://{bucket}/store.zarr"
    command = SMALL_SYNTH if verb == "synth" else ["ingest", "waveforms", str(archive)]
    common = [
        "--out",
        url,
        *s3_server.cli_options(),
        "--scheduler",
        dask_cluster.address,
        "--quiet",
    ]
    assert not bucket_exists(s3_server, bucket)
    code, out, err = run_cli([*command, *common], capsys)
    assert code == EXIT_INVALID_INPUT, err
    line = one_line(err)
    assert line.startswith(f"seisctf: invalid input: {url}: bucket {bucket} does not exist at ")
    assert s3_server.endpoint_url in line and "create it first" in line
    assert not bucket_exists(s3_server, bucket)  # nothing written, no bucket made
    assert out == ""


@pytest.mark.parametrize("verb", ["synth", "tasks"])
def test_a_missing_bucket_is_answered_before_any_cluster(verb, s3_server, archive, capsys):
    """The bucket is checked before the cluster starts: with `--scheduler` at a port where
    nothing listens, the answer is still the bucket's line, not the scheduler's, and quick."""
    url = "s3://nobucket-early/store.zarr"
    if verb == "synth":
        command = [*SMALL_SYNTH, "--out", url]
    else:
        command = ["tasks", url, "--public", "s3://nobucket-early/p.zarr", "--truth",
                   "s3://nobucket-early/t.zarr"]  # fmt: skip
    nowhere = f"tcp://127.0.0.1:{free_port()}"
    started = time.monotonic()
    code, out, err = run_cli(
        [*command, *s3_server.cli_options(), "--scheduler", nowhere, "--quiet"], capsys
    )
    elapsed = time.monotonic() - started
    assert code == EXIT_INVALID_INPUT, err
    assert f"{url}: bucket nobucket-early does not exist at " in one_line(err)
    assert elapsed < 8, elapsed  # no graph built, no cluster waited for (generous: shared CPU)
    assert not bucket_exists(s3_server, "nobucket-early") and out == ""


def test_reading_from_a_missing_bucket_names_it(s3_server, dask_cluster, tmp_path, capsys):
    url = "s3://nobucket-read/public.zarr"
    out_path = tmp_path / "persistence.zarr"
    code, _, err = run_cli(
        ["baseline", "persistence", "--public", url, "--out", str(out_path),
         *s3_server.cli_options(), "--scheduler", dask_cluster.address, "--quiet"],
        capsys,
    )  # fmt: skip
    assert code == EXIT_INVALID_INPUT, err
    line = one_line(err)
    assert f"{url}: bucket nobucket-read does not exist at {s3_server.endpoint_url}" in line
    assert not out_path.exists()


def test_reading_a_missing_store_in_a_bucket_names_it(
    s3_server, s3_bucket, dask_cluster, capsys, monkeypatch
):
    for name, value in CLUSTER_CREDENTIALS.items():  # as the cluster's workers have them
        monkeypatch.setenv(name, value)
    url = f"{s3_bucket}/never-written.zarr"
    code, _, err = run_cli(
        ["tasks", url, "--public", f"{s3_bucket}/p.zarr", "--truth", f"{s3_bucket}/t.zarr",
         *s3_server.endpoint_options(), "--scheduler", dask_cluster.address, "--quiet"],
        capsys,
    )  # fmt: skip
    assert code == EXIT_INVALID_INPUT, err
    assert f"{url}: no zarr group found there" in one_line(err)
    assert s3_server.filesystem().ls(s3_bucket, refresh=True) == []


def clean_environment(home: Path, **extra: str) -> dict[str, str]:
    """What a fresh shell of a user without AWS set-up has: no AWS_* variables, a HOME without
    ~/.aws, this checkout first on the import path."""
    home.mkdir(exist_ok=True)
    keep = {"PATH", "LANG", "LC_ALL", "TMPDIR"}
    env = {key: value for key, value in os.environ.items() if key in keep}
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.parametrize("direction", ["write", "read"])
def test_s3_without_credentials_says_how_to_give_them(
    direction, s3_server, s3_bucket, dask_cluster, archive, tmp_path
):
    url = f"{s3_bucket}/{direction}.zarr"
    endpoint = f"--storage-option=endpoint_url={s3_server.endpoint_url}"
    if direction == "write":
        command = ["ingest", "waveforms", str(archive), "--out", url]
    else:
        command = ["baseline", "persistence", "--public", url, "--out", str(tmp_path / "p.zarr")]
    result = subprocess.run(
        [*SEISCTF, *command, endpoint, "--scheduler", dask_cluster.address, "--quiet"],
        env=clean_environment(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == EXIT_INVALID_INPUT, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"seisctf: invalid input: {url}: no S3 credentials for ")
    flags = ("--storage-option key=", "--storage-option secret=", "--storage-option anon=true")
    for fragment in (s3_server.endpoint_url, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", *flags):
        assert fragment in line
    assert s3_server.filesystem().ls(s3_bucket, refresh=True) == []  # nothing written
    assert not (tmp_path / "p.zarr").exists()


class TimedLines:
    """A process's stderr read line by line as it comes, each with the time it arrived."""

    def __init__(self, process: subprocess.Popen):
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._reader.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            self.lines.append((time.monotonic(), line))

    def join(self) -> str:
        self._reader.join(timeout=30)
        return "".join(line for _, line in self.lines)


@pytest.mark.parametrize(("retries", "attempts"), [("2", 3), ("", s3.FIRST_CONTACT_ATTEMPTS)])
def test_a_wrong_endpoint_port_says_what_it_retries_and_gives_up_soon(
    retries, attempts, dask_cluster, archive
):
    """Nothing listens on the port. With `SEISCTF_S3_RETRIES=2` the request is tried 3 times;
    with the default 10 retries a refused first contact is still tried only 4 times: botocore's
    waits for 11 attempts are a minute on average, for 4 at most 7 s."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    url = "s3://somebucket/waveforms.zarr"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop(s3.S3_RETRIES_ENV, None)
    if retries:
        env[s3.S3_RETRIES_ENV] = retries
    process = subprocess.Popen(
        [*SEISCTF, "ingest", "waveforms", str(archive), "--out", url,
         f"--storage-option=endpoint_url={endpoint}",
         "--storage-option=key=k", "--storage-option=secret=s",
         "--scheduler", dask_cluster.address, "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = TimedLines(process)
    code = process.wait(timeout=300)
    ended = time.monotonic()
    err = lines.join()
    assert code == EXIT_STORAGE_UNAVAILABLE, err
    assert "Traceback" not in err
    retrying = [(t, line) for t, line in lines.lines if "does not answer" in line]
    assert len(retrying) == 1, err  # one line when the retries start, not one per attempt
    started, line = retrying[0]
    assert re.fullmatch(
        rf"seisctf: storage at {re.escape(endpoint)} does not answer \(connection refused\); "
        rf"retrying for up to {attempts} attempts \(at most \d+ s of waits\); nothing answered "
        r"there yet: is endpoint_url right\?\n",
        line,
    ), line
    assert ended - started < 40, err  # waits of at most 7 s, and the command's shutdown
    assert "seisctf: storage unavailable: EndpointConnectionError: " in err
    assert f"nothing answered at {endpoint}: check the endpoint_url storage option" in err


def test_a_local_file_error_is_not_taken_for_an_s3_mistake(s3_server):
    """A command with S3 URLs that fails on a local file keeps that error (and its traceback):
    an OS error naming a file is not S3's refusal."""
    options = s3_server.storage_options
    for error in (PermissionError(13, "Permission denied", "/local/out.json"),
                  FileNotFoundError(2, "No such file", "/local/in.csv")):  # fmt: skip
        assert s3.storage_mistake(error, ["s3://nobucket-local/x.zarr"], options) is None
    assert s3.storage_mistake(ValueError("x"), ["s3://nobucket-local/x.zarr"], options) is None
    # Without its cause (as from a worker), s3fs's refusal is checked against the bucket.
    mistake = s3.storage_mistake(
        PermissionError(13, "Access Denied."), ["s3://nobucket-local/x.zarr"], options
    )
    assert mistake is not None and "bucket nobucket-local does not exist" in str(mistake)
