"""The waveform ingest's work on the partitions of its scan, as tasks where the partitions are
kept (`partition_tasks`): the scan itself, round 1 of the plan (the inventory's findings), an
append's checks of the new traces, the inputs' fingerprint and the inputs table. The client
holds each partition's summary, never a file's scan (`waveform_runs` does the same for the
block runs).

A fresh ingest's partitions are its scan batches (`resumable.scan_tasks`), kept on the workers
that scanned them. One that takes scans from a store's record (a resume, an append) joins the
record with its listing range by range on the workers (`record_parts`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from seisctf import conventions as cv
from seisctf.cluster import kept, shared
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.inventory_checks import InventorySource, findings
from seisctf.formats.obspy_archive.partition_plan import Accepted, accept
from seisctf.formats.obspy_archive.placed_traces import PlacedTraces, trace_blocks
from seisctf.formats.obspy_archive.scan_table import ScanTable, scan_files
from seisctf.formats.obspy_archive.waveform_plan import WaveformPlan
from seisctf.formats.shared import (
    input_cache,
    input_locality,
    input_manifest,
    listing_parts,
    record_parts,
    resumable,
)
from seisctf.formats.shared.input_listing import expand_sources
from seisctf.formats.shared.partition_tasks import Each
from seisctf.formats.shared.record_parts import Record
from seisctf.location import StoreLocation


def joined(tables: Sequence[ScanTable], paths: Sequence[str]) -> ScanTable:
    """The scan tasks' tables as one (`ScanTable.joined`)."""
    return ScanTable.joined(tables, paths)


@dataclass(frozen=True)
class Scanned:
    """An ingest's scan in partitions (`ScanTable`s, kept), the stats (`InputStats`) of the
    same partitions or one of all files, and for an append, per partition, the store's recorded
    paths (`known`) and those it holds no sample of (`not_stored`): sets, kept."""

    parts: list[Any]
    stats: list[Any]
    known: list[Any] | None = None
    not_stored: list[Any] | None = None


def scan_inputs(
    sources: Sequence[str],
    store: StoreLocation,
    record: Record | None,
    append: bool,
    each: Each,
    quiet: bool,
) -> Scanned:
    """The scan of the files below `sources` (read with the storage options of `store`) in
    partitions of consecutive files, kept on the workers: listed there too where the sources
    are folders (`listing_parts`), else listed here. With the `record` of the store at `store`
    (a resume, or an `append`, which adds the recorded files), joined with it range by range
    on the workers (`record_parts`): the files as recorded are not scanned again."""
    storage_options = store.storage_options
    scan = input_cache.keeping(scan_files)  # each file read from storage once
    roots = listing_parts.roots_of(sources, storage_options)
    if roots is not None:
        listing = listing_parts.listed(sources, roots, storage_options, quiet)
        batches = listing.batches
        if record is None:
            parts = listing_parts.scan_tasks(scan, listing, storage_options, "scan_files",
                                             "scan", quiet)  # fmt: skip
            return Scanned(parts, batches)
    else:
        paths = expand_sources(sources, storage_options)
        stats = input_manifest.file_stats(paths, storage_options)  # one listing per folder
        if record is None:
            tasks = resumable.scan_tasks(scan, paths, storage_options,
                                         input_locality.in_path_order)  # fmt: skip
            return Scanned(kept(tasks, "scan", quiet), [shared(stats)])
        batches = [shared(stats)]
    found = record_parts.joined_scan(record, store, batches, scan, append, each, quiet)
    if not append:
        return Scanned(found.parts, found.stats)
    records = found.part_records()  # (an append's)
    known = each(_known, records, keep=True)
    return Scanned(found.parts, found.stats, known, each(_not_stored, records, keep=True))


def _known(record: input_manifest.RecordedInputs) -> set[str]:
    return set(record.scans.paths)


def _not_stored(record: input_manifest.RecordedInputs) -> set[str]:
    return record.not_stored()


def accepted_parts(parts: list[Any], source: Any, require_response: bool, each: Each) -> list[Any]:
    """Round 1 of every partition, kept; `source`: the inventories where the workers have
    them (`inventory_checks.located_source`), parsed there."""
    sent = [source] * len(parts)
    label = "check the inventory" if source is not None else ""
    return each(functools.partial(_accepted, require_response), sent, parts, keep=True,
                label=label)  # fmt: skip


def _accepted(require_response: bool, source: InventorySource | None, scans: ScanTable) -> Accepted:
    """Round 1 of a partition (`partition_plan.accept`) with the inventories' findings."""
    found = findings(scans, source, require_response) if source is not None else None
    return accept(scans, found)


# --- an append's checks of its new traces ---------------------------------------------------


def new_trace_spans(
    plan: WaveformPlan, known: list[Any], placed: list[Any], each: Each
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per partition, (station index, first block, last block) of each trace of the files not
    among its `known` (a set of the store's paths, kept)."""
    grid = (plan.stations, plan.n_time, plan.block_samples)
    return each(functools.partial(_new_spans, grid), known, placed)


def _new_spans(grid: tuple, known: set[str], placed: PlacedTraces) -> tuple:
    return trace_blocks(placed.of_files_not_in(known), *grid)


def _new_headers(
    store: tuple[Sequence[str], Sequence[str]], known: set[str], placed: PlacedTraces
) -> tuple[tuple[int, str] | None, str | None, tuple[str, str, str] | None]:
    """Of one partition's traces of new files: the earliest (start, path), the first path, and
    the first (path, kind, name) of a station or channel the store (`store`: its stations and
    channels) does not have."""
    new = [trace.header for trace in placed.of_files_not_in(known)]
    earliest = min(new, key=lambda header: header.start_ns) if new else None
    stations, channels = set(store[0]), set(store[1])
    outside = next(
        (
            (header.path, kind, name)
            for header in new
            for kind, name, names in (
                ("station", header.station, stations),
                ("channel", header.channel, channels),
            )
            if name not in names
        ),
        None,
    )
    return (
        (earliest.start_ns, earliest.path) if earliest else None,
        new[0].path if new else None,
        outside,
    )


def check_same_grid(
    previous: dict[str, Any],
    store: tuple[list[str], list[str]],
    known: list[Any],
    plan: WaveformPlan,
    placed: list[Any],
    each: Each,
    url: str,
) -> None:
    """Files appended to the store of attrs `previous`, stations and channels `store` (ids of
    older stores normalised) and inputs `known` (per partition) keep its start, rate, stations
    and channels."""
    found = each(functools.partial(_new_headers, store), known, placed)
    starts = [start for start, _, _ in found if start is not None]
    firsts = [first for _, first, _ in found if first is not None]
    if plan.start_ns != int(previous["start_time_ns"]):
        first = min(starts, key=lambda pair: pair[0])[1] if starts else url
        raise InvalidInput(
            first,
            f"starts before the store {url}; ingest without {{append}}",
            parameters=["append"],
        )
    if plan.sampling_rate != float(previous[cv.ATTR_SAMPLING_RATE]):
        raise InvalidInput(firsts[0] if firsts else url, f"sampling rate differs from {url}")
    outside = next((item for _, _, item in found if item is not None), None)
    if outside is not None:
        path, kind, name = outside
        raise InvalidInput(
            path, f"{kind} {name} is not in {url}; ingest without {{append}}", parameters=["append"]
        )


# --- the inputs' fingerprint and table ------------------------------------------------------


def all_digests(*parts: ScanTable) -> np.ndarray:
    """(file, 32) uint8: the sha256 of every file of the partitions, in path order."""
    return np.concatenate([part.digests for part in parts]).reshape(-1, 32)


def inputs_digests(parts: list[Any]) -> Any:
    """A task of `all_digests` (a fingerprint's inputs, on a worker)."""
    return dask.delayed(all_digests)(*parts)
