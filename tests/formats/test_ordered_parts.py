"""Partitions of sorted rows put in one global order by groups (`ordered_parts`): the groups in
order are every row sorted (a row two partitions hold, once), whatever the split; a partition
apart from the others stays as it is kept (no task merges it); and the gaps and overlaps of DAS
patches found group by group, each from what the groups before it reach, are those of all the
patches in one sequence."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from seisctf.formats.das.das_plan import gaps_and_overlaps, reach, reaches_before
from seisctf.formats.shared.ordered_parts import covering, ordered, overlap_groups, span_of
from seisctf.formats.shared.partition_tasks import in_process

ROWS = st.lists(st.tuples(st.integers(0, 60), st.text("abc", max_size=2)), unique=True,
                max_size=40)  # fmt: skip


def _split(rows: list, n_parts: int, seed: int) -> list[list]:
    """`rows` dealt at random into `n_parts` partitions, each sorted."""
    chooser = random.Random(seed)
    parts: list[list] = [[] for _ in range(n_parts)]
    for row in rows:
        parts[chooser.randrange(n_parts)].append(row)
    return [sorted(part) for part in parts]


@settings(max_examples=200, deadline=None)
@given(rows=ROWS, n_parts=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_groups_in_order_are_every_row_sorted(rows, n_parts, seed):
    parts = _split(rows, n_parts, seed)
    groups, counts = ordered(parts, in_process)
    assert [row for group in groups for row in group] == sorted(rows)
    assert counts == [len(group) for group in groups]
    spans = [span_of(part) for part in parts]
    for index, span in enumerate(spans):
        apart = span is not None and all(
            other is None or other[1] < span[0] or span[1] < other[0]
            for number, other in enumerate(spans) if number != index
        )  # fmt: skip
        if apart:  # kept as it is: the very object, no task made a copy of it
            assert any(group is parts[index] for group in groups)


@settings(max_examples=200, deadline=None)
@given(rows=ROWS, n_parts=st.integers(2, 6), seed=st.integers(0, 2**16))
def test_a_row_in_several_partitions_comes_once(rows, n_parts, seed):
    """Each row dealt to one partition and, at random, to another too (as a problem line two
    partitions found): every row once, sorted."""
    chooser = random.Random(seed + 1)
    parts = [set(part) for part in _split(rows, n_parts, seed)]
    for row in rows:
        if chooser.random() < 0.3:
            parts[chooser.randrange(n_parts)].add(row)
    groups, counts = ordered([sorted(part) for part in parts], in_process)
    assert counts == [len(group) for group in groups]
    assert [row for group in groups for row in group] == sorted(rows)


def test_overlapping_ranges_share_a_group_through_others():
    spans = [(0, 5), (20, 30), None, (4, 10), (9, 12), (31, 40)]
    assert overlap_groups(spans) == [[0, 3, 4], [1], [5]]
    assert overlap_groups([(0, 5), (5, 9), (10, 12)]) == [[0, 1], [2]]  # touching: one group
    assert overlap_groups([None, None]) == []


def test_the_first_rows_need_only_the_parts_that_hold_them():
    assert covering(["a", "b", "c", "d"], [0, 2, 0, 5], 3) == ["b", "d"]
    assert covering(["a", "b", "c"], [4, 1, 1], 3) == ["a"]
    assert covering(["a", "b"], [0, 0], 3) == []


def test_a_later_equal_reach_carries_its_own_path():
    """Two patches stop at the same sample in groups of their own: the gap after them names the
    later one, as the sequence of all three does (`reaches_before` keeps the later of two equal
    reaches)."""
    rows = [(0, "a", 0, 100), (10, "b", 0, 100), (150, "c", 0, 200)]
    groups, _ = ordered([[row] for row in rows], in_process)
    assert len(groups) == 3
    before = reaches_before(map(reach, groups))
    assert before == [(0, None), (100, "a"), (100, "b")]
    gaps = [gap for group, carried in zip(groups, before, strict=True)
            for gap in gaps_and_overlaps(group, carried)[0]]  # fmt: skip
    assert (
        gaps
        == gaps_and_overlaps(rows)[0]
        == [{"first_sample": 100, "samples": 50, "after": "b", "before": "c"}]
    )


SPANS = st.lists(
    st.tuples(st.integers(0, 40), st.integers(1, 30), st.integers(0, 1)), max_size=30
).map(lambda found: sorted({(first, f"p{i:02d}", part, first + n)
                            for i, (first, n, part) in enumerate(found)}))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(rows=SPANS, n_parts=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_gaps_and_overlaps_by_groups_are_those_of_the_whole(rows, n_parts, seed):
    """Patch spans (first, path, index, stop) with many equal starts and stops, dealt into
    partitions at random: the spans found group by group equal those of one pass."""
    groups, reaches = ordered(_split(rows, n_parts, seed), in_process, reach)
    assert reaches == [reach(group) for group in groups]
    found = [
        gaps_and_overlaps(group, before)
        for group, before in zip(groups, reaches_before(map(reach, groups)), strict=True)
    ]
    whole = gaps_and_overlaps(rows)
    assert [span for spans in found for span in spans[0]] == whole[0]
    assert [span for spans in found for span in spans[1]] == whole[1]
