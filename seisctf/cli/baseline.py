"""`seisctf baseline NAME`: a registered baseline's submission for a public CTF bundle."""

from __future__ import annotations

import argparse

from seisctf.cli import _checks
from seisctf.cli._parse import store_location
from seisctf.registry import BASELINES


def add_baseline(verbs, common: argparse.ArgumentParser) -> None:
    """Add `baseline` to `verbs` (its names from the installed entry points; none imported)."""
    baseline = verbs.add_parser("baseline", parents=[common], help="write a baseline submission")
    baseline.add_argument(
        "model",
        choices=BASELINES.names(),
        help="a registered baseline: zeros; persistence (the most recent input row repeated); "
        "mean (each sensor's time mean of the inputs); or an installed package's",
    )
    baseline.add_argument("--public", required=True, help="URL of the public bundle")
    baseline.add_argument("--out", required=True, help="URL of the submission zarr group")
    baseline.set_defaults(run=_run_baseline, check=_check_public)


def _check_public(args: argparse.Namespace) -> None:
    _checks.zarr_group(args.public)


def _run_baseline(args: argparse.Namespace) -> None:
    from seisctf.baselines.ctf import write_baseline

    public, submission = store_location(args, args.public), store_location(args, args.out)
    write_baseline(args.model, public, submission, quiet=args.quiet)
    print(f"wrote {args.out}")
