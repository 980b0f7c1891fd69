"""Which components and samples an event window has, in SeisBench's sense.

An event-window store holds every window in the store's component order, with NaN where a
component has no sample (a component the station lacks, or one recorded nowhere in the
window) and NaN in the gaps of a component it has. SeisBench instead lists a trace's own
components in `trace_component_order` and lets `WaveformDataset(missing_components=…)` fill the
others when reading (`pad`: zeros, `copy`: the first present component, `ignore`: left out);
its converters fill the samples a present component lacks with zeros
(`seisbench.util.stream_to_array`) and note the share of data in the metadata
(`trace_completeness`). Here a gap reads as zero and `trace_gap_fraction`
(`gap_fractions`) holds the share of gaps, so windows with gaps can be filtered out. The store's
reader (`seisbench_store.StoreWaveformDataset`), the export (`seisbench_export`) and the
event-window writer (the column) all use these functions, so a component missing or a sample
zero in one is so in the others.
"""

from __future__ import annotations

import numpy as np


def present_components(window: np.ndarray) -> np.ndarray:
    """(channel,) bool of a window (channel, sample): the rows holding at least one sample
    (not all NaN). A row with some NaN (a gap) is present."""
    return ~np.isnan(window).all(axis=-1)


def gaps_as_zeros(window: np.ndarray) -> np.ndarray:
    """The window with its NaN samples (gaps) made zeros; the window itself when it has none
    (never changed in place: readers cache their windows)."""
    gaps = np.isnan(window)
    return np.where(gaps, window.dtype.type(0), window) if gaps.any() else window


def own_components(window: np.ndarray, order: str) -> tuple[np.ndarray, str]:
    """The window's present rows (present channel, sample), gaps made zeros, and their letters
    taken from `order` (the window's component order, one letter a row), as SeisBench stores a
    trace and its `trace_component_order`. A window without any sample is returned whole (zero
    rows would be no SeisBench trace), as zeros."""
    present = present_components(window)
    if not present.any():
        return np.zeros_like(window), order
    if present.all():
        return gaps_as_zeros(window), order
    letters = "".join(letter for letter, kept in zip(order, present, strict=True) if kept)
    return gaps_as_zeros(window[present]), letters


def gap_fractions(windows: np.ndarray, npts: np.ndarray) -> np.ndarray:
    """(trace,) float64: of each window's samples as `own_components` gives them (its present
    components, or every component of a window without any sample; its first `npts` samples),
    the fraction that are gaps (NaN). `windows` (trace, channel, sample), `npts` (trace,); a
    window of 0 samples has none."""
    npts = np.asarray(npts, dtype=np.int64)
    inside = np.arange(windows.shape[-1]) < npts[:, None]  # (trace, sample)
    gaps_per_row = (np.isnan(windows) & inside[:, None, :]).sum(axis=-1)  # (trace, channel)
    present = gaps_per_row < npts[:, None]
    counted = present | ~present.any(axis=1, keepdims=True)
    gaps = (gaps_per_row * counted).sum(axis=1)
    samples = counted.sum(axis=1) * npts
    return np.divide(gaps, samples, out=np.zeros(len(npts)), where=samples > 0)
