"""Which components an event window has, in SeisBench's sense.

An event-window store holds every window in the store's component order, with NaN where a
component has no sample (a component the station lacks, or one recorded nowhere in the
window). SeisBench instead lists a trace's own components in `trace_component_order` and lets
`WaveformDataset(missing_components=…)` fill the others when reading (`pad`: zeros, `copy`:
the first present component, `ignore`: left out). The store's reader
(`seisbench_store.StoreWaveformDataset`) and the export (`seisbench_export`) both turn the
store's windows into SeisBench's form with these functions, so a component missing in one is
missing in the other.
"""

from __future__ import annotations

import numpy as np


def present_components(window: np.ndarray) -> np.ndarray:
    """(channel,) bool of a window (channel, sample): the rows holding at least one sample
    (not all NaN). A row with some NaN (a gap) is present."""
    return ~np.isnan(window).all(axis=-1)


def own_components(window: np.ndarray, order: str) -> tuple[np.ndarray, str]:
    """The window's present rows (present channel, sample) and their letters taken from `order`
    (the window's component order, one letter a row), as SeisBench stores a trace and its
    `trace_component_order`. A window without any sample is returned whole (zero rows would be
    no SeisBench trace), its NaN made zeros."""
    present = present_components(window)
    if not present.any():
        return np.zeros_like(window), order
    if present.all():
        return window, order
    letters = "".join(letter for letter, kept in zip(order, present, strict=True) if kept)
    return window[present], letters
