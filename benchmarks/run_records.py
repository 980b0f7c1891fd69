"""What a finished run's record costs the client: as a task returns it (each wave's runs come to
the client) and as a resume reads the done ones (`resumable.counted_record`).

    .venv/bin/python benchmarks/run_records.py [--runs 10000] [--blocks 128]

A run of `--blocks` blocks (128, `waveform_blocks.RUN_MAX_BLOCKS`, in a dense archive) with no
problem and no lost channel. Before 2026-12-08 the client was given the record less its lines:
a coverage fraction, an empty problem list and an empty lost list a block (the client folded
the coverage into its (station, block) array). Now the coverage is written by tasks from the
records in the store (`coverage_parts`), and the client is given the problem count and any lost
items. Printed: pickled bytes a run (what travels) and the Python heap of `--runs` of them
held at once (tracemalloc; a wave is up to 20,000 runs, a resume reads every done one).
"""

from __future__ import annotations

import argparse
import json
import pickle
import tracemalloc

from seisctf.formats.shared import resumable


def record_of(blocks: int) -> dict:
    """A finished run's record as written in the progress array."""
    coverage = [0.999 + k * 1e-6 for k in range(blocks)]  # distinct floats, as real ones are
    return resumable.run_record(coverage, [[] for _ in range(blocks)],
                                lost=[[] for _ in range(blocks)])  # fmt: skip


def held_bytes(record: dict, runs: int) -> int:
    """Traced heap of `runs` copies of `record`, each decoded from its JSON as the client's are."""
    text = json.dumps(record)
    tracemalloc.start()
    held = [json.loads(text) for _ in range(runs)]
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del held
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--blocks", type=int, default=128)
    args = parser.parse_args()
    record = record_of(args.blocks)
    forms = {
        "less its lines (before)": {**record, "problems": [[] for _ in record["problems"]],
                                    "problem_count": 0},
        "counted (now)": resumable.counted_record(record),
    }  # fmt: skip
    print(f"| form | pickled bytes a run | {args.runs:,} runs held, MiB |")
    print("|---|---:|---:|")
    figures = {}
    for name, form in forms.items():
        figures[name] = (len(pickle.dumps(form)), held_bytes(form, args.runs) / 2**20)
        print(f"| {name} | {figures[name][0]:,} | {figures[name][1]:.1f} |")
    (old_pickled, old_held), (new_pickled, new_held) = figures.values()
    print(f"| ratio now / before | {new_pickled / old_pickled:.3f}x | {new_held / old_held:.3f}x |")


if __name__ == "__main__":
    main()
