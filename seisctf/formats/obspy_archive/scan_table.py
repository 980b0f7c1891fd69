"""The header scan of a waveform ingest as columns: one table for all files, no Python object
per file or trace.

A scan task (`scan_files`) reads, hashes (sha256) and header-parses its files and returns a
`ScanTable` of numpy columns; the client joins the tasks' tables (`ScanTable.joined`) in path
order. Per file: size (bytes), sha256 (32 raw bytes), whether it was readable; per trace: its
file's index, station and channel (codes into the table's `station_ids`, `channel_codes`), first
sample (ns), sampling rate (Hz), number of samples. Problems (text) are few and kept as they
are. At 10^5 files this is ~60 bytes a file, where per-file dataclasses and manifest dicts
took ~2.5 KB (benchmarks/RESULTS.md, "Scale"). `TraceHeader`s are made on demand, their strings
shared with the table's (`headers`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.trace_header import TraceHeader
from seisctf.formats.obspy_archive.waveform_files import FileScan, scan_file
from seisctf.formats.shared import input_cache
from seisctf.formats.shared.input_listing import read_input
from seisctf.location import StoreLocation

SHA256_BYTES = 32
# Per-trace columns and their types.
TRACE_COLUMNS = {
    "file": np.int64,
    "station": np.int32,
    "channel": np.int32,
    "start_ns": np.int64,
    "sampling_rate": np.float64,
    "npts": np.int64,
}


@dataclass(frozen=True, eq=False)  # numpy columns: compared by identity, not by `==`
class ScanTable:
    """The header scan of `paths` (module doc): per-file columns of length len(paths), per-trace
    columns (`TRACE_COLUMNS`) of one length, the codes' names, problems in file order."""

    paths: tuple[str, ...]
    sizes: np.ndarray  # (file,) int64, bytes
    digests: np.ndarray  # (file, 32) uint8, sha256
    readable: np.ndarray  # (file,) bool
    traces: dict[str, np.ndarray]
    station_ids: tuple[str, ...]
    channel_codes: tuple[str, ...]
    problems: tuple[str, ...]
    # Station positions file headers give (SAC's stla, stlo, stel): (station, path, latitude,
    # longitude (degrees), elevation (m, NaN if absent)), the first file of each position only.
    header_positions: tuple[tuple[str, str, float, float, float], ...] = ()

    @classmethod
    def of_scans(cls, scans: Sequence[FileScan], raws: Sequence[tuple[int, bytes]]) -> ScanTable:
        """The table of `scans` (one per file) and their (size, sha256 digest) `raws`."""
        stations: dict[str, int] = {}
        channels: dict[str, int] = {}
        rows = [
            (index, stations.setdefault(h.station, len(stations)),
             channels.setdefault(h.channel, len(channels)), h.start_ns, h.sampling_rate, h.npts)
            for index, scan in enumerate(scans)
            for h in scan.headers
        ]  # fmt: skip
        columns = list(zip(*rows, strict=True)) or [()] * len(TRACE_COLUMNS)
        return cls(
            paths=tuple(scan.path for scan in scans),
            sizes=np.array([size for size, _ in raws], dtype=np.int64),
            digests=np.frombuffer(b"".join(d for _, d in raws), np.uint8).reshape(-1, 32),
            readable=np.array([scan.readable for scan in scans], dtype=bool),
            traces={
                name: np.array(values, dtype=kind)
                for (name, kind), values in zip(TRACE_COLUMNS.items(), columns, strict=True)
            },
            station_ids=tuple(stations),
            channel_codes=tuple(channels),
            problems=tuple(p for scan in scans for p in scan.problems),
            header_positions=first_of_each(
                (station, scan.path, latitude, longitude, elevation)
                for scan in scans
                for station, latitude, longitude, elevation in scan.coordinates
            ),
        )

    @classmethod
    def joined(cls, tables: Sequence[ScanTable], paths: Sequence[str]) -> ScanTable:
        """One table of consecutive batches' `tables`, whose files are `paths` (the caller's
        strings, kept: the batches' own copies are dropped); codes re-numbered."""
        stations = {name: None for t in tables for name in t.station_ids}
        channels = {name: None for t in tables for name in t.channel_codes}
        station_code = {name: code for code, name in enumerate(stations)}
        channel_code = {name: code for code, name in enumerate(channels)}
        offsets = np.cumsum([0] + [len(t.paths) for t in tables])
        pieces: dict[str, list[np.ndarray]] = {name: [] for name in TRACE_COLUMNS}
        for table, offset in zip(tables, offsets, strict=False):
            recode = {
                "file": lambda f, o=offset: f + o,
                "station": lambda s, t=table: _recoded(s, t.station_ids, station_code),
                "channel": lambda c, t=table: _recoded(c, t.channel_codes, channel_code),
            }
            for name, column in table.traces.items():
                pieces[name].append(recode.get(name, lambda x: x)(column))
        if len(paths) != offsets[-1]:
            raise ValueError(f"{len(paths)} paths for tables of {offsets[-1]} files")
        return cls(
            paths=tuple(paths),
            sizes=_joined([t.sizes for t in tables], np.int64),
            digests=_joined([t.digests for t in tables], np.uint8).reshape(-1, SHA256_BYTES),
            readable=_joined([t.readable for t in tables], bool),
            traces={name: _joined(parts, TRACE_COLUMNS[name]) for name, parts in pieces.items()},
            station_ids=tuple(stations),
            channel_codes=tuple(channels),
            problems=tuple(p for t in tables for p in t.problems),
            header_positions=first_of_each(p for t in tables for p in t.header_positions),
        )

    @property
    def n_traces(self) -> int:
        return len(self.traces["file"])

    def sha256(self, index: int) -> str:
        """The hex sha256 of file `index`."""
        return self.digests[index].tobytes().hex()

    def manifest(self) -> Iterator[dict[str, Any]]:
        """{"path", "size" (bytes), "sha256" (hex)} of each file, in order (made on demand)."""
        for index, path in enumerate(self.paths):
            yield {"path": path, "size": int(self.sizes[index]), "sha256": self.sha256(index)}

    def headers(self) -> Iterator[TraceHeader]:
        """Every trace's header, file by file and in file order."""
        return self.headers_of(None)

    def headers_of(self, rows: np.ndarray | None) -> Iterator[TraceHeader]:
        """The headers of the traces at `rows` (indices of the trace columns; None: all), in
        that order, made one at a time."""
        traces = self.traces
        columns = (traces[name] if rows is None else traces[name][rows] for name in TRACE_COLUMNS)
        for file, station, channel, start_ns, rate, npts in zip(
            *(column.tolist() for column in columns), strict=True
        ):
            yield TraceHeader(
                self.paths[file],
                self.station_ids[station],
                self.channel_codes[channel],
                start_ns,
                rate,
                npts,
            )

    def positions_by_station(self) -> dict[str, list[tuple[str, float, float, float]]]:
        """{station: [(path, latitude, longitude, elevation)]} of the positions file headers
        give (`header_positions`), each at its first file, in path order."""
        return positions_by_station(self.header_positions)

    def readable_with_traces(self) -> bool:
        """Whether any file was readable and held a trace."""
        return bool(self.n_traces) and bool(self.readable[self.traces["file"]].any())


def positions_by_station(
    header_positions: Iterable[tuple[str, str, float, float, float]],
) -> dict[str, list[tuple[str, float, float, float]]]:
    """{station: [(path, latitude, longitude, elevation)]} of `header_positions` (station,
    path, latitude, longitude, elevation), in path order."""
    found: dict[str, list[tuple[str, float, float, float]]] = {}
    ordered = sorted(header_positions, key=lambda p: (p[1], p[0]))
    for station, path, latitude, longitude, elevation in ordered:
        found.setdefault(station, []).append((path, latitude, longitude, elevation))
    return found


def first_of_each(
    positions: Iterable[tuple[str, str, float, float, float]],
) -> tuple[tuple[str, str, float, float, float], ...]:
    """`positions` (station, path, latitude, longitude, elevation) in order, each station's
    position only at its first file."""
    first: dict[str, tuple] = {}
    for station, path, *position in positions:
        first.setdefault(repr((station, *position)), (station, path, *position))
    return tuple(first.values())


def _recoded(codes: np.ndarray, names: Sequence[str], joined: dict[str, int]) -> np.ndarray:
    lookup = np.array([joined[name] for name in names], dtype=np.int32)
    return lookup[codes] if len(codes) else codes


def _joined(parts: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def scan_files(
    paths: Sequence[str], storage_options: dict | None = None, cache_run: str = ""
) -> ScanTable:
    """Header scan (`waveform_files.scan_file`) and sha256 of each file (local path or fsspec
    URL), as one table (one scan task's batch). With a `cache_run`, each file that holds traces
    is kept on this host for the block tasks that decode it (`input_cache.keep`)."""
    scans, raws = [], []
    for path in paths:
        try:
            raw = read_input(StoreLocation(path, storage_options))
        except OSError as error:
            raise InvalidInput(path, f"cannot read the file ({error})") from None
        digest = hashlib.sha256(raw).digest()
        raws.append((len(raw), digest))
        scans.append(scan_file(path, raw))
        if scans[-1].headers:  # only files with traces are decoded
            input_cache.keep(cache_run, digest.hex(), raw, source=path)
    return ScanTable.of_scans(scans, raws)
