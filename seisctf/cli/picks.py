"""`seisctf score picks` and `seisctf pick stalta|seisbench`."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from seisctf.cli import _checks
from seisctf.cli._numbers import COUNT, POSITIVE, PROBABILITY, Number
from seisctf.cli._parse import (
    release_options,
    release_request,
    store_location,
    submitter_metadata,
    submitter_options,
    write_json,
)
from seisctf.errors import InvalidInput

SPLITS = ("train", "dev", "test", "all")
GROUPINGS = ("station", "magnitude", "snr")
PICKING_WORKER_MODULES = ("seisctf.baselines.stalta", "obspy.signal.trigger")


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add `score picks` (to the `score` kinds) and the `pick` verb."""
    score = groups["score"].add_parser(
        "picks", parents=[common], help="detection and P/S pick F1 against an event-window store"
    )
    score.add_argument("--truth", required=True, help="event-window store URL (with labels)")
    score.add_argument("--submission", required=True, help="pick table: .csv, .parquet or .pq")
    score.add_argument("--name", help="model name (default: the file's stem)")
    score.add_argument(
        "--tolerance",
        dest="tolerance_s",
        type=POSITIVE,
        default=0.5,
        help="a P or S pick within this many seconds of the labelled arrival is a hit",
    )
    score.add_argument(
        "--threshold",
        type=PROBABILITY,
        default=0.5,
        help="a trace with a detection value at or above this is detected",
    )
    score.add_argument("--split", default="test", choices=SPLITS, help="traces scored")
    score.add_argument(
        "--group-by",
        nargs="+",
        action="extend",
        default=[],
        choices=GROUPINGS,
        help="also score per station (NET.STA), magnitude bin or SNR bin",
    )
    score.add_argument(
        "--json",
        help="write the results JSON here (stdout then gets a short table, nothing with --quiet;"
        " default: the JSON to stdout)",
    )
    score.add_argument("--db", help="add the result to this SQLite leaderboard")
    score.add_argument("--histogram", help="PNG histogram of the P and S residuals")
    submitter_options(score)
    release_options(score)
    score.set_defaults(run=_run_score_picks, check=_check_score_picks)

    pick = verbs.add_parser("pick", help="baseline pickers writing a pick table")
    kinds = pick.add_subparsers(dest="kind", required=True)
    stalta = kinds.add_parser(
        "stalta", parents=[common], help="STA/LTA + AIC (obspy), tuned on a non-test split"
    )
    seisbench = kinds.add_parser(
        "seisbench", parents=[common], help="a SeisBench model with local weights (CPU)"
    )
    for parser in (stalta, seisbench):
        parser.add_argument("store", help="event-window store URL")
        parser.add_argument("--out", required=True, help="pick table to write (.csv/.parquet)")
        parser.add_argument("--split", default="test", choices=SPLITS, help="traces picked")
    stalta.add_argument(
        "--tune-split",
        default="dev",
        choices=("train", "dev", "none"),
        help="split the thresholds and window lengths are tuned on (none: defaults)",
    )
    stalta.set_defaults(
        run=_run_pick_stalta, check=_check_pick, worker_modules=PICKING_WORKER_MODULES
    )
    seisbench.add_argument(
        "--model", required=True, help="class in seisbench.models, e.g. PhaseNet"
    )
    seisbench.add_argument(
        "--weights",
        required=True,
        help="torch state dict file, or a SeisBench saved model (NAME.json + NAME.pt)",
    )
    seisbench.add_argument("--model-args", help="JSON constructor arguments (state dicts)")
    seisbench.add_argument("--batch-size", type=COUNT, default=64, help="fragments per batch")
    seisbench.add_argument(
        "--pick-threshold",
        type=Number(float, above=0, at_most=1),
        default=0.3,
        help="least phase probability of a pick",
    )
    seisbench.set_defaults(
        run=_run_pick_seisbench,
        check=_check_pick,
        worker_modules=("seisctf.baselines.seisbench_picker", "torch", "seisbench.models"),
    )


def _check_score_picks(args: argparse.Namespace) -> None:
    """Before the cluster: the submitter's metadata, the release options, the truth (a local
    zarr group) and the pick table (a local file)."""
    submitter_metadata(args)
    if release_request(args) and (args.group_by or args.histogram):
        raise InvalidInput(
            "--group-by/--histogram", "per-group and per-residual values are not released"
        )
    _checks.zarr_group(args.truth)
    _checks.existing(args.submission, kind="file")


def _check_pick(args: argparse.Namespace) -> None:
    _checks.zarr_group(args.store)


def _run_score_picks(args: argparse.Namespace) -> None:
    from seisctf.scoring import referee
    from seisctf.scoring.picks import PickTimeWarning
    from seisctf.scoring.site.plots import plot_residual_histogram
    from seisctf.scoring.site.terminal import print_results

    metadata = submitter_metadata(args)
    release = release_request(args)

    def write(results: list[dict]) -> None:
        (result,) = results
        if args.json:
            write_json(args.json, result)
        if args.histogram:
            plot_residual_histogram(result, args.histogram)
        if not args.json:
            print(json.dumps(result, indent=2))
        elif not args.quiet:  # the JSON is in its file: a short table
            print_results(results)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PickTimeWarning)
        referee.run_picks(
            store_location(args, args.truth),
            store_location(args, args.submission),
            args.name or Path(str(args.submission).rstrip("/")).stem,
            referee.Referee(release, args.db, metadata),
            write,
            tolerance_s=args.tolerance_s,
            threshold=args.threshold,
            split=args.split,
            group_by=tuple(dict.fromkeys(args.group_by)),
            quiet=args.quiet,
        )
    for warning in caught:  # one line each, after the result
        if issubclass(warning.category, PickTimeWarning):
            print(f"seisctf: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )


def _run_pick_stalta(args: argparse.Namespace) -> None:
    from seisctf.baselines.stalta import stalta_picks, tuning_traces
    from seisctf.scoring import picks

    store = store_location(args, args.store)
    tune_split = None if args.tune_split == "none" else args.tune_split
    objective = None
    if tune_split is not None:
        tuning_traces(store, tune_split)  # none there: say what to tune on
        truth = picks.read_truth(store, quiet=args.quiet)
        objective = picks.mean_f1_objective(truth, tune_split)
    description = stalta_picks(
        store,
        store_location(args, args.out),
        split=args.split,
        tune_split=tune_split,
        objective=objective,
        quiet=args.quiet,
    )
    print(json.dumps({key: description[key] for key in ("n_traces", "parameters", "tuned_on")}))
    print(f"picks: {args.out}")


def _run_pick_seisbench(args: argparse.Namespace) -> None:
    from seisctf.baselines.seisbench_picker import seisbench_picks

    description = seisbench_picks(
        store_location(args, args.store),
        store_location(args, args.out),
        model=args.model,
        weights=args.weights,
        model_args=args.model_args,
        split=args.split,
        batch_size=args.batch_size,
        pick_threshold=args.pick_threshold,
        quiet=args.quiet,
    )
    print(json.dumps({key: description[key] for key in ("n_traces", "model", "weights_sha256")}))
    print(f"picks: {args.out}")
