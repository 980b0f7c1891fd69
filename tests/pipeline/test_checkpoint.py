"""A recipe's filter + noise chain filters each block once (its checkpoint sums the noise level
in the same write) and gives exactly the bits of the functions applied directly."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from dask.callbacks import Callback

from seisctf import conventions as cv
from seisctf import storage
from seisctf.errors import InvalidInput
from seisctf.pipeline.filters import butterworth
from seisctf.pipeline.noise import add_gaussian_noise, gaussian_level_sums, rms_from_sums
from seisctf.pipeline.recipe import build_file

RATE_HZ = 100.0
N_TIME, N_SENSORS, TIME_CHUNK = 6 * 4096, 12, 4096
SEED = 11
CHAIN = f"""\
recipe: 1
source:
  store: {{url: input.zarr}}
transforms:
  - butterworth: {{freqmin: 1.0, freqmax: 10.0, order: 4}}
  - add_gaussian_noise: {{rms_fraction: 0.2, rms_window: [10.0, 200.0], seed: {SEED}}}
outputs:
  store: {{url: out.zarr}}
"""


def _traces() -> xr.DataArray:
    """float32 (time, sensor) random walks with a gap, chunked TIME_CHUNK along time."""
    rng = np.random.default_rng(5)
    values = np.cumsum(rng.standard_normal((N_TIME, N_SENSORS)), axis=0).astype(np.float32)
    values[7000:7010, 3] = np.nan
    return xr.DataArray(
        da.from_array(values, chunks=(TIME_CHUNK, N_SENSORS)),
        dims=(cv.TIME, cv.SENSOR),
        attrs={cv.ATTR_SAMPLING_RATE: RATE_HZ, cv.ATTR_START_TIME: "2026-01-01T00:00:00Z"},
    )


class _FilterTasks(Callback):
    """Counts executed tasks of the zero-phase filter (local scheduler)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _pretask(self, key, dsk, state) -> None:
        name = key[0] if isinstance(key, tuple) else key
        self.count += "filtfilt_block" in str(name)


def test_filter_noise_chain_filters_once_and_equals_the_functions(tmp_path):
    traces = _traces()
    storage.write_dataset(traces.to_dataset(name="u"), str(tmp_path / "input.zarr"), quiet=True)
    (tmp_path / "chain.yaml").write_text(CHAIN)
    with _FilterTasks() as filter_tasks:
        build_file(tmp_path / "chain.yaml", workdir=tmp_path, quiet=True)
    n_blocks = N_TIME // TIME_CHUNK
    # Filtering twice (once for the level, once for the output) would run 2 × n_blocks.
    assert filter_tasks.count == n_blocks
    assert not list(tmp_path.glob("*.checkpoints"))

    stored = storage.open_dataset(str(tmp_path / "out.zarr"))["u"].values
    direct = add_gaussian_noise(
        butterworth(traces, freqmin=1.0, freqmax=10.0, order=4),
        seed=SEED,
        variable="u",
        rms_fraction=0.2,
        rms_window=(10.0, 200.0),
    )
    np.testing.assert_array_equal(stored, direct.values.astype(np.float32))
    assert np.isnan(stored[7000:7010, 3]).all() and np.isfinite(stored[:, 0]).all()


@pytest.mark.parametrize("time_chunk", [1000, 4096, N_TIME])
def test_level_sums_give_the_rms_the_noise_computes(time_chunk):
    """`trace_rms` from `gaussian_level_sums` (any chunking) = the RMS the noise takes itself."""
    traces = _traces().chunk({cv.TIME: time_chunk}).astype(np.float64)
    window = (10.0, 200.0)
    sums = gaussian_level_sums(traces, rms_window=window).compute()
    rms = rms_from_sums(sums, 0)
    expected = np.sqrt(np.nanmean(traces.values[1000:20000] ** 2, axis=0, keepdims=True))
    np.testing.assert_allclose(rms, expected, rtol=1e-12)
    given = add_gaussian_noise(traces, seed=3, variable="u", rms_fraction=0.5, trace_rms=rms)
    computed = add_gaussian_noise(traces, seed=3, variable="u", rms_fraction=0.5, rms_window=window)
    np.testing.assert_array_equal(given.values, computed.values)
    with pytest.raises(InvalidInput, match="trace_rms"):
        add_gaussian_noise(traces, seed=3, variable="u", rms_fraction=0.5, trace_rms=rms[0])
