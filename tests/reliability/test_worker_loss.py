"""Lost workers and a killed client, in the middle of real jobs on a real Dask cluster.

Each job (an archive ingest, a DAS ingest, a recipe build, a scoring run) runs as the `seisctf`
command against a scheduler whose workers are nanny-managed processes. A scheduler plugin
SIGKILLs a process at the moment the first of the job's tasks finishes while others run:

- a worker: Dask runs its tasks again elsewhere; the job completes, and its outputs (every object
  of every store, the results and leaderboard entries) equal those of an undisturbed run;
- the command itself: nothing unfinished is marked complete, an ingest keeps the blocks it
  finished, and running the command again finishes with the outputs of an undisturbed run
  (an ingest rewriting none of the blocks it had finished).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from faults import (
    N_WORKERS,
    SECRET,
    Inputs,
    KillOnFinished,
    finish,
    is_marked_complete,
    kill_on_finished,
    run,
    seisctf_command,
    start,
    store_objects,
    wait_until_idle,
    worker_pids,
)

pytest_plugins = ("fault_fixtures",)
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Job:
    """A command, the stores it writes (relative to its working folder) and where to kill it:
    after the first finished task whose key starts with `prefix` (`client_prefix` for the
    command itself, when another phase is the more telling one)."""

    name: str
    arguments: Callable[[Inputs, Path], list[str]]
    prefix: str
    stores: tuple[str, ...] = ()
    client_prefix: str | None = None
    resumable_variable: str | None = None  # the data variable of an ingest that resumes
    # Where the `job_inputs` fixture already wrote this job's outputs, undisturbed (by the library,
    # on the local threaded scheduler): the reference, without another run.
    made_by_inputs: Callable[[Inputs], Path] | None = None

    def command(self, inputs: Inputs, workdir: Path, scheduler: str) -> list[str]:
        return seisctf_command(*self.arguments(inputs, workdir), "--scheduler", scheduler,
                               "--quiet")  # fmt: skip


JOBS = (
    Job(
        "ingest-waveforms",
        lambda i, w: ["ingest", "waveforms", str(i.archive), "--out", str(w / "store.zarr")],
        prefix="ingest_block",
        stores=("store.zarr",),
        resumable_variable="data",
    ),
    Job(
        "ingest-das",
        lambda i, w: ["ingest", "das", str(i.das), "--out", str(w / "das.zarr")],
        prefix="ingest_das_run",
        stores=("das.zarr",),
        resumable_variable="strain_rate",
    ),
    Job(
        "build",
        lambda i, w: ["build", str(i.recipe), "--workdir", str(w), "--secret", SECRET],
        prefix="store-map",  # writing the noise's checkpoint (the first phase)
        stores=("wavefield.zarr", "public.zarr", "truth.zarr"),
        client_prefix="leaf_digest",  # the bundle's commitments: the store is finished by then
        made_by_inputs=lambda i: i.truth.parent,
    ),
    Job(
        "score",
        lambda i, w: [
            "score",
            "ctf",
            "--truth",
            str(i.truth),
            "--submission",
            *map(str, i.submissions),
            "--json",
            str(w / "results.json"),
            "--db",
            str(w / "board.sqlite"),
        ],  # fmt: skip
        prefix="panel_gram",  # a Gram panel (the whole and its parts share them)
    ),
)
IDS = [job.name for job in JOBS]


def outputs(job: Job, workdir: Path) -> dict[str, Any]:
    """Everything the job leaves that must not depend on faults: each store's objects, the
    results JSON, the leaderboard's results (its ids, times and keys are per entry)."""
    from seisctf.scoring import leaderboard

    found: dict[str, Any] = {store: store_objects(workdir / store) for store in job.stores}
    if (workdir / "results.json").exists():
        found["results.json"] = json.loads((workdir / "results.json").read_text())
    if (workdir / "board.sqlite").exists():
        rows = leaderboard.entries(workdir / "board.sqlite")
        found["board"] = sorted((row["model"], row["result"]) for row in rows)
    return found


@pytest.fixture(scope="module")
def reference(restarting_cluster, job_inputs, tmp_path_factory) -> Callable[[Job], dict[str, Any]]:
    """Outputs of an undisturbed run of a job (run once, on the same cluster, unless the inputs
    fixture made them)."""
    found: dict[str, dict[str, Any]] = {}

    def of(job: Job) -> dict[str, Any]:
        if job.name not in found and job.made_by_inputs:
            found[job.name] = outputs(job, job.made_by_inputs(job_inputs))
        elif job.name not in found:
            workdir = tmp_path_factory.mktemp(f"reference-{job.name}")
            code, _, err = run(job.command(job_inputs, workdir, restarting_cluster.address))
            assert code == 0, err
            found[job.name] = outputs(job, workdir)
            assert all(found[job.name][store] for store in job.stores)
        return found[job.name]

    return of


@pytest.mark.parametrize("job", JOBS, ids=IDS)
def test_a_worker_killed_mid_run_changes_no_output(
    job, killable_cluster, job_inputs, reference, tmp_path
):
    expected = reference(job)
    client = killable_cluster.client
    before = worker_pids(client)
    plugin = KillOnFinished(job.prefix, worker_pids=before)
    with kill_on_finished(client, plugin) as fired:
        process = start(job.command(job_inputs, tmp_path, killable_cluster.address))
        kill = fired(process)
        code, _, err = finish(process)
    assert code == 0, err
    # A worker running one of the job's tasks was killed while the job had more to do.
    assert kill["pid"] == before[kill["worker"]] and kill["worker"] in kill["running"]
    client.wait_for_workers(N_WORKERS, timeout=300)
    assert kill["pid"] not in worker_pids(client).values()  # its nanny started a new one
    assert outputs(job, tmp_path) == expected


def done_blocks(store: Path) -> np.ndarray:
    """Blocks an unfinished ingest marked done (its `ingest_progress`)."""
    progress = zarr.open_group(str(store), mode="r", use_consolidated=False)["ingest_progress"]
    return np.asarray(progress[...], dtype=object) != ""


def chunk_times(variable: Path) -> dict[str, int]:
    """mtime (ns) of every chunk file of a stored variable."""
    return {
        str(path.relative_to(variable)): path.stat().st_mtime_ns
        for path in (variable / "c").rglob("*")
        if path.is_file()
    }


@pytest.mark.parametrize("job", JOBS, ids=IDS)
def test_the_command_killed_mid_run_reruns_to_identical_outputs(
    job, killable_cluster, job_inputs, reference, tmp_path
):
    expected = reference(job)
    client = killable_cluster.client
    command = job.command(job_inputs, tmp_path, killable_cluster.address)
    process = start(command)
    plugin = KillOnFinished(job.client_prefix or job.prefix, pid=process.pid)
    with kill_on_finished(client, plugin) as fired:
        fired(process)
        code, _, _ = finish(process)
    assert code == -9
    # Tasks the dead client left running finish (their results unwanted); then look.
    wait_until_idle(client, N_WORKERS)
    unfinished = [s for s in job.stores if not is_marked_complete(str(tmp_path / s))]
    assert unfinished or not job.stores, "the kill landed after the job"
    for store in set(job.stores) - set(unfinished):  # complete: then whole
        assert store_objects(tmp_path / store) == expected[store], store
    assert "board" not in outputs(job, tmp_path) and "results.json" not in outputs(job, tmp_path)
    kept: dict[str, int] = {}
    if job.resumable_variable:
        (store,) = job.stores
        done = done_blocks(tmp_path / store)
        # Usually some blocks are left; on a loaded machine the workers may finish them all
        # before the scheduler drops the dead client's tasks. Either way the store is unmarked
        # and the re-run below must rewrite none of the finished blocks.
        assert 0 < done.sum() <= done.size
        kept = chunk_times(tmp_path / store / job.resumable_variable)
        assert len(kept) >= done.sum()

    code, _, err = run(command)
    assert code == 0, err
    assert outputs(job, tmp_path) == expected
    assert not list(tmp_path.glob("*.checkpoints"))  # a build's scratch stores are gone
    if job.resumable_variable:
        now = chunk_times(tmp_path / job.stores[0] / job.resumable_variable)
        untouched = [name for name, mtime in kept.items() if now[name] == mtime]
        assert len(untouched) >= done.sum()  # the re-run resumed: finished blocks not rewritten
