"""benchmarks/bench_ingest.py's `per_core_rows`, as the scale benchmark calls it (from the
benchmarks folder, in a process of its own), on a small archive: four rows (bare obspy, kernel
floor, ingest on 1 and on 2 workers) whose throughputs follow from the archive's sample count
(read back with obspy) and their seconds; nothing left in the working folder. No timing goal:
the machines are shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import obspy
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SCRIPT = """
import json, sys
from pathlib import Path
from bench_ingest import per_core_rows, write_archive

root, work = Path(sys.argv[1]), Path(sys.argv[2])
root.mkdir()
work.mkdir()
files, _ = write_archive(root, 2, 1, 2.0)
print(json.dumps(per_core_rows(files, 1, work)))
"""
LABELS = ("bare obspy.read", "kernel floor", "ingest, 1 worker", "ingest, 2 workers")


def test_per_core_rows_give_four_consistent_rows(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "archive"), str(tmp_path / "work")],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    files = sorted((tmp_path / "archive").iterdir())
    assert len(files) == 6  # 2 stations x 3 channels x 1 day
    samples = sum(tr.stats.npts for path in files for tr in obspy.read(str(path)))
    assert samples == 6 * 86400 * 2

    assert [row[0].split(":")[0].split(" (")[0] for row in rows] == list(LABELS)
    base = rows[0][2]
    for (label, seconds, per_core, ratio), cores in zip(rows, (1, 1, 1, 2), strict=True):
        assert seconds > 0, label
        assert per_core * seconds * cores == pytest.approx(samples, rel=1e-9), label
        assert ratio == pytest.approx(per_core / base, rel=1e-9), label
    assert rows[0][3] == 1.0
    assert list((tmp_path / "work").iterdir()) == []  # stores and floor chunks removed
