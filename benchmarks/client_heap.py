"""Where the ingest client's heap goes at its peak: `seisctf ingest waveforms` of each SDS archive
(made by `make_archive.py sds`), one after another in this process, on an external cluster of
two workers (`scale_cluster.Cluster`). The first archive warms the process up (its imports,
before tracemalloc starts); for each later one it prints the traced peak above the
heap at the run's start and the allocations, by traceback, that the heap held at that peak
(snapshots taken whenever the traced heap passed its last peak by 128 KiB; the probe's own
snapshots, on the traced heap too, are left out of the figure and of the tracebacks).

    .venv/bin/python benchmarks/client_heap.py WORKDIR ARCHIVE_WARM ARCHIVE_1 [ARCHIVE_2 ...]

Stores go to WORKDIR/store_N.zarr. tracemalloc slows the client several times: the wall times
printed are not the ingest's.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import tracemalloc
from pathlib import Path

from scale_cluster import Cluster

STEP = 128 * 1024  # bytes past the last peak that take a new snapshot
TOP = 10  # tracebacks printed a run


def ingest(cli, address: str, archive: Path, store: Path) -> None:
    arguments = ["ingest", "waveforms", str(archive / "sds"), "--inventory",
                 str(archive / "stations.xml"), "--out", str(store), "--scheduler", address,
                 "--quiet"]  # fmt: skip
    try:
        cli(arguments)
    except SystemExit as stop:
        if stop.code:
            raise


def measured(cli, address: str, archive: Path, store: Path) -> None:
    gc.collect()
    tracemalloc.reset_peak()
    start = tracemalloc.take_snapshot()
    state: dict = {"peak": tracemalloc.get_traced_memory()[0], "snapshot": start, "stop": False}

    def poll() -> None:
        while not state["stop"]:
            current = tracemalloc.get_traced_memory()[0]
            if current > state["peak"] + STEP:
                state["peak"], state["snapshot"] = current, tracemalloc.take_snapshot()
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    began = time.perf_counter()
    try:
        ingest(cli, address, archive, store)
    finally:
        state["stop"] = True
        poller.join()
    # The probe's snapshots are on the traced heap too, and two of them at once while one is
    # taken: the figure is the heap of the snapshot at the peak, without their blocks (all
    # allocated in tracemalloc.py), not tracemalloc's own peak.
    probe = [tracemalloc.Filter(False, tracemalloc.__file__)]
    at_peak, at_start = state["snapshot"].filter_traces(probe), start.filter_traces(probe)
    held = at_peak.compare_to(at_start, "traceback")
    above = sum(stat.size_diff for stat in held)
    print(f"\n## {archive}: {time.perf_counter() - began:.1f} s, traced peak "
          f"{above / 2**20:.2f} MiB above the run's start (sampled every 50 ms, without the "
          f"probe's own snapshots)")  # fmt: skip
    for stat in held[:TOP]:
        print(f"{stat.size_diff / 1024:9.1f} KiB in {stat.count_diff:7,d} blocks")
        for line in stat.traceback.format()[-6:]:
            print("    " + line)


def main(workdir: Path, archives: list[Path]) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    with Cluster(workdir, 2) as cluster:
        from seisctf.cli import main as cli

        ingest(cli, cluster.address, archives[0], workdir / "store_0.zarr")  # imports, untraced
        tracemalloc.start(12)
        for number, archive in enumerate(archives[1:], start=1):
            measured(cli, cluster.address, archive, workdir / f"store_{number}.zarr")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
