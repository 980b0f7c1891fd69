"""SeisBench: its WaveformDataset format as an ingest (`seisbench`), the export of event-window
stores to it (`seisbench_export`), and reading them back as a `WaveformDataset` for training.

`seisctf.formats.seisbench.seisbench_dataset(URL, storage_options=None, **options)`: an
event-window store as a SeisBench `WaveformDataset` (`seisbench_store.seisbench_dataset`);
`phasenet_loader`, `phasenet_loss`, `phasenet_augmentations`: SeisBench's PhaseNet training
pipeline (`seisbench_training`). Imported on first use; `seisctf.catalogs` gives the same names.
"""

from __future__ import annotations

from typing import Any

TRAINING = ("BatchReads", "phasenet_augmentations", "phasenet_loader", "phasenet_loss")


def __getattr__(name: str) -> Any:
    """The training entry points, imported on first use, so that importing an ingest or the
    command line does not load SeisBench and torch for them."""
    if name == "seisbench_dataset":
        from seisctf.formats.seisbench.seisbench_store import seisbench_dataset

        return seisbench_dataset
    if name in TRAINING:
        from seisctf.formats.seisbench import seisbench_training

        return getattr(seisbench_training, name)
    raise AttributeError(f"module 'seisctf.formats.seisbench' has no attribute {name!r}")
