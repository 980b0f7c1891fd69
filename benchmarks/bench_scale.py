"""Scale benchmarks: cost curves over 100x in size, per-unit costs, the scheduler's task rate.

    .venv/bin/python benchmarks/bench_scale.py --quick            # CI-sized, a few minutes
    .venv/bin/python benchmarks/bench_scale.py --data /big/disk   # full sizes (hours; ~50 GB)
    .venv/bin/python benchmarks/bench_scale.py --only ingest,ctf  # some sections
    .venv/bin/python benchmarks/bench_scale.py --only ingest-files  # ingest's file-count curve

Each section module yields tables (`scale_report.Section`); they are printed as they finish and
written together as markdown (`--markdown`, default WORKDIR/scale.md) for benchmarks/RESULTS.md.
Large inputs are generated once under --data by make_archive.py and reused by later runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ctf_scoring import machine_facts  # noqa: E402
from scale_report import ScaleOptions  # noqa: E402

SECTIONS = {
    "ingest": "scale_ingest",
    "ingest-files": "scale_ingest:file_sections",  # the file-count curve alone
    "picking": "scale_picking",
    "ctf": "scale_ctf",
    "scheduler": "scale_scheduler",
    "open": "scale_open",
    "sparse": "scale_sparse",  # empty time, --append, same stores
    "reads": "scale_reads",  # bytes read from S3 by an ingest, counted by the server
    "coverage": "scale_coverage",  # ingest quakeml and the tasks gap check, 100x the chunks
    "das-runs": "scale_das_runs",  # ingest das at 128x the blocks: tasks, records, client
    "network-gap": "scale_network_gap",  # a network's files decades apart: the client
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="CI-sized inputs (minutes)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--data", type=Path, help="folder of large inputs (default: WORKDIR/data)")
    parser.add_argument("--workdir", type=Path, help="folder for stores (default: a temporary one)")
    parser.add_argument("--markdown", type=Path, help="write the tables here")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SECTIONS))
    if unknown:
        parser.error(
            f"--only: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}"
        )

    with tempfile.TemporaryDirectory(prefix="seisctf-scale-") as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        options = ScaleOptions(
            quick=args.quick, data=args.data or workdir / "data", workdir=workdir
        )
        options.data.mkdir(parents=True, exist_ok=True)
        header = ["# Scale benchmarks" + " (--quick)" * args.quick, ""]
        header += [f"- {fact}" for fact in machine_facts()]
        header += [
            f"- command: {' '.join(['benchmarks/bench_scale.py', *(argv or sys.argv[1:])])}",
            "",
        ]
        print("\n".join(header), flush=True)
        parts = ["\n".join(header)]
        for name in names:
            module_name, _, function = SECTIONS[name].partition(":")
            module = importlib.import_module(module_name)
            start = time.perf_counter()
            for section in getattr(module, function or "sections")(options):
                text = section.markdown()
                print(text, flush=True)
                parts.append(text)
            print(f"({name}: {time.perf_counter() - start:.0f} s)\n", flush=True)
        target = args.markdown or workdir / "scale.md"
        target.write_text("\n".join(parts))
        print(f"tables written to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
