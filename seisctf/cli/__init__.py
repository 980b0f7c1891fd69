"""seisctf builds benchmark datasets from seismic archives and simulations, keeps their truth
hidden, and scores the submissions made against them.

Exit codes: 0 success, 2 usage error (argparse), 3 invalid input (InvalidInput, one line, no
traceback; the library's parameter names in it are given as the verb's flags: `_parse.flag_error`;
also a `--scheduler`/`$SEISCTF_SCHEDULER` where no scheduler answers, and a write to a local
output that fails for want of space or of write access: `local_outputs.write_failure`), 130
interrupted (Ctrl-C: one line, nothing unfinished marked complete, the embedded cluster shut
down; 143 for a SIGTERM, said `terminated`), 1 anything else
(storage that does not answer after the retries: a message naming the object, no traceback; any
other error keeps its traceback).
"""

from __future__ import annotations

import argparse
import atexit
import glob
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from seisctf.cli import compare, crustal, datasets, ingest, picks, score, serve
from seisctf.cli._checks import GLOB_CHARACTERS, local_path
from seisctf.cli._locations import check_locations, check_outputs, local_outputs
from seisctf.cli._locking import holding_outputs
from seisctf.cli._numbers import check_numbers
from seisctf.cli._parse import (
    SCORING_WORKER_MODULES,
    Parser,
    attach_option_flags,
    check_secret_option,
    cluster_choice,
    common_options,
    flag_error,
)
from seisctf.cli._termination import EXIT_TERMINATED, Terminated, sigterm_as_interrupt
from seisctf.errors import InvalidInput
from seisctf.local_outputs import write_failure
from seisctf.registry import installed_names
from seisctf.worker_paths import check_worker_paths, remote_client

EXIT_INVALID_INPUT = 3
EXIT_STORAGE_UNAVAILABLE = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
# Each module adds its verbs; `groups` holds the kinds of `synth`, `ingest`, `score`, `export`
# so a later module can add a kind (e.g. `score picks`) to an earlier verb.
VERB_MODULES = (datasets, crustal, ingest, score, compare, picks, serve)
__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_INVALID_INPUT",
    "EXIT_STORAGE_UNAVAILABLE",
    "SCORING_WORKER_MODULES",
    "build_parser",
    "entry_point",
    "main",
]


FIRST_COMMANDS = """\
first commands:
  seisctf demo                      build a synthetic benchmark, score three baselines, show
                                    the leaderboard (seisctf-demo/)
  seisctf leaderboard               the demo's leaderboard again (--html DIR for web pages)
  seisctf ingest waveforms SRC... --out STORE
                                    miniSEED/SAC/... files -> a continuous waveform store
  seisctf tasks STORE --public P --truth T --layout auto
                                    a CTF benchmark from that store (public part + hidden truth)
  seisctf baseline persistence --public P --out SUB.zarr
  seisctf score ctf --truth T --submission SUB.zarr
  seisctf VERB --help               each verb's options, with their defaults
"""


def package_version() -> str:
    """The installed seisctf's version (package metadata), or "unknown" outside an install."""
    try:
        return version("seisctf")
    except PackageNotFoundError:
        return "unknown"


class _TopParser(Parser):
    """`seisctf`'s own parser: its help ends with the installed plugins (from the installed
    packages' metadata: nothing is imported for it)."""

    def format_help(self) -> str:
        return super().format_help() + installed_plugins_text()


def installed_plugins_text() -> str:
    """The installed plugins by kind, as `seisctf --help` lists them."""
    lines = ["", "installed plugins (entry points; seisctf's own and other packages'):"]
    for kind, names in installed_names().items():
        lines.append(f"  {kind + 's:':19} {', '.join(names) or '(none)'}")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = _TopParser(prog="seisctf", description=__doc__.split("\n\n")[0], epilog=FIRST_COMMANDS)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    groups: dict = {}
    for module in VERB_MODULES:
        module.register(verbs, groups, common)
    attach_option_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_numbers(parser, args)  # a number out of its option's range, before any work
        check_secret_option(args)  # before any work: a short secret is refused (exit 3)
        check_locations(args)  # a misspelt URL, before it is taken for a local path
        check = getattr(args, "check", None)
        if check is not None:
            # The verb's own checks of its inputs (paths, names, schema): a mistake is reported
            # before a cluster starts, in well under a second.
            check(args)
        check_outputs(args)
        _check_buckets(args)
        with holding_outputs(args):  # another command writing an output: refused at once
            if getattr(args, "needs_cluster", True):
                # The embedded cluster starts in the background while the verb imports and
                # builds its graph; a configured one (--cluster) is built first.
                with dask_client(
                    args.scheduler,
                    cluster=cluster_choice(args),
                    quiet=args.quiet,
                    preload=getattr(args, "worker_modules", ()),
                    background=True,
                    storage_option=getattr(args, "storage_options", None),
                ):
                    _check_worker_paths(args)
                    args.run(args)
            else:
                args.run(args)
    except InvalidInput as error:
        error = flag_error(error, getattr(args, "option_flags", {}))
        print(f"seisctf: invalid input: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    except KeyboardInterrupt as stop:
        # Ctrl-C or SIGTERM (`_termination`): the cluster is shut down by now (its workers ignore
        # Ctrl-C and print nothing); a store is marked complete only after all its data is
        # written, so none is.
        terminated = isinstance(stop, Terminated)
        print(
            f"seisctf: {'terminated' if terminated else 'interrupted'}; nothing unfinished was "
            "marked complete (re-run the same command to start again; an ingest resumes where "
            "it stopped)",
            file=sys.stderr,
        )
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except Exception as error:
        failed_write = write_failure(error, local_outputs(args))
        if failed_write is not None:  # a full disk, or a folder turned read-only midway
            print(f"seisctf: {failed_write}", file=sys.stderr)
            return EXIT_INVALID_INPUT
        code = _storage_failure(error, args)
        if code is None:
            raise
        return code
    return 0


# A verb's `check` (set with `set_defaults(check=...)`) validates what it can cheaply (local paths,
# names, option combinations, layout and recipe files) before the cluster starts; importing this
# package loads no Dask, xarray, zarr or pandas, so a mistake is answered in well under a second.


def dask_client(*args, storage_option: list[str] | None = None, **kwargs):
    """`seisctf.cluster.dask_client`, imported when a verb starts its cluster (after its
    check), so that `seisctf --help` and the checks load no Dask. The S3 credentials among
    `storage_option` (`--storage-option`'s pairs) are its `credentials`: the embedded cluster's
    workers get them in their environment, no task carries them."""
    from seisctf.cluster import dask_client as client

    if storage_option:
        from seisctf.s3 import credentials_environ
        from seisctf.storage import parse_storage_options

        kwargs["credentials"] = credentials_environ(parse_storage_options(storage_option))
    return client(*args, **kwargs)


def _command_urls(args: argparse.Namespace) -> list[str]:
    """The URLs (`scheme://…`) among the command's arguments, lists included."""
    values = [
        v for value in vars(args).values() for v in (value if isinstance(value, list) else [value])
    ]
    return [value for value in values if isinstance(value, str) and "://" in value]


def _check_buckets(args: argparse.Namespace) -> None:
    """A bucket that does not exist, or missing credentials, answered before the cluster starts
    (a synthesis builds its whole graph before its first write). Loads `seisctf.storage` only
    when the command names an object store."""
    urls = [url for url in _command_urls(args) if url.startswith(("s3://", "s3a://"))]
    if urls:
        from seisctf.s3 import check_buckets
        from seisctf.storage import parse_storage_options

        check_buckets(urls, parse_storage_options(getattr(args, "storage_options", None)))


# The options naming data that a command's Dask workers read (stores, raw input files) and write
# (stores), by `verb` or `verb kind`: with a cluster given by address, a local path among them
# must be one the workers see (`seisctf.worker_paths`). Files the command's own process reads or
# writes (a layout file, --json, --db, --plot, an inventory, a pick table) are not listed, nor
# `build`'s stores: they are named in its recipe (`--workdir` only resolves relative ones).
WORKER_DATA: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "synth": ((), ("out",)),
    "tasks": (("wavefield",), ("public", "truth")),
    "baseline": (("public",), ("out",)),
    "score": (("truth", "submission", "public"), ()),
    "ingest": (("sources", "archive", "folder", "hdf5", "csv"), ("out",)),
    "split": (("store",), ()),
    "subset": (("store",), ("out",)),
    "export": (("store",), ("directory",)),
    "pick": (("store",), ()),
    "demo": ((), ("workdir",)),
}


def _local_paths(args: argparse.Namespace, dests: tuple[str, ...]) -> list[str]:
    """The local paths among the values of `dests` (lists included; a glob by its first match)."""
    given = [getattr(args, dest, None) for dest in dests]
    values = [v for value in given for v in (value if isinstance(value, list) else [value])]
    found = []
    for value in values:
        path: Path | str | None = local_path(value) if isinstance(value, str) else None
        if path is not None and any(c in str(path) for c in GLOB_CHARACTERS):
            path = next(iter(sorted(glob.glob(str(path), recursive=True))), None)
        if path is not None:
            found.append(str(path))
    return found


def _check_worker_paths(args: argparse.Namespace) -> None:
    """With a scheduler given by address, the local stores and inputs of the command must be
    seen by its workers (one round trip, before any work); nothing is asked of an embedded
    cluster, or when the command names no local data."""
    inputs, outputs = WORKER_DATA.get(args.verb, ((), ()))
    local_inputs, local_outputs = _local_paths(args, inputs), _local_paths(args, outputs)
    if not local_inputs and not local_outputs:
        return
    client = remote_client()
    if client is not None:
        check_worker_paths(client, local_inputs, local_outputs)


def _storage_failure(error: Exception, args: argparse.Namespace) -> int | None:
    """Report a storage failure in a line or two and return the exit code, or None for an error
    that is not one (it keeps its traceback). A storage mistake (no bucket, no credentials,
    access denied) is bad input, exit 3; storage that did not answer after the retries is not bad
    input and not a bug: exit 1, and nothing unfinished was marked complete. (`seisctf.storage`
    is imported here, when an error is judged: `seisctf --help` and the checks load no zarr.)"""
    from seisctf.s3 import is_storage_outage, never_answered, storage_mistake
    from seisctf.storage import parse_storage_options

    urls = _command_urls(args)
    options = parse_storage_options(getattr(args, "storage_options", None))
    mistake = storage_mistake(error, urls, options)
    if mistake is not None:
        mistake = flag_error(mistake, getattr(args, "option_flags", {}))
        print(f"seisctf: invalid input: {mistake}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if not is_storage_outage(error):
        return None
    endpoint = never_answered(error)
    hint = (
        f" (nothing answered at {endpoint}: check the endpoint_url storage option)"
        if endpoint
        else ""
    )
    print(
        f"seisctf: storage unavailable: {type(error).__name__}: {error}{hint}\n"
        "seisctf: nothing unfinished was marked complete; re-run the same command once the "
        "storage answers (an ingest resumes where it stopped)",
        file=sys.stderr,
    )
    return EXIT_STORAGE_UNAVAILABLE


def fast_exit(code: int) -> None:
    """Exit without tearing the interpreter down: flush, run the exit handlers (temporary
    folders, multiprocessing's fork server), then `os._exit`. Tearing down the modules of Dask,
    pandas and xarray object by object only costs time (about 0.3 s of a 3 s scoring command)."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(code)


def entry_point() -> None:
    """The `seisctf` console script: `main()`, a SIGTERM ending it as Ctrl-C does
    (`_termination`), then `fast_exit` (every result is written, flushed and closed by then). An
    unexpected exception leaves the normal way, with its traceback."""
    with sigterm_as_interrupt():
        code = main()
    fast_exit(code)
