"""benchmarks/scale_das_runs.py at its quick size (4 files of 16 channels: 1, 125 and 250
blocks): every run has its row, the run tasks and progress records are the
runs `das_runs` makes (not a task a block), and the stores hold DASCore's samples; its files
axis (10 and 40 files) has a row a file count and one for an append of a file onto it, each
store holding every file's samples. (No
timing or memory goal here: the machines are shared.)"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import scale_das_runs  # noqa: E402
from scale_report import ScaleOptions  # noqa: E402

from seisctf.formats.das.das_runs import run_length  # noqa: E402

pytestmark = pytest.mark.timeout(900)


def test_quick_section_counts_runs_not_blocks(tmp_path):
    options = ScaleOptions(quick=True, data=tmp_path / "data", workdir=tmp_path)
    options.data.mkdir()
    section, files_section = scale_das_runs.sections(options)
    rows = [dict(zip(section.columns, row, strict=True)) for row in section.rows]
    _, channels, samples = scale_das_runs.QUICK
    files = scale_das_runs.QUICK[0]
    native = scale_das_runs.chunk_rows(channels)
    assert [row["block samples"] for row in rows] == [native, native // 512, native // 1024]
    for row in rows:
        blocks = math.ceil(files * samples / row["block samples"])
        assert row["blocks written"] == blocks
        runs = math.ceil(blocks / run_length(blocks))
        assert row["run tasks"] == runs and row["progress objects (peak)"] <= runs
        assert row["Dask tasks"] > runs and row["client above imports MiB"] > 0
    assert [row["run tasks"] for row in rows] == [1, 18, 17]  # runs of 1, 7 and 15 blocks
    assert section.goals[-1].startswith("same data, and DASCore's: equal")
    # The files axis: a row a file count, each store of all its files' samples.
    channels, samples = scale_das_runs.FILE_SHAPE
    native = scale_das_runs.chunk_rows(channels)
    file_rows = [dict(zip(files_section.columns, row, strict=True)) for row in files_section.rows]
    counts = scale_das_runs.QUICK_FILE_COUNTS
    assert [(row["files"], row["run"]) for row in file_rows] == [
        (count, run) for count in counts for run in ("ingest", "append 1 file")
    ]
    for row in file_rows:
        files = row["files"] + (row["run"] != "ingest")
        assert row["blocks written"] == math.ceil(files * samples / native)
        assert row["client above imports MiB"] > 0
    assert files_section.goals[0].startswith("client above imports: ")
    assert "an append onto" in files_section.goals[2]
    assert files_section.goals[3].startswith(
        "the appended file's samples after the others': 2 of 2"
    )
