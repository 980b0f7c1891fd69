"""Direct h5py reads of a SeisBench dataset's blocked traces, for the ingest
(`seisctf.formats.seisbench.seisbench_format`, whose docstring says what the store holds).

SeisBench's `WaveformDataset.get_waveforms` reads a blocked trace (`bucket3$17,:3,:3000`: trace
17 of the HDF5 dataset `data/bucket3`, sliced) with one h5py read per trace, in Python, and the
dataset it reads from parses every metadata CSV in each process. Most traces of a large dataset
are the common case, read here instead, plainly: a trace whose name is `BLOCK$I` followed only
by step-less slices (`,a:b`), whose block exists in its chunk's HDF5 file with I below the
block's length, whose slice is 2-D, whose component order is the store's and whose rate is the
store's (no reordering, no missing component, no resampling). Such traces of one task, block
and slice form `Run`s, each read as one HDF5 slice `block[I:J + 1, a:b, c:d]` of the traces
from its first to its last. The values are those `get_waveforms` returns: the same HDF5 slice
(transposed to (channel, sample) for `WC` data), cast to float32 by the caller. Every other
trace is read through SeisBench.

`parse_names` does the planning with vectorised string matching (pyarrow) and one h5py header
read per block (no samples): each trace's block, index, slice and its length along the sample axis.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

# BLOCK$INDEX then step-less slices of the other axes (SeisBench's own writer: `,:3,:3001`).
NAME_PATTERN = r"^(?P<block>[^$]+)\$(?P<index>\d+)(?P<rest>(?:,-?\d*:-?\d*)*)$"
# Traces a run may skip between two it reads (SeisBench's writer interleaves its buckets:
# per split and length, so a block's traces are near each other in store order, not adjacent).
MAX_GAP = 64


@dataclass(frozen=True)
class Run:
    """Store rows `rows` = traces `indexes` (ascending, within MAX_GAP of each other) of the
    HDF5 dataset `data/block` in file `path`, each sliced by `rest` along its other axes; read
    as the one slice `block[indexes[0]:indexes[-1] + 1, *rest]`."""

    path: str
    block: str
    rest: tuple[slice, ...]
    indexes: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class BlockNames:
    """Per trace (store order): `parsed` (name of the common form, block present, slice
    fitting, 2-D), and where parsed its file, block and slice ids, index in the block and
    length along the sample axis (0 elsewhere)."""

    parsed: np.ndarray
    file_id: np.ndarray
    block_id: np.ndarray
    rest_id: np.ndarray
    index: np.ndarray
    lengths: np.ndarray
    paths: tuple[str, ...]
    blocks: tuple[str, ...]
    rests: tuple[tuple[slice, ...], ...]


def _slices(rest: str) -> tuple[slice, ...]:
    """`,a:b,:c` → (slice(a, b), slice(None, c)) (SeisBench's location syntax, no steps)."""
    out = []
    for part in rest.split(",")[1:]:
        start, stop = part.split(":")
        out.append(slice(int(start) if start else None, int(stop) if stop else None))
    return tuple(out)


def parse_names(
    names: np.ndarray,
    trace_chunks: np.ndarray,
    chunks: Sequence[str],
    waveform_paths: Sequence[Path],
    sample_axis: int,
) -> BlockNames:
    """Plan the direct reads (module doc); traces not parsed are left to SeisBench's reader
    and its checks (`seisbench_format.native_lengths`)."""
    import h5py
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(names)
    struct = pc.extract_regex(pa.array(np.asarray(names, dtype=object), pa.string()), NAME_PATTERN)
    parts = pd.DataFrame(
        {field: struct.field(field).to_pandas() for field in ("block", "index", "rest")}
    )
    parsed = struct.is_valid().to_numpy(zero_copy_only=False).copy()  # the name matched
    index = np.zeros(n, dtype=np.int64)
    index[parsed] = parts["index"][parsed].astype(np.int64).to_numpy()
    file_ids = {chunk: i for i, chunk in enumerate(chunks)}
    file_id = pd.Series(trace_chunks).map(file_ids).fillna(-1).to_numpy(dtype=np.int64)
    parsed &= file_id >= 0
    block_id, blocks = pd.factorize(parts["block"].where(parsed))
    rest_id, rests = pd.factorize(parts["rest"].where(parsed))
    lengths = np.zeros(n, dtype=np.int64)
    slices = tuple(_slices(str(rest)) for rest in rests)
    candidates = np.flatnonzero(parsed)
    frame = pd.DataFrame({"file": file_id, "block": block_id, "rest": rest_id}).iloc[candidates]
    for key, positions in frame.groupby(["file", "block", "rest"]).indices.items():
        f, b, r = cast("tuple[int, int, int]", key)  # the three integer columns grouped by
        rows = candidates[positions]
        with h5py.File(waveform_paths[f], "r") as file:
            dataset = file.get(f"data/{blocks[b]}")
            shape = getattr(dataset, "shape", None)
        if shape is None or len(shape) != len(slices[r]) + 1:
            parsed[rows] = False
            continue
        view = np.broadcast_to(np.empty((), np.uint8), shape[1:])[slices[r]]
        inside = index[rows] < shape[0]
        if view.ndim != 2:
            inside[:] = False
        parsed[rows[~inside]] = False
        lengths[rows[inside]] = view.shape[sample_axis] if view.ndim == 2 else 0
    return BlockNames(
        parsed,
        file_id,
        block_id.astype(np.int64),
        rest_id.astype(np.int64),
        index,
        lengths,
        tuple(str(path) for path in waveform_paths),
        tuple(str(block) for block in blocks),
        slices,
    )


def runs(names: BlockNames, direct: np.ndarray, start: int, stop: int) -> tuple[Run, ...]:
    """The runs (module doc) covering the `direct` rows of [start, stop): per file, block and
    slice, its traces in index order, cut where two are more than MAX_GAP apart (a slice never
    reads more than MAX_GAP traces it does not need between two it needs)."""
    rows = start + np.flatnonzero(direct[start:stop])
    if rows.size == 0:
        return ()
    keys = np.stack([names.file_id[rows], names.block_id[rows], names.rest_id[rows]])
    index = names.index[rows]
    order = np.lexsort((index, *keys[::-1]))
    keys, index, rows = keys[:, order], index[order], rows[order]
    cut = np.ones(len(rows), dtype=bool)
    cut[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0) | (np.diff(index) > MAX_GAP)
    bounds = [*np.flatnonzero(cut), len(rows)]
    return tuple(
        Run(
            names.paths[keys[0, lo]],
            names.blocks[keys[1, lo]],
            names.rests[keys[2, lo]],
            index[lo:hi].astype(np.int32 if index[hi - 1] < 2**31 else np.int64),
            (rows[lo:hi] - start).astype(np.int32),  # small: they travel in the task graph
        )
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    )


@functools.lru_cache(maxsize=64)
def _open(path: str, modified_ns: int, size: int):
    """The HDF5 file, opened once per process and version (a file rewritten in place is
    opened anew)."""
    import h5py

    return h5py.File(path, "r")


def read_run(run: Run, transpose: bool) -> np.ndarray:
    """The run's traces as (count, channel, sample) in the file's dtype (`transpose`: the
    file holds (sample, channel) traces)."""
    status = Path(run.path).stat()
    file = _open(run.path, status.st_mtime_ns, status.st_size)
    first, last = int(run.indexes[0]), int(run.indexes[-1])
    data = file["data"][run.block][(slice(first, last + 1), *run.rest)]
    if not (np.diff(run.indexes) == 1).all():  # gaps (or a trace named twice)
        data = data[run.indexes - first]
    return data.transpose(0, 2, 1) if transpose else data
