"""distributed's garbage-collection timing stays out of seisctf's processes (`skip_gc_diagnosis`):
no gc callback in the command's process or its workers, so no "Exception ignored" traceback
from a scheduler starting during a collection (made exact here by a finalizer that does what a
starting scheduler does), and no callback that lets other threads in during a collection
inside `sys._current_frames()` (the deadlock it caused in a worker)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import cloudpickle
import pytest

from seisctf.cluster import dask_client

# A cyclic object whose finalizer turns distributed's diagnosis on mid-collection, as a
# scheduler's event loop thread does when the collection's finalizers let it run.
COLLECTION_WITH_A_STARTING_SCHEDULER = textwrap.dedent(
    """
    import gc, sys
    import distributed.gc
    from seisctf.process_memory import skip_gc_diagnosis

    if sys.argv[1] == "started-first":  # a scheduler had added its callback already
        distributed.gc.enable_gc_diagnosis()
    if sys.argv[1] != "not-skipped":
        skip_gc_diagnosis()

    class StartsAScheduler:
        def __del__(self):
            distributed.gc.enable_gc_diagnosis()

    node = StartsAScheduler()
    node.cycle = node
    del node
    gc.collect()
    hooked = distributed.gc._gc_diagnosis._gc_callback in gc.callbacks
    distributed.gc.disable_gc_diagnosis()  # a scheduler closing: nothing to remove
    print("collected", "hooked" if hooked else "not hooked")
    """
)
# The probe runs on the scheduler and workers, which cannot import this module: sent by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", COLLECTION_WITH_A_STARTING_SCHEDULER, mode],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("mode", ["skipped", "started-first", "not-skipped"])
def test_a_scheduler_starting_during_a_collection_hooks_nothing_when_skipped(mode):
    run = _run(mode)
    assert run.returncode == 0 and "collected" in run.stdout, run.stderr
    if mode == "not-skipped":  # distributed's own behaviour, which the skip avoids
        assert "assert start is not None" in run.stderr, run.stderr
        assert "collected hooked" in run.stdout
    else:
        assert "Exception ignored" not in run.stderr and "Traceback" not in run.stderr, run.stderr
        assert "collected not hooked" in run.stdout


def _hooked() -> bool:
    """Whether distributed's gc callback is installed in this process."""
    from distributed import gc as diagnosis

    return diagnosis._gc_diagnosis._gc_callback in gc.callbacks


def test_the_embedded_cluster_and_its_workers_run_without_the_gc_hook():
    with dask_client(None, quiet=True) as client:
        assert not _hooked()
        assert set(client.run(_hooked).values()) == {False}
        assert client.run_on_scheduler(_hooked) is False
