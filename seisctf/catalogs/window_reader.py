"""Single windows of an event-window store by byte ranges, for training loops in any process.

Reads `waveforms(trace, channel, sample)` of a store as seisctf writes it (`event_windows`,
docs/contract.md "Event-window store"): zarr v3, `chunk_traces` windows per chunk, chunks in
shards (`sharding_indexed`, its index at the end or the start, index codecs `bytes` + `crc32c`)
or not, chunk codecs `bytes` (little endian) then `blosc` or nothing. A window costs one ranged
read of its chunk inside its shard; a shard's index (16 bytes a chunk) is read once and kept.
Nothing else of the store is read. Another codec chain is refused, naming the array.

On S3 (s3fs), ranged reads go to presigned URLs of the shards over this process's keep-alive
HTTP connections (`byte_ranges.SignedRanges`): one HTTP GET per window without botocore's
per-request work and a hop to fsspec's event loop (benchmarks/RESULTS.md, "Training reads",
measures both); several ranges at once (`prefetch`, a batch's windows) are all sent before the
first answer is read. Local stores are read by `os.pread` on kept file descriptors
(`byte_ranges.LocalRanges`). Other filesystems and `signed_urls=False` on S3 go through
fsspec's `cat_ranges` (concurrent requests).

Memory: one byte-bounded least-recently-used cache per process holds shard indexes and the
compressed chunks read (`cache_bytes`, default `DEFAULT_CACHE_BYTES`), so a reader never holds
more than that, plus the compressed windows of the last batch `prefetch` read, whatever the
store's size.

Processes: the filesystem handle (fsspec) and the cache belong to the process that opened them:
a reader used in another process (a forked DataLoader worker) opens its own there on first use;
pickled (spawned workers), it carries only its URL, options, layout and cache size.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.catalogs.byte_ranges import LocalRanges, SignedRanges
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

DEFAULT_CACHE_BYTES = 256 * 2**20
MISSING = 2**64 - 1  # a shard index's (offset, nbytes) of a chunk that was never written
INDEX_ENTRY_BYTES = 16
CRC_BYTES = 4


@dataclass(frozen=True)
class ChunkLayout:
    """Where a window's bytes are: `shape` (trace, channel, sample), `chunk_traces` windows per
    chunk, `shard_traces` per shard (None: unsharded), chunks `blosc`-compressed or raw
    little-endian `dtype`, the shard index at the end (or start), keys `c{sep}i{sep}0{sep}0`."""

    shape: tuple[int, int, int]
    chunk_traces: int
    shard_traces: int | None
    blosc: bool
    index_at_end: bool
    separator: str
    dtype: np.dtype
    fill_value: float

    @property
    def chunks_per_shard(self) -> int:
        return (self.shard_traces or self.chunk_traces) // self.chunk_traces

    def key(self, block: int) -> str:
        """Object key (relative to the array) of shard (or chunk) number `block`."""
        return self.separator.join(("c", str(block), "0", "0"))


def chunk_layout(metadata: Mapping[str, Any], what: str) -> ChunkLayout:
    """The layout of `waveforms` from its zarr.json (`metadata`), or InvalidInput naming `what`
    when its codecs or grid are not those seisctf writes (module doc)."""
    try:
        shape = tuple(int(n) for n in metadata["shape"])
        outer = [int(n) for n in metadata["chunk_grid"]["configuration"]["chunk_shape"]]
        encoding = metadata.get("chunk_key_encoding", {})
        separator = encoding.get("configuration", {}).get("separator", "/")
        codecs = list(metadata["codecs"])
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidInput(what, f"not a zarr v3 array description ({error!r})") from None
    if len(shape) != 3 or encoding.get("name", "default") != "default":
        raise InvalidInput(what, "expected a 3-D array (trace, channel, sample), default keys")
    shard_traces, index_at_end = None, True
    if codecs and codecs[0].get("name") == "sharding_indexed":
        config = codecs[0]["configuration"]
        index_names = [c.get("name") for c in config.get("index_codecs", [])]
        if len(codecs) != 1 or index_names != ["bytes", "crc32c"]:
            raise InvalidInput(what, f"unsupported shard codecs {codecs}")
        shard_traces, index_at_end = outer[0], config.get("index_location", "end") == "end"
        inner = [int(n) for n in config["chunk_shape"]]
        codecs = list(config["codecs"])
    else:
        inner = outer
    names = [c.get("name") for c in codecs]
    endian = (codecs[0].get("configuration") or {}).get("endian", "little") if codecs else None
    if names not in (["bytes"], ["bytes", "blosc"]) or endian != "little":
        raise InvalidInput(what, f"unsupported chunk codecs {codecs}: expected bytes (+ blosc)")
    if inner[1:] != list(shape[1:]) or (shard_traces and shard_traces % inner[0]):
        raise InvalidInput(what, f"chunks {inner} do not hold whole windows of shape {shape}")
    fill = metadata.get("fill_value")
    return ChunkLayout(
        shape=shape,
        chunk_traces=inner[0],
        shard_traces=shard_traces,
        blosc=names[-1] == "blosc",
        index_at_end=index_at_end,
        separator=separator,
        dtype=np.dtype(str(metadata["data_type"])).newbyteorder("<"),
        fill_value=float("nan") if fill in (None, "NaN") else float(fill),
    )


class ByteLRU:
    """A least-recently-used map of bytes-like values whose total size stays ≤ `limit` bytes
    (a value larger than the limit is not kept). Thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.size = 0
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        nbytes = int(getattr(value, "nbytes", None) or len(value))
        if nbytes > self.limit:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self.size += nbytes
            while self.size > self.limit:
                _, old = self._items.popitem(last=False)
                self.size -= int(getattr(old, "nbytes", None) or len(old))


class WindowReader:
    """Reads windows (rows along `trace`) of the event-window store at `store` (module doc)."""

    def __init__(
        self,
        store: StoreLocation,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        signed_urls: bool = True,
    ) -> None:
        if cache_bytes < 0:
            raise InvalidInput("cache_bytes", f"must be ≥ 0 bytes, got {cache_bytes}")
        self.store = store.with_url(store.url.rstrip("/"))
        self.url = self.store.url
        self.cache_bytes = int(cache_bytes)
        self.signed_urls = signed_urls
        self._pid: int | None = None
        self._fs: Any = None
        self._direct: SignedRanges | LocalRanges | None = None
        self._cache = ByteLRU(self.cache_bytes)
        self._batch: dict[int, bytes | None] = {}  # the last prefetched batch's chunks
        self._root = ""
        array = f"{self.url}/{cv.EVENT_WINDOWS_VAR}"
        fs, root = self._filesystem()
        try:
            description = json.loads(fs.cat_file(f"{root}/{cv.EVENT_WINDOWS_VAR}/zarr.json"))
        except FileNotFoundError:
            raise InvalidInput(array, "no zarr v3 array there (zarr.json missing)") from None
        self.layout = chunk_layout(description, array)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_pid=None, _fs=None, _cache=None, _direct=None, _batch={})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = ByteLRU(self.cache_bytes)

    @property
    def cached_bytes(self) -> int:
        """Bytes the cache of this process holds now."""
        return self._cache.size if self._pid == os.getpid() else 0

    def _filesystem(self) -> tuple[Any, str]:
        """This process's fsspec filesystem and the store's path in it (opened on first use in
        each process; a fresh instance, never one inherited through fork)."""
        if self._pid != os.getpid():
            import fsspec

            options = dict(self.store.options or {})
            options["skip_instance_cache"] = True
            self._fs, self._root = fsspec.core.url_to_fs(self.url, **options)
            self._root = self._root.rstrip("/")
            self._cache = ByteLRU(self.cache_bytes)
            self._batch = {}
            protocol = self._fs.protocol
            protocols = protocol if isinstance(protocol, tuple | list) else (protocol,)
            self._direct = None
            if self.signed_urls and "s3" in protocols:
                self._direct = SignedRanges(self._fs)
            elif {"file", "local"} & set(protocols):
                self._direct = LocalRanges()
            self._pid = os.getpid()
        return self._fs, self._root

    def _ranges(self, paths: list[str], starts: list, ends: list) -> list:
        """Bytes of each (path, start, end) (fsspec's `cat_ranges` conventions), or the
        exception its read raised."""
        fs, _ = self._filesystem()
        if self._direct is None:
            return fs.cat_ranges(paths, starts, ends, on_error="return")
        return self._direct.read_many(paths, starts, ends)

    def read(self, rows) -> np.ndarray:
        """Windows `rows` (store positions, any order, repeats allowed) as float32 (len(rows),
        channel, sample), the store's values (NaN padding included)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        n_trace, n_channel, n_sample = self.layout.shape
        if rows.size and (rows.min() < 0 or rows.max() >= n_trace):
            raise IndexError(f"{self.url}: rows outside 0…{n_trace - 1}")
        out = np.empty((rows.size, n_channel, n_sample), dtype=np.float32)
        chunks = rows // self.layout.chunk_traces
        wanted = chunks if chunks.size == 1 else np.unique(chunks)  # one window: a sample
        decoded = dict(zip(wanted.tolist(), self._chunks(wanted), strict=True))
        for k, (row, chunk) in enumerate(zip(rows.tolist(), chunks.tolist(), strict=True)):
            block = decoded[chunk]
            if block is None:
                out[k] = self.layout.fill_value
            else:
                out[k] = block[row - chunk * self.layout.chunk_traces]
        return out

    def prefetch(self, rows) -> None:
        """Read the windows `rows` (store positions) all at once (concurrent ranged reads, see
        the module doc) and hold them, until the next `prefetch`, for reading them one by one
        next. They are held beside the cache, not in it: a training epoch reads each window
        once, so keeping every batch's windows would only grow the process (and its page
        faults) up to `cache_bytes` for nothing."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= self.layout.shape[0]):
            raise IndexError(f"{self.url}: rows outside 0…{self.layout.shape[0] - 1}")
        # windows the held batch has too are taken from it, the others read; then it is replaced
        self._batch = self._compressed(np.unique(rows // self.layout.chunk_traces), keep=False)

    def _chunks(self, chunks: np.ndarray) -> list[np.ndarray | None]:
        """Decoded chunks (chunk_traces, channel, sample) in the order of `chunks` (None: never
        written)."""
        raw = self._compressed(chunks)
        return [self._decode(raw[chunk]) for chunk in chunks.tolist()]

    def _compressed(self, chunks: np.ndarray, keep: bool = True) -> dict[int, bytes | None]:
        """The stored bytes of each chunk (None: never written), from the prefetched batch or
        the cache or, for those missing, read in one `_ranges` call (and put in the cache,
        with `keep`)."""
        _, root = self._filesystem()
        raw: dict[int, bytes | None] = {}
        misses = []
        for chunk in chunks.tolist():
            found = (
                self._batch[chunk] if chunk in self._batch else self._cache.get(("chunk", chunk))
            )
            if found is None:
                misses.append(chunk)
            else:
                raw[chunk] = found
        if misses:
            places = self._places(misses)
            fetch = [(chunk, place) for chunk, place in zip(misses, places, strict=True) if place]
            for chunk, place in zip(misses, places, strict=True):
                if place is None:
                    raw[chunk] = None
            if fetch:
                paths = [f"{root}/{cv.EVENT_WINDOWS_VAR}/{place[0]}" for _, place in fetch]
                blobs = self._ranges(
                    paths, [place[1] for _, place in fetch], [place[2] for _, place in fetch]
                )
                for (chunk, _), blob in zip(fetch, blobs, strict=True):
                    if isinstance(blob, BaseException):
                        raise blob
                    raw[chunk] = bytes(blob)
                    if keep:
                        self._cache.put(("chunk", chunk), raw[chunk])
        return raw

    def _places(self, chunks: list[int]) -> list[tuple[str, int, int] | None]:
        """(object key, start, end) of each chunk's bytes; None for a chunk never written."""
        layout = self.layout
        if layout.shard_traces is None:
            return [self._whole_object(chunk) for chunk in chunks]
        per_shard = layout.chunks_per_shard
        indexes = self._indexes(sorted({chunk // per_shard for chunk in chunks}))
        places: list[tuple[str, int, int] | None] = []
        for chunk in chunks:
            shard, inner = divmod(chunk, per_shard)
            index = indexes[shard]
            if index is None or int(index[inner, 0]) == MISSING:
                places.append(None)
                continue
            offset, nbytes = int(index[inner, 0]), int(index[inner, 1])
            places.append((layout.key(shard), offset, offset + nbytes))
        return places

    def _whole_object(self, chunk: int) -> tuple[str, int, int] | None:
        fs, root = self._filesystem()
        key = self.layout.key(chunk)
        try:
            size = int(fs.size(f"{root}/{cv.EVENT_WINDOWS_VAR}/{key}"))
        except FileNotFoundError:
            return None
        return key, 0, size

    def _indexes(self, shards: list[int]) -> dict[int, np.ndarray | None]:
        """Each shard's index, (chunks_per_shard, 2) uint64 (offset, nbytes); None for a shard
        never written. Read (one ranged read each, CRC-checked) when not in the cache."""
        _, root = self._filesystem()
        per_shard = self.layout.chunks_per_shard
        index_bytes = per_shard * INDEX_ENTRY_BYTES + CRC_BYTES
        found: dict[int, np.ndarray | None] = {}
        misses = []
        for shard in shards:
            index = self._cache.get(("index", shard))
            if index is None:
                misses.append(shard)
            else:
                found[shard] = index
        if not misses:
            return found
        paths = [f"{root}/{cv.EVENT_WINDOWS_VAR}/{self.layout.key(s)}" for s in misses]
        start, end = (-index_bytes, None) if self.layout.index_at_end else (0, index_bytes)
        blobs = self._ranges(paths, [start] * len(paths), [end] * len(paths))
        for shard, path, blob in zip(misses, paths, blobs, strict=True):
            if isinstance(blob, FileNotFoundError):
                found[shard] = None
                continue
            if isinstance(blob, BaseException):
                raise blob
            found[shard] = _checked_index(bytes(blob), per_shard, path)
            self._cache.put(("index", shard), found[shard])
        return found

    def _decode(self, blob: bytes | None) -> np.ndarray | None:
        if blob is None:
            return None
        if self.layout.blosc:
            from numcodecs import blosc

            blob = blosc.decompress(blob)
        n_channel, n_sample = self.layout.shape[1:]
        values = np.frombuffer(blob, dtype=self.layout.dtype)
        return values.reshape(self.layout.chunk_traces, n_channel, n_sample)


def _checked_index(blob: bytes, per_shard: int, what: str) -> np.ndarray:
    """A shard index's bytes as (per_shard, 2) uint64, after checking its CRC32C."""
    import google_crc32c

    body, crc = blob[:-CRC_BYTES], blob[-CRC_BYTES:]
    if len(body) != per_shard * INDEX_ENTRY_BYTES or google_crc32c.value(body).to_bytes(
        CRC_BYTES, "little"
    ) != bytes(crc):
        raise InvalidInput(what, "damaged shard index (size or CRC32C does not match)")
    return np.frombuffer(body, dtype="<u8").reshape(per_shard, 2)
