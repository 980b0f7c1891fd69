"""Realistic large archives on demand: an SDS tree of miniSEED day files, or a SeisBench dataset.

    python benchmarks/make_archive.py sds OUT (--stations N | --files N) --days D [--channels 3]
        [--rate 100] [--seed S] [--damaged K] [--gaps G] [--overlaps O] [--mixed-rate M]
        [--events-per-day E] [--start 2024-01-01] [--workers W]
    python benchmarks/make_archive.py seisbench OUT --windows N [--samples 3000] [--rate 100]
        [--chunks K] [--seed S] [--workers W]

`sds` writes, under OUT:
- `sds/YEAR/NET/STA/CHA.D/NET.STA.LOC.CHA.D.YEAR.DOY`: one STEIM2 miniSEED file per station,
  channel and day, written by obspy (network XA, location 00, stations S0000…, channels
  {band}H{Z,N,E} with the SEED band code of the rate). Each station writes records of one
  length, 4096 or 512 bytes (station 0: 4096, station 1: 512, the others drawn), as dataloggers
  do. Content: coloured background noise (microseism peak, broadband floor; `archive_signals`)
  plus P and S trains of `--events-per-day` events per day (shared origins, moveout by distance),
  a per-channel DC offset, in integer counts.
- anomalies at seeded places, one per file and in distinct files: `--gaps` files with a gap
  (10 s to 30 min missing: two traces), `--overlaps` files with an overlap (1 to 120 s sent
  twice, same samples: two traces), `--mixed-rate` files with the channel at half the rate
  for that day, and `--damaged` files: cut inside a record in their second half
  (`truncated`), or one header bit flipped: the data-quality indicator of the first record
  (`flipped-bit-quality`: no longer recognised as miniSEED) or the data-offset field of a
  middle record (`flipped-bit-data-offset`: that record no longer decodes). Defaults: one gap
  and one overlap file per 25 files, one mixed-rate and one damaged file per 50 (at least one
  each).
- small-file mode, `--files N` instead of `--stations`: about N day files (stations =
  ceil(N / (channels × days))) at `--rate` 0.1 Hz unless given (VH channels, as permanent
  networks archive them: 8,640 samples, about 12 KiB of STEIM2 a file), for file-count curves;
  everything else as above.
- `stations.xml`: StationXML (obspy Inventory) of every station and channel: coordinates,
  azimuth and dip, the nominal sample rate (mixed-rate files contradict it, as when a datalogger
  is reconfigured without new metadata), a response (a 120 s broadband sensor's poles and
  zeros, 1500 V/(m/s) × 400,000 counts/V).
- `summary.json`: the arguments; totals `files`, `bytes`, `samples` (what a reader decodes:
  nothing of a file whose flipped bit makes it unreadable, the whole records of a truncated
  one) and `samples_written`; `record_lengths` per station; `gaps`, `overlaps` (path, id,
  `end_of_first` and `start_of_second` trace times, ISO, and `samples` missing or sent twice),
  `mixed_rate` (path, id, rate), `damaged` (path, id, damage, samples readable); `file_list`
  (path, id, rate, record_length, traces, samples, bytes); `seconds` and `mb_per_s` (wall
  time of the whole run, and bytes written per second).

Every file's bytes depend only on the arguments (each file draws from its own seeded
generator), not on `--workers` (processes, one task per station, default: all cores).

`seisbench` writes a chunked SeisBench dataset under OUT with `seisbench.data.
WaveformDataWriter`, one chunk per process task: `chunks` (the chunk names, one a line),
`metadata{chunk}.csv` and `waveforms{chunk}.hdf5` (chunk names `c000`, `c001`, …). `--windows`
windows (Z, N, E) × `--samples` float32 counts at `--rate` Hz of noise with a P and an S arrival;
columns trace_name (the writer's bucket names; `trace_name_original` keeps the given name),
station_network_code, station_code, station_location_code, station_latitude_deg,
station_longitude_deg, station_elevation_m, trace_channel, trace_start_time,
trace_sampling_rate_hz, trace_category, trace_p_arrival_sample, trace_p_status,
trace_s_arrival_sample, trace_s_status, source_id, source_origin_time, source_latitude_deg,
source_longitude_deg, source_depth_km, source_magnitude, source_magnitude_type, split
(train/dev/test, 70/10/20 % by event). Prints the windows, bytes, MB/s and windows/s (of the
writing, after SeisBench's import).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from archive_sds import ArchiveSpec, write_sds  # noqa: E402
from archive_seisbench import write_seisbench  # noqa: E402

# Hz: the rate of the small-file mode (`--files`), SEED band V (VHZ, VHN, VHE).
SMALL_FILE_RATE = 0.1


def tree_bytes(root: Path) -> int:
    """Bytes of every file below `root`."""
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def run_sds(args: argparse.Namespace) -> dict:
    """`sds`: the tree, StationXML and summary under args.out; the summary (dict)."""
    spec = ArchiveSpec(
        stations=args.stations or -(-args.files // (args.channels * args.days)),
        channels=args.channels,
        days=args.days,
        rate=args.rate if args.rate is not None else (SMALL_FILE_RATE if args.files else 100.0),
        seed=args.seed,
        start=args.start,
        events_per_day=args.events_per_day,
        gaps=args.gaps,
        overlaps=args.overlaps,
        mixed_rate=args.mixed_rate,
        damaged=args.damaged,
    )
    began = time.perf_counter()
    summary = write_sds(Path(args.out), spec, args.workers)
    seconds = time.perf_counter() - began
    summary["seconds"] = round(seconds, 3)
    summary["mb_per_s"] = round(summary["bytes"] / 1e6 / seconds, 3)
    summary["workers"] = args.workers
    (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"wrote {summary['files']} files, {summary['bytes'] / 1e6:.1f} MB, "
        f"{summary['samples']} samples in {seconds:.1f} s: {summary['mb_per_s']:.1f} MB/s "
        f"({args.workers} processes); {len(summary['gaps'])} gaps, "
        f"{len(summary['overlaps'])} overlaps, {len(summary['mixed_rate'])} mixed-rate, "
        f"{len(summary['damaged'])} damaged; {Path(args.out) / 'summary.json'}"
    )
    return summary


def run_seisbench(args: argparse.Namespace) -> dict:
    """`seisbench`: the chunked dataset under args.out; what was written (dict)."""
    if args.windows < 1 or args.samples < 10 or args.chunks < 1 or args.rate <= 0:
        raise SystemExit("make_archive.py: --windows, --chunks ≥ 1, --samples ≥ 10, --rate > 0")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chunks = min(args.chunks, args.windows)
    bounds = np.linspace(0, args.windows, chunks + 1).astype(int)
    names = [f"c{index:03d}" for index in range(chunks)]
    os.environ["TQDM_DISABLE"] = "1"  # the writer's progress bar
    import seisbench.data  # noqa: F401 - imported once here, inherited by the forked processes

    began = time.perf_counter()  # after the import (seconds of torch): the writing alone

    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        jobs = [
            pool.submit(
                write_seisbench,
                str(out),
                name,
                int(lo),
                int(hi - lo),
                args.samples,
                args.rate,
                args.seed,
            )
            for name, lo, hi in zip(names, bounds[:-1], bounds[1:], strict=True)
        ]
        written = sum(job.result() for job in jobs)
    (out / "chunks").write_text("".join(f"{name}\n" for name in names))
    seconds = time.perf_counter() - began
    size = tree_bytes(out)
    print(
        f"wrote {written} windows of 3 x {args.samples} samples in {chunks} chunks, "
        f"{size / 1e6:.1f} MB in {seconds:.1f} s: {size / 1e6 / seconds:.1f} MB/s, "
        f"{written / seconds:.0f} windows/s ({args.workers} processes); {out}"
    )
    return {"windows": written, "chunks": names, "bytes": size, "seconds": seconds}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kinds = top.add_subparsers(dest="kind", required=True)
    sds = kinds.add_parser("sds", help="SDS tree of STEIM2 miniSEED day files + StationXML")
    sds.add_argument("out", help="folder: sds/, stations.xml and summary.json go there")
    count = sds.add_mutually_exclusive_group(required=True)
    count.add_argument("--stations", type=int)
    count.add_argument(
        "--files",
        type=int,
        help=f"small-file mode: about this many day files (--rate {SMALL_FILE_RATE})",
    )
    sds.add_argument("--channels", type=int, default=3, choices=(1, 2, 3))
    sds.add_argument("--days", type=int, required=True)
    sds.add_argument("--rate", type=float, help="Hz (default 100; 0.1 with --files)")
    sds.add_argument("--start", default="2024-01-01", help="first day (UTC)")
    sds.add_argument("--events-per-day", type=int, default=6)
    for name in ("gaps", "overlaps", "mixed-rate", "damaged"):
        sds.add_argument(f"--{name}", type=int, help="files with this anomaly")
    sb = kinds.add_parser("seisbench", help="chunked SeisBench dataset (WaveformDataWriter)")
    sb.add_argument("out", help="dataset folder")
    sb.add_argument("--windows", type=int, required=True)
    sb.add_argument("--samples", type=int, default=3000)
    sb.add_argument("--rate", type=float, default=100.0, help="Hz")
    sb.add_argument("--chunks", type=int, default=os.cpu_count() or 1)
    for sub in (sds, sb):
        sub.add_argument("--seed", type=int, default=2026)
        sub.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes")
    return top


def main(argv: list[str] | None = None) -> dict:
    args = parser().parse_args(argv)
    return run_sds(args) if args.kind == "sds" else run_seisbench(args)


if __name__ == "__main__":
    main()
