"""Event, pick and station tables (grown by the phase-picking issues).

`seisctf.catalogs.seisbench_dataset(URL, storage_options=None, **options)`: an event-window store
as a SeisBench `WaveformDataset` (`seisbench_store.seisbench_dataset`), imported on first use.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """`seisbench_dataset`, imported on first use, so that importing any catalogue module (every
    ingest, the command line) does not load SeisBench and torch for it."""
    if name == "seisbench_dataset":
        from seisctf.catalogs.seisbench_store import seisbench_dataset

        return seisbench_dataset
    raise AttributeError(f"module 'seisctf.catalogs' has no attribute {name!r}")
