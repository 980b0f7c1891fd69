"""A DAS ingest's time blocks: the patch pieces of one block read with DASCore
(`dascore.read(path, time=(…))`: only the block's samples) from the host's copy of each file
(`das_staging.staged`) and painted in order (a later-starting patch overwrites an earlier one).
The tasks that write them, a run of blocks each, are `das_runs`'; on a cluster of several
hosts, the pieces of files kept on another host than the run's are read there (`read_pieces`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.formats.das.das_plan import DasPatch
from seisctf.formats.das.das_staging import staged
from seisctf.location import StoreLocation


@dataclass(frozen=True)
class DasBlockTask:
    """One time block: grid span [first, stop), channels, and the pieces to paint in order:
    (patch, first, stop sample of the patch, row of the block it starts at, file sha256, file
    size); `cache_run`: the input-cache run whose copies of the files it reads."""

    block: int
    first: int
    stop: int
    n_distance: int
    pieces: tuple[tuple[DasPatch, int, int, int, str, int], ...]
    cache_run: str = ""


def read_piece(local: str, patch: DasPatch, k0: int, k1: int) -> tuple[np.ndarray, str | None]:
    """Samples k0 … k1−1 of a patch (time × distance, float32) read with DASCore, NaN where
    DASCore gives none, and a problem text if it gave fewer or other than the scan said."""
    import dascore as dc

    margin = (patch.step_ns - 1) // 2  # half a sample: the window holds exactly k0 … k1−1
    window = tuple(
        np.datetime64(patch.start_ns + k * patch.step_ns + sign * margin, "ns")
        for k, sign in ((k0, -1), (k1 - 1, 1))
    )
    values = np.full((k1 - k0, patch.n_distance), np.nan, dtype=np.float32)
    spool = dc.read(
        local, file_format=patch.file_format, file_version=patch.file_version, time=window
    )
    found = [p for p in spool if set(p.dims) == set(cv.DAS_DIMS)]
    if len(found) > 1:  # several patches in the window: the one with this patch's type
        found = [p for p in found if str(p.attrs.data_type or "") == patch.data_type] or found
    if not found:
        return values, f"{patch.path}: patch {patch.index}: DASCore read no samples {k0}-{k1}"
    piece = found[0].transpose(*cv.DAS_DIMS)
    first_ns = int(np.datetime64(piece.get_coord("time").min(), "ns").astype(np.int64))
    k_first = round((first_ns - patch.start_ns) / patch.step_ns)
    data = np.asarray(piece.data)
    if data.shape[1] != patch.n_distance:
        return values, (
            f"{patch.path}: patch {patch.index}: DASCore read {data.shape[1]} "
            f"channels, its scan said {patch.n_distance}"
        )
    lo, hi = max(k0, k_first), min(k1, k_first + data.shape[0])
    if hi > lo:
        values[lo - k0 : hi - k0] = data[lo - k_first : hi - k_first]
    if (lo, hi) != (k0, k1):
        return values, (
            f"{patch.path}: patch {patch.index}: DASCore read samples {lo}-{hi} "
            f"where the scan promised {k0}-{k1}; the rest is NaN"
        )
    return values, None


# A piece read: (its index in the task's pieces, samples or None: unreadable, problems).
PieceRead = tuple[int, np.ndarray | None, tuple[str, ...]]


def read_pieces(task: DasBlockTask, store: StoreLocation, which: Sequence[int]) -> list[PieceRead]:
    """Read the pieces `which` (indices into `task.pieces`) of a block, each file with the
    storage options of the `store` being written: on the host that keeps their files, for a
    block whose files are kept on several (`input_locality`)."""
    found: list[PieceRead] = []
    for index in which:
        patch, k0, k1, _, sha256, size = task.pieces[index]
        with staged(store.with_url(patch.path), sha256, size, task.cache_run) as local:
            try:
                piece, problem = read_piece(local, patch, k0, k1)
            except Exception as error:  # noqa: BLE001 - DASCore and h5py raise many types
                if not os.path.exists(local):  # gone while being read: fatal, a re-run resumes
                    raise InvalidInput(
                        patch.path, "gone while being read; re-run to resume"
                    ) from None
                message = str(error).splitlines()[0] if str(error) else type(error).__name__
                found.append((index, None, (
                    f"{patch.path}: DASCore cannot read samples {k0}-{k1} of patch "
                    f"{patch.index} ({message}); NaN there",
                )))  # fmt: skip
                continue
        found.append((index, piece, (problem,) if problem else ()))
    return found


def block_values(
    task: DasBlockTask, store: StoreLocation, read: Sequence[Sequence[PieceRead]] = ()
) -> tuple[np.ndarray, list]:
    """The block (time × distance, float32, NaN where no patch has data) and its problems:
    its pieces painted in order, those in `read` (`read_pieces` elsewhere) as read there, the
    rest read here."""
    found = {index: (piece, problems) for part in read for index, piece, problems in part}
    rest = [index for index in range(len(task.pieces)) if index not in found]
    found.update({index: (piece, said) for index, piece, said in read_pieces(task, store, rest)})
    values = np.full((task.stop - task.first, task.n_distance), np.nan, dtype=np.float32)
    problems: list[str] = []
    for index, (_, k0, k1, row, _, _) in enumerate(task.pieces):
        piece, said = found[index]
        problems.extend(said)
        if piece is not None:
            values[row : row + k1 - k0] = piece
    return values, problems
