"""A network smaller than the shipped layouts need, through the command line as a user runs it
(`python -m seisctf.cli`): two stations fifteen years apart, ObsPy's IU.ANMO of 2010 and CH.BALST
of 2025 ingested into one store (about 500 million samples a trace declared, two days of data),
are refused by `tasks --layout auto` from the station count, in seconds: no gap check runs (it
was 57,470 tasks over the fifteen years, minutes), and the message says how many stations each
shipped layout needs and what layout file two stations support."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import obspy
import pytest

SEISCTF = [sys.executable, "-m", "seisctf.cli"]
OBSPY = Path(obspy.__file__).parent
ANMO_2010 = OBSPY / "signal/tests/data/IUANMO.seed"  # IU.ANMO.00.LHZ, 2010-01-01, 1 Hz
BALST_2025 = OBSPY / "io/mseed/tests/data/CH.BALST..LH_two_channels"  # LHE and LHZ, 1 Hz
SECRET = "small-network-test-secret-0123456789"
# The cluster's start and the store's opening on two loaded cores; the gap check took minutes.
MAX_SECONDS = 60


@pytest.fixture(scope="module")
def fifteen_years(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("small-network") / "two-stations.zarr"
    argv = ["ingest", "waveforms", str(ANMO_2010), str(BALST_2025), "--out", str(store)]
    run = subprocess.run([*SEISCTF, *argv, "--quiet"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "2 stations x 2 channels x 500515432 samples at 1.0 Hz" in run.stdout
    return store


def test_too_few_stations_are_refused_from_the_station_count(fifteen_years, tmp_path):
    argv = ["tasks", str(fifteen_years), "--layout", "auto", "--channel", "LHZ", "--secret"]
    argv += [SECRET, "--public", str(tmp_path / "p.zarr"), "--truth", str(tmp_path / "t.zarr")]
    started = time.monotonic()
    run = subprocess.run([*SEISCTF, *argv], capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    assert run.returncode == 3, run.stderr
    assert "gap check" not in run.stderr  # its progress line (no --quiet here) never began
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("seisctf:")]
    assert line == (
        f"seisctf: invalid input: {fifteen_years}: no shipped layout fits (--layout auto): "
        "'seismo': has 2 stations, and layout 'seismo' (modes=100) needs at least 199 gap-free "
        "ones; 'crustal': has 2 stations, and layout 'crustal' (modes=100) needs at least 199 "
        "gap-free ones; for 2 stations, write a layout file with `modes: 1` or less (a layout "
        'needs 2 · modes − 1 stations) and give --layout FILE.yaml (README: "A benchmark from '
        'a small network")'
    )
    assert seconds < MAX_SECONDS
    assert not (tmp_path / "p.zarr").exists() and not (tmp_path / "t.zarr").exists()
