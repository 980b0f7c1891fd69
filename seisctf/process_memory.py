"""This process's memory: its peak RSS, and giving the C heap's free pages back."""

from __future__ import annotations

import contextlib
import sys


def reset_peak_memory() -> None:
    """Restart this process's peak-RSS count (Linux: `/proc/self/clear_refs` ← 5). Run it on
    workers (`client.run(reset_peak_memory)`) before what you measure: a worker forked from the
    fork server otherwise starts with the server's high-water mark."""
    with contextlib.suppress(OSError):
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc `malloc_trim(0)`; elsewhere
    nothing). glibc keeps what large freed objects held (an obspy Inventory of 10^3 stations:
    ~80 MiB) and Python's small objects come from mappings of their own, so without this that
    memory stays resident and unused until the process ends."""
    import ctypes

    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def peak_memory_bytes() -> int:
    """Peak RSS of this process since start or `reset_peak_memory` (Linux VmHWM; elsewhere
    `ru_maxrss`)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# distributed's debugging record of each process (`distributed.admin.low-level-log-length`,
# 1,000 by default): the last messages of every stream (each under 1 MB), transitions, events.
# A client keeps every graph it sent that way (an ingest of 10^5 files: its 22 waves' graphs,
# 16 MiB at the end) and a scheduler the tasks it sent each worker; nothing here reads them.
DEBUG_LOG_LENGTH = 0


def drop_debug_logs() -> None:
    """Make `DEBUG_LOG_LENGTH` distributed's default in this process (a user's dask config
    still wins), before its clients, schedulers and workers start (their logs are sized then).
    Once a process: each call would add a layer to dask's defaults."""
    import dask
    import distributed  # noqa: F401 - its defaults first: they would replace this one

    ours = {"distributed": {"admin": {"low-level-log-length": DEBUG_LOG_LENGTH}}}
    if ours not in dask.config.defaults:
        dask.config.update_defaults(ours)


_gc_diagnosis_held = False


def hold_gc_diagnosis() -> None:
    """Turn distributed's garbage-collection timing on for the life of this process, from the
    calling thread, before its schedulers and workers start.

    Each scheduler and worker turns it on as it starts and off as it closes, by adding and
    removing a `gc.callbacks` entry from its event loop's thread. A full collection running in
    another thread runs finalizers that let that thread in: an entry added between the
    collection's start and stop sees a stop without a start and prints "Exception ignored …
    AssertionError" on stderr (seen on a command's embedded cluster). Held here, the entry is
    added once and never removed, so starting and closing change no list."""
    global _gc_diagnosis_held
    from distributed.gc import enable_gc_diagnosis

    if not _gc_diagnosis_held:
        enable_gc_diagnosis()
        _gc_diagnosis_held = True


def prepare_process() -> None:
    """What this process needs before a distributed client, scheduler or worker starts in it:
    `drop_debug_logs` and `hold_gc_diagnosis`."""
    drop_debug_logs()
    hold_gc_diagnosis()
