"""benchmarks/client_heap.py, run as a user runs it, on a small archive of `make_archive.py sds`
(as the warm-up and as the measured run): the measured run has its section, a traced peak above
its start, and the tracebacks of what the heap held then; both stores are written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import zarr

from seisctf import conventions as cv

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
FILES, DAYS = 12, 2  # two stations (3 channels x 2 days each)


def test_the_measured_run_gets_its_peak_and_its_tracebacks(tmp_path):
    archive = tmp_path / "sds"
    subprocess.run([sys.executable, str(BENCHMARKS / "make_archive.py"), "sds", str(archive),
                    "--files", str(FILES), "--days", str(DAYS), "--workers", "1"],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    work = tmp_path / "work"
    result = subprocess.run(
        [sys.executable, "client_heap.py", str(work), str(archive), str(archive)],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    peaks = re.findall(r"^## (\S+): [\d.]+ s, traced peak ([\d.]+) MiB above", result.stdout, re.M)
    assert [Path(path) for path, _ in peaks] == [archive]  # the warm-up is not measured
    assert all(0 < float(mib) < 64 for _, mib in peaks)
    sections = result.stdout.split("\n## ")[1:]
    for section in sections:
        sizes = re.findall(r"^ +([\d.]+) KiB in +[\d,]+ blocks$", section, re.M)
        assert sizes and float(sizes[0]) > 0
        assert 'File "' in section  # each with its traceback
    for number in (0, 1):
        store = zarr.open_group(str(work / f"store_{number}.zarr"), mode="r")
        assert store.attrs[cv.ATTR_COMPLETE]
        assert store["data"].shape[0] == -(-FILES // (3 * DAYS))  # stations: files / (3 x days)
