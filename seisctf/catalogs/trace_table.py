"""The per-trace metadata of an event-window store as a pandas table.

Every per-trace coordinate (and per-trace data variable other than the waveforms) is a column
under its SeisBench name; text comes back as Python `str` (zarr's variable-length strings
arrive as NumPy's StringDType). The columns are read with Dask from the lazily opened store:
a few 1-D arrays, small next to the waveforms, so the table is eager.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv
from seisctf.cluster import compute


def per_trace_names(ds: xr.Dataset) -> list[str]:
    """Names of the store's 1-D per-trace variables and coordinates (store order)."""
    return [
        str(name)
        for name, variable in ds.variables.items()
        if variable.dims == (cv.TRACE,) and name != cv.TRACE
    ]


def as_column(values: np.ndarray) -> np.ndarray:
    """Text as object arrays of `str`; numbers unchanged."""
    if values.dtype.kind in "TU":  # NumPy text: its Python objects are str already
        return values.astype(object)
    if values.dtype == object:
        return np.array([str(v) for v in values.tolist()], dtype=object)
    return values


def read_trace_table(
    ds: xr.Dataset, columns: Sequence[str] | None = None, *, quiet: bool = True
) -> pd.DataFrame:
    """A DataFrame with one row per trace (store order) and the given (default: all) per-trace
    columns that the store has."""
    available = per_trace_names(ds)
    names = [c for c in (columns or available) if c in available]
    arrays = compute(*[ds[name].data for name in names], label="read metadata", quiet=quiet)
    return pd.DataFrame(
        {name: as_column(np.asarray(values)) for name, values in zip(names, arrays, strict=True)},
        index=pd.RangeIndex(ds.sizes[cv.TRACE]),
    )
