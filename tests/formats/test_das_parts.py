"""The DAS plan made partition by partition (`das_parts`): any split of the scan gives the plan,
the painting order, the gaps and overlaps and the runs' pieces of the whole scan as one; on a
cluster the partitions stay on the workers and the client holds their summaries alone."""

from __future__ import annotations

import pickle

import pytest
import zarr
from distributed import Future
from hypothesis import given, settings
from hypothesis import strategies as st
from test_das_plan import STEP, _patch, _scans

from seisctf import conventions as cv
from seisctf.cluster import dask_client, kept
from seisctf.errors import InvalidInput
from seisctf.formats.das import das_parts, das_spans
from seisctf.formats.das.das_parts import make_das_plan, plan_parts, wave_runs
from seisctf.formats.das.das_plan import gaps_and_overlaps, reach, reaches_before, span_rows
from seisctf.formats.das.das_runs import PieceIndex, RunLayout
from seisctf.formats.shared.ordered_parts import ordered
from seisctf.formats.shared.partition_tasks import in_process, on_cluster
from seisctf.location import StoreLocation

# Per file: (first grid sample, samples, which axis: 0 the usual, 1 another step, 2 fewer
# channels). Most files share the axis, so that it wins whatever the split.
FILES = st.lists(
    st.tuples(st.integers(0, 3_000), st.integers(1, 400), st.sampled_from([0, 0, 0, 1, 2])),
    min_size=1,
    max_size=24,
)
OTHER = ({}, {"step_ns": 2 * STEP}, {"n_distance": 8})


def _files(layout) -> list:
    patches = [
        _patch(f"f{index:02d}", first, n, **OTHER[kind])
        for index, (first, n, kind) in enumerate(layout)
    ]
    return _scans(*patches)


def _split(scans: list, cuts: set[int]) -> list[list]:
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(scans)), len(scans)]
    return [scans[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=40, deadline=None)
@given(layout=FILES, cuts=st.sets(st.integers(1, 23), max_size=8),
       block_samples=st.sampled_from([7, 64, 500]))  # fmt: skip
def test_any_split_plans_as_the_whole(layout, cuts, block_samples):
    scans = _files(layout)
    try:
        whole = make_das_plan(scans, block_samples)
    except InvalidInput as error:  # no patch agrees: the same error whatever the split
        with pytest.raises(InvalidInput) as again:
            plan_parts(_split(scans, cuts), in_process, block_samples)
        assert (again.value.what, str(again.value)) == (error.what, str(error))
        return
    parted = plan_parts(_split(scans, cuts), in_process, block_samples)
    plan = parted.plan
    assert (plan.axis, plan.start_ns, plan.n_time, plan.block_samples, plan.problems) == (
        whole.axis, whole.start_ns, whole.n_time, whole.block_samples, whole.problems
    )  # fmt: skip
    merged = list(das_parts.in_painting_order(parted.parts))
    assert merged == list(whole.placed)
    # The gaps and overlaps as `record_spans` finds them: by groups of partitions in time order,
    # each from what the groups before it reach.
    groups, reaches = ordered(
        [list(span_rows(part.placed)) for part in parted.parts], in_process, reach
    )
    assert reaches == [reach(group) for group in groups]
    found = [
        gaps_and_overlaps(group, before)
        for group, before in zip(groups, reaches_before(reaches), strict=True)
    ]
    assert tuple([span for spans in found for span in spans[kind]] for kind in (0, 1)) == (
        whole.gaps_and_overlaps())  # fmt: skip
    # The runs: the same blocks, and in each the pieces the whole plan paints, in its order.
    layout_whole = RunLayout.of_patches(whole)
    runs = parted.layout()
    assert (runs.n_blocks, len(runs)) == (layout_whole.n_blocks, len(layout_whole))
    files = {scan.path: (scan.entry["sha256"], scan.entry["size"]) for scan in scans}
    index = PieceIndex(whole, whole.placed, files, "run-1")
    pieces = das_parts.run_pieces(parted, runs, in_process)
    numbers = list(range(len(runs)))
    for wave in (numbers[i : i + 3] for i in range(0, len(numbers), 3)):
        expected = [index.run(number, layout_whole.blocks_of(number)) for number in wave]
        assert wave_runs(parted, runs, wave, "run-1") == expected
        # What each run's graph carries, counted by the partitions.
        assert [pieces[n] for n in wave] == [sum(len(b.pieces) for b in r.blocks) for r in expected]
    assert parted.interrogator == "PRODML 2.1"


def test_nothing_readable_names_the_first_files_of_every_partition():
    unreadable = [
        das_parts.DasFileScan(f"x{i}.h5", {}, problems=(f"x{i}.h5: not a DAS file",))
        for i in range(3)
    ]
    with pytest.raises(InvalidInput, match=r"none of the 3 file\(s\).*x0.h5") as error:
        plan_parts([unreadable[:1], unreadable[1:]], in_process)
    assert error.value.what == "x0.h5, x1.h5, x2.h5"  # both partitions' files


def _summaries_bytes(n_files: int, address: str) -> tuple[int, list]:
    """The pickled size of the summaries the client holds for `n_files` files in four
    partitions planned on the cluster at `address`, and the partitions (futures there)."""
    import dask

    scans = _files([(index * 100, 100, 0) for index in range(n_files)])
    size = -(-n_files // 4)
    with dask_client(address, quiet=True):
        parts = kept([dask.delayed(list)(scans[i : i + size]) for i in range(0, n_files, size)])
        parted = plan_parts(parts, on_cluster(quiet=True), 64)
        held = len(pickle.dumps((parted.plan, parted.summaries)))
        placed = list(parted.parts)  # persisted: each a key whose value is on a worker
        graphs = [dict(part.__dask_graph__()) for part in placed]
        assert all(isinstance(value, Future) for graph in graphs for value in graph.values())
        assert parted.plan.n_time == 100 * n_files and not parted.plan.placed
        runs = parted.layout()
        assert runs.n_blocks == -(-100 * n_files // 64)
        found = wave_runs(parted, runs, [0], "")[0]
        assert [block.block for block in found.blocks] == runs.blocks_of(0)
        del parts, parted, placed
    return held, found


def test_the_client_holds_summaries_not_patches(dask_cluster):
    """On a cluster each partition is placed where it was scanned (a future in the client);
    what the client keeps does not grow with the files (the first few paths of each partition
    are in it, and the merged spans of blocks: one for a continuous recording)."""
    few, _ = _summaries_bytes(40, dask_cluster.address)
    many, _ = _summaries_bytes(400, dask_cluster.address)
    assert many - few < 200, (few, many)


def test_spans_found_and_written_by_groups_are_the_whole_ones(dask_cluster, tmp_path, monkeypatch):
    """`record_spans` in this process and on a cluster, over four partitions of which two
    interleave in time (one group, merged) and two lie apart (groups as they are kept): the
    root attrs and the groups it writes hold the gaps and overlaps of the whole plan."""
    import dask

    monkeypatch.setattr(cv, "ATTR_DAS_SPANS", 2)
    layout = [(index * 120 + (index % 3) * 9, 100 + (index % 2) * 30, 0) for index in range(12)]
    layout[4] = (150, 60, 0)  # inside the first partition's time: the first two partitions merge
    scans = _files(layout)
    whole = make_das_plan(scans, 64)
    expected = das_spans.timed(*whole.gaps_and_overlaps(), whole.start_ns, whole.axis.step_ns)
    assert all(len(expected[kind]) > 2 for kind in ("gaps", "overlaps"))
    split = [scans[i : i + 3] for i in range(0, 12, 3)]
    for name in ("here", "cluster"):
        store = tmp_path / f"{name}.zarr"
        zarr.open_group(str(store), mode="w")
        if name == "here":
            attrs = das_parts.record_spans(StoreLocation(store), plan_parts(split, in_process, 64),
                                           in_process)  # fmt: skip
        else:
            with dask_client(dask_cluster.address, quiet=True):
                parts = kept([dask.delayed(list)(part) for part in split])
                each = on_cluster(quiet=True)
                attrs = das_parts.record_spans(StoreLocation(store), plan_parts(parts, each, 64),
                                               each)  # fmt: skip
        assert attrs == das_spans.span_attrs(expected, 2)
        group = zarr.open_group(str(store), mode="r+")
        group.attrs.update(attrs)
        for kind in ("gaps", "overlaps"):
            assert das_spans.read_spans(group, kind) == expected[kind], (name, kind)
