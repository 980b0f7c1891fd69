"""The original STEAD layout (Mousavi et al. 2019: `merged.hdf5` + `merged.csv`) -> an
event-window store (`seisctf ingest stead HDF5 CSV --out URL`, recipe source `stead`).

STEAD's HDF5 file holds a group `data/` with one dataset per `trace_name`, shape (6000, 3)
(samples × E, N, Z components) at 100 Hz, with per-trace attrs repeating the CSV's columns; the
CSV (read with pandas, its dtypes as pandas infers them, except that the identifiers
`STEAD_TEXT_COLUMNS` are always text) is the metadata. The store follows
SeisBench's own STEAD conversion (`seisbench.data.STEAD`): columns renamed to SeisBench's names
(`STEAD_COLUMNS`; columns it does not name keep STEAD's), channels `Z`, `N`, `E` (stored =
raw[:, ::-1].T, exactly), 100 Hz; `trace_name` is STEAD's (unique). `trace_sampling_rate_hz`
and `trace_npts` are added. Windows of other lengths are NaN-padded to the longest.

Work: one Dask task per block range (`event_windows.task_traces` rows) reading its traces with
h5py; the plan checks every trace's dataset and shape in the HDF5 header first, so an unknown
trace is bad input naming it before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv
from seisctf.catalogs import event_windows as ew
from seisctf.errors import InvalidInput
from seisctf.formats.shared.source import ingest_unless_done, opened_source
from seisctf.location import StoreLocation
from seisctf.options import Location, spec
from seisctf.plugins.context import BuildContext
from seisctf.registry import INGESTS

STEAD_SAMPLING_RATE_HZ = 100.0
STEAD_CHANNELS = "ZNE"  # the stored order; STEAD's arrays hold E, N, Z along their last axis
STEAD_REQUIRED = ("trace_name",)
# Identifier columns read as text, whatever they look like (a station "1234", a numeric event id).
STEAD_TEXT_COLUMNS = ("trace_name", "network_code", "receiver_code", "receiver_type", "source_id")
# STEAD column -> SeisBench name, as seisbench.data.STEAD converts them (seisbench 0.12).
STEAD_COLUMNS = {
    "trace_start_time": "trace_start_time",
    "trace_category": "trace_category",
    "trace_name": "trace_name",
    "p_arrival_sample": "trace_p_arrival_sample",
    "p_status": "trace_p_status",
    "p_weight": "trace_p_weight",
    "p_travel_sec": "path_p_travel_sec",
    "s_arrival_sample": "trace_s_arrival_sample",
    "s_status": "trace_s_status",
    "s_weight": "trace_s_weight",
    "s_travel_sec": "path_s_travel_sec",
    "back_azimuth_deg": "path_back_azimuth_deg",
    "snr_db": "trace_snr_db",
    "coda_end_sample": "trace_coda_end_sample",
    "network_code": "station_network_code",
    "receiver_code": "station_code",
    "receiver_type": "trace_channel",
    "receiver_latitude": "station_latitude_deg",
    "receiver_longitude": "station_longitude_deg",
    "receiver_elevation_m": "station_elevation_m",
    "source_id": "source_id",
    "source_origin_time": "source_origin_time",
    "source_origin_uncertainty_sec": "source_origin_uncertainty_sec",
    "source_latitude": "source_latitude_deg",
    "source_longitude": "source_longitude_deg",
    "source_error_sec": "source_error_sec",
    "source_gap_deg": "source_gap_deg",
    "source_horizontal_uncertainty_km": "source_horizontal_uncertainty_km",
    "source_depth_km": "source_depth_km",
    "source_depth_uncertainty_km": "source_depth_uncertainty_km",
    "source_magnitude": "source_magnitude",
    "source_magnitude_type": "source_magnitude_type",
    "source_magnitude_author": "source_magnitude_author",
}


@dataclass(frozen=True)
class SteadReport:
    n_traces: int
    n_samples: int
    catalog: str  # URL of the Parquet catalogue, inside the store


def read_csv(csv_path: Path) -> pd.DataFrame:
    if not csv_path.is_file():
        raise InvalidInput(str(csv_path), "file not found")
    try:
        frame = pd.read_csv(
            csv_path, low_memory=False, dtype={name: str for name in STEAD_TEXT_COLUMNS}
        )
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise InvalidInput(str(csv_path), f"not a readable CSV file ({error})") from None
    missing = [column for column in STEAD_REQUIRED if column not in frame.columns]
    if missing:
        raise InvalidInput(str(csv_path), f"missing column(s) {', '.join(map(repr, missing))}")
    if frame.empty:
        raise InvalidInput(str(csv_path), "holds no trace")
    return frame


def trace_lengths(hdf5_path: Path, names: np.ndarray) -> np.ndarray:
    """Samples of each trace, from the HDF5 header; unknown or misshapen traces are bad input."""
    import h5py

    if not hdf5_path.is_file():
        raise InvalidInput(str(hdf5_path), "file not found")
    if not h5py.is_hdf5(hdf5_path):
        raise InvalidInput(str(hdf5_path), "not an HDF5 file")
    lengths = np.zeros(len(names), dtype=np.int64)
    with h5py.File(hdf5_path, "r") as file:
        data = file.get("data")
        if not isinstance(data, h5py.Group):
            raise InvalidInput(str(hdf5_path), "has no group 'data' (STEAD's layout)")
        for row, name in enumerate(names):
            dataset = data.get(name)
            if not isinstance(dataset, h5py.Dataset):
                raise InvalidInput(f"{hdf5_path}: trace {name!r}", "not found in group 'data'")
            if dataset.ndim != 2 or dataset.shape[1] != len(STEAD_CHANNELS):
                raise InvalidInput(
                    f"{hdf5_path}: trace {name!r}",
                    f"expected shape (samples, 3) (E, N, Z), got {dataset.shape}",
                )
            lengths[row] = dataset.shape[0]
    return lengths


def read_block(hdf5_path: str, names: np.ndarray, n_sample: int) -> np.ndarray:
    """Windows of `names` as float32 (trace, channel Z N E, sample), NaN-padded."""
    import h5py

    out = np.full((len(names), len(STEAD_CHANNELS), n_sample), np.nan, dtype=np.float32)
    with h5py.File(hdf5_path, "r") as file:
        data = file["data"]
        for row, name in enumerate(names):
            raw = data[name][()]  # (samples, E N Z)
            out[row, :, : raw.shape[0]] = raw[:, ::-1].T
    return out


def ingest_stead(
    hdf5: str,
    csv: str,
    store: StoreLocation,
    *,
    shard_traces: int | None = None,
    compress: bool = True,
    layout: ew.WindowLayout | None = None,
    traces_per_task: int | None = None,
    quiet: bool = False,
) -> SteadReport:
    """Ingest STEAD's HDF5 + CSV into an event-window store at `store`."""
    import h5py

    hdf5_path, csv_path = Path(hdf5), Path(csv)
    metadata = read_csv(csv_path)
    names = metadata["trace_name"].astype(str).to_numpy()
    if not pd.Index(names).is_unique:
        duplicated = pd.Index(names)[pd.Index(names).duplicated()][0]
        raise InvalidInput(f"{csv_path}: trace {duplicated!r}", "listed more than once")
    lengths = trace_lengths(hdf5_path, names)
    n_sample = int(lengths.max())
    frame = metadata.rename(columns=STEAD_COLUMNS).reset_index(drop=True)
    frame[cv.TRACE_SAMPLING_RATE] = STEAD_SAMPLING_RATE_HZ
    frame[cv.TRACE_NPTS] = lengths
    n_trace, n_channel = len(frame), len(STEAD_CHANNELS)
    layout = layout or ew.choose_layout(
        n_channel, n_sample, shard_traces=shard_traces, compress=compress
    )
    per_task = ew.task_traces(layout, n_channel, n_sample, traces_per_task)
    waveforms = ew.lazy_windows(
        read_block,
        lambda start, stop: (str(hdf5_path), names[start:stop], n_sample),
        (n_trace, n_channel, n_sample),
        per_task,
        "read-stead",
    )
    with h5py.File(hdf5_path, "r") as file:
        source_dtype = str(file["data"][names[0]].dtype)
    attrs = {
        "source_format": "stead",
        "inputs": [ew.input_entry(hdf5_path), ew.input_entry(csv_path)],
        "column_names": "SeisBench's (seisbench.data.STEAD); unnamed STEAD columns kept",
        "source_dtype": source_dtype,
        "trace_name_unique": True,
        "resampling": None,
        "seisctf_version": ew.seisctf_version(),
    }
    dataset = ew.event_window_dataset(
        waveforms, frame, tuple(STEAD_CHANNELS), STEAD_SAMPLING_RATE_HZ, attrs
    )
    ew.write_event_windows(dataset, store, layout=layout, label="ingest stead", quiet=quiet)
    return SteadReport(n_trace, n_sample, ew.catalog_url(store.url))


# --- the recipe source ----------------------------------------------------------------------


@INGESTS.register(
    "stead",
    command="stead",
    cli=ingest_stead,
    help="original STEAD files (merged.hdf5 + merged.csv) -> event-window store",
    event_windows=True,
)
def stead(
    context: BuildContext,
    *,
    hdf5: Annotated[Location, spec("STEAD's waveforms (merged.hdf5)")],
    csv: Annotated[Location, spec("STEAD's metadata (merged.csv)")],
    shard_traces: Annotated[int | None, spec("traces a shard (0: one shard)", minimum=0)] = None,
    compress: Annotated[bool, spec("compress the stored waveforms")] = True,
) -> xr.Dataset:
    """`seisctf ingest stead` of STEAD's `hdf5` and `csv` into the event-window store at
    `context.source_url`, opened. Skipped when that store is complete, was made from the same
    files (sha256) and with the same options."""
    hdf5_path, csv_path = context.resolve(hdf5), context.resolve(csv)
    inputs = [ew.input_entry(Path(hdf5_path)), ew.input_entry(Path(csv_path))]
    ingest_unless_done(
        context,
        "stead",
        inputs,
        {"shard_traces": shard_traces, "compress": compress},
        lambda: ingest_stead(
            hdf5_path,
            csv_path,
            context.location(context.require_source_url()),
            shard_traces=shard_traces,
            compress=compress,
            quiet=context.quiet,
        ),
    )
    return opened_source(context)
