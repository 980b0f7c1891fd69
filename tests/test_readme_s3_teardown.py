"""The README's "Try S3 locally" stops its server in bounded time, whatever the server does: its
teardown lines (from `kill $WEED_PID` to the block's end), run as written under `bash -e` against
a stand-in server that ignores SIGTERM, return within their bound and leave nothing running.
(SeaweedFS itself needs about 25 s to stop on SIGTERM; a plain `wait` waits for as long as the
server takes, or for every other job of the shell.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from test_readme_first_sections import BLOCKS

# The README's bound (30 s) and the time to run the rest.
MAX_SECONDS = 45


def teardown() -> str:
    """The S3 block's lines from the first `kill $WEED_PID` on."""
    (block,) = [block for block in BLOCKS if block.runs and "weed server" in block.code]
    lines = block.code.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kill $WEED_PID"))
    return "\n".join(lines[start:]) + "\n"


def test_the_s3_teardown_ends_even_when_the_server_ignores_sigterm(tmp_path):
    # A server that ignores SIGTERM once it says so (file `ready`).
    stand_in = (
        "bash -c 'trap \"\" TERM; touch ready; while sleep 0.2; do :; done' &\n"
        "WEED_PID=$!\necho $WEED_PID > server.pid\n"
        "while [ ! -e ready ]; do sleep 0.1; done\n"
    )
    script = stand_in + teardown()
    started = time.monotonic()
    process = subprocess.Popen(
        ["bash", "-e", "-c", script], cwd=tmp_path, start_new_session=True, text=True
    )
    try:
        code = process.wait(timeout=MAX_SECONDS + 30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what is left of its process group
            os.killpg(process.pid, signal.SIGKILL)
    seconds = time.monotonic() - started
    assert code == 0
    assert seconds < MAX_SECONDS, f"the teardown took {seconds:.0f} s"
    server = int((tmp_path / "server.pid").read_text())
    assert not os.path.exists(f"/proc/{server}") or _is_zombie(server)


def _is_zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
