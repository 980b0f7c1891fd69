"""Files that are not miniSEED are recognised as `obspy.read` recognises them and read as it
reads them (`waveform_files.waveform_format`, `read_stream`), on obspy's own test files of every
format it ships (and files of other kinds, which neither reads), without obspy's look-up of
every plugin's package on each call."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import obspy
import pytest

from seisctf.formats.obspy_archive.waveform_files import read_stream, waveform_format

IO = Path(obspy.__file__).parent / "io"
PER_FORMAT = 3  # files taken from each format's test data folder


def _test_files() -> list[Path]:
    files = []
    for folder in sorted(IO.glob("*/tests/data")):
        found = sorted(path for path in folder.rglob("*") if path.is_file())
        small = [path for path in found if path.stat().st_size < 2_000_000]
        files += [path for path in small if path.suffix not in (".gz", ".bz2", ".zip", ".tar")][
            :PER_FORMAT
        ]
    return files


def _obspy_read(data: bytes):
    """obspy.read's stream and format of `data`, or None where it reads nothing."""
    try:
        stream = obspy.read(io.BytesIO(data), headonly=True)
    except Exception:  # noqa: BLE001 - what obspy raises for what it cannot read
        return None
    return stream, stream[0].stats._format if len(stream) else None


def _summary(stream) -> list[tuple]:
    return [(tr.id, tr.stats.starttime.ns, tr.stats.sampling_rate, tr.stats.npts) for tr in stream]


def test_every_format_obspy_ships_is_recognised_and_read_as_obspy_reads_it(tmp_path):
    files = _test_files()
    assert len(files) > 60  # dozens of formats
    recognised = set()
    for path in files:
        data = path.read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = _obspy_read(data)
            if expected is None:
                with pytest.raises(Exception):  # noqa: B017 - obspy raises many types
                    read_stream(data, headonly=True)
                continue
            stream = read_stream(data, headonly=True)
        assert _summary(stream) == _summary(expected[0]), path
        if expected[1] is not None and expected[1] != "MSEED":
            copy = tmp_path / path.name
            copy.write_bytes(data)
            assert waveform_format(str(copy)) == expected[1], path
            recognised.add(expected[1])
    assert {"SAC", "SEGY", "GSE1", "AH"} <= recognised and len(recognised) >= 15, recognised
