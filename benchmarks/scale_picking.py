"""Scale section `picking`: the picking-dataset commands at SeisBench sizes, as users run them.

Tables (`sections(options)`, driven by bench_scale.py; `--quick`: ~2 k windows, 10 k rows):

1. `seisctf ingest seisbench` of a chunked SeisBench catalogue (make_archive.py seisbench:
   3 × 3000 float32 windows; full: the 300 k-window catalogue and an 8 k one of the same kind):
   windows, bytes, wall s, windows/s, peak RSS by role; the per-window cost and fixed cost
   fitted through the two sizes, extrapolated to STEAD/INSTANCE (1.2 M), CEED (4.1 M) and SCEDC
   (8.1 M) windows; and the floor: h5py reads of the same windows plus the store's Blosc LZ4
   encoding, in one process (per core), measured in the same run.
2. `seisctf split` (source-clusters, station-disjoint; `--audit`) on a catalogue store of 1.2 M
   rows: every per-trace column of the 300 k catalogue (events with source coordinates and
   origin times, 997 stations, four windows per event) plus one noise window in ten, with
   one-sample waveforms (the split reads only the per-trace values, never the waveforms).
   Wall s, peak RSS, the audit's figures and whether it passes (station-disjoint: no station in
   two splits; source-clusters: no event in two splits, train and test sources apart).
3. `seisctf score picks --split all` of a 1.2 M-row submission (rows shuffled: the name join;
   Parquet and CSV) against a 1.2 M-row truth store (bench_pick_scoring.synthetic and
   write_store): wall s, peak RSS, and equality with the per-trace reference scorer
   (tests/pick_reference.py) on the same tables.
4. Random 256-window batches (`open_event_windows(...).waveforms.isel(trace=idx).values`) on the
   large store and on the small one (the same layout), interleaved: median ms per batch and
   their ratio (goal: within ±20 %); each batch is read a second time at once, so the ratio of
   those (files in the page cache) separates the layout's cost from the disk's.

CPU s: user + system seconds of every process of the command (scale_report.TreeSampler), the
work whatever the machine's load; wall times on a shared machine carry its load average.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import archive_seisbench  # noqa: E402
import bench_pick_scoring  # noqa: E402
from bench_ctf_scoring import load_average  # noqa: E402
from pick_reference import reference_score  # noqa: E402
from scale_report import (  # noqa: E402
    MiB,
    ScaleOptions,
    Section,
    run_command,
    seisctf_command,
    tree_bytes,
    verdict,
)

from seisctf.location import StoreLocation  # noqa: E402

SAMPLES = 3000  # samples per window (3 × 3000 float32: the 300 k catalogue's windows)
PICKING_SETS = {"STEAD/INSTANCE": 1_200_000, "CEED": 4_100_000, "SCEDC": 8_100_000}
WINDOWS_PER_S_GOAL = 2000.0
SPLIT_GOAL_S = 60.0
SCORE_GOAL_S = 30.0
BATCH = 256
BATCH_RATIO_GOAL = 0.2  # large ÷ small within 1 ± this
NOISE_EVERY = 10  # one catalogue row in ten is a noise window (no source, no arrival)
FLOOR_WINDOWS = 20_000  # windows read and encoded for the floor (fewer when the set is smaller)


@dataclass(frozen=True)
class Sizes:
    large_windows: int
    small_windows: int
    rows: int
    batches: int


# The tests' size (tests/benchmarks_scale/test_scale_picking.py): the same tables and checks, each
# step at its smallest (a batch is the whole small store).
TINY = Sizes(large_windows=512, small_windows=256, rows=2_000, batches=2)


def sizes(options: ScaleOptions) -> Sizes:
    if options.quick:
        return Sizes(large_windows=2_048, small_windows=1_024, rows=10_000, batches=10)
    return Sizes(large_windows=300_000, small_windows=8_000, rows=1_200_000, batches=40)


def seisbench_catalogue(options: ScaleOptions, windows: int) -> Path:
    """The chunked SeisBench catalogue of `windows` windows under options.data (made once with
    make_archive.py seisbench, one chunk per 10 k windows)."""
    folder = options.data / f"seisbench-{windows}x{SAMPLES}"
    if not (folder / "chunks").is_file():
        chunks = max(1, windows // 10_000)
        script = Path(__file__).resolve().parent / "make_archive.py"
        run_command(
            [
                sys.executable,
                str(script),
                "seisbench",
                str(folder),
                "--windows",
                str(windows),
                "--samples",
                str(SAMPLES),
                "--chunks",
                str(chunks),
            ]
        )
    return folder


def peaks_mib(memory) -> tuple[float, float]:
    """(client, largest worker) peak RSS in MiB of a command's process tree."""
    peaks = memory.peaks()
    workers = [value for role, value in peaks.items() if role.startswith("worker")]
    return peaks.get("client", 0) / MiB, max(workers, default=0) / MiB


# --- 1. ingest seisbench ---------------------------------------------------------------------


def ingest(folder: Path, url: Path) -> tuple[float, float, float, float]:
    """`seisctf ingest seisbench FOLDER --out URL`: (wall s, CPU s of all its processes, client
    MiB, largest worker MiB)."""
    run = run_command(
        [*seisctf_command(), "ingest", "seisbench", str(folder), "--out", str(url), "--quiet"]
    )
    return (run.seconds, run.memory.cpu_seconds(), *peaks_mib(run.memory))


def kernel_floor(folder: Path, n_windows: int) -> tuple[float, float]:
    """(wall s, CPU s) per window in this process: h5py reads of whole buckets and the store's
    Blosc LZ4 encoding of each window, one thread (the work no ingest of these files can skip).
    The CPU figure does not depend on the machine's load."""
    import h5py
    import numcodecs

    numcodecs.blosc.set_nthreads(1)
    codec = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    for path in sorted(folder.glob("waveforms*.hdf5")):
        with h5py.File(path, "r") as file:
            for name in sorted(file["data"].keys()):
                block = file["data"][name][()]
                for window in block:
                    codec.encode(np.ascontiguousarray(window))
                done += len(block)
                if done >= n_windows:
                    break
        if done >= n_windows:
            break
    done = max(done, 1)
    return (time.perf_counter() - start) / done, (time.process_time() - cpu) / done


def on_two_cores(cpu_per_window: float) -> str:
    """Windows/s on two cores at `cpu_per_window` CPU s each; '—' where the fit through two
    sizes too close for the CPU clock gives no positive cost."""
    return f"{2 / cpu_per_window:,.0f}" if cpu_per_window > 0 else "—"


INGEST_COLUMNS = ["windows", "input GB", "store GB", "wall s", "windows/s", "wall ms/window",
                  "CPU s", "CPU ms/window", "client MiB", "worker MiB", "load average"]  # fmt: skip


def ingest_section(options: ScaleOptions, size: Sizes) -> Section:
    section = Section(
        "ingest seisbench: a chunked SeisBench catalogue (3 × 3000 float32 windows) → "
        "event-window store",
        INGEST_COLUMNS,
    )
    points = []
    for windows in (size.small_windows, size.large_windows):
        folder = seisbench_catalogue(options, windows)
        url = options.workdir / f"picking-{windows}.zarr"
        seconds, cpu, client, worker = ingest(folder, url)
        assert open_windows(url).sizes["trace"] == windows
        points.append((windows, seconds, cpu))
        gigabytes = (tree_bytes(folder) / 1e9, tree_bytes(url) / 1e9)
        section.rows.append(
            [windows, *gigabytes, seconds, windows / seconds, 1e3 * seconds / windows, cpu,
             1e3 * cpu / windows, client, worker, load_average()]
        )  # fmt: skip
    (n0, t0, c0), (n1, t1, c1) = points
    per_window, cpu_per_window = (t1 - t0) / (n1 - n0), (c1 - c0) / (n1 - n0)
    fixed = t0 - per_window * n0
    wall_floor, floor = kernel_floor(
        seisbench_catalogue(options, size.large_windows), FLOOR_WINDOWS
    )
    section.rows.append(
        ["floor: h5py read + Blosc LZ4 encode, one thread", "", "", "", 1 / wall_floor,
         1e3 * wall_floor, "", 1e3 * floor, "", "", load_average()]
    )  # fmt: skip
    rate = n1 / t1
    section.goals.append(
        verdict(f"≥ {WINDOWS_PER_S_GOAL:,.0f} windows/s at {n1:,} windows",
                f"{rate:,.0f} windows/s", rate >= WINDOWS_PER_S_GOAL)
    )  # fmt: skip
    extrapolated = "; ".join(
        f"{name} ({n / 1e6:.1f} M windows): {(fixed + per_window * n) / 60:.0f} min"
        for name, n in PICKING_SETS.items()
    )
    section.notes.append(
        f"Wall time fitted through the two sizes: {fixed:.1f} s fixed + {1e3 * per_window:.3f} "
        f"ms per window, extrapolated (3 × 3000 samples; 3 × 6000 doubles the per-window "
        f"cost): {extrapolated}. Work: {1e3 * cpu_per_window:.3f} CPU ms per window (all "
        f"processes), i.e. {on_two_cores(cpu_per_window)} windows/s on two otherwise idle cores; "
        f"the floor (read + encode alone) is {1e3 * floor:.3f} CPU ms per window, "
        f"{on_two_cores(floor)} windows/s on two cores."
    )
    return section


# --- 2. split ----------------------------------------------------------------------------------


def iso_us(seconds: np.ndarray) -> np.ndarray:
    """Seconds since 1970 as ISO text to the microsecond with a Z, as the archive writes them."""
    stamps = np.round(np.asarray(seconds) * 1e6).astype("datetime64[us]")
    return np.char.add(np.datetime_as_string(stamps, unit="us"), "Z").astype(object)


def catalogue_frame(n_rows: int, seed: int = 2026) -> pd.DataFrame:
    """Per-trace columns of a picking catalogue of `n_rows` windows (module doc): events and
    stations drawn as make_archive.py seisbench draws them; every NOISE_EVERY-th row a noise
    window."""
    index = np.arange(n_rows)
    per_event = archive_seisbench.EVENTS_PER_STATION_WINDOW
    quakes = archive_seisbench.event_table(seed, n_rows // per_event + 1)
    sites = archive_seisbench.station_table(seed)
    event = index // per_event
    station = (index * 7919) % archive_seisbench.N_STATIONS
    noise = index % NOISE_EVERY == NOISE_EVERY - 1
    rng = np.random.default_rng([seed, 14])
    p = rng.integers(SAMPLES // 10, SAMPLES // 3, n_rows).astype(np.float64)
    s = p + rng.integers(50, SAMPLES // 3, n_rows)
    origin_s = quakes["origin"][event]
    start = iso_us(origin_s + 5.0 - p / 100)
    origin = iso_us(origin_s)
    station_code = pd.Series(station).astype(str).str.zfill(4).radd("S")
    names = "XA." + station_code + "." + pd.Series(index).astype(str).str.zfill(9)

    def unless_noise(values, empty):
        return np.where(noise, empty, values)

    return pd.DataFrame(
        {
            "trace_name": names.to_numpy(dtype=object),
            "station_network_code": np.full(n_rows, "XA", dtype=object),
            "station_code": station_code.to_numpy(dtype=object),
            "station_location_code": np.full(n_rows, "00", dtype=object),
            "station_latitude_deg": sites[station, 0],
            "station_longitude_deg": sites[station, 1],
            "trace_start_time": start,
            "trace_category": unless_noise("earthquake_local", "noise").astype(object),
            "trace_p_arrival_sample": unless_noise(p, np.nan),
            "trace_s_arrival_sample": unless_noise(s, np.nan),
            "source_id": unless_noise(pd.Series(event).astype(str).str.zfill(8).radd("ev"), ""),
            "source_origin_time": unless_noise(origin, "").astype(object),
            "source_latitude_deg": unless_noise(quakes["lat"][event], np.nan),
            "source_longitude_deg": unless_noise(quakes["lon"][event], np.nan),
            "source_magnitude": unless_noise(np.round(quakes["mag"][event], 2), np.nan),
            "trace_npts": np.ones(n_rows, dtype=np.int64),
        }
    )


def write_catalogue_store(frame: pd.DataFrame, url: Path) -> None:
    """An event-window store of the catalogue with one-sample waveforms in one chunk (module
    doc): the per-trace values are all a split reads."""
    from seisctf.catalogs import event_windows

    n = len(frame)
    dataset = event_windows.event_window_dataset(
        np.zeros((n, 3, 1), np.float32), frame, ["Z", "N", "E"], 100.0
    )
    layout = event_windows.WindowLayout(chunk_traces=n, shard_traces=None, compress=False)
    event_windows.write_event_windows(dataset, StoreLocation(url), layout=layout, quiet=True)


def audit_passes(strategy: str, audit: dict) -> bool:
    counts_ok = all(audit["counts"][name] > 0 for name in ("train", "dev", "test"))
    if strategy == "station-disjoint":
        dev = audit["dev"]
        return (
            counts_ok
            and audit["shared_stations"] == 0
            and (dev["shared_stations_with_train"] == dev["shared_stations_with_test"] == 0)
        )
    distance = audit["min_train_test_source_distance_km"]
    return counts_ok and audit["events_in_several_splits"] == 0 and (distance or 0) > 0


def split_section(options: ScaleOptions, size: Sizes) -> Section:
    url = options.workdir / f"catalogue-{size.rows}.zarr"
    start = time.perf_counter()
    write_catalogue_store(catalogue_frame(size.rows), url)
    built = time.perf_counter() - start
    section = Section(
        f"split: a {size.rows:,}-row catalogue store, `seisctf split STORE --strategy S --audit`",
        [
            "strategy",
            "rows",
            "wall s",
            "CPU s",
            "client MiB",
            "worker MiB",
            "train / dev / test",
            "shared stations",
            "events in several splits",
            "min train-test km",
            "audit passes",
            "load average",
        ],
    )
    for strategy in ("source-clusters", "station-disjoint"):
        audit_path = options.workdir / f"audit-{strategy}.json"
        run = run_command(
            [
                *seisctf_command(),
                "split",
                str(url),
                "--strategy",
                strategy,
                "--audit",
                str(audit_path),
                "--quiet",
            ]
        )
        audit = json.loads(audit_path.read_text())
        passes = audit_passes(strategy, audit)
        distance = audit["min_train_test_source_distance_km"]
        section.rows.append(
            [
                strategy,
                sum(audit["counts"].values()),
                run.seconds,
                run.memory.cpu_seconds(),
                *peaks_mib(run.memory),
                " / ".join(f"{audit['counts'][k]:,}" for k in ("train", "dev", "test")),
                audit["shared_stations"],
                audit["events_in_several_splits"],
                "—" if distance is None else float(distance),
                "yes" if passes else "NO",
                load_average(),
            ]
        )
        section.goals.append(
            verdict(
                f"{strategy} ≤ {SPLIT_GOAL_S:.0f} s at {size.rows:,} rows",
                f"{run.seconds:.1f} s",
                run.seconds <= SPLIT_GOAL_S,
            )
        )
    section.notes.append(
        f"The catalogue store (per-trace columns of make_archive.py seisbench's catalogue, one "
        f"window in {NOISE_EVERY} a noise window, one-sample waveforms) was written in "
        f"{built:.1f} s with the event-window writer."
    )
    return section


# --- 3. score picks ----------------------------------------------------------------------------


def score_section(options: ScaleOptions, size: Sizes) -> Section:
    labels, submission = bench_pick_scoring.synthetic(size.rows)
    labels = labels.assign(split="test")  # --split all scores every row either way
    url = options.workdir / f"truth-{size.rows}.zarr"
    bench_pick_scoring.write_store(labels, str(url))
    shuffled = submission.sample(frac=1.0, random_state=1).reset_index(drop=True)
    rate = bench_pick_scoring.RATE_HZ
    truth_rows = zip(
        labels["trace_name"],
        labels["trace_p_arrival_sample"],
        labels["trace_s_arrival_sample"],
        strict=True,
    )
    reference = reference_score(truth_rows, rate, shuffled.itertuples(index=False, name=None))
    section = Section(
        f"score picks: a {size.rows:,}-row submission (shuffled) against a {size.rows:,}-row "
        "truth store, `seisctf score picks --split all`",
        [
            "submission",
            "MB",
            "wall s",
            "CPU s",
            "client MiB",
            "worker MiB",
            "equal to reference",
            "load average",
        ],
    )
    for suffix in ("parquet", "csv"):
        path = options.workdir / f"submission-{size.rows}.{suffix}"
        if suffix == "csv":
            shuffled.to_csv(path, index=False, float_format="%.17g", na_rep="")
        else:
            shuffled.to_parquet(path, index=False)
        out = options.workdir / f"score-{suffix}.json"
        run = run_command(
            [
                *seisctf_command(),
                "score",
                "picks",
                "--truth",
                str(url),
                "--submission",
                str(path),
                "--split",
                "all",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        equal = results_equal(json.loads(out.read_text()), reference)
        section.rows.append(
            [
                suffix,
                path.stat().st_size / 1e6,
                run.seconds,
                run.memory.cpu_seconds(),
                *peaks_mib(run.memory),
                "yes" if equal else "NO",
                load_average(),
            ]
        )
        section.goals.append(
            verdict(
                f"{suffix} ≤ {SCORE_GOAL_S:.0f} s at {size.rows:,} rows",
                f"{run.seconds:.1f} s",
                run.seconds <= SCORE_GOAL_S,
            )
        )
    return section


def results_equal(ours: dict, reference: dict) -> bool:
    """Counts equal, residual statistics within 1e-9 s (bench_pick_scoring.check_equal)."""
    try:
        bench_pick_scoring.check_equal(ours, reference)
    except AssertionError:
        return False
    return True


# --- 4. random batches -------------------------------------------------------------------------


def open_windows(url: Path):
    from seisctf.catalogs.event_windows import open_event_windows

    return open_event_windows(str(url))


def batch_section(options: ScaleOptions, size: Sizes) -> Section:
    """Each batch read twice: first as a training loop meets it (the large store need not fit
    in the page cache), then again at once (its files cached: the layout's own cost)."""
    stores = {
        n: open_windows(options.workdir / f"picking-{n}.zarr")
        for n in (size.small_windows, size.large_windows)
    }
    rng = np.random.default_rng(7)
    times: dict[tuple[int, str], list[float]] = {
        (n, read): [] for n in stores for read in ("first", "again")
    }
    for turn in range(size.batches + 2):  # two warm-up turns, not timed
        for n, ds in stores.items():
            idx = rng.choice(n, BATCH, replace=False)
            for read in ("first", "again"):
                start = time.perf_counter()
                values = ds["waveforms"].isel(trace=idx).values
                if turn >= 2:
                    times[n, read].append(time.perf_counter() - start)
            assert values.shape == (BATCH, 3, SAMPLES)
    median = {key: statistics.median(runs) for key, runs in times.items()}
    small, large = size.small_windows, size.large_windows
    section = Section(
        f"random batches of {BATCH} windows (open_event_windows, TensorStore), interleaved",
        ["store windows", "batches", "median ms/batch", "windows/s", "large ÷ small",
         "same batch again: ms", "again: large ÷ small", "load average"],
    )  # fmt: skip
    for n in stores:
        first, again = median[n, "first"], median[n, "again"]
        section.rows.append(
            [n, len(times[n, "first"]), 1e3 * first, BATCH / first,
             first / median[small, "first"], 1e3 * again, again / median[small, "again"],
             load_average()]
        )  # fmt: skip
    ratio = median[large, "first"] / median[small, "first"]
    section.goals.append(
        verdict(
            f"large store within ±{BATCH_RATIO_GOAL:.0%} of the small one",
            f"{ratio:.2f}× (read again: {median[large, 'again'] / median[small, 'again']:.2f}×)",
            abs(ratio - 1) <= BATCH_RATIO_GOAL,
        )
    )
    return section


def sections(options: ScaleOptions) -> Iterator[Section]:
    size = sizes(options)
    yield ingest_section(options, size)
    yield batch_section(options, size)
    yield split_section(options, size)
    yield score_section(options, size)
