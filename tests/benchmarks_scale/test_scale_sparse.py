"""benchmarks/scale_sparse.py at its tiniest size (two gaps of 1 hour and 1 day, an append onto a
60-file store): every run has its row, the chunks counted on disk are the blocks the files' own
times fill, the stores are the same on 1 and 2 workers and the append equals a one-shot ingest.
The measuring pieces are checked against folders and stores changed on purpose: a progress
folder filled while the poller runs, a store with one sample changed. (No timing goal: the
machines are shared.)"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import scale_sparse  # noqa: E402
from scale_report import ScaleOptions  # noqa: E402

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[ScaleOptions, dict]:
    workdir = tmp_path_factory.mktemp("scale-sparse")
    options = ScaleOptions(quick=True, data=workdir / "data", workdir=workdir)
    options.data.mkdir()
    found = scale_sparse.sparse_sections(options, scale_sparse.TINY)
    return options, {section.title.split(":")[0]: section for section in found}


def rows(section) -> list[dict]:
    return [dict(zip(section.columns, row, strict=True)) for row in section.rows]


def test_every_gap_has_two_runs_and_its_chunks_are_its_data_blocks(tiny):
    _, sections = tiny
    gap_rows = rows(sections["Sparse time"])
    labels = [label for label, _ in scale_sparse.TINY.gaps]
    assert [(row["run"], row["workers"]) for row in gap_rows] == [
        (label, workers) for label in labels for workers in (2, 1)
    ]
    # 1 hour: both files in consecutive blocks; 1 day: the second file straddles two blocks.
    blocks = [int(row["blocks with data"].split()[0]) for row in gap_rows]
    assert blocks == [2, 2, 3, 3]
    assert [row["data chunks written"] for row in gap_rows] == blocks
    for row in gap_rows:
        assert row["Dask tasks"] >= 1
        assert 30 < row["client MiB"] < 4096
        assert row["progress records (peak)"] <= row["progress objects (peak)"]
    assert len(sections["Sparse time"].goals) == 3


def test_append_rows_and_the_same_stores(tiny):
    _, sections = tiny
    append_rows = rows(sections["Append"])
    assert [row["run"] for row in append_rows] == [
        "base: 60 files", "--append 1 file", "--append 1 file", "1 file alone, new store",
        "one shot: 61 files", "base: 600 files", "--append 1 file onto 600",
    ]  # fmt: skip
    assert append_rows[6]["data chunks written"] >= 1
    assert any("client above imports, onto 600 / 60 files" in g for g in sections["Append"].goals)
    assert append_rows[3]["data chunks written"] == 1  # one day in one block
    assert append_rows[1]["data chunks written"] >= 1
    same = sections["Same stores as today's ingest semantics"]
    assert len(same.rows) == 2 * len(scale_sparse.TINY.gaps) + 3
    assert all(result in ("identical", "yes") for _, result in same.rows), same.rows
    assert same.goals == ["every check holds: 0 failed, **met**"]


def test_the_appended_day_reads_back_as_obspy_decodes_it(tiny):
    import obspy

    options, _ = tiny
    (new_file,) = (options.workdir / "append_new").iterdir()
    (trace,) = obspy.read(str(new_file))
    group = zarr.open_group(str(options.workdir / "append_2w.zarr"), mode="r")
    start_ns, rate = group.attrs["start_time_ns"], group.attrs["sampling_rate"]
    first = round((trace.stats.starttime.ns - start_ns) * rate / 1e9)
    station = list(group["station"][:]).index("XA.S0000.00")
    channel = list(group["channel"][:]).index(trace.stats.channel)
    stored = group["data"][station, channel, first : first + trace.stats.npts]
    np.testing.assert_array_equal(stored, trace.data.astype(np.float32))


def test_comparisons_find_one_changed_sample(tiny, tmp_path):
    options, _ = tiny
    store = options.workdir / "gap_1day_2w.zarr"
    changed = shutil.copytree(store, tmp_path / "changed.zarr")
    assert scale_sparse.differing_objects(store, changed) == []
    assert scale_sparse.differing_arrays(store, changed) == []
    data = zarr.open_group(str(changed), mode="r+")["data"]
    grid_ns, rate, _ = scale_sparse.store_grid(store)
    # the first sample of the second file (1 day after the first), channel 0
    index = scale_sparse.sample_index(grid_ns + scale_sparse.DAY_S * 10**9, grid_ns, rate)
    data[0, 0, index] = data[0, 0, index] + 1
    differ = scale_sparse.differing_objects(store, changed)
    assert len(differ) == 1 and differ[0].startswith("data/")
    assert scale_sparse.differing_arrays(store, changed) == ["data"]


def test_the_poller_sees_progress_objects_come_and_go(tmp_path):
    store = tmp_path / "store.zarr"
    with scale_sparse.ProgressPoller(store) as poller:
        folder = store / "ingest_progress" / "c"
        folder.mkdir(parents=True)
        (store / "ingest_progress" / "zarr.json").write_text("{}")
        for index in range(7):
            (folder / str(index)).write_text("")
        (store / "ingest_progress_manifest.parquet").write_bytes(b"x")
        (store / "data").mkdir()
        (store / "data" / "0").write_bytes(b"x")  # not progress
        time.sleep(0.5)
        shutil.rmtree(store / "ingest_progress")
        time.sleep(0.3)
    assert poller.peak == (9, 8)
    assert scale_sparse.progress_objects(store) == (1, 0)  # the manifest file is left


def test_the_import_baseline_does_not_grow_with_the_benchmark_process():
    import scale_ingest

    alone = scale_ingest.import_rss()
    held = np.ones(2**26)  # 512 MiB in this process (ru_maxrss of a child would inherit it)
    assert abs(scale_ingest.import_rss() - alone) < 32 * 2**20
    assert 50 * 2**20 < alone < held.nbytes
