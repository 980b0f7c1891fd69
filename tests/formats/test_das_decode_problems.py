"""`ingest das`'s decode problems (a damaged chunk shows only when read) stay in the runs'
records: a run returns its record with the problems counted (`resumable.counted_record`), the
finish reads the lines from the records of the runs that found any, and no other record
(`problem_lines.decode_problems`), and the store's lines are those the records hold with the
plan's, sorted, whether written in one go, resumed after an interruption or on two workers."""

from __future__ import annotations

from pathlib import Path

import dask
import pytest
import zarr
from test_das_ingest import _bad_folder, _digest, _MoveAwayAfter

from seisctf.cluster import dask_client
from seisctf.errors import InvalidInput
from seisctf.formats.das import das_runs
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.shared import problem_lines, resumable
from seisctf.formats.shared.problem_lines import read_problems
from seisctf.location import StoreLocation

BLOCK = 8  # 25 blocks of 8 samples, one a run: the damaged file's lines fall in a few runs


def _ingest(folder: Path, out: Path) -> None:
    ingest_das([str(folder)], StoreLocation(out), block_samples=BLOCK, quiet=True)


@pytest.fixture
def one_block_runs(monkeypatch):
    monkeypatch.setattr(das_runs, "MIN_RUNS", 1_000)


def test_runs_count_their_lines_and_the_finish_reads_the_runs_with_lines_alone(
    tmp_path, monkeypatch, one_block_runs
):
    files = _bad_folder(tmp_path / "bad")
    returned: list[dict] = []
    real_run = das_runs.ingest_run
    monkeypatch.setattr(
        das_runs, "ingest_run", lambda *a: returned.append(real_run(*a)) or returned[-1]
    )
    seen: list[tuple[set, dict]] = []
    real_read = problem_lines.unfinished_records

    def reading(store, fingerprint, numbers):
        every = resumable.unfinished_progress(store, fingerprint)  # every record, as written
        assert every is not None
        found = real_read(store, fingerprint, numbers)
        assert found is not None
        seen.append((set(found[1]), every.done))
        return found

    monkeypatch.setattr(problem_lines, "unfinished_records", reading)
    out = tmp_path / "store.zarr"
    _ingest(tmp_path / "bad", out)
    ((read, records),) = seen
    with_lines = {number for number, record in records.items() if any(record["problems"])}
    assert read == with_lines and 0 < len(read) < len(records) == len(returned) == 25
    # What the client was given: counts, no line; the store's records list them.
    assert all(set(record) == {"problem_count"} for record in returned)
    listed = {line for record in records.values() for lines in record["problems"] for line in lines}
    assert sum(record["problem_count"] for record in returned) == sum(
        len(lines) for record in records.values() for lines in record["problems"]
    )
    assert listed and all(str(files["damaged"]) in line for line in listed)
    # The store's lines: the records' and the plan's (the files DASCore cannot identify), sorted.
    lines = read_problems(zarr.open_group(str(out), mode="r"))
    assert lines == sorted(set(lines))
    assert {line for line in lines if str(files["damaged"]) in line} == listed
    unidentified = {files[name] for name in ("junk", "truncated", "other")}
    assert all(str(files["damaged"]) in line or line.split(":")[0] in map(str, unidentified)
               for line in lines)  # fmt: skip
    # Strict: the error names the decode problems, read from the same records.
    with pytest.raises(InvalidInput, match="input problem") as error:
        ingest_das([str(files["good"]), str(files["damaged"])],
                   StoreLocation(tmp_path / "strict.zarr"), strict=True, block_samples=BLOCK,
                   quiet=True)  # fmt: skip
    assert all(line in error.value.problem for line in listed)


def test_a_resume_and_two_workers_write_the_lines_of_one_go(tmp_path, one_block_runs):
    """Interrupted after 16 runs (the damaged file's first blocks among them), the resumed
    store holds every line, as the one-shot ingest's and a 2-worker one's, byte for byte."""
    _bad_folder(tmp_path / "bad")
    whole, out = tmp_path / "whole.zarr", tmp_path / "resumed.zarr"
    _ingest(tmp_path / "bad", whole)
    skip = (whole / "zarr.json",)  # its attrs name this run's paths alike; compared below
    with (
        dask.config.set(scheduler="synchronous"),
        _MoveAwayAfter(16, tmp_path / "bad", tmp_path / "moved"),
    ):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            _ingest(tmp_path / "bad", out)
    fingerprint = zarr.open_group(str(out))["ingest_progress"].attrs[resumable.ATTR_FINGERPRINT]
    done = resumable.unfinished_progress(StoreLocation(out), fingerprint)
    assert done is not None and any(any(r["problems"]) for r in done.done.values())
    (tmp_path / "moved").rename(tmp_path / "bad")
    _ingest(tmp_path / "bad", out)
    assert _digest(out, skip=(out / "zarr.json",)) == _digest(whole, skip=skip)
    assert read_problems(zarr.open_group(str(out))) == read_problems(zarr.open_group(str(whole)))
    assert _attrs(out) == _attrs(whole)
    with dask_client(n_workers=2, memory_limit="2GiB", quiet=True):
        _ingest(tmp_path / "bad", tmp_path / "workers.zarr")
    workers = tmp_path / "workers.zarr"
    assert _digest(workers, skip=(workers / "zarr.json",)) == _digest(whole, skip=skip)
    assert _attrs(workers) == _attrs(whole)


def _attrs(store: Path) -> dict:
    return zarr.open_group(str(store), mode="r").attrs.asdict()
