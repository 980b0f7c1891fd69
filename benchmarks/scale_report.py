"""Shared pieces of the scale benchmarks: result tables, process-tree memory, fitted exponents.

Every scale section (`scale_ingest.py`, `scale_picking.py`, `scale_ctf.py`, `scale_scheduler.py`)
yields `Section`s; `bench_scale.py` prints them and writes them as markdown.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil


@dataclass(frozen=True)
class ScaleOptions:
    """What every scale section receives from `bench_scale.py`."""

    quick: bool  # CI-sized inputs: minutes in all, same code paths
    data: Path  # large inputs, generated once and reused (make_archive.py)
    workdir: Path  # stores and bundles written by the runs


@dataclass
class Section:
    """One table of a scale benchmark, with its command, goals and verdicts."""

    title: str
    columns: list[str]
    rows: list[list[object]] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)  # "goal: figure, met/missed"
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        lines += [f"| {' | '.join(self.columns)} |", "|" + "---|" * len(self.columns)]
        lines += [f"| {' | '.join(format_cell(cell) for cell in row)} |" for row in self.rows]
        lines += [""] + [f"- {goal}" for goal in self.goals]
        lines += [""] * bool(self.goals) + [note for note in self.notes]
        return "\n".join(lines).rstrip() + "\n"


def format_cell(value: object) -> str:
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def fitted_exponent(sizes: Sequence[float], costs: Sequence[float]) -> float:
    """Slope of log(cost) against log(size), least squares: 1.0 means linear growth."""
    slope, _ = np.polyfit(np.log(np.asarray(sizes, float)), np.log(np.asarray(costs, float)), 1)
    return float(slope)


def verdict(name: str, figure: str, met: bool) -> str:
    return f"{name}: {figure}, **{'met' if met else 'missed'}**"


@dataclass
class TreeMemory:
    """Peak RSS (bytes) of a process and of each of its descendants, by role."""

    peak_by_pid: dict[int, int] = field(default_factory=dict)
    role_by_pid: dict[int, str] = field(default_factory=dict)
    cpu_by_pid: dict[int, float] = field(default_factory=dict)  # user + system s, last sample

    def cpu_seconds(self) -> float:
        """CPU seconds of the whole tree (as last sampled: a process's final interval is lost),
        the work done whatever the machine's load."""
        return sum(self.cpu_by_pid.values())

    def peaks(self) -> dict[str, int]:
        """Peak RSS per role ('client', 'worker 1', …), workers numbered by pid order."""
        out: dict[str, int] = {}
        workers = sorted(pid for pid, role in self.role_by_pid.items() if role == "worker")
        for pid, peak in self.peak_by_pid.items():
            role = self.role_by_pid.get(pid, "other")
            if role == "worker":
                role = f"worker {workers.index(pid) + 1}"
            out[role] = max(out.get(role, 0), peak)
        return out


def process_role(process: psutil.Process, root_pid: int) -> str:
    """'client' for the command itself, 'scheduler' / 'worker' / 'nanny' by command line."""
    if process.pid == root_pid:
        return "client"
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        return "other"
    if "dask scheduler" in command or "dask-scheduler" in command:
        return "scheduler"
    if "multiprocessing.forkserver" in command or "from multiprocessing" in command:
        return "worker"
    return "other"


class Sampler:
    """`sample()` in a thread of its own from `with` until its end, pausing `pause()` seconds
    between samples (subclasses define both)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):  # noqa: ANN204 - the subclass
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        raise NotImplementedError

    def pause(self, took_s: float) -> float:
        """Seconds to wait after a sample that took `took_s`."""
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            began = time.perf_counter()
            self.sample()
            if self._stop.wait(self.pause(time.perf_counter() - began)):
                return


class TreeSampler(Sampler):
    """Sample the RSS of a process tree every `interval` seconds until stopped."""

    def __init__(self, root_pid: int, interval: float = 0.1, roles: dict[int, str] | None = None):
        super().__init__()
        self.root_pid = root_pid
        self.interval = interval
        self.memory = TreeMemory(role_by_pid=dict(roles or {}))

    def pause(self, took_s: float) -> float:
        return self.interval

    def sample(self) -> None:
        try:
            root = psutil.Process(self.root_pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            processes = []
        for process in processes:
            try:
                rss = process.memory_info().rss
                times = process.cpu_times()
            except psutil.Error:
                continue
            self.memory.cpu_by_pid[process.pid] = times.user + times.system
            pid = process.pid
            if pid not in self.memory.role_by_pid:
                self.memory.role_by_pid[pid] = process_role(process, self.root_pid)
            self.memory.peak_by_pid[pid] = max(self.memory.peak_by_pid.get(pid, 0), rss)


@dataclass(frozen=True)
class CommandRun:
    seconds: float
    memory: TreeMemory
    stdout: str
    stderr: str


def run_command(
    command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> CommandRun:
    """Run a command to its end: wall seconds from spawn to exit, peak RSS of its process tree."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=stdout, stderr=stderr, env={**os.environ, **(env or {})}, cwd=cwd
        )
        with TreeSampler(process.pid) as sampler:
            process.wait()
        seconds = time.perf_counter() - start
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    if process.returncode:
        raise RuntimeError(f"exit {process.returncode}: {' '.join(command)}\n{err[-2000:]}")
    return CommandRun(seconds, sampler.memory, out, err)


def seisctf_command() -> list[str]:
    """The installed `seisctf` entry point (as a user types it)."""
    import sys

    entry = Path(sys.executable).with_name("seisctf")
    return [str(entry)] if entry.exists() else [sys.executable, "-m", "seisctf.cli"]


def tree_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in Path(path).rglob("*") if entry.is_file())


def write_json(path: Path, payload: object) -> None:
    path.write_text(json.dumps(payload, indent=2, default=str))


MiB = 2**20
GiB = 2**30
