"""A picking dataset's public bundle: its truth's event-window store without the labels of the
split it scores (the windows, trace names and splits kept), for `seisctf referee create` /
`add-dataset` to serve while the truth stays with the referee.

The labels are every per-trace column but the window's key, split, receiver and geometry
(`label_columns`, `KEPT`): the arrivals, `trace_category`, `source_*`, and whatever else may
tell whether a window holds an event (an SNR, a catalogue's weights, an original trace name).
Of the withheld split's traces they become NaN (text: ""); the other splits keep theirs
(training labels are what participants train on)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

# Per-trace columns a public bundle keeps for every trace: the submission key, the split, the
# receiver and the window's own geometry (what the waveforms show anyway). Any other column
# may label the window (the arrivals, `trace_category`, `source_*`, and also an SNR, a
# catalogue's weights or an original trace name encoding the window's kind), so it is withheld.
KEPT = frozenset(
    {
        cv.TRACE_NAME,
        cv.SPLIT_VAR,
        cv.TRACE_NPTS,
        cv.TRACE_GAP_FRACTION,
        cv.TRACE_SAMPLING_RATE,
        cv.TRACE_SOURCE_SAMPLING_RATE,
        cv.TRACE_CHUNK,
        cv.TRACE_COMPONENT_ORDER,
    }
)


def label_columns(names: Iterable[str]) -> list[str]:
    """Of per-trace column `names`, those a public bundle withholds: all but `KEPT` and the
    receiver's (`station_*`)."""
    return [name for name in names if name not in KEPT and not name.startswith("station_")]


def withheld(dataset: xr.Dataset, split: str = "test") -> xr.Dataset:
    """`dataset` (an event-window Dataset, per-trace values in memory) with the labels of the
    traces of `split` missing: NaN, or "" for text (module doc)."""
    if cv.SPLIT_VAR not in dataset.variables:
        raise InvalidInput("truth", f"has no per-trace {cv.SPLIT_VAR!r}: no split to withhold")
    hidden = np.asarray(dataset[cv.SPLIT_VAR].values, dtype=object) == split
    if not hidden.any():
        raise InvalidInput("truth", f"has no trace in split {split!r}")
    per_trace = [str(n) for n, value in dataset.variables.items() if value.dims == (cv.TRACE,)]
    replaced = {}
    for column in label_columns(per_trace):
        values = np.array(dataset[column].values, copy=True)
        if values.dtype.kind in "OUST":  # text (T: numpy's variable-width strings)
            values = values.astype(object)
            values[hidden] = ""
        else:
            values = values.astype(np.float64) if values.dtype.kind in "iub" else values
            values[hidden] = np.nan
        replaced[column] = (cv.TRACE, values, dataset[column].attrs)
    coords = {name: value for name, value in replaced.items() if name in dataset.coords}
    data = {name: value for name, value in replaced.items() if name not in dataset.coords}
    return dataset.assign_coords(coords).assign(data)


def write_public(
    truth: StoreLocation, public: StoreLocation, split: str = "test", quiet: bool = False
) -> None:
    """Write the public bundle of the event-window store `truth` at `public` (`withheld` of
    its `split`), laid out as `event_windows.write_event_windows` chooses for its size."""
    dataset = cv.validate_event_window_store(storage.open_dataset(truth), truth.url)
    per_trace = {n: v.load() for n, v in dataset.variables.items() if v.dims == (cv.TRACE,)}
    dataset = dataset.assign_coords(
        {n: v for n, v in per_trace.items() if n in dataset.coords}
    ).assign({n: v for n, v in per_trace.items() if n not in dataset.coords})
    event_windows.write_event_windows(
        withheld(dataset, split),
        public,
        label=f"write the public bundle of {truth.url}",
        quiet=quiet,
    )
