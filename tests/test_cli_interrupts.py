"""What a user sees when a command is stopped or its cluster is not what they expected, through
the `seisctf` command: Ctrl-C (exit 130, one line, nothing marked complete, no process left), a
scheduler that is gone (exit 3 naming it, within seconds), a failure on the embedded cluster
(its one line and nothing of the cluster's shutdown), progress in a log (one line per phase, no
carriage returns) and in a terminal (distributed's bar), the dashboard link only where one is
served."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import obspy
import psutil
import pytest
from conftest import write_tiny_truth
from servers import free_port

import seisctf.cluster
from seisctf import storage
from seisctf.cli import EXIT_INTERRUPTED, EXIT_INVALID_INPUT, main
from seisctf.cluster import SCHEDULER_ENV, SCHEDULER_TIMEOUT_S
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

SEISCTF = str(Path(sys.executable).parent / "seisctf")
BAD = Path(__file__).parent / "data" / "bad"
# A line per finished phase outside a terminal: "LABEL: N tasks done in 1.2 s", or with "…"
# before "done" where the phase's start was shown while it ran.
PHASE_LINE = re.compile(r"^[\w ]+: \d+ tasks?( …)? done in \d+\.\d s$")
INTERRUPTED = "seisctf: interrupted; nothing unfinished was marked complete"


def _read_until(process: subprocess.Popen, marker: str, timeout_s: float) -> str:
    """Read the process's stderr (a pipe) until `marker` shows up (a line may be unfinished)."""
    seen = b""
    fd = process.stderr.fileno()
    deadline = time.monotonic() + timeout_s
    while marker.encode() not in seen:
        exited = process.poll() is not None
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 65536)
            seen += chunk
            if chunk or not exited:
                continue
        if exited or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"no {marker!r} on stderr (rc {process.poll()}):\n{seen!r}")
    return seen.decode()


def _assert_only_the_cluster_banner_and_phases(lines: list[str]) -> None:
    assert lines[0].startswith("dask: embedded LocalCluster, "), lines
    assert all(PHASE_LINE.match(line) for line in lines[1:]), lines


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(argv: list[str], marker: str) -> tuple[str, str, list[psutil.Process]]:
    """Run `seisctf ARGV` in a session of its own, and once `marker` is on its stderr send
    SIGINT to its whole process group, as a terminal's Ctrl-C does (the command, the embedded
    cluster's workers, multiprocessing's helpers). Returns stderr before and after the signal
    and the child processes there were; asserts the exit code, no traceback, nothing on
    stdout."""
    process = subprocess.Popen(
        [SEISCTF, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # Ctrl-C handled as in a terminal's foreground command, however pytest was started:
        # a shell's background job (`make test &`) ignores SIGINT, and its children inherit that.
        preexec_fn=_sigint_default,
    )
    try:
        before = _read_until(process, marker, timeout_s=600)
        children = psutil.Process(process.pid).children(recursive=True)
        os.killpg(process.pid, signal.SIGINT)
        stdout, after = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    after = after.decode()
    assert process.returncode == EXIT_INTERRUPTED, before + after
    assert "Traceback" not in before + after
    assert stdout == b""  # no "wrote ..."
    return before, after, children


def _assert_none_left(children: list[psutil.Process]) -> None:
    """The workers, the fork server and the resource tracker: none is left."""
    assert len(children) >= 3
    _, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [child.pid for child in alive]


def test_ctrl_c_during_synth_global_prints_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "global.zarr"
    # Interrupted while computing: the phase's line starts once it has run for a while.
    before, after, children = _interrupt(
        ["synth", "global", "--out", str(out), "--sensors", "50", "--duration", "10000"],
        " tasks …",
    )
    assert "\nsynth global: " in before
    lines = after.splitlines()
    # The phase's line is ended, then the one line of the interrupt.
    assert re.fullmatch(r" stopped after \d+\.\d s", lines[0]), after
    assert len(lines) == 2 and lines[1].startswith(INTERRUPTED), after
    assert out.exists()  # the store was started ...
    _assert_not_complete(out)  # ... and is not marked complete
    _assert_none_left(children)


def test_ctrl_c_during_an_ingest_prints_one_line_and_leaves_nothing(tmp_path):
    """Interrupted as soon as the embedded cluster is up, while the ingest scans and writes."""
    folder = tmp_path / "mseed"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for station in ("A", "B", "C"):
        samples = rng.standard_normal(100 * 3600 * 3).astype(np.float32)
        header = {"network": "XX", "station": station, "channel": "HHZ", "sampling_rate": 100.0}
        trace = obspy.Trace(samples, header=header)
        trace.write(str(folder / f"{station}.mseed"), format="MSEED")
    out = tmp_path / "waveforms.zarr"
    # The end of the line `dask: embedded LocalCluster, N workers; dashboard http://…/status`.
    _, after, children = _interrupt(
        ["ingest", "waveforms", str(folder), "--out", str(out)], "/status\n"
    )
    lines = after.splitlines()
    assert lines[-1].startswith(INTERRUPTED), after
    # Before it at most the end of the phase line it stopped.
    assert len(lines) == 1 or (len(lines) == 2 and " stopped after " in lines[0]), after
    _assert_not_complete(out)
    _assert_none_left(children)


def gone_reason(timeout_s: int) -> str:
    """The refusal's reason, as a pattern: the system's when one reached the command, else the
    timeout's (on a loaded machine the wait can run out inside an attempt, before any refusal
    is recorded)."""
    return f"(connection refused; tried for {timeout_s} s|no answer within {timeout_s} s)"


GONE_REASON = gone_reason(SCHEDULER_TIMEOUT_S)
# The wait of a test about what the refusal names, not how long it waits (the test above's).
SHORT_TIMEOUT_S = 2


def test_a_scheduler_that_is_gone_is_named_within_seconds(tmp_path, capsys):
    address = f"tcp://127.0.0.1:{free_port()}"
    out = tmp_path / "global.zarr"
    argv = ["synth", "global", "--out", str(out), "--sensors", "20", "--duration", "60"]
    start = time.monotonic()
    code = main([*argv, "--scheduler", address])
    elapsed = time.monotonic() - start
    assert code == EXIT_INVALID_INPUT
    waiting, refusal = capsys.readouterr().err.splitlines()
    assert (
        waiting == f"dask: waiting for the scheduler at {address} (up to {SCHEDULER_TIMEOUT_S} s)"
    )
    assert re.fullmatch(
        f"seisctf: invalid input: --scheduler: no Dask scheduler answers at {re.escape(address)} "
        f"\\({GONE_REASON}\\); start one with `dask scheduler` or drop --scheduler",
        refusal,
    ), refusal
    assert SCHEDULER_TIMEOUT_S <= elapsed < SCHEDULER_TIMEOUT_S + 10  # distributed waits 30 s
    assert not out.exists()


def test_a_scheduler_from_the_environment_that_is_gone(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(SCHEDULER_ENV, "127.0.0.1:1")
    monkeypatch.setattr(seisctf.cluster, "SCHEDULER_TIMEOUT_S", SHORT_TIMEOUT_S)
    out = tmp_path / "global.zarr"
    code = main(["synth", "global", "--out", str(out), "--sensors", "20", "--quiet"])
    assert code == EXIT_INVALID_INPUT
    (refusal,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(
        f"seisctf: invalid input: \\${SCHEDULER_ENV}: no Dask scheduler answers at 127.0.0.1:1 "
        f"\\({gone_reason(SHORT_TIMEOUT_S)}\\); start one with `dask scheduler` or unset "
        f"{SCHEDULER_ENV}",
        refusal,
    ), refusal
    monkeypatch.setenv(SCHEDULER_ENV, "no-port")
    assert main(["synth", "global", "--out", str(out), "--quiet"]) == EXIT_INVALID_INPUT
    assert "'no-port' is not a Dask scheduler address" in capsys.readouterr().err
    assert not out.exists()
    # Nothing of the refused client stays in this process: the next computation runs here.
    assert dask.config.get("scheduler", None) is None
    assert dask.compute(da.ones(4, chunks=2).sum())[0] == 4


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([SEISCTF, *argv], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "progress"])
def test_a_failure_on_the_embedded_cluster_prints_its_one_line_only(tmp_path, quiet):
    """`ingest das` of a file no reader knows: the scan runs on the workers, the error is
    raised in this process, then the cluster shuts down (a progress feed still open on the
    scheduler, workers' heartbeats): nothing of that shutdown reaches stderr."""
    out = tmp_path / "das.zarr"
    bad = BAD / "das-unknown.tdms"
    run = _run("ingest", "das", str(bad), "--out", str(out), *(["--quiet"] if quiet else []))
    assert run.returncode == EXIT_INVALID_INPUT, run.stderr
    lines = run.stderr.splitlines()
    expected = f"seisctf: invalid input: {bad}: no input is readable (none of the 1 file(s) "
    assert lines[-1].startswith(expected), lines
    if quiet:
        assert len(lines) == 1, lines
    else:
        _assert_only_the_cluster_banner_and_phases(lines[:-1])
    assert "\r" not in run.stderr
    _assert_not_complete(out)


def test_an_error_raised_in_a_task_on_a_worker_is_not_logged_by_the_worker(tmp_path):
    """A submission chunk that does not decode fails a task on a worker (InvalidInput): the
    worker does not log "Compute Failed" with the task's traceback; the user sees one line."""
    truth_url, _, _ = write_tiny_truth(tmp_path, "a-secret-of-twenty-characters")
    result = tmp_path / "result.json"
    submission = BAD / "ctf-corrupt-chunk.zarr"
    run = _run(
        *("score", "ctf", "--truth", truth_url, "--submission", str(submission)),
        *("--json", str(result)),
    )
    assert run.returncode == EXIT_INVALID_INPUT, run.stderr
    lines = run.stderr.splitlines()
    assert lines[-1].startswith(f"seisctf: invalid input: {submission}:X5test: "), lines
    assert "Traceback" not in run.stderr and "Compute Failed" not in run.stderr
    assert lines[0].startswith("dask: embedded LocalCluster, ")
    # Between them the lines of phases, the failed one ended as such.
    failed = re.compile(r"^[\w ]+: \d+ tasks? … failed after \d+\.\d s$")
    assert all(PHASE_LINE.match(x) or failed.match(x) for x in lines[1:-1]), lines
    assert not result.exists()


def _assert_not_complete(store: Path) -> None:
    """Not there, or refused by the library's reader as incomplete."""
    if store.exists():
        with pytest.raises(InvalidInput, match="incomplete"):
            storage.open_dataset(StoreLocation(store))


def test_progress_outside_a_terminal_is_one_line_per_phase_and_no_dashboard_link(
    tmp_path, dask_cluster
):
    """stderr to a pipe (a log): no carriage-return frames. The suite's scheduler runs with
    `--no-dashboard`: no link is printed (it would be a 404)."""
    out = tmp_path / "waveforms.zarr"
    run = _run(*_ingest_good_mseed(out), "--scheduler", dask_cluster.address)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == f"dask: {dask_cluster.address}; no dashboard"
    phases = run.stderr.splitlines()[1:]
    assert [phase.split(":")[0] for phase in phases] == ["scan", "ingest waveforms"], phases
    assert all(PHASE_LINE.match(phase) for phase in phases), phases
    assert "\r" not in run.stderr and len(run.stderr) < 300
    assert storage.open_dataset(StoreLocation(out)).sizes  # complete


def test_progress_in_a_terminal_is_distributeds_bar(tmp_path, dask_cluster):
    """stderr on a terminal (a pseudo-terminal here): the bar, redrawn in place."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [SEISCTF, *_ingest_good_mseed(tmp_path / "waveforms.zarr")]
        + ["--scheduler", dask_cluster.address],
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    shown = b""
    while True:  # read the terminal until the command closes it
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: no process holds the terminal any more
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert process.wait(timeout=600) == 0, shown
    text = shown.decode()
    assert "\r\nscan:\r\n" in text and "\r\ningest waveforms:\r\n" in text  # titles, then
    assert "\r[" in text and "% Completed" in text  # bars redrawn in place


def _ingest_good_mseed(out: Path) -> list[str]:
    """A short ingest (a few seconds): two phases on the cluster, scan and write."""
    return ["ingest", "waveforms", str(BAD / "support" / "good.mseed"), "--out", str(out)]
