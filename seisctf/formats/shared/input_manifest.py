"""The inputs of a waveform store as a table beside its data (group `inputs`), not in its attrs,
and how a run takes from it the header scans of files that have not changed.

Group `inputs` of the store (zarr v3 arrays of one dimension each, chunks of ROWS_PER_CHUNK
rows, written a chunk at a time: a 10^5-file table is seven objects per per-file array):

- per file (`file`, in path order): `path`, `size` (int64, bytes), `modified` (str: the mtime
  in ns of a local file, the ETag, else the last-modified time, of an object; "" unknown),
  `sha256` (hex), `readable` (bool), `samples_stored` (bool: false on a file of which the store
  holds no sample);
- per trace (`trace`, file by file): `trace_file` (int64 index of its file), `trace_station`
  and `trace_channel` (int32 codes into `station_ids` and `channel_codes`), `trace_start_ns`
  (int64), `trace_sampling_rate` (float64, Hz), `trace_npts` (int64);
- the scan's problems (`problem`, in file order) with `problem_file`; the station positions file
  headers give (`position`): `position_station`, `position_file`, `position_latitude`,
  `position_longitude` (degrees), `position_elevation` (m, NaN if absent).

The group's attr `files` (the file count) is written last: a table without it is unfinished and
not used. The table is written when a store is created (so a resumed ingest finds it), and at
the ingest's finish its `samples_stored` (the run that made it rewrites that column alone; a
resumed run, the whole table). An append keeps the old table until it
finishes, so its resume still sees the old inputs as the old ones: it writes its table beside
the old one, in the group `inputs_next` (or `inputs`, whichever the store does not use), and the
root attr `inputs_table` naming it goes in with the completion marker (one write); the old group
is deleted after. A store without that attr keeps its table in `inputs`.

A run takes a file's scan from the table when its path, size and `modified` are as recorded
(`file_stats`: os.stat, or one listing per folder of objects) and scans only the others;
the joined table equals a scan of every file (`scanned`). The ETag of an object changes with
its bytes; a local file rewritten to the same size within its file system's timestamp
resolution of the recorded scan keeps its mtime, and is taken as unchanged (as make and rsync
take it).

Stores written before this table list their inputs in the attr `inputs` (path, size, sha256,
`samples_stored`): `read_recorded` and `recorded_inputs` read either; such an attr is removed
when the table is written.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.scan_table import SHA256_BYTES, TRACE_COLUMNS, ScanTable
from seisctf.formats.shared.input_listing import is_url
from seisctf.formats.shared.resumable import (
    BASE_VAR,
    PROGRESS_VAR,
    changed_input,
    emptied_folders_ignored,
    open_store,
)
from seisctf.location import StoreLocation

GROUP = "inputs"
NEXT_GROUP = "inputs_next"  # where an append writes its table while the old one is in use
ATTR_TABLE = "inputs_table"  # root attr: the group holding the table (absent: GROUP)
ATTR_FILES = "files"
OLD_ATTR = "inputs"  # where stores written before the table list their inputs
ROWS_PER_CHUNK = 2**14
MISSING = -1  # the size `file_stats` gives a file that is not there
# Objects of a folder looked up one by one (fs.info) rather than by listing the folder.
FEW_OBJECTS = 8
# Object listing fields that change with an object's bytes, the first present taken.
OBJECT_VERSION_KEYS = ("ETag", "etag", "md5Hash", "LastModified", "last_modified", "mtime")
FILE, TRACE, PROBLEM, POSITION = "file", "trace", "problem", "position"
# Text columns in memory: numpy's variable-width strings where there are (numpy >= 2: one
# buffer, no Python object per row, and zarr writes them without first converting a copy).
TEXT = np.dtypes.StringDType() if hasattr(np.dtypes, "StringDType") else np.dtype(object)


@dataclass(frozen=True, eq=False)
class InputStats:
    """Size (int64 bytes, MISSING if absent) and `modified` (str, "" unknown) of `paths`."""

    paths: tuple[str, ...]
    sizes: np.ndarray
    modified: np.ndarray

    def of(self) -> dict[str, tuple[int, str]]:
        """{path: (size, modified)}."""
        pairs = zip(self.sizes.tolist(), self.modified.tolist(), strict=True)
        return dict(zip(self.paths, pairs, strict=True))


@dataclass(frozen=True, eq=False)
class RecordedInputs:
    """A store's record of its inputs: their scan (`scans`, files in path order), per file
    `modified` (str) and `samples_stored` (bool), and the file index of each of the scan's
    problems (`problem_files`) and header positions (`position_files`). A store that listed
    its inputs in its attrs gives paths, sizes and hashes alone (`has_scans` false)."""

    scans: ScanTable
    modified: np.ndarray
    samples_stored: np.ndarray
    problem_files: np.ndarray
    position_files: np.ndarray
    has_scans: bool = True

    def not_stored(self) -> set[str]:
        """The paths of the files the store holds no sample of."""
        return {self.scans.paths[i] for i in np.flatnonzero(~self.samples_stored)}

    def files(self, start: int, stop: int) -> RecordedInputs:
        """The record of files start..stop-1 (file indices from 0)."""

        def cut(files: np.ndarray) -> np.ndarray:
            low, high = np.searchsorted(files, (start, stop))
            return files[low:high] - start

        scans = _Indexed(self.scans, self.problem_files, self.position_files).rows(start, stop)
        files, problems, positions = slice(start, stop), self.problem_files, self.position_files
        return RecordedInputs(scans, self.modified[files], self.samples_stored[files],
                              cut(problems), cut(positions), self.has_scans)  # fmt: skip


# --- listing with stats ---------------------------------------------------------------------


def file_stats(paths: Sequence[str], storage_options: dict | None = None) -> InputStats:
    """(size, modified) of each path: os.stat of a local file (mtime in ns); for fsspec URLs one
    listing of each folder holding some (not one request per object), or one request per
    object of a folder holding at most FEW_OBJECTS of them. A path not found has size
    MISSING."""
    sizes = np.full(len(paths), MISSING, dtype=np.int64)
    modified = np.full(len(paths), "", dtype=TEXT)
    folders: dict[str, list[int]] = defaultdict(list)
    for index, path in enumerate(paths):
        if is_url(path):
            folders[path.rsplit("/", 1)[0]].append(index)
            continue
        try:
            stat = os.stat(path)
        except OSError:
            continue
        sizes[index], modified[index] = stat.st_size, str(stat.st_mtime_ns)
    for folder, indices in folders.items():
        few = [paths[index] for index in indices] if len(indices) <= FEW_OBJECTS else None
        listed = _listing(StoreLocation(folder, storage_options), few)
        for index in indices:
            entry = listed.get(paths[index].split("://", 1)[-1])
            if entry is not None and entry.get("type", "file") == "file":
                sizes[index], modified[index] = int(entry["size"]), _object_version(entry)
    return InputStats(tuple(paths), sizes, modified)


def _listing(folder: StoreLocation, few: list[str] | None) -> dict[str, dict]:
    """{name without protocol: listing entry} of the objects of one folder, listed afresh, or
    of the `few` objects of it wanted (one request each, not a listing of the whole folder)."""
    fs, _ = folder.filesystem()
    fs.invalidate_cache(folder.url)  # a listing cached earlier may predate a change
    entries = []
    try:
        if few is None:
            entries = fs.ls(folder.url, detail=True)
        for url in few or ():
            try:
                entries.append(fs.info(url))
            except FileNotFoundError:
                continue
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise InvalidInput(folder.url, f"cannot list it ({error})") from None
    return {entry["name"].split("://", 1)[-1]: entry for entry in entries}


def _object_version(entry: dict[str, Any]) -> str:
    found = (entry.get(key) for key in OBJECT_VERSION_KEYS)
    return next((str(value) for value in found if value not in (None, "")), "")


# --- scans taken from the record ------------------------------------------------------------


def scanned(
    paths: Sequence[str],
    stats: InputStats,
    recorded: RecordedInputs | None,
    scan: Callable[[list[str]], ScanTable],
    taken: np.ndarray | None = None,
) -> ScanTable:
    """The scan of `paths` (sorted, unique; `stats` theirs): the recorded scan of each file
    whose size and `modified` are as recorded (or of the recorded files `taken`), `scan(others)`
    of the others, joined in path order: equal to `scan(paths)`."""
    if recorded is None:
        return scan(list(paths))
    taken = _unchanged(recorded, stats) if taken is None else taken
    where = {recorded.scans.paths[i]: (0, i) for i in taken.tolist()}
    if not where:
        return scan(list(paths))
    parts = [_Indexed(recorded.scans, recorded.problem_files, recorded.position_files)]
    others = [path for path in paths if path not in where]
    if others:
        fresh = scan(others)
        parts.append(_Indexed(fresh, problem_files(fresh), _position_files(fresh)))
        where.update((path, (1, index)) for index, path in enumerate(fresh.paths))
    found = np.array([where[path] for path in paths], dtype=np.int64).reshape(-1, 2)
    runs = _runs(found[:, 0], found[:, 1])
    return ScanTable.joined([parts[s].rows(a, b) for s, a, b in runs], list(paths))


def rows_of(table: ScanTable, start: int, stop: int) -> ScanTable:
    """The table of files start..stop-1 of `table` (their traces, problems and positions)."""
    return _Indexed(table, problem_files(table), _position_files(table)).rows(start, stop)


def _unchanged(recorded: RecordedInputs, stats: InputStats) -> np.ndarray:
    """Indices of the recorded files `scanned` takes (`served`, less `withdrawn`)."""
    same = served(recorded, stats)
    return withdrawn(recorded, same, lost_stations(recorded, same))


def served(recorded: RecordedInputs, stats: InputStats) -> np.ndarray:
    """(file,) bool: whether each recorded file is among `stats`'s paths with the size and
    `modified` recorded (none of a record without scans)."""
    if not recorded.has_scans:
        return np.zeros(len(recorded.scans.paths), dtype=bool)
    now = stats.of()
    table = recorded.scans
    return np.array(
        [
            now.get(path) == (size, modified) and modified != ""
            for path, size, modified in zip(
                table.paths, table.sizes.tolist(), recorded.modified.tolist(), strict=True
            )
        ],
        dtype=bool,
    )


def lost_stations(recorded: RecordedInputs, same: np.ndarray) -> set[str]:
    """The stations one of whose recorded header positions is at a file not `same`."""
    positions = recorded.scans.header_positions
    files = recorded.position_files.tolist()
    return {station for (station, *_), file in zip(positions, files, strict=True) if not same[file]}


def withdrawn(recorded: RecordedInputs, same: np.ndarray, lost: Collection[str]) -> np.ndarray:
    """Indices of the `same` files less every file with a trace of a `lost` station (that
    station's position may be repeated, unrecorded, in a later file: `ScanTable.header_positions`
    keeps the first file of each)."""
    table = recorded.scans
    codes = [code for code, name in enumerate(table.station_ids) if name in lost]
    if codes:
        same = same.copy()
        same[table.traces["file"][np.isin(table.traces["station"], codes)]] = False
    return np.flatnonzero(same)


@dataclass(frozen=True, eq=False)
class _Indexed:
    """A scan table with the file index of each problem and header position (nondecreasing)."""

    table: ScanTable
    problem_files: np.ndarray
    position_files: np.ndarray

    def rows(self, start: int, stop: int) -> ScanTable:
        """The table of files start..stop-1 (their traces, problems and positions)."""
        table = self.table

        def cut(files: np.ndarray) -> slice:
            low, high = np.searchsorted(files, (start, stop))
            return slice(int(low), int(high))

        traces, problems = cut(table.traces["file"]), cut(self.problem_files)
        columns = {name: column[traces] for name, column in table.traces.items()}
        columns["file"] = columns["file"] - start
        return ScanTable(
            paths=table.paths[start:stop],
            sizes=table.sizes[start:stop],
            digests=table.digests[start:stop],
            readable=table.readable[start:stop],
            traces=columns,
            station_ids=table.station_ids,
            channel_codes=table.channel_codes,
            problems=table.problems[problems],
            header_positions=table.header_positions[cut(self.position_files)],
        )


def _runs(sources: np.ndarray, indices: np.ndarray) -> list[tuple[int, int, int]]:
    """(source, first index, stop) of each run of consecutive `indices` of one source."""
    if not len(indices):
        return []
    breaks = np.flatnonzero((np.diff(sources) != 0) | (np.diff(indices) != 1)) + 1
    starts, stops = np.r_[0, breaks], np.r_[breaks, len(indices)]
    return [
        (int(sources[a]), int(indices[a]), int(indices[a]) + int(b - a))
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
    ]


def problem_files(table: ScanTable) -> np.ndarray:
    """The file index of each of the table's problems: problems are in file order and each
    begins with its file's path and ": " (`waveform_files.scan_file`); one that does not goes
    with the file of the problem before it."""
    index = {path: i for i, path in enumerate(table.paths)}
    found = np.zeros(len(table.problems), dtype=np.int64)
    file = 0
    for number, problem in enumerate(table.problems):
        cut = problem.find(": ")
        while cut >= 0:
            match = index.get(problem[:cut], -1)
            if match >= file:
                file = match
                break
            cut = problem.find(": ", cut + 1)
        found[number] = file
    return found


def _position_files(table: ScanTable) -> np.ndarray:
    index = {path: i for i, path in enumerate(table.paths)}
    return np.array([index[path] for _, path, *_ in table.header_positions], dtype=np.int64)


# --- the table in the store -----------------------------------------------------------------


def table_name(group: Any) -> str:
    """The group of the store's inputs table (root attr `inputs_table`, else `inputs`)."""
    return str(group.attrs.get(ATTR_TABLE, GROUP))


def beside(group: Any) -> str:
    """The table group an append writes (the one `table_name` does not name)."""
    return NEXT_GROUP if table_name(group) == GROUP else GROUP


def create_column(
    table: Any, name: str, dim: str, length: int, dtype: Any, rows: int = ROWS_PER_CHUNK
) -> Any:
    """An empty column of the table: `length` rows along `dim`, chunks of `rows` rows; text
    for a `dtype` of kind O, T or U."""
    return table.create_array(
        name,
        shape=(length,),
        chunks=(min(rows, max(length, 1)),),
        dtype=str if np.dtype(dtype).kind in "OTU" else dtype,
        dimension_names=(dim,),
    )


def write_column(
    table: Any, name: str, dim: str, values: np.ndarray, rows: int = ROWS_PER_CHUNK
) -> None:
    """One column of the table (1-d `values`, along `dim`), written a chunk at a time: zarr's
    encoding of text takes several times the text's size for a moment, so a column of 10^5
    paths written at once held ~75 MiB of the client's peak."""
    array = create_column(table, name, dim, len(values), values.dtype, rows)
    for start in range(0, len(values), rows):
        array[start : start + rows] = values[start : start + rows]


def _strings(values: Sequence[str] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=TEXT)


def _hex_digests(digests: np.ndarray) -> np.ndarray:
    """The hex text of each (32-byte) row of `digests`, made from one buffer (no Python
    string per row)."""
    text = np.frombuffer(digests.tobytes().hex().encode("ascii"), dtype=f"S{2 * SHA256_BYTES}")
    return text.astype(TEXT) if TEXT.kind == "T" else text.astype(str).astype(object)


def table_columns(
    scans: ScanTable, modified: np.ndarray, stored: np.ndarray
) -> dict[str, tuple[str, Callable[[], np.ndarray]]]:
    """{array name: (dimension, maker of its values)} of the table (module doc)."""
    positions = scans.header_positions

    def position(i: int) -> Callable[[], np.ndarray]:
        return lambda: np.array([p[i] for p in positions], dtype=np.float64)

    def trace_column(name: str) -> Callable[[], np.ndarray]:
        return lambda: scans.traces[name]

    return {
        "path": (FILE, lambda: _strings(scans.paths)),
        "size": (FILE, lambda: scans.sizes.astype(np.int64)),
        "modified": (FILE, lambda: _strings(modified)),
        "sha256": (FILE, lambda: _hex_digests(scans.digests)),
        "readable": (FILE, lambda: scans.readable.astype(bool)),
        "samples_stored": (FILE, lambda: np.asarray(stored, dtype=bool)),
        **{f"trace_{n}": (TRACE, trace_column(n)) for n in TRACE_COLUMNS},
        "station_ids": ("station_id", lambda: _strings(scans.station_ids)),
        "channel_codes": ("channel_code", lambda: _strings(scans.channel_codes)),
        "problem": (PROBLEM, lambda: _strings(scans.problems)),
        "problem_file": (PROBLEM, lambda: problem_files(scans)),
        "position_station": (POSITION, lambda: _strings([p[0] for p in positions])),
        "position_file": (POSITION, lambda: _position_files(scans)),
        "position_latitude": (POSITION, position(2)),
        "position_longitude": (POSITION, position(3)),
        "position_elevation": (POSITION, position(4)),
    }


def read_recorded(store: StoreLocation) -> RecordedInputs | None:
    """The record of the inputs of the store at `store` (its `inputs` table, or the attr of an
    older store), or None: no store there, or none recorded (or its table unfinished)."""
    try:
        group = open_store(store)
    except InvalidInput:
        return None
    return recorded_in(group)


def recorded_in(group: Any) -> RecordedInputs | None:
    """The record of the inputs of the zarr group `group` (`read_recorded`); None for another
    kind of store's table (a DAS store's has no trace columns)."""
    table = finished_table(group)
    if table is not None:
        return _from_table(table) if "trace_file" in table else None
    return _from_entries(group.attrs.get(OLD_ATTR))


def recorded_inputs(store_or_group: StoreLocation | Any) -> list | None:
    """[{"path", "size", "sha256"}, with `"samples_stored": false` on the files the store holds
    no sample of] of a store (its location or zarr group): its `inputs` table, or the attr
    `inputs` (stores written before the table, and event-window stores), or None."""
    if isinstance(store_or_group, StoreLocation):
        group = open_store(store_or_group)
    else:
        group = store_or_group
    table = finished_table(group)
    if table is None:
        return group.attrs.get(OLD_ATTR)
    per_file = {name: table[name][:] for name in ("path", "size", "sha256", "samples_stored")}
    return [
        {
            "path": path,
            "size": size,
            "sha256": sha256,
            **({} if stored else {"samples_stored": False}),
        }
        for path, size, sha256, stored in zip(
            *(per_file[n].tolist() for n in per_file), strict=True
        )
    ]


def drop_table(store: StoreLocation, name: str) -> None:
    """Delete the table group `name` of the finished store at `store` if it is not the one in
    use, and the attr `inputs` of a store written before the table, then consolidate the
    store's metadata again (one write of its root `zarr.json`), so that it lists neither."""
    import zarr

    group = open_store(store, mode="r+")
    old_group = name != table_name(group) and name in group
    if old_group:
        del group[name]
    if OLD_ATTR in group.attrs and table_name(group) in group:
        del group.attrs[OLD_ATTR]
    elif not old_group:
        return
    with emptied_folders_ignored(PROGRESS_VAR, BASE_VAR, name):
        zarr.consolidate_metadata(group.store)


def finished_table(group: Any) -> Any | None:
    """The group's finished inputs table (a zarr group: `table_name`), or None."""
    import zarr

    name = table_name(group)
    table = group.get(name) if name in group else None
    if not isinstance(table, zarr.Group) or ATTR_FILES not in table.attrs:
        return None
    return table


def _from_table(table: Any) -> RecordedInputs:
    return from_columns({name: np.asarray(array[:]) for name, array in table.arrays()})


def from_columns(values: dict[str, np.ndarray]) -> RecordedInputs:
    """The record of the table's columns `values` ({array name: values}; module doc), whole
    or of consecutive files (file indices from the first)."""
    text = {
        name: tuple(values[name].tolist()) for name in values if values[name].dtype.kind in "OTU"
    }
    positions = tuple(
        zip(
            text["position_station"],
            (text["path"][i] for i in values["position_file"].tolist()),
            values["position_latitude"].tolist(),
            values["position_longitude"].tolist(),
            values["position_elevation"].tolist(),
            strict=True,
        )
    )
    scans = ScanTable(
        paths=text["path"],
        sizes=values["size"].astype(np.int64),
        digests=_digests(text["sha256"]),
        readable=values["readable"].astype(bool),
        traces={name: values[f"trace_{name}"].astype(kind) for name, kind in TRACE_COLUMNS.items()},
        station_ids=text["station_ids"],
        channel_codes=text["channel_codes"],
        problems=text["problem"],
        header_positions=positions,
    )
    return RecordedInputs(
        scans,
        np.array(text["modified"], dtype=object),
        values["samples_stored"].astype(bool),
        values["problem_file"].astype(np.int64),
        values["position_file"].astype(np.int64),
    )


def _digests(hexes: Sequence[str]) -> np.ndarray:
    raw = bytes.fromhex("".join(hexes))
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, SHA256_BYTES)


def _from_entries(entries: Any) -> RecordedInputs | None:
    """The record of an older store's attr `inputs`: paths, sizes, hashes, `samples_stored`
    (None if the attr is not such a list: another kind of store's)."""
    keys = {"path", "size", "sha256"}
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and keys <= e.keys() and len(str(e["sha256"])) == 2 * SHA256_BYTES
        for e in entries
    ):
        return None
    empty = np.zeros(0, dtype=np.int64)
    scans = ScanTable(
        paths=tuple(entry["path"] for entry in entries),
        sizes=np.array([entry["size"] for entry in entries], dtype=np.int64),
        digests=_digests([entry["sha256"] for entry in entries]),
        readable=np.ones(len(entries), dtype=bool),
        traces={name: np.zeros(0, dtype=kind) for name, kind in TRACE_COLUMNS.items()},
        station_ids=(),
        channel_codes=(),
        problems=(),
    )
    stored = np.array([entry.get("samples_stored") is not False for entry in entries], bool)
    modified = np.full(len(entries), "", dtype=object)
    return RecordedInputs(scans, modified, stored, empty, empty, has_scans=False)


# --- an append's checks of the store's inputs -----------------------------------------------


def appended_to(recorded: Any, url: str) -> Any:
    """The record of the inputs of the store an append adds to (it must have one)."""
    if recorded is None:
        raise InvalidInput(
            url,
            "records no inputs (no `inputs` table); ingest without {append}",
            parameters=["append"],
        )
    return recorded


def check_present(recorded: Sequence[str], stats: InputStats, url: str) -> None:
    """Every file already in the store (`recorded`: paths) is still there (`stats` lists
    them)."""
    found = stats.of()
    for path in recorded:
        if found.get(path, (MISSING, ""))[0] == MISSING:
            raise InvalidInput(path, f"ingested into {url} but now missing; cannot append")


def check_unchanged(recorded: RecordedInputs, scans: ScanTable, url: str) -> None:
    """Every file already in the store hashes as it did (`scans` holds them all)."""
    index = {path: number for number, path in enumerate(scans.paths)}
    now = np.array([index.get(path, -1) for path in recorded.scans.paths], dtype=np.int64)
    differ = (now < 0) | (scans.digests[now] != recorded.scans.digests).any(axis=1)
    for number in np.flatnonzero(differ).tolist():
        found = scans.sha256(now[number]) if now[number] >= 0 else "?"
        raise changed_input(recorded.scans.paths[number], url, recorded.scans.sha256(number), found)
