"""`seisctf demo`: the main job end to end on whatever cluster is active.

synthesise the dataset (global wavefield; or the ocean-bottom DAS record, low-passed and
decimated 5 Hz -> 1 Hz into guarded segments) -> build its task bundle (public + truth) ->
write the baselines' submissions -> score them -> leaderboard (SQLite, JSON, terminal, HTML).
Like the other CLI modules, it sits above every layer and may use them all; `seisctf demo`
imports it when it runs.

`--dataset das` runs the shipped recipe `demo-das.yaml`: 256 channels (10 m apart: a 2.55 km
stretch of shelf), ten 50-minute realisations at 5 Hz (152,000 samples), the `das` layout;
about a minute on 2 cores. `--sensors` sets the channel count (at least 2 · modes − 1 = 199
for the long-time score); `--duration` applies to the global dataset only (the DAS record's
length follows from the layout).

`--dataset crustal` runs `demo-crustal.yaml`: 8836 sensors (a 94 × 94 surface grid, 100 m apart),
20 simulations at 100 Hz (the ten core realisations, a sweep of 4 + 1 and 4 + 1 new initial
conditions), the `crustal` layout with the extended pairs E13–E16; `--sensors` must be a square
number (the grid's side squared); the record's length follows from the layout. A few minutes on 2
cores (benchmarks/RESULTS.md).

The demo is not a challenge: unless `--secret`/`SEISCTF_SECRET` is given it uses the published
secret `keys.DEMO_SECRET` (through `keys.resolve_secret`, as every verb gets its secret), so its
outputs are byte-identical on every machine and cluster, and its truth is public: the bundle's
manifest and every leaderboard page say "truth regenerable: for teaching only", and `seisctf
tasks`/`build` refuse its stores without `--public-truth`. `$SEISCTF_SECRET` must have at least
`keys.MIN_SECRET_CHARS` characters; `run_demo(secret=...)` takes any string (a test may need a
guessable one on purpose).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from seisctf import keys, storage
from seisctf.baselines.ctf import write_baseline
from seisctf.build.engine import build_file, shipped
from seisctf.cli.demo_plan import (
    DATASETS,
    DEFAULT_LAYOUTS,
    demo_datasets,
    demo_source,
)
from seisctf.ctf_json import CtfManifest, CtfResult
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import leaderboard
from seisctf.scoring.ctf import score_ctf
from seisctf.scoring.site.pages import write_site
from seisctf.scoring.site.terminal import print_table

DEMO_SECRET = keys.DEMO_SECRET  # kept here too: documented as seisctf.cli.demo.DEMO_SECRET
BASELINE_MODELS = ("zeros", "persistence", "mean")


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
    n_sensors: int | None = None,
    duration_s: float = 3000.0,
    layout: str | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Run the demo into `workdir`; returns the leaderboard rows written to leaderboard.json.

    The dataset comes from the shipped recipe `demo-<dataset>.yaml` (`seisctf build`), with the
    sensors (default `DEFAULT_SENSORS`), duration (global) and layout given here (default:
    `DEFAULT_LAYOUTS`)."""
    datasets = demo_datasets(dataset)
    unknown = [name for name in datasets if name not in DATASETS]
    if unknown:
        raise InvalidInput(
            f"--dataset {dataset}", f"not available yet; choose from {list(DATASETS)}"
        )
    resolved = keys.resolve_secret(secret, default=DEMO_SECRET)
    paths = demo_paths(workdir, datasets[0])
    Path(workdir).mkdir(parents=True, exist_ok=True)
    Path(paths["db"]).unlink(missing_ok=True)  # the demo's leaderboard is rebuilt on every run
    for name in datasets:
        paths = demo_paths(workdir, name)
        overrides = {
            "source": demo_source(name, n_sensors, duration_s),
            "splits": {"ctf": {"layout": layout or DEFAULT_LAYOUTS[name]}},
        }
        build_file(
            shipped(f"demo-{name}"),
            workdir=workdir,
            secret=resolved.value,
            quiet=quiet,
            overrides=overrides,
            public_truth=resolved.public,
        )
        truth = StoreLocation(paths["truth"])
        manifest = CtfManifest.from_attrs(storage.read_attrs(truth), truth.url)
        shutil.rmtree(paths["submissions"], ignore_errors=True)
        submissions = {}
        for model in BASELINE_MODELS:
            submissions[model] = StoreLocation(str(Path(paths["submissions"]) / f"{model}.zarr"))
            write_baseline(model, StoreLocation(paths["public"]), submissions[model], quiet=quiet)
        results = score_ctf(truth, submissions, quiet=quiet)
        Path(paths["scores"]).write_text(json.dumps(results, indent=2))
        commitment = leaderboard.truth_commitment_of(manifest)
        for result in results:
            baseline = CtfResult.from_json(result, paths["scores"])
            leaderboard.record(
                paths["db"],
                result,
                truth_commitment=commitment,
                metadata={"description": f"built-in {baseline.name} baseline"},
            )
    rows = leaderboard.entries(paths["db"])
    # The demo is no challenge (its truth is regenerable): its leaderboard is the final view.
    table = leaderboard.as_json(rows, final=True)
    Path(paths["json"]).write_text(json.dumps(table, indent=2))
    write_site(rows, paths["html"], final=True)
    if not quiet:
        print_table(rows, final=True)
    return table
