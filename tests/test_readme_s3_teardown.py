"""The README's "Try S3 locally" stops its server in bounded time, whatever the server does: its
teardown lines (from `kill $WEED_PID` to the block's end), run as written under `bash -e` against
a stand-in server that ignores SIGTERM, return within their bound and leave nothing running.
(SeaweedFS itself needs about 25 s to stop on SIGTERM; a plain `wait` waits for as long as the
server takes, or for every other job of the shell.)

The teardown's `sleep`s run TIME_SCALE times faster (a `sleep` first on its PATH that logs each
duration asked for, then sleeps that much over TIME_SCALE): the README's bound is checked on the
seconds asked for, the rest on the wall clock."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

from test_readme_first_sections import BLOCKS, fast_sleep, starts_weed

README_BOUND_S = 30  # "after 30 s it is killed"
MAX_SECONDS = 45  # wall clock: the sleeps, compressed, and the time to run the rest


def teardown() -> str:
    """The S3 block's lines from the first `kill $WEED_PID` on."""
    (block,) = [block for block in BLOCKS if block.runs and starts_weed(block.code)]
    lines = block.code.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kill $WEED_PID"))
    return "\n".join(lines[start:]) + "\n"


def test_the_s3_teardown_ends_even_when_the_server_ignores_sigterm(tmp_path):
    real_sleep = shutil.which("sleep")
    # A server that ignores SIGTERM once it says so (file `ready`), on the real clock.
    stand_in = (
        f"bash -c 'trap \"\" TERM; touch ready; while {real_sleep} 0.2; do :; done' &\n"
        "WEED_PID=$!\necho $WEED_PID > server.pid\n"
        f"while [ ! -e ready ]; do {real_sleep} 0.1; done\n"
    )
    script = stand_in + teardown()
    slept = tmp_path / "slept"
    env = {**os.environ, "PATH": f"{fast_sleep(tmp_path, slept)}{os.pathsep}{os.environ['PATH']}"}
    started = time.monotonic()
    process = subprocess.Popen(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=env, start_new_session=True, text=True
    )
    try:
        code = process.wait(timeout=MAX_SECONDS + 30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what is left of its process group
            os.killpg(process.pid, signal.SIGKILL)
    seconds = time.monotonic() - started
    assert code == 0
    assert seconds < MAX_SECONDS, f"the teardown took {seconds:.0f} s"
    asked = [float(line) for line in slept.read_text().split()] if slept.exists() else []
    assert sum(asked) <= README_BOUND_S, f"the teardown sleeps {sum(asked):.0f} s"
    server = int((tmp_path / "server.pid").read_text())
    assert not os.path.exists(f"/proc/{server}") or _is_zombie(server)


def _is_zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
