"""What a worker's inventory checks cost: the whole StationXML parsed once
(`inventory_checks.parsed`, as before 2026-12-07) against each partition's stations cut from it
(`inventory_checks.parsed_stations`). The inventory is a network's (`archive_sds.inventory`:
STATIONS stations of three channels with poles and zeros, as the 100,080-file archive's), its
stations in partitions of 70 as that archive's 16 scan batches hold them; a worker checks
PER_WORKER of them. Each way runs in a fresh process, alternating, ROUNDS rounds: the seconds of
the checks (the parse, then per partition the index's selection and the metadata of each of
its station ids, as `inventory_checks.findings` asks them) and the peak RSS above the process's
start (imports and the file's bytes). Goal: less time and less memory than the whole parse.

    .venv/bin/python benchmarks/inventory_parts.py [--stations 1112] [--per-worker 8]
        [--rounds 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARTITION_STATIONS = 70
CHANNELS = ("HHZ", "HHN", "HHE")


def write_inventory(path: Path, stations: int) -> list[str]:
    """The network's StationXML at `path`; its station ids, in order."""
    from archive_sds import ArchiveSpec, inventory

    spec = ArchiveSpec(stations=stations, channels=3, days=1, rate=100.0, seed=1)
    made = inventory(spec)
    made.write(str(path), format="STATIONXML")
    return [f"{net.code}.{sta.code}.{cha.location_code}" for net in made for sta in net
            for cha in sta[:1]]  # fmt: skip


def checks(way: str, xml: str, partitions: list[list[str]]) -> dict[str, float]:
    """One worker's checks of `partitions` (station ids) the `way` given: seconds, peak MiB."""
    from seisctf.formats.obspy_archive import inventory_checks
    from seisctf.formats.obspy_archive.inventory_index import InventoryIndex
    from seisctf.formats.obspy_archive.waveform_plan import station_metadata
    from seisctf.location import StoreLocation

    source = inventory_checks.read_source([StoreLocation(xml)])
    start = _high_water_kib()
    began = time.perf_counter()
    for stations in partitions:
        if way == "whole":
            inventory = inventory_checks.parsed(source)
        else:
            inventory = inventory_checks.parsed_stations(source, stations)
        index = InventoryIndex(inventory)
        for station in stations:
            assert index.knows(station), station
            station_metadata(station, CHANNELS, index)
    seconds = time.perf_counter() - began
    peak = _high_water_kib() - start
    return {"seconds": seconds, "peak_mib": peak / 1024}


def _high_water_kib() -> int:
    """This process's peak RSS (KiB), from /proc: unlike `ru_maxrss`, it starts afresh at
    exec, not at the peak of the process that forked this one."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stations", type=int, default=1112)
    parser.add_argument("--per-worker", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # WAY XML PARTITIONS.json
    args = parser.parse_args(argv)
    if args.child:
        way, xml, listed = args.child
        print(json.dumps(checks(way, xml, json.loads(Path(listed).read_text()))))
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="inventory-parts-"))
    workdir.mkdir(parents=True, exist_ok=True)
    xml = workdir / "stations.xml"
    ids = write_inventory(xml, args.stations)
    partitions = [ids[i : i + PARTITION_STATIONS] for i in range(0, len(ids), PARTITION_STATIONS)]
    listed = workdir / "partitions.json"
    listed.write_text(json.dumps(partitions[: args.per_worker]))
    print(
        f"{len(ids)} stations, {xml.stat().st_size / 1e6:.1f} MB of StationXML; a worker "
        f"checks {min(args.per_worker, len(partitions))} partitions of {PARTITION_STATIONS}"
    )
    found: dict[str, list[dict[str, float]]] = {"whole": [], "cut": []}
    for _ in range(args.rounds):
        for way in found:
            run = subprocess.run(
                [sys.executable, __file__, "--child", way, str(xml), str(listed)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            found[way].append(json.loads(run.stdout.splitlines()[-1]))
    print("| way | seconds (each round) | peak MiB above start (each round) |")
    print("|---|---|---|")
    for way, runs in found.items():
        seconds = ", ".join(f"{run['seconds']:.2f}" for run in runs)
        peaks = ", ".join(f"{run['peak_mib']:.0f}" for run in runs)
        print(f"| {way} | {seconds} | {peaks} |")
    best = {way: min(run["seconds"] for run in runs) for way, runs in found.items()}
    peak = {way: min(run["peak_mib"] for run in runs) for way, runs in found.items()}
    met = best["cut"] < best["whole"] and peak["cut"] < peak["whole"]
    print(
        f"cut / whole, best of {args.rounds}: time {best['cut'] / best['whole']:.2f}x, "
        f"peak {peak['cut'] / max(peak['whole'], 1e-9):.2f}x: {'met' if met else 'not met'}"
    )


if __name__ == "__main__":
    main()
