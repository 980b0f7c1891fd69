"""Build a bundle with a random secret and score predictions, through the real command line.

Everything goes through `python -m seisctf.cli` in a child process, as an organiser would run
it: `synth <dataset>`, then `tasks` (the dataset's layout), then `score ctf` (reference
convention). The secret is 32 random bytes (`secrets.token_urlsafe(32)`, 43 characters), handed
to the two child processes in their environment ($SEISCTF_SECRET, not the command line, where
other users' `ps` would show it) and then dropped: it is never returned, printed or written. The
bundles live in the caller's work directory (`public.zarr`, `truth.zarr`; the private
generator store `wavefield.zarr` beside them).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr

LAYOUT_OF_DATASET = {"global": "seismo", "das": "das", "crustal": "crustal"}
SECRET_BYTES = 32  # token_urlsafe(32): 43 characters


def log(message: str) -> None:
    """Progress line on stderr with the wall-clock time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_cli(arguments: list[str], environment: dict[str, str] | None = None) -> str:
    """Run `python -m seisctf.cli ARGUMENTS` and return its stdout; a non-zero exit raises
    RuntimeError carrying the command's stderr (never the environment, which may hold a
    secret)."""
    command = [sys.executable, "-m", "seisctf.cli", *arguments]
    completed = subprocess.run(
        command,
        env={**os.environ, **(environment or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"`seisctf {' '.join(arguments)}` exited {completed.returncode}:\n"
            f"{completed.stderr.strip()}"
        )
    return completed.stdout


def build_bundle(
    dataset: str, workdir: Path, synth_args: list[str] | None = None
) -> tuple[str, str]:
    """Synthesise `dataset` and build its CTF bundle in `workdir` with a fresh random secret.

    Returns (public_url, truth_url). The secret leaves this function with the child processes."""
    if dataset not in LAYOUT_OF_DATASET:
        raise ValueError(f"dataset {dataset!r}: choose from {sorted(LAYOUT_OF_DATASET)}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    wavefield = str(workdir / "wavefield.zarr")
    public_url = str(workdir / "public.zarr")
    truth_url = str(workdir / "truth.zarr")
    environment = {"SEISCTF_SECRET": secrets.token_urlsafe(SECRET_BYTES)}
    started = time.perf_counter()
    log(f"{dataset}: seisctf synth {dataset} {' '.join(synth_args or [])}")
    run_cli(["synth", dataset, "--quiet", "--out", wavefield, *(synth_args or [])], environment)
    log(f"{dataset}: synthesised in {time.perf_counter() - started:.0f} s; building the bundle")
    run_cli(
        [
            "tasks",
            wavefield,
            "--quiet",
            "--public",
            public_url,
            "--truth",
            truth_url,
            "--layout",
            LAYOUT_OF_DATASET[dataset],
        ],
        environment,
    )
    environment.clear()
    log(f"{dataset}: bundle ready after {time.perf_counter() - started:.0f} s")
    return public_url, truth_url


def load_public(public_url: str) -> tuple[dict[str, np.ndarray], dict]:
    """Every public training array (X*train) as float64 (time, space), and the `ctf` manifest."""
    group = zarr.open_group(public_url, mode="r")
    manifest = dict(group.attrs["ctf"])
    arrays = {
        name: np.asarray(group[name][...], dtype=np.float64)
        for name in sorted(group.array_keys())
        if name.endswith("train")
    }
    return arrays, manifest


def write_submission(predictions: dict[str, np.ndarray], path: Path) -> Path:
    """Save predictions {X1test: (m, n), …} as an `.npz` submission (float32)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{name: np.asarray(a, dtype=np.float32) for name, a in predictions.items()})
    return path


def score_many(
    truth_url: str, submissions: dict[str, dict[str, np.ndarray]], workdir: Path
) -> dict:
    """Score several submissions {name: predictions} with one `seisctf score ctf` run (one pass
    over the truth); returns {name: result JSON}."""
    workdir = Path(workdir)
    names = list(submissions)
    paths = [write_submission(submissions[n], workdir / f"submission-{n}.npz") for n in names]
    result_path = workdir / f"scores-{'-'.join(names)}.json"[:200]
    arguments = ["score", "ctf", "--quiet", "--truth", truth_url, "--convention", "reference"]
    arguments += ["--submission", *map(str, paths)]
    for name in names:
        arguments += ["--name", name]
    run_cli([*arguments, "--json", str(result_path)])
    results = json.loads(result_path.read_text())
    results = results if isinstance(results, list) else [results]
    return {name: result for name, result in zip(names, results, strict=True)}


def score(truth_url: str, predictions: dict[str, np.ndarray], name: str, workdir: Path) -> dict:
    """Score one submission with the real referee (reference convention): its result JSON
    (`avg_score`, `scores` E1…, `raw_scores`, …)."""
    return score_many(truth_url, {name: predictions}, workdir)[name]
