"""Open a seisctf store as an xarray Dataset with its axes: `seisctf.open_store(url)`.

    import seisctf
    ds = seisctf.open_store("archive.zarr")              # or s3://…, storage_options={…}
    part = ds.data.sel(station="IU.ANMO.10", time=slice("2018-01-01T00:10", "2018-01-01T00:20"))
    part.load()                                          # reads only that span's chunks

One call, lazy (Dask, as `storage.open_dataset`: the store must be complete; opening costs the
metadata and each axis's chunk sizes, not the chunks, so a store of 552 stations × 25 years at
100 Hz, 1.7e8 chunks, opens in a fraction of a second). It adds what the stored arrays leave
implicit:

- `time` (datetime64[ns], UTC, naive) on a continuous waveform store (`ingest waveforms`) and
  a DAS store (`ingest das`, `synth das`): sample i is at `start_time_ns` (else the ISO
  `start_time`) + i × `time_step_ns` where the store records it (DAS), else
  + round(i × 1e9 / `sampling_rate`) ns, exactly the grid the ingest wrote on. Every station of
  a waveform store shares this grid (each trace starts at its nearest grid sample; the offset,
  under half a sample, is in the attr `time_offsets_s`).
- `distance` (m along the fibre) of a DAS store, when the stored coordinate is regular
  (`distance[0]` + i × `channel_spacing_m`, as the ingest writes it); else the stored one stays.

Both are lazy: a `CoordinateTransform` (`RegularTime`, `RegularDistance`) behind a
`CoordinateTransformIndex` (`GridIndex`), so opening a store of billions of samples allocates
nothing per sample; only the labels a selection or a plot asks for are computed. The other axes
and coordinates stay as stored (`station`, `channel`, `latitude`, `longitude`, `elevation`,
`water_depth`, …).

Selection (`GridIndex.sel`) works as on a pandas index of the same labels, where every label is
an instant: a text label is the instant it writes (`"2018-01-01T00:20"` is 00:20:00.000, not
pandas' whole minute; a trailing `Z` or offset converts to UTC), as obspy's `UTCDateTime` reads
it; `numpy.datetime64`, `datetime`, `pandas.Timestamp` and obspy's `UTCDateTime` work too. A
slice keeps the samples from its start to its stop, both included (obspy's
`Trace.slice(start, stop, nearest_sample=False)`); a single label must be a sample's own time
unless `method="nearest"` (or `"pad"`, `"backfill"`, with `tolerance`). `isel` with a slice
keeps the index lazy; an array of positions (or a mask) gives an ordinary pandas index of those
labels. Alignment (`a + b`, `xr.align`) and `xr.concat` of pieces of one axis stay lazy where the
result is a regular piece of it (inner and outer joins, contiguous pieces), else give the pandas
index the same operation gives on materialised labels.

Other stores (wavefields with their own `time` coordinate in seconds, event windows, bundles)
open as `storage.open_dataset` opens them. Plain `xarray.open_zarr(url)` opens every store too,
with positions along `time` and no time labels: a lazy coordinate cannot be stored in zarr in a
form xarray reads without building an index of every sample.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from xarray.core.indexing import IndexSelResult
from xarray.indexes import CoordinateTransform, CoordinateTransformIndex, PandasIndex

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.location import LocationLike, StoreLocation

NS_PER_S = 1_000_000_000
NANOSECONDS = np.dtype("datetime64[ns]")
# Selection methods as pandas names them: the nearest sample, the last at or before the label,
# the first at or after it.
NEAREST, PAD, BACKFILL = "nearest", ("pad", "ffill"), ("backfill", "bfill")


# --- transforms: grid index <-> label ----------------------------------------------------------


class RegularGrid(CoordinateTransform):
    """A 1-D axis on a regular grid, possibly sliced: the label at position i (0 ≤ i < size) is
    the grid's value at grid index `first + i × stride` (stride ≥ 1). Subclasses define the grid
    (`values`, increasing with the grid index), its approximate inverse (`grid_index`), how
    labels become comparable numbers (`numbers`) and numbers labels (`labels`)."""

    def __init__(self, name: str, size: int, dtype: Any, first: int = 0, stride: int = 1):
        super().__init__([name], {name: int(size)}, dtype=dtype)
        self.first, self.stride = int(first), int(stride)

    # the grid, in numbers (int64 ns, float64 m): defined by subclasses
    def values(self, grid_index: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def grid_index(self, numbers: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def numbers(self, labels: Any) -> np.ndarray:
        raise NotImplementedError

    def labels(self, numbers: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def same_grid(self, other: RegularGrid) -> bool:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """The dimension."""
        return self.dims[0]

    @property
    def coord_name(self) -> Hashable:
        """The coordinate (the dimension's name unless renamed)."""
        return self.coord_names[0]

    @property
    def size(self) -> int:
        return self.dim_size[self.name]

    def at(self, positions: Any) -> np.ndarray:
        """Numbers at integer positions of this axis."""
        positions = np.asarray(positions, dtype=np.int64)
        return self.values(self.first + positions * self.stride)

    def forward(self, dim_positions: dict[str, Any]) -> dict[Hashable, Any]:
        positions = np.rint(np.asarray(dim_positions[self.name])).astype(np.int64)
        return {self.coord_name: self.labels(self.at(positions))}

    def reverse(self, coord_labels: dict[Hashable, Any]) -> dict[str, Any]:
        grid = self.grid_index(self.numbers(coord_labels[self.coord_name]))
        return {self.name: (grid - self.first) / self.stride}

    def equals(self, other: CoordinateTransform, **kwargs: Any) -> bool:
        return (
            type(other) is type(self)
            and self.same_grid(other)
            and (self.first, self.stride, self.size) == (other.first, other.stride, other.size)
        )

    def sliced(self, positions: range) -> RegularGrid:
        """The axis at `positions` (a range of this axis's positions, step ≥ 1)."""
        part = copy.copy(self)
        part.first = self.first + positions.start * self.stride
        part.stride = self.stride * positions.step
        part.dim_size = {self.name: len(positions)}
        return part

    def _guess(self, number: float) -> float:
        position = float(self.reverse_number(number))
        return min(max(position, -1.0), float(self.size)) if math.isfinite(position) else 0.0

    def reverse_number(self, number: Any) -> float:
        grid = self.grid_index(np.asarray([number]))[0]
        return (grid - self.first) / self.stride

    def first_at_or_after(self, number: Any) -> int:
        """The first position whose number is ≥ `number` (`size` when none is)."""
        i = int(np.clip(math.ceil(self._guess(number)), 0, self.size))
        while i > 0 and self.at(i - 1) >= number:
            i -= 1
        while i < self.size and self.at(i) < number:
            i += 1
        return i

    def last_at_or_before(self, number: Any) -> int:
        """The last position whose number is ≤ `number` (-1 when none is)."""
        i = int(np.clip(math.floor(self._guess(number)), -1, self.size - 1))
        while i < self.size - 1 and self.at(i + 1) <= number:
            i += 1
        while i >= 0 and self.at(i) > number:
            i -= 1
        return i


class RegularTime(RegularGrid):
    """Sample times (datetime64[ns]): grid index k at `start_ns` + k × `step_ns` when the store
    records an exact step (DAS), else `start_ns` + round(k × 1e9 / `sampling_rate_hz`) (the waveform
    ingest's `grid_time_ns`, the same float operations)."""

    def __init__(
        self, size: int, start_ns: int, sampling_rate_hz: float, step_ns: int | None = None
    ):
        super().__init__(cv.TIME, size, NANOSECONDS)
        self.start_ns, self.sampling_rate_hz, self.step_ns = (
            int(start_ns),
            float(sampling_rate_hz),
            step_ns,
        )

    def values(self, grid_index: np.ndarray) -> np.ndarray:
        if self.step_ns is not None:
            return self.start_ns + grid_index * np.int64(self.step_ns)
        offsets = np.rint(grid_index.astype(np.float64) * NS_PER_S / self.sampling_rate_hz)
        return self.start_ns + offsets.astype(np.int64)

    def grid_index(self, numbers: np.ndarray) -> np.ndarray:
        elapsed = (numbers - self.start_ns).astype(np.float64)
        if self.step_ns is not None:
            return elapsed / self.step_ns
        return elapsed * self.sampling_rate_hz / NS_PER_S

    def numbers(self, labels: Any) -> np.ndarray:
        return time_ns(labels)

    def labels(self, numbers: np.ndarray) -> np.ndarray:
        return np.asarray(numbers, dtype=np.int64).view(NANOSECONDS)

    def same_grid(self, other: RegularGrid) -> bool:
        return isinstance(other, RegularTime) and (
            self.start_ns,
            self.sampling_rate_hz,
            self.step_ns,
        ) == (
            other.start_ns,
            other.sampling_rate_hz,
            other.step_ns,
        )

    def __repr__(self) -> str:
        return (
            f"RegularTime(start={np.int64(self.start_ns).view(NANOSECONDS)}, "
            f"sampling_rate_hz={self.sampling_rate_hz:g}, first={self.first}, "
            f"stride={self.stride}, size={self.size})"
        )


class RegularDistance(RegularGrid):
    """Positions along a fibre (float64, m): grid index k at `start_m` + `step_m` × k (the DAS
    ingest's `distance_start_m + distance_step_m * np.arange(n)`)."""

    def __init__(self, size: int, start_m: float, step_m: float):
        super().__init__(cv.DISTANCE, size, np.dtype(np.float64))
        self.start_m, self.step_m = float(start_m), float(step_m)

    def values(self, grid_index: np.ndarray) -> np.ndarray:
        return self.start_m + self.step_m * grid_index

    def grid_index(self, numbers: np.ndarray) -> np.ndarray:
        return (numbers - self.start_m) / self.step_m

    def numbers(self, labels: Any) -> np.ndarray:
        values = np.asarray(labels)
        if values.dtype.kind not in "iuf":
            raise TypeError(f"{self.name} labels are numbers (m), got {values.dtype}")
        return values.astype(np.float64)

    def labels(self, numbers: np.ndarray) -> np.ndarray:
        return np.asarray(numbers, dtype=np.float64)

    def same_grid(self, other: RegularGrid) -> bool:
        return isinstance(other, RegularDistance) and (self.start_m, self.step_m) == (
            other.start_m,
            other.step_m,
        )

    def __repr__(self) -> str:
        return (
            f"RegularDistance(start_m={self.start_m:g}, step_m={self.step_m:g}, "
            f"first={self.first}, stride={self.stride}, size={self.size})"
        )


def time_ns(labels: Any) -> np.ndarray:
    """Time labels -> int64 ns since 1970 (UTC): text (ISO 8601; an offset or `Z` converts to
    UTC), numpy.datetime64, datetime, pandas.Timestamp, obspy.UTCDateTime (its `ns`), or arrays
    of them. Numbers are refused (they would silently mean ns since 1970)."""
    if isinstance(getattr(labels, "ns", None), int):  # obspy.UTCDateTime
        return np.asarray(labels.ns, dtype=np.int64)
    values = np.asarray(labels)
    if values.dtype.kind == "M":
        return values.astype(NANOSECONDS).view(np.int64)
    if values.dtype.kind in "iufcb":
        raise TypeError(f"time labels are dates and times, got numbers ({values.dtype})")
    flat = [
        pd.Timestamp(v.ns, unit="ns", tz="UTC") if isinstance(getattr(v, "ns", None), int) else v
        for v in values.ravel().tolist()
    ]
    if any(isinstance(v, int | float) for v in flat):
        raise TypeError("time labels are dates and times, got numbers")
    parsed = pd.to_datetime(pd.Index(flat, dtype=object), utc=True, format="ISO8601")
    parsed = parsed.tz_localize(None)
    return parsed.as_unit("ns").asi8.reshape(values.shape)


# --- the index --------------------------------------------------------------------------------


class GridIndex(CoordinateTransformIndex):
    """An xarray index over a `RegularGrid`: label selection (slices, labels, arrays of labels,
    `method` and `tolerance` as pandas has them) and positional selection without building the
    axis's labels."""

    transform: RegularGrid

    @property
    def dim(self) -> str:
        return self.transform.name

    def isel(self, indexers: Mapping[Any, Any]) -> GridIndex | PandasIndex | None:
        indexer = indexers[self.dim]
        if isinstance(indexer, slice):
            kept = range(self.transform.size)[indexer]
            if kept.step > 0:
                return type(self)(self.transform.sliced(kept))
            positions = np.asarray(kept)
        elif np.ndim(indexer) == 0 or (isinstance(indexer, xr.Variable) and indexer.ndim > 1):
            return None
        else:
            data = np.asarray(indexer.values if isinstance(indexer, xr.Variable) else indexer)
            if data.dtype == bool:  # a mask (e.g. `where(..., drop=True)`)
                data = np.flatnonzero(data)
            positions = data.astype(np.int64) % max(self.transform.size, 1)
        values = self.transform.labels(self.transform.at(positions))
        dim = indexer.dims[0] if isinstance(indexer, xr.Variable) else self.dim
        return PandasIndex(
            pd.Index(values, name=self.transform.coord_name), dim, coord_dtype=values.dtype
        )

    def sel(self, labels: dict[Any, Any], method=None, tolerance=None) -> IndexSelResult:
        label = labels[self.transform.coord_name]
        if isinstance(label, slice):
            if method is not None or tolerance is not None:
                raise ValueError("a slice of labels takes no method or tolerance")
            return IndexSelResult({self.dim: self._slice(label)})
        data = label.values if isinstance(label, xr.DataArray | xr.Variable) else label
        numbers = self.transform.numbers(data)
        found = np.array(
            [self._position(n, label, method, tolerance) for n in np.ravel(numbers)],
            dtype=np.int64,
        ).reshape(np.shape(numbers))
        if isinstance(label, xr.DataArray):
            return IndexSelResult({self.dim: xr.DataArray(found, dims=label.dims)})
        if isinstance(label, xr.Variable):
            return IndexSelResult({self.dim: xr.Variable(label.dims, found)})
        return IndexSelResult({self.dim: found if found.ndim else int(found)})

    def _slice(self, label: slice) -> slice:
        grid = self.transform
        start = 0 if label.start is None else grid.first_at_or_after(grid.numbers(label.start))
        stop = grid.size
        if label.stop is not None:
            stop = grid.last_at_or_before(grid.numbers(label.stop)) + 1
        return slice(start, max(start, stop), label.step)

    def _position(self, number: Any, label: Any, method: Any, tolerance: Any) -> int:
        """The position of one label: exact, or by `method` within `tolerance`."""
        grid = self.transform
        after = grid.first_at_or_after(number)
        before = after if after < grid.size and grid.at(after) == number else after - 1

        def distance(p: int) -> float:  # in the grid's numbers: exact for int64 ns
            return float(abs(grid.at(p) - number))

        if method is None:
            candidates = [after] if before == after else []
        elif method == NEAREST:
            candidates = sorted(
                (p for p in {before, after} if 0 <= p < grid.size),
                key=lambda p: (distance(p), -p),
            )[:1]
        elif method in PAD:
            candidates = [before] if before >= 0 else []
        elif method in BACKFILL:
            candidates = [after] if after < grid.size else []
        else:
            raise ValueError(f"method {method!r}: expected None, nearest, pad or backfill")
        if candidates and tolerance is not None:
            limit = np.abs(self._tolerance(tolerance))
            candidates = [p for p in candidates if distance(p) <= limit]
        if not candidates:
            raise KeyError(f"{label!r} is not a label of {self.dim!r} (method={method!r})")
        return int(candidates[0])

    def _tolerance(self, tolerance: Any) -> float:
        if isinstance(self.transform, RegularTime):
            return float(pd.Timedelta(tolerance).as_unit("ns").value)
        return float(tolerance)

    def equals(self, other: Any, *, exclude: Any = None) -> bool:
        return isinstance(other, GridIndex) and self.transform.equals(other.transform)

    # --- alignment and concatenation: lazy on one grid, else as pandas indexes ---------------

    def _last(self) -> int:
        """The grid index of the last position."""
        return self.transform.first + self.transform.stride * (self.transform.size - 1)

    def _on_same_grid(self, other: Any) -> bool:
        """Whether `other` is a non-empty axis of the same grid, stride and phase."""
        a, b = self.transform, getattr(other, "transform", None)
        return (
            type(b) is type(a)
            and a.same_grid(b)
            and a.stride == b.stride
            and (a.first - b.first) % a.stride == 0
            and min(a.size, b.size) > 0
        )

    def _spanning(self, first: int, last: int) -> GridIndex:
        part = copy.copy(self.transform)
        part.first = first
        part.dim_size = {self.dim: max(0, (last - first) // part.stride + 1)}
        return type(self)(part)

    def as_pandas(self) -> PandasIndex:
        """This axis as an ordinary (in-memory) pandas index."""
        return PandasIndex(self.to_pandas_index(), self.dim, coord_dtype=self.transform.dtype)

    def join(self, other: Any, how: str = "inner") -> Any:
        if self._on_same_grid(other):
            stride = self.transform.stride
            if how == "inner":
                return self._spanning(
                    max(self.transform.first, other.transform.first),
                    min(self._last(), other._last()),
                )
            if how == "outer" and max(self.transform.first, other.transform.first) <= (
                min(self._last(), other._last()) + stride
            ):
                return self._spanning(
                    min(self.transform.first, other.transform.first),
                    max(self._last(), other._last()),
                )
        other = other.as_pandas() if isinstance(other, GridIndex) else other
        return self.as_pandas().join(other, how=how)

    def reindex_like(self, other: Any, method=None, tolerance=None) -> dict[Hashable, Any]:
        labels = other.to_pandas_index() if isinstance(other, GridIndex) else other.index
        numbers = self.transform.numbers(np.asarray(labels))
        positions = np.empty(len(numbers), dtype=np.int64)
        for k, number in enumerate(numbers):
            try:
                positions[k] = self._position(number, number, method, tolerance)
            except KeyError:
                positions[k] = -1
        return {self.dim: positions}

    @classmethod
    def concat(cls, indexes: Any, dim: Hashable, positions: Any = None) -> Any:
        indexes = list(indexes)
        first = indexes[0]
        if positions is None and all(
            isinstance(index, GridIndex)
            and first._on_same_grid(index)
            and index.transform.first == previous._last() + previous.transform.stride
            for previous, index in zip(indexes, indexes[1:], strict=False)
        ):
            return first._spanning(first.transform.first, indexes[-1]._last())
        pandas = [i.as_pandas() if isinstance(i, GridIndex) else i for i in indexes]
        return PandasIndex.concat(pandas, dim, positions)

    def to_pandas_index(self) -> pd.Index:
        """Every label, in memory (size × 8 bytes)."""
        grid = self.transform
        return pd.Index(grid.labels(grid.at(np.arange(grid.size))), name=self.transform.coord_name)

    def _repr_inline_(self, max_width: int) -> str:
        return f"GridIndex ({self.transform!r})"[:max_width]

    def __repr__(self) -> str:
        return f"GridIndex({self.transform!r})"


def grid_coordinates(transform: RegularGrid, attrs: Mapping[str, Any]) -> xr.Coordinates:
    """Coordinates of one lazy axis, its variable carrying `attrs`."""
    index = GridIndex(transform)
    variables = index.create_variables()
    variables[transform.name].attrs.update(attrs)
    return xr.Coordinates(variables, indexes={transform.name: index})


# --- the axes of a store ----------------------------------------------------------------------


def start_ns_of(attrs: Mapping[str, Any], where: str) -> int:
    """The first sample's time in ns: `start_time_ns`, else the ISO 8601 `start_time`."""
    if attrs.get("start_time_ns") is not None:
        return int(attrs["start_time_ns"])
    try:
        return int(time_ns(str(attrs[cv.ATTR_START_TIME])))
    except (ValueError, TypeError) as error:
        raise InvalidInput(where, f"attr {cv.ATTR_START_TIME!r} is not a time ({error})") from None


def time_axis(ds: xr.Dataset, where: str = "store") -> RegularTime | None:
    """The store's sample times, or None when it has no `time` dim without coordinate and a
    `sampling_rate` attr."""
    attrs = ds.attrs
    if cv.TIME not in ds.dims or cv.TIME in ds.variables:
        return None
    if cv.ATTR_SAMPLING_RATE not in attrs or cv.ATTR_START_TIME not in attrs:
        return None
    rate = cv.sampling_rate_hz(attrs, where)
    step = attrs.get("time_step_ns")
    return RegularTime(
        ds.sizes[cv.TIME], start_ns_of(attrs, where), rate, int(step) if step else None
    )


def distance_axis(ds: xr.Dataset) -> RegularDistance | None:
    """A lazy `distance` equal to the stored one, when that is regular and increasing."""
    if cv.DISTANCE not in ds.dims or cv.DISTANCE not in ds.coords:
        return None
    stored = np.asarray(ds[cv.DISTANCE].values, dtype=np.float64)
    if stored.size == 0 or not np.all(np.isfinite(stored)):
        return None
    step = ds.attrs.get(cv.ATTR_CHANNEL_SPACING)
    if not isinstance(step, int | float) and stored.size > 1:
        step = (stored[-1] - stored[0]) / (stored.size - 1)
    if not isinstance(step, int | float) or not step > 0:
        return None
    axis = RegularDistance(stored.size, stored[0], step)
    return axis if np.array_equal(axis.at(np.arange(stored.size)), stored) else None


def with_axes(ds: xr.Dataset, where: str = "store") -> xr.Dataset:
    """`ds` with lazy `time` and `distance` coordinates where its layout defines them."""
    time = time_axis(ds, where)
    if time is not None:
        ds = ds.assign_coords(
            grid_coordinates(
                time,
                {"long_name": "sample time (UTC)", "description": "start_time + i / sampling_rate"},
            )
        )
    distance = distance_axis(ds)
    if distance is not None:
        attrs = dict(ds[cv.DISTANCE].attrs)
        ds = ds.drop_vars(cv.DISTANCE).assign_coords(grid_coordinates(distance, attrs))
    return ds


def open_store(url: LocationLike, storage_options: Mapping[str, Any] | None = None) -> xr.Dataset:
    """The complete seisctf store at `url` (a path or any fsspec URL, with fsspec
    `storage_options`, e.g. {"endpoint_url", "key", "secret"} for S3; or a `StoreLocation`),
    lazily, with lazy `time` (datetime64[ns]) and `distance` (m) coordinates where its layout
    defines them (module doc)."""
    location = StoreLocation.from_url(url, storage_options)
    return with_axes(storage.open_dataset(location), location.url)
