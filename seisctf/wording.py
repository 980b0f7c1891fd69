"""Words of messages: a count with its noun in the right number ('1 dataset', '2 datasets')."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, plural unless `count` is 1 (`plural` when not `noun` + 's')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
