"""benchmarks/scale_open.py on a small store: each opener, in its own process, opens a store of
its declared chunk count and loads the selection, whose values the child checks against the
chunk written; a store's counts follow from its shape."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import scale_open  # noqa: E402


def test_store_shapes_count_their_chunks():
    shape = scale_open.NETWORK_25_YEARS
    assert (shape.n_chunks, shape.along_axes) == (552 * 300_957, 552 + 1 + 300_957)
    assert scale_open.network(10**8).n_chunks == 552 * 181_159
    assert scale_open.network(10**7, n_station=1).along_axes == 1 + 1 + 10**7


@pytest.mark.parametrize("opener", list(scale_open.OPENERS.values()))
def test_each_opener_is_measured(tmp_path, opener):
    shape = scale_open.network(2_000, n_station=20)
    url = str(tmp_path / "store.zarr")
    warm_up = str(tmp_path / "warm-up.zarr")
    scale_open.make_store(url, shape)
    scale_open.create_network_store(warm_up, 1, 2 * scale_open.BLOCK_SAMPLES, 2**18)
    figures = scale_open.measure(url, shape, opener, 1, warm_up)
    assert figures["partitions"] == shape.n_chunks == 2_000
    assert 0 < figures["open_s"] < figures["open_s"] + figures["select_s"]
    assert 0 <= figures["open_peak"] <= figures["select_peak"] < 2**30
    assert 0 < figures["graph_bytes"] < 2**20
