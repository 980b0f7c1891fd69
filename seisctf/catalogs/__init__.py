"""Event, pick and station tables (grown by the phase-picking issues).

`seisctf.catalogs.seisbench_dataset(URL, storage_options=None, **options)`: an event-window store
as a SeisBench `WaveformDataset` (`seisbench_store.seisbench_dataset`); `phasenet_loader`,
`phasenet_loss`, `phasenet_augmentations`: SeisBench's PhaseNet training pipeline
(`seisbench_training`). Imported on first use.
"""

from __future__ import annotations

from typing import Any

TRAINING = ("BatchReads", "phasenet_augmentations", "phasenet_loader", "phasenet_loss")


def __getattr__(name: str) -> Any:
    """The training entry points, imported on first use, so that importing any catalogue module
    (every ingest, the command line) does not load SeisBench and torch for them."""
    if name == "seisbench_dataset":
        from seisctf.catalogs.seisbench_store import seisbench_dataset

        return seisbench_dataset
    if name in TRAINING:
        from seisctf.catalogs import seisbench_training

        return getattr(seisbench_training, name)
    raise AttributeError(f"module 'seisctf.catalogs' has no attribute {name!r}")
