"""Imported by the fork server the embedded cluster's workers fork from (`cluster`): what it
makes once, for every worker.

numcodecs' Blosc makes a multiprocessing lock, a named POSIX semaphore, on its first compression
in a process. Made in each worker, it was left to multiprocessing's resource tracker whenever a
worker was killed in a task: at a SIGTERM (`timeout`, a batch system's time limit), the nanny
kills a worker whose task has not finished 4 s after it was asked to close, and the tracker then
printed "There appear to be 1 leaked semaphore objects to clean up at shutdown" after the
command. Made here, the workers inherit it (numcodecs' lock is meant to be shared by processes
forked after it), and the server, which outlives them and exits normally, removes it."""

from __future__ import annotations

import numcodecs.blosc

numcodecs.blosc.get_mutex()
