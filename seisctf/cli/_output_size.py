"""Room for an output, checked before any work: a command that would write more than its target
can hold is refused (exit 3) with its estimate, unless `--yes-really-large` is given. A local
target holds the free space of its file system; an object store or any other URL, whose free
space cannot be known, `UNKNOWN_ROOM_BYTES`."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from seisctf.cli._checks import local_path
from seisctf.errors import InvalidInput
from seisctf.synth.output_sizes import OutputSize, human_bytes

OVERRIDE_FLAG = "--yes-really-large"
# What a command writes to an object store (or another URL) without OVERRIDE_FLAG: 100 times
# the default global wavefield of the largest shipped layout, and far above any demo.
UNKNOWN_ROOM_BYTES = 100 * 10**9


def override_option(parser: argparse.ArgumentParser) -> None:
    """`--yes-really-large`, read by `refuse_oversize`."""
    parser.add_argument(
        OVERRIDE_FLAG,
        dest="yes_really_large",
        action="store_true",
        help="write the output even when its estimated size (uncompressed) is above the free "
        f"space of its local target, or above {human_bytes(UNKNOWN_ROOM_BYTES)} for an object "
        "store (default: refuse, printing the estimate)",
    )


def existing_ancestor(path: Path) -> Path:
    """`path`, or its nearest existing parent folder (the file system it will be written to)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def room_for(url: str) -> tuple[int, str]:
    """(bytes `url` can take, how that was found) for an output about to be written there."""
    path = local_path(url)
    if path is None:
        scheme = url.split("://", 1)[0]
        return UNKNOWN_ROOM_BYTES, (
            f"above the {human_bytes(UNKNOWN_ROOM_BYTES)} seisctf writes to {scheme}:// without "
            f"{OVERRIDE_FLAG} (free space there cannot be known)"
        )
    folder = existing_ancestor(path)
    free = shutil.disk_usage(folder).free
    return free, f"more than the {human_bytes(free)} free at {folder}"


def refuse_oversize(
    sizes: Sequence[OutputSize], url: str, args: argparse.Namespace, what: str = ""
) -> None:
    """InvalidInput naming `url`, the estimate and the room when the `sizes` written there (by
    `what`, default the first size's) do not fit, unless `--yes-really-large` was given (then
    the estimate is printed on stderr)."""
    room, found = room_for(url)
    total = sum(size.bytes for size in sizes)
    if total <= room:
        return
    parts = [
        size.formula() if len(sizes) == 1 else f"{size.what}: {size.formula()}" for size in sizes
    ]
    estimate = (
        f"{what or sizes[0].what} writes about {human_bytes(total)} ({'; '.join(parts)}; "
        "uncompressed)"
    )
    if getattr(args, "yes_really_large", False):
        print(f"seisctf: {url}: {estimate}, {found}: writing it ({OVERRIDE_FLAG})", file=sys.stderr)
        return
    raise InvalidInput(url, f"{estimate}, {found}; give {OVERRIDE_FLAG} to write it anyway")
