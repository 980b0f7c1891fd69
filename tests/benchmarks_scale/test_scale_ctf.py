"""benchmarks/scale_ctf.py's section as `bench_scale.py --quick` runs it, on one bundle
(TINY_SIZES_GB: every size runs the same commands): a row per size and convention, the
command's scores equal to the eager numpy scorer's (the table's difference column, and the files
both wrote, compared here independently), both conventions judged."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import zarr

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import scale_ctf  # noqa: E402
from scale_report import ScaleOptions  # noqa: E402


def test_tiny_section_rows_and_scores(tmp_path):
    options = ScaleOptions(quick=True, data=tmp_path / "data", workdir=tmp_path / "work")
    options.workdir.mkdir()
    (section,) = scale_ctf.sections(options, scale_ctf.TINY_SIZES_GB)

    assert section.columns == scale_ctf.COLUMNS
    sizes = [f"{size:g}" for size in scale_ctf.TINY_SIZES_GB]
    expected = [(size, convention) for size in sizes for convention in scale_ctf.CONVENTIONS]
    assert [(row[0].split()[0], row[2]) for row in section.rows] == expected
    column = {name: index for index, name in enumerate(section.columns)}
    for row in section.rows:
        command_s = row[column["command s (median)"]]
        ratio = row[column["eager ÷ command"]]
        eager_s = float(row[column["eager s (median; its load s)"]].split()[0])
        assert command_s > 0 and eager_s > 0
        assert math.isclose(ratio, eager_s / command_s, rel_tol=0.02)
        # The command's scores equal the eager numpy scorer's (float64 rounding only).
        assert float(row[column["max abs raw score diff"]]) < 1e-8
        # The in-process worker's memory is the client's: a real process was sampled.
        peaks = row[column["command peak RSS MiB (client; workers)"]]
        assert float(peaks.split()[0]) > 50 and "in-process" in peaks
        # The bundle really holds the size the row names (truth + submission on disk).
        nominal, disk = row[0].replace("(", "").replace(")", "").split()
        assert 0.5 < float(disk) / float(nominal) <= 1.05
    # No goal judged below 0.5 GB: the tests' size is smaller.
    assert section.goals == []
    assert "--cluster" in section.notes[0] and "memory_limit" in section.notes[0]

    # Independently: the last command's JSON against numpy Frobenius norms of the bundle.
    rows = scale_ctf.rows_for(scale_ctf.TINY_SIZES_GB[-1])
    folder = options.data / "ctf" / f"random-{rows}x2048-float32"
    truth = zarr.open_group(str(folder / "truth.zarr"), mode="r")
    submission = zarr.open_group(str(folder / "random.zarr"), mode="r")
    manifest = dict(truth.attrs)["ctf"]
    result = json.loads((options.workdir / f"ctf-{rows}-paper.json").read_text())
    assert result["truth_sha256_verified"] is True and result["convention"] == "paper"
    index = 1
    for pair in manifest["pairs"]:
        t = truth[pair["test"]][...].astype(np.float64)
        s = submission[pair["test"]][...].astype(np.float64)
        for metric in pair["metrics"]:
            if metric != "long_time":
                rows = slice(0, manifest["k_short"]) if metric == "short_time" else slice(None)
                error = np.linalg.norm(t[rows] - s[rows]) / np.linalg.norm(t[rows])
                assert math.isclose(
                    result["raw_scores"][f"E{index}"], 100 * (1 - error), abs_tol=1e-9
                )
            index += 1
