"""Object storage that goes away in the middle of a write: a real SeaweedFS S3 server of this
module's own, killed (SIGKILL, by a scheduler plugin, the moment the first block of an ingest
into it is written) and started again on the same data folder and ports.

- Within seisctf's retries (botocore standard mode, `SEISCTF_S3_RETRIES`, default 10): the
  ingest goes on and its store equals, object for object, one written without an outage.
- Beyond them (one attempt, the server kept down): the command fails with exit code 1 and a
  one-line reason, no traceback, nothing marked complete; re-run once the server is back, it
  resumes and its store equals the undisturbed one.

Afterwards every chunk of every array decodes (no torn chunk, no half-written metadata).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import xarray as xr
import zarr
from faults import (
    KillOnFinished,
    decode_every_chunk,
    finish,
    is_marked_complete,
    kill_on_finished,
    remote_objects,
    run,
    seisctf_command,
    start,
)
from servers import S3Server, restart_s3, start_s3, stop_s3

from seisctf import conventions as cv
from seisctf import s3 as s3_settings
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

pytest_plugins = ("fault_fixtures",)
BUCKET = "outage"
# SeaweedFS keeps a folder entry where an array was deleted (the ingest's progress array), which
# zarr's listing of the group then reports; real S3 has no folders.
pytestmark = pytest.mark.filterwarnings("ignore:Object at ingest_progress is not recognized")


class RestartableS3:
    """This module's S3 server; `restart()` starts it again after a kill (same folder, ports)."""

    def __init__(self, directory: Path):
        self.server: S3Server = start_s3(directory)

    def restart(self) -> None:
        self.server = restart_s3(self.server)

    def options(self, **extra: str) -> list[str]:
        pairs = {**self.server.storage_options, **extra}
        return [f"--storage-option={key}={value}" for key, value in pairs.items()]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A SeaweedFS server of this module's own: stopping it disturbs no other test."""
    restartable = RestartableS3(tmp_path_factory.mktemp("seaweedfs-outage"))
    restartable.server.filesystem().mkdir(BUCKET)
    yield restartable
    stop_s3(restartable.server)


def ingest(archive: Path, store: str, s3: RestartableS3, scheduler: str, **options: str):
    return seisctf_command("ingest", "waveforms", str(archive), "--out", store,
                           *s3.options(**options), "--scheduler", scheduler, "--quiet")  # fmt: skip


@pytest.fixture(scope="module")
def reference(s3, restarting_cluster, miniseed_archive) -> dict[str, str]:
    """The objects of the store an undisturbed ingest writes to the server."""
    url = f"s3://{BUCKET}/reference.zarr"
    code, _, err = run(ingest(miniseed_archive, url, s3, restarting_cluster.address))
    assert code == 0, err
    return remote_objects(s3.server.filesystem(), url)


def assert_whole(url: str, s3: RestartableS3, reference: dict[str, str]) -> None:
    """The store at `url` is complete, every chunk decodes, and its objects equal the
    reference's; xarray opens it from its consolidated metadata."""
    options = s3.server.storage_options
    assert is_marked_complete(url, options)
    assert decode_every_chunk(url, options) > 0
    assert remote_objects(s3.server.filesystem(), url) == reference
    opened = xr.open_zarr(url, storage_options=options, consolidated=True)
    assert opened.attrs[cv.ATTR_COMPLETE] is True and opened["data"].shape[-1] == 2**21


def kill_server_mid_write(client, s3: RestartableS3, process) -> dict:
    """SIGKILL the S3 server when an ingest's block task has finished with others running;
    wait until it is dead. Returns what the plugin did."""
    plugin = KillOnFinished("ingest_block", pid=s3.server.process.pid, while_running=True)
    with kill_on_finished(client, plugin) as fired:
        kill = fired(process)
    s3.server.process.wait(timeout=60)
    assert process.poll() is None, "the ingest ended before the outage"
    return kill


@pytest.mark.slow
def test_an_outage_within_the_retries_is_ridden_through(
    s3, killable_cluster, miniseed_archive, reference
):
    url = f"s3://{BUCKET}/ridden-through.zarr"
    process = start(ingest(miniseed_archive, url, s3, killable_cluster.address))
    kill = kill_server_mid_write(killable_cluster.client, s3, process)
    assert kill["running"]  # block tasks were writing when the server went
    # `kill_server_mid_write` saw the ingest still running with the server dead; once the
    # server is back it may finish at any moment (checking it is still running here raced).
    s3.restart()
    code, _, err = finish(process)
    assert code == 0, err
    assert_whole(url, s3, reference)


@pytest.mark.slow
def test_an_outage_beyond_the_retries_fails_clearly_and_resumes(
    s3, killable_cluster, miniseed_archive, reference
):
    url = f"s3://{BUCKET}/resumed.zarr"
    # One retry per request (the option travels with the tasks to every worker).
    command = ingest(miniseed_archive, url, s3, killable_cluster.address,
                     **{"config_kwargs.retries.max_attempts": "1"})  # fmt: skip
    process = start(command)
    kill_server_mid_write(killable_cluster.client, s3, process)
    code, out, err = finish(process)  # the server stays down meanwhile
    assert code == 1, err
    assert "seisctf: storage unavailable:" in err and "re-run" in err
    assert s3.server.endpoint_url in err  # names the object it could not reach
    assert "Traceback" not in err and "wrote" not in out

    s3.restart()
    options = s3.server.storage_options
    assert not is_marked_complete(url, options)
    assert decode_every_chunk(url, options) > 0  # what it wrote before failing is whole
    group = zarr.open_group(url, mode="r", storage_options=options, use_consolidated=False)
    done = (group["ingest_progress"][...] != "").sum()
    assert 0 < done < group["ingest_progress"].size  # finished blocks kept for the re-run
    code, out, err = run(command)
    assert code == 0, err
    assert "wrote" in out
    assert_whole(url, s3, reference)


def test_s3_retries_are_configurable_and_given_options_win(monkeypatch):
    url = f"s3://{BUCKET}/x.zarr"
    default = StoreLocation(url, {"endpoint_url": "http://127.0.0.1:1"}).options
    assert default == {
        "endpoint_url": "http://127.0.0.1:1",
        "config_kwargs": {"retries": {"max_attempts": 10, "mode": "standard"}},
    }
    monkeypatch.setenv(s3_settings.S3_RETRIES_ENV, "3")
    assert StoreLocation(url).options["config_kwargs"]["retries"]["max_attempts"] == 3
    given = storage.parse_storage_options(["config_kwargs.retries.max_attempts=2"])
    merged = StoreLocation(url, given).options["config_kwargs"]["retries"]
    assert merged == {"max_attempts": 2, "mode": "standard"}
    assert StoreLocation("/local/store.zarr", given).options is None
    assert StoreLocation("gs://b/x.zarr", {"token": "anon"}).options == {"token": "anon"}
    monkeypatch.setenv(s3_settings.S3_RETRIES_ENV, "many")
    with pytest.raises(InvalidInput, match="SEISCTF_S3_RETRIES"):
        _ = StoreLocation(url).options
