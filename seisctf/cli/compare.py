"""`seisctf compare RUNS.csv`: uncertainty analysis of repeated runs (no cluster needed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from seisctf.cli import _checks
from seisctf.cli._numbers import COUNT, SEED, Number
from seisctf.cli._parse import store_location
from seisctf.errors import InvalidInput


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add `compare` to `verbs`."""
    compare = verbs.add_parser(
        "compare",
        parents=[common],
        help="variance components, intervals and mis-ranking probabilities of repeated runs",
    )
    compare.add_argument("runs", metavar="RUNS", help="runs table: CSV or Parquet")
    compare.add_argument("--out", default="seisctf-compare", help="folder for report.json + PNGs")
    compare.add_argument("--metric", help="analyse this metric only (default: every metric)")
    compare.add_argument(
        "--level",
        type=Number(float, above=0, below=1),
        default=0.95,
        help="confidence level of the intervals (0.95)",
    )
    compare.add_argument("--seed", type=SEED, default=0, help="seed of the mis-ranking simulation")
    compare.add_argument(
        "--n-sim", type=COUNT, default=100_000, help="simulated single-run pairs per comparison"
    )
    compare.add_argument(
        "--clusters",
        dest="n_clusters",
        type=COUNT,
        help="training clusters the budgets draw from: a budget equal to it has identical draws",
    )
    compare.add_argument(
        "--audit", help="split audit JSON (seisctf split --audit): budgets with one distinct draw"
    )
    compare.set_defaults(run=_run_compare, check=_check_compare, needs_cluster=False)


def _load_audit(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InvalidInput(path, "audit file not found") from None
    except (OSError, ValueError) as error:
        raise InvalidInput(path, f"not a JSON split audit ({error})") from None


def _check_compare(args: argparse.Namespace) -> None:
    _checks.existing(args.runs, kind="file")
    if args.audit:
        _checks.existing(args.audit, kind="file")


def _run_compare(args: argparse.Namespace) -> None:
    from seisctf.scoring.compare import compare_runs, summary_lines
    from seisctf.scoring.uncertainty import identical_draw_budgets, read_runs

    runs = read_runs(store_location(args, args.runs))
    identical = identical_draw_budgets(
        runs,
        n_clusters=args.n_clusters,
        audit=_load_audit(args.audit) if args.audit else None,
        what=args.runs,
    )
    report = compare_runs(
        runs,
        out=args.out,
        metric=args.metric,
        level=args.level,
        seed=args.seed,
        n_sim=args.n_sim,
        identical=identical,
        source=args.runs,
    )
    if not args.quiet:
        print("\n".join(summary_lines(report)))
    print(f"wrote {Path(args.out) / 'report.json'}")
