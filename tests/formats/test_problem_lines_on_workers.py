"""An ingest's problem lines stay where they were found (`problem_parts`, `problem_lines`): the
partitions' summaries the client gathers count their lines and keep the first few
(`problem_parts.HEAD_LINES`), the decode problems stay in the runs' records, and a task writes
every line into the store's `problems` group, in the same order whatever the partitions and
wherever the tasks run. More bad files than the root attrs hold (`ATTR_PROBLEM_LINES`, as in
use), beside the synthetic archive (overlaps: decode problems)."""

from __future__ import annotations

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
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared import partition_tasks, resumable
from seisctf.formats.shared.problem_lines import read_problems
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
    assert all(p == [] for record in counted.done.values() for p in record["problems"])
    assert sum(record["problem_count"] for record in counted.done.values()) == found
    for number, record in counted.done.items():  # all else as recorded
        assert {k: v for k, v in record.items() if k not in ("problems", "problem_count")} == {
            k: v for k, v in listed.done[number].items() if k != "problems"
        }
    # The resumed store, its lines among them, is the one-shot ingest's; the ingest's own read
    # of the progress (its first: the client's, before any task) counted the lines.
    read: list = []
    real = resumable.unfinished_progress
    monkeypatch.setattr(
        resumable, "unfinished_progress", lambda *a, **k: read.append(real(*a, **k)) or read[-1]
    )
    assert _ingest(archive, out, 7, monkeypatch, 512)[:2] == (whole, lines)
    assert read[0].done.keys() == counted.done.keys() and read[0].done == counted.done
