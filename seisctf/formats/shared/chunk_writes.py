"""Whole-chunk writes to a zarr v3 array without zarr's selection machinery.

`Array.__setitem__` of a whole chunk builds a fresh chunk buffer (filled, then copied into),
hops threads for the codec and for the store, and checks for an empty chunk. `ChunkWriter`
encodes the values with the array's own codecs in the calling thread and stores them under the
array's own chunk key: the stored bytes are those `__setitem__` writes (a test compares them).
On a local folder the chunk file is written from the calling thread too, as zarr's local store
writes it (a temporary file renamed into place): zarr's store hops to its event loop's thread
and from there to a thread of its own, which costs more CPU than the write itself, for a data
chunk and still more for a small progress mark (figures: benchmarks/history/RESULTS-2026.md).
Other stores (S3, …) get one event-loop round trip per `write_chunks` call.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


class ChunkWriter:
    """Writes whole chunks of one zarr v3 `array` (regular chunk grid). Chunks at the array's
    end that it cuts short are padded with the fill value, as zarr stores them."""

    def __init__(self, array: Any):
        from zarr.abc.codec import SupportsSyncCodec
        from zarr.core.buffer import default_buffer_prototype
        from zarr.storage import LocalStore

        self._array = array._async_array
        self._prototype = default_buffer_prototype()
        metadata = self._array.metadata
        self._chunk_shape = tuple(metadata.chunk_grid.chunk_shape)
        self._dtype = np.dtype(metadata.dtype.to_native_dtype())
        self._fill = metadata.fill_value
        pipeline = self._array.codec_pipeline
        codecs = (*pipeline.array_array_codecs, pipeline.array_bytes_codec,
                  *pipeline.bytes_bytes_codecs)  # fmt: skip
        self._sync_codecs = codecs if all(isinstance(c, SupportsSyncCodec) for c in codecs) else ()
        store = self._array.store_path.store
        self._folder = Path(store.root) if isinstance(store, LocalStore) else None

    def write(self, coords: tuple[int, ...], values: np.ndarray) -> None:
        """Store `values` as chunk `coords` (its shape, or cut short at the array's end)."""
        write_chunks([(self, coords, values)])

    def _whole(self, values: np.ndarray) -> np.ndarray:
        """`values` in the array's dtype and C order, padded with the fill value to a chunk."""
        if values.ndim != len(self._chunk_shape) or any(
            n > chunk for n, chunk in zip(values.shape, self._chunk_shape, strict=True)
        ):
            raise ValueError(f"values of shape {values.shape} exceed a {self._chunk_shape} chunk")
        if values.shape != self._chunk_shape:
            padded = np.full(self._chunk_shape, self._fill, dtype=self._dtype)
            padded[tuple(slice(0, n) for n in values.shape)] = values
            return padded
        return np.ascontiguousarray(values, dtype=self._dtype)

    def encoded(self, coords: tuple[int, ...], values: np.ndarray) -> Any:
        """The stored bytes (a zarr buffer) of chunk `coords` holding `values`."""
        from zarr.core.sync import sync

        array = self._array
        spec = array.metadata.get_chunk_spec(coords, array.config, self._prototype)
        buffer = self._prototype.nd_buffer.from_numpy_array(self._whole(np.asarray(values)))
        if not self._sync_codecs:
            return sync(array.codec_pipeline.encode([(buffer, spec)]))[0]
        for codec in self._sync_codecs:
            buffer = codec._encode_sync(buffer, spec)
            spec = codec.resolve_metadata(spec)
        return buffer

    def key(self, coords: tuple[int, ...]) -> str:
        """The store key of chunk `coords` (from the store's root)."""
        chunk = self._array.metadata.encode_chunk_key(coords)
        return "/".join(part for part in (self._array.store_path.path, chunk) if part)

    async def store(self, coords: tuple[int, ...], encoded: Any) -> None:
        """Store encoded chunk `coords` through zarr's store."""
        array = self._array
        await (array.store_path / array.metadata.encode_chunk_key(coords)).set(encoded)


def _write_file(path: Path, data: Any) -> None:
    """Write `data` (buffer protocol) to `path` as zarr's local store does: into a temporary
    file beside it, renamed into place (a reader sees the old file or the new, never a part)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{uuid.uuid4().hex}.partial")
    try:
        with open(partial, "wb") as handle:
            handle.write(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_chunks(writes: Sequence[tuple[ChunkWriter, tuple[int, ...], np.ndarray]]) -> None:
    """`ChunkWriter.write` of each (writer, chunk coords, values), in order (each chunk stored
    before the next is begun): local chunk files from this thread, chunks of other stores in
    one event-loop round trip."""
    from zarr.core.sync import sync

    encoded = [
        (writer, coords, writer.encoded(coords, values)) for writer, coords, values in writes
    ]
    elsewhere: list[tuple[ChunkWriter, tuple[int, ...], Any]] = []
    for writer, coords, data in encoded:
        if writer._folder is not None and not elsewhere:
            _write_file(writer._folder / writer.key(coords), data.as_buffer_like())
        else:
            elsewhere.append((writer, coords, data))

    async def in_order() -> None:
        for writer, coords, data in elsewhere:
            await writer.store(coords, data)

    if elsewhere:
        sync(in_order())
