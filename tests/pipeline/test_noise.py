"""Counter-based noise: independent of chunking, standard normal, keyed by seed."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from seisctf.pipeline.transforms.noise import (
    gaussian_noise,
    standard_normal,
    standard_normal_at,
)


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 97), cols=st.integers(1, 53))
def test_noise_is_identical_for_any_chunking(rows, cols):
    whole = gaussian_noise(42, (97, 53), (97, 53)).compute()
    chunked = gaussian_noise(42, (97, 53), (rows, cols)).compute()
    assert np.array_equal(whole, chunked)


def test_noise_is_standard_normal_and_keyed():
    sample = standard_normal_at(7, np.arange(200_000))
    assert abs(sample.mean()) < 0.01
    assert abs(sample.std() - 1.0) < 0.01
    assert stats.kstest(sample, "norm").pvalue > 1e-3
    other = standard_normal_at(8, np.arange(200_000))
    assert abs(np.corrcoef(sample, other)[0, 1]) < 0.01
    # Neighbouring positions are uncorrelated too.
    assert abs(np.corrcoef(sample[:-1], sample[1:])[0, 1]) < 0.01


def test_noise_value_depends_only_on_global_position():
    block = gaussian_noise(3, (10, 20), (4, 6)).compute()
    assert block[7, 13] == standard_normal_at(3, np.array([7 * 20 + 13]))[0]


def _original_noise_block(key: int, n_columns: int, block_info: dict | None = None) -> np.ndarray:
    """`gaussian_noise`'s block function before `standard_normal` generalised it (bundles built
    then must stay reproducible)."""
    (row_start, row_stop), (col_start, col_stop) = block_info[None]["array-location"]
    rows = np.arange(row_start, row_stop, dtype=np.uint64)[:, None]
    cols = np.arange(col_start, col_stop, dtype=np.uint64)[None, :]
    return standard_normal_at(key, rows * np.uint64(n_columns) + cols)


@settings(max_examples=15, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    chunks=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    key=st.integers(0, 2**64 - 1),
)
def test_gaussian_noise_and_standard_normal_keep_the_original_2d_values(shape, chunks, key):
    original = da.map_blocks(
        _original_noise_block,
        key,
        shape[1],
        chunks=da.core.normalize_chunks(shape, shape),
        dtype=np.float64,
        meta=np.empty((0, 0)),
    ).compute()
    np.testing.assert_array_equal(gaussian_noise(key, shape, chunks).compute(), original)
    np.testing.assert_array_equal(standard_normal(key, shape, chunks).compute(), original)


def test_box_muller_log_cos_and_sin_are_accurate_to_an_ulp():
    """The generator's own ln and (cos, sin)(2π·) (IEEE arithmetic only) against the C
    library's."""
    from seisctf.signal import counter_rng

    rng = np.random.default_rng(4)
    uniforms = (rng.integers(0, 2**53, 50_000, dtype=np.uint64).astype(np.float64) + 1) / 2.0**53
    uniforms[:6] = [2.0**-53, 0.125, 0.25, 0.5, 0.75, 1.0]
    scratch = [np.empty(uniforms.size) for _ in range(8)]
    exponent = np.empty(uniforms.size, dtype=np.intc)
    logs = counter_rng._log_into(uniforms.copy(), *scratch[:6], exponent)
    expected = np.array([math.log(value) for value in uniforms])
    assert np.all(np.abs(logs - expected) <= np.spacing(np.abs(expected)))
    cosines, sines = counter_rng._sincos_two_pi_into(uniforms.copy(), *scratch)
    # math.cos(2π u) rounds 2π u first (~4e-16 at u = 1); the reduction here is exact.
    expected = np.array([math.cos(2.0 * math.pi * value) for value in uniforms])
    assert np.abs(cosines - expected).max() < 1e-15
    expected = np.array([math.sin(2.0 * math.pi * value) for value in uniforms])
    assert np.abs(sines - expected).max() < 1e-15
    assert list(cosines[[0, 2, 3, 4, 5]]) == [1.0, 0.0, -1.0, 0.0, 1.0]
    assert list(np.abs(sines[[2, 3, 4, 5]])) == [1.0, 0.0, 1.0, 0.0]
    assert sines[2] == 1.0 and sines[4] == -1.0
    assert abs(cosines[1] - math.sqrt(0.5)) <= np.spacing(math.sqrt(0.5))
    assert abs(sines[1] - math.sqrt(0.5)) <= np.spacing(math.sqrt(0.5))


def _splitmix64(value: int) -> int:
    mask = 2**64 - 1
    z = (value * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def _reference_normal(key: int, index: int) -> float:
    """The documented definition with Python integers and the C library's math: indices 2p and
    2p + 1 are Box-Muller's pair from SplitMix64(4p ⊕ k) and SplitMix64((4p ⊕ k) + 1)."""
    mixed = _splitmix64(key)
    base = ((index >> 1) << 2) ^ mixed
    first = ((_splitmix64(base) >> 11) + 1) / 2.0**53
    second = ((_splitmix64((base + 1) & (2**64 - 1)) >> 11) + 1) / 2.0**53
    radius = math.sqrt(-2.0 * math.log(first))
    angle = 2.0 * math.pi * second
    return radius * (math.cos(angle) if index % 2 == 0 else math.sin(angle))


@settings(max_examples=25, deadline=None)
@given(key=st.integers(0, 2**64 - 1), first=st.integers(0, 2**62 - 64))
def test_noise_follows_its_definition(key, first):
    indices = np.arange(first, first + 64, dtype=np.uint64)
    expected = np.array([_reference_normal(key, int(index)) for index in indices])
    # Within the C library's cos/sin of a rounded 2πU and ln (a few 1e-16 × R).
    np.testing.assert_allclose(standard_normal_at(key, indices), expected, rtol=2e-15, atol=2e-15)


@settings(max_examples=25, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 9), st.integers(1, 30), st.integers(1, 7)),
    data=st.data(),
)
def test_blocks_equal_the_values_at_their_positions(shape, data):
    """Blocks (whole rows, partial rows, odd starts, 3-D) made by runs of pairs give exactly
    `standard_normal_at` of their positions."""
    from seisctf.signal.counter_rng import flat_positions, normals_in_block

    location = []
    for size in shape:
        start = data.draw(st.integers(0, size - 1))
        location.append((start, data.draw(st.integers(start + 1, size))))
    block = normals_in_block(11, location, shape)
    np.testing.assert_array_equal(block, standard_normal_at(11, flat_positions(location, shape)))


_NOISE_DIGEST = (
    "import hashlib, numpy as np; "
    "from seisctf.pipeline.transforms.noise import standard_normal_at; "
    "u = (np.arange(1, 20001, dtype=np.float64) / 20001.0); "
    "print(hashlib.sha256(np.log(u).tobytes()).hexdigest(), "
    "hashlib.sha256(standard_normal_at(99, np.arange(200_000)).tobytes()).hexdigest())"
)


def test_noise_bits_do_not_depend_on_the_cpu():
    """NumPy picks its ln per CPU (its AVX-512 code, else the C library's): the noise must come
    out the same either way. Run with NumPy's AVX-512 code switched off, as on a CPU without
    it; skipped where there is none to switch off (then np.log is the same both ways)."""

    def digests(environment: dict[str, str]) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", _NOISE_DIGEST],
            env={**os.environ, **environment},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0 and environment:
            pytest.skip(f"NumPy refused the CPU feature setting: {done.stderr.strip()[-200:]}")
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    default_log, default_noise = digests({})
    plain_log, plain_noise = digests({"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"})
    if plain_log == default_log:
        pytest.skip("np.log is the same with and without NumPy's AVX-512 code on this machine")
    assert plain_noise == default_noise
