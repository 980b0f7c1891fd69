"""benchmarks/inventory_parts.py, run as a user runs it, at a small size (280 stations, a worker
checking 1 partition of 70, one round): both ways have their row, every station id of the
checked partitions is known to each way's index (the script asserts it), and the whole parse
takes more memory than the cut one, whose peak is its partitions' stations."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def test_both_ways_have_their_row_and_the_cut_holds_less(tmp_path):
    result = subprocess.run(
        [sys.executable, "inventory_parts.py", "--stations", "280", "--per-worker", "1",
         "--rounds", "1", "--workdir", str(tmp_path)],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "280 stations" in result.stdout and "checks 1 partitions of 70" in result.stdout
    found = re.findall(r"^\| (whole|cut) \| ([\d.]+) \| (\d+) \|$", result.stdout, re.M)
    peaks = {way: int(peak) for way, _, peak in found}
    assert peaks.keys() == {"whole", "cut"} and len(found) == 2, result.stdout
    assert peaks["cut"] < peaks["whole"], result.stdout
    assert re.search(r"cut / whole, best of 1: time [\d.]+x, peak [\d.]+x", result.stdout)
