"""A SeisBench-format dataset -> an event-window store (`seisctf ingest seisbench DIR --out
URL`, recipe source `seisbench`): the dataset is read with `seisbench_format`
(its module docstring says what the store holds), one Dask task per block range of
`event_windows.task_traces` rows, and written with the event-window writer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv
from seisctf.catalogs import event_windows as ew
from seisctf.errors import InvalidInput
from seisctf.formats.seisbench import seisbench_blocks as sbb
from seisctf.formats.seisbench import seisbench_format as sbf
from seisctf.formats.shared.source import ingest_unless_done, opened_source
from seisctf.location import StoreLocation
from seisctf.options import Location, spec
from seisctf.plugins.context import BuildContext
from seisctf.registry import INGESTS


@dataclass(frozen=True)
class SeisbenchReport:
    n_traces: int
    n_resampled: int
    n_channels: int
    n_samples: int
    sampling_rate_hz: float
    catalog: str  # URL of the Parquet catalogue, inside the store


def _store_metadata(
    metadata: pd.DataFrame,
    csv_columns: Sequence[str],
    chunked: bool,
    channels: str,
    sampling_rate_hz: float,
    source_rates: np.ndarray,
    npts: np.ndarray,
) -> tuple[pd.DataFrame, list[str]]:
    """The store's per-trace table (module doc) and the names of the rescaled columns."""
    columns = [c for c in csv_columns if c in metadata.columns and c not in sbf.SEISBENCH_ADDED]
    if chunked:
        columns.append(sbf.TRACE_CHUNK)
    frame = metadata[columns].reset_index(drop=True).copy()
    resampled = np.abs(source_rates - sampling_rate_hz) > 1e-9 * sampling_rate_hz
    rescaled: list[str] = []
    if resampled.any():
        rescaled = ew.rescale_sample_columns(frame, sampling_rate_hz / source_rates)
        frame[sbf.TRACE_SOURCE_SAMPLING_RATE] = source_rates.astype(np.float64)
        if sbf.TRACE_DT in frame.columns:
            frame[sbf.TRACE_DT] = np.where(
                resampled, 1.0 / sampling_rate_hz, frame[sbf.TRACE_DT].to_numpy()
            )
    frame[sbf.TRACE_SAMPLING_RATE] = np.where(resampled, sampling_rate_hz, source_rates).astype(
        np.float64
    )
    frame[cv.TRACE_NPTS] = npts.astype(np.int64)
    if sbf.TRACE_COMPONENT_ORDER in frame.columns:
        frame[sbf.TRACE_COMPONENT_ORDER] = pd.array([channels] * len(frame), dtype="str")
    return frame, rescaled


def ingest_seisbench(
    path: str,
    store: StoreLocation,
    *,
    rate: float | None = None,
    shard_traces: int | None = None,
    compress: bool = True,
    layout: ew.WindowLayout | None = None,
    traces_per_task: int | None = None,
    quiet: bool = False,
) -> SeisbenchReport:
    """Ingest the SeisBench dataset in folder `path` into an event-window store at `store`."""
    sbf.quiet_seisbench()
    folder = Path(path)
    chunks, metadata_paths, waveform_paths = sbf.dataset_files(folder)
    csv_columns = sbf.csv_columns_of(metadata_paths)
    if "trace_name" not in csv_columns:
        raise InvalidInput(str(metadata_paths[0]), "missing column 'trace_name'")
    data_format = sbf.read_data_format(waveform_paths)
    dimension_order = str(data_format.get("dimension_order", "CW"))
    if sorted(dimension_order) != ["C", "W"]:
        raise InvalidInput(
            str(waveform_paths[0]),
            f"data_format dimension_order {dimension_order!r}: expected 'CW' or 'WC'",
        )
    component_order = data_format.get("component_order")
    if not component_order:
        component_order = sbf.traces_component_order(metadata_paths)
        if not component_order:
            raise InvalidInput(
                str(folder),
                "no component order: neither data_format/component_order nor the column "
                f"{sbf.TRACE_COMPONENT_ORDER!r}",
            )
    component_order = str(component_order)
    source, dataset = sbf.open_checked(folder, chunks, component_order)
    metadata = dataset.metadata
    if len(metadata) == 0:
        raise InvalidInput(str(metadata_paths[0]), "holds no trace")
    source_rates = metadata[sbf.TRACE_SAMPLING_RATE].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(source_rates) & (source_rates > 0)):
        bad = int(np.flatnonzero(~(np.isfinite(source_rates) & (source_rates > 0)))[0])
        raise InvalidInput(
            f"{folder}: trace {metadata['trace_name'].iloc[bad]!r}",
            "has no sampling rate (trace_sampling_rate_hz, trace_dt_s or data_format)",
        )
    lengths, blocked = sbf.native_lengths(
        metadata, chunks, waveform_paths, dimension_order.index("W")
    )
    sampling_rate_hz = ew.store_rate(source_rates, rate)
    npts = _resampled_lengths(lengths, source_rates, sampling_rate_hz, str(folder))
    n_sample = int(npts.max())
    orders = metadata[sbf.TRACE_COMPONENT_ORDER] if sbf.TRACE_COMPONENT_ORDER in metadata else None
    has_component = sbf.component_masks(orders, component_order, len(metadata))
    direct = blocked.parsed & (
        source_rates == sampling_rate_hz
    )  # read with h5py (seisbench_blocks)
    if orders is not None:
        direct &= (orders.astype(str) == component_order).to_numpy()
    frame, rescaled = _store_metadata(
        metadata, csv_columns, chunks != [""], component_order, sampling_rate_hz, source_rates, npts
    )
    n_trace, n_channel = len(frame), len(component_order)
    layout = layout or ew.choose_layout(
        n_channel, n_sample, shard_traces=shard_traces, compress=compress
    )
    per_task = ew.task_traces(layout, n_channel, n_sample, traces_per_task)

    def block_args(start: int, stop: int) -> tuple:
        plan = sbf.BlockPlan(
            start,
            stop,
            lengths[start:stop],
            source_rates[start:stop],
            has_component[start:stop],
            sbb.runs(blocked, direct, start, stop),
            dimension_order == "WC",
        )
        return source, plan, sampling_rate_hz, n_sample

    waveforms = ew.lazy_windows(
        sbf.read_block, block_args, (n_trace, n_channel, n_sample), per_task, "read-seisbench"
    )
    resampled = np.abs(source_rates - sampling_rate_hz) > 1e-9 * sampling_rate_hz
    chunks_file = folder / "chunks"
    inputs = ew.lazy_inputs(
        file for file in (*metadata_paths, *waveform_paths, chunks_file) if file.is_file()
    )
    names = frame["trace_name"].astype(str)
    attrs = {
        "source_format": "seisbench",
        "seisbench_data_format": _json_safe(data_format),
        "seisbench_chunks": [c for c in chunks if c],
        "inputs": inputs,
        "source_dtype": _source_dtype(waveform_paths[0], names.iloc[0]),
        "trace_name_unique": bool(names.is_unique),
        "resampling": None
        if not resampled.any()
        else {
            "method": ew.RESAMPLING_METHOD,
            "parameters": "up/down = store rate / trace rate; window=('kaiser', 5.0); "
            "padtype='constant'; computed in float64",
            "target_rate_hz": sampling_rate_hz,
            "resampled_traces": int(resampled.sum()),
            "source_rates_hz": {
                f"{r:g}": int((source_rates == r).sum()) for r in sorted(set(source_rates))
            },
            "rescaled_columns": rescaled,
        },
        "seisctf_version": ew.seisctf_version(),
    }
    dataset_out = ew.event_window_dataset(
        waveforms, frame, tuple(component_order), sampling_rate_hz, attrs
    )
    ew.write_event_windows(dataset_out, store, layout=layout, label="ingest seisbench", quiet=quiet)
    return SeisbenchReport(
        n_trace,
        int(resampled.sum()),
        n_channel,
        n_sample,
        sampling_rate_hz,
        ew.catalog_url(store.url),
    )


def _resampled_lengths(
    lengths: np.ndarray, source_rates: np.ndarray, sampling_rate_hz: float, what: str
) -> np.ndarray:
    """Each trace's length at the store's rate (`event_windows.resampled_length`)."""
    npts = lengths.astype(np.int64).copy()
    for source_rate in np.unique(source_rates):
        up, down = ew.rate_ratio(
            float(source_rate), sampling_rate_hz, f"{what}: {source_rate} Hz traces"
        )
        rows = source_rates == source_rate
        npts[rows] = ew.resampled_length(lengths[rows], up, down)
    return npts


def _source_dtype(waveform_path: Path, trace_name: str) -> str:
    import h5py

    with h5py.File(waveform_path, "r") as file:
        return str(file["data"][trace_name.partition("$")[0]].dtype)


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --- the recipe source ----------------------------------------------------------------------


@INGESTS.register(
    "seisbench",
    command="seisbench",
    cli=ingest_seisbench,
    help="SeisBench-format dataset (metadata CSV + waveforms HDF5, chunked or not) -> "
    "event-window store",
    event_windows=True,
)
def seisbench_dataset(
    context: BuildContext,
    *,
    path: Annotated[Location, spec("the dataset's folder (metadata CSV, waveforms HDF5)")],
    rate: Annotated[float | None, spec("resample to this rate, Hz", exclusive_minimum=0)] = None,
) -> xr.Dataset:
    """`seisctf ingest seisbench` of the dataset folder `path` into the event-window store at
    `context.source_url`, opened. Skipped when that store is complete, was made from the same
    files (sha256) and asked for the same rate."""
    folder = Path(context.resolve(path))
    store = context.location(context.require_source_url())
    _, metadata_paths, waveform_paths = sbf.dataset_files(folder)
    inputs = [
        ew.input_entry(file)
        for file in (*metadata_paths, *waveform_paths, folder / "chunks")
        if file.is_file()
    ]
    ingest_unless_done(
        context,
        "seisbench",
        inputs,
        {"rate": rate},
        lambda: ingest_seisbench(str(folder), store, rate=rate, quiet=context.quiet),
    )
    return opened_source(context)
