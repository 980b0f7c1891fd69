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
  where the files give one); `gaps`, `overlaps` (between patches, in grid samples; beyond
  1,000 of a kind, the first 1,000, all of them in a group: `das_spans`);
  `ingest_problems` (beyond 1,000: `problem_lines`); `merge_rule`; `block_samples`;
  `ingest_fingerprint`. None per file: the
  root metadata stays small whatever the number of files;
- group `inputs`: the table of the inputs (`das_inputs`: path, size, modified, sha256 of every
  file, the patches DASCore's scan found in each, and where the store holds each: grid index
  and start offset, what stores written before it listed in the attrs `inputs`, `segments`
  and `time_offsets_s`).

Every run takes from the `inputs` table of a store already at its location the scans of the files
whose size and modification (mtime, ETag) are as recorded, and scans only the others: the table
is read in ranges of rows by tasks and joined there with the run's listing (`record_parts` with
`das_inputs.DAS`), so a re-run of a complete or unfinished store reads no unchanged file and
the client holds no row of the table.

Work: a header scan with sha256 (Dask tasks of a few files each: `das_scan.scan_das_file`),
which reads each file once and keeps its copy on the host for the run tasks (`das_staging`,
`input_cache`; consecutive scan batches on one host, `input_locality`), kept on the workers
as the partitions of the plan; the plan's rounds run as tasks on them and the client merges
their summaries (`das_parts`: the gaps and overlaps, the fingerprint, the inputs table and
each wave's runs are made where the partitions are too). Folder sources are listed by tasks
(`listing_parts`): the client holds the folders, per-partition summaries and one wave's runs,
never a path, scan or patch of every file, a resume's or an append's included. Then one Dask
task per run of up to `das_runs.RUN_BLOCKS` time blocks some patch touches (`das_runs`, on the
host keeping most of its files; the pieces of files another host keeps are read there; in
waves of at most MAX_PIECES_PER_WAVE pieces) that reads, block after block, with DASCore
(`dascore.read(path, time=(…))`: only the block's samples) every patch piece of the block in
painting order (a later-starting patch overwrites an earlier one) and writes the block's
chunks, then the run's record in `ingest_progress(record)`. The completion marker and
consolidated metadata are written last (`storage.finish_group`). Resume: a re-run of the same
ingest (same fingerprint) on an unfinished store runs only the runs without a record, so an
interrupted ingest finishes with the bytes of an uninterrupted one.

Append (`append=True`): new files join the complete store's grid (start, time step, distance
axis, quantity, units, gauge length stay; a file starting before the store is refused). Only
the blocks new patches touch and the store's last partial block are (re)written. The store's
files are joined with the new ones range by range on the workers, each range's patches placed
as its rows record them; a recorded file must still be there, and one whose size or
modification differ from the table's is scanned again and must hash as recorded; the others
are not read. The result equals a one-shot ingest of all files
when the store's axis is the one most patches share. The append's table is written beside the
one in use and named with the completion marker (`input_manifest.beside`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import MAX_TASKS_PER_WAVE, compute_in_waves, kept, shared, wave_bounds
from seisctf.errors import InvalidInput
from seisctf.formats.das import das_inputs
from seisctf.formats.das.das_parts import (
    PartedPlan,
    fingerprint_of_parts,
    plan_parts,
    record_spans,
    run_pieces,
    wave_runs,
    write_table_of_parts,
)
from seisctf.formats.das.das_plan import CHANNEL_GROUP, DasAxis, DasPlan
from seisctf.formats.das.das_runs import DasRun, RunLayout, run_task
from seisctf.formats.das.das_scan import scan_das_files
from seisctf.formats.das.das_spans import span_count
from seisctf.formats.shared import (
    input_cache,
    input_locality,
    input_manifest,
    listing_parts,
    record_parts,
    resumable,
)
from seisctf.formats.shared.coverage_parts import (
    Coverage,
    coverage_array,
    write_base,
    write_coverage,
)
from seisctf.formats.shared.input_listing import expand_sources
from seisctf.formats.shared.input_manifest import file_stats
from seisctf.formats.shared.partition_tasks import Each, on_cluster
from seisctf.formats.shared.problem_lines import (
    compute_decode_problems,
    kept_decode_problems,
    write_sorted_problems,
)
from seisctf.formats.shared.record_parts import JoinedScan, Record
from seisctf.formats.shared.resumable import (
    ATTR_FINGERPRINT,
    BLOCK,
    fail_if_strict,
    iso_time,
    open_store,
)
from seisctf.formats.shared.source import BlockSamples, InputPaths, Strict, opened_source
from seisctf.location import StoreLocation
from seisctf.options import option
from seisctf.plugins.context import BuildContext
from seisctf.registry import INGESTS

if TYPE_CHECKING:  # an annotation only: the ingest's client need not import xarray
    import xarray as xr

MERGE_RULE = (
    "patches laid on the grid at their nearest sample, samples contiguous; in an overlap the "
    "patch that starts later wins (ties: the later file path, then the later patch)"
)
COVERAGE_DIMS = (BLOCK,)
# Patch pieces the runs of one wave paint at most (as `waveforms.MAX_TRACES_PER_WAVE`): a
# block of short files has many, and the client holds one wave's runs.
MAX_PIECES_PER_WAVE = 5_000


@dataclass(frozen=True)
class DasIngestReport:
    """What an ingest wrote: the plan, the store's coverage per block (its zarr array, read as it
    is indexed: `coverage_parts.coverage_array`), problems (the first
    `conventions.ATTR_PROBLEM_LINES`, sorted; `problem_count`: how many there are, None: as
    many; `problem_lines.read_problems` of the store reads them all), gaps and overlaps."""

    plan: DasPlan
    coverage: Any
    problems: tuple[str, ...]
    gaps: tuple[dict, ...] = ()
    overlaps: tuple[dict, ...] = ()
    up_to_date: bool = False
    # How many gaps and overlaps there are (`gaps`, `overlaps` hold the first
    # `conventions.ATTR_DAS_SPANS`; None: as many as they hold). `das_spans.read_spans` of the
    # store reads them all.
    gap_count: int | None = None
    overlap_count: int | None = None
    problem_count: int | None = None

    @property
    def n_problems(self) -> int:
        """How many problems were found (`problems` holds the first of them)."""
        return len(self.problems) if self.problem_count is None else self.problem_count

    @property
    def n_gaps(self) -> int:
        return len(self.gaps) if self.gap_count is None else self.gap_count

    @property
    def n_overlaps(self) -> int:
        return len(self.overlaps) if self.overlap_count is None else self.overlap_count


def scan_parts(
    sources: Sequence[str],
    store: StoreLocation,
    record: Record | None,
    each: Each,
    quiet: bool,
    append: bool = False,
) -> JoinedScan:
    """The scan of the files below `sources` (read with the storage options of `store`) in
    partitions of consecutive files, kept where they were made, and the files' `InputStats`
    (one a partition, or one of all): folders are listed by tasks (`listing_parts`), other
    sources here. With the `record` of the store at `store` (a resume, or an `append`, which
    adds the recorded files), joined with it range by range on the workers (`record_parts`):
    the files as recorded are not scanned again."""
    storage_options = store.storage_options
    scan = input_cache.keeping(scan_das_files)  # each file read from storage once
    label = das_inputs.DAS.scan_label
    roots = listing_parts.roots_of(sources, storage_options)
    if roots is not None:
        listing = listing_parts.listed(sources, roots, storage_options, quiet)
        batches = listing.batches
        if record is None:
            parts = listing_parts.scan_tasks(scan, listing, storage_options, "scan_das_files",
                                             label, quiet)  # fmt: skip
            return JoinedScan(parts, batches)
    else:
        paths = expand_sources(sources, storage_options)
        stats = file_stats(paths, storage_options)  # one listing per folder
        if record is None:
            tasks = resumable.scan_tasks(scan, paths, storage_options,
                                         input_locality.in_path_order)  # fmt: skip
            return JoinedScan(kept(tasks, label, quiet), [shared(stats)])
        batches = [shared(stats)]
    return record_parts.joined_scan(record, store, batches, scan, append, each, quiet,
                                    das_inputs.DAS)  # fmt: skip


def _variable(plan: DasPlan) -> str:
    return plan.axis.quantity


def create_store(
    parted: PartedPlan,
    store: StoreLocation,
    fingerprint: str,
    records: int,
    stats: list[Any],
    each: Each,
) -> None:
    """The empty store: the variable, `distance`, the inputs table (the partitions' scans and
    their files' `stats`, written by `each`'s tasks), and last the progress array of `records`
    blocks (no attrs, no marker)."""
    plan = parted.plan
    group = open_store(store, mode="w")
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
    write_table_of_parts(store, stats, parted, each, input_manifest.GROUP)  # a resume's
    resumable.create_progress(group, records, fingerprint)


def _gauge(value: float) -> float | None:
    return None if math.isnan(value) else value


def store_attrs(
    plan: DasPlan,
    interrogator: str,
    problems: dict[str, Any],
    spans: dict[str, Any],
    fingerprint: str,
) -> dict[str, Any]:
    """The complete store's attrs (module doc): none per file (the inputs table has those);
    `spans`: the root attrs of the gaps and overlaps (`das_spans.span_attrs`)."""
    axis = plan.axis
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
        cv.ATTR_INTERROGATOR: interrogator,
        **spans,
        **problems,
        "merge_rule": MERGE_RULE,
        ATTR_FINGERPRINT: fingerprint,
    }


def _report_spans(attrs: dict[str, Any]) -> dict[str, Any]:
    """The report's fields of the spans of a store with root `attrs`: the first of each kind
    and their number."""
    return {
        "gaps": tuple(attrs["gaps"]),
        "overlaps": tuple(attrs["overlaps"]),
        "gap_count": span_count(attrs, "gaps"),
        "overlap_count": span_count(attrs, "overlaps"),
    }


@input_cache.cache_run  # files kept between the scan and the run tasks, cleared at the end
def ingest_das(
    sources: Sequence[str],
    store: StoreLocation,
    *,
    strict: bool = False,
    block_samples: int | None = None,
    append: bool = False,
    quiet: bool = False,
) -> DasIngestReport:
    """Ingest DAS files (paths, globs, folders, fsspec URLs, read with the storage options of
    `store`) into the DAS store at `store`.

    Bad inputs (no format DASCore knows, corrupt HDF5, a patch on another time step, distance
    axis, quantity, units or gauge length than most) are reported by name in the report and the
    store's `ingest_problems` and not ingested; with `strict` any of them is InvalidInput (and no
    store is marked complete); no readable input at all is InvalidInput. A complete store of
    the same inputs (by hash) and block size is left as it is; an interrupted one is resumed.
    Files whose size and modification are as the inputs table of a store at `store` records
    are not read again (`das_inputs.scanned`).

    `append`: add `sources` to the complete store at `store` (see the module docstring).
    `block_samples`: time samples per chunk and per task (default: about 4 MiB per chunk).
    """
    each = on_cluster(quiet)
    if append:
        return _append(sources, store, strict, each, quiet)
    record = record_parts.record_of(store, das_inputs.DAS)  # of any store there: its size
    found = scan_parts(sources, store, record, each, quiet)
    parts, stats = found.parts, found.stats
    parted = plan_parts(parts, each, block_samples)
    fail_if_strict(strict, _lines(parted.plan, strict))
    fingerprint = fingerprint_of_parts(parted, each)
    existing = resumable.up_to_date_attrs(store, fingerprint)
    if existing:
        return _up_to_date(parted.plan, existing, store)
    layout = parted.layout()
    progress = resumable.unfinished_progress(store, fingerprint, counted=True)
    if progress is None or progress.records != len(layout):
        create_store(parted, store, fingerprint, len(layout), stats, each)
        progress = resumable.Progress()
    return _write(parted, each, layout, progress, store, fingerprint, strict, quiet)


def _lines(plan: DasPlan, strict: bool) -> list[str]:
    """The plan's problem lines if `strict` (brought here: its error names them), else none."""
    return list(plan.problems) if strict and len(plan.problems) else []


def _up_to_date(plan: DasPlan, attrs: dict, store: StoreLocation):
    coverage = coverage_array(store, cv.DAS_COVERAGE_VAR)
    return DasIngestReport(plan, coverage, up_to_date=True, **_report_fields(attrs))


def _report_fields(attrs: dict[str, Any]) -> dict[str, Any]:
    """The report's problems and spans of a store with root `attrs`."""
    return {
        "problems": tuple(attrs.get(cv.ATTR_PROBLEMS, ())),
        "problem_count": attrs.get(cv.ATTR_PROBLEM_COUNT),
        **_report_spans(attrs),
    }


@dataclass(frozen=True)
class AppendedInputs:
    """An append's inputs table, written beside the one in use (`old_table`) before the store
    is finished, of the files' `stats` (one a partition) and the plan's partitions."""

    stats: Sequence[Any]
    old_table: str


def _write(
    parted: PartedPlan,
    each: Each,
    layout: RunLayout,
    progress: resumable.Progress,
    store: StoreLocation,
    fingerprint: str,
    strict: bool,
    quiet: bool,
    appended: AppendedInputs | None = None,
) -> DasIngestReport:
    """Run the runs of `layout` (of the plan `parted`) `progress` has no record of (each on
    the host keeping its files: `das_runs.run_task`; a wave's runs made when it comes, where
    the partitions are: `das_parts.wave_runs`), then coverage, attrs, an append's inputs table
    and the completion marker. The runs return their records' problems counted: the decode
    problems are read by a task from the records of the runs that found any
    (`problem_lines.decode_problems`). The problem lines are sorted where they are kept (with
    an append's store's own, read a chunk a task) and written group by group
    (`problem_lines.write_sorted_problems`)."""
    import dask

    plan = parted.plan
    pending = [number for number in range(len(layout)) if number not in progress.done]
    token = dask.base.tokenize(store.url, fingerprint)
    variable = _variable(plan)
    placement = input_locality.run_placement()
    cache_run = input_cache.current_run()
    # Waves of at most MAX_TASKS_PER_WAVE blocks and MAX_PIECES_PER_WAVE pieces: a run's graph
    # carries its blocks' pieces (a patch each), and the client holds one wave's.
    wave = max(1, MAX_TASKS_PER_WAVE // layout.run_blocks)
    costs = run_pieces(parted, layout, each)[pending].tolist()
    bounds = wave_bounds(len(pending), wave, costs, MAX_PIECES_PER_WAVE)
    firsts = [first for first, _ in bounds]
    made: dict[int, DasRun] = {}  # the runs of the wave being built, by index in `pending`

    def task(index: int) -> Any:
        if index not in made:
            made.clear()
            first, stop = bounds[bisect.bisect_right(firsts, index) - 1]
            runs = wave_runs(parted, layout, pending[first:stop], cache_run)
            made.update(zip(range(first, stop), runs, strict=True))
        number = pending[index]
        return run_task(made.pop(index), store, variable, f"{token}-{number}", placement)

    collected = resumable.Collected(progress, layout.blocks_of)
    compute_in_waves(task, len(pending), label="ingest DAS", quiet=quiet, wave_tasks=wave,
                     costs=costs, wave_cost=MAX_PIECES_PER_WAVE,
                     fold=collected.fold(pending))  # fmt: skip
    decode_runs = sorted(collected.runs_with_problems)
    if strict and decode_runs:
        fail_if_strict(strict, compute_decode_problems(store, fingerprint, decode_runs))
    spans = record_spans(store, parted, each)  # the groups of those the attrs cannot hold, written
    # By a task, kept there; no run with a problem: no record to read (DAS carries none over).
    decoded = kept_decode_problems(store, fingerprint, decode_runs) if decode_runs else []
    problems = write_sorted_problems(store, plan.problems, decoded, appended is not None, each)
    attrs = store_attrs(plan, parted.interrogator, problems, spans, fingerprint)
    if appended is not None:  # beside the old table, named with the completion marker
        table = input_manifest.beside(open_store(store))
        write_table_of_parts(store, appended.stats, parted, each, table)
        attrs[input_manifest.ATTR_TABLE] = table
    write_coverage(Coverage(store, cv.DAS_COVERAGE_VAR, (plan.n_blocks,), COVERAGE_DIMS,
                            layout.cells()), quiet)  # fmt: skip
    resumable.finish(store, attrs)
    if appended is not None:
        input_manifest.drop_table(store, appended.old_table)
        das_inputs.forget_attrs(store)
    coverage = coverage_array(store, cv.DAS_COVERAGE_VAR)
    return DasIngestReport(plan, coverage, **_report_fields(attrs))


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
    sources: Sequence[str], store: StoreLocation, strict: bool, each: Each, quiet: bool
) -> DasIngestReport:
    group, previous = resumable.appendable_attrs(store, "start_time_ns")
    record = record_parts.record_of(store, das_inputs.DAS)
    if record is None:
        raise InvalidInput(
            store.url,
            "records no DAS inputs (no `inputs` table); ingest without {append}",
            parameters=["append"],
        )
    complete = bool(previous.get(cv.ATTR_COMPLETE))
    distance = np.asarray(group[cv.DISTANCE][:])
    axis = _store_axis(previous, len(distance), distance)
    block_samples = int(previous["block_samples"])
    old_n_time = int(group[axis.quantity].shape[0])
    # Every file, the store's too, on the workers: the recorded ones as recorded (those whose
    # size or modification differ scanned again and checked against their sha256).
    found = scan_parts(sources, store, record, each, quiet, append=True)
    parted = plan_parts(found.parts, each, block_samples, axis=axis,
                        start_ns=int(previous["start_time_ns"]),
                        records=found.part_records())  # fmt: skip
    plan = parted.plan
    fingerprint = fingerprint_of_parts(parted, each)
    if complete and fingerprint == previous.get(ATTR_FINGERPRINT):
        return _up_to_date(plan, previous, store)
    fail_if_strict(strict, _lines(plan, strict))
    spans = [span for s in parted.summaries for span in s.fresh_touched]
    if old_n_time % block_samples:  # the old last, partial block grows
        spans.append((old_n_time // block_samples, old_n_time // block_samples + 1))
    layout = RunLayout(plan, spans)
    progress = resumable.unfinished_progress(store, fingerprint, counted=True)
    if progress is not None and progress.records != len(layout):
        progress = None  # not this plan's (cannot happen for the same fingerprint)
    if progress is None and not complete:
        raise resumable.pending_append(store.url)
    if progress is None:
        progress = prepare_append(plan, len(layout), store, fingerprint)
    appended = AppendedInputs(found.stats, input_manifest.table_name(group))
    return _write(parted, each, layout, progress, store, fingerprint, strict, quiet, appended)


def prepare_append(
    plan: DasPlan, records: int, store: StoreLocation, fingerprint: str
) -> resumable.Progress:
    """Turn the complete store into an unfinished one of the grown plan, with progress of
    `records` blocks: marker off, the old coverage kept (`BASE_VAR`, by tasks: grown with
    zeros), the variable resized. The blocks not rewritten keep their chunks and coverage."""
    group = resumable.reopen_for_append(store)
    write_base(store, cv.DAS_COVERAGE_VAR, (plan.n_blocks,))
    group[plan.axis.quantity].resize((plan.n_time, plan.axis.n_distance))
    resumable.create_progress(group, records, fingerprint)
    return resumable.Progress(records=records)


# --- the recipe source ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DasFilesOptions:
    """A recipe's options of `das_files`, passed on to `ingest_das` as given (one left out,
    None here, takes its default there)."""

    sources: InputPaths
    strict: Strict = option(None)
    block_samples: BlockSamples = option(None, "time samples a chunk and a task (default: ~4 MiB)")


@INGESTS.register(
    "das_files",
    options=DasFilesOptions,
    command="das",
    cli=ingest_das,
    help="DAS files (any format DASCore reads: PRODML, Silixa, Febus, OptoDAS, Terra15, "
    "DASDAE, ...) -> DAS store",
)
def das_files(context: BuildContext, *, sources: list[str], **options: Any) -> xr.Dataset:
    """`seisctf ingest das` of `sources` into the DAS store at `context.source_url`, opened."""
    report = ingest_das(
        [context.resolve(item) for item in sources],
        context.location(context.require_source_url()),
        quiet=context.quiet,
        **options,
    )
    return opened_source(context, report.problems)
