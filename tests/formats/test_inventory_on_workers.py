"""On a cluster the client neither reads nor parses StationXML: a worker reads the files and
keeps them, one task on a worker checks the traces against them, and the block tasks of a
response removal get their station's part from tasks on the workers (`inventory_checks`); the
store holds the inventory's metadata all the same. A file the workers cannot see is read by
the client and sent to them once."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import obspy
import pytest
import xarray as xr
from distributed import Client
from mounts import namespace_requirement

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import dask_client
from seisctf.formats.obspy_archive import inventory_checks
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

OBSPY = __import__("pathlib").Path(obspy.__file__).parent
I59_DATA = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.mseed"
I59_XML = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.xml"


def _parsed_here() -> int:
    """The inventories parsed whole or kept in pieces (`stationxml_subsets`) in this process."""
    return len(inventory_checks._PARSED) + len(inventory_checks._PIECES)


def _forget() -> None:
    inventory_checks._PARSED.clear()
    inventory_checks._PIECES.clear()


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # `client.run` of `_parsed_here`


def _not_here(source: StoreLocation) -> bytes:
    raise AssertionError(f"the client read {source.url}")


def test_stationxml_is_parsed_on_the_workers_not_the_client(tmp_path, dask_cluster, monkeypatch):
    monkeypatch.setattr(inventory_checks, "read_input", _not_here)  # here, not on the workers
    _forget()
    out = tmp_path / "i59.zarr"
    with Client(dask_cluster.address) as client:
        client.run(_forget)
        report = ingest_waveforms(
            [str(I59_DATA)],
            StoreLocation(out),
            inventories=[str(I59_XML)],
            remove_response="VEL",
            quiet=True,
        )
        on_workers = client.run(_parsed_here)
    assert _parsed_here() == 0  # the client read neither the bytes nor an Inventory
    assert sum(on_workers.values()) >= 1, on_workers
    assert report.problems == ()
    # The metadata and the removal are the inventory's (obspy's own reading of it).
    channel = obspy.read_inventory(str(I59_XML))[0][0][0]
    ds = storage.open_dataset(StoreLocation(str(out)))
    station = ds.sel(station="IM.I59H1")
    assert float(station[cv.LATITUDE]) == channel.latitude
    assert float(station["elevation"]) == channel.elevation
    meta = ds.attrs["channel_metadata"]["IM.I59H1"]["BDF"]
    assert meta["sensitivity"] == pytest.approx(channel.response.instrument_sensitivity.value)
    trace = obspy.read(str(I59_DATA))[0]
    trace.remove_response(obspy.read_inventory(str(I59_XML)), output="VEL",
                          pre_filt=ds.attrs["response_removed"]["pre_filt"],
                          water_level=ds.attrs["response_removed"]["water_level"])  # fmt: skip
    stored = ds["data"].sel(station="IM.I59H1", channel="BDF").values[: trace.stats.npts]
    np.testing.assert_allclose(stored, trace.data.astype(np.float32), rtol=1e-5, atol=1e-12)


def _dask(*argv: str, log: Path, hidden: Path | None = None) -> subprocess.Popen:
    """`dask ARGV`, with `hidden` an empty tmpfs in a mount namespace of its own. The shell
    execs dask (the process returned is dask's, so terminating it stops dask, not only a shell
    whose dask child would outlive the test)."""
    command = "exec " + shlex.join([str(Path(sys.executable).with_name("dask")), *argv])
    if hidden is not None:
        command = f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(hidden))} && {command}"
    with open(log, "w") as output:
        return subprocess.Popen(["unshare", "-m", "sh", "-c", command], stdout=output,
                                stderr=subprocess.STDOUT)  # fmt: skip


@pytest.mark.skipif(namespace_requirement() is not None, reason=str(namespace_requirement()))
def test_stationxml_the_workers_cannot_see_is_sent_from_the_client(tmp_path):
    """The worker's view of the disk lacks the inventory's folder (a tmpfs over it): the ingest
    reads it here and makes the same store as without a cluster."""
    hidden = tmp_path / "client_only"
    hidden.mkdir()
    inventory = hidden / I59_XML.name
    shutil.copyfile(I59_XML, inventory)
    expected = ingest_waveforms(
        [str(I59_DATA)],
        StoreLocation(tmp_path / "local.zarr"),
        inventories=[str(inventory)],
        quiet=True,
    )
    file = tmp_path / "scheduler.json"
    processes = [_dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                       "--scheduler-file", str(file), log=tmp_path / "scheduler.log")]  # fmt: skip
    processes.append(_dask("worker", "--scheduler-file", str(file), "--nthreads", "1",
                           "--no-dashboard", "--host", "127.0.0.1", log=tmp_path / "worker.log",
                           hidden=hidden))  # fmt: skip
    try:
        with Client(scheduler_file=str(file), timeout="60s") as client:
            client.wait_for_workers(1, timeout=60)
            assert not any(client.run(Path.exists, inventory).values())  # hidden there
            address = client.scheduler.address
        with dask_client(scheduler=address, quiet=True):
            report = ingest_waveforms(
                [str(I59_DATA)],
                StoreLocation(tmp_path / "remote.zarr"),
                inventories=[str(inventory)],
                quiet=True,
            )
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)
    assert report.problems == expected.problems == ()
    local, remote = (storage.open_dataset(StoreLocation(str(tmp_path / f"{name}.zarr")))
                     for name in ("local", "remote"))  # fmt: skip
    assert remote.attrs["channel_metadata"] == local.attrs["channel_metadata"]
    xr.testing.assert_identical(remote.load(), local.load())
