"""Whole-chunk writes to a zarr v3 array without zarr's selection machinery.

`Array.__setitem__` of a whole chunk builds a fresh chunk buffer (filled, then copied into),
hops threads for the codec and for the store, and checks for an empty chunk: on the ingest's
3 MiB chunks ~6.4 ms of CPU a chunk where encoding and storing the same bytes take ~3.6 ms
(benchmarks/RESULTS.md). `ChunkWriter.write` encodes the values with the array's own codec
pipeline and stores them under the array's own chunk key, in one event-loop round trip: the
stored bytes are those `__setitem__` writes (a test compares them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class ChunkWriter:
    """Writes whole chunks of one zarr v3 `array` (regular chunk grid). Chunks at the array's
    end that it cuts short are padded with the fill value, as zarr stores them."""

    def __init__(self, array: Any):
        from zarr.abc.codec import SupportsSyncCodec
        from zarr.core.buffer import default_buffer_prototype

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

    async def _write(self, coords: tuple[int, ...], values: np.ndarray) -> None:
        array = self._array
        spec = array.metadata.get_chunk_spec(coords, array.config, self._prototype)
        buffer = self._prototype.nd_buffer.from_numpy_array(values)
        if self._sync_codecs:  # in this thread: no hop to a thread of the loop and back
            encoded = buffer
            for codec in self._sync_codecs:
                encoded = codec._encode_sync(encoded, spec)
                spec = codec.resolve_metadata(spec)
        else:
            (encoded,) = await array.codec_pipeline.encode([(buffer, spec)])
        await (array.store_path / array.metadata.encode_chunk_key(coords)).set(encoded)


def write_chunks(writes: Sequence[tuple[ChunkWriter, tuple[int, ...], np.ndarray]]) -> None:
    """`ChunkWriter.write` of each (writer, chunk coords, values), in order (each chunk stored
    before the next is begun), in one event-loop round trip."""
    from zarr.core.sync import sync

    whole = [
        (writer, coords, writer._whole(np.asarray(values))) for writer, coords, values in writes
    ]

    async def in_order() -> None:
        for writer, coords, values in whole:
            await writer._write(coords, values)

    sync(in_order())
