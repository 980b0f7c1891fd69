"""Plugins of seisctf from another package, found through its entry points: CSV readings of
sensors into a store (an ingest), a constant gain (a transform), the peak error of a CTF
task relative to the truth's peak (a metric) and damped persistence (a baseline)."""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import storage
from seisctf.options import Location, option, options_schema
from seisctf.plugins.context import BuildContext
from seisctf.registry import BASELINES, INGESTS, TRANSFORMS, Metric


@dataclass(frozen=True)
class CsvReadingsOptions:
    path: Location = option(help="CSV file: one row a sample, one column a sensor")
    sampling_rate_hz: float = option(help="samples a second, Hz", exclusive_minimum=0)
    scale: float = option(1.0, "factor applied to every reading", exclusive_minimum=0)


@INGESTS.register("csv_readings", options=CsvReadingsOptions)
def ingest_csv_readings(
    context: BuildContext, *, path: str, sampling_rate_hz: float, scale: float = 1.0
) -> xr.Dataset:
    """CSV readings of sensors (rows: samples, columns: sensors) x `scale` -> a store."""
    readings = np.loadtxt(context.resolve(path), delimiter=",", ndmin=2) * scale
    dataset = xr.Dataset(
        {"data": (("time", "sensor"), readings.astype(np.float32))},
        coords={
            "time": np.arange(readings.shape[0]) / sampling_rate_hz,
            "sensor": np.arange(readings.shape[1]),
        },
    )
    store = context.location(context.require_source_url())
    dataset.to_zarr(store.url, mode="w", storage_options=store.options)
    storage.finish_group(store, {"sampling_rate_hz": sampling_rate_hz})
    return storage.open_dataset(store)


@dataclass(frozen=True)
class GainOptions:
    factor: float = option(help="the gain", exclusive_minimum=0)


@TRANSFORMS.register("gain", options=GainOptions, cheap=True)
def gain(data: xr.DataArray, *, factor: float) -> xr.DataArray:
    """Every sample times `factor`."""
    return data * factor


def peak_error(truth: da.Array, submission: da.Array) -> da.Array:
    """max |truth - submission| / max |truth| over the task's window."""
    return abs(truth - submission).max() / abs(truth).max()


@dataclass(frozen=True)
class NoOptions:
    """The metric takes no option."""


# An entry point may name a plugin object instead of a module that registers one.
PEAK_ERROR = Metric("peak_error", peak_error, options_schema(NoOptions), options_type=NoOptions)


@BASELINES.register("damped_persistence", family="persistence", library="seisctf-csv-readings")
def damped_persistence(pair, public, *, damping: float = 0.5):
    """The pair's last input row times `damping`, repeated over the test's rows (`pair`: a
    `seisctf.ctf_json.CtfPair`)."""
    last_row = public[pair.inputs[-1]][-1] * damping
    return da.broadcast_to(last_row.reshape(1, -1), pair.shape)
