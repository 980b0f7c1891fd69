"""Progress of a computation on a Dask cluster, on stderr: distributed's bar in a terminal, one
line per phase elsewhere (a log file, a pipe, CI).

A bar redraws itself every 0.1 s with a carriage return; written to a file, that is one frame
per redraw (tens of KB for the demo). Outside a terminal a phase prints a single line instead,
`LABEL: N tasks done in 12.3 s` (N: the phase's tasks, not those of earlier phases whose
kept results it takes); a phase still running after `ANNOUNCE_AFTER_S` prints the start of its
line at once (`LABEL: N tasks …`) and ends it when done, so a log shows what runs.
distributed is imported when a phase starts, not with this module (`seisctf --help` stays fast).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any, TextIO

# A phase running longer than this (seconds) shows the start of its line while it runs.
ANNOUNCE_AFTER_S = 2.0


class PhaseLine:
    """One line for one phase (a set of futures of the default client), fed by the scheduler
    as distributed's bar is: every 0.1 s the counts of all and of remaining tasks, at the end
    the status ("finished" or "error")."""

    def __init__(self, futures: Sequence[Any], label: str, stream: TextIO) -> None:
        from distributed.diagnostics.progressbar import ProgressBar

        line = self

        class Feed(ProgressBar):
            """distributed's bar, drawn by this line: the two hooks its own bars define."""

            def _draw_bar(self, **response: Any) -> None:
                line._draw_bar(**response)

            def _draw_stop(self, **response: Any) -> None:
                line._draw_stop(**response)

        # Not `complete`: the counts are the tasks still to run when the phase starts and the
        # phase's own, not the kept results of earlier phases it takes (a scan's listing, a
        # resume's record) nor what those were made from.
        self.feed = Feed(futures, complete=False)
        self.label = label
        self.stream = stream
        self.total = 0
        self.line_open = False

    def run(self) -> None:
        """Follow the phase until it finishes or fails. An announced line is always ended, also
        when waiting is interrupted (Ctrl-C), so what is printed next starts a line of its own."""
        from distributed.utils import LoopRunner

        try:
            LoopRunner().run_sync(self.feed.listen)
        except BaseException:
            self._end("stopped")
            raise

    def _head(self) -> str:
        tasks = f"{self.total} task{'' if self.total == 1 else 's'}"
        return f"{self.label}: {tasks}" if self.label else tasks

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _end(self, how: str) -> None:
        """End an announced line with `how` and the time taken."""
        if self.line_open:
            self.line_open = False
            self._write(f" {how} after {self.feed.elapsed:.1f} s\n")

    def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:  # noqa: A002
        self.total = all
        if not self.line_open and remaining and self.feed.elapsed >= ANNOUNCE_AFTER_S:
            self._write(f"{self._head()} …")
            self.line_open = True

    def _draw_stop(self, remaining: int, all: int, status: str, **kwargs: Any) -> None:  # noqa: A002
        self.total = all
        if status != "finished":
            # Nothing more for a failed phase: whoever gathers its results reports the error.
            self._end("failed")
        elif self.line_open:
            self.line_open = False
            self._write(f" done in {self.feed.elapsed:.1f} s\n")
        else:
            self._write(f"{self._head()} done in {self.feed.elapsed:.1f} s\n")


def show_progress(persisted: Sequence[Any], label: str, stream: TextIO | None = None) -> None:
    """Wait for `persisted` collections (of the default client) while showing their progress
    on `stream` (default stderr): distributed's bar under a `LABEL:` line in a terminal, one
    `PhaseLine` elsewhere. Task errors are not raised here: gathering the results raises them."""
    from distributed import futures_of, progress

    stream = stream or sys.stderr
    futures = futures_of(persisted)
    if not stream.isatty():
        PhaseLine(futures, label, stream).run()
        return

    if label:
        print(f"{label}:", file=stream)
    try:
        with contextlib.redirect_stdout(stream):  # the bar writes to sys.stdout
            progress(futures)
    finally:
        print(file=stream)  # the bar leaves the cursor on its own line
