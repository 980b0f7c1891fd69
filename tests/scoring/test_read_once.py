"""Each stored truth chunk is read once per scoring pass (no Dask client here: the counting
store must live in this process)."""

from __future__ import annotations

from collections import Counter

import dask.array as da
import numpy as np
import zarr
from conftest import TINY_LAYOUT, smooth_wavefield

from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.scoring.ctf import open_truth, score_arrays

SECRET = "read-once"


class CountingStore(zarr.storage.WrapperStore):
    """Counts reads per key, to prove each stored chunk is read once per scoring pass."""

    def __init__(self, store):
        super().__init__(store)
        self.reads = Counter()

    async def get(self, key, prototype, byte_range=None):
        self.reads[key] += 1
        return await self._store.get(key, prototype, byte_range)


def test_one_fused_pass_reads_each_truth_chunk_once(tmp_path):
    truth_url = str(tmp_path / "truth.zarr")
    bundle = build_bundle(smooth_wavefield(), TINY_LAYOUT, SECRET)
    write_bundle(
        bundle,
        StoreLocation(tmp_path / "public.zarr"),
        StoreLocation(truth_url),
        SECRET,
        quiet=True,
    )
    manifest, salt, _ = open_truth(StoreLocation(truth_url))
    store = CountingStore(zarr.storage.LocalStore(truth_url, read_only=True))
    group = zarr.open_group(store, mode="r")
    truth = {pair.test: da.from_zarr(group[pair.test]) for pair in manifest.pairs}
    store.reads.clear()
    values = {n: np.asarray(a) for n, a in truth.items()}
    store.reads.clear()
    submissions = {
        m: {n: da.from_array(v * f) for n, v in values.items()} for m, f in (("a", 0.5), ("b", 2.0))
    }
    results = score_arrays(manifest, truth, submissions, salt=salt, quiet=True)
    assert all(r["truth_sha256_verified"] for r in results)
    chunk_reads = {key: count for key, count in store.reads.items() if "/c/" in key}
    expected_chunks = sum(int(np.prod(a.numblocks)) for a in truth.values())
    assert len(chunk_reads) == expected_chunks
    assert set(chunk_reads.values()) == {1}
