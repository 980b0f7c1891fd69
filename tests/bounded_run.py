"""Run a command line bounded in time, in a process group of its own. One that runs over its time
is not only killed: every Python process of its group (the command, its Dask workers, their fork
server) first prints its threads' stacks (faulthandler, on SIGABRT), and the failure shows them,
so a hang seen once says where each process waited."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

# Seconds the processes have to print their stacks once asked, before they are killed.
STACKS_WAIT_S = 20
# The end of the stacks shown in the failure (the command's own come last: it dies last).
SHOWN_CHARS = 30_000


def run_bounded(
    command: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess:
    """`subprocess.run(command, capture_output=True, text=True)` within `timeout_s`; over it, an
    AssertionError carrying the stacks every process of the command printed."""
    environ = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
        cwd=cwd, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGABRT)
        try:
            stdout, stderr = process.communicate(timeout=STACKS_WAIT_S)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        _signal_group(process.pid, signal.SIGKILL)  # any process of the group still there
        raise AssertionError(
            f"{' '.join(command)}\nran over {timeout_s} s; the stacks its processes printed "
            f"when asked (stderr, last {SHOWN_CHARS} characters):\n{stderr[-SHOWN_CHARS:]}"
        ) from None
    finally:
        if process.returncode is None:  # interrupted while waiting: nothing left running
            _signal_group(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
