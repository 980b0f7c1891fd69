"""obspy's own merge of one channel's traces on a grid: the reference the merge of
`ingest waveforms` (`formats.obspy_archive.trace_merge`) is held to."""

from __future__ import annotations

import numpy as np
import obspy

START_NS = obspy.UTCDateTime("2024-01-01").ns
RATE = 10.0


def obspy_merged(
    pieces: list[tuple[int, np.ndarray]], rate: float = RATE
) -> tuple[int, np.ndarray] | None:
    """(first grid index, samples) of obspy's merge of one channel's pieces on a grid of `rate`
    (Hz), its times rounded to the nanosecond as the ingest's are; masked samples as float32
    NaN; None if obspy keeps no trace."""
    stream = obspy.Stream()
    for first, samples in pieces:
        start = obspy.UTCDateTime(ns=START_NS + round(first * 1e9 / rate))
        header = {"network": "XX", "station": "AAA", "location": "00", "channel": "HHZ",
                  "sampling_rate": rate, "starttime": start}  # fmt: skip
        stream += obspy.Trace(samples, header)
    stream.merge(method=1, interpolation_samples=0)
    if not stream:
        return None
    (trace,) = stream
    samples = trace.data
    if isinstance(samples, np.ma.MaskedArray):
        samples = np.ma.filled(samples.astype(np.float32), np.nan)
    return round((trace.stats.starttime.ns - START_NS) * rate / 1e9), samples
