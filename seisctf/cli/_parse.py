"""What every verb shares: the parser class (help that shows defaults; verbs completed when
chosen), the common options, how they are read, and the library's parameter names mapped back to
the options' flags in error messages.

Building the parser imports no Dask, xarray, zarr or pandas: a verb whose sub-commands need a
registry (`synth`'s help, `ingest`'s registered formats) adds them only when the command line
names it or its help is shown (`Commands`), the library code a verb runs is imported by its
runner (`_run_*`), and its check (`_check_*`) uses only light modules."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from seisctf import keys
from seisctf.build.cluster_file import read_cluster_file
from seisctf.cli._numbers import COUNT, SEED
from seisctf.cluster_config import CLUSTER_ENV, SCHEDULER_ENV, ClusterConfig
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.release import DEFAULT_QUOTA, Release

# What scoring tasks import on a worker: imported while the embedded workers start.
SCORING_WORKER_MODULES = ("seisctf.scoring.ctf", "seisctf.commitment", "scipy.sparse.linalg")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (their lists stay lists); an option's help ends with
    its default unless it names one itself or has none (None, False, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


class Commands(argparse._SubParsersAction):
    """Sub-commands, some added late. `defer(add)`: `add(self)` runs when the parser holding
    this action is completed (`Parser.complete`: the command line names that parser's verb).
    `on_demand(add)`: `add(self)` runs only when a name not yet added is chosen, or when the
    holding parser's help is shown (e.g. to load a registry that knows every name)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deferred: list[Callable[[Commands], None]] = []
        self.on_demand_adds: list[Callable[[Commands], None]] = []

    def defer(self, add: Callable[[Commands], None]) -> None:
        self.deferred.append(add)

    def on_demand(self, add: Callable[[Commands], None]) -> None:
        self.on_demand_adds.append(add)

    def run_added(self, *, on_demand: bool) -> bool:
        """Run the deferred additions (and the on-demand ones); whether any ran."""
        pending = [*self.deferred, *(self.on_demand_adds if on_demand else ())]
        self.deferred.clear()
        if on_demand:
            self.on_demand_adds.clear()
        for add in pending:
            add(self)
        return bool(pending)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        chosen = self._name_parser_map.get(values[0])
        if isinstance(chosen, Parser):
            chosen.complete()
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """seisctf's parsers: `HelpFormatter`, and sub-commands that may be added late (`Commands`);
    sub-parsers are of this class too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", Commands)

    def complete(self, *, on_demand: bool = False) -> None:
        """Add the deferred sub-commands (and the on-demand ones), then give every verb below
        `option_flags`."""
        added = False
        for action in self._actions:
            if isinstance(action, Commands):
                added = action.run_added(on_demand=on_demand) or added
        if added:
            attach_option_flags(self)

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # A sub-command not added yet may be an on-demand one: add those before argparse
        # refuses the name.
        if isinstance(action, Commands) and value not in action.choices:
            self.complete(on_demand=True)
        super()._check_value(action, value)

    def format_help(self) -> str:
        self.complete(on_demand=True)  # the help lists every sub-command
        return super().format_help()


def complete_all(parser: argparse.ArgumentParser) -> None:
    """Complete `parser` and every parser below it (every deferred sub-command added)."""
    if isinstance(parser, Parser):
        parser.complete(on_demand=True)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                complete_all(child)


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--scheduler",
        help="address of a running Dask scheduler "
        "(default: $SEISCTF_SCHEDULER, else an embedded LocalCluster)",
    )
    common.add_argument(
        "--cluster",
        metavar="FILE.yaml",
        help="a Dask cluster to start, described in YAML: class, options, adapt or scale "
        "(README: Running on a real cluster; default: $SEISCTF_CLUSTER)",
    )
    common.add_argument(
        "--storage-option",
        dest="storage_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option, repeatable (e.g. endpoint_url=http://…)",
    )
    common.add_argument("--quiet", action="store_true", help="no progress output")
    common.add_argument(
        "--force-unlock",
        action="store_true",
        help="remove the writer lock another command left on an output (one that is no longer "
        "running) and go on (docs/contract.md: Writer locks)",
    )
    return common


def cluster_choice(args: argparse.Namespace) -> ClusterConfig | None:
    """The cluster configuration a verb starts, read and checked, or None (a scheduler by
    address or the embedded LocalCluster, `seisctf.cluster.dask_client`). First that applies:
    `--scheduler` (None), `--cluster FILE`, `$SEISCTF_SCHEDULER` (None), `$SEISCTF_CLUSTER`,
    the recipe's `cluster:` section (`args.recipe_cluster`, set by `build`'s check)."""
    if getattr(args, "scheduler", None):
        return None
    if getattr(args, "cluster", None):
        return read_cluster_file(args.cluster)
    if os.environ.get(SCHEDULER_ENV):
        return None
    if os.environ.get(CLUSTER_ENV):
        return read_cluster_file(os.environ[CLUSTER_ENV])
    return getattr(args, "recipe_cluster", None)


def storage_options(args: argparse.Namespace) -> dict:
    """`--storage-option KEY=VALUE …` as fsspec storage options (read when a verb runs: the
    storage module loads zarr and Dask)."""
    from seisctf.storage import parse_storage_options

    return parse_storage_options(args.storage_options)


def store_location(args: argparse.Namespace, url: str) -> StoreLocation:
    """`url`, a flag's value, with `--storage-option`'s options: the location the verb reads
    or writes."""
    return StoreLocation(url, storage_options(args))


def generator_seed_options(parser: argparse.ArgumentParser) -> None:
    """`--seed` and `--secret` of a synthetic generator."""
    parser.add_argument(
        "--seed",
        type=SEED,
        help="generator seed, for teaching: anyone can type it again, so the store is marked "
        "truth: public and `tasks` refuses it without --public-truth (default: derived from "
        "the secret)",
    )
    secret_argument(parser)


def secret_argument(parser: argparse.ArgumentParser) -> None:
    """`--secret`, read by `keys.resolve_secret` in the one order every verb uses."""
    parser.add_argument(
        "--secret",
        help=f"organiser secret, at least {keys.MIN_SECRET_CHARS} characters (default: "
        f"${keys.SECRET_ENV}, else a random one kept only with the truth)",
    )


def public_truth_option(parser: argparse.ArgumentParser) -> None:
    """`--public-truth` of the verbs that cut a bundle."""
    parser.add_argument(
        "--public-truth",
        action="store_true",
        help="accept a source whose truth anyone can regenerate (made with --seed or the "
        "published demo secret): for teaching only; the bundle and every leaderboard page of "
        "its scores say so (default: refuse)",
    )


def secret_option(args: argparse.Namespace) -> str | None:
    """`--secret`, else $SEISCTF_SECRET, else None; a given one shorter than
    `keys.MIN_SECRET_CHARS` raises InvalidInput (it could be guessed offline)."""
    secret = getattr(args, "secret", None)
    if secret is not None:
        return keys.checked_secret(secret, "--secret")
    return keys.secret_from_env()


def check_secret_option(args: argparse.Namespace) -> None:
    """Refuse a short `--secret` or $SEISCTF_SECRET before a verb that takes `--secret` starts
    (`main` calls it first): every verb then uses a checked secret, whichever way it reads it."""
    if hasattr(args, "secret"):
        secret_option(args)


SUBMITTER_OPTIONS = {
    "code_url": "http(s) URL of the submission's code",
    "description": "one-line description of the submission",
    "run": "run label when a model is submitted several times",
    "seed": "training seed of this run",
}


def submitter_options(parser: argparse.ArgumentParser) -> None:
    """What a submitter says about a submission, stored with its leaderboard entries (--db):
    `--code-url`, `--description`, `--run`, `--seed` and repeatable `--meta KEY=VALUE`.
    Shared by every `score` kind; read back with `submitter_metadata`."""
    group = parser.add_argument_group("submitter metadata (stored with --db)")
    # dest names under "submitter_": `args.run` is the verb's function.
    for option, meaning in SUBMITTER_OPTIONS.items():
        group.add_argument(
            f"--{option.replace('_', '-')}", dest=f"submitter_{option}", help=meaning
        )
    group.add_argument(
        "--meta",
        dest="submitter_meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other metadata, repeatable (e.g. budget=3)",
    )


MAX_METADATA_CHARS = 2000


def submitter_metadata(args: argparse.Namespace) -> dict[str, str]:
    """The metadata given by `submitter_options`, checked: the code URL must be http(s) with a
    host, every value at most MAX_METADATA_CHARS characters; InvalidInput otherwise."""
    metadata: dict[str, str] = {}
    for item in args.submitter_meta:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--meta {item}", "expected KEY=VALUE")
        metadata[key.strip()] = value
    for option in SUBMITTER_OPTIONS:
        value = getattr(args, f"submitter_{option}")
        if value is not None:
            metadata[option] = value
    url = metadata.get("code_url")
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInput(f"--code-url {url}", "expected an http:// or https:// URL")
    for key, value in metadata.items():
        if len(value) > MAX_METADATA_CHARS:
            raise InvalidInput(f"metadata {key}", f"longer than {MAX_METADATA_CHARS} characters")
    return metadata


def release_options(parser: argparse.ArgumentParser) -> None:
    """`--release`, `--participant`, `--quota-db`, `--quota` (docs/release.md), shared by every
    `score` kind; read back with `release_request`."""
    group = parser.add_argument_group("release to a participant (docs/release.md)")
    group.add_argument(
        "--release",
        action="store_true",
        help="the participant's view (docs/release.md): a CTF result's best public score through "
        "the Ladder (a pick result's: its public half's mean F1); counted against a quota",
    )
    group.add_argument("--participant", help="who receives the released scores (--release)")
    group.add_argument("--quota-db", help="SQLite file counting releases (default: --db)")
    group.add_argument(
        "--quota",
        type=COUNT,
        default=DEFAULT_QUOTA,
        help=f"releases per participant in any 24 h (default {DEFAULT_QUOTA})",
    )


def release_request(args: argparse.Namespace) -> Release | None:
    """The `Release` asked for with `--release` (None without it), checked before any work."""
    if not args.release:
        if args.participant or args.quota_db:
            raise InvalidInput("--participant/--quota-db", "only apply with --release")
        return None
    if not args.participant:
        raise InvalidInput("--release", "needs --participant NAME")
    quota_db = args.quota_db or args.db
    if not quota_db:
        raise InvalidInput("--release", "needs --quota-db FILE (or --db) to count releases")
    return Release(args.participant, quota_db, args.quota)


def write_json(path: str, value: object) -> None:
    """Write JSON whole or not at all: a temporary file beside `path`, renamed into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(value, file, indent=2)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


# --- library parameters back to flags ------------------------------------------------------------

# An option's dest is the name of the library parameter it sets (`--rate` sets
# `sampling_rate_hz`), so a library error naming a parameter is shown with the verb's flag.


def _leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parsers that run a verb: `parser` itself, or those below its sub-commands."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield parser
    for action in subcommands:
        for child in dict.fromkeys(action.choices.values()):
            yield from _leaf_parsers(child)


def option_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """dest -> flag (the longest option string, e.g. `--rate`) of every option of `parser`."""
    return {
        action.dest: max(action.option_strings, key=len)
        for action in parser._actions
        if action.option_strings and action.dest != argparse.SUPPRESS
    }


def attach_option_flags(parser: argparse.ArgumentParser) -> None:
    """Give every verb's parser the default `option_flags` (its options' flags by dest), which
    `flag_error` reads when the verb fails."""
    for leaf in _leaf_parsers(parser):
        leaf.set_defaults(option_flags=option_flags(leaf))


def flag_error(error: InvalidInput, flags: Mapping[str, str]) -> InvalidInput:
    """`error` as the user of the verb should read it: the parameters it names (its `what`, or
    those written `{name}`) given as the running verb's flags; names the verb has no option for
    are left as the library wrote them."""
    return error.spelt(flags.get)
