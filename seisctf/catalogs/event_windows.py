"""The event-window store: its layout, and the one writer every event-window ingest uses.

Store (docs/contract.md, "Event-window store"): `waveforms(trace, channel, sample)`
float32, NaN after each window's `trace_npts` samples; `channel` holds the component letters
(`Z`, `N`, `E`, in the attr `component_order`); every metadata column a 1-D coordinate along
`trace` under its SeisBench name, except a source's `split` column, which becomes the contract's
per-trace `split` variable; attr `sampling_rate` (Hz). The writer adds the per-trace
`trace_gap_fraction` (`window_components.gap_fractions`: the share of NaN inside the components a
window has) where the source has none.

Per-trace values (`trace_columns`): integers, floats, booleans and datetimes (UTC, naive) keep
their dtype; everything else is text (zarr variable-length UTF-8), a missing text value being
the empty string — as in SeisBench's CSV files, where pandas reads an empty field as NaN.

Layout (`choose_layout`, measured by `benchmarks/bench_event_windows.py`, figures in
benchmarks/RESULTS.md): one window per chunk (1 trace × all channels × all samples), so a batch
of random windows reads exactly its windows (4 windows per chunk read 4× the bytes and halved
the batch rate); chunks grouped into shards of `default_shard_traces` windows (one file or
object per shard, not one per window: STEAD's 1.2 M windows would otherwise be 1.2 M files;
shards were as fast as single-window files through TensorStore); `conventions.DATA_CODEC`
(Blosc LZ4, bit shuffle: 2.7× smaller on integer counts, 0.7× the batch rate of raw float32,
still 5× SeisBench's), or none. Writes are Dask region writes of whole shards (any task
partition gives the same bytes; local stores through TensorStore, `window_writes`), then the
Parquet catalogue, then the attrs and the completion
marker (`storage.finish_group`), last.

Reading random batches: `open_event_windows` (xarray with `waveforms` through TensorStore). Plain
`xr.open_zarr(store, chunks=None)` works and gives the same values, but zarr-python 3.1's
orthogonal indexing builds `np.ix_` index arrays from Python ranges and fancy-indexes every
window it reads, several times slower than SeisBench's HDF5 reads for wide windows.

Catalogue: the same per-trace values as a Parquet table (one row per trace, store order, no
index) inside the store, `STORE/catalog.parquet` (`CATALOG_PATH`, the store's attr `catalog`), so
a store moved or copied keeps it. Readers (`read_catalog`) follow the attr `catalog` (a path
relative to the store): stores of earlier versions say `../catalogs/NAME.parquet`, beside the
store, and are read there.
"""

from __future__ import annotations

import math
import posixpath
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from xarray.backends.common import BackendArray
from xarray.core import indexing
from zarr.errors import ZarrUserWarning

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import window_writes
from seisctf.catalogs.window_components import gap_fractions
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.location import LocationLike, StoreLocation

# Windows per shard: the largest power of two whose shard holds at most SHARD_BYTES of float32
# (256 three-component 60 s windows at 100 Hz, 18 MiB). A function of the window shape only.
SHARD_BYTES = 32 * 2**20
RESAMPLING_METHOD = "scipy.signal.resample_poly"
MAX_RATE_DENOMINATOR = 1000
# The Parquet catalogue, relative to the store (inside it; the store's attr `catalog`).
CATALOG_PATH = "catalog.parquet"
# zarr's consolidation (`storage.finish_group`) lists the group's objects and says of this one
# "ZarrUserWarning: Object at catalog.parquet is not recognized as a component of a Zarr
# hierarchy": true, and meant (the consolidated metadata leaves it out, readers ignore it), so
# nothing a user can act on. Only this message, about this file, is silenced.
warnings.filterwarnings(
    "ignore",
    message=f"Object at {re.escape(CATALOG_PATH)} is not recognized as a component",
    category=ZarrUserWarning,
)


@dataclass(frozen=True)
class WindowLayout:
    """Chunks and shards of `waveforms` along `trace` (all channels and samples in each chunk).

    `shard_traces` None: no sharding (one file per chunk). `compress`: the
    `conventions.DATA_CODEC` compressor, else none."""

    chunk_traces: int = 1
    shard_traces: int | None = None
    compress: bool = True

    def encoding(self, n_channel: int, n_sample: int) -> dict[str, Any]:
        encoding: dict[str, Any] = {
            "chunks": (self.chunk_traces, n_channel, n_sample),
            "compressors": cv.data_compressor() if self.compress else None,
        }
        if self.shard_traces:
            encoding["shards"] = (self.shard_traces, n_channel, n_sample)
        return encoding

    @property
    def write_traces(self) -> int:
        """Traces of the smallest unit one write task may own: a shard, else a chunk."""
        return self.shard_traces or self.chunk_traces

    def describe(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "compressor": {"name": "blosc", **cv.DATA_CODEC} if self.compress else None,
        }


def default_shard_traces(n_channel: int, n_sample: int) -> int:
    """Windows per shard: the largest power of two within SHARD_BYTES of float32."""
    per_window = 4 * max(1, n_channel) * max(1, n_sample)
    return 2 ** max(0, int(math.floor(math.log2(max(1, SHARD_BYTES // per_window)))))


def choose_layout(
    n_channel: int, n_sample: int, *, shard_traces: int | None = None, compress: bool = True
) -> WindowLayout:
    """The layout the random-access benchmark chose (module doc): one window per chunk, shards
    of `default_shard_traces` (`shard_traces`: that many; 0: no shards), compressed with
    `conventions.DATA_CODEC` (`compress=False`: raw float32)."""
    if shard_traces is not None and shard_traces < 0:
        raise InvalidInput("shard_traces", f"must be ≥ 0, got {shard_traces}")
    if shard_traces is None:
        shard_traces = default_shard_traces(n_channel, n_sample)
    return WindowLayout(chunk_traces=1, shard_traces=shard_traces or None, compress=compress)


def task_traces(
    layout: WindowLayout, n_channel: int, n_sample: int, requested: int | None = None
) -> int:
    """Traces per read-and-write task: `requested` (a multiple of the shard), else whole shards
    (or chunks) of about 64 MiB of float32 at most."""
    unit = layout.write_traces
    if requested is not None:
        if requested < 1 or requested % unit:
            raise InvalidInput(
                "traces per task",
                f"must be a positive multiple of {unit} (a shard), got {requested}",
            )
        return requested
    per_unit = 4 * max(1, n_channel) * max(1, n_sample) * unit
    return unit * max(1, (64 * 2**20) // per_unit)


def lazy_windows(
    read_block: Callable[..., np.ndarray],
    block_args: Callable[[int, int], tuple],
    shape: tuple[int, int, int],
    per_task: int,
    name: str,
):
    """`waveforms` as a Dask array with one task per block range of `per_task` traces:
    `read_block(*block_args(start, stop))` returns traces [start, stop) as float32 (trace,
    channel, sample), NaN-padded. `name` (with the arguments' token) keys the tasks."""
    import dask
    import dask.array as da

    n_trace, n_channel, n_sample = shape
    blocks = []
    for start in range(0, n_trace, per_task):
        stop = min(start + per_task, n_trace)
        args = block_args(start, stop)
        key = f"{name}-{dask.base.tokenize(args)}-{start}"
        task = dask.delayed(read_block, pure=True)(*args, dask_key_name=key)
        blocks.append(
            da.from_delayed(task, shape=(stop - start, n_channel, n_sample), dtype=np.float32)
        )
    return da.concatenate(blocks, axis=0)


# --- per-trace values ----------------------------------------------------------------------------


def column_values(series: pd.Series) -> np.ndarray:
    """One metadata column as the store keeps it (module doc): numbers, booleans and datetimes
    unchanged (tz-aware datetimes in UTC, tz dropped); anything else text, missing as ""."""
    dtype = series.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        return series.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
    if isinstance(dtype, np.dtype) and dtype.kind in "biufmM":
        return series.to_numpy()
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)  # nullable ints / floats
    if isinstance(dtype, pd.StringDtype):  # text already: only the missing values to replace
        return series.fillna("").to_numpy(dtype=object)
    return np.array(["" if _missing(v) else str(v) for v in series.tolist()], dtype=object)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def trace_columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """All columns of `frame` (one row per trace) as store values, in column order."""
    return {str(name): column_values(frame[name]) for name in frame.columns}


def event_window_dataset(
    waveforms,
    metadata: pd.DataFrame,
    channels: tuple[str, ...] | list[str],
    sampling_rate_hz: float,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The store as a (lazy) Dataset: `waveforms` (trace, channel, sample), a Dask or NumPy
    float32 array; `metadata` one row per trace in store order (its `split` column, if any,
    becomes the `split` variable)."""
    if len(metadata) != waveforms.shape[0]:
        raise ValueError(f"{len(metadata)} metadata rows for {waveforms.shape[0]} windows")
    columns = trace_columns(metadata.reset_index(drop=True))
    split = columns.pop(cv.SPLIT_VAR, None)
    variables: dict[str, Any] = {cv.EVENT_WINDOWS_VAR: (cv.EVENT_WINDOWS_DIMS, waveforms)}
    if split is not None:
        variables[cv.SPLIT_VAR] = (cv.TRACE, split)
    coords: dict[str, Any] = {name: (cv.TRACE, values) for name, values in columns.items()}
    coords[cv.CHANNEL] = (cv.CHANNEL, np.array(list(channels), dtype=object))
    return xr.Dataset(
        variables,
        coords=coords,
        attrs={
            cv.ATTR_SAMPLING_RATE: float(sampling_rate_hz),
            cv.ATTR_COMPONENT_ORDER: "".join(channels),
            **(attrs or {}),
        },
    )


def per_trace_frame(dataset: xr.Dataset) -> pd.DataFrame:
    """The per-trace coordinates and variables of an in-memory (or lazy) store as the catalogue
    table: one row per trace, store order; text as `str`."""
    names = [
        str(name)
        for name, variable in (*dataset.coords.items(), *dataset.data_vars.items())
        if variable.dims == (cv.TRACE,) and name != cv.TRACE
    ]
    columns: dict[str, Any] = {}
    for name in names:
        values = np.asarray(dataset[name].values)
        if values.dtype == object and pd.api.types.infer_dtype(values, skipna=False) == "string":
            columns[name] = pd.array(values, dtype="str")  # every value a str already
        elif values.dtype.kind in "OTU":
            columns[name] = pd.array([str(v) for v in values.tolist()], dtype="str")
        else:
            columns[name] = values
    return pd.DataFrame(columns, index=pd.RangeIndex(dataset.sizes[cv.TRACE]))


def file_sha256(path) -> str:
    """Hex SHA-256 of a local file, read in 4 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(2**22), b""):
            digest.update(block)
    return digest.hexdigest()


def input_entry(path) -> dict[str, Any]:
    """Provenance of one input file: path (as given), size, sha256."""
    from pathlib import Path

    return {"path": str(path), "size": Path(path).stat().st_size, "sha256": file_sha256(path)}


def lazy_inputs(paths) -> Any:
    """`[input_entry(path) for path in paths]` as one Delayed, a task per file (the hashing
    runs on the cluster, beside the ingest's tasks)."""
    import dask

    entry = dask.delayed(input_entry, pure=True)
    return dask.delayed(list, pure=True)([entry(str(path)) for path in paths])


def seisctf_version() -> str:
    from importlib.metadata import version

    return version("seisctf")


# --- resampling ----------------------------------------------------------------------------------


def rate_ratio(source_rate_hz: float, target_rate_hz: float, what: str) -> tuple[int, int]:
    """(up, down) with up / down = target / source, denominator ≤ MAX_RATE_DENOMINATOR."""
    if not (math.isfinite(source_rate_hz) and source_rate_hz > 0):
        raise InvalidInput(what, f"sampling rate must be a positive number, got {source_rate_hz}")
    ratio = Fraction(target_rate_hz / source_rate_hz).limit_denominator(MAX_RATE_DENOMINATOR)
    if abs(float(ratio) * source_rate_hz - target_rate_hz) > 1e-9 * target_rate_hz:
        raise InvalidInput(
            what,
            f"cannot resample {source_rate_hz} Hz to {target_rate_hz} Hz by a ratio with "
            f"denominator ≤ {MAX_RATE_DENOMINATOR}",
        )
    return ratio.numerator, ratio.denominator


def resampled_length(n_samples: int | np.ndarray, up: int, down: int) -> int | np.ndarray:
    """Length of `resample_windows`' output: ceil(n · up / down), as resample_poly gives."""
    return -(-n_samples * up // down)


def resample_windows(windows: np.ndarray, up: int, down: int) -> np.ndarray:
    """Resample along the last axis by up / down: scipy.signal.resample_poly (polyphase FIR,
    Kaiser window β = 5, zero padding at the ends), in float64. Shape (..., n) → (..., ceil(n ·
    up / down))."""
    if up == down:
        return windows
    from scipy.signal import resample_poly

    return resample_poly(np.asarray(windows, dtype=np.float64), up, down, axis=-1)


def store_rate(rates: np.ndarray, requested: float | None) -> float:
    """The store's rate: the requested one, else the rate most traces have (ties: the highest)."""
    if requested is not None:
        if not (math.isfinite(requested) and requested > 0):
            raise InvalidInput("rate", f"must be a positive number of Hz, got {requested}")
        return float(requested)
    values, counts = np.unique(np.asarray(rates, dtype=np.float64), return_counts=True)
    best = counts == counts.max()
    return float(values[best].max())


def rescale_sample_columns(frame: pd.DataFrame, factor: np.ndarray) -> list[str]:
    """Multiply every numeric `*_sample` column by `factor` (per row: store rate / source rate),
    in place; such columns become float64 (sample positions may become fractional). Returns the
    names of the rescaled columns."""
    rescaled = []
    for name in frame.columns:
        if str(name).endswith("_sample") and pd.api.types.is_numeric_dtype(frame[name].dtype):
            if pd.api.types.is_bool_dtype(frame[name].dtype):
                continue
            values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
            frame[name] = values * factor
            rescaled.append(str(name))
    return rescaled


# --- catalogue -----------------------------------------------------------------------------------


def _legacy_catalog_url(store_url: str) -> str | None:
    """Where stores written before the catalogue moved into them kept it:
    `catalogs/NAME.parquet` beside the store (`/data/stead.zarr` → `/data/catalogs/stead.parquet`);
    None for a store without a parent folder or prefix."""
    trimmed = str(store_url).rstrip("/")
    parent, sep, name = trimmed.rpartition("/")
    if not sep:
        parent, name = ".", trimmed
    if not name or parent.endswith(":/") or parent.endswith(":"):
        return None
    stem = name[: -len(".zarr")] if name.endswith(".zarr") and len(name) > 5 else name
    return f"{parent}/{cv.CATALOGS_DIR}/{stem}.parquet"


def catalog_url(store_url: str, relative: str = CATALOG_PATH) -> str:
    """The URL of `relative` (the store's attr `catalog`, a path relative to the store; by
    default where writers put it, inside the store) for the store at `store_url`."""
    protocol, sep, path = str(store_url).rstrip("/").rpartition("://")
    resolved = posixpath.normpath(posixpath.join(path, relative))
    return f"{protocol}{sep}{resolved}" if sep else resolved


def write_catalog(frame: pd.DataFrame, store: StoreLocation) -> StoreLocation:
    """Write the catalogue of the store at `store` inside it (`CATALOG_PATH`); returns its
    location. The store's attr `catalog` must then say `CATALOG_PATH` (written with the attrs)."""
    catalog = store.with_url(catalog_url(store.url))
    fs, path = catalog.filesystem()
    fs.makedirs(path.rpartition("/")[0], exist_ok=True)
    with fs.open(path, "wb") as file:
        frame.to_parquet(file, index=False, engine="pyarrow")
    return catalog


def find_catalog(store: StoreLocation) -> StoreLocation:
    """The location of the store's catalogue: where its attr `catalog` says (relative to the
    store), else inside the store, else beside it as stores of earlier versions kept it."""
    relative = storage.open_group(store).attrs.get("catalog")
    if relative:
        return store.with_url(catalog_url(store.url, str(relative)))
    inside, legacy = store.with_url(catalog_url(store.url)), _legacy_catalog_url(store.url)
    return store.with_url(legacy) if legacy is not None and not _exists(inside) else inside


def _exists(location: StoreLocation) -> bool:
    fs, path = location.filesystem()
    return bool(fs.exists(path))


def read_catalog(store: StoreLocation) -> pd.DataFrame:
    """The Parquet catalogue of the store at `store` (`find_catalog`)."""
    catalog = find_catalog(store)
    if not _exists(catalog):
        raise InvalidInput(catalog.url, "no Parquet catalogue there")
    import pyarrow

    fs, path = catalog.filesystem()
    try:
        with fs.open(path, "rb") as file:
            return pd.read_parquet(file, engine="pyarrow")
    except pyarrow.ArrowException as error:
        raise InvalidInput(catalog.url, f"not a readable Parquet catalogue ({error})") from None


# --- the writer ----------------------------------------------------------------------------------


def write_event_windows(
    dataset: xr.Dataset,
    store: StoreLocation,
    *,
    layout: WindowLayout | None = None,
    label: str = "write event windows",
    quiet: bool = False,
    before_finish: Callable[[StoreLocation], None] | None = None,
) -> xr.Dataset:
    """Write an event-window Dataset (waveforms lazy or in memory, per-trace values in memory)
    as a zarr v3 store at `store` with `layout` (default: `choose_layout`), then its Parquet
    catalogue, then attrs and the completion marker, last (attrs that are Dask collections,
    such as the inputs' sha256, are computed with the waveforms). The waveforms are (re)chunked to
    whole shards per write task, so the store's bytes never depend on the source's chunks or
    the number of workers. The per-trace `trace_gap_fraction` is measured from the windows as
    they are written, unless the dataset has one. Returns the dataset as written (per-trace
    values as stored). `before_finish(store)` writes what else the store holds (e.g. a group
    of an ingest's problem lines) after the catalogue, before the attrs and the marker."""
    import dask
    import dask.array as da

    url = store.url
    cv.validate_event_window_store(dataset, url)
    if cv.TRACE_NPTS not in dataset.coords:
        raise InvalidInput(url, f"event windows need the per-trace {cv.TRACE_NPTS!r}")
    _, n_channel, n_sample = dataset[cv.EVENT_WINDOWS_VAR].shape
    layout = layout or choose_layout(n_channel, n_sample)
    waveforms = dataset[cv.EVENT_WINDOWS_VAR].data
    if not isinstance(waveforms, da.Array):
        waveforms = da.from_array(np.asarray(waveforms), chunks=(layout.write_traces, -1, -1))
    per_task = task_traces(layout, n_channel, n_sample)
    if waveforms.dtype != np.float32:
        waveforms = waveforms.astype(np.float32)
    waveforms = waveforms.rechunk((_aligned_chunks(waveforms.chunks[0], per_task), -1, -1))
    attrs = dict(dataset.attrs)
    attrs["layout"] = layout.describe()
    out = dataset.copy()
    out[cv.EVENT_WINDOWS_VAR] = (cv.EVENT_WINDOWS_DIMS, waveforms)
    gaps = None  # a source's own column is kept (an export's: its gaps are zeros by now)
    if cv.TRACE_GAP_FRACTION not in out.variables:
        gaps = lazy_gap_fractions(waveforms, out[cv.TRACE_NPTS].values)
        # Written after the waveforms, from the same reads; NaN until then.
        out = out.assign_coords({cv.TRACE_GAP_FRACTION: (cv.TRACE, np.full(gaps.shape, np.nan))})
    out.attrs = {}
    for name in out.variables:
        out[name].encoding = {}
    encoding = {cv.EVENT_WINDOWS_VAR: layout.encoding(n_channel, n_sample)}
    delayed = storage.start_dataset(out, store, encoding)
    if not store.is_remote:  # the same shards, written by TensorStore
        delayed = _tensorstore_writes(waveforms, url)
    lazy = {key: value for key, value in attrs.items() if dask.is_dask_collection(value)}
    _, computed, fractions = compute(delayed, lazy, gaps, label=label, quiet=quiet)
    attrs.update(computed)  # in place: the attrs keep their order
    if fractions is not None:
        group = storage.open_group(store, mode="r+")
        storage.group_array(group, cv.TRACE_GAP_FRACTION, store.url)[:] = fractions
        out = out.assign_coords({cv.TRACE_GAP_FRACTION: (cv.TRACE, fractions)})
    write_catalog(per_trace_frame(out), store)
    attrs["catalog"] = CATALOG_PATH
    if before_finish is not None:
        before_finish(store)
    storage.finish_group(store, attrs)
    return out


def lazy_gap_fractions(waveforms, npts: np.ndarray):
    """(trace,) float64 Dask array, one task per block of `waveforms` (trace, channel, sample;
    one chunk along channel and sample): each window's `trace_gap_fraction`
    (`window_components.gap_fractions`), `npts` (trace,) its samples."""
    import dask.array as da

    npts = da.from_array(np.asarray(npts, dtype=np.int64), chunks=(waveforms.chunks[0],))
    return da.blockwise(
        gap_fractions, "t", waveforms, "tcs", npts, "t", dtype=np.float64, concatenate=True
    )


def _tensorstore_writes(waveforms, url: str) -> list:
    """One Delayed per block of `waveforms` writing it into the local store at `url`
    (`window_writes.write_windows`)."""
    import dask

    starts = np.cumsum((0, *waveforms.chunks[0][:-1]))
    write = dask.delayed(window_writes.write_windows, pure=False)
    return [
        write(block, url, int(start))
        for block, start in zip(waveforms.to_delayed().ravel(), starts, strict=True)
    ]


def _aligned_chunks(chunks: tuple[int, ...], per_task: int) -> tuple[int, ...]:
    """Chunks of `per_task` traces (a multiple of the shard) whatever the source's chunks."""
    total = int(sum(chunks))
    if total == 0:
        return (0,)
    sizes = [per_task] * (total // per_task)
    if total % per_task:
        sizes.append(total % per_task)
    return tuple(sizes)


# --- the read path for training loops ------------------------------------------------------------


class TensorStoreWindows(BackendArray):
    """`waveforms` read through TensorStore, as an xarray backend array (outer indexing): a
    batch of windows is one TensorStore read, its chunks fetched, decoded and gathered in C++."""

    def __init__(self, array) -> None:
        self._array = array
        self.shape = tuple(int(n) for n in array.shape)
        self.dtype = np.dtype(array.dtype.numpy_dtype)

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read
        )

    def _read(self, key: tuple) -> np.ndarray:
        return self._array.oindex[key].read().result()


def open_event_windows(
    url: LocationLike, storage_options: Mapping[str, Any] | None = None
) -> xr.Dataset:
    """Open a complete event-window store (a path or fsspec URL with `storage_options`, or a
    `StoreLocation`) for random access (training loops): as `xr.open_zarr(url, chunks=None)`
    (lazily indexed NumPy, no Dask), with `waveforms` read through TensorStore, so
    `open_event_windows(url).waveforms.isel(trace=idx).values` reads a batch of random windows
    several times faster than zarr-python's orthogonal indexing does (benchmarks/RESULTS.md).
    Local stores; any other URL opens with zarr-python alone (the same values, slower
    batches)."""
    store = StoreLocation.from_url(url, storage_options)
    storage.require_complete(storage.open_group(store), store.url)
    dataset = xr.open_zarr(
        store.url, chunks=None, consolidated=True, zarr_format=3, storage_options=store.options
    )
    cv.validate_event_window_store(dataset, store.url)
    if store.is_remote:
        return dataset
    import tensorstore

    path = store.url.removeprefix("file://").rstrip("/")
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": f"{path}/{cv.EVENT_WINDOWS_VAR}"},
    }
    backend = TensorStoreWindows(tensorstore.open(spec, read=True).result())
    variable = dataset[cv.EVENT_WINDOWS_VAR].variable
    dataset[cv.EVENT_WINDOWS_VAR] = xr.Variable(
        variable.dims, indexing.LazilyIndexedArray(backend), variable.attrs, variable.encoding
    )
    return dataset
