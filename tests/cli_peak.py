"""Run a `seisctf` command line in a process of its own, as `python -m seisctf.cli` runs it, and
read that process's peak RSS (Linux's VmHWM) as it ends: what the command's client held at
most, imports included."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping

PEAK_PROBE = (
    "import re, sys\n"
    "from seisctf.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read()\n"
    "print('peak_kib', re.search(r'VmHWM:\\s+(\\d+)', status).group(1))\n"
    "sys.exit(code)\n"
)


def peak_mib(argv: list[str], environment: Mapping[str, str] | None = None) -> float:
    """The command's peak RSS (MiB), with `environment` over this process's; it must exit 0."""
    run = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **(environment or {})},
    )
    assert run.returncode == 0, run.stderr
    return int(re.search(r"peak_kib (\d+)", run.stdout).group(1)) / 1024
