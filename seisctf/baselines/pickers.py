"""Baseline pickers as Dask jobs over an event-window store, writing a pick table.

A job (`run_picker`) takes the traces of one split in store order and cuts them into tasks of
whole shards (the store's shard, else DEFAULT_TASK_TRACES windows; a function of the store only,
so the tasks, and every batch inside them, are the same on any number of workers). Each task
opens the store (`open_event_windows`), reads its windows and hands them to a picker: a picklable
callable `picker(windows, npts, sampling_rate_hz)` with `windows` (k, channel, sample) float32 in
the picker's `component_order`, `npts` (k,) valid samples per window, returning (k, …) float64,
per trace `[detection, p_time_s, s_time_s]` (NaN: no pick) or a stack of such rows.

The job reads `trace_name`, `split`, `trace_npts` and the waveforms, never the arrival labels:
a picker cannot see the truth of the traces it picks. The pickers: `seisctf.baselines.stalta`
(STA/LTA + AIC, tuned on a non-test split) and `seisctf.baselines.seisbench_picker` (any
SeisBench model with local weights).

Output (`write_picks`): the pick table (`seisctf.catalogs.pick_table`, CSV or Parquet by suffix,
written whole or not at all) and a sidecar `OUT.picker.json` with the picker's description (its
parameters, what they were tuned on); a Parquet table also carries it in its key-value metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import pick_table
from seisctf.catalogs.event_windows import open_event_windows, seisctf_version
from seisctf.catalogs.trace_table import read_trace_table
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

DEFAULT_TASK_TRACES = 256
ALL_SPLITS = "all"
SIDECAR_SUFFIX = ".picker.json"


class Picker(Protocol):
    """`picker(windows, npts, sampling_rate_hz)` (module doc), windows in `component_order`."""

    @property
    def component_order(self) -> str: ...

    def __call__(
        self, windows: np.ndarray, npts: np.ndarray, sampling_rate_hz: float, /
    ) -> np.ndarray: ...


@dataclass(frozen=True)
class StoreTraces:
    """The traces of one split of the event-window store at `store`: `positions` (store order,
    ascending), `names`, `npts` (valid samples), the store's `channels`, `sampling_rate_hz` and
    the traces per task."""

    store: StoreLocation
    split: str
    positions: np.ndarray
    names: np.ndarray
    npts: np.ndarray
    channels: tuple[str, ...]
    sampling_rate_hz: float
    task_traces: int


def split_counts(table: pd.DataFrame) -> str:
    """'its splits: train 6, test 4' of a trace table (its `split` column), or 'no split'."""
    if cv.SPLIT_VAR not in table:
        return "no split"
    counts = table[cv.SPLIT_VAR].astype(str).value_counts()
    found = [f"{name} {counts[name]}" for name in cv.SPLIT_VALUES if counts.get(name, 0)]
    return "its splits: " + (", ".join(found) or "none")


def _task_traces(store: StoreLocation) -> int:
    """The store's shard (windows per shard), else DEFAULT_TASK_TRACES."""
    layout = storage.read_attrs(store).get("layout") or {}
    return int(layout.get("shard_traces") or DEFAULT_TASK_TRACES)


def select_traces(
    store: StoreLocation, split: str, *, quiet: bool = True, empty_hint: str = ""
) -> StoreTraces:
    """The traces of `split` (`train`, `dev`, `test`, or `all`) of the store at `store`; none is
    bad input naming the splits the store has, then `empty_hint` (what to do instead)."""
    url = store.url
    ds = cv.validate_event_window_store(storage.open_dataset(store), url)
    table = read_trace_table(ds, [cv.TRACE_NAME, cv.SPLIT_VAR, cv.TRACE_NPTS], quiet=quiet)
    n_sample = int(ds.sizes[cv.SAMPLE])
    if split == ALL_SPLITS:
        positions = np.arange(len(table))
    elif split not in cv.SPLIT_VALUES:
        raise InvalidInput("split", f"expected one of {[*cv.SPLIT_VALUES, ALL_SPLITS]}")
    elif cv.SPLIT_VAR not in table:
        raise InvalidInput(url, f"has no per-trace {cv.SPLIT_VAR!r}; run `seisctf split`")
    else:
        positions = np.flatnonzero(table[cv.SPLIT_VAR].to_numpy(dtype=object) == split)
    if positions.size == 0:
        raise InvalidInput(
            url, f"has no trace in split {split!r} ({split_counts(table)}){empty_hint}"
        )
    npts = (
        table[cv.TRACE_NPTS].to_numpy(dtype=np.int64)
        if cv.TRACE_NPTS in table
        else np.full(len(table), n_sample, dtype=np.int64)
    )
    return StoreTraces(
        store=store,  # its credentials held apart: the pick tasks carry it
        split=split,
        positions=positions,
        names=table[cv.TRACE_NAME].to_numpy(dtype=object)[positions],
        npts=np.minimum(npts[positions], n_sample),
        channels=tuple(str(c) for c in ds[cv.CHANNEL].values.tolist()),
        sampling_rate_hz=cv.sampling_rate_hz(ds.attrs, store.url),
        task_traces=_task_traces(store),
    )


def channel_order(channels: tuple[str, ...], wanted: str, what: str) -> list[int]:
    """Indices of the `wanted` component letters (e.g. "ZNE") among the store's `channels`."""
    missing = [letter for letter in wanted if letter not in channels]
    if missing:
        raise InvalidInput(what, f"needs components {list(wanted)}; the store has {channels}")
    return [channels.index(letter) for letter in wanted]


def _pick_task(
    store: StoreLocation,
    positions: np.ndarray,
    npts: np.ndarray,
    order: list[int],
    sampling_rate_hz: float,
    picker: Picker,
) -> np.ndarray:
    """One task: read the windows at `positions` (channels in `order`) and pick them."""
    dataset = open_event_windows(store)
    windows = dataset[cv.EVENT_WINDOWS_VAR].isel(trace=positions).values
    windows = np.ascontiguousarray(windows[:, order, :], dtype=np.float32)
    return np.asarray(picker(windows, npts, sampling_rate_hz), dtype=np.float64)


def run_picker(
    traces: StoreTraces, picker: Picker, *, label: str = "pick", quiet: bool = False
) -> np.ndarray:
    """Run `picker` over `traces` on the active Dask client, one task per shard's worth of
    windows; returns its rows for every trace, in `traces` order."""
    import dask

    order = channel_order(traces.channels, picker.component_order, traces.store.url)
    blocks = traces.positions // traces.task_traces
    edges = np.flatnonzero(np.diff(blocks)) + 1
    tasks = []
    for index, chunk in enumerate(np.split(np.arange(len(traces.positions)), edges)):
        args = (
            traces.store,
            traces.positions[chunk],
            traces.npts[chunk],
            order,
            traces.sampling_rate_hz,
            picker,
        )
        key = f"{label.replace(' ', '-')}-{dask.base.tokenize(*args)}-{index}"
        tasks.append(dask.delayed(_pick_task, pure=True)(*args, dask_key_name=key))
    return np.concatenate(compute(*tasks, label=label, quiet=quiet), axis=0)


def picks_frame(names: np.ndarray, rows: np.ndarray) -> pd.DataFrame:
    """A pick table from trace names and rows (n, 3) `[detection, p_time_s, s_time_s]`."""
    columns = dict(zip(pick_table.PICK_COLUMNS[1:], np.asarray(rows, np.float64).T, strict=True))
    return pd.DataFrame({pick_table.TRACE_NAME: np.asarray(names, dtype=object), **columns})


def write_picks(frame: pd.DataFrame, out: StoreLocation, description: dict[str, Any]) -> str:
    """Write the pick table to `out` and its description to the sidecar `OUT.picker.json`
    (sidecar first: the table, written last, marks a finished run). Returns `out`'s URL."""
    import fsspec

    with fsspec.open(f"{out.url}{SIDECAR_SUFFIX}", "w", **(out.options or {})) as sidecar:
        json.dump(description, sidecar, indent=2)
    return pick_table.write_pick_submission(frame, out, metadata=description)


def describe_job(traces: StoreTraces, picker: str, **details: Any) -> dict[str, Any]:
    """The common part of a sidecar: picker, store, split, trace count, seisctf version."""
    return {
        "picker": picker,
        "store": traces.store.url,
        "split": traces.split,
        "n_traces": int(len(traces.names)),
        "seisctf_version": seisctf_version(),
        **details,
    }
