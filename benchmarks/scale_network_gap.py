"""Scale section `network-gap`: a network's files decades apart cost the client what they hold.

`bench_scale.py --only sparse` spans years for one station, whose coverage (4 bytes a station
and time block) is small. A network over decades is not: 552 stations over 25 years at 100 Hz
in 2^18-sample blocks is 1.7e8 (station, block) cells, 660 MB of coverage. Here N stations each
have two 10-minute 100 Hz one-channel files (written by obspy), the second 1 hour, 1 day or Y
years after the first, and `seisctf ingest waveforms` (a subprocess on a fresh cluster of 2
workers, `scale_sparse.measured_ingest`) ingests each set. Goal (issue 38's sparse time, for a
network): the client's peak above its imports at Y years within 1.3x of 1 day, whose files
make the same runs (a station's two files a run each; 1 hour apart they share one). The
coverage is written
by tasks from the runs' records, a chunk each (`coverage_parts`); before, the client held it
whole and the graph carried it to the task finishing the store. Checks: the stores' coverage is
1 exactly in the blocks the files fill (computed from their times) and 0 elsewhere.

    .venv/bin/python benchmarks/bench_scale.py --only network-gap   # 552 stations, 25 years
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scale_cluster
import scale_ingest
import scale_sparse
from scale_report import MiB, ScaleOptions, Section, verdict
from scale_sparse import COLUMNS, Trace, measured_ingest, ratio_verdict, write_file

CLIENT_GOAL = 1.3


@dataclass(frozen=True)
class Sizes:
    stations: int
    gaps: tuple[tuple[str, float], ...]  # (label, seconds from a station's first file's start)
    fresh_clusters: bool = True


NEAR = (("1 hour", 3600.0), ("1 day", float(scale_sparse.DAY_S)))  # the last: the same runs
FULL = Sizes(552, (*NEAR, ("25 years", 25 * scale_sparse.YEAR_S)))
QUICK = Sizes(100, (*NEAR, ("5 years", 5 * scale_sparse.YEAR_S)))
TINY = Sizes(6, (*NEAR, ("1 year", scale_sparse.YEAR_S)), fresh_clusters=False)


def network_files(folder: Path, stations: int, gap_s: float) -> tuple[list[Path], dict]:
    """Two 10-minute 100 Hz HHZ files a station (XN.S000…), `gap_s` apart, start to start; the
    second station's start 10 s after the first's, and so on. Returns the paths and
    {station id: its traces}."""
    import obspy

    first_ns = obspy.UTCDateTime(scale_sparse.GAP_START).ns
    n = int(scale_sparse.FILE_S * scale_sparse.RATE_HZ)
    paths, traces = [], {}
    for index in range(stations):
        code = f"S{index:03d}"
        starts = [first_ns + index * 10**10, first_ns + index * 10**10 + int(gap_s * 1e9)]
        traces[f"XN.{code}"] = []
        for part, start_ns in enumerate(starts):
            rng = np.random.default_rng([38, index, part])
            trace = Trace("HHZ", start_ns, rng.integers(-5000, 5000, n).astype(np.int32))
            paths.append(write_file(folder / f"{code}_{part}.mseed", ("XN", code, ""), [trace],
                                    scale_sparse.RATE_HZ))  # fmt: skip
            traces[f"XN.{code}"].append(trace)
    return paths, traces


def coverage_is_the_files(store: Path, traces: dict) -> bool:
    """Whether the store's coverage is 1 in each block a station's files fill whole, in (0, 1]
    where they fill part of it, and 0 in every other block (read a station at a time)."""
    group = scale_sparse.open_group(store)
    grid_ns, rate, block = scale_sparse.store_grid(store)
    coverage = group["coverage"]
    for row, station in enumerate(str(s) for s in group["station"][:]):
        expected = np.zeros(coverage.shape[1], np.float32)
        for trace in traces[station]:
            first = scale_sparse.sample_index(trace.start_ns, grid_ns, rate)
            expected[first // block : (first + len(trace.counts) - 1) // block + 1] = 1
        stored = coverage[row]
        if not np.array_equal(stored > 0, expected > 0):
            return False
    return True


def gap_rows(options: ScaleOptions, sizes: Sizes) -> Iterator[Section]:
    imports = scale_ingest.import_rss()
    runs, checks = [], []
    with scale_cluster.Clusters(options.workdir, sizes.fresh_clusters) as clusters:
        for label, gap_s in sizes.gaps:
            slug = label.replace(" ", "")
            paths, traces = network_files(options.data / f"network_{sizes.stations}_{slug}",
                                          sizes.stations, gap_s)  # fmt: skip
            store = options.workdir / f"network_{slug}.zarr"
            run = measured_ingest(clusters, label, paths, store, imports=imports)
            group = scale_sparse.open_group(store)
            cells = int(np.prod(group["coverage"].shape))
            runs.append((run, cells))
            checks.append(coverage_is_the_files(store, traces))
    rows = [run.row(f"{cells:,} cells ({cells * 4 / MiB:,.0f} MiB)") for run, cells in runs]
    columns = [c if c != "blocks with data" else "coverage (station x block)" for c in COLUMNS]
    section = Section(f"Sparse time, a network: {sizes.stations} stations, two 10-minute files "
                      "each", columns, rows)  # fmt: skip
    (hour, _), (day, _), (far, far_cells) = runs[0], runs[-2], runs[-1]
    above = [(run.client_peak - run.client_imports) / MiB for run in (far, day, hour)]
    section.goals += [
        ratio_verdict(f"client peak above imports, {far.label} / {day.label} (the same runs)",
                      *above[:2], CLIENT_GOAL, " MiB"),
        verdict("coverage is 1 where the files are and 0 elsewhere", str(checks), all(checks)),
    ]  # fmt: skip
    section.notes.append(
        f"The {far.label} store's coverage is {far_cells * 4 / MiB:,.0f} MiB of float32 cells: "
        f"wall {far.seconds:.1f} s against {day.seconds:.1f} s ({day.label}) and "
        f"{hour.seconds:.1f} s ({hour.label}; no goal: the coverage's chunks are written). "
        f"Client above imports {above[0]:.1f} MiB against {above[2]:.1f} MiB at {hour.label}, "
        f"whose files make half the runs. Imports alone: {imports / MiB:.0f} MiB. `load`: "
        "before / after."
    )
    yield section


def sections(options: ScaleOptions) -> Iterator[Section]:
    """The table (`bench_scale.py --only network-gap`)."""
    yield from gap_rows(options, QUICK if options.quick else FULL)
