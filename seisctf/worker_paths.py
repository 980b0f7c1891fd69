"""Whether the workers of a cluster given by address see the local paths a command names.

The embedded cluster runs on this machine and sees its files. A scheduler given by address
(`--scheduler`, `$SEISCTF_SCHEDULER`) may have workers on other machines, each with its own file
system: a local store or input file that they cannot see fails in a worker after the graph is
built (a traceback from a task) or, for an output, is written piecemeal to each worker's own disk.
`check_worker_paths` asks every worker once, before any work, in one round trip: an input must
exist for each worker (a file with the same size as here), and an output's folder (its nearest
existing ancestor) must be the one this machine writes to, which a small probe file created
there and removed at once tells.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from seisctf.errors import InvalidInput
from seisctf.wording import counted

PROBE_PREFIX = ".seisctf-worker-probe-"
# Seconds to wait for every worker's answer; without one in time the command goes on unchecked
# (a busy or dying worker must not stop a command that the others can run).
ANSWER_TIMEOUT_S = 30
REMEDY = (
    "with a remote cluster, give s3:// (or other object-store) URLs, or paths on a file system "
    "that every worker mounts at the same place"
)


def remote_client() -> Any | None:
    """This process's Dask client when it is attached to a scheduler given by address (no
    cluster object of its own); None with no client yet or an embedded cluster."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    return client if getattr(client, "cluster", None) is None else None


def seen_here(items: Sequence[tuple[str, int | None]]) -> list[bool]:
    """Run on each worker: for each (absolute path, size in bytes or None), whether the path
    exists here (and, for a size, is a file of that size)."""
    return [
        os.path.exists(path) and (size is None or os.path.getsize(path) == size)
        for path, size in items
    ]


def _nearest_folder(path: Path) -> Path:
    """The nearest existing ancestor of `path` (absolute)."""
    return next(folder for folder in path.parents if folder.exists())


@contextlib.contextmanager
def _probes(outputs: Iterable[Path]) -> Iterator[list[tuple[str, int | None]]]:
    """Per output: (a probe file made in its nearest existing folder, 0), or (that folder, None)
    where no file can be made there; the probes are removed on exit."""
    items: list[tuple[str, int | None]] = []
    made: list[str] = []
    try:
        for output in outputs:
            folder = _nearest_folder(output)
            try:
                handle, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=folder)
            except OSError:
                items.append((str(folder), None))
                continue
            os.close(handle)
            made.append(probe)
            items.append((probe, 0))
        yield items
    finally:
        for probe in made:
            with contextlib.suppress(OSError):
                os.unlink(probe)


def _input_item(path: Path) -> tuple[str, int | None]:
    return str(path), path.stat().st_size if path.is_file() else None


def check_worker_paths(
    client: Any, inputs: Sequence[str | Path], outputs: Sequence[str | Path]
) -> None:
    """InvalidInput naming the first local input (must exist for every worker) or output (its
    folder must be this machine's) that a worker of `client`'s cluster cannot see. Inputs that
    do not exist here are left to the command's own checks; paths are made absolute here, as
    the tasks get them."""
    given_inputs = [(str(p), Path(p).absolute()) for p in inputs if Path(p).exists()]
    given_outputs = [(str(p), Path(p).absolute()) for p in outputs]
    if not given_inputs and not given_outputs:
        return
    with _probes(path for _, path in given_outputs) as probes:
        items = [_input_item(path) for _, path in given_inputs] + probes
        try:
            answers = client.run(
                seen_here, items, on_error="return", callback_timeout=ANSWER_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            return
    seen = [answer for answer in answers.values() if isinstance(answer, list)]
    address = client.scheduler.address
    for index, (given, path) in enumerate([*given_inputs, *given_outputs]):
        blind = sum(not answer[index] for answer in seen)
        if not blind:
            continue
        is_output = index >= len(given_inputs)
        target = f"the folder {_nearest_folder(path)} of this output" if is_output else "it"
        raise InvalidInput(
            given,
            f"the workers at {address} cannot see {target} ({blind} of "
            f"{counted(len(seen), 'worker')}); "
            f"{REMEDY}",
        )
