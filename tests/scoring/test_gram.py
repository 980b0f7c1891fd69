"""2-norms from Gram matrices summed panel by panel in parts: equal to numpy's SVD norm, and
bitwise the same for any chunking of the stored arrays."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from chunkings import chunk_sizes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf.blocks import Stored
from seisctf.scoring import gram
from seisctf.scoring.regions import Difference


@pytest.fixture
def small_panels(monkeypatch):
    """Panels of 2-4 KiB and parts of 512 bytes: small windows then span several panels, each
    of several parts, as a real window of millions of samples does at the real sizes."""
    monkeypatch.setattr(gram, "PANEL_MIN_BYTES", 2048)
    monkeypatch.setattr(gram, "PANEL_MAX_BYTES", 4096)
    monkeypatch.setattr(gram, "PART_BYTES", 512)


def chunked_window(data, truth: np.ndarray, submission: np.ndarray, *window) -> Difference:
    """truth − submission (`window`: Difference's scale and rows) on a chunking `data` draws."""
    chunks = (chunk_sizes(data.draw, truth.shape[0]), chunk_sizes(data.draw, truth.shape[1]))
    return Difference(
        Stored(da.from_array(truth, chunks=chunks)),
        Stored(da.from_array(submission, chunks=chunks)),
        *window,
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_norm_equals_numpy_and_never_depends_on_chunking(small_panels, data):
    shape = (data.draw(st.integers(1, 90)), data.draw(st.integers(1, 90)))
    rows = (data.draw(st.integers(0, shape[0] - 1)), shape[0])
    rows = (rows[0], data.draw(st.integers(rows[0] + 1, shape[0])))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    truth = rng.standard_normal(shape).astype(np.float32)
    submission = rng.standard_normal(shape).astype(np.float32)
    scale = data.draw(st.sampled_from([1.0, 0.25]))

    norms = []
    for _ in range(2):
        window = chunked_window(data, truth, submission, scale, rows)
        norms.append(dask.compute(gram.spectral_norm(window), scheduler="threads")[0])

    difference = scale * (truth[slice(*rows)].astype(np.float64) - submission[slice(*rows)])
    assert norms[0] == norms[1]  # bitwise: the panels and parts follow the window's shape only
    np.testing.assert_allclose(norms[0], np.linalg.norm(difference, 2), rtol=1e-12)


def test_a_window_of_several_panels_of_several_parts_equals_numpy(small_panels):
    """The case the property test draws only sometimes, at fixed sizes: both orientations."""
    rng = np.random.default_rng(3)
    for shape in ((200, 12), (12, 200)):
        values = rng.standard_normal(shape).astype(np.float32)
        window = Difference(Stored(da.from_array(values, chunks=(7, 5))))
        m = min(shape)
        step = gram.PANEL_MIN_BYTES // (8 * m) if 8 * m * m < gram.PANEL_MIN_BYTES else m
        assert max(shape) / step > 3 and step > gram.PART_BYTES // (8 * m) > 1
        norm = dask.compute(gram.spectral_norm(window), scheduler="synchronous")[0]
        np.testing.assert_allclose(norm, np.linalg.norm(values.astype(np.float64), 2), rtol=1e-12)


def test_mirror_upper_fills_the_lower_triangle_in_place():
    rng = np.random.default_rng(4)
    for order in ("C", "F"):
        upper = np.triu(rng.standard_normal((37, 37)))
        expected = upper + np.triu(upper, 1).T
        target = np.array(upper, order=order)
        assert gram.mirror_upper(target, band=8) is target
        np.testing.assert_array_equal(target, expected)
        np.testing.assert_array_equal(gram.mirror_upper(target, band=8), expected)  # idempotent


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_shared_grams_give_each_view_its_own_norm_for_any_chunking(small_panels, data):
    """`spectral_norms`: the whole window's 2-norm and each part's (a partition of the columns)
    from shared Grams equal numpy's SVD norms of those columns, bitwise the same for any
    chunking, in both orientations (AᵀA with more rows than columns, AAᵀ otherwise)."""
    shape = (data.draw(st.integers(2, 80)), data.draw(st.integers(2, 80)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    truth = rng.standard_normal(shape).astype(np.float32)
    submission = rng.standard_normal(shape).astype(np.float32)
    public = rng.permutation(shape[1])[: shape[1] // 2]
    keep = np.zeros(shape[1], dtype=bool)
    keep[public] = True
    columns = {
        "whole": None,
        "public": tuple(np.flatnonzero(keep).tolist()),
        "private": tuple(np.flatnonzero(~keep).tolist()),
    }
    norms = []
    for _ in range(2):
        window = chunked_window(data, truth, submission)
        norms.append(dask.compute(gram.spectral_norms(window, columns), scheduler="threads")[0])
    assert norms[0] == norms[1]
    difference = truth.astype(np.float64) - submission
    for view, chosen in columns.items():
        expected = np.linalg.norm(difference if chosen is None else difference[:, chosen], 2)
        np.testing.assert_allclose(norms[0][view], expected, rtol=1e-12, atol=1e-300)
    # Views that do not partition the columns share nothing in AAᵀ: the caller scores each alone.
    if shape[0] <= shape[1]:
        assert gram.spectral_norms(window, {"whole": None, "public": columns["public"]}) is None
