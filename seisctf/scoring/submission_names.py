"""The array names a CTF submission must hold, checked from names alone: shared by the referee's
intake (`submission_checks`) and the command line's check before the cluster starts, which must
load nothing heavy, so both give the same message."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from seisctf.errors import InvalidInput

# Entries a .zip or .npz may hold (`SubmissionLimits.max_members`' default).
MAX_MEMBERS = 1000


def refuse_names(what: str, found: Iterable[str], expected: Mapping[str, Any] | None) -> None:
    """InvalidInput naming `what` unless `found` is exactly the names of `expected`: the missing
    ones, then the unexpected ones (the first ten and how many more)."""
    if expected is None:
        return
    found = set(found)
    missing = [name for name in expected if name not in found]
    unexpected = sorted(found - set(expected))
    shown = f"{unexpected[:10]}" + f" and {len(unexpected) - 10} more" * (len(unexpected) > 10)
    problems = [f"missing arrays {missing}"] * bool(missing)
    problems += [f"unexpected arrays {shown}"] * bool(unexpected)
    if problems:
        raise InvalidInput(what, f"{' and '.join(problems)}; expected exactly {list(expected)}")
