"""benchmarks/scale_ingest.py --quick: the ingest cost curves' tables have a row for every size,
the counts in them are those of the archives, a sampled station-hour of the largest store equals
obspy's decode of its day file, and the task counts and times are consistent. (No timing goal:
the machines are shared.)"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import obspy
import pytest

import seisctf

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import scale_ingest  # noqa: E402
from scale_report import ScaleOptions  # noqa: E402

# Four ingests on one cluster: a minute on idle cores, far more on loaded ones.
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[ScaleOptions, dict]:
    workdir = tmp_path_factory.mktemp("scale-ingest")
    options = ScaleOptions(quick=True, data=workdir / "data", workdir=workdir)
    options.data.mkdir()
    # Without the per-core table: test_bench_ingest checks its rows, as this section makes them.
    found = scale_ingest.sections(options, per_core=False)
    return options, {section.title: section for section in found}


def table(sections: dict, start: str):
    (title,) = [title for title in sections if title.startswith(start)]
    section = sections[title]
    return section, [dict(zip(section.columns, row, strict=True)) for row in section.rows]


def test_every_size_has_a_row_with_the_archive_counts(quick):
    options, sections = quick
    _, byte_rows = table(sections, "Ingest cost curve: bytes")
    summary = json.loads((options.data / "sds_quick" / "summary.json").read_text())
    assert len(byte_rows) == len(scale_ingest.QUICK_FRACTIONS)
    assert byte_rows[-1]["files"] == summary["files"]
    assert (
        byte_rows[-1]["bytes"]
        == summary["bytes"]
        == sum(
            path.stat().st_size
            for path in (options.data / "sds_quick" / "sds").rglob("*")
            if path.is_file()
        )
    )
    assert [row["bytes"] for row in byte_rows] == sorted({row["bytes"] for row in byte_rows})
    assert byte_rows[-1]["bytes"] / byte_rows[0]["bytes"] >= 10
    _, file_rows = table(sections, "Ingest cost curve: files")
    counts = [row["files"] for row in file_rows]
    assert len(counts) == len(scale_ingest.QUICK_FILE_COUNTS)
    for count, wanted in zip(counts, scale_ingest.QUICK_FILE_COUNTS, strict=True):
        archive = options.data / f"sds_files_{wanted}"
        assert count == json.loads((archive / "summary.json").read_text())["files"]
        assert count == sum(1 for path in (archive / "sds").rglob("*") if path.is_file())
        assert wanted <= count < wanted + 3 * 10  # whole stations of 3 channels x 10 days
    for row in byte_rows + file_rows:
        assert row["samples/s"] == pytest.approx(row["samples"] / row["wall s"])
        for role in ("client", "scheduler", "worker 1", "worker 2"):
            assert 30 < row[f"{role} MiB"] < 4096  # a Python process, sampled
    for row in file_rows:
        assert row["client B/file"] == pytest.approx(row["client MiB"] * 2**20 / row["files"])


def test_task_counts_and_times_are_consistent(quick):
    _, sections = quick
    for start in ("Ingest cost curve: bytes", "Ingest cost curve: files"):
        _, rows = table(sections, start)
        tasks = [row["Dask tasks"] for row in rows]
        assert tasks == sorted(tasks) and tasks[0] >= 2  # scan and write tasks, more with size
        for row in rows:
            # at least one scan task and one write task; at most, per partition of the scan
            # (one a file at these sizes), its scan and the plan's and the run layout's rounds
            # on it (`partition_plan`, `waveform_runs`: a dozen) and the inputs table's, twice
            # (`waveform_table`: summary, piece, shape, a cut a dimension), and per run (about
            # 16 at these sizes) the task making it, one per partition holding its traces, its
            # write
            assert 2 <= row["Dask tasks"] <= 30 * row["files"] + 3 * 16 + 16
            assert 0 < row["first task s"] < row["planning s"] < row["wall s"]
            assert row["planning %"] == pytest.approx(100 * row["planning s"] / row["wall s"])
    for start in ("Ingest planning, where it goes: bytes", "Ingest planning, where it goes: files"):
        _, rows = table(sections, start)
        for row in rows:
            parts = row["first task s"] + row["scan s"] + row["plan + store s"]
            assert parts == pytest.approx(row["planning s"], abs=0.05)
            assert row["scan task ms/file"] > 0 and row["write task ms/file"] > 0


def test_largest_store_equals_obspy_on_a_station_hour(quick):
    options, sections = quick
    section, rows = table(sections, "Ingest acceptance")
    assert [row["read"] for row in rows][1:] == ["open_store"] + ["station-hour"] * 5
    assert len(section.goals) == 2
    summary = json.loads((options.data / "sds_quick" / "summary.json").read_text())
    (store,) = [
        path for path in options.workdir.glob("store_bytes_*.zarr")
        if path.name == f"store_bytes_{summary['files']}.zarr"
    ]  # fmt: skip
    plain = [
        entry
        for entry in summary["file_list"]
        if entry["traces"] == 1 and entry["samples"] == entry["samples_written"] == 20 * 86400
    ]
    entry = plain[len(plain) // 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (trace,) = obspy.read(str(options.data / "sds_quick" / entry["path"]))
    hour = 3600 * 20  # samples at 20 Hz
    expected = trace.data[5 * hour : 6 * hour]  # the sixth hour of the day
    start = trace.stats.starttime + 3600 * 5
    ds = seisctf.open_store(str(store))
    station = ".".join(entry["id"].split(".")[:3])
    first = np.datetime64(start.ns, "ns")
    found = ds["data"].sel(
        station=station,
        channel=trace.stats.channel,
        time=slice(first, first + np.timedelta64(3600, "s") - np.timedelta64(1, "ns")),
    )
    assert found.shape == expected.shape == (72000,)
    np.testing.assert_array_equal(found.values, expected.astype(np.float32))
