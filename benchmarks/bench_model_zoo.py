"""The model zoo's table: every installed zoo model's E1..E12 and AvgScore on the global, DAS and
crustal datasets beside zeros and persistence, with its CPU time and peak memory, and the CTF
paper's reported AvgScore for the same family where the paper reports one.

Per dataset, through the command line as an organiser runs it: `synth` + `tasks` with a fresh
random secret (`red_team.harness.build_bundle`), then `seisctf baseline zoo --public P --out Z
--truth T --seed …` on the embedded cluster (one worker per core: 2 here), then `seisctf
baseline zeros|persistence` and `seisctf score ctf` for the references. CPU seconds and peak
RSS are each model's tasks' own records (the worker's CPU over the task, every thread; its
peak RSS during the task, imports included: `seisctf.baselines.zoo.runs`); a seeded model's
figures are means over its seeds.

    .venv/bin/python benchmarks/bench_model_zoo.py                 # demo sizes, seed 0
    .venv/bin/python benchmarks/bench_model_zoo.py --small --seeds 0,1,2 --markdown zoo.md

Goal (issue 41): at least 8 families from at least 5 libraries run end to end on all three
datasets through the CLI on 2 workers, within the time budget of `BUDGET_S` a dataset.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.red_team import harness  # noqa: E402

DATASETS = ("global", "das", "crustal")
SYNTH_ARGS = {  # the demo's sizes (bench_truth_inversion.DEFAULT_SYNTH_ARGS)
    "global": ["--sensors", "2048", "--duration", "3000"],
    "das": ["--channels", "256"],
    "crustal": ["--grid", "32", "--parametric", "0", "--initial-conditions", "0"],
}
SMALL_SYNTH_ARGS = {
    "global": ["--sensors", "256", "--duration", "3000"],
    "das": ["--channels", "256"],  # the layout needs 2 · 100 − 1 channels
    "crustal": ["--grid", "16", "--parametric", "0", "--initial-conditions", "0"],
}
BUDGET_S = 3600  # wall seconds a dataset's zoo may take on 2 workers (documented budget)
SCORES = tuple(f"E{i}" for i in range(1, 13))
# The Seismic Wavefield CTF paper (Yermakov et al. 2025, arXiv:2512.19927), AvgScore by its
# family name and dataset, where this benchmark has the figure (docs/model-zoo.md).
PAPER_AVG_SCORE: dict[str, dict[str, float]] = {
    "LSTM": {"global": 13.18},
    "ODE-LSTM": {"global": 5.71},
    "FNO": {"global": -30.92},
}


def score_references(public: str, truth: str, workdir: Path) -> dict[str, dict]:
    """zeros and persistence, written and scored by the CLI: {name: result}."""
    paths = []
    for name in ("zeros", "persistence"):
        path = workdir / f"{name}.zarr"
        harness.run_cli(["baseline", name, "--quiet", "--public", public, "--out", str(path)])
        paths.append(str(path))
    out = workdir / "references.json"
    harness.run_cli(["score", "ctf", "--quiet", "--truth", truth, "--submission", *paths,
                     "--name", "zeros", "--name", "persistence", "--json", str(out)])  # fmt: skip
    return {result["name"]: result for result in json.loads(out.read_text())}


def zoo_rows(zoo: Path, runs_table: Path) -> dict[str, dict]:
    """{model: {scores (means over seeds), avg, cpu_s, peak_mib, runs, family, library,
    version, paper, diverged}} from the zoo's submissions and runs table."""
    import pandas as pd

    table = pd.read_csv(runs_table)
    means = table.groupby(["approach", "metric"])["value"].mean()
    rows: dict[str, dict] = {}
    for group_path in sorted(zoo.glob("*.zarr")):
        record = dict(zarr.open_group(str(group_path), mode="r").attrs["zoo"])
        model = record["model"]
        pairs = record["pairs"].values()
        row = rows.setdefault(
            model,
            {
                "family": record["family"],
                "library": f"{record['library']} {record['library_version']}",
                "paper": record.get("paper"),
                "cpu_s": [],
                "peak_mib": [],
                "diverged": 0,
            },
        )
        row["cpu_s"].append(sum(pair["cpu_seconds"] for pair in pairs))
        row["peak_mib"].append(max(pair["peak_rss_mib"] for pair in pairs))
        row["diverged"] += sum(bool(pair["diverged"]) for pair in pairs)
    for model, row in rows.items():
        row["runs"] = len(row["cpu_s"])
        row["cpu_s"] = sum(row["cpu_s"]) / row["runs"]
        row["peak_mib"] = max(row["peak_mib"])
        row["scores"] = {name: means.get((model, name)) for name in SCORES}
        row["avg"] = means.get((model, "AvgScore"))
    return rows


def cell(value: float | None, digits: int = 1) -> str:
    return "—" if value is None or value != value else f"{value:.{digits}f}"


def dataset_table(dataset: str, references: dict, rows: dict, wall_s: float) -> list[str]:
    """Markdown lines of one dataset's table, ranked by AvgScore."""
    lines = [
        f"### {dataset} (zoo wall time {wall_s:.0f} s on the embedded cluster; budget "
        f"{BUDGET_S} s)",
        "",
        "| model | family | library | AvgScore | "
        + " | ".join(SCORES)
        + " | paper AvgScore | CPU s | peak MiB | runs | diverged pairs |",
        "|---|---|---|---:|" + "---:|" * len(SCORES) + "---:|---:|---:|---:|---:|",
    ]
    entries = [
        (name, {"family": "reference", "library": "seisctf", "avg": result["avg_score"],
                "scores": result["scores"], "paper": None, "cpu_s": None, "peak_mib": None,
                "runs": 1, "diverged": 0})
        for name, result in references.items()
    ] + list(rows.items())  # fmt: skip
    entries.sort(key=lambda item: -(item[1]["avg"] if item[1]["avg"] is not None else -1e9))
    for name, row in entries:
        paper = PAPER_AVG_SCORE.get(row["paper"] or "", {}).get(dataset)
        lines.append(
            f"| {name} | {row['family']} | {row['library']} | **{cell(row['avg'], 2)}** | "
            + " | ".join(cell(row["scores"].get(score)) for score in SCORES)
            + f" | {cell(paper, 2)} | {cell(row['cpu_s'])} | {cell(row['peak_mib'], 0)} | "
            f"{row['runs']} | {row['diverged']} |"
        )
    return lines


def run_dataset(dataset: str, args: argparse.Namespace, workdir: Path) -> list[str]:
    synth = (SMALL_SYNTH_ARGS if args.small else SYNTH_ARGS)[dataset]
    public, truth = harness.build_bundle(dataset, workdir, synth)
    zoo = workdir / "zoo"
    arguments = ["baseline", "zoo", "--quiet", "--public", public, "--out", str(zoo),
                 "--truth", truth]  # fmt: skip
    for seed in args.seeds.split(","):
        arguments += ["--seed", seed.strip()]
    if args.models:
        arguments += ["--models", args.models]
    harness.log(f"{dataset}: seisctf {' '.join(arguments)}")
    started = time.perf_counter()
    harness.run_cli(arguments)
    wall_s = time.perf_counter() - started
    harness.log(f"{dataset}: zoo done in {wall_s:.0f} s")
    references = score_references(public, truth, workdir)
    rows = zoo_rows(zoo, zoo / "runs.csv")
    return [f"synth {dataset} {' '.join(synth)}", ""] + dataset_table(
        dataset, references, rows, wall_s
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=[*DATASETS, "all"], default="all")
    parser.add_argument("--models", help="comma-separated zoo models (default: all installed)")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds of seeded models")
    parser.add_argument("--small", action="store_true", help="smaller datasets (SMALL_SYNTH_ARGS)")
    parser.add_argument("--workdir", type=Path, help="where bundles go (default: a temp folder)")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    args = parser.parse_args()
    datasets = DATASETS if args.dataset == "all" else (args.dataset,)
    with tempfile.TemporaryDirectory(prefix="bench-zoo-") as scratch:
        root = args.workdir or Path(scratch)
        lines = [f"# Model zoo (`{' '.join(sys.argv)}`, {time.strftime('%Y-%m-%d %H:%M')} UTC)"]
        for dataset in datasets:
            lines += ["", *run_dataset(dataset, args, root / dataset)]
            print("\n".join(lines[-4:]), flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
