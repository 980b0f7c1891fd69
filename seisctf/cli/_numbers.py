"""Numeric options: each one's type and bounds (`Number`, given as argparse's `type=`), checked
by `check_numbers` right after parsing, so that `--sensors 0` or `--rate nan` is answered (exit
3, naming the flag) before any cluster starts. Text that is no number at all is argparse's usage
error (exit 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from dataclasses import dataclass

from seisctf.errors import InvalidInput


@dataclass(frozen=True)
class Number:
    """An option's number: `kind` (int or float) and its bounds, each None when open:
    `at_least` ≤ value, `above` < value, value < `below`, value ≤ `at_most`. A float must be
    finite."""

    kind: type = float
    at_least: float | None = None
    above: float | None = None
    below: float | None = None
    at_most: float | None = None

    def __call__(self, text: str) -> int | float:
        try:
            return self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.expected}, got {text!r}") from None

    @property
    def expected(self) -> str:
        """'an integer ≥ 1', 'a finite number > 0', 'a finite number ≥ 0 and ≤ 1'."""
        noun = "an integer" if self.kind is int else "a finite number"
        bounds = (("≥", self.at_least), (">", self.above), ("<", self.below), ("≤", self.at_most))
        terms = [f"{sign} {bound:g}" for sign, bound in bounds if bound is not None]
        return " ".join([noun, " and ".join(terms)]).strip()

    def accepts(self, value: int | float) -> bool:
        return (
            (self.kind is int or math.isfinite(value))
            and (self.at_least is None or value >= self.at_least)
            and (self.above is None or value > self.above)
            and (self.below is None or value < self.below)
            and (self.at_most is None or value <= self.at_most)
        )


COUNT = Number(int, at_least=1)
COUNT_OR_ZERO = Number(int, at_least=0)
SEED = Number(int, at_least=0)
POSITIVE = Number(float, above=0)
NON_NEGATIVE = Number(float, at_least=0)
PROBABILITY = Number(float, at_least=0, at_most=1)


def chosen_parsers(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> Iterator[argparse.ArgumentParser]:
    """`parser` and the sub-command parsers `args` chose below it (verb, then kind)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            child = None if chosen is None else action.choices.get(chosen)
            if child is not None:
                yield from chosen_parsers(child, args)


def check_numbers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every numeric option of the chosen command within its bounds, else InvalidInput naming
    the flag, what it expects and what it got."""
    for chosen in chosen_parsers(parser, args):
        for action in chosen._actions:
            number, given = action.type, getattr(args, action.dest, None)
            if not isinstance(number, Number) or given is None:
                continue
            for value in given if isinstance(given, list) else [given]:  # repeatable options
                if not number.accepts(value):
                    flag = max(action.option_strings, key=len)
                    shown = f"{value:g}" if isinstance(value, float) else value
                    raise InvalidInput(flag, f"expected {number.expected}, got {shown}")
