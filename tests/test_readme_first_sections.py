"""The README's first sections run as written, as a newcomer runs them top to bottom: every shell
block up to and including "Try S3 locally" runs verbatim through `bash -e` in a fresh temporary
working directory with the virtualenv active, and exits 0. A block that cannot run there is
preceded by `<!-- readme-test: skip: REASON -->` (the first, `make demo` and `make test`, is the
set-up and this very suite); python, yaml and text blocks are not shell. A block's `sleep`s run
TIME_SCALE times faster (`fast_sleep`): the S3 block's wait for its server to stop takes 3 s, not
its 30 (SeaweedFS needs about 25 s to stop on SIGTERM; the README's bound is
tests/test_readme_s3_teardown.py's)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LAST_SECTION = "### Try S3 locally"
SHELL_LANGUAGES = {"", "sh", "bash", "shell"}
SKIP = re.compile(r"<!-- readme-test: skip: (?P<reason>.*\S) -->")
VENV = Path(sys.executable).parents[1]
TIME_SCALE = 10


def fast_sleep(folder: Path, log: Path) -> Path:
    """A `sleep` in `folder/bin` (returned) that appends the seconds it is asked for to `log`,
    then sleeps them over TIME_SCALE with the system's sleep: put first on PATH."""
    real_sleep = shutil.which("sleep")
    fast = folder / "bin" / "sleep"
    fast.parent.mkdir(parents=True)
    fast.write_text(
        f'#!/bin/sh\necho "$1" >> "{log}"\n'
        f'exec {real_sleep} "$(awk -v s="$1" \'BEGIN {{ print s / {TIME_SCALE} }}\')"\n'
    )
    fast.chmod(0o755)
    return fast.parent


@dataclass(frozen=True)
class Block:
    """A fenced code block: its first line's number in the README (1-based), its language, its
    text, and the reason it is not run (None: it runs)."""

    line: int
    language: str
    code: str
    skip: str | None

    @property
    def runs(self) -> bool:
        return self.language in SHELL_LANGUAGES and self.skip is None


def first_section_blocks(text: str) -> list[Block]:
    """The fenced blocks from the README's start to the heading after `LAST_SECTION`."""
    lines = text.splitlines()
    start = lines.index(LAST_SECTION)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    blocks, index = [], 0
    while index < end:
        if not lines[index].startswith("```"):
            index += 1
            continue
        closing = lines.index("```", index + 1)
        before = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marker = SKIP.fullmatch(before.strip())
        blocks.append(
            Block(
                line=index + 1,
                language=lines[index][3:].strip(),
                code="\n".join(lines[index + 1 : closing]) + "\n",
                skip=marker["reason"] if marker else None,
            )
        )
        index = closing + 1
    return blocks


BLOCKS = first_section_blocks(README.read_text())


def starts_weed(code: str) -> bool:
    """Whether a block starts `weed server` (global options such as `-logdir` between)."""
    return re.search(r"^weed (-\S+ )*server ", code, flags=re.MULTILINE) is not None


def test_the_first_sections_run_what_a_newcomer_runs():
    """The blocks that do not run say why; the first is `make demo`/`make test`; the S3 part
    runs, and starts its own server."""
    assert BLOCKS[0].code.split()[:2] == ["make", "demo"] and BLOCKS[0].skip
    for block in BLOCKS:
        assert block.language in SHELL_LANGUAGES | {"python", "yaml", "text"}, block.line
    running = [block for block in BLOCKS if block.runs]
    assert any(starts_weed(block.code) and "seisctf " in block.code for block in running)
    assert all(not block.skip or len(block.skip) > 10 for block in BLOCKS)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: f"line{b.line}")
def test_a_readme_block_runs_as_written(block: Block, tmp_path):
    """Run in a fresh folder where `.venv` is the virtualenv (as in the checkout), after
    `. .venv/bin/activate`; this checkout first on the import path. Whatever the block starts
    in the background it must stop itself: nothing of its process group is left, and nothing
    of its server in /tmp (SeaweedFS's log files, the unix sockets of the README's ports)."""
    began = time.time()
    assert (VENV / "bin" / "activate").exists(), f"no virtualenv at {VENV}"
    (tmp_path / ".venv").symlink_to(VENV, target_is_directory=True)
    faster = fast_sleep(tmp_path / "time", tmp_path / "time" / "slept")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{faster}{os.pathsep}{os.environ['PATH']}",
    }
    process = subprocess.Popen(
        ["bash", "-e", "-c", f". .venv/bin/activate\n{block.code}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=600)
    finally:
        left = _stop_group(process.pid)
    assert process.returncode == 0, (
        f"README line {block.line} exited {process.returncode}:\n{output}"
    )
    assert not left, f"README line {block.line} left processes running: {left}"
    assert not tmp_leftovers(began), (
        f"README line {block.line} left in /tmp: {tmp_leftovers(began)}"
    )


def test_a_member_still_exiting_is_waited_for_and_one_left_running_is_reported():
    """The group check waits for a member that ends within the grace (as a cluster's worker
    tearing down after the command returns) and reports one that outlives it."""
    script = "sleep 1 & sleep 600 & exit 0"
    process = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    process.wait()
    left = _stop_group(process.pid, grace_seconds=4.0)
    assert len(left) == 1 and "sleep 600" in left[0], left


README_PORTS = (8333, 8888, 9333, 9340)  # the S3 block's `weed server` ports


def tmp_leftovers(since: float) -> list[str]:
    """SeaweedFS's log files in /tmp changed since `since` (s since the epoch) and the unix
    sockets of the README's ports there (a weed killed by SIGKILL leaves them)."""
    tmp = Path("/tmp")
    logs = [path for path in tmp.glob("weed.*") if path.lstat().st_mtime >= since]
    sockets = [
        path
        for port in README_PORTS
        for pattern in (f"seaweedfs-*-{port}.sock", f"seaweedfs-*-grpc-{port + 10000}.sock")
        for path in tmp.glob(pattern)
    ]
    return sorted(str(path) for path in logs + sockets)


def _group_members(group: int) -> list[str]:
    """`pgrep -a` lines of the process group's members still alive. An exited process not yet
    reaped (`<defunct>`: where the machine's init does not reap orphans, as in some containers)
    runs nothing and holds nothing but its entry."""
    listing = subprocess.run(
        ["pgrep", "-a", "-g", str(group)], capture_output=True, text=True
    ).stdout
    return [
        line.strip()
        for line in listing.splitlines()
        if line.strip() and not line.strip().endswith("<defunct>")
    ]


EXIT_GRACE_SECONDS = 10.0


def _stop_group(group: int, grace_seconds: float = EXIT_GRACE_SECONDS) -> list[str]:
    """SIGKILL what is left of the process group the test started; returns what was left
    running. A member still tearing down when the block returns (its command line already
    released: `pgrep` shows `[python3]`) is given `grace_seconds` to go; a server left
    behind outlives that."""
    deadline = time.monotonic() + grace_seconds
    left = _group_members(group)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _group_members(group)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return left
