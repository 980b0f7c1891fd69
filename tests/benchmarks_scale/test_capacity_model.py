"""benchmarks/capacity_model.py: the projections follow from the unit costs and the code's own
settings (counts recomputed here by hand), and docs/scaling.md shows the tables it prints."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import capacity_model as cm  # noqa: E402

from seisctf.cluster import MAX_TASKS_PER_WAVE  # noqa: E402
from seisctf.recipes.ingest.waveform_plan import DEFAULT_BLOCK_SAMPLES  # noqa: E402

ARCHIVE = cm.Archive("test", bytes=2e12, files=400_000, mseed_bytes_per_sample=2.0)


def test_settings_are_the_codes_defaults():
    settings = cm.defaults()
    assert settings.block_samples == DEFAULT_BLOCK_SAMPLES
    assert settings.wave_tasks == MAX_TASKS_PER_WAVE
    assert settings.scan_batch_files == 1000 and settings.run_max_blocks == 128


def test_counts_follow_the_archive_and_the_settings():
    settings, limits = cm.defaults(), cm.Limits()
    projection = cm.project_ingest(ARCHIVE, cm.MEASURED, settings, limits, workers=10)
    samples = 2e12 / 2.0
    chunks = math.ceil(samples / (DEFAULT_BLOCK_SAMPLES * 3))
    assert projection.puts == 2 * chunks
    assert projection.ingest_tasks == math.ceil(chunks / 128)
    assert projection.scan_tasks == 400
    assert projection.waves == math.ceil(projection.ingest_tasks / MAX_TASKS_PER_WAVE)
    assert projection.gets == 800_000
    cpu_s = samples * cm.MEASURED.ingest_cpu_s_per_sample + 400_000 * cm.MEASURED.ingest_s_per_file
    written = samples * cm.STORE_BYTES_PER_SAMPLE
    transfer_s = (2e12 + written) / (10 * 1e9 / 8)  # 1 Gbit/s a worker, read and write
    assert projection.compute_s == pytest.approx(max(cpu_s / (10 * 0.9), transfer_s))
    assert projection.client_bytes == pytest.approx(400_000 * 2529)


def test_more_workers_divide_compute_until_storage_or_the_scheduler_binds():
    settings, limits = cm.defaults(), cm.Limits()
    ten, hundred = (cm.project_ingest(ARCHIVE, cm.MEASURED, settings, limits, n) for n in (10, 100))
    assert hundred.compute_s == pytest.approx(ten.compute_s / 10)  # storage-bound, both
    assert hundred.scheduler_s == ten.scheduler_s  # one scheduler, whatever the workers
    slow_scheduler = replace(cm.MEASURED, scheduler_s_per_task=1.0)
    bound = cm.project_ingest(ARCHIVE, slow_scheduler, settings, limits, 1000)
    assert bound.first_limit.startswith("scheduler task rate")
    assert bound.wall_s >= bound.scheduler_s


def test_docs_show_the_printed_tables():
    printed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "capacity_model.py")],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    table_rows = [
        line for line in printed.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert len(table_rows) == 2 + 3 + 3  # two headers, 3 worker counts, 3 picking sets
    doc = (ROOT / "docs" / "scaling.md").read_text()
    missing = [row for row in table_rows if row not in doc]
    assert not missing, f"docs/scaling.md lacks these rows of capacity_model.py: {missing}"
