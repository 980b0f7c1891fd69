"""The writer locks a command holds on what it writes (`seisctf.locks`), taken once its checks
pass and before its cluster starts, given back when it ends however it ends: the outputs of
`_locations.OUTPUTS`, the stores a verb changes in place, a recipe's outputs and the demo's
leaderboard database. SQLite leaderboards and quota files (`--db`, `--quota-db`) take many
scorers appending at once: their leases are shared, and exclusive only for the demo, which
rebuilds its database. `--force-unlock` (every verb) replaces a lock another command left."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator

from seisctf.cli._locations import OUTPUTS
from seisctf.cli._parse import store_location
from seisctf.errors import Message
from seisctf.location import StoreLocation, is_remote
from seisctf.locks import Output, holding

# Options naming SQLite files whose writers append, each in one transaction.
SHARED = frozenset({"db", "quota_db"})
# Inputs a verb writes into (not outputs it creates): `split` adds the split to its store.
IN_PLACE: dict[str, tuple[str, ...]] = {"split": ("store",)}


def _outputs_of_recipe(args: argparse.Namespace) -> list[str]:
    return args.recipe_outputs  # build's check (cli._recipe_checks) found them


def _outputs_of_demo(args: argparse.Namespace) -> list[str]:
    from seisctf.cli.demo import demo_paths

    return [demo_paths(args.workdir, "global")["db"]]


# Outputs found from more than the command line: a recipe's, the demo's rebuilt database.
DERIVED: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "build": _outputs_of_recipe,
    "demo": _outputs_of_demo,
}


def command_outputs(args: argparse.Namespace) -> list[Output]:
    """The outputs the command writes (a URL with `--storage-option`'s options)."""
    found = []
    for dest in (*OUTPUTS.get(args.verb, ()), *IN_PLACE.get(args.verb, ())):
        value = getattr(args, dest, None)
        if isinstance(value, str):
            found.append(Output(_output_location(args, value), shared=dest in SHARED))
    derive = DERIVED.get(args.verb)
    return found + [Output(_output_location(args, url)) for url in (derive(args) if derive else ())]


def _output_location(args: argparse.Namespace, url: str) -> StoreLocation:
    """A remote output with the storage options (parsing them loads the storage module); a
    local one as it is."""
    return store_location(args, url) if is_remote(url) else StoreLocation(url)


def command_name(args: argparse.Namespace) -> str:
    """The holder's name in a lease, `seisctf VERB [KIND]` (no argument: one may be a secret)."""
    kind = getattr(args, "kind", None)
    return " ".join(["seisctf", args.verb, *([kind] if isinstance(kind, str) else [])])


@contextlib.contextmanager
def holding_outputs(args: argparse.Namespace) -> Iterator[None]:
    """Hold the writer locks of the command's outputs while the block runs (InvalidInput at
    once, naming the holder, when another command holds one)."""
    outputs = command_outputs(args)
    if not outputs:
        yield
        return

    def notify(message: Message) -> None:  # a lock taken over, in the verb's flags
        shown = message.spelt(getattr(args, "option_flags", {}).get)
        print(f"seisctf: {shown}", file=sys.stderr, flush=True)

    with holding(
        outputs,
        command=command_name(args),
        force_unlock=getattr(args, "force_unlock", False),
        notify=notify,
    ):
        yield
