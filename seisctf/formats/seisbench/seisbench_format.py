"""Reading a SeisBench-format dataset (metadata CSV + waveforms HDF5, chunked or not) for an
event-window store: its files, columns, lengths and windows. The ingest that writes the store
(`seisctf ingest seisbench DIR --out URL`) is `seisctf.formats.seisbench.ingest`; what it stores:

Read through SeisBench's own `seisbench.data.WaveformDataset` (`metadata`, `data_format`,
`get_waveforms`): seisctf parses neither the CSV nor the HDF5 layout beyond what it needs to plan.

- Traces: the dataset's rows in its order (chunks in SeisBench's sorted order), one window each.
  `trace_name` stays exactly as the dataset has it (for blocked data `bucket0$0,:3,:3001`); in a
  chunked dataset the names may repeat across chunks, so `trace_chunk` (SeisBench's column) is
  kept and the attr `trace_name_unique` says whether `trace_name` alone is a key.
- Lengths: a blocked trace's own length comes from its slice (`$i,:3,:3001`) applied to its
  block's shape (read from the HDF5 header, no samples), an unblocked trace's from its dataset's
  shape: SeisBench's block padding never reaches the store; shorter windows are NaN-padded to the
  longest (`trace_npts`: each window's own length).
- Channels: `data_format["component_order"]` (else every component of the traces'
  `trace_component_order`: `traces_component_order`);
  `get_waveforms` reorders each trace to it (dimension order `NCW`); a component a trace lacks is
  NaN (SeisBench would pad zeros).
- Rate: SeisBench's per-trace `trace_sampling_rate_hz` (from the CSV, `trace_dt_s` or
  `data_format["sampling_rate"]`). The store's rate is `rate` if given, else the rate most traces
  have (ties: the highest); other traces are resampled with scipy.signal.resample_poly (float64,
  then float32), their `*_sample` columns multiplied by store rate / source rate (those columns
  become float64), their `trace_sampling_rate_hz` set to the store's rate and the original kept
  in `trace_source_sampling_rate_hz` (a column only when some trace was resampled).
- Values: float32; traces not resampled equal `WaveformDataset.get_waveforms` exactly when the
  HDF5 holds float32 (other dtypes are cast; attr `source_dtype`).
- Metadata columns: the CSV's own columns, as `WaveformDataset.metadata` types them (SeisBench
  parses `source_origin_time` as a datetime), plus `trace_chunk` for chunked datasets,
  `trace_sampling_rate_hz` and `trace_npts` (set to the store's rate and each window's length);
  `trace_component_order`, where the CSV has it, is set to the store's order (the waveforms were
  reordered to it).
- Work: one Dask task per block range of `event_windows.task_traces` rows (whole shards). The
  common blocked traces (`seisbench_blocks`: SeisBench's own block slices, the
  store's components and rate) are read with h5py, consecutive traces of a block as one slice;
  any other trace through SeisBench: the task opens the dataset once per worker process
  (cached) and calls `get_waveforms` once per group of equal length and rate.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf.catalogs import event_windows as ew
from seisctf.errors import InvalidInput
from seisctf.formats.seisbench import seisbench_blocks as blocks

# Columns SeisBench adds to the CSV's: the row index it resets, and its per-row chunk name.
SEISBENCH_ADDED = ("index", "level_0", "trace_chunk")
TRACE_CHUNK = cv.TRACE_CHUNK
TRACE_SAMPLING_RATE = cv.TRACE_SAMPLING_RATE
TRACE_SOURCE_SAMPLING_RATE = cv.TRACE_SOURCE_SAMPLING_RATE
TRACE_COMPONENT_ORDER = cv.TRACE_COMPONENT_ORDER
TRACE_DT = "trace_dt_s"


@dataclass(frozen=True)
class SeisbenchSource:
    """What a worker needs to open the dataset: its folder, chunks and output component order."""

    path: str
    chunks: tuple[str, ...] | None
    component_order: str


def quiet_seisbench() -> None:
    logging.getLogger("seisbench").setLevel(logging.ERROR)


@functools.lru_cache(maxsize=4)
def open_waveform_dataset(source: SeisbenchSource):
    """`seisbench.data.WaveformDataset` of the source, once per process (the CSV is read once)."""
    quiet_seisbench()
    import seisbench.data as sbd

    return sbd.WaveformDataset(
        source.path,
        component_order=source.component_order,
        dimension_order="NCW",
        chunks=list(source.chunks) if source.chunks else None,
        cache=None,
        missing_components="pad",
    )


def dataset_files(path: Path) -> tuple[list[str], list[Path], list[Path]]:
    """Chunks and their metadata / waveform files, as SeisBench finds them; bad input named."""
    import h5py
    import seisbench.data as sbd

    if not path.is_dir():
        raise InvalidInput(str(path), "not a folder (a SeisBench dataset is a folder)")
    try:
        chunks = sbd.WaveformDataset.available_chunks(path)
    except (FileNotFoundError, OSError) as error:
        raise InvalidInput(
            str(path), f"no SeisBench dataset (metadata*.csv + waveforms*.hdf5): {error}"
        ) from None
    metadata_paths = [path / f"metadata{chunk}.csv" for chunk in chunks]
    waveform_paths = [path / f"waveforms{chunk}.hdf5" for chunk in chunks]
    for file in (*metadata_paths, *waveform_paths):
        if not file.is_file():
            raise InvalidInput(str(file), "missing (listed by the dataset's chunks)")
    for file in waveform_paths:
        if not h5py.is_hdf5(file):
            raise InvalidInput(str(file), "not an HDF5 file")
    return chunks, metadata_paths, waveform_paths


def csv_columns_of(metadata_paths: Sequence[Path]) -> list[str]:
    columns: list[str] = []
    for file in metadata_paths:
        try:
            header = pd.read_csv(file, nrows=0)
        except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as error:
            raise InvalidInput(str(file), f"not a readable CSV file ({error})") from None
        columns += [str(c) for c in header.columns if str(c) not in columns]
    return columns


def traces_component_order(metadata_paths: Sequence[Path]) -> str | None:
    """The components of a dataset without `data_format/component_order`, from its traces'
    `trace_component_order` (None without that column): every letter of them, the longest
    order's first and in its order (`Z` and `ZNE` give `ZNE`), others as first met. One
    trace's order would lose the components of traces holding more (SeisBench's readers fill
    a trace's missing ones; `seisctf export seisbench` writes one-component traces so)."""
    orders: list[str] = []
    for file in metadata_paths:
        try:
            table = pd.read_csv(file, usecols=[TRACE_COMPONENT_ORDER], dtype=str)
        except ValueError:  # no such column
            return None
        orders += [str(order) for order in table[TRACE_COMPONENT_ORDER].dropna().unique()]
    if not orders:
        return None
    longest_first = sorted(dict.fromkeys(orders), key=len, reverse=True)
    return "".join(dict.fromkeys("".join(longest_first)))


def open_checked(path: Path, chunks: list[str], component_order: str | None):
    """The dataset on the client, with bad input named."""
    if not component_order:
        component_order = "ZNE"
    source = SeisbenchSource(str(path), tuple(chunks) if chunks != [""] else None, component_order)
    try:
        return source, open_waveform_dataset(source)
    except KeyError as error:
        raise InvalidInput(str(path), f"metadata is missing the column {error}") from None
    except (ValueError, OSError) as error:
        raise InvalidInput(str(path), f"SeisBench cannot read the dataset: {error}") from None


def read_data_format(waveform_paths: Sequence[Path]) -> dict[str, Any]:
    """`data_format` of the first waveform file, as SeisBench decodes it (text, tuples)."""
    import h5py

    with h5py.File(waveform_paths[0], "r") as file:
        group = file.get("data_format")
        raw = {key: group[key][()] for key in group.keys()} if group is not None else {}
    decoded: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, np.ndarray):
            value = [v.decode() if isinstance(v, bytes) else v.item() for v in value.tolist()]
        elif isinstance(value, np.generic):
            value = value.item()
        decoded[key] = value
    return decoded


def native_lengths(
    metadata: pd.DataFrame, chunks: Sequence[str], waveform_paths: Sequence[Path], sample_axis: int
) -> tuple[np.ndarray, blocks.BlockNames]:
    """Each trace's own length along the sample axis, from its slice of its block (or its own
    dataset) in the HDF5 headers, and the parsed names (`seisbench_blocks.parse_names`, which
    measures the common traces; the others one by one here); an unknown block is bad input
    naming the trace."""
    import h5py
    import seisbench.data as sbd

    parse = sbd.WaveformDataset._parse_location
    paths = dict(zip(chunks, waveform_paths, strict=True))
    names = metadata["trace_name"].astype(str).to_numpy()
    trace_chunks = metadata[TRACE_CHUNK].astype(str).to_numpy()
    parsed = blocks.parse_names(names, trace_chunks, chunks, waveform_paths, sample_axis)
    lengths = parsed.lengths.copy()
    for chunk in chunks:
        rows = np.flatnonzero((trace_chunks == chunk) & ~parsed.parsed)
        if rows.size == 0:
            continue
        with h5py.File(paths[chunk], "r") as file:
            data = file.get("data")
            if data is None:
                raise InvalidInput(str(paths[chunk]), "has no group 'data'")
            shapes: dict[str, tuple[int, ...]] = {}
            for row in rows:
                name = names[row]
                block, _, location = name.partition("$")
                if block not in shapes:
                    dataset = data.get(block)
                    if dataset is None or not hasattr(dataset, "shape"):
                        raise InvalidInput(
                            f"{paths[chunk]}: trace {name!r}",
                            f"not found (no dataset {block!r} in group 'data')",
                        )
                    shapes[block] = dataset.shape
                try:
                    view = np.broadcast_to(np.empty((), np.uint8), shapes[block])[
                        parse(location or ":")
                    ]
                except (ValueError, IndexError) as error:
                    raise InvalidInput(
                        f"{paths[chunk]}: trace {name!r}",
                        f"its slice does not fit block {block!r} of shape {shapes[block]} "
                        f"({error})",
                    ) from None
                if view.ndim != 2:
                    raise InvalidInput(
                        f"{paths[chunk]}: trace {name!r}",
                        f"expected a 2-D (channel, sample) trace, got shape {view.shape}",
                    )
                lengths[row] = view.shape[sample_axis]
    return lengths, parsed


def component_masks(component_orders: pd.Series | None, channels: str, n_trace: int) -> np.ndarray:
    """(trace, channel) bool: True where the trace has the store's component."""
    if component_orders is None:
        return np.ones((n_trace, len(channels)), dtype=bool)
    masks = {
        order: np.array([c in str(order) for c in channels], dtype=bool)
        for order in component_orders.astype(str).unique()
    }
    return np.stack([masks[o] for o in component_orders.astype(str).to_numpy()])


@dataclass(frozen=True)
class BlockPlan:
    """Rows [start, stop) of the store: their lengths, rates and components, and the runs of
    them read directly (`seisbench_blocks.Run`; `transpose`: the file's traces are (sample,
    channel))."""

    start: int
    stop: int
    lengths: np.ndarray
    source_rates: np.ndarray
    has_component: np.ndarray
    runs: tuple[blocks.Run, ...] = ()
    transpose: bool = False


def read_block(
    source: SeisbenchSource, block: BlockPlan, store_rate_hz: float, n_sample: int
) -> np.ndarray:
    """Windows [block.start, block.stop) as float32 (trace, channel, sample), NaN-padded: the
    runs read directly, the other traces with one `get_waveforms` call per group of equal length
    and rate, resampled where the rate differs."""
    n = block.stop - block.start
    out = np.full((n, len(source.component_order), n_sample), np.nan, dtype=np.float32)
    pending = np.ones(n, dtype=bool)
    for run in block.runs:
        windows = blocks.read_run(run, block.transpose)
        out[run.rows, :, : windows.shape[-1]] = windows
        pending[run.rows] = False
    keys = np.stack([block.lengths.astype(np.float64), block.source_rates.astype(np.float64)])
    groups = np.unique(keys[:, pending], axis=1).T if pending.any() else np.empty((0, 2))
    for length, rate in groups:
        rows = np.flatnonzero(pending & (block.lengths == length) & (block.source_rates == rate))
        windows = open_waveform_dataset(source).get_waveforms(
            idx=[int(block.start + r) for r in rows]
        )
        if windows.shape[-1] != length:
            raise InvalidInput(
                f"{source.path}: trace {block.start + rows[0]}",
                f"SeisBench returned {windows.shape[-1]} samples where its slice says {length}",
            )
        up, down = ew.rate_ratio(float(rate), store_rate_hz, f"{source.path}: row {block.start}")
        windows = ew.resample_windows(windows, up, down)
        out[rows, :, : windows.shape[-1]] = windows
    out[~block.has_component] = np.nan
    return out
