"""The paths and URLs on a command line, checked before its verb's own checks: each location
spelt as a path or a URL can be (`seisctf.urls.checked`), and each local output writable
(`seisctf.local_outputs.check_writable`), so a typo or a read-only folder is refused before any
work, with nothing written and nothing recorded."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator

from seisctf.cli._checks import local_path
from seisctf.errors import InvalidInput
from seisctf.local_outputs import check_name_lengths, check_writable
from seisctf.urls import checked

# The options (by dest) whose values are paths or URLs, inputs and outputs, of every verb.
LOCATIONS = (
    "archive audit catalog cluster csv db directory folder hdf5 histogram html inventory json "
    "layout map out plot public quota_db recipe runs scratch sources store submission truth "
    "wavefield weights workdir"
).split()
# The options a verb (`verb` or `verb kind`) writes to: a file, or a folder (a store, a site).
FILE, FOLDER = "file", "folder"
OUTPUTS: dict[str, dict[str, str]] = {
    "synth": {"out": FOLDER},
    "tasks": {"public": FOLDER, "truth": FOLDER},
    "baseline": {"out": FOLDER},
    "score": {"json": FILE, "plot": FILE, "histogram": FILE, "db": FILE, "quota_db": FILE},
    "leaderboard": {"html": FOLDER, "json": FILE},
    "ingest": {"out": FOLDER, "scratch": FOLDER},
    "split": {"audit": FILE, "map": FILE},
    "subset": {"out": FOLDER},
    "export": {"directory": FOLDER},
    "pick": {"out": FILE},
    "compare": {"out": FOLDER},
    "demo": {"workdir": FOLDER},
}


def _values(args: argparse.Namespace, dests: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """(dest, what, value) of each string given to `dests` (lists included); `what` is the
    option's flag and the value (a positional: the value alone)."""
    flags = getattr(args, "option_flags", {})
    for dest in dests:
        given = getattr(args, dest, None)
        for value in given if isinstance(given, list) else [given]:
            if isinstance(value, str):
                yield dest, (f"{flags[dest]} {value}" if dest in flags else value), value


def check_locations(args: argparse.Namespace) -> None:
    """Every path or URL of the command spelt as one (InvalidInput with the spelling meant), and
    no local output with a name too long for its file system."""
    for _, what, value in _values(args, LOCATIONS):
        checked(value, what)
    for _, what, value in _values(args, OUTPUTS.get(args.verb, {})):
        if (path := local_path(value)) is not None:
            check_name_lengths(path, what)


def local_outputs(args: argparse.Namespace) -> list[str]:
    """The local paths the command writes to."""
    paths = (local_path(value) for _, _, value in _values(args, OUTPUTS.get(args.verb, {})))
    return [str(path) for path in paths if path is not None]


def check_outputs(args: argparse.Namespace) -> None:
    """Every local output of the command writable, and not an existing folder where a file is
    written or the reverse (InvalidInput naming the option otherwise)."""
    kinds = OUTPUTS.get(args.verb, {})
    for dest, what, value in _values(args, kinds):
        path = local_path(value)
        if path is None:
            continue
        if kinds[dest] == FILE and path.is_dir():
            raise InvalidInput(what, "a folder; expected a file to write")
        if kinds[dest] == FOLDER and path.is_file():
            raise InvalidInput(what, "a file; expected a folder (or a store) to write")
        check_writable(path, what)
