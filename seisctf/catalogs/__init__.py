"""Event, pick and station tables (grown by the phase-picking issues)."""

from __future__ import annotations

from typing import Any


def seisbench_dataset(url: str, storage_options=None, **options: Any):
    """The event-window store at `url` (any fsspec URL) as a `seisbench.data.WaveformDataset`
    that SeisBench's generators, augmentations and DataLoader workers use unchanged (module
    `seisbench_store`). `options`: `component_order`, `dimension_order`, `sampling_rate`,
    `missing_components`, `metadata_cache`, `resample_zerophase` as SeisBench's, `name`, and
    `cache_bytes` (the most bytes of shards' indexes and windows each process keeps; default
    `window_reader.DEFAULT_CACHE_BYTES`, 256 MiB)."""
    from seisctf.catalogs.seisbench_store import StoreWaveformDataset

    return StoreWaveformDataset(url, storage_options, **options)
