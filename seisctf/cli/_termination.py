"""SIGTERM (`kill`, `timeout`, a batch system's time limit) ends a command as Ctrl-C does: the
exception unwinds the command, its embedded cluster is shut down and nothing unfinished is
marked complete. Killed outright instead, the command left its workers' semaphores to
multiprocessing's resource tracker, which printed "There appear to be 12 leaked semaphore objects
to clean up at shutdown" after the command had gone."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

EXIT_TERMINATED = 128 + signal.SIGTERM  # as shells report a command stopped by SIGTERM


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised in the main thread where Ctrl-C raises KeyboardInterrupt."""


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the command at once
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Meanwhile a SIGTERM raises `Terminated` (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
