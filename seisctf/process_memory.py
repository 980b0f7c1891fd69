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


_gc_diagnosis_skipped = False


def skip_gc_diagnosis() -> None:
    """Keep distributed's garbage-collection timing out of this process for good: its
    `gc.callbacks` entry is removed if a scheduler or worker added it, and distributed counts it
    as on, so none adds or removes it again.

    Each scheduler and worker adds that entry as it starts and removes it as it closes, from its
    event loop's thread. Two faults follow. An entry added while a full collection runs in
    another thread (its finalizers let that thread in) sees a stop without a start and prints
    "Exception ignored … AssertionError" on a command's stderr. And the entry, called inside a
    collection, lets other threads in (psutil, logging): a collection inside
    `sys._current_frames()` (a worker's profiler, every 10 ms) then waits for the GIL while
    holding the interpreter's thread list, which a thread being started (zarr's, fsspec's)
    waits for while holding the GIL, and the worker hangs (CPython 3.11). The timing only fed
    log lines seisctf silences."""
    global _gc_diagnosis_skipped
    import gc

    from distributed import gc as diagnosis

    if _gc_diagnosis_skipped:
        return
    with diagnosis._gc_diagnosis_lock:
        hook = diagnosis._gc_diagnosis
        if hook._gc_callback in gc.callbacks:
            gc.callbacks.remove(hook._gc_callback)
        hook._enabled = True
        diagnosis._gc_diagnosis_users += 1  # never 0 again: never added, never removed
    _gc_diagnosis_skipped = True


def prepare_process() -> None:
    """What this process needs before a distributed client, scheduler or worker starts in it:
    `drop_debug_logs` and `skip_gc_diagnosis`."""
    drop_debug_logs()
    skip_gc_diagnosis()
