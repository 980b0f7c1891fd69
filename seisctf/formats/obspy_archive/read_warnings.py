"""Warnings raised while a waveform file is read: problems of that file, not lines on stderr.

obspy's miniSEED reader passes libmseed's diagnostics on as `InternalMSEEDWarning`s ("Not a
SEED record. Will skip bytes 4096 to 4223", "Number of blockettes in fixed header (2) does not
match the number parsed (1)"), its SAC and miniSEED readers warn of other header faults, and
numpy warns of arithmetic on bad values. Printed by a Dask worker they reach the user's terminal
with no file named, and are lost to `ingest_problems`. `collected_warnings` gathers those the
current thread raises; `warning_problems` turns them into one problem line per kind of message
and file (`PATH: reading it warned: MESSAGE (and N more like it)`), except the few that say
nothing about the data (`SILENT`).

Thread-safe: one hook on `warnings.showwarning` (installed while any thread collects) hands a
warning to the collector of the thread that raised it, and passes every other thread's on.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

# Messages that say nothing about the samples: obspy rounds a SAC file's float32 sample spacing
# to the microsecond (obspy #3408), which is what the file meant.
SILENT = (re.compile(r"^Sample spacing read from SAC file .* was rounded"),)
# A truncated last record is the scan's own problem line (`waveform_files.mseed_truncation`).
EXPLAINED_BY_TRUNCATION = re.compile(r"Last record only has \d+ byte\(s\)")
_NUMBER = re.compile(r"\d+")

_local = threading.local()
_lock = threading.Lock()
_active = 0  # threads collecting now
_passed_on: Any = None  # the `showwarning` the hook replaced, for other threads' warnings
# First in the filters while any thread collects: a message seen before (another file, the same
# text) is raised again, not swallowed by its module's once-per-location registry.
_ALWAYS = ("always", None, Warning, None, 0)


def _hook(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    found = getattr(_local, "found", None)
    if found is not None:
        found.append((category, str(message)))
    elif _passed_on is not None:
        _passed_on(message, category, filename, lineno, file, line)


@contextmanager
def collected_warnings() -> Iterator[list[tuple[type, str]]]:
    """[(category, message)] of every warning this thread raises inside the block (repeats
    included), none of them shown; other threads' warnings are shown as before."""
    global _active, _passed_on
    with _lock:
        if _active == 0:
            _passed_on = warnings.showwarning
            warnings.showwarning = _hook
            # The filters are a list at run time (typeshed declares a read-only Sequence), and
            # `_filters_mutated` what `filterwarnings` itself calls (typeshed omits it).
            warnings.filters.insert(0, _ALWAYS)  # type: ignore[attr-defined]
            warnings._filters_mutated()  # type: ignore[attr-defined]  # noqa: SLF001
        _active += 1
    outer = getattr(_local, "found", None)
    found: list[tuple[type, str]] = []
    _local.found = found
    try:
        yield found
    finally:
        _local.found = outer
        with _lock:
            _active -= 1
            if _active == 0:
                if warnings.showwarning is _hook:
                    warnings.showwarning = _passed_on
                if _ALWAYS in warnings.filters:
                    warnings.filters.remove(_ALWAYS)  # type: ignore[attr-defined]
                    warnings._filters_mutated()  # type: ignore[attr-defined]  # noqa: SLF001


def warning_problems(
    path: str, caught: Sequence[tuple[type, str]], truncated: bool = False
) -> list[str]:
    """One problem line per kind of message among the `caught` warnings of reading `path`
    (messages that differ only in numbers are one kind: the first is quoted, the rest
    counted), in order of first appearance. `truncated`: the file's truncation is reported
    already, so libmseed's word on its cut last record is left out."""
    kinds: dict[str, list[str]] = {}
    for category, message in caught:
        text = " ".join(message.split())
        if any(pattern.search(text) for pattern in SILENT):
            continue
        if truncated and EXPLAINED_BY_TRUNCATION.search(text):
            continue
        source = "libmseed" if category.__name__ == "InternalMSEEDWarning" else "reading it"
        kinds.setdefault(f"{source}\0{_NUMBER.sub('#', text)}", []).append(text)
    lines = []
    for key, texts in kinds.items():
        source = key.split("\0")[0]
        more = f" (and {len(texts) - 1} more like it)" if len(texts) > 1 else ""
        lines.append(f"{path}: {source} warned: {texts[0]}{more}")
    return lines
