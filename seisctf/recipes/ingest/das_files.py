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

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from seisctf import __version__
from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.recipes.context import BuildContext
from seisctf.recipes.ingest import resumable
from seisctf.recipes.ingest.chunk_writes import ChunkWriter, write_chunks
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
from seisctf.recipes.ingest.resumable import (
    ATTR_FINGERPRINT,
    BLOCK,
    PROGRESS_VAR,
    fail_if_strict,
    fingerprint_of,
    iso_time,
    open_store,
)
from seisctf.recipes.ingest.source import INGEST_STORE, INPUT_PATHS, opened_source
from seisctf.recipes.ingest.waveform_plan import expand_sources
from seisctf.recipes.schema import parameters
from seisctf.registry import INGESTS
from seisctf.s3 import holds_credentials

MERGE_RULE = (
    "patches laid on the grid at their nearest sample, samples contiguous; in an overlap the "
    "patch that starts later wins (ties: the later file path, then the later patch)"
)
COVERAGE_DIMS = (BLOCK,)


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
    number: int = 0  # its progress record


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
) -> dict[str, list]:
    """Read, paint and write one time block's chunks, then its progress record, which it
    returns (`resumable.run_record` of one block)."""
    values, problems = block_values(task, storage_options)
    fraction = resumable.coverage_of(values)
    group = open_store(url, storage_options, mode="r+")
    if fraction > 0:  # a block without any sample is not written (its chunks stay absent)
        data = group[variable].with_config({"write_empty_chunks": True})
        data[task.first : task.stop, :] = values
    record = resumable.run_record([fraction], [problems])
    write_chunks([resumable.record_write(ChunkWriter(group[PROGRESS_VAR]), task.number, record)])
    return record


def block_tasks(
    plan: DasPlan, digests: dict[str, str], only: set[int] | None = None
) -> list[DasBlockTask]:
    """One task per time block some patch overlaps (a block none touches stays empty, coverage
    0), numbered in order; with `only`, just those blocks."""
    pieces = plan.pieces_by_block()
    tasks = []
    for block in sorted(b for b in pieces if only is None or b in only):
        first, stop = plan.block_span(block)
        found = tuple(
            (placed.patch, k0, k1, placed.first_index + k0 - first, digests[placed.patch.path])
            for placed, k0, k1 in pieces[block]
        )
        tasks.append(
            DasBlockTask(block, first, stop, plan.axis.n_distance, found, number=len(tasks))
        )
    return tasks


def scan_all(paths: Sequence[str], storage_options: dict | None, quiet: bool) -> list:
    """`scan_das_file` of every path, in Dask tasks of consecutive batches, in path order."""
    return resumable.scan_all(scan_das_files, paths, storage_options, "scan DAS files", quiet)


def _variable(plan: DasPlan) -> str:
    return plan.axis.quantity


def create_store(
    plan: DasPlan, url: str, storage_options: dict | None, fingerprint: str, records: int
) -> None:
    """The empty store: the variable, `distance`, and the progress array of `records` blocks
    (no attrs, no marker)."""
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
    resumable.create_progress(group, records, fingerprint)


def das_fingerprint(inputs: Sequence[dict], block_samples: int) -> str:
    """What determines the store's bytes: input hashes and block size (paths excluded: moving an
    archive does not change the data)."""
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


@holds_credentials
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
    existing = resumable.up_to_date_attrs(url, storage_options, fingerprint)
    if existing:
        return _up_to_date(plan, existing, url, storage_options)
    tasks = block_tasks(plan, {entry["path"]: entry["sha256"] for entry in inputs})
    progress = resumable.unfinished_progress(url, storage_options, fingerprint)
    if progress is None or progress.records != len(tasks):
        create_store(plan, url, storage_options, fingerprint, len(tasks))
        progress = resumable.Progress()
    return _write(plan, inputs, tasks, progress, url, storage_options, fingerprint, strict, quiet)


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
    tasks: Sequence[DasBlockTask],
    progress: resumable.Progress,
    url: str,
    storage_options: dict | None,
    fingerprint: str,
    strict: bool,
    quiet: bool,
    carried: Sequence[str] = (),
) -> DasIngestReport:
    """Run the block `tasks` `progress` has no record of, then coverage, attrs and the
    completion marker."""
    import dask

    pending = [task for task in tasks if task.number not in progress.done]
    token = dask.base.tokenize(url, fingerprint)
    records = compute(
        *[
            dask.delayed(ingest_block)(
                task,
                url,
                storage_options,
                _variable(plan),
                dask_key_name=f"ingest_das_block-{token}-{task.block}",
            )
            for task in pending
        ],
        label="ingest DAS",
        quiet=quiet,
    )
    written = {task.number: record for task, record in zip(pending, records, strict=True)}
    coverage, read_problems, _ = resumable.collect(
        progress, (plan.n_blocks,), written, lambda number: [tasks[number].block]
    )
    fail_if_strict(strict, sorted(read_problems))
    gaps, overlaps = plan.gaps_and_overlaps()
    problems = (*plan.problems, *carried, *read_problems)
    attrs = store_attrs(plan, problems, inputs, gaps, overlaps, fingerprint)
    resumable.finish(url, storage_options, coverage, cv.DAS_COVERAGE_VAR, COVERAGE_DIMS, attrs)
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
    group, previous = resumable.appendable_attrs(url, storage_options, "segments")
    complete = bool(previous.get(cv.ATTR_COMPLETE))
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
    digests = {entry["path"]: entry["sha256"] for entry in inputs}
    tasks = block_tasks(plan, digests, touched)
    progress = resumable.unfinished_progress(url, storage_options, fingerprint)
    if progress is not None and progress.records != len(tasks):
        progress = None  # not this plan's (cannot happen for the same fingerprint)
    if progress is None and not complete:
        raise resumable.pending_append(url)
    reread = {p.patch.path for p in kept if touched.intersection(old_plan.blocks_of(p))}
    check_unchanged(reread, old_inputs, storage_options, quiet, url)
    if progress is None:
        progress = prepare_append(plan, len(tasks), url, storage_options, fingerprint)
    carried = [p for p in previous.get("ingest_problems", []) if p not in plan.problems]
    return _write(
        plan, inputs, tasks, progress, url, storage_options, fingerprint, strict, quiet, carried
    )


def check_unchanged(
    paths: set[str], old_inputs: dict, storage_options: dict | None, quiet: bool, url: str
) -> None:
    """The old files an append reads again must hash as recorded (else bad input naming one)."""
    for scan in scan_all(sorted(paths), storage_options, quiet) if paths else []:
        recorded = old_inputs[scan.path]["sha256"]
        if scan.entry["sha256"] != recorded:
            raise resumable.changed_input(scan.path, url, recorded, scan.entry["sha256"])


def prepare_append(
    plan: DasPlan, records: int, url: str, storage_options: dict | None, fingerprint: str
) -> resumable.Progress:
    """Turn the complete store into an unfinished one of the grown plan, with progress of
    `records` blocks: marker off, the old coverage kept (grown with zeros), the variable
    resized. The blocks not rewritten keep their chunks and coverage."""
    group, base = resumable.reopen_for_append(
        url, storage_options, cv.DAS_COVERAGE_VAR, (plan.n_blocks,)
    )
    group[plan.axis.quantity].resize((plan.n_time, plan.axis.n_distance))
    resumable.create_progress(group, records, fingerprint, base=base)
    return resumable.Progress(base=base, records=records)


# --- the recipe source ----------------------------------------------------------------------


@INGESTS.register(
    "das_files",
    options=parameters(
        {"sources": INPUT_PATHS, "strict": {"type": "boolean"}, **INGEST_STORE}, ("sources",)
    ),
    ingest=True,
    command="das",
    cli=ingest_das,
    help="DAS files (any format DASCore reads: PRODML, Silixa, Febus, OptoDAS, Terra15, "
    "DASDAE, ...) -> DAS store",
)
def das_files(context: BuildContext, *, sources: list[str], **options: Any) -> xr.Dataset:
    """`seisctf ingest das` of `sources` into the DAS store at `context.source_url`, opened."""
    report = ingest_das(
        [context.resolve(item) for item in sources],
        context.source_url,
        storage_options=context.storage_options,
        quiet=context.quiet,
        **options,
    )
    return opened_source(context, report.problems)
