"""Writing the `waveforms` of a local event-window store through TensorStore.

zarr-python 3.1 encodes a shard's inner chunks one by one through its asyncio codec pipeline:
about 1.6 ms per 3 × 3000 float32 window on this project's machines, several times the Blosc
LZ4 encoding itself (benchmarks/scale_picking.py). TensorStore encodes and writes whole
shards in C++. The array's metadata (`zarr.json`: shape, chunks, shards, codecs, fill value) is
the one zarr-python wrote (`storage.start_dataset`); TensorStore follows it, and the shard files
are byte for byte those zarr-python writes (the same codecs, the same omission of inner chunks
that hold only the fill value; tests/catalogs/test_event_windows.py). Object stores keep the
zarr-python writes.
"""

from __future__ import annotations

import numpy as np

from seisctf import conventions as cv


def local_path(url: str) -> str:
    """The file-system path of a local store URL (`file://` removed, no trailing slash)."""
    return str(url).removeprefix("file://").rstrip("/")


def open_waveforms(url: str, *, write: bool):
    """`waveforms` of the local store at `url` as a TensorStore (one data-copy thread: Dask
    workers run one task per thread)."""
    import tensorstore

    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": f"{local_path(url)}/{cv.EVENT_WINDOWS_VAR}"},
        "context": {"data_copy_concurrency": {"limit": 1}},
    }
    return tensorstore.open(spec, read=not write, write=write, open=True).result()


def write_windows(block: np.ndarray, url: str, start: int) -> int:
    """Write `block` (trace, channel, sample) float32 at traces [start, start + len(block)) of
    the store's `waveforms` (whole shards: `start` and the length are shard multiples, or the
    array's end); returns the number of traces written."""
    array = open_waveforms(url, write=True)
    array[start : start + len(block)].write(np.asarray(block, dtype=np.float32)).result()
    return len(block)
