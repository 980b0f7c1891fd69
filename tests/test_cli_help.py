"""`--help` that teaches: every option of every verb has a description and shows its default,
`--layout` lists the shipped layouts, `tasks --help` says what each needs of a store in numbers
taken from the layouts, `--version` prints the installed version, and the top-level help says
what seisctf does and how to start."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from seisctf.cli import build_parser
from seisctf.cli._parse import HelpFormatter, complete_all
from seisctf.plugins.layouts import LAYOUTS
from seisctf.signal.filter_design import guard_steps

NO_DEFAULT = (None, False, [], argparse.SUPPRESS)


def verbs() -> dict[str, argparse.ArgumentParser]:
    """Every parser that runs a verb, by its command ("score ctf"), every deferred kind added."""
    parser = build_parser()
    complete_all(parser)
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subcommands:
            found[" ".join(path)] = parser
        for action in subcommands:
            for name, child in action.choices.items():
                walk(child, (*path, name))

    walk(parser, ())
    return found


def help_of(*argv: str) -> str:
    """What `seisctf ARGV --help` prints (the command as a user runs it)."""
    run = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *argv, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert run.returncode == 0, run.stderr
    return " ".join(run.stdout.split())  # one line: argparse wraps at the terminal's width


def test_the_walk_finds_every_verb():
    found = verbs()
    for command in ("demo", "synth global", "synth das", "synth crustal", "ingest waveforms",
                    "ingest stead", "score ctf", "score picks", "tasks", "leaderboard",
                    "pick seisbench", "compare", "export seisbench"):  # fmt: skip
        assert command in found


def test_every_option_has_a_description_and_shows_its_default():
    missing, hidden = [], []
    for command, parser in verbs().items():
        formatter = HelpFormatter(command)
        for action in parser._actions:
            name = "/".join(action.option_strings) or action.dest
            if not (action.help or "").strip():
                missing.append(f"{command} {name}")
                continue
            shown = formatter._expand_help(action)
            if action.option_strings and action.default not in NO_DEFAULT:
                if "default" not in shown:
                    hidden.append(f"{command} {name}: {shown!r}")
    assert not missing, f"options without a description: {missing}"
    assert not hidden, f"options whose default is not shown: {hidden}"


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (("synth", "global"), ["--sensors", "(default: 2048)", "--duration", "(default: 3000.0)"]),
        (("demo",), ["--workdir", "(default: seisctf-demo)"]),
        (("leaderboard",), ["--db", "(default: seisctf-demo/leaderboard.sqlite)"]),
        (("score", "ctf"), ["--convention", "reference:", "paper:", "(default: reference)"]),
        (("score", "picks"), ["--tolerance", "seconds", "(default: 0.5)"]),
        (("ingest", "quakeml"), ["--window", "window length, s (default: 60.0)"]),
    ],
)
def test_the_options_the_issue_names(argv, fragments):
    shown = help_of(*argv)
    for fragment in fragments:
        assert fragment in shown


@pytest.mark.parametrize("argv", [("tasks",), ("demo",), ("synth", "das")])
def test_layout_lists_the_shipped_layouts(argv):
    shown = help_of(*argv)
    assert f"({', '.join(LAYOUTS)})" in shown


def test_tasks_help_says_what_each_layout_needs():
    shown = help_of("tasks")
    assert "auto (the largest shipped layout the store supports" in shown
    for layout in LAYOUTS.values():
        steps = layout.required_steps
        guard = guard_steps(100.0, 1.0, steps)
        samples = 10 * (guard + steps)
        assert (
            f"{layout.name}: {2 * layout.modes - 1} gap-free stations, 10 x ({guard} + {steps}) "
            f"= {samples} samples at 1 Hz ({samples / 3600:.3g} h)"
        ) in shown
    # The issue's finding for a real archive: seismo needs about 8.4 h of 199 stations.
    assert "seismo: 199 gap-free stations" in shown and "(8.44 h)" in shown


def test_version_is_the_installed_one():
    run = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout == f"seisctf {version('seisctf')}\n"


def test_top_level_help_says_what_seisctf_does_and_how_to_start():
    shown = help_of()
    assert "builds benchmark datasets from seismic archives and simulations" in shown
    assert "keeps their truth hidden" in shown and "scores the submissions" in shown
    assert "first commands: seisctf demo" in shown
