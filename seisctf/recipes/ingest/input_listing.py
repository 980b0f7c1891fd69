"""Inputs named in a one-line message: the first few, then how many more there are."""

from __future__ import annotations

from collections.abc import Sequence

from seisctf.errors import InvalidInput

SHOWN = 5  # inputs a message names before "and N more"


def first_few(items: Sequence[str], separator: str = ", ", shown: int = SHOWN) -> str:
    """The first `shown` of `items` joined, and "and N more" when there are more."""
    text = separator.join(items[:shown])
    if len(items) > shown:
        text += f"{separator}and {len(items) - shown} more"
    return text


def nothing_readable(paths: Sequence[str], problems: Sequence[str]) -> InvalidInput:
    """The error of an ingest none of whose `paths` gave data: the first few files and their
    problems, with how many more (every file given is one of them: the full list is the
    sources themselves)."""
    names = first_few(paths) or "(no files)"
    every = f"all {len(paths)} files given" if len(paths) > SHOWN else "every file given"
    return InvalidInput(
        names,
        f"no input is readable ({every} is unreadable or holds no samples): "
        + first_few(problems, "; "),
    )
