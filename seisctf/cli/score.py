"""`seisctf score ctf` and `seisctf leaderboard`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from seisctf.cli import _checks
from seisctf.cli._numbers import COUNT
from seisctf.cli._parse import (
    SCORING_WORKER_MODULES,
    release_options,
    release_request,
    store_location,
    submitter_metadata,
    submitter_options,
    write_json,
)
from seisctf.ctf_json import CtfResult
from seisctf.errors import InvalidInput


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add `score ctf` and `leaderboard` to `verbs`."""
    score = verbs.add_parser("score", help="score submissions")
    score_kinds = score.add_subparsers(dest="kind", required=True)
    score_ctf = score_kinds.add_parser("ctf", parents=[common], help="CTF scores E1..E12")
    score_ctf.add_argument(
        "--truth", help="truth group URL (the referee's; or --validation with --public)"
    )
    score_ctf.add_argument(
        "--submission",
        required=True,
        nargs="+",
        action="extend",
        help="submission(s): zarr group, .zip of one, .npz or folder of .npy; repeatable",
    )
    score_ctf.add_argument(
        "--name",
        action="append",
        help="name per submission, repeatable (default: each submission's file stem)",
    )
    score_ctf.add_argument(
        "--convention",
        default="reference",
        choices=["reference", "paper"],
        help="reference: numbers comparable with the published reference CTF scorer (matrix "
        "2-norms, mean linear power spectrum); paper: the CTF paper's formulas (Frobenius "
        "norms, log power spectrum per row); docs/scoring.md",
    )
    score_ctf.add_argument(
        "--validation",
        action="store_true",
        help="score X1val..X9val against the public bundle's validation targets (with --public)",
    )
    score_ctf.add_argument("--public", help="public bundle URL (with --validation)")
    score_ctf.add_argument(
        "--max-submission-bytes",
        type=COUNT,
        help="refuse submissions holding more bytes than this (default 64 GiB)",
    )
    score_ctf.add_argument(
        "--json",
        help="write the results JSON here (stdout then gets a short table, nothing with --quiet;"
        " default: the JSON to stdout)",
    )
    score_ctf.add_argument("--db", help="add the results to this SQLite leaderboard")
    score_ctf.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME",
        help="also score each task with this installed metric plugin (repeatable; results: "
        "plugin_scores; seisctf --help lists them)",
    )
    score_ctf.add_argument("--plot", help="radar profile PNG of the scores")
    submitter_options(score_ctf)
    release_options(score_ctf)
    score_ctf.set_defaults(
        run=_run_score_ctf, check=_check_score_ctf, worker_modules=SCORING_WORKER_MODULES
    )

    board = verbs.add_parser("leaderboard", parents=[common], help="show the leaderboard")
    board.add_argument(
        "--db", default="seisctf-demo/leaderboard.sqlite", help="SQLite leaderboard to show"
    )
    board.add_argument(
        "--html", help="also write the static HTML leaderboard (index.html + a page per dataset)"
    )
    board.add_argument(
        "--json", help="also write the public leaderboard.json (the view shown) here"
    )
    board.add_argument(
        "--final",
        action="store_true",
        help="the view at the close: private-part E1..E12 and AvgScore to 0.01, ranked by them "
        "(default: the season's view, public-part AvgScore only; docs/release.md)",
    )
    board.set_defaults(run=_run_leaderboard, check=_check_leaderboard, needs_cluster=False)

    groups["score"] = score_kinds


def _submission_names(args: argparse.Namespace) -> list[str]:
    """`--name`s, else the submissions' file stems; one distinct name per submission."""
    names = args.name or [Path(s.rstrip("/")).stem for s in args.submission]
    if len(names) != len(args.submission) or len(set(names)) != len(names):
        raise InvalidInput("--name", "give one distinct name per submission")
    return names


def _check_score_ctf(args: argparse.Namespace) -> None:
    """Before the cluster: the options' combinations, the submitter's metadata, the names, the
    local paths (truth or public a zarr group, a lone submission present), and a lone
    submission's array names (and a zarr folder's shapes) against a local bundle's manifest (the
    truth's test arrays, or with --validation the public validation targets)."""
    if args.validation != bool(args.public) or bool(args.truth) == args.validation:
        raise InvalidInput("score ctf", "give --truth URL, or --validation with --public URL")
    if args.db and args.validation:
        raise InvalidInput(
            "--db", "validation scores stay local; the leaderboard takes referee scores"
        )
    submitter_metadata(args)
    if release_request(args) and args.validation:
        raise InvalidInput("--release", "applies to referee scores (--truth), not --validation")
    if release_request(args) and args.plot:
        raise InvalidInput("--plot", "a release holds one AvgScore, no profile to plot")
    _submission_names(args)
    _checks.zarr_group(args.truth or args.public)
    if len(args.submission) > 1:
        return  # a batch's submissions are refused one by one, the others scored (referee.run)
    _checks.existing(args.submission[0])
    manifest = _checks.ctf_manifest(args.truth or args.public)
    expected = _checks.expected_shapes(manifest, validation=args.validation) if manifest else None
    if expected:
        _checks.submission_arrays(args.submission[0], expected)


def _run_score_ctf(args: argparse.Namespace) -> None:
    from seisctf.scoring import referee
    from seisctf.scoring.site.plots import radar_profile
    from seisctf.scoring.site.terminal import print_results
    from seisctf.scoring.submission import SubmissionLimits

    metadata = submitter_metadata(args)
    release = release_request(args)
    names = _submission_names(args)
    limits = None
    if args.max_submission_bytes:
        limits = SubmissionLimits(
            max_total_bytes=args.max_submission_bytes, max_array_bytes=args.max_submission_bytes
        )

    def write(results: list[dict]) -> None:
        output = results[0] if len(args.submission) == 1 else results
        if args.json:
            write_json(args.json, output)
        if args.plot:
            scored = [CtfResult.from_json(result, "score result") for result in results]
            radar_profile({result.name: result.scores for result in scored}, args.plot)
        if not args.json:
            print(json.dumps(output, indent=2))
        elif not args.quiet:  # the JSON is in its file: a short table
            print_results(results)

    submissions = {
        name: store_location(args, url) for name, url in zip(names, args.submission, strict=True)
    }
    scoring = {
        "convention": args.convention,
        "limits": limits,
        "quiet": args.quiet,
        "metrics": tuple(args.metric),
    }
    if args.validation:
        referee.run_validation(store_location(args, args.public), submissions, write, **scoring)
    else:
        judge = referee.Referee(release, args.db, metadata)
        referee.run_ctf(store_location(args, args.truth), submissions, judge, write, **scoring)


def _check_leaderboard(args: argparse.Namespace) -> None:
    if not Path(args.db).exists():
        raise InvalidInput(args.db, "leaderboard database not found")


def _run_leaderboard(args: argparse.Namespace) -> None:
    from seisctf.scoring import leaderboard
    from seisctf.scoring.site.pages import write_site
    from seisctf.scoring.site.terminal import print_table

    rows = leaderboard.entries(args.db)
    print_table(rows, final=args.final)
    if args.json:
        print(f"leaderboard JSON: {leaderboard.write_json(rows, args.json, final=args.final)}")
    if args.html:
        print(f"HTML leaderboard: {write_site(rows, args.html, final=args.final)}")
