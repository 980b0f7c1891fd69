"""On a cluster the client never parses StationXML: one task on a worker checks the traces
against it, and the block tasks of a response removal get their station's part from tasks
on the workers (`inventory_checks`); the store holds the inventory's metadata all the same."""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import obspy
import pytest
import xarray as xr
from distributed import Client

from seisctf import conventions as cv
from seisctf.recipes.ingest import inventory_checks
from seisctf.recipes.ingest.waveforms import ingest_waveforms

OBSPY = __import__("pathlib").Path(obspy.__file__).parent
I59_DATA = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.mseed"
I59_XML = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.xml"


def _parsed_here() -> int:
    return len(inventory_checks._PARSED)


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # `client.run` of `_parsed_here`


def test_stationxml_is_parsed_on_the_workers_not_the_client(tmp_path, dask_cluster):
    inventory_checks._PARSED.clear()
    out = tmp_path / "i59.zarr"
    with Client(dask_cluster.address) as client:
        client.run(inventory_checks._PARSED.clear)
        report = ingest_waveforms(
            [str(I59_DATA)], str(out), inventories=[str(I59_XML)], remove_response="VEL",
            quiet=True,
        )  # fmt: skip
        on_workers = client.run(_parsed_here)
    assert _parsed_here() == 0  # the client read the file's bytes, never an Inventory
    assert sum(on_workers.values()) >= 1, on_workers
    assert report.problems == ()
    # The metadata and the removal are the inventory's (obspy's own reading of it).
    channel = obspy.read_inventory(str(I59_XML))[0][0][0]
    ds = xr.open_zarr(str(out))
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
