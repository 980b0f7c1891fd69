"""seisctf's version is not part of an ingest's fingerprint: under another reported version, a
re-run and an append of the same inputs find the waveform or DAS store up to date and write
nothing (a release would otherwise mark every store out of date)."""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path

import numpy as np
import obspy
import pytest
from das_vendor_files import write_prodml

import seisctf
from seisctf.formats.das import das_files
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.obspy_archive import waveforms
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

ANOTHER_VERSION = "99.0.0"


def report_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every place the ingests could read seisctf's version from says ANOTHER_VERSION: the
    package's attr, a name an ingest module bound it to, the installed metadata."""
    monkeypatch.setattr(seisctf, "__version__", ANOTHER_VERSION)
    for module in (waveforms, das_files):
        monkeypatch.setattr(module, "__version__", ANOTHER_VERSION, raising=False)
    metadata_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: ANOTHER_VERSION if name == "seisctf" else metadata_version(name),
    )


def store_files(url: Path) -> dict[str, tuple[str, int]]:
    """{path in the store: (sha256, mtime_ns)} of every file of the store."""
    return {
        str(path.relative_to(url)): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mtime_ns,
        )
        for path in sorted(url.rglob("*"))
        if path.is_file()
    }


def write_waveform_archive(root: Path) -> None:
    """Two stations' miniSEED files, 60 s at 20 Hz each."""
    root.mkdir()
    rng = np.random.default_rng(0)
    for station in ("AAA", "BBB"):
        header = {"network": "XX", "station": station, "location": "", "channel": "HHZ"}
        header |= {"sampling_rate": 20.0, "starttime": obspy.UTCDateTime("2021-03-04T05:06:07")}
        trace = obspy.Trace(rng.integers(-1000, 1000, 1200).astype(np.int32), header=header)
        trace.write(str(root / f"XX.{station}..HHZ.mseed"), format="MSEED", encoding="STEIM2")


def test_a_waveform_store_stays_up_to_date_under_another_version(tmp_path, monkeypatch):
    archive, url = tmp_path / "archive", tmp_path / "store.zarr"
    store = StoreLocation(str(url))
    write_waveform_archive(archive)
    assert not ingest_waveforms([str(archive)], store, quiet=True).up_to_date
    before = store_files(url)
    report_another_version(monkeypatch)
    assert ingest_waveforms([str(archive)], store, quiet=True).up_to_date
    assert ingest_waveforms([str(archive)], store, append=True, quiet=True).up_to_date
    assert store_files(url) == before


def test_a_das_store_stays_up_to_date_under_another_version(tmp_path, monkeypatch):
    archive, url = tmp_path / "archive", tmp_path / "store.zarr"
    store = StoreLocation(str(url))
    archive.mkdir()
    data = np.random.default_rng(0).standard_normal((200, 8))
    write_prodml(archive / "day.h5", data, np.datetime64("2024-01-02T03:04:05", "ns"), 50.0)
    assert not ingest_das([str(archive)], store, block_samples=64, quiet=True).up_to_date
    before = store_files(url)
    report_another_version(monkeypatch)
    assert ingest_das([str(archive)], store, block_samples=64, quiet=True).up_to_date
    assert ingest_das([str(archive)], store, append=True, quiet=True).up_to_date
    assert store_files(url) == before
