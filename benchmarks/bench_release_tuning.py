"""Release tuning (issue 36, point 3): how much can 3 releases tune a submission against the truth,
measured on what the final ranking uses?

Per dataset (global, das, crustal): a bundle built through the real command line with a fresh
random secret (`benchmarks/red_team/harness.py`, the synth sizes of the dataset's red-team attack
module, `SYNTH_ARGS`); the organisers record the package's baselines (zeros, persistence, mean)
on the leaderboard; then, from each start (`--starts`, default the best legitimate baseline
`holdout_best` and `persistence`, from `benchmarks/red_team/baselines.py`), the attacks of
`benchmarks/red_team/attack_release.py`:

- old policy (`seisctf-release-2`: E1..E12 of the whole truth to 0.1 per release, the board's
  E1..E12 to 0.01): `per_pair_levels`, each long-time pair's tail solved for its best level.
  From persistence the board's own persistence entry is the first probe, free.
- current policy (`seisctf score ctf --release`, the real command: the Ladder's best public
  score): `ladder_search` on each knob (tails, forecasts, reconstructions).

Every submission is then scored by the organisers (`score ctf`, one pass): the gain is the
standing submission's AvgScore minus the start's, on the private part (what the final ranking
uses now) and on the whole truth (what it used before). `oracle` is the best private gain among
every candidate the knob searches could have chosen (what perfect feedback would give);
`validation` the private gain of the same search run on the public validation task instead of
releases (`attack_release.validation_release`: no truth involved); what the releases added is
the gain beyond it (`beyond_validation`). `ladder-avg` rows replay each knob search against a
Ladder on the public part's whole AvgScore (long-time scores included), from the organisers'
scores of the same candidates: what that policy would have let through. Goal: every
current-policy attack gains at most 1 AvgScore point on the private part beyond what the
public validation gives.

    .venv/bin/python benchmarks/bench_release_tuning.py --dataset global|das|crustal|all
        [--workdir DIR] [--keep] [--reuse] [--json OUT.json] [--synth-args "..."]
        [--starts A,B]

--reuse attacks the bundle a previous run left in DIR/DATASET (with --keep) and keeps it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_truth_inversion import DEFAULT_SYNTH_ARGS, attack_module  # noqa: E402
from benchmarks.red_team import attack_release as ar  # noqa: E402
from benchmarks.red_team import harness  # noqa: E402
from benchmarks.red_team.baselines import BASELINES, package_pair  # noqa: E402
from seisctf.baselines import ctf as package_baselines  # noqa: E402
from seisctf.scoring import ladder  # noqa: E402

DATASETS = ("global", "das", "crustal")
GOAL_GAIN = 1.0
ORGANISER_BASELINES = ("zeros", "persistence", "mean")


class Referee:
    """The organisers' side of one bundle: a leaderboard with their baselines, releases through
    the real `score ctf --release`, the old policy's view of full results, and the final
    scoring of every submission."""

    def __init__(self, truth_url: str, workdir: Path) -> None:
        self.truth_url, self.workdir = truth_url, workdir
        self.db, self.quota = workdir / "leaderboard.sqlite", workdir / "quota.sqlite"
        self.submissions: dict[str, ar.Predictions] = {}
        self.releases = 0

    def _path(self, name: str, predictions: ar.Predictions) -> Path:
        self.submissions[name] = predictions
        return harness.write_submission(predictions, self.workdir / "submissions" / f"{name}.npz")

    def record_baselines(self, arrays: dict, manifest: dict) -> dict[str, dict]:
        """Score and record the organiser baselines (no release); returns their full results."""
        lazy = {name: da.from_array(x) for name, x in arrays.items()}
        predictions = {
            f"board-{model}": {
                pair["test"]: np.asarray(
                    package_baselines.BASELINES[model].function(package_pair(pair), lazy)
                )
                for pair in manifest["pairs"]
            }
            for model in ORGANISER_BASELINES
        }
        paths = [str(self._path(name, p)) for name, p in predictions.items()]
        out = self.workdir / "board-results.json"
        arguments = ["score", "ctf", "--quiet", "--truth", self.truth_url, "--db", str(self.db)]
        arguments += ["--submission", *paths, "--json", str(out)]
        harness.run_cli(arguments)
        return {r["name"]: r for r in json.loads(out.read_text())}

    def release(self, participant: str) -> ar.Release:
        """The current policy: one `seisctf score ctf --release` run per submission."""

        def released(name: str, predictions: ar.Predictions) -> dict:
            out = self.workdir / "released" / f"{name}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            arguments = ["score", "ctf", "--quiet", "--truth", self.truth_url, "--release"]
            arguments += ["--participant", participant, "--quota-db", str(self.quota)]
            arguments += ["--db", str(self.db), "--json", str(out)]
            harness.run_cli([*arguments, "--submission", str(self._path(name, predictions))])
            self.releases += 1
            return json.loads(out.read_text())

        return released

    def old_release(self) -> ar.Release:
        """The old policy: the organisers' full result, rounded as `seisctf-release-2` did."""

        def released(name: str, predictions: ar.Predictions) -> dict:
            self._path(name, predictions)
            self.releases += 1
            return ar.old_view(self.score({name: predictions})[name])

        return released

    def score(self, submissions: dict[str, ar.Predictions]) -> dict[str, dict]:
        """Full organiser results {name: result} of `submissions`, one pass."""
        return harness.score_many(self.truth_url, submissions, self.workdir / "scores")

    def board(self, final: bool = False) -> list[dict]:
        """The public leaderboard.json (the season's view, or the close's)."""
        out = self.workdir / f"board-{'final' if final else 'season'}.json"
        harness.run_cli(
            ["leaderboard", "--db", str(self.db), "--json", str(out)] + (["--final"] * final)
        )
        return json.loads(out.read_text())


def run_dataset(
    dataset: str, workdir: Path, synth_args: list[str], starts: list[str], reuse: bool = False
) -> dict:
    """Build (or with `reuse`, take the bundle in `workdir`), attack under both policies from
    every start, score; returns rows and details."""
    if reuse and (workdir / "public.zarr").exists() and (workdir / "truth.zarr").exists():
        public_url, truth_url = str(workdir / "public.zarr"), str(workdir / "truth.zarr")
        for stale in ("leaderboard.sqlite", "quota.sqlite"):
            (workdir / stale).unlink(missing_ok=True)
    else:
        public_url, truth_url = harness.build_bundle(dataset, workdir, synth_args)
    arrays, manifest = harness.load_public(public_url)
    referee = Referee(truth_url, workdir)
    harness.log(f"{dataset}: organiser baselines on the leaderboard")
    board_results = referee.record_baselines(arrays, manifest)
    season_board = referee.board()
    val_arrays, val_manifest = ar.validation_task(arrays, manifest)
    runs = []
    for start_name in starts:
        harness.log(f"{dataset}: start {start_name}")
        start = BASELINES[start_name](arrays, manifest)
        val_start = BASELINES[start_name](val_arrays, val_manifest)
        before = referee.releases
        known = None
        if start_name == "persistence":  # the board shows persistence's scores: a free probe
            known = ar.old_view(board_results["board-persistence"])
        transcript = ar.per_pair_levels(
            start, arrays, manifest, referee.old_release(), f"old-{start_name}", known
        )
        runs.append(
            {"start": start_name, "policy": "old", "attack": "per_pair_levels",
             "transcript": transcript, "releases": referee.releases - before,
             "standing": len(transcript.names) - 1}
        )  # fmt: skip
        for knob in ar.KNOBS:
            before = referee.releases
            participant = f"attacker-{start_name}-{knob}"
            label = f"new-{start_name}"
            transcript = ar.ladder_search(
                knob, start, arrays, manifest, referee.release(participant), label
            )
            local = ar.validation_release(public_url, manifest)
            public_only = ar.ladder_search(knob, val_start, val_arrays, val_manifest, local, "v")
            factor = public_only.factors[ar.standing_index(public_only)]
            validated = f"validated-{start_name}-{knob}-x{factor:g}"
            referee.submissions[validated] = ar.turn_knob(knob, start, arrays, manifest, factor)
            runs.append(
                {"start": start_name, "policy": "ladder", "attack": f"ladder_search {knob}",
                 "transcript": transcript, "releases": referee.releases - before,
                 "standing": ar.standing_index(transcript), "validated": validated}
            )  # fmt: skip
        referee.submissions[f"start-{start_name}"] = start
        for knob, factors in ar.KNOBS.items():
            for factor in factors:
                moved = ar.turn_knob(knob, start, arrays, manifest, factor)
                referee.submissions[f"oracle-{start_name}-{knob}-x{factor:g}"] = moved
    harness.log(f"{dataset}: organiser scoring of {len(referee.submissions)} submissions")
    full = referee.score(referee.submissions)
    rows = [_row(dataset, run, full) for run in runs]
    for row, run in zip(rows, runs, strict=True):
        if row["policy"] == "ladder":
            row["oracle"] = _oracle(full, row["start"])
            row["validated"] = run["validated"]
            row["validation_gain"] = _averages(full[run["validated"]])[1] - row["start_private"]
    rows += [_replayed(dataset, full, start, knob) for start in starts for knob in ar.KNOBS]
    final_board = referee.board(final=True)
    return {
        "synth_args": synth_args,
        "rows": rows,
        "board": {"season": season_board, "final": final_board},
        "scores": {
            name: {"whole": r["avg_score"]}
            | {part: r["parts"][part]["avg_score"] for part in ("public", "private")}
            for name, r in full.items()
        },
    }


def _averages(result: dict) -> tuple[float, float]:
    return result["avg_score"], result["parts"]["private"]["avg_score"]


def _row(dataset: str, run: dict, full: dict) -> dict:
    """A table row: the standing submission against the start, on the whole and private."""
    transcript = run["transcript"]
    start_whole, start_private = _averages(full[f"start-{run['start']}"])
    standing = transcript.names[run["standing"]]
    whole, private = _averages(full[standing])
    return {
        "dataset": dataset,
        "start": run["start"],
        "policy": run["policy"],
        "attack": run["attack"],
        "releases": run["releases"],
        "released": [view.get("public_score", view.get("avg_score")) for view in transcript.views],
        "standing": standing,
        "start_whole": start_whole,
        "start_private": start_private,
        "whole_gain": whole - start_whole,
        "private_gain": private - start_private,
    }


def _replayed(dataset: str, full: dict, start: str, knob: str) -> dict:
    """A knob search against a Ladder on the public part's AvgScore (all twelve scores),
    replayed on the organisers' scores of the candidates."""
    first, onward, back = ar.KNOBS[knob]
    best, _ = ladder.next_best(None, full[f"start-{start}"]["parts"]["public"]["avg_score"])
    standing, sequence = f"start-{start}", [best]
    for factor in (first, None):
        factor = factor or (onward if standing != f"start-{start}" else back)
        name = f"oracle-{start}-{knob}-x{factor:g}"
        best, improved = ladder.next_best(best, full[name]["parts"]["public"]["avg_score"])
        standing = name if improved else standing
        sequence.append(best)
    start_whole, start_private = _averages(full[f"start-{start}"])
    whole, private = _averages(full[standing])
    return {"dataset": dataset, "start": start, "policy": "ladder-avg",
            "attack": f"ladder_search {knob}", "releases": 3, "released": sequence,
            "standing": standing, "start_whole": start_whole, "start_private": start_private,
            "whole_gain": whole - start_whole, "private_gain": private - start_private}  # fmt: skip


def _oracle(full: dict, start: str) -> float:
    """The best private gain among every knob candidate from `start`."""
    base = _averages(full[f"start-{start}"])[1]
    prefix = f"oracle-{start}-"
    return max(_averages(r)[1] - base for name, r in full.items() if name.startswith(prefix))


def beyond_validation(row: dict) -> float:
    """What the releases added: the private gain beyond the same search's on public validation
    (none when that search lost: the start was there to keep)."""
    return row["private_gain"] - max(0.0, row.get("validation_gain", 0.0))


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}"


def print_rows(rows: list[dict]) -> None:
    """The table: per attack, the start's AvgScores and what the standing submission gained."""
    print(
        f"\n{'dataset':<8} {'start':<13} {'policy':<10} {'attack':<31} {'rel':>3} "
        f"{'start whole':>11} {'start priv':>10} {'gain whole':>10} {'gain priv':>9} "
        f"{'oracle':>7} {'valid.':>7} {'beyond':>7} {'<=1':>4}"
    )
    for row in rows:
        current = row["policy"] == "ladder"
        met = "yes" if beyond_validation(row) <= GOAL_GAIN else "NO"
        print(
            f"{row['dataset']:<8} {row['start']:<13} {row['policy']:<10} {row['attack']:<31} "
            f"{row['releases']:>3} {row['start_whole']:>11.2f} {row['start_private']:>10.2f} "
            f"{row['whole_gain']:>+10.2f} {row['private_gain']:>+9.2f} "
            f"{_signed(row.get('oracle')):>7} {_signed(row.get('validation_gain')):>7} "
            f"{_signed(beyond_validation(row) if current else None):>7} "
            f"{met if current else '':>4}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=[*DATASETS, "all"], default="all")
    parser.add_argument("--workdir", type=Path, help="where bundles go (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the bundles afterwards")
    parser.add_argument("--json", type=Path, help="write the rows and details here")
    parser.add_argument("--synth-args", help="synth sizes instead of the attack module's")
    parser.add_argument("--starts", default="holdout_best,persistence")
    parser.add_argument("--reuse", action="store_true", help="attack the bundle in DIR/DATASET")
    args = parser.parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="seisctf-release-", dir="/tmp"))
    datasets = DATASETS if args.dataset == "all" else (args.dataset,)
    results, rows = {}, []
    try:
        for dataset in datasets:
            started = time.perf_counter()
            module = attack_module(dataset)
            synth_args = (
                shlex.split(args.synth_args)
                if args.synth_args
                else list(getattr(module, "SYNTH_ARGS", DEFAULT_SYNTH_ARGS[dataset]))
            )
            results[dataset] = run_dataset(
                dataset, root / dataset, synth_args, args.starts.split(","), args.reuse
            )
            rows += results[dataset]["rows"]
            harness.log(f"{dataset}: done in {time.perf_counter() - started:.0f} s")
            print_rows(results[dataset]["rows"])
    finally:
        if not (args.keep or args.reuse):
            for dataset in datasets:
                shutil.rmtree(root / dataset, ignore_errors=True)
            if args.workdir is None:
                shutil.rmtree(root, ignore_errors=True)
    print_rows(rows)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
