"""SeisBench's `WaveformDataset` over an event-window store, local or remote
(`seisctf.catalogs.seisbench_dataset`).

`StoreWaveformDataset` is a `seisbench.data.WaveformDataset` whose metadata is the store's
Parquet catalogue and whose waveforms come from the store's shards by byte ranges
(`window_reader.WindowReader`): everything SeisBench's own code does with a dataset —
`GenericGenerator` and its augmentations, `train()`/`dev()`/`test()`, `filter`,
`get_waveforms`, `get_sample`, grouping — runs unchanged on it, in DataLoader workers too.

Against `WaveformDataset(DIR)` on the folder the store was ingested from (same rate and
component order, float32 waveforms):
- the same rows in the same order, every column of the dataset's metadata under its name and
  value (missing text NaN, `source_origin_time` parsed to UTC datetimes, as SeisBench reads
  its CSV files), plus the store's own
  `trace_npts`, `split_cluster` where a split made one, and `trace_store_row` (the window's
  position in the store, which reads use);
- the same waveforms: each window cut to its `trace_npts` samples, then SeisBench's own
  resampling (`sampling_rate`), component mapping, padding and dimension order, so samples,
  and every augmentation of them, are equal value for value.
Missing components: a window's component whose samples are all NaN (a component the station
lacks, NaN in the store) is missing, as a component absent from a trace's
`trace_component_order` is in SeisBench: `missing_components` pads it with zeros (`pad`, the
default), copies the first present component (`copy`) or leaves it out (`ignore`); a window
without any sample reads as zeros. A gap inside a present component (NaN in the store) reads as
zeros, as SeisBench's converters fill it (`window_components`); `trace_gap_fraction` in the
metadata says how much of each trace that is (`metadata[...] == 0` keeps windows without gaps).
Differences: `trace_component_order` is the store's for every row (ingest put every window
in the store's component order); waveforms are float32 whatever the source's dtype (the
store's); a store made from a dataset of mixed rates holds every window at the store's rate
(`trace_sampling_rate_hz`, `*_sample` columns rescaled at ingest), so its samples are those of
the original at that rate; SeisBench's all-or-nothing `cache` is replaced by the reader's
bounded cache (`cache_bytes`).
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd
import seisbench.data as sbd
import seisbench.util

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows as ew
from seisctf.catalogs.window_components import gaps_as_zeros, present_components
from seisctf.catalogs.window_reader import DEFAULT_CACHE_BYTES, WindowReader
from seisctf.errors import InvalidInput
from seisctf.location import LocationLike, StoreLocation

STORE_ROW = "trace_store_row"  # the window's position along the store's `trace`


class StoreWaveformDataset(sbd.WaveformDataset):
    """A SeisBench `WaveformDataset` reading an event-window store (module doc). Build it with
    `seisctf.catalogs.seisbench_dataset`; the constructor takes the store's location and that
    function's options."""

    def __init__(
        self,
        store: StoreLocation,
        *,
        name: str | None = None,
        component_order: str | None = None,
        dimension_order: str | None = None,
        sampling_rate: float | None = None,
        missing_components: Literal["pad", "copy", "ignore"] = "pad",
        metadata_cache: bool = True,
        resample_zerophase: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        signed_urls: bool = True,
    ) -> None:
        # WaveformDataset.__init__ reads metadata CSV and HDF5 files from a folder: not called.
        # The attributes it sets are set here in its order, from the store.
        url = store.url
        group = storage.require_complete(storage.open_group(store), url)
        attrs: dict[str, Any] = dict(group.attrs)
        self.url = url
        self._reader = WindowReader(store, cache_bytes, signed_urls)
        if cv.ATTR_SAMPLING_RATE not in attrs:
            raise InvalidInput(str(url), f"no attr {cv.ATTR_SAMPLING_RATE!r}: not event windows")
        sampling_rate_hz = cv.sampling_rate_hz(attrs, str(url))
        channels = str(attrs.get(cv.ATTR_COMPONENT_ORDER) or "")
        if len(channels) != self._reader.layout.shape[1]:
            raise InvalidInput(
                str(url), f"attr {cv.ATTR_COMPONENT_ORDER!r} {channels!r} does not name channels"
            )
        self._name = name or str(attrs.get(cv.ATTR_DATASET) or url)
        self._cache = None
        self._path = str(url)
        self._chunks = None
        self._missing_components = None
        self._trace_identification_warning_issued = False
        self._dimension_order = None
        # The two mappings are SeisBench's, filled by its (untyped) order setters below.
        self._dimension_mapping: Any = None
        self._component_order = None
        self._component_mapping: Any = None
        self._metadata_lookup: MetadataRows | None = None
        self._chunks_with_paths_cache = None
        self.sampling_rate = sampling_rate
        catalog = ew.read_catalog(store)
        self._metadata = seisbench_metadata(catalog, channels, sampling_rate_hz)
        self._npts = self._metadata[cv.TRACE_NPTS].to_numpy(dtype=np.int64).copy()
        self._data_format = {
            **dict(attrs.get("seisbench_data_format") or {}),
            "dimension_order": "CW",
            "component_order": channels,
            "sampling_rate": sampling_rate_hz,
        }
        self._build_trace_name_to_idx_dict()
        self.dimension_order = dimension_order
        self.component_order = component_order or channels
        self.missing_components = missing_components
        self.metadata_cache = metadata_cache
        self.resample_zerophase = resample_zerophase
        self._waveform_cache: defaultdict[Any, dict] = defaultdict(dict)
        self.grouping = None

    def __str__(self) -> str:
        return f"{self._name} ({self.url}) - {len(self)} traces"

    @property
    def cache_bytes(self) -> int:
        """The most bytes of shard indexes and compressed windows kept per process."""
        return self._reader.cache_bytes

    @property
    def chunks(self) -> list[str]:
        return sorted(set(self._metadata[cv.TRACE_CHUNK].astype(str)))

    def preload_waveforms(self, pbar: bool = False) -> None:
        """Nothing to preload: reads go through the bounded cache (`cache_bytes`)."""
        logging.getLogger("seisbench").warning(
            "Skipping preload: a store-backed dataset reads through its bounded cache."
        )

    def prefetch(self, idx) -> None:
        """Read the windows of samples `idx` (positions in `metadata`) at once, concurrently,
        and hold them until the next call (`WindowReader.prefetch`): what a batch reads before
        its samples are made one by one (`seisbench_training.BatchReads`)."""
        rows = self._metadata[STORE_ROW].to_numpy()[np.asarray(idx, dtype=np.int64)]
        self._reader.prefetch(rows)

    def copy(self) -> StoreWaveformDataset:
        other = copy.copy(self)
        other._metadata = self._metadata.copy()
        other._waveform_cache = defaultdict(dict)
        return other

    def _rebuild_metadata_cache(self) -> None:
        """SeisBench's per-row lookup (`metadata_cache`), columnar (`MetadataRows`: no list of
        row dicts), rebuilt like SeisBench's whenever the table is replaced (filter, splits,
        setting `metadata_cache`)."""
        self._metadata_lookup = MetadataRows(self._metadata) if self._metadata_cache else None

    def _get_waveforms_from_load_metadata(
        self, load_metadata: dict[str, list], sampling_rate: float | None, pack: bool = True
    ):
        """SeisBench's one read path (get_sample, get_waveforms, groups), from the store: each
        row's window cut to its samples, its gaps made zeros, resampled (SeisBench's
        `_resample`), put in the output component order, then packed (zero-padded) in
        `dimension_order`."""
        rows = np.asarray(load_metadata[STORE_ROW], dtype=np.int64)
        sources = load_metadata.get(cv.TRACE_SOURCE_SAMPLING_RATE, [0.0] * len(rows))
        orders = load_metadata[cv.TRACE_COMPONENT_ORDER]
        if rows.size == 1:  # get_sample's
            unique, position = rows, np.zeros(1, dtype=np.int64)
        else:
            unique, position = np.unique(rows, return_inverse=True)
        windows = self._reader.read(unique)
        waveforms = []
        for k, (row, source_rate, order) in enumerate(zip(rows, sources, orders, strict=True)):
            waveform = windows[position[k], :, : self._npts[row]]
            present = present_components(waveform)
            waveform = gaps_as_zeros(waveform)  # as SeisBench's own datasets hold gaps
            if sampling_rate is not None:
                waveform = self._resample(waveform, sampling_rate, float(source_rate))
            waveforms.append(self._in_component_order(waveform, order, present))
        if self.missing_components == "ignore" and len({w.shape[0] for w in waveforms}) > 1:
            raise ValueError(
                "Requested traces with mixed number of components. "
                "Change missing_components or request traces separately."
            )
        if pack:
            if len(waveforms) == 1:  # get_sample's: a new axis, not SeisBench's stacking copy
                packed = waveforms[0][None]
            else:
                packed = seisbench.util.pad_packed_sequence(waveforms)
            return packed.transpose(*self._dimension_mapping)
        return [self._transpose_single_waveform(waveform) for waveform in waveforms]

    def _in_component_order(
        self, waveform: np.ndarray, source_order: str, present: np.ndarray
    ) -> np.ndarray:
        """(channel, sample) in the output component order, as SeisBench's
        `_get_single_waveform` does. The window's components are the rows of `source_order`
        that `present` marks (`window_components`): a row all NaN is missing, as a component
        absent from a SeisBench trace's `trace_component_order` is: padded with zeros (`pad`),
        the first present one copied (`copy`) or left out (`ignore`). A window without any
        sample reads as zeros in every component."""
        if not present.any():
            waveform, present = np.zeros_like(waveform), ~present
        if not present.all():
            source_order = "".join(np.asarray(list(source_order))[present])
            waveform = waveform[present]
        mapping = self._component_mapping.get(source_order)
        if mapping is None:  # SeisBench maps the metadata's orders; subsets are mapped here
            mapping = self._get_component_mapping(source_order, self.component_order)
            self._component_mapping[source_order] = mapping
        if mapping and waveform.shape[0] == max(mapping):
            waveform = np.pad(waveform, [(0, 1), (0, 0)], "constant", constant_values=0)
        return waveform.take(mapping, axis=0)


class MetadataRows:
    """Rows of a metadata table as dicts equal to `frame.iloc[i].to_dict()` (Python scalars,
    Timestamps for datetimes), read from the table's columns: nothing copied per row."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._columns = [(name, _item_getter(column)) for name, column in frame.items()]
        self._length = len(frame)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, i: int) -> dict:
        row = Row()
        for name, item in self._columns:
            row[name] = item(i)
        return row


def _item_getter(column: pd.Series):
    """A function of a row position giving the column's value there as `iloc[i].to_dict()`
    does: numbers, booleans and text as Python's (NumPy's `item`, one call), the others as
    `_row_values` holds them (NumPy scalars made Python ones)."""
    values = _row_values(column)
    if isinstance(values, np.ndarray) and values.dtype.kind in "biufT":
        return values.item

    def item(i: int):
        value = values[i]
        return value.item() if isinstance(value, np.generic) else value

    return item


def _row_values(column: pd.Series):
    """A column for fast item access: NumPy columns as they are; text as NumPy's variable-width
    strings (compact, items are `str`, missing ones NaN as pandas gives them); the others
    (datetimes, …) as pandas' array."""
    if isinstance(column.dtype, np.dtype):
        return column.to_numpy()
    if isinstance(column.dtype, pd.StringDtype):
        text = np.dtypes.StringDType(na_object=np.nan)
        return np.asarray(column.to_numpy(dtype=object, na_value=np.nan), dtype=text)
    return column.array


class Row(dict):
    """A metadata row: a dict whose deep copy (SeisBench's `get_sample` and augmentations take
    one at almost every step) shares the immutable values (numbers, str, Timestamps, NumPy
    scalars) and deep-copies only the others (arrays an augmentation put in and may change in
    place): equal to `copy.deepcopy` of a dict, a Row again, and much cheaper."""

    def __deepcopy__(self, memo) -> Row:
        twin = Row()
        for key, value in self.items():
            twin[key] = value if isinstance(value, IMMUTABLE) else copy.deepcopy(value, memo)
        return twin


IMMUTABLE = (int, float, str, bool, type(None), pd.Timestamp, np.generic)


def seisbench_metadata(
    catalog: pd.DataFrame, channels: str, sampling_rate_hz: float
) -> pd.DataFrame:
    """The store's catalogue as SeisBench's metadata table: SeisBench's columns
    (`trace_chunk`, `trace_component_order`, `trace_sampling_rate_hz`) where the catalogue has
    none, text as pandas' `str` with missing values NaN (as SeisBench reads its CSV files),
    `source_origin_time` as UTC datetimes, `trace_store_row`; the index 0…n-1."""
    frame = catalog.reset_index(drop=True)
    n = len(frame)
    if cv.TRACE_NPTS not in frame.columns:
        raise InvalidInput("catalogue", f"no {cv.TRACE_NPTS!r} column")
    for name in frame.columns:  # missing text: "" in the store, NaN in SeisBench's CSV reading
        if name != cv.TRACE_CHUNK and not pd.api.types.is_numeric_dtype(frame[name].dtype):
            if frame[name].dtype.kind != "M":
                text = frame[name].astype("str")
                frame[name] = text.mask(text == "")
    chunks = frame[cv.TRACE_CHUNK] if cv.TRACE_CHUNK in frame.columns else pd.Series([""] * n)
    frame[cv.TRACE_CHUNK] = chunks.fillna("").astype("str")
    if cv.TRACE_COMPONENT_ORDER not in frame.columns:
        frame[cv.TRACE_COMPONENT_ORDER] = pd.array([channels] * n, dtype="str")
    if cv.TRACE_SAMPLING_RATE not in frame.columns:
        frame[cv.TRACE_SAMPLING_RATE] = sampling_rate_hz
    frame[cv.TRACE_SAMPLING_RATE] = frame[cv.TRACE_SAMPLING_RATE].astype(np.float64)
    if "source_origin_time" in frame.columns:  # the store's naive datetimes are UTC
        frame["source_origin_time"] = pd.to_datetime(frame["source_origin_time"], utc=True)
    frame[STORE_ROW] = np.arange(n, dtype=np.int64)
    return frame


def seisbench_dataset(
    url: LocationLike, storage_options: Mapping[str, Any] | None = None, **options: Any
) -> StoreWaveformDataset:
    """The event-window store at `url` (any fsspec URL with `storage_options`, or a
    `StoreLocation`) as a `seisbench.data.WaveformDataset`
    that SeisBench's generators, augmentations and DataLoader workers use unchanged (module
    doc). `options`: `component_order` (default: the store's), `dimension_order`,
    `sampling_rate`, `missing_components`, `metadata_cache` (default True), `resample_zerophase`
    as SeisBench's; `name`; `cache_bytes`, the most bytes of shard indexes and compressed
    windows each process keeps (default `window_reader.DEFAULT_CACHE_BYTES`, 256 MiB);
    `signed_urls` (S3: single windows over presigned URLs, default True; `window_reader`)."""
    return StoreWaveformDataset(StoreLocation.from_url(url, storage_options), **options)
