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


def nothing_readable(
    paths: Sequence[str], problems: Sequence[str], count: int | None = None
) -> InvalidInput:
    """The error of an ingest none of whose `paths` gave data: the first few files and their
    problems, and how many more (`paths`: every file given, or its first SHOWN + 1 of `count`)."""
    count = len(paths) if count is None else count
    named = first_few(paths[:SHOWN])
    if count > SHOWN:
        named += f", and {count - SHOWN} more"
    return InvalidInput(
        named or "(no files)",
        f"no input is readable (none of the {count} file(s) given holds readable data): "
        + first_few(problems, "; "),
    )
