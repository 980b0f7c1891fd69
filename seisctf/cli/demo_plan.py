"""What `seisctf demo` builds, read before its cluster starts: the datasets, their default
sensors and layouts, and each one's synthetic source at the sizes asked for (the shipped
recipe `demo-DATASET.yaml` with that source). Light: its check sizes the demo's stores."""

from __future__ import annotations

from typing import Any

DATASETS = ("global", "das", "crustal")
DEFAULT_SENSORS = {"global": 2048, "das": 256, "crustal": 94 * 94}
DEFAULT_LAYOUTS = {"global": "seismo", "das": "das", "crustal": "crustal"}


def demo_datasets(dataset: str) -> tuple[str, ...]:
    """The datasets `--dataset` names (`all`: every one)."""
    return DATASETS if dataset == "all" else (dataset,)


def demo_source(dataset: str, n_sensors: int | None, duration_s: float) -> dict[str, Any]:
    """The recipe source of a demo dataset at the demo's sizes: {source name: options}."""
    sensors = n_sensors or DEFAULT_SENSORS[dataset]
    if dataset == "das":
        return {"synthetic_das": {"channels": sensors}}
    if dataset == "crustal":
        return {"synthetic_crustal": {"sensors": sensors}}
    return {
        "synthetic_global": {
            "sensors": sensors,
            "duration_s": duration_s,
            "sampling_rate_hz": 1.0,
        }
    }
