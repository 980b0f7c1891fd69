"""A recipe's filter + noise chain filters each block once (its checkpoint sums the noise level
in the task that writes each chunk) and gives exactly the bits of the functions applied directly;
the checkpoint writer keeps values, dtypes and level bits for any chunking and worker count."""

from __future__ import annotations

import tempfile

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from dask.callbacks import Callback
from hypothesis import given, settings
from hypothesis import strategies as st

from seisctf import conventions as cv
from seisctf import storage
from seisctf.build.checkpoint import write_checkpoint
from seisctf.build.engine import build_file
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.pipeline.transforms.filters import butterworth
from seisctf.pipeline.transforms.noise import add_gaussian_noise, gaussian_level_window
from seisctf.signal.trace_levels import RMS_BLOCK_SAMPLES, rms_from_sums, trace_sums

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
    storage.write_dataset(
        traces.to_dataset(name="u"), StoreLocation(tmp_path / "input.zarr"), quiet=True
    )
    (tmp_path / "chain.yaml").write_text(CHAIN)
    with _FilterTasks() as filter_tasks:
        build_file(tmp_path / "chain.yaml", workdir=tmp_path, quiet=True)
    n_blocks = N_TIME // TIME_CHUNK
    # Filtering twice (once for the level, once for the output) would run 2 × n_blocks.
    assert filter_tasks.count == n_blocks
    assert not list(tmp_path.glob("*.checkpoints"))

    stored = storage.open_dataset(StoreLocation(tmp_path / "out.zarr"))["u"].values
    # The checkpoint holds the filtered data in the stored dtype (float32), as the build would
    # round them anyway; the noise is added to those values.
    direct = add_gaussian_noise(
        butterworth(traces, freqmin=1.0, freqmax=10.0, order=4).astype(np.float32),
        seed=SEED,
        variable="u",
        rms_fraction=0.2,
        rms_window=(10.0, 200.0),
    )
    assert direct.dtype == np.float32
    np.testing.assert_array_equal(stored, direct.values)
    assert np.isnan(stored[7000:7010, 3]).all() and np.isfinite(stored[:, 0]).all()


@pytest.mark.parametrize("time_chunk", [1000, 4096, N_TIME])
def test_level_sums_give_the_rms_the_noise_computes(time_chunk):
    """`trace_rms` from the sums over `gaussian_level_window` (any chunking) = the RMS the
    noise takes itself."""
    traces = _traces().chunk({cv.TIME: time_chunk}).astype(np.float64)
    window = (10.0, 200.0)
    samples = gaussian_level_window(traces, rms_window=window)
    assert samples == slice(1000, 20000)
    sums = trace_sums(traces.data, 0, samples).compute()
    rms = rms_from_sums(sums, 0)
    expected = np.sqrt(np.nanmean(traces.values[1000:20000] ** 2, axis=0, keepdims=True))
    np.testing.assert_allclose(rms, expected, rtol=1e-12)
    given = add_gaussian_noise(traces, seed=3, variable="u", rms_fraction=0.5, trace_rms=rms)
    computed = add_gaussian_noise(traces, seed=3, variable="u", rms_fraction=0.5, rms_window=window)
    np.testing.assert_array_equal(given.values, computed.values)
    with pytest.raises(InvalidInput, match="trace_rms"):
        add_gaussian_noise(traces, seed=3, variable="u", rms_fraction=0.5, trace_rms=rms[0])


# --- the checkpoint writer itself ------------------------------------------------------------

LEVEL_BLOCK = RMS_BLOCK_SAMPLES


# 128 sensors: the checkpoint's chunks (about 4 MiB) then hold one level block of time each.
WIDE = 128


def _dataset(n_time: int, time_chunk: int) -> xr.Dataset:
    """float64 `u` (time, sensor) with a NaN, `v` (time, sensor) and a timeless `gain`."""
    rng = np.random.default_rng(9)
    u = rng.standard_normal((n_time, WIDE)).cumsum(axis=0)
    u[LEVEL_BLOCK + 3, 2] = np.nan
    v = rng.standard_normal((n_time, WIDE))
    return xr.Dataset(
        {
            "u": ((cv.TIME, cv.SENSOR), da.from_array(u, chunks=(time_chunk, 50))),
            "v": ((cv.TIME, cv.SENSOR), da.from_array(v, chunks=(time_chunk, WIDE))),
            "gain": ((cv.SENSOR,), da.from_array(np.arange(float(WIDE)), chunks=30)),
        },
        attrs={cv.ATTR_SAMPLING_RATE: RATE_HZ, "title": "kept"},
    )


def _expected_rms(stored: np.ndarray, window: slice) -> np.ndarray:
    """The level from the stored values, by `trace_sums` on the local scheduler."""
    return rms_from_sums(trace_sums(da.from_array(stored, chunks=1000), 0, window).compute(), 0)


def test_checkpoint_writes_stored_dtype_and_sums_what_it_wrote(tmp_path, local_client):
    """On 1 and 2 workers: the chunks are written in the stored dtype, each chunk summed by the
    task that wrote it; the levels equal `trace_sums` of the stored values bit for bit, for a
    window that starts and stops inside level blocks and for whole traces."""
    n_time = 3 * LEVEL_BLOCK + 1000
    dataset = _dataset(n_time, 5000)
    windows = {"u": slice(1000, 2 * LEVEL_BLOCK + 77), "v": slice(None)}
    reopened, levels = write_checkpoint(
        dataset,
        StoreLocation(tmp_path / "c.zarr"),
        windows,
        {"u": np.dtype(np.float32)},
        quiet=True,
    )
    stored_u = reopened["u"].values
    assert stored_u.dtype == np.float32 and reopened["v"].dtype == np.float64
    np.testing.assert_array_equal(stored_u, dataset["u"].values.astype(np.float32))
    np.testing.assert_array_equal(reopened["v"].values, dataset["v"].values)
    np.testing.assert_array_equal(reopened["gain"].values, np.arange(float(WIDE)))
    assert reopened.attrs["title"] == "kept"
    assert storage.open_group(StoreLocation(tmp_path / "c.zarr"))["u"].chunks == (
        LEVEL_BLOCK,
        WIDE,
    )
    for name, window in windows.items():
        expected = _expected_rms(reopened[name].values, window)
        np.testing.assert_array_equal(levels[name], expected)
        samples = reopened[name].values[window].astype(np.float64)
        np.testing.assert_allclose(
            levels[name], np.sqrt(np.nanmean(samples**2, axis=0, keepdims=True)), rtol=1e-12
        )


@settings(max_examples=8, deadline=None)
@given(
    time_chunk=st.integers(700, 30000),
    start=st.integers(0, 3 * LEVEL_BLOCK),
    length=st.integers(1, 3 * LEVEL_BLOCK),
)
def test_checkpoint_levels_do_not_depend_on_the_input_chunks(time_chunk, start, length):
    """Any input chunking and any window: the same stored values and level bits."""
    n_time = 3 * LEVEL_BLOCK + 1000
    window = slice(start, min(n_time, start + length))
    with tempfile.TemporaryDirectory() as tmp:
        reopened, levels = write_checkpoint(
            _dataset(n_time, time_chunk), StoreLocation(f"{tmp}/c.zarr"), {"u": window}, quiet=True
        )
        stored = reopened["u"].values
    np.testing.assert_array_equal(stored, _dataset(n_time, 4096)["u"].values)
    np.testing.assert_array_equal(levels["u"], _expected_rms(stored, window))


def _fails_on_second_block(block: np.ndarray, block_info=None) -> np.ndarray:
    if block_info[0]["chunk-location"][0] == 1:
        raise InvalidInput("block 1", "made to fail")
    return block


def test_a_failed_checkpoint_is_never_marked_complete(tmp_path):
    dataset = _dataset(3 * LEVEL_BLOCK, LEVEL_BLOCK)
    dataset["u"] = dataset["u"].copy(
        data=dataset["u"].data.map_blocks(_fails_on_second_block, dtype=np.float64)
    )
    url = str(tmp_path / "c.zarr")
    with pytest.raises(InvalidInput, match="made to fail"):
        write_checkpoint(dataset, StoreLocation(url), {"u": slice(None)}, quiet=True)
    with pytest.raises(InvalidInput, match="incomplete"):
        storage.open_dataset(StoreLocation(url))
