"""Functions of each partition of an ingest's scan, run where the partitions are.

An `Each` runs `function(*values)` once per partition, `values` being that partition's item of
each of its columns (lists of one item per partition, in path order), and returns one result
per partition: with `keep`, results to pass on to further rounds (on a cluster, kept in the
workers' memory: the client holds a key, not the value); without, the results themselves,
which the client merges (they are small: summaries, problem lines, counts).

`in_process` runs them here; `on_cluster` as Dask tasks (on the active client's workers, else
the local scheduler), so partitions made by tasks (the scan's batches) never come to the client.
`merged` runs one function of every partition's kept result, as one task where they are: the
client receives the merge, not the partitions' results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from seisctf.cluster import compute, kept


class Each(Protocol):
    def __call__(
        self,
        function: Callable[..., Any],
        *columns: Sequence[Any],
        keep: bool = False,
        label: str = "",
    ) -> list[Any]: ...


def in_process(
    function: Callable[..., Any], *columns: Sequence[Any], keep: bool = False, label: str = ""
) -> list[Any]:
    """`function` of each partition's values, in this process (`keep` changes nothing)."""
    return [function(*values) for values in zip(*columns, strict=True)]


def on_cluster(quiet: bool = False) -> Each:
    """An `Each` of Dask tasks, one per partition; a `label`led round shows its progress
    (unless `quiet`)."""
    import dask

    def each(
        function: Callable[..., Any],
        *columns: Sequence[Any],
        keep: bool = False,
        label: str = "",
    ) -> list[Any]:
        tasks = [dask.delayed(function)(*values) for values in zip(*columns, strict=True)]
        shown = quiet or not label
        if keep:
            return kept(tasks, label, shown)
        return list(compute(*tasks, label=label, quiet=shown))

    return each


def merged(function: Callable[..., Any], parts: Sequence[Any]) -> Any:
    """`function(*parts)` of an `Each`'s kept results (`keep=True`): one Dask task where they
    are, whose result alone comes to the client; values of `in_process`, here."""
    import dask
    from distributed import Future

    if not any(isinstance(p, Future) or dask.is_dask_collection(p) for p in parts):
        return function(*parts)
    return compute(dask.delayed(function)(*parts), quiet=True)[0]
