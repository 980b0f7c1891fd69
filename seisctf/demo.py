"""`seisctf demo`: the main job end to end on whatever cluster is active.

synthesise the global wavefield -> build its task bundle (public + truth) -> write the baselines'
submissions -> score them -> leaderboard (SQLite, JSON, terminal, HTML). Like `cli.py`, this
module is an orchestrator and may use every layer.

The demo is not a challenge: unless `--secret`/`SEISCTF_SECRET` is given it uses the published
secret `DEMO_SECRET`, so its outputs are byte-identical on every machine and cluster.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.errors import InvalidInput

DEMO_SECRET = "seisctf-demo-not-a-secret"
BASELINE_MODELS = ("zeros", "persistence", "mean")
DATASETS = ("global",)


def demo_paths(workdir: str | Path, dataset: str) -> dict[str, str]:
    root = Path(workdir)
    return {
        "wavefield": str(root / "private" / f"wavefield-{dataset}.zarr"),
        "truth": str(root / "private" / f"truth-{dataset}.zarr"),
        "public": str(root / "public" / f"bundle-{dataset}.zarr"),
        "submissions": str(root / "submissions" / dataset),
        "scores": str(root / f"scores-{dataset}.json"),
        "db": str(root / "leaderboard.sqlite"),
        "json": str(root / "leaderboard.json"),
        "html": str(root / "leaderboard"),
    }


def run_demo(
    workdir: str | Path = "seisctf-demo",
    *,
    dataset: str = "global",
    secret: str | None = None,
    n_sensors: int = 2048,
    duration_s: float = 3000.0,
    layout: str | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Run the demo into `workdir`; returns the leaderboard rows written to leaderboard.json.

    The dataset comes from the shipped recipe `demo-<dataset>.yaml` (`seisctf build`), with the
    sensors, duration and layout given here."""
    from seisctf.pipeline.baselines import write_baseline
    from seisctf.pipeline.recipe import build_file, shipped
    from seisctf.scoring import leaderboard
    from seisctf.scoring.ctf import score_ctf

    datasets = DATASETS if dataset == "all" else (dataset,)
    unknown = [name for name in datasets if name not in DATASETS]
    if unknown:
        raise InvalidInput(
            f"--dataset {dataset}", f"not available yet; choose from {list(DATASETS)}"
        )
    secret = secret or os.environ.get(keys.SECRET_ENV) or DEMO_SECRET
    paths = demo_paths(workdir, datasets[0])
    Path(workdir).mkdir(parents=True, exist_ok=True)
    Path(paths["db"]).unlink(missing_ok=True)  # the demo's leaderboard is rebuilt on every run
    for name in datasets:
        paths = demo_paths(workdir, name)
        overrides = {
            "source": {
                "synthetic_global": {
                    "sensors": n_sensors,
                    "duration_s": duration_s,
                    "sampling_rate_hz": 1.0,
                }
            },
            "splits": {"ctf": {"layout": layout or "seismo"}},
        }
        build_file(
            shipped(f"demo-{name}"),
            workdir=workdir,
            secret=secret,
            quiet=quiet,
            overrides=overrides,
        )
        manifest = storage.read_attrs(paths["truth"])[cv.ATTR_CTF]
        shutil.rmtree(paths["submissions"], ignore_errors=True)
        submissions = {}
        for model in BASELINE_MODELS:
            submissions[model] = str(Path(paths["submissions"]) / f"{model}.zarr")
            write_baseline(model, paths["public"], submissions[model], quiet=quiet)
        results = score_ctf(paths["truth"], submissions, quiet=quiet)
        Path(paths["scores"]).write_text(json.dumps(results, indent=2))
        commitment = leaderboard.truth_commitment_of(manifest)
        for result in results:
            leaderboard.record(
                paths["db"],
                result,
                truth_commitment=commitment,
                metadata={"description": f"built-in {result['name']} baseline"},
            )
    rows = leaderboard.entries(paths["db"])
    table = leaderboard.as_json(rows)
    Path(paths["json"]).write_text(json.dumps(table, indent=2))
    leaderboard.write_html(rows, paths["html"])
    if not quiet:
        leaderboard.print_table(rows)
    return table
