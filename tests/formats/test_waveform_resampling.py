"""`seisctf ingest waveforms --rate`: polyphase resampling per contiguous trace, checked through
the command line against an independent scipy computation (resample_poly of each segment), with
no spike at a gap or a segment edge, and the same values for any block size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import obspy
from scipy.signal import resample_poly
from test_waveforms import _cli, _open

from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

START = obspy.UTCDateTime("2022-06-01T00:00:00")
SOURCE_HZ, TARGET_HZ = 100.0, 40.0
UP, DOWN = 2, 5  # 40 / 100
# Segments (first sample at 100 Hz, samples): a 5 s gap between them, both starting on the
# 40 Hz grid (grid samples 0 and 1000).
SEGMENTS = ((0, 2000), (2500, 1500))
# The smooth signal is recovered within NO_SPIKE everywhere (the filter's gain at 0.5 Hz and
# DC leaves about 0.14); an FFT per trace puts 100-130 next to each edge.
NO_SPIKE = 0.5


def signal(seconds: np.ndarray) -> np.ndarray:
    """Counts with an offset, a trend (start and end of a segment differ: an FFT wraps them
    round) and a 0.5 Hz oscillation, far below the 20 Hz Nyquist frequency of the grid."""
    return 1000.0 + 20.0 * seconds + 30.0 * np.sin(2 * np.pi * 0.5 * seconds)


def write_gapped_archive(folder: Path) -> list[tuple[int, np.ndarray]]:
    """One FLOAT64 miniSEED file of two segments of XX.GAP..HHZ and a SAC file of XX.SAC..HHZ
    (SAC stores its interval as float32); returns [(first 100 Hz sample, samples)]."""
    folder.mkdir()
    stream, segments = obspy.Stream(), []
    for first, npts in SEGMENTS:
        samples = signal((first + np.arange(npts)) / SOURCE_HZ)
        header = {"network": "XX", "station": "GAP", "channel": "HHZ",
                  "sampling_rate": SOURCE_HZ, "starttime": START + first / SOURCE_HZ}  # fmt: skip
        stream += obspy.Trace(samples, header)
        segments.append((first, samples))
    stream.write(str(folder / "gap.mseed"), format="MSEED", encoding="FLOAT64", reclen=512)
    sac = stream[0].copy()
    sac.stats.station = "SAC"
    sac.write(str(folder / "sac.sac"), format="SAC")
    return segments


def test_rate_resamples_each_segment_like_resample_poly_without_edge_spikes(tmp_path, dask_cluster):
    segments = write_gapped_archive(tmp_path / "archive")
    out = tmp_path / "resampled.zarr"
    run = _cli(str(tmp_path / "archive"), "--out", str(out), "--rate", str(TARGET_HZ),
               scheduler=dask_cluster.address)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "0 problem(s)" in run.stdout and "Traceback" not in run.stderr
    ds = _open(out)
    assert ds.attrs["sampling_rate"] == TARGET_HZ
    assert "resample_poly" in ds.attrs["resampling"]
    stored = ds["data"].sel(station="XX.GAP", channel="HHZ").values.astype(np.float64)

    # Independent computation: scipy's resample_poly of each segment with its ends continued
    # by point reflection, in float64, stored as float32 (tolerance: float32 rounding).
    expected = np.full(stored.shape, np.nan)
    for first, samples in segments:
        at = first * UP // DOWN
        values = resample_poly(samples, UP, DOWN, padtype="antireflect")
        expected[at : at + len(values)] = values
    np.testing.assert_allclose(stored, expected, rtol=1e-6, equal_nan=True)
    gap = slice(SEGMENTS[0][1] * UP // DOWN, SEGMENTS[1][0] * UP // DOWN)
    assert np.isnan(stored[gap]).all() and np.isfinite(stored[: gap.start]).all()

    # No spike: every sample, those next to the gap and the ends included, is the signal.
    times = np.arange(len(stored)) / TARGET_HZ
    valid = np.isfinite(stored)
    error = np.abs(stored[valid] - signal(times[valid]))
    assert error.max() < NO_SPIKE, error.max()
    for edge in (0, gap.start - 1, gap.stop, len(stored) - 1):
        assert abs(stored[edge] - signal(times[edge])) < NO_SPIKE, edge
    # What the FFT per trace gave next to the first edge (the test sees the old fault).
    fft = obspy.Trace(segments[0][1].copy(), {"sampling_rate": SOURCE_HZ})
    fft.resample(TARGET_HZ, window="hann", no_filter=True)
    assert abs(fft.data[0] - signal(0.0)) > 50 * NO_SPIKE

    # SAC keeps 1 / 100 Hz as float32: resampled by the nominal 2/5 all the same.
    sac = ds["data"].sel(station="XX.SAC", channel="HHZ").values
    first_segment = resample_poly(segments[0][1], UP, DOWN, padtype="antireflect")
    np.testing.assert_allclose(sac[: len(first_segment)], first_segment, rtol=1e-6)

    # Block size and chunking do not change a value: each trace is resampled whole.
    small = tmp_path / "small_blocks.zarr"
    ingest_waveforms(
        [str(tmp_path / "archive")],
        StoreLocation(small),
        rate=TARGET_HZ,
        block_samples=97,
        quiet=True,
    )
    np.testing.assert_array_equal(_open(small)["data"].values, ds["data"].values)
