"""`seisctf baseline NAME`: a registered baseline's submission for a public CTF bundle;
`seisctf baseline zoo`: every installed zoo model's (docs/model-zoo.md)."""

from __future__ import annotations

import argparse

from seisctf.baselines.zoo.budget import FULL, QUICK
from seisctf.cli import _checks
from seisctf.cli._numbers import SEED
from seisctf.cli._parse import store_location
from seisctf.errors import InvalidInput
from seisctf.registry import BASELINES

ZOO = "zoo"


def add_baseline(verbs, common: argparse.ArgumentParser) -> None:
    """Add `baseline` to `verbs` (its names from the installed entry points; none imported)."""
    baseline = verbs.add_parser("baseline", parents=[common], help="write a baseline submission")
    baseline.add_argument(
        "model",
        choices=[*BASELINES.names(), ZOO],
        help="a registered baseline: zeros; persistence (the most recent input row repeated); "
        "mean (each sensor's time mean of the inputs); a zoo model (sensor_ar, pod_var, "
        "bop_dmd, sindy, esn, lstm, ... docs/model-zoo.md); an installed package's; or zoo: "
        "every installed zoo model, a submission each in the folder --out",
    )
    baseline.add_argument("--public", required=True, help="URL of the public bundle")
    baseline.add_argument(
        "--out", required=True, help="URL of the submission zarr group (zoo: of the folder)"
    )
    baseline.add_argument(
        "--seed",
        type=SEED,
        action="append",
        help="seed of a seeded model (default 0); zoo: repeatable, a run per seed",
    )
    baseline.add_argument(
        "--models", help="zoo: comma-separated zoo models (default: every installed one)"
    )
    baseline.add_argument(
        "--quick",
        action="store_true",
        help="zoo models: a smoke test of the set-up (each model's first settings, no hold-out "
        "search, a tenth of the neural models' training steps; recorded as search: quick)",
    )
    baseline.add_argument(
        "--truth",
        help="zoo: the organiser's truth group; score every submission and write "
        "OUT/runs.csv (the `seisctf compare` table)",
    )
    baseline.add_argument(
        "--db", help="zoo with --truth: record the scores into this SQLite leaderboard"
    )
    baseline.set_defaults(run=_run_baseline, check=_check_baseline)


def _check_baseline(args: argparse.Namespace) -> None:
    zoo_only = {"--models": args.models, "--truth": args.truth, "--db": args.db}
    if args.model != ZOO:
        given = [option for option, value in zoo_only.items() if value]
        if given:
            raise InvalidInput(", ".join(given), "applies to `seisctf baseline zoo` only")
        if args.seed and len(args.seed) > 1:
            raise InvalidInput("--seed", "give one seed (`baseline zoo` takes several)")
    if args.db and not args.truth:
        raise InvalidInput("--db", "records scores: give --truth too")
    if args.model == ZOO:
        from seisctf.baselines.zoo.runs import zoo_models

        zoo_models(_model_names(args))  # unknown or missing ones: before any cluster starts
    elif args.quick and BASELINES[args.model].model is None:
        raise InvalidInput("--quick", f"applies to zoo models, not {args.model!r}")
    elif args.seed and not BASELINES[args.model].seeded:
        raise InvalidInput(f"baseline {args.model!r}", "draws no random numbers: give no seed")
    _checks.zarr_group(args.public)
    if args.truth:
        _checks.zarr_group(args.truth)


def _run_baseline(args: argparse.Namespace) -> None:
    public, out = store_location(args, args.public), store_location(args, args.out)
    if args.model == ZOO:
        _run_zoo(args, public, out)
        return
    from seisctf.baselines.ctf import write_baseline

    seed = args.seed[0] if args.seed else None
    write_baseline(args.model, public, out, quiet=args.quiet, seed=seed, search=_search(args))
    print(f"wrote {args.out}")


def _search(args: argparse.Namespace) -> str:
    return QUICK if args.quick else FULL


def _model_names(args: argparse.Namespace) -> list[str] | None:
    return [name.strip() for name in args.models.split(",")] if args.models else None


def _run_zoo(args: argparse.Namespace, public, out) -> None:
    from seisctf.baselines.zoo.runs import run_zoo, zoo_models
    from seisctf.scoring.zoo_scores import score_zoo

    models = zoo_models(_model_names(args))
    if not models:
        raise InvalidInput("baseline zoo", "no zoo model is installed: pip install 'seisctf[zoo]'")
    runs = run_zoo(
        public, out, models, seeds=args.seed or [0], quiet=args.quiet, search=_search(args)
    )
    for run in runs:
        print(f"wrote {run.submission.url}")
    if args.truth:
        table = score_zoo(
            store_location(args, args.truth),
            {run.name: run.submission for run in runs},
            db=args.db,
            quiet=args.quiet,
        )
        filesystem, path = (out / "runs.csv").filesystem()
        with filesystem.open(path, "w") as runs_file:
            table.to_csv(runs_file, index=False)
        print(f"runs table: {(out / 'runs.csv').url}")
