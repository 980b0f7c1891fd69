"""`seisctf serve` (the referee service) and `seisctf referee create|add-team|verify`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from urllib.parse import urlsplit

from seisctf.cli._numbers import NON_NEGATIVE
from seisctf.errors import InvalidInput

KEEP_ALIVE_S = 75


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add `serve` and `referee` to `verbs`."""
    serve = verbs.add_parser("serve", parents=[common], help="run the referee service")
    where = serve.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--competition", metavar="DIR", help="the competition's folder (`seisctf referee create`)"
    )
    where.add_argument(
        "--demo",
        metavar="WORKDIR",
        help="the demo's bundles (`make demo`'s seisctf-demo): its competition is made on the "
        "first run, with a team `demo` whose token is printed",
    )
    _database(serve)
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="port to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="scoring threads, each scoring one submission at a time on the cluster "
        "(default: %(default)s; 0: none, this server only receives)",
    )
    serve.add_argument(
        "--lease",
        dest="lease_s",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a worker's claim on a job lasts unless renewed (a killed "
        "server's jobs are taken over after it; default: %(default)s)",
    )
    serve.add_argument(
        "--retry-delay",
        dest="retry_delay_s",
        type=NON_NEGATIVE,
        default=5.0,
        metavar="S",
        help="seconds a job that failed for the infrastructure's reasons (an unreadable truth) "
        "waits before its first retry; doubled for each retry after (default: %(default)s)",
    )
    serve.add_argument(
        "--public-endpoint",
        dest="public_endpoint",
        default="",
        metavar="URL",
        help="the uploads bucket's endpoint as teams reach it (http(s)://host[:port]), named by "
        "the presigned URLs instead of the endpoint the server uses (a bucket the server reaches "
        "on an internal address; default: the server's own)",
    )
    serve.set_defaults(run=_run_serve, check=_check_serve)

    referee = verbs.add_parser("referee", help="organise a competition")
    actions = referee.add_subparsers(dest="action", required=True)
    create = actions.add_parser(
        "create", help="make a competition's folder from CTF bundles or picking datasets"
    )
    create.add_argument("competition", metavar="DIR", help="the folder to make")
    create.add_argument("--name", required=True, help="the competition's title")
    create.add_argument(
        "--dataset",
        nargs=3,
        action="append",
        required=True,
        metavar=("NAME", "PUBLIC", "TRUTH"),
        help="a scored dataset: its name, public bundle and truth bundle (zarr folders on this "
        "machine: a CTF bundle's, or a picking dataset's event-window stores, the public one "
        "without the test split's arrivals; the kind is read from the truth); repeatable",
    )
    create.add_argument(
        "--quota", type=int, default=5, help="submissions per team in 24 h (default: %(default)s)"
    )
    create.add_argument(
        "--max-upload-bytes",
        dest="max_upload_bytes",
        type=int,
        default=2 * 1024**3,
        help="largest upload accepted (default: %(default)s)",
    )
    create.add_argument(
        "--uploads",
        default="",
        metavar="S3_URL",
        help="take uploads through this bucket too (s3://bucket/prefix): teams PUT their files "
        "to presigned URLs of a multipart upload, never through the server (default: none); "
        "the server takes its S3 credentials from its environment (AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY)",
    )
    create.add_argument(
        "--storage-option",
        dest="storage_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option of the uploads bucket, repeatable (e.g. "
        "endpoint_url=http://…); kept in competition.json, so never credentials",
    )
    _database(create)
    create.set_defaults(run=_run_create, needs_cluster=False)

    add_team = actions.add_parser("add-team", help="add a team; prints its token once")
    add_team.add_argument("competition", metavar="DIR", help="the competition's folder")
    add_team.add_argument("name", help="the team's name (shown on the leaderboard)")
    add_team.add_argument(
        "--description", default="", help="a line about the team, shown escaped (default: none)"
    )
    _database(add_team)
    add_team.set_defaults(run=_run_add_team, check=_check_competition, needs_cluster=False)

    add_dataset = actions.add_parser(
        "add-dataset", help="add a round's dataset (its truth fresh) or a permanent collection"
    )
    add_dataset.add_argument("competition", metavar="DIR", help="the competition's folder")
    add_dataset.add_argument("name", help="the dataset's name (e.g. global-round-2)")
    add_dataset.add_argument(
        "public", help="its public bundle (a zarr folder here: CTF, or an event-window store)"
    )
    add_dataset.add_argument(
        "truth", help="its truth bundle (a zarr folder here; CTF or picking, as it holds)"
    )
    kind = add_dataset.add_mutually_exclusive_group()
    kind.add_argument(
        "--round",
        dest="round_",
        default="",
        help="the round it opens (default: none); close the round before it with `referee close`",
    )
    kind.add_argument(
        "--permanent", action="store_true", help="a frozen collection, scored across rounds"
    )
    add_dataset.set_defaults(run=_run_add_dataset, check=_check_competition, needs_cluster=False)

    close = actions.add_parser(
        "close", help="close datasets: no upload after; once all are, the board's final view"
    )
    close.add_argument("competition", metavar="DIR", help="the competition's folder")
    close.add_argument(
        "--dataset",
        action="append",
        default=[],
        help="a dataset to close, repeatable (default: every dataset of the competition)",
    )
    _database(close)
    close.set_defaults(run=_run_close, check=_check_competition, needs_cluster=False)

    public_picks = actions.add_parser(
        "public-picks",
        parents=[common],
        help="write a picking dataset's public bundle: its truth without the labels of the "
        "scored split",
    )
    public_picks.add_argument("truth", help="the truth: an event-window store with pick labels")
    public_picks.add_argument("out", help="the public bundle to write (a zarr store)")
    public_picks.add_argument(
        "--split",
        default="test",
        help="the split whose labels are withheld (default: test, the split the service scores)",
    )
    public_picks.set_defaults(run=_run_public_picks)

    verify = actions.add_parser("verify", help="check a score receipt's signature offline")
    verify.add_argument("receipt", help="the receipt (JSON) the service gave")
    verify.add_argument(
        "--public-key",
        dest="public_key",
        metavar="PEM",
        help="the competition's public key (its /api/receipt-key); without it "
        "the receipt's own key is used",
    )
    verify.set_defaults(run=_run_verify, needs_cluster=False)


def _database(parser: argparse.ArgumentParser) -> None:
    # dest "database", not "db": the command line's path and URL checks (`_locations`) take
    # every `db` for a file or a storage URL, and refused postgresql://.
    parser.add_argument(
        "--db",
        dest="database",
        default="",
        metavar="URL",
        help="the service's database: postgresql://… (default: the "
        "competition's, else DIR/service.sqlite)",
    )


def _check_serve(args: argparse.Namespace) -> None:
    if args.demo is None:
        _check_competition(args)
    elif not (Path(args.demo) / "public").is_dir():
        raise InvalidInput(
            args.demo, "no public/ folder: not the demo's workdir (run `make demo` first)"
        )
    if args.public_endpoint:
        _check_public_endpoint(args)


def _check_public_endpoint(args: argparse.Namespace) -> None:
    """--public-endpoint is an http(s) URL, for a competition that has an uploads bucket (its
    competition.json's `uploads`: read here, before the cluster and the service load)."""
    parts = urlsplit(args.public_endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(
            args.public_endpoint,
            "--public-endpoint: expected http://host[:port] or https://host[:port]",
        )
    config: dict = {}
    if not args.demo:
        try:
            config = json.loads(Path(args.competition, "competition.json").read_text())
        except ValueError as error:
            raise InvalidInput(args.competition, f"competition.json: not JSON ({error})") from None
    if not config.get("uploads"):
        raise InvalidInput(
            "--public-endpoint",
            "applies to a competition's uploads bucket (referee create --uploads s3://…), and "
            f"{args.demo or args.competition} has none",
        )


def _check_competition(args: argparse.Namespace) -> None:
    if not (Path(args.competition) / "competition.json").is_file():
        raise InvalidInput(
            args.competition,
            "no competition.json: not a competition folder "
            "(make one with `seisctf referee create`)",
        )


def _run_create(args: argparse.Namespace) -> None:
    from seisctf.service import competition
    from seisctf.storage import parse_storage_options

    made = competition.create(
        Path(args.competition),
        args.name,
        {name: (public, truth) for name, public, truth in args.dataset},
        quota=args.quota,
        max_upload_bytes=args.max_upload_bytes,
        db=args.database,
        uploads=args.uploads,
        uploads_options=parse_storage_options(args.storage_options),
    )
    for name, spec in made.datasets.items():
        print(f"{name}: public bundle {spec.bundle_id}")
    print(f"competition: {args.competition}")


def _run_add_team(args: argparse.Namespace) -> None:
    from seisctf.service import competition, tables, teams

    found = competition.load(Path(args.competition), args.database)
    token = teams.add_team(tables.engine_of(found.db_url), args.name, args.description)
    print(f"team {args.name}: token {token}")
    print("(shown once: only its hash is kept)")


def _run_add_dataset(args: argparse.Namespace) -> None:
    from seisctf.service import competition

    grown = competition.add_dataset(
        Path(args.competition),
        args.name,
        args.public,
        args.truth,
        round_=args.round_,
        permanent=args.permanent,
    )
    print(f"{args.name}: public bundle {grown.datasets[args.name].bundle_id}")


def _run_close(args: argparse.Namespace) -> None:
    import time

    import sqlalchemy as sa

    from seisctf.service import competition, jobs, tables

    found = competition.load(Path(args.competition), args.database)
    names = args.dataset or sorted(found.datasets)
    unknown = sorted(set(names) - set(found.datasets))
    if unknown:
        raise InvalidInput(f"dataset {unknown[0]!r}", f"not one of {sorted(found.datasets)}")
    engine = tables.engine_of(found.db_url)
    with engine.begin() as connection:
        for name in sorted(set(names) - tables.closed_datasets(engine)):
            connection.execute(
                sa.insert(tables.closures).values(dataset=name, closed_s=time.time())
            )
    jobs.render_board(found, engine)
    closed = tables.closed_datasets(engine)
    print(f"closed: {', '.join(sorted(closed))}")
    if set(found.datasets) <= closed:
        print(f"final leaderboard: {found.path('site') / 'index.html'}")


def _run_public_picks(args: argparse.Namespace) -> None:
    from seisctf.location import StoreLocation
    from seisctf.scoring.pick_public import write_public

    write_public(StoreLocation(args.truth), StoreLocation(args.out), args.split, args.quiet)
    print(f"wrote {args.out}: {args.truth} without the labels of its {args.split} split")


def _run_verify(args: argparse.Namespace) -> None:
    from seisctf.service import receipts

    try:
        receipt = json.loads(Path(args.receipt).read_text())
    except (OSError, ValueError) as error:
        raise InvalidInput(args.receipt, f"not a readable JSON receipt ({error})") from None
    trusted = Path(args.public_key).read_bytes() if args.public_key else None
    payload = receipts.verify(receipt, trusted)
    print(json.dumps(payload, indent=2, sort_keys=True))
    print(
        "receipt verified"
        + ("" if trusted else " (by its own key: give --public-key to check whose it is)")
    )


def _run_serve(args: argparse.Namespace) -> None:
    import uvicorn

    from seisctf.service import app, competition, tables
    from seisctf.service.demo import DEMO_TEAM, demo_competition

    if args.demo:
        found, token = demo_competition(Path(args.demo))
        if token:
            print(f"team {DEMO_TEAM}: token {token} (shown once)", flush=True)
    else:
        found = competition.load(Path(args.competition), args.database)
    engine = tables.engine_of(found.db_url)
    service = app.create_app(
        found,
        engine,
        workers=args.workers,
        lease_s=args.lease_s,
        retry_delay_s=args.retry_delay_s,
        public_endpoint=args.public_endpoint.rstrip("/"),
    )
    print(f"serving {found.name} at http://{args.host}:{args.port}/", flush=True)
    # Idle keep-alive connections live 75 s (uvicorn's default is 5 s): a client that reuses
    # one as the server closes it loses its request, which busy uploaders did.
    uvicorn.run(
        service,
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_keep_alive=KEEP_ALIVE_S,
    )
