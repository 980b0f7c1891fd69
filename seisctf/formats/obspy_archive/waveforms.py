"""Raw seismogram archives (any obspy format: miniSEED, SAC, …) -> one continuous waveform store.

Store layout (zarr v3 group; `xarray.open_zarr` opens it lazily):

- `data(station, channel, time)` float32, NaN where no sample was recorded; chunks
  (1, all channels, `block_samples`) with `block_samples` = 2**18 by default (3 MiB for three
  channels): a function of the data only, so any number of workers writes the same bytes; CF
  `units` of the samples (`waveform_attrs.data_attrs`: `count`, or the corrected unit);
- `station` (ids `NET.STA`, or `NET.STA.LOC` for a non-empty location code: `seed_ids`) with
  `network`, `station_code`, `location` (the SEED codes), `latitude`, `longitude` (degrees),
  `elevation` (m) from StationXML (NaN without it); `channel` (channel codes, e.g. `BHZ`);
- `coverage(station, block)` float32: fraction of valid (non-NaN) samples of the station's block
  in its own channels (`station_channels`), one block per time chunk;
- attrs `start_time` (ISO 8601, the first grid sample), `start_time_ns`, `sampling_rate` (Hz):
  sample i is at start_time + i / sampling_rate (no time coordinate is stored: it would be as
  large as the data); `ingest_problems` (every bad input, by name; beyond 1,000 lines, the
  first 1,000, all of them in the group `problems`: `problem_lines`, written by a task from
  the partitions' lines and the runs' records, the client holding their number and the first
  1,000 alone); `merge_rule`, `resampling`,
  `response_removed` (null, or output, pre_filt, water_level, … of `--remove-response`);
- group `station_attrs` (`station_attrs`; in the root attrs of stores ingested before it), per
  station as JSON text: `time_offsets_s` (the offsets of its traces' starts from their grid
  sample, trace minus grid, in seconds), `station_channels` (the channel codes its traces
  have), `channel_metadata` (per channel: azimuth, dip (degrees), sensitivity, its frequency
  and units, and `units` of the stored samples); `storage.station_attrs` reads either layout;
- group `inputs`: the table of the inputs (`input_manifest`: path, size, modified, sha256 and
  header scan of every file, `samples_stored` false on those the store holds nothing of).

Every run takes from the `inputs` table of a store already at the output the scans of the files
whose size and modification (mtime, ETag) are as recorded, and scans only the others
(`input_manifest.scanned`): a re-run of a complete or unfinished store reads no unchanged file.
The table is read in ranges of rows by tasks and joined with the run's listing where they are
(`record_parts`): the client holds neither, however many files the store holds.

Work: a header scan with sha256 (Dask tasks of batches of files, `scan_table.scan_files`: one
table of columns, no Python object per file), kept on the workers as the partitions of the
plan; the plan's rounds run as tasks on them and the client merges their summaries
(`partition_plan`, `waveform_parts`: the inventory's findings, the fingerprint's digests and the
inputs table are made on workers too); then one Dask task per run of a station's consecutive
time blocks (`waveform_runs`: laid out from the partitions, each wave's runs made on the
workers) that, block after block, reads the block's files (`waveform_blocks`: decode, remove the
response if asked, resample if asked, put on the grid, merge; decoded files and merged file sets
are cached per worker, so a file is decoded once per run, not once per block), fills gaps with
NaN and writes the block's chunk. The completion marker and consolidated metadata are written
last (`storage.finish_group`). Folder sources are listed by tasks too (`listing_parts`): the
client holds the folders, per-partition summaries, the runs and one wave's traces, never a
path, scan, trace or problem line of every file (a resume or an append, which read the
store's record of its inputs, list and join here).
Sparse time: only the (station, block)s some trace overlaps get a task; the others are never
written (NaN, coverage 0) and cost nothing, so two files years apart cost what they hold.
Resume: each run writes its record (`resumable`) in `ingest_progress` after its chunks; a
re-run of the same ingest (same fingerprint) on an unfinished store runs only the runs without
one, so an interrupted ingest finishes with the bytes of an uninterrupted one.

Append (`append=True`): the store's own inputs must still be there, and those changed since
(size, modification) are re-scanned and must hash as recorded; the grid (start, rate, block
size), stations and channels must stay. The store is marked incomplete first, `data` grows
along `time`, and only the blocks new files touch plus each station's last partial block are
(re)written; the result equals a one-shot ingest of all files.

Inputs may be fsspec URLs (`s3://bucket/archive/`, read with the storage options of the output's
location): every file is read whole into memory (hashed, scanned and decoded from its bytes),
local or remote alike. The scan
keeps the bytes it read in its host's cache (`input_cache`; consecutive scan batches on one
host, `input_locality`), and the decode reads them there: each byte is read from storage once
where the hosts' disks hold the archive, and again (correct, only slower) where they do not.

Merge (obspy `Stream.merge(method=1, interpolation_samples=0)`, on traces already on the grid,
worked out on the grid's indices by `trace_merge`; `waveform_attrs.MERGE_RULE`): a trace that
ends later than the data before it wins the overlap from its start; one that ends no later
(contained, or a second copy of the same span: the file whose path sorts first wins) only
fills gaps. Overlaps with other values are problems
(`overlap_conflicts`). Resampling (only with `rate`): `scipy.signal.resample_poly` (polyphase
FIR anti-alias filter, ends continued by point reflection: no edge or gap artefacts) of each
contiguous trace, before merging (`seisctf.formats.obspy_archive.resampling`).
Response removal (`remove_response`, `seisctf.formats.obspy_archive.response`): obspy
`Trace.remove_response` of each contiguous input trace, first of all (at its own rate, before
resampling and merging)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs.seed_ids import CODE_ARRAYS, normalised
from seisctf.cluster import (
    MAX_TASKS_PER_WAVE,
    compute,
    compute_in_waves,
    release_free_memory,
    wave_bounds,
)
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.inventory_checks import (
    located_source,
    station_inventory,
)
from seisctf.formats.obspy_archive.partition_plan import plan_rounds
from seisctf.formats.obspy_archive.response import requested_removal, resolve_removal
from seisctf.formats.obspy_archive.station_arrays import write_array, write_station_ids
from seisctf.formats.obspy_archive.station_attrs import write_station_attrs
from seisctf.formats.obspy_archive.waveform_attrs import RESAMPLING, data_attrs, store_attrs
from seisctf.formats.obspy_archive.waveform_blocks import (
    BlockRun,
    RunSettings,
    merged_block,
    station_rows,
)
from seisctf.formats.obspy_archive.waveform_parts import (
    accepted_parts,
    check_same_grid,
    inputs_digests,
    new_trace_spans,
    scan_inputs,
)
from seisctf.formats.obspy_archive.waveform_plan import (
    DEFAULT_BLOCK_SAMPLES,
    WaveformPlan,
)
from seisctf.formats.obspy_archive.waveform_runs import (
    RunLayout,
    file_digests,
    key_of,
    run_layout,
    runs_by_wave,
)
from seisctf.formats.obspy_archive.waveform_table import write_samples_stored, write_table
from seisctf.formats.shared import (
    input_cache,
    input_locality,
    input_manifest,
    record_parts,
    resumable,
)
from seisctf.formats.shared.chunk_writes import ChunkWriter, write_chunks
from seisctf.formats.shared.coverage_parts import (
    Coverage,
    Growth,
    StationRuns,
    coverage_array,
    write_base,
)
from seisctf.formats.shared.partition_tasks import on_cluster
from seisctf.formats.shared.problem_lines import (
    carried_problems,
    compute_decode_problems,
    write_ingest_problems,
)
from seisctf.formats.shared.resumable import (
    ATTR_FINGERPRINT,
    BLOCK,
    PROGRESS_VAR,
    fail_if_strict,
    fingerprint_of,
    open_store,
)
from seisctf.location import StoreLocation

DATA_VAR = "data"
COVERAGE_VAR = "coverage"
STATION = "station"
CHANNEL = "channel"
ELEVATION = "elevation"
COVERAGE_DIMS = (STATION, BLOCK)
# The station coordinates of `data` and `coverage` (CF's `coordinates` attr).
COORDINATES = {"coordinates": " ".join((cv.LATITUDE, cv.LONGITUDE, ELEVATION, *CODE_ARRAYS))}
# Codec of `data` chunks: the project's (conventions.DATA_CODEC, Blosc LZ4 with bit shuffle), a
# name here so that the ingest benchmark can compare others (benchmarks/bench_ingest.py; its
# figures in benchmarks/RESULTS.md).
DATA_CODEC: cv.BloscSettings = cv.DATA_CODEC
# Traces the runs of one wave read: a wave's runs are made and kept on the workers at once
# (`waveform_runs.runs_by_wave`: the client and the graph hold their futures, not their
# traces), so what the workers hold for them stays bounded however many files the archive has
# (docs/scaling.md; figures in benchmarks/RESULTS.md, "Scale").
MAX_TRACES_PER_WAVE = 5_000


@dataclass(frozen=True)
class IngestReport:
    """What an ingest wrote: the plan, the store's coverage (station, block: its zarr array, read
    as it is indexed: `coverage_parts.coverage_array`) and the problems found: the
    first `conventions.ATTR_PROBLEM_LINES` (those of the store's root attrs) and their number
    (`problem_count`; None: as many as `problems`); `problem_lines.read_problems` of the store
    reads them all. The plan of a one-shot ingest (or its resume) has no `station_metadata`
    (its pieces, kept on the workers, are dropped once written): the store's `station_attrs`
    group holds it (`storage.station_attrs`)."""

    plan: WaveformPlan
    coverage: Any
    problems: tuple[str, ...]
    up_to_date: bool = False
    problem_count: int | None = None

    @property
    def n_problems(self) -> int:
        """How many problems were found (`problems` holds the first of them)."""
        return len(self.problems) if self.problem_count is None else self.problem_count


def ingest_blocks(
    run: BlockRun, store: StoreLocation, inventory: Any = None, peers: Sequence[str] = ()
) -> dict[str, Any]:
    """Read, merge and write consecutive (station, time block) chunks of one station, one after
    the other, then the run's progress record (`resumable.run_record`: per block its coverage
    fraction, problems, and the [path, channel] of the files' channels none of whose samples
    are stored, `lost`), which it returns with its problems counted, not listed
    (`resumable.counted_record`: they stay in the store).
    `inventory`: the station's part of the StationXML (needed with response removal); `peers`:
    workers of other hosts keeping some of the run's files (`input_cache.from_peers`)."""
    with input_cache.from_peers(peers):
        return resumable.counted_record(_ingest_blocks(run, store, inventory))


def _ingest_blocks(run: BlockRun, store: StoreLocation, inventory: Any) -> dict[str, list]:
    """`ingest_blocks` of one run, its peers set."""
    group = open_store(store, mode="r+")
    # Whole chunks, written without zarr's selection machinery (`chunk_writes`); empty blocks
    # are not written (left to the fill value NaN).
    data = ChunkWriter(group[DATA_VAR])
    coverage, problems, lost = [], [], []
    for task in run.tasks():
        rows, found, gone = station_rows(task, store, inventory)
        values = merged_block(rows, task)
        coverage.append(resumable.coverage_of(task.own(values)))
        problems.append(found)
        lost.append([list(item) for item in gone])
        if coverage[-1] > 0:
            write_chunks([(data, (task.station_index, 0, task.block), values[np.newaxis])])
    record = resumable.run_record(coverage, problems, lost=lost)
    progress = ChunkWriter(group[PROGRESS_VAR])
    write_chunks([resumable.record_write(progress, run.number, record)])  # after the chunks
    return record


def create_store(plan: WaveformPlan, store: StoreLocation, fingerprint: str, records: int) -> None:
    """The empty store (arrays, coordinates and the progress array of `records` runs; no
    attrs, no marker)."""
    from zarr.codecs import BloscCodec

    group = open_store(store, mode="w")
    n_station, n_channel = len(plan.stations), len(plan.channels)
    group.create_array(
        DATA_VAR,
        shape=(n_station, n_channel, plan.n_time),
        chunks=(1, n_channel, plan.block_samples),
        dtype="float32",
        fill_value=np.nan,
        compressors=BloscCodec(**DATA_CODEC),
        dimension_names=(STATION, CHANNEL, cv.TIME),
    )
    write_station_ids(group, plan.stations, COORDINATES)
    for name, values, dim in (
        (CHANNEL, np.array(plan.channels, dtype=object), CHANNEL),
        (cv.LATITUDE, plan.coordinates[:, 0], STATION),
        (cv.LONGITUDE, plan.coordinates[:, 1], STATION),
        (ELEVATION, plan.coordinates[:, 2], STATION),
    ):
        write_array(group, name, values, dim)
    resumable.create_progress(group, records, fingerprint)


def _blocks(plan: WaveformPlan) -> tuple[int, int]:
    """The shape of the blocks of work: (station, time block)."""
    return len(plan.stations), plan.n_blocks


def ingest_fingerprint(
    digests: np.ndarray,
    inventory_sha256: Sequence[str],
    rate: float | None,
    block_samples: int,
    response_removed: dict[str, Any] | None = None,
) -> str:
    """SHA-256 of everything that decides the store's bytes: input hashes (`digests`: (file,
    32) uint8, sha256), inventory hashes, rate, block size and the response removal (paths
    excluded: moving an archive does not change the data; seisctf's version too: a release
    leaves stores up to date)."""
    parts = {
        "inputs": resumable.SortedDigests(digests),  # sorted hex, no string per file
        "inventories": sorted(inventory_sha256),
        "rate": rate,
        "block_samples": block_samples,
    }
    if response_removed is not None:  # absent without removal: older stores stay up to date
        parts["response_removed"] = response_removed
    if rate is not None:  # likewise: stores ingested without `rate` stay up to date
        parts["resampling"] = RESAMPLING
    return fingerprint_of(parts)


@input_cache.cache_run  # files kept between the scan and the decode, cleared at the end
def ingest_waveforms(
    sources: Sequence[str],
    store: StoreLocation,
    *,
    inventories: Sequence[str] = (),
    rate: float | None = None,
    strict: bool = False,
    block_samples: int = DEFAULT_BLOCK_SAMPLES,
    quiet: bool = False,
    append: bool = False,
    remove_response: str | None = None,
    pre_filt: str | Sequence[float] | None = "auto",
    water_level: str | float | None = 60.0,
) -> IngestReport:
    """Ingest waveform files (paths, globs, folders, fsspec URLs) and `inventories` (read with
    the storage options of `store`) into the continuous store at `store`.

    Bad inputs are reported by name in the report and the store's `ingest_problems`; with
    `strict` any of them is InvalidInput (and no store is marked complete). A complete store
    made from the same inputs (by hash), inventories, rate and block size is left as it is;
    an interrupted one is resumed: blocks already written (per `ingest_progress`) are skipped.

    `append`: add `sources` to the complete store at `store` (its inputs must be there and
    unchanged: only those whose size or modification differ are re-scanned; its grid, stations
    and channels stay): the time axis grows, and only the blocks
    the new files touch (and each station's last, partial block) are written. The result equals
    a one-shot ingest of all the files.

    `remove_response` (`VEL`, `DISP` or `ACC`; needs `inventories`): remove the instrument
    response of every input trace with obspy (see `seisctf.formats.obspy_archive.response`), with
    `pre_filt`
    (four corners in Hz, `"auto"` for the default band from the store's rate, None for none) and
    `water_level` (dB, None for none). A trace without a response is a problem, not ingested.
    """
    request = requested_removal(remove_response, pre_filt, water_level, inventories)
    url = store.url
    previous = appendable_attrs(store) if append else None
    record = record_parts.record_of(store)  # of any store there: its size, not its rows
    if previous is not None:
        block_samples = int(previous["block_samples"])
        rate = append_rate(previous, rate)
        input_manifest.appended_to(record, url)
    source, inventory_sha256 = (
        located_source([store.with_url(path) for path in inventories])
        if inventories
        else (None, [])
    )
    each = on_cluster(quiet)
    scanned = scan_inputs(sources, store, record, previous is not None, each, quiet)
    parts = scanned.parts
    release_free_memory()  # of the scan tasks' results, joined into `scans`
    accepted = accepted_parts(parts, source, request is not None, each)
    plan, placed = plan_rounds(accepted, each, rate, block_samples)
    del accepted
    source = source if request is not None else None  # only response removal needs it
    removal, pre_filt_default = (
        resolve_removal(request, plan.sampling_rate) if request else (None, False)
    )
    removed = removal.attrs(pre_filt_default) if removal else None
    known = scanned.known or []  # (an append's)
    if previous is not None:
        check_same_grid(previous, store_axes(store), known, plan, placed, each, url)
        check_same_removal(previous, removed)
    if strict and len(plan.problems):
        fail_if_strict(strict, plan.problems.lines())
    fingerprint = compute(dask.delayed(ingest_fingerprint)(
        inputs_digests(parts), inventory_sha256, rate, block_samples, removed
    ), quiet=True)[0]  # fmt: skip
    existing = resumable.up_to_date_attrs(store, fingerprint)
    if existing:
        coverage = coverage_array(store, COVERAGE_VAR)
        return IngestReport(plan, coverage, tuple(existing.get(cv.ATTR_PROBLEMS, ())), True,
                            existing.get(cv.ATTR_PROBLEM_COUNT))  # fmt: skip
    progress = resumable.unfinished_progress(store, fingerprint, counted=True)
    rewrite = (  # an append: the blocks its files touch (others keep their chunks)
        None if previous is None
        else plan.blocks_to_rewrite(new_trace_spans(plan, known, placed, each),
                                    counted_channels(store))
    )  # fmt: skip
    settings = RunSettings(plan.channels, plan.start_ns, plan.sampling_rate, rate is not None,
                           plan.block_samples, plan.n_time, removal,
                           fingerprint_of(inventory_sha256))  # fmt: skip
    layout = run_layout(plan, placed, each, rewrite)
    if progress is not None and progress.records != len(layout):
        progress = None  # not this plan's (cannot happen for the same fingerprint)
    table_made = progress is None and previous is None  # by this run: `samples_stored` to come
    if progress is None and previous is not None:
        if not previous.get(cv.ATTR_COMPLETE):
            raise resumable.pending_append(url)
        progress = prepare_append(plan, previous, len(layout), store, fingerprint)
    elif progress is None:
        create_store(plan, store, fingerprint, len(layout))
        write_table(store, input_manifest.GROUP, scanned.parts, scanned.stats, each)  # a resume's
        progress = resumable.Progress()
    units = data_attrs(plan, removed)
    if previous is None:  # now, so that the client holds no station's metadata from here on
        write_station_attrs(store, plan, removed)
        plan = dataclasses.replace(plan, station_metadata=())
    decode_runs, lost = _run_blocks(
        layout, plan, settings, source, store, fingerprint, progress, quiet
    )
    runs = StationRuns.of_table(layout.table)
    del layout
    if strict and (decode_runs or progress.attributes.get("carried_problems")):
        fail_if_strict(strict, compute_decode_problems(store, fingerprint, decode_runs))
    release_free_memory()  # of the inventory and the tasks
    # Every line, in the group beyond what the root attrs hold, by tasks: the plan's (each
    # partition's where it is), then the decode problems of the runs' records it does not
    # have; the root attrs' come back.
    found = write_ingest_problems(store, plan.problems, fingerprint, each, decode_runs)
    attrs = store_attrs(plan, found, rate is not None, removed)
    attrs[ATTR_FINGERPRINT] = fingerprint
    if previous is not None:  # an append's last: until then a resume counts the old channels
        write_station_attrs(store, plan, removed)
    # The store's root metadata is read and written by tasks from here on: with its problem
    # lines (up to 1,000) and every array's metadata it is the largest JSON of the run.
    tables = compute(dask.delayed(_table_names)(store, previous is not None), quiet=True)[0]
    if table_made:  # the table of these partitions is there: its `samples_stored` alone
        write_samples_stored(store, tables[1], scanned.parts, placed, (plan.stations, lost), each)
    else:  # a resume's (its files' `modified` may be newer), an append's (beside the old one)
        write_table(store, tables[1], scanned.parts, scanned.stats, each, placed,
                    (plan.stations, lost), scanned.not_stored)  # fmt: skip
    coverage = Coverage(store, COVERAGE_VAR, _blocks(plan), COVERAGE_DIMS, runs, COORDINATES)
    small = coverage if coverage.small else None  # written by the task finishing the store
    if small is None:
        coverage.write_by_tasks(quiet)  # a progress line: 16 chunks a task
    compute(dask.delayed(_finish_store)(store, attrs, units, tables, small), quiet=True)
    head = tuple(found[cv.ATTR_PROBLEMS])
    return IngestReport(plan, coverage_array(store, COVERAGE_VAR), head,
                        problem_count=found.get(cv.ATTR_PROBLEM_COUNT))  # fmt: skip


def _table_names(store: StoreLocation, append: bool) -> tuple[str, str]:
    """The inputs table group the store uses and the one this run writes: an append's goes
    beside the old one, named with the completion marker (one write): killed before, it
    resumes with the old inputs as the old ones."""
    group = open_store(store)
    old_table = input_manifest.table_name(group)
    return old_table, input_manifest.beside(group) if append else old_table


def _finish_store(
    store: StoreLocation,
    attrs: dict[str, Any],
    units: dict[str, Any],
    tables: tuple[str, str],
    coverage: Coverage | None,
) -> None:
    """A small `coverage` (a larger one is written by tasks before), the data's `units`, the root
    `attrs` and the marker (`resumable.finish`), then the table no longer in use dropped
    (`tables`: old, this run's); after the inputs table is written."""
    if coverage is not None:
        coverage.write_here()
    old_table, table = tables
    group = open_store(store, mode="r+")
    group[DATA_VAR].attrs.update(units)
    attrs = dict(attrs)
    if table != input_manifest.GROUP or input_manifest.ATTR_TABLE in group.attrs:
        attrs[input_manifest.ATTR_TABLE] = table
    resumable.finish(store, attrs)
    input_manifest.drop_table(store, old_table)


def counted_channels(store: StoreLocation) -> dict[str, list[str]] | None:
    """{station: the channel codes its stored coverage counts} of the store at `store` (its
    `station_channels`), or None for a store ingested before them (every channel)."""
    held = storage.station_attrs(open_store(store), ("station_channels",))
    return held.get("station_channels")


def store_axes(store: StoreLocation) -> tuple[list[str], list[str]]:
    """The stations (ids of older stores, `NET.STA.` for an empty location code, normalised by
    `seed_ids.normalised`) and channels of the store at `store`."""
    group = open_store(store)
    return [normalised(str(s)) for s in group[STATION][:]], [str(c) for c in group[CHANNEL][:]]


def _run_blocks(
    layout: RunLayout,
    plan: WaveformPlan,
    settings: RunSettings,
    source: Any,
    store: StoreLocation,
    fingerprint: str,
    progress: resumable.Progress,
    quiet: bool,
) -> tuple[list[int], set[tuple]]:
    """Ingest the runs (`waveform_runs.run_layout`) `progress` has no record of (`source`: the
    inventories, with response removal), one Dask task per run of a station's consecutive
    blocks (a worker decodes each file of the run once; keys in station-major order), each
    task made when its wave is: the numbers of the finished runs with decode problems (the
    lines stay in the runs' records in the store: `problem_lines.decode_problems` reads those
    runs' alone), and ((station index, block), path, channel) of the files' channels of which
    no sample is stored (`overlap_conflicts`). The coverage stays in the records too
    (`coverage_parts.write_coverage` reads it there)."""
    table = layout.table
    token = dask.base.tokenize(store.url, fingerprint)
    pending = [number for number in range(len(table)) if number not in progress.done]
    costs = layout.traces()[pending].tolist()
    waves = wave_bounds(len(pending), MAX_TASKS_PER_WAVE, costs, MAX_TRACES_PER_WAVE)
    run_at = runs_by_wave(layout, plan, settings, pending, waves)
    # One graph key per station, sent once to each worker using it. Runs come station by
    # station, so only the current station's is held (the key is the station's: made again, it
    # is the same task), not one a station for the whole ingest.
    current: dict[str, Any] = {}
    inventories = source  # on the workers (`located_source`), parsed there

    def task(index: int, peers: tuple[str, ...]) -> Any:
        number = pending[index]
        station = plan.stations[int(table.station[number])]
        if inventories is not None and station not in current:
            current.clear()
            current[station] = dask.delayed(station_inventory)(
                inventories, station, dask_key_name=f"inventory-{token}-{station}"
            )
        return dask.delayed(ingest_blocks)(
            run_at(index), store, current.get(station), peers,
            dask_key_name=f"ingest_block-{token}-{key_of(table, number)}",
        )  # fmt: skip

    collected = resumable.Collected(progress, table.blocks_of)
    compute_in_waves(  # waves of bounded graphs (10^5 files: several)
        input_locality.near_partitions(  # each run on the host keeping its files (several hosts)
            task,
            lambda index: layout.parts_of(pending[index]),
            lambda: compute(*[dask.delayed(file_digests)(p) for p in layout.placed], quiet=True),
        ),
        len(pending),
        label="ingest waveforms",
        quiet=quiet,
        costs=costs,
        wave_cost=MAX_TRACES_PER_WAVE,
        fold=collected.fold(pending),
    )
    return sorted(collected.runs_with_problems), collected.lost


def appendable_attrs(store: StoreLocation) -> dict[str, Any]:
    """The attrs of the store to append to: complete, or an interrupted append (resumable)."""
    return resumable.appendable_attrs(store, "start_time_ns")[1]


def append_rate(previous: dict[str, Any], rate: float | None) -> float | None:
    """The `rate` the store was ingested with (None: no resampling); `rate` must agree."""
    used = float(previous[cv.ATTR_SAMPLING_RATE]) if previous.get("resampling") else None
    if rate is not None and rate != used:
        raise InvalidInput(
            "rate", f"the store was ingested with {{rate}} {used}, not {rate}", parameters=["rate"]
        )
    return used


def check_same_removal(previous: dict[str, Any], removed: dict[str, Any] | None) -> None:
    """An append removes the response as the store's ingest did (or not at all, as it)."""
    used = previous.get("response_removed")
    if used != removed:
        said = "without {remove_response}" if used is None else f"with response removal {used}"
        raise InvalidInput(
            "remove_response",
            f"the store was ingested {said}; append with the same options (and {{inventory}})",
            parameters=("remove_response", "inventory"),
        )


def growth_of(plan: WaveformPlan, old_time: int) -> Growth | None:
    """How an append's old coverage grows (`coverage_parts.Growth`): each station's old last
    block, partial at `old_time` samples, over its grown length in `plan` (a block no appended
    file touches keeps its chunk and so its valid samples; a block they touch is rewritten and
    its record replaces this value); None when the old last block was whole."""
    first = old_time - old_time % plan.block_samples
    if first == old_time:
        return None
    own = plan.station_channels()
    rows = np.array([len(own[station]) or len(plan.channels) for station in plan.stations],
                    dtype=np.int64)  # fmt: skip
    new_length = min(plan.block_samples, plan.n_time - first)
    return Growth(first // plan.block_samples, old_time - first, new_length, rows)


def prepare_append(
    plan: WaveformPlan,
    previous: dict[str, Any],
    records: int,
    store: StoreLocation,
    fingerprint: str,
) -> resumable.Progress:
    """Turn the complete store into an unfinished one of the grown plan, with progress of
    `records` runs: completion marker off, the old coverage kept (`BASE_VAR`, by tasks: grown
    with zeros, its last blocks over their grown length), `data` resized. The blocks not
    rewritten keep their chunks and coverage."""
    group = resumable.reopen_for_append(store)
    growth = growth_of(plan, group[DATA_VAR].shape[-1])
    write_base(store, COVERAGE_VAR, _blocks(plan), growth)
    group[DATA_VAR].resize((len(plan.stations), len(plan.channels), plan.n_time))
    write_station_ids(group, plan.stations, COORDINATES)
    # Decode problems of the kept blocks: the old ones that the new plan does not repeat.
    carried = carried_problems(store, plan.problems)
    attributes = {"carried_problems": carried}
    # The progress array last (an append killed before it is not resumable: re-ingest).
    resumable.create_progress(group, records, fingerprint, attributes)
    return resumable.Progress(records=records, attributes=attributes)
