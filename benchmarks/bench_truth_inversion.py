"""Red-team benchmark (issue 20): can the withheld truth be inverted from the public bundle?

Per dataset (global, das, crustal): builds a bundle with a fresh random secret through the real
command line (`benchmarks/red_team/harness.py`), then scores with the real referee (reference
convention) the all-zero prediction (must be 0.00), every legitimate baseline of
`benchmarks/red_team/baselines.py` (they learn only from the public training arrays), and the
dataset's attack `benchmarks/red_team/attack_<dataset>.py` when it exists (the strongest
inversion against the public package and bundle). The synth sizes are the attack module's
`SYNTH_ARGS` when it has them, else DEFAULT_SYNTH_ARGS.

It prints, per dataset, every submission's AvgScore and E1…E12, and a summary: the attack's
AvgScore, the best baseline and its AvgScore, the gap (attack − best baseline) and whether the
issue's goals hold: gap ≤ 5 AvgScore points, best baseline between 20 and 80.

    .venv/bin/python benchmarks/bench_truth_inversion.py --dataset global|das|crustal|all
        [--workdir DIR] [--keep] [--json OUT.json] [--reuse] [--no-attack]

--reuse scores the bundle a previous run left in DIR/DATASET (with --keep) instead of building
one, and keeps it; --no-attack scores the baselines only. Bundles go to --workdir (default: a
temporary folder under /tmp), removed at the end unless --keep. The secret is never stored:
nobody, this script included, can rebuild the truth.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.red_team import harness  # noqa: E402
from benchmarks.red_team.baselines import BASELINES  # noqa: E402

DATASETS = ("global", "das", "crustal")
DEFAULT_SYNTH_ARGS = {
    "global": ["--sensors", "2048", "--duration", "3000"],  # the demo's sizes
    "das": ["--channels", "256"],  # the demo's sizes
    # 32 x 32 sensors (1024 >= 2 * modes), the ten core simulations only: a few minutes.
    "crustal": ["--grid", "32", "--parametric", "0", "--initial-conditions", "0"],
}
GOAL_GAP = 5.0
GOAL_BASELINE_RANGE = (20.0, 80.0)
SCORE_KEYS = tuple(f"E{i}" for i in range(1, 13))


def attack_module(dataset: str):
    """`benchmarks.red_team.attack_<dataset>`, or None when it does not exist yet."""
    try:
        return importlib.import_module(f"benchmarks.red_team.attack_{dataset}")
    except ModuleNotFoundError as error:
        if error.name != f"benchmarks.red_team.attack_{dataset}":
            raise
        return None


def run_dataset(dataset: str, workdir: Path, reuse: bool = False, with_attack: bool = True) -> dict:
    """Build (or with `reuse`, take the bundle already in `workdir`), predict, score one
    dataset; returns {synth_args, results: {name: result}, notes, seconds: {name: prediction
    seconds}}. The baselines are scored (and printed) before the attack runs."""
    module = attack_module(dataset)
    synth_args = list(getattr(module, "SYNTH_ARGS", DEFAULT_SYNTH_ARGS[dataset]))
    notes = [] if module else [f"no attack yet (benchmarks/red_team/attack_{dataset}.py missing)"]
    if reuse and (workdir / "public.zarr").exists() and (workdir / "truth.zarr").exists():
        public_url, truth_url = str(workdir / "public.zarr"), str(workdir / "truth.zarr")
        notes.append(f"reused the bundle in {workdir}")
    else:
        public_url, truth_url = harness.build_bundle(dataset, workdir, synth_args)
    scores_dir = workdir / f"scores-{time.strftime('%Y%m%dT%H%M%S')}"
    arrays, manifest = harness.load_public(public_url)
    submissions = {"zeros": {p["test"]: np.zeros(p["shape"]) for p in manifest["pairs"]}}
    seconds = {}
    for name, predict in BASELINES.items():
        started = time.perf_counter()
        harness.log(f"{dataset}: baseline {name}")
        submissions[name] = predict(arrays, manifest)
        seconds[name] = time.perf_counter() - started
    harness.log(f"{dataset}: scoring {len(submissions)} submissions with seisctf score ctf")
    results = harness.score_many(truth_url, submissions, scores_dir)
    for name, result in results.items():
        harness.log(f"{dataset}: {name} AvgScore {result['avg_score']:.2f}")
    if module is None or not with_attack:
        notes += [] if module is None else ["attack not run (--no-attack)"]
    else:
        started = time.perf_counter()
        harness.log(f"{dataset}: attack")
        attack = module.attack(public_url, workdir)
        seconds["attack"] = time.perf_counter() - started
        results |= harness.score_many(truth_url, {"attack": attack}, scores_dir)
    return {"synth_args": synth_args, "results": results, "notes": notes, "seconds": seconds}


def summary_row(dataset: str, run: dict) -> dict:
    """The issue's table row: attack, best baseline, gap, goals."""
    results = run["results"]
    baselines = {name: results[name]["avg_score"] for name in BASELINES}
    best = max(baselines, key=baselines.get)
    attack = results.get("attack", {}).get("avg_score")
    gap = None if attack is None else attack - baselines[best]
    low, high = GOAL_BASELINE_RANGE
    return {
        "dataset": dataset,
        "attack": attack,
        "best_baseline": best,
        "best_baseline_avg": baselines[best],
        "gap": gap,
        "gap_goal_met": None if gap is None else gap <= GOAL_GAP,
        "baseline_in_range": low <= baselines[best] <= high,
        "zeros": results["zeros"]["avg_score"],
    }


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def print_dataset(dataset: str, run: dict) -> None:
    """Every submission's AvgScore and E1…E12."""
    print(f"\n{dataset} (synth {' '.join(run['synth_args'])})")
    header = f"{'submission':<12} {'AvgScore':>8} " + " ".join(f"{k:>6}" for k in SCORE_KEYS)
    print(header)
    for name, result in run["results"].items():
        scores = " ".join(f"{_number(result['scores'].get(k)):>6}" for k in SCORE_KEYS)
        print(f"{name:<12} {_number(result['avg_score']):>8} {scores}")
    for name, seconds in run["seconds"].items():
        print(f"  {name}: predicted in {seconds:.0f} s")
    for note in run["notes"]:
        print(f"  note: {note}")


def print_summary(rows: list[dict]) -> None:
    """The issue's table: dataset | attack | best baseline | gap | goals."""
    low, high = GOAL_BASELINE_RANGE
    print(
        f"\n{'dataset':<8} {'zeros':>6} {'attack':>7} {'best baseline':>22} {'gap':>7} "
        f"{'gap<=' + str(int(GOAL_GAP)):>6} {f'{low:.0f}<=best<={high:.0f}':>13}"
    )
    for row in rows:
        best = f"{row['best_baseline']} {row['best_baseline_avg']:.2f}"
        met = {True: "yes", False: "NO", None: "—"}
        print(
            f"{row['dataset']:<8} {row['zeros']:>6.2f} {_number(row['attack']):>7} {best:>22} "
            f"{_number(row['gap']):>7} {met[row['gap_goal_met']]:>6} "
            f"{met[row['baseline_in_range']]:>13}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=[*DATASETS, "all"], default="all")
    parser.add_argument("--workdir", type=Path, help="where bundles go (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the bundles afterwards")
    parser.add_argument("--json", type=Path, help="write the rows and results here")
    parser.add_argument(
        "--reuse", action="store_true", help="score the bundle already in --workdir/DATASET"
    )
    parser.add_argument("--no-attack", action="store_true", help="baselines only")
    args = parser.parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="seisctf-red-team-", dir="/tmp"))
    datasets = DATASETS if args.dataset == "all" else (args.dataset,)
    runs, rows = {}, []
    try:
        for dataset in datasets:
            started = time.perf_counter()
            runs[dataset] = run_dataset(
                dataset, root / dataset, reuse=args.reuse, with_attack=not args.no_attack
            )
            harness.log(f"{dataset}: done in {time.perf_counter() - started:.0f} s")
            print_dataset(dataset, runs[dataset])
            rows.append(summary_row(dataset, runs[dataset]))
    finally:
        if not (args.keep or args.reuse):
            for dataset in datasets:
                shutil.rmtree(root / dataset, ignore_errors=True)
            if args.workdir is None:
                shutil.rmtree(root, ignore_errors=True)
    print_summary(rows)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
