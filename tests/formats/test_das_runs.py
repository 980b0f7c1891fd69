"""A DAS ingest's runs (`das_runs.RunLayout`, their pieces by `PieceIndex`) against the plan's
own block-by-block pieces (`DasPlan.pieces_by_block`, one pass over every patch): the same
blocks, in order, each once, with the same pieces in painting order, whatever the patches'
layout and the block size."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from test_das_plan import _patch, _scans

from seisctf.formats.das import das_runs
from seisctf.formats.das.das_parts import make_das_plan
from seisctf.formats.das.das_runs import PieceIndex, RunLayout, run_length

# (first grid sample, samples) of up to 20 patches: gaps, overlaps and patches inside others.
PATCHES = st.lists(st.tuples(st.integers(0, 3_000), st.integers(1, 400)), min_size=1, max_size=20)


def _layout_and_plan(spans, block_samples):
    patches = [_patch(f"f{index:02d}", first, n) for index, (first, n) in enumerate(spans)]
    plan = make_das_plan(_scans(*patches), block_samples=block_samples)
    files = {p.path: (f"sha-{p.path}", 100 + index) for index, p in enumerate(patches)}
    return RunLayout.of_patches(plan), plan, files


def _run(plan, files, layout, number):
    return PieceIndex(plan, plan.placed, files, "run-1").run(number, layout.blocks_of(number))


def _expected_pieces(plan, files, pieces, block):
    """The pieces of `block` as a run carries them, from `pieces` (`plan.pieces_by_block()`)."""
    first, _ = plan.block_span(block)
    return [
        (placed.patch, k0, k1, placed.first_index + k0 - first, *files[placed.patch.path])
        for placed, k0, k1 in pieces[block]
    ]


@settings(max_examples=25, deadline=None)
@given(spans=PATCHES, block_samples=st.sampled_from([1, 7, 64, 500]))
def test_runs_cover_the_touched_blocks_once_with_the_plan_s_pieces(spans, block_samples):
    layout, plan, files = _layout_and_plan(spans, block_samples)
    pieces = plan.pieces_by_block()
    touched = sorted(pieces)
    assert layout.n_blocks == len(touched)
    length = run_length(len(touched))
    assert len(layout) == math.ceil(len(touched) / length)
    written = []
    for number in range(len(layout)):
        run = _run(plan, files, layout, number)
        assert run.number == number
        assert [b.block for b in run.blocks] == layout.blocks_of(number)
        assert len(run.blocks) == length or number == len(layout) - 1
        for block in run.blocks:
            assert (block.first, block.stop) == plan.block_span(block.block)
            assert block.n_distance == plan.axis.n_distance and block.cache_run == "run-1"
            assert list(block.pieces) == _expected_pieces(plan, files, pieces, block.block)
        written += [b.block for b in run.blocks]
    assert written == touched


@settings(max_examples=15, deadline=None)
@given(spans=PATCHES, picked=st.sets(st.integers(0, 200), max_size=40))
def test_an_append_s_runs_write_its_blocks_alone(spans, picked):
    """`touched` (an append's blocks: the new patches' and the old last one) limits the runs
    to those blocks, each with every patch that paints it."""
    _, plan, files = _layout_and_plan(spans, 16)
    only = sorted(b for b in picked if b < plan.n_blocks)
    layout = RunLayout(plan, [(b, b + 1) for b in only])
    blocks = [b for n in range(len(layout)) for b in _run(plan, files, layout, n).blocks]
    assert [b.block for b in blocks] == only
    pieces = plan.pieces_by_block()
    for block in blocks:
        assert len(block.pieces) == len(pieces.get(block.block, []))


def test_run_length_grows_to_its_bound_with_the_blocks(monkeypatch):
    assert [run_length(n) for n in (0, 1, 15, 16, 47, 48, 511, 512, 10**6)] == [
        1, 1, 1, 1, 2, 3, 31, 32, 32
    ]  # fmt: skip
    monkeypatch.setattr(das_runs, "MIN_RUNS", 1)
    assert [run_length(n) for n in (1, 5, 40)] == [1, 5, 32]
