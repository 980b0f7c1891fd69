"""Zoo libraries are imported without the optional modules they would import for features the
zoo never uses (`library_calls.UNUSED_IMPORTS`): neuraloperator imports wandb when installed,
and wandb makes two temporary folders on import that only a clean exit removes, so every Dask
worker process stopped by its nanny left them in the temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("neuralop")
pytest.importorskip("wandb")


def _killed_after(code: str, tmp: Path) -> tuple[int, list[str]]:
    """Run `code` in a fresh process whose temporary directory is `tmp`, then SIGKILL it (as
    a worker is stopped): its return code and what it left in `tmp`."""
    tmp.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)"],
        env={**os.environ, "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return run.returncode, sorted(path.name for path in tmp.iterdir())


def test_a_killed_process_that_imported_neuralop_leaves_no_wandb_folders(tmp_path):
    plain, left = _killed_after("import neuralop.models", tmp_path / "plain")
    assert plain == -9 and any("wandb" in name for name in left), left  # what it did before
    code = (
        "from seisctf.baselines.zoo.library_calls import import_quietly\n"
        "assert import_quietly('neuralop.models').FNO\n"
        "import neuralop.utils\n"
        "assert not neuralop.utils.wandb_available\n"
    )
    quiet, left = _killed_after(code, tmp_path / "zoo")
    assert quiet == -9 and left == [], left


def test_wandb_imports_as_usual_after_the_zoo_s_import(tmp_path):
    code = (
        "from seisctf.baselines.zoo.library_calls import import_quietly\n"
        "import_quietly('neuralop.models')\n"
        "import wandb\n"
        "print(wandb.__name__)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=300)  # fmt: skip
    assert run.returncode == 0 and run.stdout.split() == ["wandb"], run.stderr
