"""benchmarks/scale_network_gap.py at its tiniest size (6 stations, 1 hour, 1 day, 1 year apart):
both runs have their rows, the year's coverage is the large one, and the coverage check holds on
the stores and fails on one changed on purpose. (No memory goal asserted: the machines are
shared.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import scale_network_gap  # noqa: E402
from scale_report import ScaleOptions  # noqa: E402

pytestmark = pytest.mark.timeout(900)


def test_tiny_network_gap_rows_goals_and_the_coverage_check(tmp_path):
    options = ScaleOptions(quick=True, data=tmp_path / "data", workdir=tmp_path)
    options.data.mkdir()
    (section,) = scale_network_gap.gap_rows(options, scale_network_gap.TINY)
    assert [row[0] for row in section.rows] == ["1 hour", "1 day", "1 year"]
    cells = [int(row[8].split()[0].replace(",", "")) for row in section.rows]
    assert cells[0] < 60 < 6 * 12_000 < cells[2]  # 6 stations x 12,031 blocks of a year
    assert len(section.goals) == 2 and "check holds" not in section.goals[1]
    assert "**met**" in section.goals[1]

    # The check fails on a store whose coverage lost a block with data.
    store = tmp_path / "network_1year.zarr"
    _, traces = scale_network_gap.network_files(tmp_path / "again", 6, scale_network_gap.TINY
                                                .gaps[2][1])  # fmt: skip
    assert scale_network_gap.coverage_is_the_files(store, traces)
    coverage = zarr.open_array(str(store / "coverage"), mode="r+")
    row = np.asarray(coverage[2])
    row[np.flatnonzero(row > 0)[0]] = 0
    coverage[2] = row
    assert not scale_network_gap.coverage_is_the_files(store, traces)
