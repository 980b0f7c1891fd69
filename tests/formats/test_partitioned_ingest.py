"""A waveform ingest keeps its scan in partitions where it was made (`waveform_parts`,
`partition_plan`, `waveform_runs`): the store is the same whatever the partitions (scan batches
of one file, of four, or all files in one) and wherever the tasks run (the threaded scheduler,
one or two worker processes), and on a cluster the client lists no file, makes no scan table
and places no trace. Real files: the synthetic archive, obspy's SAC and miniSEED with a
StationXML, a file that is not seismic data; resampled to 1 Hz, so every round has work."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_waveform_positions import BALST, LMOW, PIN1
from test_waveforms import I59_DATA, I59_XML, write_synthetic_archive

from seisctf.formats.obspy_archive.placed_traces import PlacedTraces
from seisctf.formats.obspy_archive.scan_table import ScanTable
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared import input_manifest, resumable
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("partitioned")
    write_synthetic_archive(root / "a_synthetic")
    for source, name in ((PIN1, "b/pin1.sac"), (LMOW, "b/lmow.sac"), (BALST, "c/balst.mseed"),
                         (I59_DATA, "c/i59.mseed")):  # fmt: skip
        (root / name).parent.mkdir(exist_ok=True)
        shutil.copy(source, root / name)
    (root / "d").mkdir()
    (root / "d" / "not_data.mseed").write_bytes(b"not seismic data" * 40)
    return root  # folders alone at the top: listed in four parts (`listing_parts`)


def _ingest(archive: Path, out: Path, batches: int, monkeypatch) -> Path:
    monkeypatch.setattr(resumable, "SCAN_TASKS", batches)
    monkeypatch.setattr(resumable, "SCAN_TASKS_PER_WORKER", 0)  # `batches` batches exactly
    report = ingest_waveforms(
        [str(archive)],
        StoreLocation(out),
        inventories=[str(I59_XML)],
        rate=1.0,
        block_samples=4096,
        quiet=True,
    )
    assert report.problems and len(report.plan.stations) >= 4  # not a trivial store
    return out


def _store(url: Path) -> tuple:
    """Every chunk's bytes (by name, hashed), the attrs, coverage and inputs table."""
    chunks = {str(p.relative_to(url)): hashlib.sha256(p.read_bytes()).hexdigest()
              for p in sorted((url / "data" / "c").rglob("*")) if p.is_file()}  # fmt: skip
    group = zarr.open_group(str(url), mode="r")
    return chunks, dict(group.attrs), np.asarray(group["coverage"][:]).tobytes(), (
        recorded_inputs(StoreLocation(url)))  # fmt: skip


class _Made:
    """Counts the `ScanTable`s and `PlacedTraces` made and the files listed with their stats
    (`input_manifest.file_stats`) in this process."""

    def __init__(self, monkeypatch):
        self.count = 0
        for kind in (ScanTable, PlacedTraces):
            original = kind.__init__

            def counted(obj, *args, _original=original, **kwargs):
                self.count += 1
                _original(obj, *args, **kwargs)

            monkeypatch.setattr(kind, "__init__", counted)
        listing = input_manifest.file_stats

        def listed(*args, **kwargs):
            self.count += 1
            return listing(*args, **kwargs)

        monkeypatch.setattr(input_manifest, "file_stats", listed)


def test_any_partitions_and_workers_make_the_same_store(archive, tmp_path, monkeypatch):
    from seisctf.cluster import dask_client

    whole = _store(_ingest(archive, tmp_path / "whole.zarr", 1, monkeypatch))
    assert whole[0]  # chunks were written
    made = _Made(monkeypatch)
    for batches in (4, 100):  # a few files a partition; one file a partition
        assert _store(_ingest(archive, tmp_path / f"threads{batches}.zarr", batches,
                              monkeypatch)) == whole  # fmt: skip
    assert made.count > 0  # here, without a cluster, this process scans and places
    for n_workers in (1, 2):
        made.count = 0
        with dask_client(n_workers=n_workers, memory_limit="2GiB", quiet=True):
            out = _ingest(archive, tmp_path / f"workers{n_workers}.zarr", 100, monkeypatch)
        assert _store(out) == whole
        assert made.count == 0, "the client listed files, made a scan table or placed traces"
