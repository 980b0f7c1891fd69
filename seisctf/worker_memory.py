"""The memory settings of Dask worker processes seisctf starts: their malloc environment, spill
and pause thresholds, and memory limit (figures: docs/scaling.md)."""

from __future__ import annotations

from typing import Any

import dask

# distributed's default `distributed.nanny.pre-spawn-environ`, for before distributed is imported.
PRE_SPAWN_ENVIRON = {
    "MALLOC_TRIM_THRESHOLD_": 65536,
    "OMP_NUM_THREADS": 1,
    "MKL_NUM_THREADS": 1,
    "OPENBLAS_NUM_THREADS": 1,
}
# Added for embedded workers where that default is unchanged. Setting the trim threshold (as
# distributed does) also pins glibc's mmap threshold at 128 KiB, so every block-sized temporary
# (4-16 MiB: a chunk, a filter's region) is a fresh mapping, faulted in page by page and
# unmapped when freed: above that threshold they come from the heap and are reused, and the
# heap's top is still trimmed eagerly. One arena: the worker's threads (task, event loop,
# zarr's I/O) can each get an arena that keeps its own freed blocks, so with the threshold alone
# a small worker held more resident memory and spilled data it was about to use. Together the
# two made the pipeline chain faster and spill least; a larger top pad instead kept so much that
# a small worker paused for good (figures: benchmarks/history/RESULTS-2026.md, "Embedded
# workers' malloc"; docs/scaling.md).
EMBEDDED_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": 16 * 2**20, "MALLOC_ARENA_MAX": 1}
# Spill and pause thresholds of embedded workers, as fractions of their memory limit. A worker
# process holds a fixed share of its limit in imports and allocator state before any data, so
# at a small limit distributed's defaults (spill at 70 %, pause at 80 %) left little room for
# data and spilled nearly every block; these values spill several times less (benchmarks/
# RESULTS.md, "Pipeline chain"; docs/scaling.md). Tasks here stream bounded blocks, so the room
# between spill and the 95 % terminate threshold is enough.
# (A task-based rechunk of an array bigger than a small worker does not stream: its heap grows to
# the spill line and stays, and 5 % was too little room at 700 MiB; tests/pipeline/test_rechunk.py.)
# Applied where the user's dask config still has distributed's defaults.
EMBEDDED_MEMORY_FRACTIONS = {"spill": (0.7, 0.85), "pause": (0.8, 0.9)}


def worker_memory_limit(n_workers: int) -> int:
    """Bytes per worker: 80 % of the machine's memory, split evenly."""
    import psutil

    return int(0.8 * psutil.virtual_memory().total / n_workers)


def worker_environ() -> dict[str, Any]:
    """The environment embedded workers start with: the configured pre-spawn environment, plus
    `EMBEDDED_ENVIRON` where that is distributed's default."""
    environ = dask.config.get("distributed.nanny.pre-spawn-environ", default=PRE_SPAWN_ENVIRON)
    if environ == PRE_SPAWN_ENVIRON:
        return {**environ, **EMBEDDED_ENVIRON}
    return dict(environ)
