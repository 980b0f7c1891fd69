"""Run several `seisctf` command lines in one interpreter, each as `python -m seisctf.cli` runs
it: its own stdout and stderr (file descriptors 1 and 2, so logging and C libraries are caught
too), its exit code, and the traceback of an exception that escapes `seisctf.cli.main` (exit
code 1, as the interpreter would give). The imports (obspy, dascore, seisbench, Dask) are paid
once for many cases.

    python tests/cli_batch.py COMMANDS.json RESULTS.jsonl [TIMEOUT_S]

COMMANDS.json: a list of argument lists. RESULTS.jsonl: one JSON object per command, written as
each finishes (`argv`, `code`, `stdout`, `stderr`, `seconds`); a command running over
TIMEOUT_S (default 120) is interrupted and reported with a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import traceback
from typing import Any


class CaseTimeout(Exception):
    """A command ran over its time."""


def _interrupt(signum: int, frame: Any) -> None:
    raise CaseTimeout("the command ran over its time")


def run(argv: list[str], timeout_s: int) -> dict[str, Any]:
    """Run `seisctf.cli.main(argv)` with fds 1 and 2 captured; never raises."""
    from seisctf.cli import main

    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        signal.alarm(timeout_s)
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse: usage errors
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:  # noqa: BLE001 - what the interpreter would print and exit 1 for
            traceback.print_exc()
            code = 1
        finally:
            signal.alarm(0)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        err.seek(0)
        return {
            "argv": argv,
            "code": code,
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "seconds": time.perf_counter() - started,
        }


def main() -> None:
    commands_path, results_path = sys.argv[1], sys.argv[2]
    timeout_s = int(sys.argv[3]) if len(sys.argv) > 3 else 120
    signal.signal(signal.SIGALRM, _interrupt)
    with open(commands_path) as file:
        commands = json.load(file)
    with open(results_path, "w") as results:
        for argv in commands:
            results.write(json.dumps(run(argv, timeout_s)) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
