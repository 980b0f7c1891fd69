"""Benchmark: pick scoring, vectorised (seisctf.scoring.pick_metrics / picks) against the
per-trace pure-Python loop of the same rules (tests/pick_reference.py), on N synthetic traces.

Rows: 70 % earthquake windows (P at 5–15 s, S 2–10 s later on 80 % of them), 30 % noise; the
submission misses 20 % of the P and 30 % of the S picks, the rest scattered N(0, 0.4 s) around
the arrival (or anywhere on noise windows); uniform detection probabilities. Three rows:

  rules      the scoring kernel on aligned arrays (`pick_metrics.blockwise_tally`, one cell) vs
             the loop over aligned per-trace tuples (`reference_metrics`);
  tables     from in-memory tables to the result object: intake checks, name join, overall and
             per-split tallies, the truth commitment (`validate_pick_table` +
             `picks.score_pick_table`) vs the loop with its dict join (`reference_score`); once
             with the test traces in store order (what the baseline pickers write: no name is
             hashed), once with every trace shuffled (dev rows ignored: the hash join);
  store      (with --store) `picks.score_picks` from the shuffled table as Parquet and an
             event-window store holding the labels (waveforms of one sample), Dask on local
             threads, against the shuffled loop.

Each vectorised path runs --repeat times (median); the loop runs --loop-repeat times (median).
Results are checked equal (counts exactly, residual statistics to 1e-9) before timing counts.

    .venv/bin/python benchmarks/bench_pick_scoring.py [--traces 1000000] [--repeat 5] [--store]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_ctf_scoring import load_average, machine_facts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pick_reference import reference_metrics, reference_score  # noqa: E402

from seisctf.location import StoreLocation

RATE_HZ = 100.0


def synthetic(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(labels, submission) of n traces in the same order (module doc); arrival samples are
    integers; every fifth trace is in the dev split, the others in test."""
    rng = np.random.default_rng(seed)
    quake = rng.uniform(size=n) < 0.7
    p_sample = np.where(quake, np.round(rng.uniform(5, 15, n) * RATE_HZ), np.nan)
    has_s = quake & (rng.uniform(size=n) < 0.8)
    s_sample = np.where(has_s, p_sample + np.round(rng.uniform(2, 10, n) * RATE_HZ), np.nan)
    p_pick = np.where(quake, p_sample / RATE_HZ, rng.uniform(0, 30, n)) + rng.normal(0, 0.4, n)
    s_pick = np.where(has_s, s_sample / RATE_HZ, rng.uniform(0, 30, n)) + rng.normal(0, 0.4, n)
    p_pick = np.where(rng.uniform(size=n) < 0.8, np.abs(p_pick), np.nan)
    s_pick = np.where(rng.uniform(size=n) < 0.7, np.abs(s_pick), np.nan)
    names = np.array([f"XX.S{i % 997:03d}_{i:08d}" for i in range(n)], dtype=object)
    labels = pd.DataFrame(
        {
            "trace_name": names,
            "trace_p_arrival_sample": p_sample,
            "trace_s_arrival_sample": s_sample,
            "split": np.where(np.arange(n) % 5 == 0, "dev", "test"),
        }
    )
    submission = pd.DataFrame(
        {
            "trace_name": names,
            "detection": rng.uniform(size=n),
            "p_time_s": p_pick,
            "s_time_s": s_pick,
        }
    )
    return labels, submission


def timed(function, repeat: int) -> tuple[float, list[float], object]:
    runs, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), runs, value


def check_equal(ours: dict, reference: dict) -> float:
    """Counts must match exactly; returns the largest |difference| of the other numbers."""
    worst = 0.0
    for key in ("detection", "p", "s"):
        for field, expected in reference[key].items():
            got = ours[key][field]
            if isinstance(expected, int) or expected is None:
                assert got == expected, (key, field, got, expected)
            else:
                worst = max(worst, abs(got - expected))
    assert worst < 1e-9, worst
    return worst


def write_store(labels: pd.DataFrame, url: str) -> None:
    """An event-window store of `labels` with one-sample waveforms (the labels are what
    scoring reads)."""
    import xarray as xr

    from seisctf import conventions as cv
    from seisctf.catalogs import event_windows

    n = len(labels)
    frame = labels.drop(columns="split").assign(trace_npts=np.ones(n, dtype=np.int64))
    dataset = event_windows.event_window_dataset(
        np.zeros((n, 1, 1), np.float32), frame.assign(split=labels["split"]), ["Z"], RATE_HZ
    )
    assert isinstance(dataset, xr.Dataset) and cv.SPLIT_VAR in dataset
    layout = event_windows.WindowLayout(chunk_traces=n, shard_traces=None, compress=False)
    event_windows.write_event_windows(dataset, StoreLocation(url), layout=layout, quiet=True)


def main() -> None:
    from seisctf.catalogs.pick_table import validate_pick_table
    from seisctf.scoring import pick_metrics
    from seisctf.scoring.picks import PickTruth, score_pick_table, score_picks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loop-repeat", type=int, default=3)
    parser.add_argument("--store", action="store_true", help="also time score_picks on a store")
    args = parser.parse_args()
    facts = machine_facts()
    labels, submission = synthetic(args.traces)
    test = (labels["split"] == "test").to_numpy()
    arrival_s = labels[["trace_p_arrival_sample", "trace_s_arrival_sample"]].to_numpy().T / RATE_HZ
    aligned = submission  # the same order as labels
    picks_s = aligned[["p_time_s", "s_time_s"]].to_numpy().T.copy()
    detection = aligned["detection"].to_numpy()
    earthquake = ~np.isnan(arrival_s).all(axis=0)
    rows = list(
        zip(*arrival_s.tolist(), detection.tolist(), *picks_s.tolist(), strict=True)
    )  # the loop's input: per-trace tuples, built outside its timing

    def kernel() -> dict:
        tally = pick_metrics.blockwise_tally(
            earthquake, detection, arrival_s, picks_s, tolerance_s=0.5, threshold=0.5
        )
        return pick_metrics.cell_metrics(tally, 0)

    table = []
    vector = timed(kernel, args.repeat)
    loop = timed(lambda: reference_metrics(rows), args.loop_repeat)
    table.append(("rules", vector, loop, check_equal(vector[2], loop[2])))

    truth_labels = pd.DataFrame(
        {
            "trace_name": labels["trace_name"],
            "p_arrival_s": arrival_s[0],
            "s_arrival_s": arrival_s[1],
            "split": labels["split"],
        }
    )
    truth = PickTruth("memory", "synthetic", RATE_HZ, truth_labels)
    truth_rows = list(
        zip(
            labels["trace_name"][test],
            labels["trace_p_arrival_sample"][test],
            labels["trace_s_arrival_sample"][test],
            strict=True,
        )
    )
    variants = {
        "tables, store order": submission[test].reset_index(drop=True),
        "tables, shuffled": submission.sample(frac=1.0, random_state=1).reset_index(drop=True),
    }
    for name, variant in variants.items():
        rows_of_variant = list(variant.itertuples(index=False, name=None))

        def score(frame: pd.DataFrame = variant) -> dict:
            checked = validate_pick_table(frame, "bench", check_unique=False)
            return score_pick_table(truth, checked, name="bench")

        vector = timed(score, args.repeat)
        loop = timed(
            lambda rows=rows_of_variant: reference_score(truth_rows, RATE_HZ, rows),
            args.loop_repeat,
        )
        table.append((name, vector, loop, check_equal(vector[2], loop[2])))

    if args.store:
        with tempfile.TemporaryDirectory() as folder:
            url = f"{folder}/labels.zarr"
            start = time.perf_counter()
            write_store(labels, url)
            facts.append(
                f"store of {args.traces:,} traces written in {time.perf_counter() - start:.1f} s"
            )
            path = f"{folder}/submission.parquet"
            variants["tables, shuffled"].to_parquet(path, index=False)
            vector = timed(lambda: score_picks(url, path, quiet=True), args.repeat)
            table.append(("store", vector, loop, check_equal(vector[2], loop[2])))

    facts.append(f"load average at end (1, 5, 15 min): {load_average()}")
    print("\n".join(facts))
    print(f"traces: {args.traces:,} ({int(test.sum()):,} scored in the tables and store rows)")
    print()
    print(
        "| path | vectorised median s | runs | loop median s | runs | loop ÷ vectorised | max |Δ| |"
    )
    print("|---|---:|---|---:|---|---:|---:|")
    for name, (v_median, v_runs, _), (l_median, l_runs, _), worst in table:
        print(
            f"| {name} | {v_median:.3f} | {', '.join(f'{r:.3f}' for r in v_runs)} | "
            f"{l_median:.2f} | {', '.join(f'{r:.2f}' for r in l_runs)} | "
            f"{l_median / v_median:.0f}× | {worst:.1e} |"
        )


if __name__ == "__main__":
    main()
