"""Warnings that reached the user from the command line, each fixed where it arose, through the
CLI as a user runs it (`python -m seisctf.cli`, its embedded cluster, whose workers' stderr is
the command's):

- a command whose process group gets SIGTERM (`timeout`, a batch system's time limit) ends as
  Ctrl-C ends it, exit 143, nothing marked complete, and multiprocessing's resource tracker no
  longer warns of "leaked semaphore objects" after it (the workers had died with the signal);
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


def test_sigterm_to_the_process_group_ends_the_command_as_ctrl_c(tmp_path):
    out = tmp_path / "wavefield.zarr"
    argv = ["synth", "global", "--sensors", "4096", "--out", str(out), "--secret", SECRET]
    process = subprocess.Popen(
        [*SEISCTF, *argv],
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
    # The synthesis's phase has run 2 s (its progress line has begun), then 5 s more: the
    # workers are in their tasks (those made the semaphores the tracker warned of).
    while b"synth global: " not in b"".join(chunks):
        assert process.poll() is None, b"".join(chunks).decode()
        assert time.monotonic() - started < 300, b"".join(chunks).decode()
        time.sleep(0.2)
    time.sleep(5)
    assert process.poll() is None, "the synthesis ended before the test could stop it"
    os.killpg(process.pid, signal.SIGTERM)  # as `timeout` does: the whole process group
    assert process.wait(timeout=120) == 128 + signal.SIGTERM
    reader.join(timeout=60)  # EOF once the last writer of the pipe, the tracker too, is gone
    err = b"".join(chunks).decode()
    assert "seisctf: terminated; nothing unfinished was marked complete" in err, err
    assert "leaked semaphore" not in err and "Warning" not in err and "Traceback" not in err
    attrs = json.loads((out / "zarr.json").read_text()).get("attributes", {})
    assert attrs.get(cv.ATTR_COMPLETE) is not True


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
