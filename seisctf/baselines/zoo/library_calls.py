"""What the library-backed zoo families share: calls into a library kept silent, and the
one-step training pairs of a list of series.

- `quiet()`: a block in which a library's prints (stdout, stderr) and warnings are dropped;
  every import of and call into a zoo library is made inside one, so that `seisctf` stays
  clean whatever banners or convergence warnings the library emits (a failed fit still raises,
  and the zoo scores it as failed). Handlers added to the root logger inside the block are
  removed when it ends: pydmd calls `logging.basicConfig` when imported and logs through
  `logging.info`, which installs one when the root has none; left in place, it would write to
  the block's discarded buffer for good. Swapping `sys.stdout`, the warning filters and the
  root's handlers is process-wide, so one thread at a time is inside such a block
  (QUIET_LOCK): two threads' blocks would otherwise restore each other's in the wrong order.
- `import_quietly(name)`: a library imported inside `quiet()`; an empty folder it made in the
  temporary directory on import is removed (reservoirpy makes `reservoirpy-temp-<uuid>` in
  every process that imports it, for a dataset cache the zoo never uses: one a Dask worker),
  and the optional modules it would import for features the zoo never uses are not imported
  (`UNUSED_IMPORTS`: neuraloperator imports wandb, its training logger, when installed, and
  wandb makes two temporary folders on import that only a clean exit removes, so every Dask
  worker process that was stopped left them behind).
- `one_step_pairs(series)`: each (time, features) series' rows but the last (the inputs) and
  rows but the first (the targets), the pairs of consecutive rows a one-step model learns
  from; pairs never straddle two series.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from types import ModuleType

import numpy as np

QUIET_LOCK = threading.RLock()
# Modules zoo libraries import if installed, for features the zoo never uses (see the doc).
UNUSED_IMPORTS = ("wandb",)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Drop prints to stdout and stderr and every warning raised inside the block; the root
    logger keeps the handlers it had."""
    root = logging.getLogger()
    with (
        QUIET_LOCK,
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        before = list(root.handlers)
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            for handler in [h for h in root.handlers if h not in before]:
                root.removeHandler(handler)


@contextlib.contextmanager
def unused_imports_blocked() -> Iterator[None]:
    """Inside the block, importing one of UNUSED_IMPORTS not imported yet fails as a module
    that is not installed does (the libraries import them in `try`); after it, they import as
    usual."""
    blocked = [name for name in UNUSED_IMPORTS if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # Python's "not importable" mark
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_quietly(name: str) -> ModuleType:
    """Import `name` inside `quiet()` without UNUSED_IMPORTS, removing the empty scratch
    folder it may leave."""
    with quiet(), unused_imports_blocked():
        module = importlib.import_module(name)
    scratch = getattr(module, "_TEMPDIR", None)  # reservoirpy's
    if isinstance(scratch, str) and os.path.dirname(scratch) == tempfile.gettempdir():
        with contextlib.suppress(OSError):  # not empty, or already gone: leave it
            os.rmdir(scratch)
    return module


def one_step_pairs(series: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, targets): per series of at least two rows, its rows [0, T−1) and [1, T)."""
    kept = [x for x in series if x.shape[0] >= 2]
    if not kept:
        raise ValueError("no series has two rows to learn a step from")
    return [x[:-1] for x in kept], [x[1:] for x in kept]
