"""Warnings that reached the user from the command line, each fixed where it arose, through the
CLI as a user runs it (`python -m seisctf.cli`, its embedded cluster, whose workers' stderr is
the command's):

- a command whose process group gets SIGTERM (`timeout`, a batch system's time limit) ends as
  Ctrl-C ends it, exit 143, nothing marked complete, and multiprocessing's resource tracker no
  longer warns of "leaked semaphore objects" after it (the workers had died with the signal),
  nor when the nanny kills a worker still in a task (numcodecs' Blosc lock, now made once in
  the fork server, `seisctf.fork_server`);
- `score ctf` of a submission of huge finite values scores -100 on every task in both
  conventions, with no numpy RuntimeWarning (its long-time errors used to be NaN: the rescaled
  spectrum was divided by a scale² that underflowed to 0)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import write_tiny_truth
from submission_writers import write_npz

from seisctf import conventions as cv

SEISCTF = [sys.executable, "-m", "seisctf.cli"]
SECRET = "stray-warnings-test-secret-0123456789"


def environment() -> dict[str, str]:
    """The test's environment without a scheduler or cluster: the embedded cluster runs."""
    unset = ("SEISCTF_SCHEDULER", "SEISCTF_CLUSTER", "SEISCTF_SECRET")
    return {key: value for key, value in os.environ.items() if key not in unset}


def _stopped_by_sigterm(command: list[str], begun: bytes, then_s: float) -> tuple[int, str]:
    """Run `command` in a process group of its own; once its stderr holds `begun` and `then_s`
    more seconds have passed, SIGTERM the whole group (as `timeout` does). Its exit code and
    all its stderr, read until the last writer of the pipe (the resource tracker too) is gone."""
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=environment(),
        start_new_session=True,
    )
    chunks: list[bytes] = []  # stderr as it comes: a progress line ends only with its phase

    def read() -> None:
        while chunk := os.read(process.stderr.fileno(), 4096):
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started = time.monotonic()
    while begun not in b"".join(chunks):
        assert process.poll() is None, b"".join(chunks).decode()
        assert time.monotonic() - started < 300, b"".join(chunks).decode()
        time.sleep(0.2)
    time.sleep(then_s)
    assert process.poll() is None, "the command ended before the test could stop it"
    os.killpg(process.pid, signal.SIGTERM)
    code = process.wait(timeout=120)
    reader.join(timeout=60)
    return code, b"".join(chunks).decode()


def test_sigterm_to_the_process_group_ends_the_command_as_ctrl_c(tmp_path):
    out = tmp_path / "wavefield.zarr"
    argv = ["synth", "global", "--sensors", "4096", "--out", str(out), "--secret", SECRET]
    # The synthesis's phase has run 2 s (its progress line has begun), then 5 s more: the
    # workers are in their tasks.
    code, err = _stopped_by_sigterm([*SEISCTF, *argv], b"synth global: ", then_s=5)
    assert code == 128 + signal.SIGTERM
    assert "seisctf: terminated; nothing unfinished was marked complete" in err, err
    assert "leaked semaphore" not in err and "Warning" not in err and "Traceback" not in err
    attrs = json.loads((out / "zarr.json").read_text()).get("attributes", {})
    assert attrs.get(cv.ATTR_COMPLETE) is not True


# Tasks that compress with Blosc (numcodecs then makes its multiprocessing lock) and outlast the
# nanny's 4 s between asking a worker to close and killing it, run on the embedded cluster as a
# command runs them (`dask_client`, `sigterm_as_interrupt`, `fast_exit`).
KILLED_IN_A_TASK = """
import sys, time
import dask, numcodecs, numpy as np
from seisctf.cli import fast_exit
from seisctf.cli._termination import sigterm_as_interrupt
from seisctf.cluster import dask_client

def compress_then_wait(k):
    numcodecs.Blosc().encode(np.arange(1000.0) * k)
    time.sleep(60)

with sigterm_as_interrupt():
    try:
        with dask_client(None, n_workers=2, quiet=True):
            print("computing", file=sys.stderr, flush=True)
            dask.compute(*[dask.delayed(compress_then_wait)(k) for k in (1, 2)])
    except KeyboardInterrupt:
        print("terminated", file=sys.stderr, flush=True)
fast_exit(143)
"""


def test_workers_killed_in_a_task_leave_no_semaphore_behind():
    # The resource tracker warns of every semaphore of the command's processes left when the
    # last of them ends (and removes it). /dev/shm is no measure here: the suite's other
    # process makes and removes its own meanwhile.
    code, err = _stopped_by_sigterm([sys.executable, "-c", KILLED_IN_A_TASK], b"computing", 3)
    assert code == 143 and "terminated" in err, err
    assert "leaked semaphore" not in err and "Warning" not in err, err


@pytest.mark.parametrize("convention", ["reference", "paper"])
def test_a_submission_of_huge_values_scores_minus_100_without_warnings(convention, tmp_path):
    truth_url, manifest, truth = write_tiny_truth(tmp_path, SECRET)
    # Finite float64 values whose squares overflow: the relative errors are beyond any bound,
    # so every score is clipped to -100 (the contract's clip of 100 · (1 − error)).
    huge = {name: np.full(array.shape, 1e200) for name, array in truth.items()}
    submission = write_npz(huge, tmp_path / "huge.npz")
    scores_file = tmp_path / "scores.json"
    argv = ["score", "ctf", "--truth", truth_url, "--submission", str(submission)]
    argv += ["--convention", convention, "--json", str(scores_file), "--quiet"]
    run = subprocess.run(
        [*SEISCTF, *argv], capture_output=True, text=True, env=environment(), timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""  # no RuntimeWarning from the workers or the client
    result = json.loads(scores_file.read_text())
    assert result["scores"] == {name: -100.0 for name in cv.SCORE_NAMES}
    assert result["avg_score"] == -100.0
