"""Storage layer: options, repeatable chunk-aligned writes, completion marker, real S3."""

from __future__ import annotations

from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import smooth_wavefield

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation


def test_parse_storage_options():
    options = storage.parse_storage_options(
        [
            "endpoint_url=http://127.0.0.1:9000",
            "anon=false",
            "max_retries=3",
            "client_kwargs.region_name=eu-1",
        ]
    )
    assert options == {
        "endpoint_url": "http://127.0.0.1:9000",
        "anon": False,
        "max_retries": 3,
        "client_kwargs": {"region_name": "eu-1"},
    }
    with pytest.raises(InvalidInput, match="KEY=VALUE"):
        storage.parse_storage_options(["no-equals-sign"])


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _counted(dataset: xr.Dataset, computed: list) -> xr.Dataset:
    """`dataset` whose wavefield blocks append their block index to `computed` as they run."""

    def block(values: np.ndarray, block_info=None) -> np.ndarray:
        computed.append(tuple(block_info[0]["chunk-location"]))
        return values

    field = dataset[cv.WAVEFIELD_VAR]
    counted = field.data.map_blocks(block, dtype=field.dtype)
    return dataset.assign({cv.WAVEFIELD_VAR: (field.dims, counted)})


def test_write_computes_each_block_once_and_only_when_asked(tmp_path):
    """`start_dataset` writes metadata only and computes nothing; computing what it returns
    runs each block once and writes its chunk; `finish_group` then marks the store complete.
    `write_dataset` runs each block once too, and gives the same bytes when repeated."""
    computed: list[tuple[int, ...]] = []
    dataset = _counted(smooth_wavefield(n_time=120, n_sensor=24, chunks=(50, 10)), computed)
    blocks = sorted(np.ndindex(dataset[cv.WAVEFIELD_VAR].data.numblocks))
    root = tmp_path / "started.zarr"
    pending = storage.start_dataset(dataset, StoreLocation(root), {})
    assert computed == [] and not list((root / cv.WAVEFIELD_VAR).rglob("c/*"))
    with pytest.raises(InvalidInput, match="incomplete"):
        storage.open_dataset(StoreLocation(root))
    dask.compute(pending)
    assert sorted(computed) == blocks
    assert len(list((root / cv.WAVEFIELD_VAR).rglob("c/*/*/*"))) == len(blocks)
    storage.finish_group(StoreLocation(root), dataset.attrs)
    assert storage.open_dataset(StoreLocation(root)).attrs[cv.ATTR_COMPLETE] is True

    computed.clear()
    url = str(tmp_path / "w.zarr")
    storage.write_dataset(dataset, StoreLocation(url), quiet=True)
    assert sorted(computed) == blocks
    first = _tree_bytes(tmp_path / "w.zarr")
    storage.write_dataset(dataset, StoreLocation(url), quiet=True)
    assert _tree_bytes(tmp_path / "w.zarr") == first
    opened = storage.open_dataset(StoreLocation(url))
    assert isinstance(opened[cv.WAVEFIELD_VAR].data, da.Array)
    assert opened.attrs[cv.ATTR_COMPLETE] is True
    xr.testing.assert_identical(
        opened[cv.WAVEFIELD_VAR].load().drop_vars(list(opened.coords)),
        dataset[cv.WAVEFIELD_VAR].load().drop_vars(list(dataset.coords)),
    )


def test_an_interrupted_write_is_never_read_as_whole(tmp_path):
    url = str(tmp_path / "partial.zarr")
    dataset = smooth_wavefield(n_time=60, n_sensor=8)
    # What an interrupted writer leaves: metadata and some chunks, no completion marker.
    dataset.to_zarr(url, mode="w", zarr_format=3, consolidated=False, compute=False)
    with pytest.raises(InvalidInput, match="incomplete"):
        storage.open_dataset(StoreLocation(url))
    with pytest.raises(InvalidInput, match="no zarr group|cannot open"):
        storage.open_dataset(StoreLocation(tmp_path / "missing.zarr"))


def test_arrays_round_trip_chunk_aligned(tmp_path):
    values = np.arange(300 * 7, dtype=np.float32).reshape(300, 7)
    url = str(tmp_path / "g.zarr")
    storage.write_arrays(
        {"a": da.from_array(values, chunks=(13, 3))},
        StoreLocation(url),
        {"k": 1},
        chunks={"a": (100, 7)},
        quiet=True,
    )
    read = storage.read_array(StoreLocation(url), "a")
    assert read.chunks == ((100, 100, 100), (7,))
    assert np.array_equal(read.compute(), values)
    assert storage.read_attrs(StoreLocation(url))["k"] == 1


def test_reading_a_group_as_an_array_is_bad_input(tmp_path):
    """A name that holds a group (a bundle's manifest may name anything) is bad input naming
    it, not an AttributeError from deep in the read."""
    location = StoreLocation(str(tmp_path / "g.zarr"))
    arrays = {"a": da.zeros((4, 2), chunks=(4, 2))}
    storage.write_arrays(arrays, location, {}, quiet=True, finish=False)
    storage.open_group(location, mode="r+").create_group("inner")
    storage.finish_group(location, {})
    with pytest.raises(InvalidInput, match="inner.*is a group, not an array"):
        storage.read_array(location, "inner")


def test_store_on_s3_opens_lazily_with_xarray_through_s3fs(s3_server, s3_bucket):
    dataset = smooth_wavefield(n_time=80, n_sensor=16)
    url = f"{s3_bucket}/wavefield.zarr"
    storage.write_dataset(dataset, StoreLocation(url, s3_server.storage_options), quiet=True)
    opened = xr.open_zarr(url, storage_options=s3_server.storage_options)
    assert isinstance(opened[cv.WAVEFIELD_VAR].data, da.Array)
    assert np.array_equal(opened[cv.WAVEFIELD_VAR].values, dataset[cv.WAVEFIELD_VAR].values)
    assert opened.attrs[cv.ATTR_COMPLETE] is True
    assert s3_server.filesystem().exists(f"{url}/zarr.json")
    storage.write_arrays(
        {"x": da.ones((50, 4), chunks=(10, 4))},
        StoreLocation(f"{s3_bucket}/g.zarr", s3_server.storage_options),
        {},
        quiet=True,
    )
    assert (
        storage.read_array(StoreLocation(f"{s3_bucket}/g.zarr", s3_server.storage_options), "x")
        .sum()
        .compute()
        == 200
    )
