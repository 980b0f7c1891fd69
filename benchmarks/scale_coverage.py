"""Scale section `coverage`: what the client holds of a store's coverage in `ingest quakeml` and
in the `tasks` gap check, on stores declared at 100× as many chunks (issue 38).

Continuous waveform stores as `scale_open.create_network_store` lays them out (552 stations × 3
channels, chunks (1, 3, 2**18), 100 Hz), declared at about 10^6, 10^7 and 10^8 chunks (10^6 and
10^8 with --quick), with three stations' chunks written at one mid-record block (seeded noise) and
a `coverage(station, block)` as the ingest writes it (float32 in zarr's default chunks: 1 there,
0 elsewhere; attrs `block_samples`, `station_channels`).

Per store and job, in fresh processes with a `distributed.LocalCluster` of one worker process
(its scheduler in the process, as `seisctf`'s embedded cluster), after the imports and the same
job on a 4-station, 2-block store (so every import it needs is done): in one process, opening
the store, then the job's coverage work on the opened store; in another, the whole job. For
each: the wall time, the process's peak RSS above the RSS before it (client and scheduler;
Linux's VmHWM, reset through /proc/self/clear_refs) and the largest graph the scheduler received
(a scheduler plugin counting each graph's tasks).

- quakeml: coverage work = `plan_windows` over `store_grid` (the coverage read and the noise
  tiles of every station's record) of a catalogue of one event picked at the three stations,
  30-s windows and two noise windows a station; whole job = `ingest_quakeml` as the command runs
  it (open, plan, cut, write); checked: 3 earthquake and 6 noise windows;
- gap check: coverage work = `wavefield_for_tasks` with a 12-step layout at 1 Hz (slots of 52 s)
  on channel HHZ: the gap check (the bundle stays lazy); whole job = the same from the opening;
  checked: the three stations kept.

Goal: each job's coverage work, client peak and largest graph, on the largest store within 1.2×
of the smallest's (what the client does with the coverage is bounded, not a share of it).

    .venv/bin/python benchmarks/bench_scale.py --only coverage [--quick]
"""

from __future__ import annotations

import functools
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from scale_open import BLOCK_SAMPLES, CHANNELS, RATE_HZ, StoreShape, create_network_store, network
from scale_report import MiB, ScaleOptions, Section, verdict

from seisctf.location import StoreLocation

FULL_STORES = (network(10**6), network(10**7), network(10**8))
QUICK_STORES = (network(10**6), network(10**8))
FULL_REPEATS, QUICK_REPEATS = 3, 1
WARM_UP = StoreShape("warm-up", 4, 2 * BLOCK_SAMPLES)
JOBS = {"quakeml": "ingest quakeml (coverage read, planning, cut)", "gaps": "tasks gap check"}
GOAL_RATIO = 1.2
LAYOUT_YAML = """train_steps: 8
few_start: 6
few_steps: 2
forecast_start: 8
forecast_steps: 4
k_short: 2
k_long: 2
modes: 2
"""
CTF_RATE_HZ = 1.0
WINDOW_S, PRE_ARRIVAL_S, NOISE_WINDOWS = 30.0, 5.0, 2


def data_rows(shape: StoreShape) -> tuple[list[int], int]:
    """The three stations written and the block (mid-network, mid-record)."""
    row, block = shape.written
    return [row - 1, row, row + 1], block


def make_store(url: str, shape: StoreShape) -> float:
    """The store of the module doc; returns the seconds it took."""
    import zarr

    from seisctf import conventions as cv
    from seisctf import storage

    start = time.perf_counter()
    create_network_store(url, shape.n_station, shape.n_time, BLOCK_SAMPLES)
    rows, block = data_rows(shape)
    group = zarr.open_group(url, mode="r+")
    rng = np.random.default_rng(38)
    for row in rows:
        values = rng.standard_normal((len(CHANNELS), BLOCK_SAMPLES)).astype(np.float32)
        group[cv.WAVEFORM_VAR][row, :, block * BLOCK_SAMPLES : (block + 1) * BLOCK_SAMPLES] = values
    n_blocks = math.ceil(shape.n_time / BLOCK_SAMPLES)
    coverage = group.create_array(
        cv.COVERAGE_VAR,
        shape=(shape.n_station, n_blocks),
        dtype="float32",
        fill_value=np.nan,
        dimension_names=(cv.STATION, "block"),
    )
    rows_per_write = coverage.chunks[0]  # whole chunks of rows, each written once
    for first in range(0, shape.n_station, rows_per_write):
        part = np.zeros((min(rows_per_write, shape.n_station - first), n_blocks))
        part[[r - first for r in rows if first <= r < first + len(part)], block] = 1.0
        coverage[first : first + len(part)] = part.astype(np.float32)
    stations = [f"XX.S{row:04d}.00" for row in range(shape.n_station)]
    attrs = {"block_samples": BLOCK_SAMPLES, "station_channels": dict.fromkeys(stations, CHANNELS)}
    storage.finish_group(StoreLocation(url), attrs)
    return time.perf_counter() - start


def coverage_chunks(url: str) -> tuple[int, ...]:
    import zarr

    return tuple(zarr.open_group(url, mode="r")["coverage"].chunks)


def write_catalog(path: Path, shape: StoreShape) -> None:
    """One event 600 s into the written block, P and S picks at its three stations."""
    from obspy import UTCDateTime
    from obspy.core.event import Catalog, Event, Origin, Pick, WaveformStreamID
    from scale_open import START_ISO

    rows, block = data_rows(shape)
    origin = UTCDateTime(START_ISO) + block * BLOCK_SAMPLES / RATE_HZ + 600.0
    event = Event(origins=[Origin(time=origin, latitude=0.0, longitude=0.0, depth=1e4)])
    for k, row in enumerate(rows):
        stream = WaveformStreamID("XX", f"S{row:04d}", "00", "HHZ")
        for phase, delay in (("P", 10.0 + k), ("S", 18.0 + k)):
            event.picks.append(Pick(time=origin + delay, waveform_id=stream, phase_hint=phase))
    Catalog(events=[event]).write(str(path), format="QUAKEML")


# --- the measuring process -------------------------------------------------------------------


def catalogue(workdir: Path, shape: StoreShape) -> Path:
    path = workdir / f"catalog-{shape.n_time}.xml"
    write_catalog(path, shape)
    return path


def coverage_work(job: str, store, url: str, workdir: Path, shape: StoreShape) -> dict:
    """The part of `job` that reads the coverage, on the opened `store`: the windows' plan
    (quakeml) or the gap check (tasks); returns what it made, to check."""
    if job == "quakeml":
        from seisctf.formats.quakeml import catalog as catalogs
        from seisctf.formats.quakeml.quakeml_windows import store_grid

        path = catalogue(workdir, shape)
        events, picks = catalogs.catalog_tables(catalogs.read_catalog(str(path)))
        plan = catalogs.plan_windows(
            events,
            picks,
            store_grid(store, StoreLocation(url)),
            window_s=WINDOW_S,
            pre_arrival_s=PRE_ARRIVAL_S,
            noise_per_station=NOISE_WINDOWS,
        )
        category = plan.windows["category"]
        return {
            "earthquake": int((category != "noise").sum()),
            "noise": int((category == "noise").sum()),
        }
    from seisctf.pipeline.bundles.archive_wavefield import wavefield_for_tasks
    from seisctf.plugins.layouts import load_layout

    layout = workdir / "layout.yaml"
    layout.write_text(LAYOUT_YAML)
    _, _, truth = wavefield_for_tasks(
        store, load_layout(str(layout)), channel="HHZ", sampling_rate_hz=CTF_RATE_HZ, quiet=True
    )
    return {"stations": sorted(truth["archive"]["stations"])}


def whole_job(job: str, url: str, workdir: Path, shape: StoreShape) -> dict:
    """`ingest quakeml` as the command runs it, or the gap check from opening the store."""
    from seisctf import storage

    if job == "gaps":
        return coverage_work(job, storage.open_dataset(StoreLocation(url)), url, workdir, shape)
    from seisctf.formats.quakeml.quakeml_windows import ingest_quakeml

    out = workdir / f"windows-{shape.n_time}-{time.monotonic_ns()}.zarr"
    report = ingest_quakeml(
        str(catalogue(workdir, shape)),
        [url],
        StoreLocation(out),
        window_s=WINDOW_S,
        pre_arrival_s=PRE_ARRIVAL_S,
        noise_windows=NOISE_WINDOWS,
        quiet=True,
    )
    shutil.rmtree(out)
    return {"earthquake": report.n_earthquake, "noise": report.n_noise}


def child(job: str, url: str, shape: StoreShape, warm_up: str, workdir: Path, step: str) -> dict:
    """Measure `job` on `url` after the same on `warm_up` (module doc): `step` "parts", opening
    the store then the coverage work on it; "whole", the whole job."""
    from distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import SchedulerPlugin

    from seisctf import storage
    from seisctf.cluster import peak_memory_bytes, reset_peak_memory

    class GraphSizes(SchedulerPlugin):
        """The tasks of each graph the scheduler receives."""

        def __init__(self) -> None:
            self.sizes: list[int] = []

        def update_graph(self, scheduler, *, tasks: list, **kwargs) -> None:
            self.sizes.append(len(tasks))

    def measured(run):
        reset_peak_memory()
        base, start = peak_memory_bytes(), time.perf_counter()
        result = run()
        return result, peak_memory_bytes() - base, time.perf_counter() - start

    cluster = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    )
    with cluster, Client(cluster):
        whole_job(job, warm_up, workdir, WARM_UP)
        coverage_work(job, storage.open_dataset(StoreLocation(warm_up)), warm_up, workdir, WARM_UP)
        sizes = GraphSizes()
        cluster.scheduler.add_plugin(sizes, name="graph-sizes")
        if step == "whole":
            made, peak, seconds = measured(lambda: whole_job(job, url, workdir, shape))
            return {
                "job_peak": peak,
                "job_s": seconds,
                "job_graph": max(sizes.sizes, default=0),
                "made": made,
            }
        store, open_peak, _ = measured(lambda: storage.open_dataset(StoreLocation(url)))
        work = functools.partial(coverage_work, job, store, url, workdir, shape)
        made, peak, seconds = measured(work)
    return {
        "open_peak": open_peak,
        "work_peak": peak,
        "work_s": seconds,
        "work_graph": max(sizes.sizes, default=0),
        "made": made,
    }


def measure(
    job: str, url: str, shape: StoreShape, warm_up: str, workdir: Path, repeats: int
) -> dict:
    """Median figures of `repeats` fresh processes per step, their outputs checked."""
    expected = (
        {"earthquake": 3, "noise": 3 * NOISE_WINDOWS}
        if job == "quakeml"
        else {"stations": [f"XX.S{row:04d}.00" for row in data_rows(shape)[0]]}
    )
    figures = {}
    for step in ("parts", "whole"):
        command = [sys.executable, __file__, "--child", job, url, shape.label]
        command += [str(shape.n_station), str(shape.n_time), warm_up, str(workdir), step]
        runs = []
        for _ in range(repeats):
            run = subprocess.run(command, capture_output=True, text=True, timeout=3600)
            if run.returncode:
                raise RuntimeError(f"{shape.label}, {job}: exit {run.returncode}\n{run.stderr}")
            result = json.loads(run.stdout.strip().splitlines()[-1])
            assert result.pop("made") == expected, (job, shape, step)
            runs.append(result)
        figures |= {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    return figures


def sections(options: ScaleOptions) -> Iterator[Section]:
    stores = QUICK_STORES if options.quick else FULL_STORES
    repeats = QUICK_REPEATS if options.quick else FULL_REPEATS
    folder = options.workdir / "coverage"
    folder.mkdir(parents=True, exist_ok=True)
    section = Section(
        "Coverage on the client: ingest quakeml and the tasks gap check (`scale_coverage.py`)",
        [
            "job",
            "store",
            "chunks",
            "open MiB",
            "coverage work s",
            "coverage work MiB",
            "its largest graph (tasks)",
            "whole job s",
            "whole job MiB",
            "its largest graph (tasks)",
        ],
    )
    warm_up = str(folder / "warm-up.zarr")
    make_store(warm_up, WARM_UP)
    figures: dict[tuple[str, StoreShape], dict] = {}
    for shape in stores:
        url = str(folder / f"{shape.n_station}x{shape.n_time}.zarr")
        created_s = make_store(url, shape)
        chunks = coverage_chunks(url)
        section.notes.append(
            f"{shape.label}: created in {created_s:.1f} s; coverage chunks {chunks} "
            f"({math.prod(chunks) * 4 / MiB:.2f} MiB, zarr's default for its shape)"
        )
        for job, label in JOBS.items():
            result = measure(job, url, shape, warm_up, folder, repeats)
            figures[job, shape] = result
            section.rows.append(
                [
                    label,
                    shape.label,
                    f"{shape.n_chunks:.3g}",
                    result["open_peak"] / MiB,
                    result["work_s"],
                    result["work_peak"] / MiB,
                    result["work_graph"],
                    result["job_s"],
                    result["job_peak"] / MiB,
                    result["job_graph"],
                ]
            )
    small, large = stores[0], stores[-1]
    for job, label in JOBS.items():
        before, after = figures[job, small], figures[job, large]
        at = f"at {large.n_chunks:.3g} chunks within {GOAL_RATIO}× of that at {small.n_chunks:.3g}"
        graphs = f"{after['work_graph']:.0f} / {before['work_graph']:.0f} tasks"
        graph_met = after["work_graph"] <= GOAL_RATIO * before["work_graph"]
        if not after["work_graph"] and not before["work_graph"]:
            graphs = "no graph (the plan runs on the client)"
        ratio = after["work_peak"] / max(before["work_peak"], 1)
        section.goals += [
            verdict(f"{label}: the coverage work's largest graph {at}", graphs, graph_met),
            verdict(
                f"{label}: the coverage work's client peak {at}",
                f"{after['work_peak'] / MiB:.1f} / {before['work_peak'] / MiB:.1f} MiB = "
                f"{ratio:.2f}× (whole job {after['job_peak'] / MiB:.0f} / "
                f"{before['job_peak'] / MiB:.0f} MiB)",
                ratio <= GOAL_RATIO,
            ),
        ]
    section.notes.append(
        f"Median of {repeats} fresh processes per row and step (client and scheduler; one "
        "worker process). Open: `storage.open_dataset`, above the RSS after the imports and the "
        "same job on a 4-station, 2-block store (Dask's chunk sizes along each axis, `--only "
        "open`); coverage work: then, on the opened store, above the RSS after the opening; "
        "whole job: in a process of its own (module doc). Outputs checked."
    )
    yield section


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    job, url, label, n_station, n_time, warm_up, workdir, step = sys.argv[2:10]
    shape = StoreShape(label, int(n_station), int(n_time))
    print(json.dumps(child(job, url, shape, warm_up, Path(workdir), step)))
