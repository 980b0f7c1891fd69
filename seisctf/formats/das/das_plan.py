"""The plan of a DAS ingest: what DASCore's header scan says each file holds (`DasFileScan`,
made by `das_scan`), and the store's grid. The plan (`das_parts.plan_parts`, made partition by
partition of the scan)

- picks the store's axis: the (time step, distance axis, quantity, units, gauge length) that most
  patches share (ties: the earliest patch's), or the store's own when appending; a patch that
  differs (another step, beyond half a sample of drift over its length; other channels; another
  quantity, unit or gauge length) is a problem, named, and not ingested;
- lays the time grid: anchored at the earliest accepted patch's first sample, period = the
  axis's time step in integer nanoseconds (DASCore's), so grid arithmetic is exact; every patch
  starts at its nearest grid sample (the offset, less than half a sample, is recorded, never
  interpolated away) and its samples follow contiguously;
- orders patches for painting: by grid start, then path, then patch: in an overlap the patch that
  starts later wins (ties: the later path), and lists gaps and overlaps between patches.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from seisctf import conventions as cv
from seisctf.formats.shared.block_grid import BlockGrid
from seisctf.formats.shared.problem_parts import ProblemLines

NS_PER_S = 1_000_000_000
CHANNEL_GROUP = 1024  # channels per chunk (all of them when fewer)
# Distances of two patches' channels taken as equal (m).
DISTANCE_ATOL_M = 1e-6


# DasPatch's fields of text that most patches share (interned: one string for all of them).
SHARED_TEXT = ("file_format", "file_version", "quantity", "units", "data_type", "instrument_id")


@dataclass(frozen=True, slots=True)  # slots, shared text: the client holds one a patch
class DasPatch:
    """One patch of one file as DASCore's scan describes it. Times in ns since 1970; distance
    in m; `quantity` is DASCore's `data_type` if it names a store quantity, else "raw"."""

    path: str
    index: int  # position in DASCore's scan of the file
    file_format: str
    file_version: str
    start_ns: int
    step_ns: int
    n_time: int
    distance_start_m: float
    distance_step_m: float
    n_distance: int
    quantity: str
    units: str
    gauge_length_m: float
    data_type: str = ""  # DASCore's, as the file says it
    instrument_id: str = ""

    def __post_init__(self) -> None:
        for name in SHARED_TEXT:
            object.__setattr__(self, name, sys.intern(getattr(self, name)))

    def __reduce__(self) -> tuple[type, tuple]:
        """Unpickled through `__init__` (its text interned again where it arrives)."""
        return type(self), tuple(getattr(self, field.name) for field in fields(self))

    @property
    def end_ns(self) -> int:
        return self.start_ns + (self.n_time - 1) * self.step_ns

    def to_json(self) -> dict[str, Any]:
        found = asdict(self)
        found["gauge_length_m"] = None if math.isnan(self.gauge_length_m) else self.gauge_length_m
        return found

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> DasPatch:
        known = {name: entry[name] for name in cls.__dataclass_fields__ if name in entry}
        gauge = known.get("gauge_length_m")
        known["gauge_length_m"] = math.nan if gauge is None else float(gauge)
        return cls(**known)


@dataclass(frozen=True, slots=True)
class DasFileScan:
    """One file: its manifest entry (path, size, sha256), patches and problems (text)."""

    path: str
    entry: dict[str, Any]
    patches: tuple[DasPatch, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class DasAxis:
    """What every ingested patch shares: time step (ns), distance axis (m), quantity, units,
    gauge length (m, NaN if unknown)."""

    step_ns: int
    distance_start_m: float
    distance_step_m: float
    n_distance: int
    quantity: str
    units: str
    gauge_length_m: float

    @classmethod
    def of(cls, patch: DasPatch) -> DasAxis:
        return cls(
            patch.step_ns,
            patch.distance_start_m,
            patch.distance_step_m,
            patch.n_distance,
            patch.quantity,
            patch.units,
            patch.gauge_length_m,
        )

    def key(self) -> tuple:
        """Hashable, rounded: patches with equal keys share the axis."""
        gauge = None if math.isnan(self.gauge_length_m) else round(self.gauge_length_m, 6)
        return (
            self.step_ns,
            round(self.distance_start_m, 6),
            round(self.distance_step_m, 9),
            self.n_distance,
            self.quantity,
            self.units,
            gauge,
        )

    @property
    def sampling_rate(self) -> float:
        return rate_of_step(self.step_ns)

    def mismatch(self, patch: DasPatch) -> str | None:
        """Why `patch` cannot go on this axis (text), or None."""
        drift = abs((patch.n_time - 1) * (patch.step_ns / self.step_ns - 1.0))
        if drift >= 0.5:
            return (
                f"time step {patch.step_ns / NS_PER_S:g} s ({rate_of_step(patch.step_ns):g} "
                f"Hz) differs from the store's {self.step_ns / NS_PER_S:g} s "
                f"({self.sampling_rate:g} Hz)"
            )
        if patch.n_distance != self.n_distance or not (
            math.isclose(patch.distance_start_m, self.distance_start_m, abs_tol=DISTANCE_ATOL_M)
            and math.isclose(patch.distance_step_m, self.distance_step_m, abs_tol=1e-9)
        ):
            return (
                f"distance axis ({patch.n_distance} channels from "
                f"{patch.distance_start_m:g} m every {patch.distance_step_m:g} m) differs "
                f"from the store's ({self.n_distance} from {self.distance_start_m:g} m "
                f"every {self.distance_step_m:g} m)"
            )
        for name, mine, theirs in (
            ("quantity", self.quantity, patch.quantity),
            ("units", self.units, patch.units),
        ):
            if mine != theirs:
                return f"{name} {theirs!r} differs from the store's {mine!r}"
        same_gauge = (math.isnan(self.gauge_length_m) and math.isnan(patch.gauge_length_m)) or (
            math.isclose(self.gauge_length_m, patch.gauge_length_m, rel_tol=1e-9)
        )
        if not same_gauge:
            return (
                f"gauge length {patch.gauge_length_m:g} m differs from the store's "
                f"{self.gauge_length_m:g} m"
            )
        return None


def rate_of_step(step_ns: int) -> float:
    """The sampling rate (Hz) of a time step: the shortest decimal whose period rounds to
    `step_ns` ns (50.0 for 20 000 000 ns, not 49.99999999…)."""
    exact = NS_PER_S / step_ns
    for digits in range(1, 18):
        rate = float(f"{exact:.{digits}g}")
        if round(NS_PER_S / rate) == step_ns:
            return rate
    return exact


@dataclass(frozen=True, slots=True)
class PlacedPatch:
    """A patch on the grid: grid index of its first sample and its start's offset from that
    grid sample (s, patch minus grid)."""

    patch: DasPatch
    first_index: int
    offset_s: float

    @property
    def stop_index(self) -> int:
        return self.first_index + self.patch.n_time


@dataclass(frozen=True)
class DasPlan(BlockGrid):
    """The store's layout and the patches that fill it, in painting order; time blocks of
    `block_samples` (`BlockGrid`)."""

    axis: DasAxis
    start_ns: int
    n_time: int
    block_samples: int
    placed: tuple[PlacedPatch, ...]
    # The scan's and the axis' problem lines: here, or kept with the partitions that found
    # them (`das_parts.plan_parts`).
    problems: tuple[str, ...] | ProblemLines

    def blocks_of(self, placed: PlacedPatch) -> range:
        return self.blocks_between(placed.first_index, placed.stop_index)

    def pieces_by_block(self) -> dict[int, list[tuple[PlacedPatch, int, int]]]:
        """{block: [(placed patch, first, stop sample of the patch in the block), …]} in
        painting order (one pass over the patches)."""
        found: dict[int, list[tuple[PlacedPatch, int, int]]] = {}
        for placed in self.placed:
            for block in self.blocks_of(placed):
                first, stop = self.block_span(block)
                k0 = max(first, placed.first_index) - placed.first_index
                k1 = min(stop, placed.stop_index) - placed.first_index
                found.setdefault(block, []).append((placed, k0, k1))
        return found

    def gaps_and_overlaps(self) -> tuple[list[dict], list[dict]]:
        """`gaps_and_overlaps` of the plan's patches."""
        return gaps_and_overlaps(span_rows(self.placed))


def span_rows(placed: Iterable[PlacedPatch]) -> Iterator[tuple[int, str, int, int]]:
    """(first grid sample, path, patch index, stop grid sample) of each patch: what gaps and
    overlaps need, in painting order where `placed` is."""
    return ((p.first_index, p.patch.path, p.patch.index, p.stop_index) for p in placed)


Reach = tuple[int, str | None]  # (grid samples covered up to, the path that covered them last)


def gaps_and_overlaps(
    rows: Iterable[tuple[int, str, int, int]], before: Reach = (0, None)
) -> tuple[list[dict], list[dict]]:
    """Grid spans between patches (`span_rows`, in painting order) without data (gaps) and
    spans covered twice (overlaps; the later-starting patch wins), in time order. `before`:
    the `reach` of the rows before these (none: (0, None))."""
    gaps, overlaps = [], []
    covered, last = before
    for first_index, path, _, stop_index in rows:
        if last is not None and first_index > covered:
            gaps.append(
                {
                    "first_sample": covered,
                    "samples": first_index - covered,
                    "after": last,
                    "before": path,
                }
            )
        elif last is not None and first_index < covered:
            overlaps.append(
                {
                    "first_sample": first_index,
                    "samples": min(covered, stop_index) - first_index,
                    "earlier": last,
                    "later": path,
                    "kept": path,
                }
            )
        if stop_index >= covered:
            covered, last = stop_index, path
    return gaps, overlaps


def reach(rows: Sequence[tuple[int, str, int, int]]) -> Reach | None:
    """What `gaps_and_overlaps` carries past `rows` (in painting order) when it reaches further
    than what came before them: the largest stop and the last of its patches' paths; None
    without rows."""
    if not len(rows):
        return None
    stop = max(row[3] for row in rows)
    return stop, next(row[1] for row in reversed(rows) if row[3] == stop)


def reaches_before(reaches: Iterable[Reach | None]) -> list[Reach]:
    """What `gaps_and_overlaps` carries into each of consecutive groups of rows, from each
    group's `reach`: as if the rows of all of them were one sequence (the later of two equal
    reaches wins, as the later patch does)."""
    before: list[Reach] = []
    carried: Reach = (0, None)
    for found in reaches:
        before.append(carried)
        if found is not None and found[0] >= carried[0]:
            carried = found
    return before


# --- the plan ---------------------------------------------------------------------------------


def chunk_rows(n_distance: int) -> int:
    """Time samples per chunk (and per ingest block): about TARGET_CHUNK_BYTES of float32 in a
    chunk of min(n_distance, CHANNEL_GROUP) channels. A function of the channel count only."""
    return max(1, cv.TARGET_CHUNK_BYTES // (4 * min(n_distance, CHANNEL_GROUP)))


def place(patch: DasPatch, start_ns: int, step_ns: int) -> PlacedPatch:
    """Put a patch on the grid: its nearest grid sample (halves up), exact in integers."""
    delta = patch.start_ns - start_ns
    first = (2 * delta + step_ns) // (2 * step_ns)
    return PlacedPatch(patch, first, (delta - first * step_ns) / NS_PER_S)


def painting_order(placed: PlacedPatch) -> tuple:
    return (placed.first_index, placed.patch.path, placed.patch.index)
