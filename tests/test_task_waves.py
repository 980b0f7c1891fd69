"""`cluster.wave_bounds`: waves of consecutive tasks, each as full as its limits allow."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from seisctf.cluster import compute_in_waves, wave_bounds


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.integers(0, 50), max_size=60),
    wave_tasks=st.integers(1, 12),
    wave_cost=st.integers(0, 120),
    costed=st.booleans(),
)
def test_waves_cover_the_tasks_in_order_within_their_limits(costs, wave_tasks, wave_cost, costed):
    n = len(costs)
    bounds = wave_bounds(n, wave_tasks, costs if costed else None, wave_cost)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    for first, stop in bounds:
        size, spent = stop - first, sum(costs[first:stop]) if costed else 0
        assert size <= wave_tasks and (size > 0 or n == 0)
        assert spent <= wave_cost or size == 1  # a task above the budget is a wave alone
        if stop < n:  # full: the next task would break a limit
            assert size == wave_tasks or (costed and spent + costs[stop] > wave_cost)


@settings(max_examples=30, deadline=None)
@given(n_tasks=st.integers(0, 40), wave_tasks=st.integers(1, 9))
def test_a_fold_gets_each_waves_results_with_its_first_index(n_tasks, wave_tasks):
    """`compute_in_waves(fold=…)`: every result once, in waves starting at their first task's
    index, none returned; without it, the same results returned in task order."""
    import dask

    def task(index: int):
        return dask.delayed(lambda value: value * value)(index)

    waves: list[tuple[int, list]] = []
    kept = compute_in_waves(task, n_tasks, quiet=True, wave_tasks=wave_tasks,
                            fold=lambda first, results: waves.append((first, results)))  # fmt: skip
    assert kept == []
    assert [first for first, _ in waves] == list(range(0, max(n_tasks, 1), wave_tasks))
    folded = [value for _, results in waves for value in results]
    assert folded == [i * i for i in range(n_tasks)]
    assert compute_in_waves(task, n_tasks, quiet=True, wave_tasks=wave_tasks) == folded


def test_a_wave_s_results_come_to_the_client_as_one_key(dask_cluster, monkeypatch):
    """The client gathers one key a wave, whatever its tasks: distributed's gather replies are
    msgpack maps of key -> value, whose keys msgpack interns, and the interpreter's table of
    interned strings keeps its size after them (a wave of 20,000 keys left ~1 MiB behind)."""
    import dask
    from distributed import Client
    from distributed.utils_comm import unpack_remotedata

    from seisctf.cluster import dask_client

    gathered: list[int] = []
    gather = Client._gather

    async def counted(self, futures, *args, **kwargs):
        gathered.append(len(unpack_remotedata(futures, byte_keys=True)[1]))
        return await gather(self, futures, *args, **kwargs)

    monkeypatch.setattr(Client, "_gather", counted)

    def task(index: int):
        return dask.delayed(lambda value: value + 1)(index)

    with dask_client(dask_cluster.address, quiet=True):
        results = compute_in_waves(task, 25, quiet=True, wave_tasks=10)
    assert results == list(range(1, 26))
    assert gathered == [1, 1, 1]  # three waves, a key each


def test_shared_sends_any_value_as_one_key(dask_cluster):
    """`cluster.shared` of a set, a list or a dict is one future holding it (`Client.scatter`
    alone makes a future of each item), which tasks receive whole."""
    import dask
    from distributed import Client, Future

    from seisctf.cluster import shared

    paths = {f"/archive/{index:05d}.mseed" for index in range(1000)}
    with Client(dask_cluster.address, set_as_default=True) as client:
        for value in (paths, sorted(paths), {"paths": sorted(paths)}, frozenset(paths)):
            sent = shared(value)
            assert isinstance(sent, Future)
            (received,) = dask.compute(dask.delayed(lambda held: held)(sent))
            assert received == value and type(received) is type(value)
            assert len(client.who_has()) <= 2  # this one (and the last, being released)
            del sent


def test_a_phase_line_counts_its_own_tasks_not_the_kept_ones_it_depends_on(dask_cluster):
    """`LABEL: N tasks done in T s` (outside a terminal): N is the phase's tasks, not the
    results of earlier phases they take (a scan's listing, a resume's record), which
    distributed's counts include."""
    import io
    import re

    import dask
    from distributed import Client, wait

    from seisctf.cluster import kept
    from seisctf.progress import show_progress

    with Client(dask_cluster.address, set_as_default=True) as client:
        earlier = kept([dask.delayed(lambda i: i + 1)(i) for i in range(5)], "", True)
        wait(earlier)  # done, as an earlier phase is (unfinished, they are tasks still to run)
        total = dask.delayed(lambda *values: sum(values))(*earlier)
        later = client.persist([total, dask.delayed(lambda held: held)(earlier[0])])
        stream = io.StringIO()
        show_progress(later, "later", stream)
        assert re.fullmatch(r"later: 2 tasks done in \d+\.\d s\n", stream.getvalue())
        assert dask.compute(*later) == (15, 1)
