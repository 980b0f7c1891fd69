"""What every verb shares: the common options and how they are read."""

from __future__ import annotations

import argparse

# What scoring tasks import on a worker: imported while the embedded workers start.
SCORING_WORKER_MODULES = ("seisctf.scoring.ctf", "seisctf.commitment", "scipy.sparse.linalg")


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--scheduler",
        help="address of a running Dask scheduler "
        "(default: $SEISCTF_SCHEDULER, else an embedded LocalCluster)",
    )
    common.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option, repeatable (e.g. endpoint_url=http://…)",
    )
    common.add_argument("--quiet", action="store_true", help="no progress output")
    return common


def storage_options(args: argparse.Namespace) -> dict:
    from seisctf.storage import parse_storage_options

    return parse_storage_options(args.storage_option)
