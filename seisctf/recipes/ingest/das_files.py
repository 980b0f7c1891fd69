"""DAS recordings (any vendor format DASCore reads) -> one DAS store (`seisctf ingest das`).

Store layout (zarr v3 group; `xarray.open_zarr` opens it lazily; names in `conventions`):

- one float32 variable named after the quantity (`strain_rate` usually: DASCore's `data_type`;
  `raw` when the files do not say), dims (time, distance), NaN where no file has samples;
  chunks (`block_samples`, min(channels, 1024)), `block_samples` about 4 MiB of float32 in a
  chunk (a function of the channel count only, so any number of workers writes the same bytes);
- `distance` (m along the fibre, fibre order): DASCore's distance coordinate;
- `coverage(block)` float32: fraction of valid (non-NaN) samples of each time block;
- attrs `start_time` (ISO 8601, the first grid sample), `start_time_ns`, `sampling_rate` (Hz)
  and `time_step_ns` (the exact period, DASCore's): sample i is at start_time + i ×
  time_step_ns (no time coordinate is stored); `quantity`, `units`, `gauge_length_m`,
  `channel_spacing_m`, `interrogator` (DASCore's format name and version, and the instrument id
  where the files give one); `inputs` (path, size, sha256 of every file); `segments` (every
  ingested patch: file, DASCore's header, grid index, offset); `time_offsets_s` (per file: its
  patches' start minus their grid sample, s); `gaps`, `overlaps` (between patches, in grid
  samples); `ingest_problems`; `merge_rule`; `block_samples`; `ingest_fingerprint`.

Work: a header scan with sha256 (Dask tasks of a few files each: `das_plan.scan_das_file`), the
plan (`das_plan.make_das_plan`), then one Dask task per time block that reads, with DASCore
(`dascore.read(path, time=(…))`: only the block's samples), every patch piece of the block in
painting order (a later-starting patch overwrites an earlier one), writes the block's chunks
and marks the block done in `ingest_progress(block)`. The completion marker and consolidated
metadata are written last (`storage.finish_group`). Resume: a re-run of the same ingest (same
fingerprint) on an unfinished store runs only the unmarked blocks, so an interrupted ingest
finishes with the bytes of an uninterrupted one.

Append (`append=True`): new files join the complete store's grid (start, time step, distance
axis, quantity, units, gauge length stay; a file starting before the store is refused). Only
the blocks new patches touch and the store's last partial block are (re)written; the old
files those blocks read again must hash as recorded; the others are not read. The result
equals a one-shot ingest of all files when the store's axis is the one most patches share.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.recipes.ingest.das_plan import (
    CHANNEL_GROUP,
    NS_PER_S,
    DasAxis,
    DasPatch,
    DasPlan,
    PlacedPatch,
    make_das_plan,
    scan_das_files,
    staged,
)
from seisctf.recipes.ingest.waveform_plan import expand_sources
from seisctf.recipes.ingest.waveforms import (
    ATTR_FINGERPRINT,
    PROGRESS_VAR,
    fail_if_strict,
    fingerprint_of,
    finished_store_attrs,
    iso_time,
    open_store,
)

BLOCK = "block"
MERGE_RULE = (
    "patches laid on the grid at their nearest sample, samples contiguous; in an overlap the "
    "patch that starts later wins (ties: the later file path, then the later patch)"
)
# Scan tasks: files in batches, in about SCAN_TASKS tasks.
SCAN_TASKS = 16


@dataclass(frozen=True)
class DasIngestReport:
    """What an ingest wrote: the plan, coverage per block, problems, gaps and overlaps."""

    plan: DasPlan
    coverage: np.ndarray
    problems: tuple[str, ...]
    gaps: tuple[dict, ...] = ()
    overlaps: tuple[dict, ...] = ()
    up_to_date: bool = False


@dataclass(frozen=True)
class DasBlockTask:
    """One time block: grid span [first, stop), channels, and the pieces to paint in order:
    (patch, first, stop sample of the patch, row of the block it starts at, file sha256)."""

    block: int
    first: int
    stop: int
    n_distance: int
    pieces: tuple[tuple[DasPatch, int, int, int, str], ...]


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


def block_values(task: DasBlockTask, storage_options: dict | None) -> tuple[np.ndarray, list]:
    """The block (time × distance, float32, NaN where no patch has data) and its problems."""
    values = np.full((task.stop - task.first, task.n_distance), np.nan, dtype=np.float32)
    problems = []
    for patch, k0, k1, row, sha256 in task.pieces:
        with staged(patch.path, storage_options, sha256) as local:
            try:
                piece, problem = read_piece(local, patch, k0, k1)
            except Exception as error:  # noqa: BLE001 - DASCore and h5py raise many types
                if not os.path.exists(local):  # gone while being read: fatal, a re-run resumes
                    raise InvalidInput(
                        patch.path, "gone while being read; re-run to resume"
                    ) from None
                message = str(error).splitlines()[0] if str(error) else type(error).__name__
                problems.append(
                    f"{patch.path}: DASCore cannot read samples {k0}-{k1} of patch "
                    f"{patch.index} ({message}); NaN there"
                )
                continue
        if problem:
            problems.append(problem)
        values[row : row + k1 - k0] = piece
    return values, problems


def ingest_block(
    task: DasBlockTask, url: str, storage_options: dict | None, variable: str
) -> tuple[float, list[str]]:
    """Read, paint and write one time block's chunks, then mark it done: (coverage, problems)."""
    values, problems = block_values(task, storage_options)
    fraction = float(np.count_nonzero(~np.isnan(values)) / values.size)
    group = open_store(url, storage_options, mode="r+")
    if fraction > 0:  # a block without any sample is not written (its chunks stay absent)
        data = group[variable].with_config({"write_empty_chunks": True})
        data[task.first : task.stop, :] = values
    # Only after the chunks: a block marked done is whole (a re-run skips it).
    group[PROGRESS_VAR][task.block] = json.dumps({"coverage": fraction, "problems": problems})
    return fraction, problems


def block_tasks(plan: DasPlan, digests: dict[str, str], blocks: Sequence[int]) -> list:
    pieces = plan.pieces_by_block()
    tasks = []
    for block in blocks:
        first, stop = plan.block_span(block)
        found = tuple(
            (placed.patch, k0, k1, placed.first_index + k0 - first, digests[placed.patch.path])
            for placed, k0, k1 in pieces.get(block, [])
        )
        tasks.append(DasBlockTask(block, first, stop, plan.axis.n_distance, found))
    return tasks


def scan_all(paths: Sequence[str], storage_options: dict | None, quiet: bool) -> list:
    """`scan_das_file` of every path, in Dask tasks of consecutive batches, in path order."""
    import dask

    size = max(1, -(-len(paths) // SCAN_TASKS))
    batches = [list(paths[i : i + size]) for i in range(0, len(paths), size)]
    scanned = compute(
        *[dask.delayed(scan_das_files)(batch, storage_options) for batch in batches],
        label="scan DAS files",
        quiet=quiet,
    )
    return [found for batch in scanned for found in batch]


def _variable(plan: DasPlan) -> str:
    return plan.axis.quantity


def create_store(plan: DasPlan, url: str, storage_options: dict | None, fingerprint: str) -> None:
    """The empty store: the variable, `distance`, and the progress array (no attrs, no marker)."""
    group = open_store(url, storage_options, mode="w")
    axis = plan.axis
    group.create_array(
        _variable(plan),
        shape=(plan.n_time, axis.n_distance),
        chunks=(plan.block_samples, min(axis.n_distance, CHANNEL_GROUP)),
        dtype="float32",
        fill_value=np.nan,
        compressors=cv.data_compressor(),
        dimension_names=cv.DAS_DIMS,
    )
    distance = group.create_array(
        cv.DISTANCE,
        shape=(axis.n_distance,),
        dtype="float64",
        dimension_names=(cv.DISTANCE,),
        attributes={cv.ATTR_UNITS: "m"},
    )
    distance[:] = axis.distance_start_m + axis.distance_step_m * np.arange(axis.n_distance)
    create_progress(group, plan.n_blocks, fingerprint, np.full(plan.n_blocks, "", dtype=object))


def create_progress(group: Any, n_blocks: int, fingerprint: str, progress: np.ndarray) -> None:
    """Last, in one metadata write: a store that has it (with this fingerprint) is resumable."""
    array = group.create_array(
        PROGRESS_VAR,
        shape=(n_blocks,),
        chunks=(1,),
        dtype=str,
        fill_value="",
        dimension_names=(BLOCK,),
        attributes={ATTR_FINGERPRINT: fingerprint},
    )
    if any(progress):
        array[:] = progress.astype(str)


def unfinished_progress(
    url: str, storage_options: dict | None, fingerprint: str, plan: DasPlan
) -> np.ndarray | None:
    """The progress (block) of an interrupted ingest of the same inputs at `url`, or None."""
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        return None
    if group.attrs.get(cv.ATTR_COMPLETE) or PROGRESS_VAR not in group:
        return None
    progress = group[PROGRESS_VAR]
    if progress.attrs.get(ATTR_FINGERPRINT) != fingerprint or progress.shape != (plan.n_blocks,):
        return None
    return np.asarray(progress[:], dtype=object)


def das_fingerprint(inputs: Sequence[dict], block_samples: int) -> str:
    """What determines the store's bytes: input hashes and block size (paths excluded: moving an
    archive does not change the data)."""
    from seisctf import __version__

    return fingerprint_of(
        {
            "kind": "das",
            "inputs": sorted(entry["sha256"] for entry in inputs),
            "block_samples": block_samples,
            "version": __version__,
        }
    )


def _gauge(value: float) -> float | None:
    return None if math.isnan(value) else value


def interrogator_of(plan: DasPlan) -> str:
    names = set()
    for placed in plan.placed:
        patch = placed.patch
        name = f"{patch.file_format} {patch.file_version}".strip()
        names.add(f"{name} ({patch.instrument_id})" if patch.instrument_id else name)
    return "; ".join(sorted(names))


def segment_entry(placed: PlacedPatch) -> dict[str, Any]:
    return {
        **placed.patch.to_json(),
        "first_index": placed.first_index,
        "time_offset_s": placed.offset_s,
    }


def store_attrs(
    plan: DasPlan,
    problems: Sequence[str],
    inputs: Sequence[dict],
    gaps: Sequence[dict],
    overlaps: Sequence[dict],
    fingerprint: str,
) -> dict[str, Any]:
    axis = plan.axis
    offsets: dict[str, list[float]] = {}
    for placed in plan.placed:
        offsets.setdefault(placed.patch.path, []).append(round(placed.offset_s, 9))
    return {
        cv.ATTR_START_TIME: iso_time(plan.start_ns),
        "start_time_ns": plan.start_ns,
        cv.ATTR_SAMPLING_RATE: axis.sampling_rate,
        "time_step_ns": axis.step_ns,
        "block_samples": plan.block_samples,
        cv.ATTR_QUANTITY: axis.quantity,
        cv.ATTR_UNITS: axis.units,
        cv.ATTR_GAUGE_LENGTH: _gauge(axis.gauge_length_m),
        cv.ATTR_CHANNEL_SPACING: axis.distance_step_m,
        cv.ATTR_INTERROGATOR: interrogator_of(plan),
        "inputs": sorted(inputs, key=lambda entry: entry["path"]),
        "segments": [segment_entry(placed) for placed in plan.placed],
        "time_offsets_s": {path: sorted(set(found)) for path, found in offsets.items()},
        "gaps": [_timed(gap, plan) for gap in gaps],
        "overlaps": [_timed(overlap, plan) for overlap in overlaps],
        "ingest_problems": sorted(set(problems)),
        "merge_rule": MERGE_RULE,
        ATTR_FINGERPRINT: fingerprint,
    }


def _timed(span: dict, plan: DasPlan) -> dict:
    """A gap or overlap with the ISO time of its first sample and its duration (s)."""
    step = plan.axis.step_ns
    return {
        **span,
        "start_time": iso_time(plan.start_ns + span["first_sample"] * step),
        "duration_s": span["samples"] * step / NS_PER_S,
    }


def ingest_das(
    sources: Sequence[str],
    url: str,
    *,
    strict: bool = False,
    storage_options: dict | None = None,
    block_samples: int | None = None,
    append: bool = False,
    quiet: bool = False,
) -> DasIngestReport:
    """Ingest DAS files (paths, globs, folders, fsspec URLs) into the DAS store at `url`.

    Bad inputs (no format DASCore knows, corrupt HDF5, a patch on another time step, distance
    axis, quantity, units or gauge length than most) are reported by name in the report and the
    store's `ingest_problems` and not ingested; with `strict` any of them is InvalidInput (and no
    store is marked complete); no readable input at all is InvalidInput. A complete store of
    the same inputs (by hash) and block size is left as it is; an interrupted one is resumed.

    `append`: add `sources` to the complete store at `url` (see the module docstring).
    `block_samples`: time samples per chunk and per task (default: about 4 MiB per chunk).
    """
    paths = expand_sources(sources, storage_options)
    if append:
        return _append(paths, url, strict, storage_options, quiet)
    scans = scan_all(paths, storage_options, quiet)
    plan = make_das_plan(scans, block_samples)
    fail_if_strict(strict, plan.problems)
    inputs = [scan.entry for scan in scans]
    fingerprint = das_fingerprint(inputs, plan.block_samples)
    existing = finished_store_attrs(url, storage_options)
    if existing and existing.get(ATTR_FINGERPRINT) == fingerprint:
        return _up_to_date(plan, existing, url, storage_options)
    progress = unfinished_progress(url, storage_options, fingerprint, plan)
    if progress is None:
        create_store(plan, url, storage_options, fingerprint)
        progress = np.full(plan.n_blocks, "", dtype=object)
    return _write(plan, inputs, progress, url, storage_options, fingerprint, strict, quiet)


def _up_to_date(plan: DasPlan, attrs: dict, url: str, storage_options: dict | None):
    coverage = np.asarray(open_store(url, storage_options)[cv.DAS_COVERAGE_VAR][:])
    return DasIngestReport(
        plan,
        coverage,
        tuple(attrs["ingest_problems"]),
        tuple(attrs["gaps"]),
        tuple(attrs["overlaps"]),
        up_to_date=True,
    )


def _write(
    plan: DasPlan,
    inputs: Sequence[dict],
    progress: np.ndarray,
    url: str,
    storage_options: dict | None,
    fingerprint: str,
    strict: bool,
    quiet: bool,
    carried: Sequence[str] = (),
) -> DasIngestReport:
    """Run the unfinished blocks, then coverage, attrs and the completion marker."""
    import dask

    digests = {entry["path"]: entry["sha256"] for entry in inputs}
    todo = [block for block in range(plan.n_blocks) if not progress[block]]
    tasks = block_tasks(plan, digests, todo)
    token = dask.base.tokenize(url, fingerprint)
    results = compute(
        *[
            dask.delayed(ingest_block)(
                task,
                url,
                storage_options,
                _variable(plan),
                dask_key_name=f"ingest_das_block-{token}-{task.block}",
            )
            for task in tasks
        ],
        label="ingest DAS",
        quiet=quiet,
    )
    coverage = np.full(plan.n_blocks, np.nan, dtype=np.float32)
    read_problems: set[str] = set()
    for block, text in enumerate(progress):
        if text:
            done = json.loads(text)
            coverage[block] = done["coverage"]
            read_problems.update(done["problems"])
    for task, (fraction, found) in zip(tasks, results, strict=True):
        coverage[task.block] = fraction
        read_problems.update(found)
    fail_if_strict(strict, sorted(read_problems))
    gaps, overlaps = plan.gaps_and_overlaps()
    problems = (*plan.problems, *carried, *read_problems)
    group = open_store(url, storage_options, mode="r+")
    if cv.DAS_COVERAGE_VAR in group:  # an append replaces it
        del group[cv.DAS_COVERAGE_VAR]
    group.create_array(
        cv.DAS_COVERAGE_VAR,
        shape=coverage.shape,
        dtype="float32",
        fill_value=np.nan,
        dimension_names=(BLOCK,),
    )[:] = coverage
    attrs = store_attrs(plan, problems, inputs, gaps, overlaps, fingerprint)
    del group[PROGRESS_VAR]
    storage.finish_group(url, attrs, storage_options)
    return DasIngestReport(
        plan,
        coverage,
        tuple(attrs["ingest_problems"]),
        tuple(attrs["gaps"]),
        tuple(attrs["overlaps"]),
    )


# --- append -----------------------------------------------------------------------------------


def _store_axis(attrs: dict[str, Any], n_distance: int, distance: np.ndarray) -> DasAxis:
    gauge = attrs.get(cv.ATTR_GAUGE_LENGTH)
    return DasAxis(
        step_ns=int(attrs["time_step_ns"]),
        distance_start_m=float(distance[0]),
        distance_step_m=float(attrs[cv.ATTR_CHANNEL_SPACING]),
        n_distance=n_distance,
        quantity=attrs[cv.ATTR_QUANTITY],
        units=attrs[cv.ATTR_UNITS],
        gauge_length_m=math.nan if gauge is None else float(gauge),
    )


def _append(
    paths: Sequence[str], url: str, strict: bool, storage_options: dict | None, quiet: bool
) -> DasIngestReport:
    try:
        group = open_store(url, storage_options)
    except InvalidInput:
        raise InvalidInput(url, "--append needs an existing store; ingest without it") from None
    previous = dict(group.attrs)
    complete = bool(previous.get(cv.ATTR_COMPLETE))
    if not complete and not (PROGRESS_VAR in group and "segments" in previous):
        raise InvalidInput(url, "--append needs a complete store (this one is unfinished)")
    distance = np.asarray(group[cv.DISTANCE][:])
    axis = _store_axis(previous, len(distance), distance)
    block_samples = int(previous["block_samples"])
    start_ns = int(previous["start_time_ns"])
    old_inputs = {entry["path"]: entry for entry in previous["inputs"]}
    kept = [
        PlacedPatch(DasPatch.from_json(s), int(s["first_index"]), float(s["time_offset_s"]))
        for s in previous["segments"]
    ]
    new_paths = [path for path in paths if path not in old_inputs]
    scans = scan_all(new_paths, storage_options, quiet) if new_paths else []
    inputs = [*old_inputs.values(), *(scan.entry for scan in scans)]
    fingerprint = das_fingerprint(inputs, block_samples)
    old_plan = make_das_plan([], block_samples, axis=axis, start_ns=start_ns, kept=kept)
    if complete and fingerprint == previous.get(ATTR_FINGERPRINT):
        return _up_to_date(old_plan, previous, url, storage_options)
    plan = make_das_plan(scans, block_samples, axis=axis, start_ns=start_ns, kept=kept)
    fail_if_strict(strict, plan.problems)
    touched = {b for p in plan.placed if p.patch.path not in old_inputs for b in plan.blocks_of(p)}
    if old_plan.n_time % block_samples:
        touched.add(old_plan.n_time // block_samples)  # the old last, partial block grows
    progress = unfinished_progress(url, storage_options, fingerprint, plan)
    if progress is None and not complete:
        raise InvalidInput(
            url,
            "an interrupted append of other files is pending: re-run that append, "
            "or ingest all files without --append",
        )
    reread = {p.patch.path for p in kept if touched.intersection(old_plan.blocks_of(p))}
    check_unchanged(reread, old_inputs, storage_options, quiet, url)
    if progress is None:
        progress = prepare_append(plan, touched, url, storage_options, fingerprint)
    carried = [p for p in previous.get("ingest_problems", []) if p not in plan.problems]
    return _write(plan, inputs, progress, url, storage_options, fingerprint, strict, quiet, carried)


def check_unchanged(
    paths: set[str], old_inputs: dict, storage_options: dict | None, quiet: bool, url: str
) -> None:
    """The old files an append reads again must hash as recorded (else bad input naming one)."""
    for scan in scan_all(sorted(paths), storage_options, quiet) if paths else []:
        recorded = old_inputs[scan.path]["sha256"]
        if scan.entry["sha256"] != recorded:
            raise InvalidInput(
                scan.path,
                f"changed since it was ingested into {url} (sha256 {recorded[:12]}… now "
                f"{scan.entry['sha256'][:12]}…); ingest without --append to rebuild",
            )


def prepare_append(
    plan: DasPlan,
    touched: set[int],
    url: str,
    storage_options: dict | None,
    fingerprint: str,
) -> np.ndarray:
    """Turn the complete store into an unfinished one of the grown plan: marker off, the
    variable resized, progress marking done every old block not `touched` (its chunks and
    coverage stay). Returns the progress (block)."""
    group = open_store(url, storage_options, mode="r+")
    group.attrs[cv.ATTR_COMPLETE] = False  # first: from here on the store is being changed
    old_coverage = np.asarray(group[cv.DAS_COVERAGE_VAR][:])
    progress = np.full(plan.n_blocks, "", dtype=object)
    for block, fraction in enumerate(old_coverage):
        if block not in touched:
            progress[block] = json.dumps({"coverage": float(fraction), "problems": []})
    group[plan.axis.quantity].resize((plan.n_time, plan.axis.n_distance))
    if PROGRESS_VAR in group:
        del group[PROGRESS_VAR]
    create_progress(group, plan.n_blocks, fingerprint, progress)
    return progress
