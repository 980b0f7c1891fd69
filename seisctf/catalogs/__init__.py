"""Event, pick and station tables (grown by the phase-picking issues).

`seisctf.catalogs.seisbench_dataset`, `phasenet_loader`, `phasenet_loss`,
`phasenet_augmentations`, `BatchReads`: the contract's first names of what
`seisctf.formats.seisbench` exports, imported on first use.
"""

from __future__ import annotations

from typing import Any

TRAINING = ("BatchReads", "phasenet_augmentations", "phasenet_loader", "phasenet_loss")


def __getattr__(name: str) -> Any:
    """`seisctf.formats.seisbench`'s exports by their first names, on first use (SeisBench and
    torch load only then)."""
    if name == "seisbench_dataset" or name in TRAINING:
        from seisctf.formats import seisbench

        return getattr(seisbench, name)
    raise AttributeError(f"module 'seisctf.catalogs' has no attribute {name!r}")
