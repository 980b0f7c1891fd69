"""benchmarks/run_records.py: the table's rows, and the counted record far smaller than the one
it replaced (no timing: sizes only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "run_records.py"


def test_counted_records_are_a_few_bytes_a_run():
    printed = subprocess.run(
        [sys.executable, str(SCRIPT), "--runs", "500", "--blocks", "64"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    rows = [line.split(" | ") for line in printed.splitlines() if line.startswith("| ")]
    before, now, ratio = rows[-3:]
    assert before[0] == "| less its lines (before)" and now[0] == "| counted (now)"
    assert int(now[1].replace(",", "")) < 64 < 8 * 64 < int(before[1].replace(",", ""))
    assert float(ratio[1].rstrip("x")) < 0.05 and float(ratio[2].rstrip("x |")) < 0.05
