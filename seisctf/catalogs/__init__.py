"""Event, pick and station tables (grown by the phase-picking issues).

`seisctf.catalogs.seisbench_dataset(URL, storage_options=None, **options)`: an event-window store
as a SeisBench `WaveformDataset` (`seisbench_store.seisbench_dataset`); `phasenet_loader`,
`phasenet_loss`, `phasenet_augmentations`: SeisBench's PhaseNet training pipeline
(`seisbench_training`). Imported on first use.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "seisbench_dataset": "seisctf.catalogs.seisbench_store",
    "BatchReads": "seisctf.catalogs.seisbench_training",
    "phasenet_augmentations": "seisctf.catalogs.seisbench_training",
    "phasenet_loader": "seisctf.catalogs.seisbench_training",
    "phasenet_loss": "seisctf.catalogs.seisbench_training",
}


def __getattr__(name: str) -> Any:
    """The training entry points, imported on first use, so that importing any catalogue module
    (every ingest, the command line) does not load SeisBench and torch for them."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'seisctf.catalogs' has no attribute {name!r}")
