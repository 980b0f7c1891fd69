"""`seisctf.formats.shared.chunk_writes.ChunkWriter` against zarr's own `Array.__setitem__`: the
same chunk keys and the same stored bytes (whole chunks, chunks cut short at the array's end,
the progress array's strings), on a local folder and on a real S3 server (SeaweedFS)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.formats.shared.chunk_writes import ChunkWriter
from seisctf.location import StoreLocation

BLOCK = 1000
N_TIME = 2 * BLOCK + 345  # the third time chunk is cut short


def _arrays(url: str, storage_options: dict | None) -> tuple:
    """A data array as the waveform ingest creates it, and a progress-like string array."""
    group = storage.open_group(StoreLocation(url, storage_options), mode="w")
    data = group.create_array(
        "data", shape=(3, 2, N_TIME), chunks=(1, 2, BLOCK), dtype="float32",
        fill_value=np.nan, compressors=cv.data_compressor(),
    )  # fmt: skip
    marks = group.create_array("marks", shape=(3, 3), chunks=(1, 1), dtype=str, fill_value="")
    return data, marks


def _values(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.cumsum(rng.integers(-50, 51, (2, BLOCK)), axis=1).astype(np.float32)
    values[1, 100:160] = np.nan  # a gap
    return values


def _fill_both(reference: tuple, written: tuple) -> None:
    """The same chunks through `__setitem__` (reference) and through `ChunkWriter` (written)."""
    data, marks = reference
    writer, mark_writer = ChunkWriter(written[0]), ChunkWriter(written[1])
    for station, block in ((0, 0), (0, 2), (2, 1)):
        first, stop = block * BLOCK, min((block + 1) * BLOCK, N_TIME)
        values = _values(10 * station + block)[:, : stop - first]
        data[station, :, first:stop] = values
        writer.write((station, 0, block), values[np.newaxis])
        text = f'{{"coverage": {station / 4}, "problems": ["é {block}"]}}'
        marks[station, block] = text
        mark_writer.write((station, block), np.array([[text]], dtype=object))


def _chunk_bytes(group, name: str) -> dict[str, bytes]:
    store = group.store
    keys = sorted(zarr.core.sync.sync(_listed(store, f"{name}/c")))
    return {key: zarr.core.sync.sync(_get(store, key)) for key in keys}


async def _listed(store, prefix: str) -> list[str]:
    return [key async for key in store.list_prefix(prefix)]


async def _get(store, key: str) -> bytes:
    from zarr.core.buffer import default_buffer_prototype

    return (await store.get(key, prototype=default_buffer_prototype())).to_bytes()


def _check_same(reference_url: str, written_url: str, storage_options: dict | None) -> None:
    reference = storage.open_group(StoreLocation(reference_url, storage_options))
    written = storage.open_group(StoreLocation(written_url, storage_options))
    for name in ("data", "marks"):
        expected, found = _chunk_bytes(reference, name), _chunk_bytes(written, name)
        assert len(expected) == 3 and list(found) == list(expected)
        assert found == expected
    np.testing.assert_array_equal(written["data"][:], reference["data"][:])
    assert written["marks"][0, 2] == '{"coverage": 0.0, "problems": ["é 2"]}'
    assert written["data"][0, 1, 2 * BLOCK + 99] == _values(2)[1, 99]
    assert np.isnan(written["data"][0, 1, 2 * BLOCK + 120])


def test_chunk_writer_stores_the_bytes_zarr_setitem_stores(tmp_path):
    reference, written = str(tmp_path / "reference.zarr"), str(tmp_path / "written.zarr")
    _fill_both(_arrays(reference, None), _arrays(written, None))
    _check_same(reference, written, None)


def test_chunk_writer_on_s3_stores_the_same_bytes(s3_server, s3_bucket):
    options = s3_server.storage_options
    reference, written = f"{s3_bucket}/reference.zarr", f"{s3_bucket}/written.zarr"
    _fill_both(_arrays(reference, options), _arrays(written, options))
    _check_same(reference, written, options)


def test_chunk_writer_refuses_values_larger_than_a_chunk(tmp_path):
    data, _ = _arrays(str(tmp_path / "s.zarr"), None)
    with pytest.raises(ValueError):
        ChunkWriter(data).write((0, 0, 0), np.zeros((1, 2, BLOCK + 1), dtype=np.float32))
