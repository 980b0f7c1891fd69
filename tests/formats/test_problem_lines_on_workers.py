"""An ingest's problem lines stay where they were found (`problem_parts`, `problem_lines`): the
partitions' summaries the client gathers count their lines and keep the first few
(`problem_parts.HEAD_LINES`), the decode problems stay in the runs' records, and a task writes
every line into the store's `problems` group, in the same order whatever the partitions and
wherever the tasks run. More bad files than the root attrs hold (`ATTR_PROBLEM_LINES`, as in
use), beside the synthetic archive (overlaps: decode problems)."""

from __future__ import annotations

import functools
import hashlib
import pickle
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr
from dask.callbacks import Callback
from test_waveforms import write_synthetic_archive

from seisctf import conventions as cv
from seisctf.cluster import dask_client, kept
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared import (
    input_manifest,
    partition_tasks,
    problem_parts,
    resumable,
    table_pieces,
)
from seisctf.formats.shared.partition_tasks import in_process
from seisctf.formats.shared.problem_lines import (
    problem_attrs,
    read_problems,
    write_sorted_problems,
)
from seisctf.formats.shared.problem_parts import ProblemLines
from seisctf.location import StoreLocation

N_BAD = cv.ATTR_PROBLEM_LINES + 40


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("many_bad")
    write_synthetic_archive(root / "a_synthetic")
    bad = root / "b_bad"
    bad.mkdir()
    for index in range(N_BAD):
        (bad / f"bad_{index:05d}.mseed").write_bytes(b"not a seismogram %d\n" % index * 4)
    return root


class _Gathered:
    """The pickled size (bytes) of each result the partitions' rounds return to the client."""

    def __init__(self, monkeypatch):
        self.sizes: list[int] = []
        real = partition_tasks.compute

        def compute(*tasks, **options):
            results = real(*tasks, **options)
            self.sizes += [len(pickle.dumps(result)) for result in results]
            return results

        monkeypatch.setattr(partition_tasks, "compute", compute)


def _ingest(archive: Path, out: Path, batches: int, monkeypatch, block_samples: int = 4096
            ) -> tuple:  # fmt: skip
    """The store's chunks (hashed), attrs, coverage and every problem line, and the report."""
    monkeypatch.setattr(resumable, "SCAN_TASKS", batches)
    monkeypatch.setattr(resumable, "SCAN_TASKS_PER_WORKER", 0)  # `batches` batches exactly
    report = ingest_waveforms([str(archive)], StoreLocation(out), block_samples=block_samples,
                              quiet=True)  # fmt: skip
    chunks = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
              for p in sorted(out.rglob("*")) if p.is_file()}  # fmt: skip
    group = zarr.open_group(str(out), mode="r")
    stored = (chunks, dict(group.attrs), np.asarray(group["coverage"][:]).tobytes())
    return stored, read_problems(group), report


def test_problem_lines_are_written_by_tasks_in_one_order(archive, tmp_path, monkeypatch):
    from seisctf.cluster import dask_client

    gathered = _Gathered(monkeypatch)
    whole, lines, report = _ingest(archive, tmp_path / "whole.zarr", 1, monkeypatch)
    # The client gathered counts and first lines, not the lines (~90 bytes each).
    assert gathered.sizes and max(gathered.sizes) < 20 * 90 * 5
    bad = sorted(str(p) for p in (archive / "b_bad").iterdir())
    assert len(lines) > N_BAD and report.n_problems == len(lines)
    assert [line.split(":")[0] for line in lines if "b_bad" in line] == bad  # path order
    assert any("overlaps" in line for line in lines)  # decode problems, after the plan's
    assert list(report.problems) == lines[: cv.ATTR_PROBLEM_LINES]
    attrs = whole[1]
    assert attrs[cv.ATTR_PROBLEMS] == lines[: cv.ATTR_PROBLEM_LINES]
    assert attrs[cv.ATTR_PROBLEM_COUNT] == len(lines)
    for batches in (7, 30):
        assert _ingest(archive, tmp_path / f"threads{batches}.zarr", batches, monkeypatch)[:2] == (
            whole, lines)  # fmt: skip
    with dask_client(n_workers=2, memory_limit="2GiB", quiet=True):
        assert _ingest(archive, tmp_path / "workers.zarr", 7, monkeypatch)[:2] == (whole, lines)


class _MoveAwayAfterAProblem(Callback):
    """Local-scheduler callback: once a block task's record counts a problem, move the archive
    away (the later block tasks then fail to read their files, as on a lost mount)."""

    def __init__(self, archive: Path, elsewhere: Path):
        super().__init__()
        self.archive, self.elsewhere = archive, elsewhere

    def _posttask(self, key, result, dsk, state, worker_id):
        name = key[0] if isinstance(key, tuple) else key
        if str(name).startswith("ingest_block") and result["problem_count"]:
            if self.archive.exists():
                self.archive.rename(self.elsewhere)


def test_a_resume_holds_counts_of_the_done_runs_lines_not_the_lines(archive, tmp_path, monkeypatch):
    whole, lines, _ = _ingest(archive, tmp_path / "whole.zarr", 7, monkeypatch, 512)
    out = tmp_path / "resumed.zarr"
    synthetic = archive / "a_synthetic"
    with (
        dask.config.set(scheduler="synchronous"),
        _MoveAwayAfterAProblem(synthetic, tmp_path / "moved"),
    ):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            _ingest(archive, out, 7, monkeypatch, 512)
    (tmp_path / "moved").rename(synthetic)
    fingerprint = zarr.open_group(str(out), mode="r")["ingest_progress"].attrs[
        resumable.ATTR_FINGERPRINT
    ]
    listed = resumable.unfinished_progress(StoreLocation(out), fingerprint)
    counted = resumable.unfinished_progress(StoreLocation(out), fingerprint, counted=True)
    assert listed is not None and counted is not None and listed.done.keys() == counted.done.keys()
    found = sum(len(p) for record in listed.done.values() for p in record["problems"])
    assert found > 0  # some done run found an overlap: the records keep its lines
    assert sum(record["problem_count"] for record in counted.done.values()) == found
    for number, record in counted.done.items():  # no line, no coverage: the lost items alone
        lost = listed.done[number]["lost"]
        assert {k: v for k, v in record.items() if k != "problem_count"} == (
            {"lost": lost} if any(lost) else {}
        )
    assert any("lost" in record for record in counted.done.values())
    # Read by tasks of 2 records each (here, and on a cluster's workers): the same records.
    ranges: list[int] = []
    real_at = resumable._records_at
    monkeypatch.setattr(resumable, "RECORDS_PER_TASK", 2)
    monkeypatch.setattr(
        resumable, "_records_at", lambda *a: ranges.append(len(a[1])) or real_at(*a)
    )
    by_tasks = resumable.unfinished_progress(StoreLocation(out), fingerprint, counted=True)
    assert by_tasks is not None and by_tasks.done == counted.done
    assert len(ranges) == -(-len(counted.done) // 2) >= 2 and max(ranges) == 2
    monkeypatch.setattr(resumable, "_records_at", real_at)
    with dask_client(n_workers=2, memory_limit="2GiB", quiet=True):
        on_workers = resumable.unfinished_progress(StoreLocation(out), fingerprint, counted=True)
    assert on_workers is not None and on_workers.done == counted.done
    # The resumed store, its lines among them, is the one-shot ingest's; the ingest's own read
    # of the progress (its first: the client's, before any task) counted the lines.
    read: list = []
    real = resumable.unfinished_progress
    monkeypatch.setattr(
        resumable, "unfinished_progress", lambda *a, **k: read.append(real(*a, **k)) or read[-1]
    )
    assert _ingest(archive, out, 7, monkeypatch, 512)[:2] == (whole, lines)
    assert read[0].done.keys() == counted.done.keys() and read[0].done == counted.done


def test_the_finish_reads_the_records_of_the_runs_with_problems_alone(
    archive, tmp_path, monkeypatch
):
    """The decode problems are read from the records of the runs that found any, not from
    every run's record: those read are exactly the runs whose records, all of them read at that
    moment, list a line, and the store is the one-shot ingest's (small blocks: many runs)."""
    from seisctf.formats.shared import problem_lines

    whole, lines, _ = _ingest(archive, tmp_path / "whole.zarr", 7, monkeypatch, 512)
    seen: list[tuple[set, set, int]] = []
    real = problem_lines.unfinished_records

    def reading(store, fingerprint, numbers):
        every = resumable.unfinished_progress(store, fingerprint)  # all the records written
        assert every is not None
        with_lines = {n for n, record in every.done.items() if any(record["problems"])}
        found = real(store, fingerprint, numbers)
        assert found is not None
        seen.append((set(found[1]), with_lines, len(every.done)))
        return found

    monkeypatch.setattr(problem_lines, "unfinished_records", reading)
    assert _ingest(archive, tmp_path / "again.zarr", 7, monkeypatch, 512)[:2] == (whole, lines)
    ((read, with_lines, runs),) = seen
    assert read == with_lines and 0 < len(read) < runs, (len(read), runs)


def test_no_task_holds_every_line_and_the_group_is_one_writes(archive, tmp_path, monkeypatch):
    """Each partition's lines are cut into the group's chunks where they are: with chunks of 256
    lines and 7 partitions, no task is given more than a partition's lines or a chunk's (nor
    the root attrs' head), and the group's objects are those one write of every line makes."""
    from seisctf.formats.shared import problem_lines, table_pieces

    monkeypatch.setattr(table_pieces, "ROWS_PER_CHUNK", 256)
    given: dict[str, list[int]] = {}

    def counting(module, name, lines_of):
        """Record the lines each call of `module.name` (a task's function) is given."""
        function = getattr(module, name)

        def wrapped(*args):
            given.setdefault(name, []).append(lines_of(*args))
            return function(*args)

        monkeypatch.setattr(module, name, wrapped)

    counting(problem_lines, "_piece", len)
    counting(problem_lines, "_held", lambda lines, decoded: len(lines))
    counting(problem_lines, "_head", lambda limit, *parts: sum(map(len, parts)))
    counting(table_pieces, "_write_chunk", _problem_rows)  # (and the inputs table's: None)
    out = tmp_path / "pieces.zarr"
    _, lines, _ = _ingest(archive, out, 7, monkeypatch)
    assert len(lines) > cv.ATTR_PROBLEM_LINES + 40
    chunks = [rows for rows in given["_write_chunk"] if rows is not None]
    assert len(given["_piece"]) >= 7 and len(chunks) == -(-len(lines) // 256)
    assert max(given["_piece"]) < len(lines) / 2
    assert max(given["_held"]) < len(lines) / 2
    assert max(chunks) == 256
    (head,) = given["_head"]  # the parts that cover the root attrs' lines, each cut where it is
    assert cv.ATTR_PROBLEM_LINES <= head < cv.ATTR_PROBLEM_LINES + max(given["_piece"])
    # The same bytes as one write of every line (`write_problems`, as before).
    one = tmp_path / "one.zarr"
    zarr.open_group(str(one), mode="w", zarr_format=3)
    monkeypatch.setattr(problem_lines, "write_column", functools.partial(
        input_manifest.write_column, rows=256))  # fmt: skip
    problem_lines._write(StoreLocation(one), lines)
    group = cv.PROBLEMS_GROUP
    assert _objects(out / group) == _objects(one / group)
    assert read_problems(zarr.open_group(str(out), mode="r")) == lines


def _objects(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _problem_rows(store, name: str, first: int, *cuts: dict) -> int | None:
    """The lines a chunk task of the problems group is given (None: another table's)."""
    return (
        sum(map(len, (cut[cv.PROBLEM_LINES] for cut in cuts)))
        if name == cv.PROBLEMS_GROUP
        else None
    )


@pytest.mark.parametrize("where", ["here", "cluster"])
def test_sorted_lines_are_written_by_groups_as_one_sorted_set(tmp_path, monkeypatch,
                                                              dask_cluster, where):  # fmt: skip
    """`ingest das`'s order (`write_sorted_problems`): partitions' lines (unsorted, some
    interleaving, one repeated in two of them), the decode problems and, for an append, the
    store's own lines (read a chunk a task) are written once each, sorted, as one sorted set of
    them all would be, in this process and on a cluster."""
    monkeypatch.setattr(cv, "ATTR_PROBLEM_LINES", 3)
    monkeypatch.setattr(table_pieces, "ROWS_PER_CHUNK", 4)
    store = StoreLocation(tmp_path / "store.zarr")
    group = zarr.open_group(store.url, mode="w")
    old = [f"old{index:02d}: unreadable" for index in range(9)] + ["b07: unreadable"]
    group.attrs.update(write_sorted_problems(store, old[::-1], [], False, in_process))
    assert read_problems(group) == sorted(old) and group["problems"]["line"].chunks == (4,)
    parts = [("a03: gap", "a01: gap"), ("a02: overlap", "b07: unreadable", "a03: gap"),
             ("c01: overlap",), ()]  # fmt: skip
    # The decode problems repeat a partition's line; the first chunk of the store's own lines
    # starts with the line the second partition ends with (ranges that touch: one group).
    more = ["a02: overlap"]
    expected = sorted({*old, *(line for part in parts for line in part), *more})
    counts = [problem_parts.line_count(part) for part in parts]
    if where == "here":
        attrs = write_sorted_problems(store, ProblemLines.kept(parts, counts), more, True,
                                      in_process)  # fmt: skip
    else:
        with dask_client(dask_cluster.address, quiet=True):
            handles = kept([dask.delayed(tuple)(part) for part in parts], quiet=True)
            attrs = write_sorted_problems(store, ProblemLines.kept(handles, counts), more, True,
                                          partition_tasks.on_cluster(quiet=True))  # fmt: skip
    assert attrs == problem_attrs(expected, 3) | {cv.ATTR_PROBLEM_COUNT: len(expected)}
    group.attrs.update(attrs)
    assert read_problems(group) == expected
