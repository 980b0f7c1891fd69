"""The inputs of a DAS store as a table beside its data, not in its attrs, and how a run takes
from it the header scans of files that have not changed.

The table has `input_manifest`'s layout (zarr v3 arrays of one dimension, chunks of
`input_manifest.ROWS_PER_CHUNK` rows, the group's attr `files` written last: a table without it
is unfinished; group `inputs`, or the one the root attr `inputs_table` names after an append):

- per file (`file`, in path order): `path`, `size` (int64, bytes), `modified` (str: mtime in ns
  or ETag, `input_manifest.file_stats`; "" unknown), `sha256` (hex), `samples_stored` (bool,
  true: `input_manifest.recorded_inputs` reads the table as it reads a waveform store's);
- per patch DASCore's scan found (`patch`, file by file, in the scan's order): `patch_file`
  (int64 index of its file), its header (`patch_` and each `DasPatch` field but the path:
  `index`, `file_format`, `file_version`, `start_ns`, `step_ns`, `n_time`, `distance_start_m`,
  `distance_step_m`, `n_distance`, `quantity`, `units`, `gauge_length_m` (NaN unknown),
  `data_type`, `instrument_id`), and where the store holds it: `patch_first_index` (int64, the
  grid sample of its first sample; -1: not ingested) and `patch_time_offset_s` (float64, its
  start minus that grid sample, s; NaN: not ingested);
- the scan's problems (`problem`, in file order) with `problem_file` (int64).

A run takes a file's scan from the table when its path, size and `modified` are as recorded
and scans only the others: `DAS` is the table to `record_parts`, which joins it with the run's
listing range by range on the workers. Stores written before the table list path, size and
sha256 in the root attr `inputs` and their ingested patches in `segments`: `read_recorded`
reads those too (`has_scans` false: every file is scanned again), and an append onto such a
store writes the table and removes those attrs and `time_offsets_s` (`forget_attrs`).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.formats.das.das_plan import DasFileScan, DasPatch, PlacedPatch
from seisctf.formats.shared import input_manifest
from seisctf.formats.shared.input_manifest import ATTR_FILES, TEXT, InputStats, table_name
from seisctf.formats.shared.resumable import changed_input, open_store
from seisctf.location import StoreLocation

FILE, PATCH, PROBLEM = "file", "patch", "problem"
# The root attrs of stores written before the table: inputs, ingested patches, offsets per file.
OLD_ATTRS = ("inputs", "segments", "time_offsets_s")
NOT_INGESTED = -1
# The header columns: each DasPatch field but the path, with its numpy type.
_KINDS = {int: np.int64, float: np.float64, str: TEXT}
HEADER = {
    field.name: _KINDS[typing.get_type_hints(DasPatch)[field.name]]
    for field in fields(DasPatch)
    if field.name != "path"
}


@dataclass(frozen=True)
class RecordedDas:
    """A DAS store's record of its inputs: each file's scan (`scans`, in path order) and
    `modified`, and the patches the store holds (`placed`). A store that listed its inputs in
    its attrs gives hashes and ingested patches alone (`has_scans` false, `modified` "")."""

    scans: tuple[DasFileScan, ...]
    modified: tuple[str, ...]
    placed: tuple[PlacedPatch, ...]
    has_scans: bool = True

    def paths(self) -> list[str]:
        return [scan.path for scan in self.scans]

    def served(self, stats: InputStats) -> np.ndarray:
        """(file,) bool: whether each recorded file is in `stats` with the size and `modified`
        (known) recorded (none of a record without scans)."""
        if not self.has_scans:
            return np.zeros(len(self.scans), dtype=bool)
        now = stats.of()
        return np.array(
            [
                bool(modified) and now.get(scan.path) == (scan.entry["size"], modified)
                for scan, modified in zip(self.scans, self.modified, strict=True)
            ],
            dtype=bool,
        )


def modified_of(scans: Sequence[DasFileScan], stats: InputStats) -> list[str]:
    """The `modified` of each scanned file in `stats` ("" if it is not there)."""
    now = stats.of()
    return [now.get(scan.path, (0, ""))[1] for scan in scans]


# --- writing ----------------------------------------------------------------------------------


def table_columns(
    scans: Sequence[DasFileScan], modified: Sequence[str], placed: Sequence[PlacedPatch]
) -> dict[str, tuple[str, Callable[[], np.ndarray]]]:
    """{array name: (dimension, maker of its values)} of the table (module doc)."""
    where = {(p.patch.path, p.patch.index): p for p in placed}
    patches = [(number, patch) for number, scan in enumerate(scans) for patch in scan.patches]
    problems = [(number, text) for number, scan in enumerate(scans) for text in scan.problems]

    def header(name: str, kind: Any) -> Callable[[], np.ndarray]:
        return lambda: np.array([getattr(patch, name) for _, patch in patches], dtype=kind)

    def placement(name: str, missing: float, kind: Any) -> Callable[[], np.ndarray]:
        return lambda: np.array(
            [getattr(where.get((p.path, p.index)), name, missing) for _, p in patches], kind
        )

    return {
        "path": (FILE, lambda: np.array([scan.path for scan in scans], dtype=TEXT)),
        "size": (FILE, lambda: np.array([s.entry["size"] for s in scans], dtype=np.int64)),
        "modified": (FILE, lambda: np.array(list(modified), dtype=TEXT)),
        "sha256": (FILE, lambda: np.array([s.entry["sha256"] for s in scans], dtype=TEXT)),
        "samples_stored": (FILE, lambda: np.ones(len(scans), dtype=bool)),
        "patch_file": (PATCH, lambda: np.array([n for n, _ in patches], dtype=np.int64)),
        **{f"patch_{name}": (PATCH, header(name, kind)) for name, kind in HEADER.items()},
        "patch_first_index": (PATCH, placement("first_index", NOT_INGESTED, np.int64)),
        "patch_time_offset_s": (PATCH, placement("offset_s", math.nan, np.float64)),
        "problem": (PROBLEM, lambda: np.array([text for _, text in problems], dtype=TEXT)),
        "problem_file": (PROBLEM, lambda: np.array([n for n, _ in problems], dtype=np.int64)),
    }


def forget_attrs(store: StoreLocation) -> None:
    """Remove the per-file attrs of an older store (OLD_ATTRS: its table now holds them) and
    consolidate its metadata again; nothing if it has none."""
    import zarr

    group = open_store(store, mode="r+")
    old = [name for name in OLD_ATTRS if name in group.attrs]
    for name in old:
        del group.attrs[name]
    if old:
        zarr.consolidate_metadata(group.store)


# --- reading ----------------------------------------------------------------------------------


def read_recorded(store: StoreLocation) -> RecordedDas | None:
    """The record of the inputs of the DAS store at `store` (module doc), or None: no store
    there, none recorded (or its table unfinished), or another kind of store's."""
    try:
        group = open_store(store)
    except InvalidInput:
        return None
    return recorded_in(group)


def recorded_in(group: Any) -> RecordedDas | None:
    """The record of the inputs of the zarr group `group` (`read_recorded`)."""
    import zarr

    name = table_name(group)
    table = group.get(name) if name in group else None
    if isinstance(table, zarr.Group) and ATTR_FILES in table.attrs:
        return _from_table(table) if "patch_start_ns" in table else None
    return _from_attrs(group.attrs.get("inputs"), group.attrs.get("segments"))


def _from_table(table: Any) -> RecordedDas:
    return from_columns({name: np.asarray(array[:]) for name, array in table.arrays()})


def from_columns(values: dict[str, np.ndarray]) -> RecordedDas:
    """The record of a table's columns (whole, or a range of its files with their patches and
    problems, file indices from 0)."""
    column = {name: v.tolist() for name, v in values.items()}
    paths = column["path"]
    patches: list[list[DasPatch]] = [[] for _ in paths]
    placed = []
    rows = zip(*(column[f"patch_{name}"] for name in HEADER), strict=True)
    for file, first, offset, row in zip(
        column["patch_file"],
        column["patch_first_index"],
        column["patch_time_offset_s"],
        rows,
        strict=True,
    ):
        patch = DasPatch(paths[file], *row)
        patches[file].append(patch)
        if first != NOT_INGESTED:
            placed.append(PlacedPatch(patch, first, offset))
    problems: list[list[str]] = [[] for _ in paths]
    for file, text in zip(column["problem_file"], column["problem"], strict=True):
        problems[file].append(text)
    scans = tuple(
        DasFileScan(path, {"path": path, "size": size, "sha256": sha256}, tuple(found), tuple(bad))
        for path, size, sha256, found, bad in zip(
            paths, column["size"], column["sha256"], patches, problems, strict=True
        )
    )
    return RecordedDas(scans, tuple(column["modified"]), tuple(placed))


def _from_attrs(entries: Any, segments: Any) -> RecordedDas | None:
    """The record of an older store's attrs `inputs` (path, size, sha256 per file) and
    `segments` (its ingested patches), or None if there are no such attrs."""
    if not isinstance(entries, list) or not isinstance(segments, list):
        return None
    placed = [
        PlacedPatch(DasPatch.from_json(s), int(s["first_index"]), float(s["time_offset_s"]))
        for s in segments
    ]
    patches: dict[str, list[DasPatch]] = {}
    for found in placed:
        patches.setdefault(found.patch.path, []).append(found.patch)
    scans = tuple(
        DasFileScan(e["path"], dict(e), tuple(patches.get(e["path"], ())))
        for e in sorted(entries, key=lambda entry: entry["path"])
    )
    return RecordedDas(scans, ("",) * len(scans), tuple(placed), has_scans=False)


# --- the record to `record_parts` -------------------------------------------------------------


class _DasRecord:
    """A DAS store's record (`RecordedDas`) as `record_parts` joins it: a range's partitions
    are lists of `DasFileScan` in path order."""

    scan_label = "scan DAS files"

    def is_table(self, table: Any) -> bool:
        return "patch_start_ns" in table

    def legacy(self, group: Any) -> RecordedDas | None:
        return _from_attrs(group.attrs.get("inputs"), group.attrs.get("segments"))

    def file_columns(self) -> dict[str, str]:
        return {PATCH: "patch_file", PROBLEM: "problem_file"}

    def from_columns(self, values: dict[str, np.ndarray]) -> RecordedDas:
        return from_columns(values)

    def paths(self, record: RecordedDas) -> list[str]:
        return record.paths()

    def served(self, record: RecordedDas, stats: InputStats) -> np.ndarray:
        return record.served(stats)

    def lost(self, record: RecordedDas, served: np.ndarray) -> frozenset[str]:
        return frozenset()  # a file's scan stands alone

    def withdrawn(
        self, record: RecordedDas, served: np.ndarray, lost: frozenset[str]
    ) -> np.ndarray:
        return np.flatnonzero(served)

    def check_present(self, record: RecordedDas, stats: InputStats, url: str) -> None:
        input_manifest.check_present(record.paths(), stats, url)

    def merged(
        self, record: RecordedDas, stats: InputStats, taken: np.ndarray,
        fresh: Sequence[list[DasFileScan]], url: str, append: bool,
    ) -> list[DasFileScan]:  # fmt: skip
        """The range's scans in path order: the recorded ones `taken`, `fresh` the others';
        with `append`, each recorded file scanned again must hash as recorded."""
        found = {record.scans[i].path: record.scans[i] for i in taken.tolist()}
        rescanned = [scan for scans in fresh for scan in scans]
        if append:
            hashes = {scan.path: scan.entry["sha256"] for scan in record.scans}
            for scan in rescanned:
                before = hashes.get(scan.path)
                if before is not None and scan.entry["sha256"] != before:
                    raise changed_input(scan.path, url, before, scan.entry["sha256"])
        found.update((scan.path, scan) for scan in rescanned)
        return [found[path] for path in stats.paths]

    def rows(self, scans: list[DasFileScan], first: int, stop: int) -> list[DasFileScan]:
        return scans[first:stop]

    def files(self, record: RecordedDas, start: int, stop: int) -> RecordedDas:
        scans = record.scans[start:stop]
        paths = {scan.path for scan in scans}
        placed = tuple(p for p in record.placed if p.patch.path in paths)
        return RecordedDas(scans, record.modified[start:stop], placed, record.has_scans)


DAS = _DasRecord()
