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

import numpy as np
import pytest
import zarr
from test_waveforms import write_synthetic_archive

from seisctf import conventions as cv
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


def _ingest(archive: Path, out: Path, batches: int, monkeypatch) -> tuple:
    """The store's chunks (hashed), attrs, coverage and every problem line, and the report."""
    monkeypatch.setattr(resumable, "SCAN_TASKS", batches)
    monkeypatch.setattr(resumable, "SCAN_TASKS_PER_WORKER", 0)  # `batches` batches exactly
    report = ingest_waveforms([str(archive)], StoreLocation(out), block_samples=4096, quiet=True)
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
