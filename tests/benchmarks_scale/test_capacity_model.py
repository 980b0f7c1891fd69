"""benchmarks/capacity_model.py: the projections follow from the unit costs and the code's own
settings (counts recomputed here by hand), and docs/scaling.md shows the tables it prints."""

from __future__ import annotations

import dataclasses
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
from seisctf.formats.obspy_archive.waveform_plan import DEFAULT_BLOCK_SAMPLES  # noqa: E402

# 2 TB at 2 bytes a sample: 1e12 samples, 100 Hz day files -> ceil(1e12 / 8.64e6) files
ARCHIVE = cm.Archive("test", bytes=2e12, mseed_bytes_per_sample=2.0)
FILES = math.ceil(1e12 / (100 * 86_400))


def test_settings_are_the_codes_defaults():
    settings = cm.defaults()
    assert settings.block_samples == DEFAULT_BLOCK_SAMPLES
    assert settings.wave_tasks == MAX_TASKS_PER_WAVE
    assert settings.scan_tasks_min == 16 and settings.scan_tasks_per_worker == 8
    assert settings.run_max_blocks == 128


def test_counts_follow_the_archive_and_the_settings():
    settings, limits = cm.defaults(), cm.Limits()
    projection = cm.project_ingest(ARCHIVE, cm.MEASURED, settings, limits, workers=10)
    samples = 2e12 / 2.0
    assert ARCHIVE.files == FILES == 115_741
    chunks = math.ceil(samples / (DEFAULT_BLOCK_SAMPLES * 3))
    coverage_chunks = math.ceil(chunks * 4 / (18 * 20_875 * 4))  # zarr's, written by tasks
    runs = projection.ingest_tasks
    assert projection.puts == chunks + runs + coverage_chunks  # chunks, a record a run
    assert projection.ingest_tasks == math.ceil(chunks / 128)
    assert projection.scan_tasks == 8 * 10  # 8 a worker: the cluster decides, not the archive
    assert projection.waves == math.ceil(projection.ingest_tasks / MAX_TASKS_PER_WAVE)
    # A worker's share, 200 GB, against a 50 GB input cache: 3/4 of the bytes are read twice.
    passes = 1 + (200e9 - 50e9) / 200e9
    assert projection.gets == math.ceil(FILES * passes) * 2 + runs  # a HEAD and a GET a read
    assert projection.read_bytes == pytest.approx(passes * 2e12)
    cpu_s = samples * cm.MEASURED.ingest_cpu_s_per_sample + FILES * cm.MEASURED.ingest_s_per_file
    written = samples * cm.STORE_BYTES_PER_SAMPLE
    transfer_s = (passes * 2e12 + written) / (10 * 1e9 / 8)  # 1 Gbit/s a worker
    assert projection.compute_s == pytest.approx(max(cpu_s / (10 * 0.9), transfer_s))
    assert projection.client_bytes == pytest.approx(FILES * cm.MEASURED.client_bytes_per_file)
    serial_s = FILES * (3.64 + 1.13) / 100_080  # the measured plan and finish at 100,080 files
    assert projection.client_serial_s == pytest.approx(serial_s)
    assert projection.wall_s == pytest.approx(
        projection.list_s + serial_s + max(projection.compute_s, projection.scheduler_s)
    )
    assert projection.get_per_s == pytest.approx(projection.gets / projection.compute_s)
    assert projection.pressures["S3 GET rate (one prefix)"] == pytest.approx(
        projection.get_per_s / 5_500
    )


def test_a_cache_holding_a_workers_share_halves_the_bytes_read_and_the_gets():
    settings = cm.defaults()
    twice = cm.project_ingest(ARCHIVE, cm.MEASURED, settings, cm.Limits(worker_cache_bytes=0), 1000)
    once = cm.project_ingest(ARCHIVE, cm.MEASURED, settings, cm.Limits(), 1000)  # 2 GB a worker
    runs = once.ingest_tasks  # each run's record is read once more, for the coverage
    assert once.read_bytes == twice.read_bytes / 2 and once.gets - runs == (twice.gets - runs) / 2
    assert once.compute_s < twice.compute_s
    assert once.pressures["input cache (a worker's share of the archive)"] == 2e9 / 50e9


def test_the_50_tb_archive_moves_97_tb_on_1000_workers_and_exceeds_one_prefix():
    settings, limits = cm.defaults(), cm.Limits()
    assert cm.SCEDC.files == math.ceil(50e12 / cm.BYTES_PER_SAMPLE_100HZ / 8.64e6)
    assert 3.2e6 < cm.SCEDC.files < 3.3e6
    p = cm.project_ingest(cm.SCEDC, cm.MEASURED, settings, limits, 1000)  # 50 GB a worker
    assert (p.read_bytes + p.written_bytes) / 1e12 == pytest.approx(97, abs=0.5)
    uncached = cm.project_ingest(
        cm.SCEDC, cm.MEASURED, settings, cm.Limits(worker_cache_bytes=0), 1000
    )
    assert (uncached.read_bytes + uncached.written_bytes) / 1e12 == pytest.approx(147, abs=0.5)
    assert p.get_per_s > limits.s3_get_per_s_per_prefix
    assert p.put_per_s > limits.s3_put_per_s_per_prefix


def test_every_input_has_a_basis():
    fields = {
        f.name
        for holder in (cm.UnitCosts, cm.Limits, cm.Settings, cm.Archive)
        for f in dataclasses.fields(holder)
        if f.name != "name" and f.name != "bytes"
    } | {"store_bytes_per_sample"}
    assert set(cm.BASIS) == fields
    assert {basis for basis, _ in cm.BASIS.values()} <= {"measured", "assumed", "code"}
    assert all(source for _, source in cm.BASIS.values())


def test_more_workers_divide_compute_until_storage_or_the_scheduler_binds():
    settings, limits = cm.defaults(), cm.Limits(worker_cache_bytes=0)  # the same passes
    ten, hundred = (cm.project_ingest(ARCHIVE, cm.MEASURED, settings, limits, n) for n in (10, 100))
    assert hundred.compute_s == pytest.approx(ten.compute_s / 10)  # storage-bound, both
    # One scheduler, whatever the workers: only the scan's tasks (8 a worker) grow with them.
    per_task = cm.MEASURED.scheduler_s_per_task
    assert hundred.scheduler_s - ten.scheduler_s == pytest.approx((800 - 80) * per_task)
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
    # four headers, the inputs, 3 worker counts, 3 archives, 3 picking sets
    assert len(table_rows) == 4 + len(cm.BASIS) + 3 + 3 + 3
    doc = (ROOT / "docs" / "scaling.md").read_text()
    missing = [row for row in table_rows if row not in doc]
    assert not missing, f"docs/scaling.md lacks these rows of capacity_model.py: {missing}"
