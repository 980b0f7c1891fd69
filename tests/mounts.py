"""Folders that refuse writes, for tests of commands that write there: read-only (chmod for a user
other than root, whom chmod does not stop; a read-only bind mount in a private mount namespace for
root) and full (a small tmpfs, in a private mount namespace: root only).

Each runs a shell script (`sh -c`, with the arguments given as "$@") in a mount namespace of its
own (`unshare -m`): the mounts vanish with it, and the test's other processes never see them."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path


def namespace_requirement() -> str | None:
    """Why a private mount namespace with its own mounts cannot be made here, or None."""
    if os.geteuid() != 0:
        return f"mounts need root (tests run as uid {os.geteuid()})"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "`unshare` or `mount` is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"`unshare -m` + `mount -t tmpfs` fails here: {probe.stderr.strip()}"
    return None


def in_namespace(
    mounts: str, script: str, args: Sequence[str] = (), **run
) -> subprocess.CompletedProcess:
    """`mounts` then `script` (shell, "$@" = `args`) in a private mount namespace."""
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", f"set -e\n{mounts}\nset +e\n{script}", "sh", *args],
        capture_output=True,
        text=True,
        **run,
    )


def run_read_only(folder: Path, argv: Sequence[str], **run) -> subprocess.CompletedProcess:
    """`argv` with `folder` read-only: a bind mount remounted read-only as root; else the
    folder's write bits removed (restored afterwards)."""
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, **run)
        finally:
            folder.chmod(mode)
    where = shlex.quote(str(folder))
    mounts = f"mount --bind {where} {where}\nmount -o remount,bind,ro {where}"
    return in_namespace(mounts, 'exec "$@"', argv, **run)


def run_on_tmpfs(folder: Path, size: str, script: str, args: Sequence[str] = (), **run):
    """`script` (shell, "$@" = `args`) with a tmpfs of `size` (e.g. "64k") mounted on `folder`;
    what is written there vanishes with the namespace (copy out what the test reads)."""
    where = shlex.quote(str(folder))
    return in_namespace(f"mount -t tmpfs -o size={size} tmpfs {where}", script, args, **run)
