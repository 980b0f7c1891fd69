"""Pick scoring: the rules against an independent per-trace loop (tests/pick_reference.py), the
intake's refusals (library and CLI, exit 3 naming the traces), groups, splits, the truth
commitment, the histogram and the leaderboard entry."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pytest
from event_window_fixtures import picking_window_dataset, write_picking_windows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pick_reference import reference_metrics, reference_score

from seisctf import conventions as cv
from seisctf.catalogs import pick_table
from seisctf.cli import main
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import leaderboard, pick_metrics
from seisctf.scoring.picks import (
    PickTruth,
    group_cells,
    read_truth,
    score_pick_table,
    score_picks,
    truth_commitment,
)

RATE = 100.0
OFFSETS_S = (-0.5, 0.5, -0.49, 0.49, -0.51, 0.51, 0.0, 0.01, 1.7, -3.0)


@st.composite
def picking_cases(draw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(labels, submission): arrival samples in [0, 3000] or none, picks at boundary offsets
    (exactly ±0.5 s included), arbitrary times, or none; detections including the threshold."""
    n = draw(st.integers(1, 40))
    labels, rows = [], []
    for i in range(n):
        p_sample = draw(st.one_of(st.none(), st.integers(0, 3000)))
        s_sample = draw(st.one_of(st.none(), st.integers(0, 3000)))
        picks = []
        for sample in (p_sample, s_sample):
            kind = draw(st.sampled_from(["none", "offset", "anywhere"]))
            if kind == "offset" and sample is not None:
                offset = draw(st.one_of(st.sampled_from(OFFSETS_S), st.floats(-2, 2)))
                picks.append(max(0.0, sample / RATE + offset))
            elif kind == "anywhere":
                picks.append(draw(st.floats(0, 40)))
            else:
                picks.append(np.nan)
        detection = draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1)))
        name = f"T{i:03d}"
        labels.append(
            {
                cv.TRACE_NAME: name,
                "p_arrival_s": np.nan if p_sample is None else p_sample / RATE,
                "s_arrival_s": np.nan if s_sample is None else s_sample / RATE,
                cv.SPLIT_VAR: draw(st.sampled_from(["dev", "test"])),
                cv.NETWORK_CODE: "XX",
                cv.STATION_CODE: draw(st.sampled_from(["A", "B", "C"])),
                "source_magnitude": draw(st.one_of(st.just(np.nan), st.floats(0, 4.99))),
            }
        )
        rows.append((name, detection, *picks))
    order = draw(st.permutations(range(n)))  # submission rows in any order
    submission = pd.DataFrame([rows[i] for i in order], columns=list(pick_table.PICK_COLUMNS))
    return pd.DataFrame(labels), submission


def _reference_of(labels: pd.DataFrame, submission: pd.DataFrame) -> dict:
    by_name = submission.set_index(pick_table.TRACE_NAME)
    rows = [
        (
            row.p_arrival_s,
            row.s_arrival_s,
            by_name.loc[row.trace_name, "detection"],
            by_name.loc[row.trace_name, "p_time_s"],
            by_name.loc[row.trace_name, "s_time_s"],
        )
        for row in labels.itertuples()
    ]
    return reference_metrics(rows)


def _assert_metrics_equal(ours: dict, reference: dict) -> None:
    for key in ("detection", "p", "s"):
        for field, expected in reference[key].items():
            got = ours[key][field]
            if expected is None or isinstance(expected, int):
                assert got == expected, (key, field)
            else:
                assert got == pytest.approx(expected, rel=1e-9, abs=1e-12), (key, field)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picking_cases())
def test_scores_equal_the_per_trace_loop_overall_per_split_and_per_group(case):
    labels, submission = case
    truth = PickTruth("memory", "memory", RATE, labels)
    result = score_pick_table(
        truth, submission, name="m", split="all", group_by=("station", "magnitude")
    )
    _assert_metrics_equal(result, _reference_of(labels, submission))
    for split, metrics in result["splits"].items():
        subset = labels[labels[cv.SPLIT_VAR] == split]
        assert metrics["n_traces"] == len(subset)
        _assert_metrics_equal(metrics, _reference_of(subset, submission))
    cells, names = group_cells(labels, "magnitude")
    for by in ("station", "magnitude"):
        cells, names = group_cells(labels, by)
        assert sum(m["n_traces"] for m in result["groups"][by].values()) == len(labels)
        for cell, name in enumerate(names):
            subset = labels[cells == cell]
            if len(subset):
                _assert_metrics_equal(result["groups"][by][name], _reference_of(subset, submission))


@settings(max_examples=60, deadline=None)
@given(picking_cases(), st.integers(1, 7))
def test_any_block_partition_gives_the_same_tally(case, block_traces):
    labels, submission = case
    aligned = submission.set_index(pick_table.TRACE_NAME).loc[labels[cv.TRACE_NAME]]
    arrival = labels[["p_arrival_s", "s_arrival_s"]].to_numpy().T.copy()
    arguments = (
        ~np.isnan(arrival).all(axis=0),
        aligned["detection"].to_numpy(),
        arrival,
        aligned[["p_time_s", "s_time_s"]].to_numpy().T.copy(),
    )
    whole = pick_metrics.tally(*arguments, tolerance_s=0.5, threshold=0.5)
    blocks = pick_metrics.blockwise_tally(
        *arguments, tolerance_s=0.5, threshold=0.5, block_traces=block_traces
    )
    np.testing.assert_array_equal(whole.detection, blocks.detection)
    np.testing.assert_array_equal(whole.phases, blocks.phases)
    np.testing.assert_array_equal(whole.histogram, blocks.histogram)
    np.testing.assert_allclose(whole.moments, blocks.moments, rtol=1e-9, atol=1e-12)


def test_exactly_half_a_second_is_a_hit_a_microsecond_more_is_fp_and_fn(tmp_path):
    # 12.84 − 12.34 = 0.5000000000000018 in float64: the 1 ns slack makes it a hit.
    labels = pd.DataFrame(
        {
            cv.TRACE_NAME: ["a", "b", "c", "d"],
            "p_arrival_s": [1234 / RATE] * 4,
            "s_arrival_s": [np.nan] * 4,
            cv.SPLIT_VAR: ["test"] * 4,
        }
    )
    path = tmp_path / "boundary.csv"
    path.write_text(
        "trace_name,detection,p_time_s,s_time_s\n"
        "a,0.5,12.84,\nb,0.49,11.84,\nc,1,12.840001,\nd,0,11.839999,3.0\n"
    )
    result = score_pick_table(
        PickTruth("memory", "memory", RATE, labels),
        pick_table.read_pick_submission(StoreLocation(path)),
        name="boundary",
    )
    assert result["p"]["tp"] == 2 and result["p"]["fp"] == 2 and result["p"]["fn"] == 2
    assert result["p"]["residual_mae_s"] == pytest.approx(0.5)
    assert result["s"] == {**result["s"], "tp": 0, "fp": 1, "fn": 0, "f1": 0.0}
    assert result["detection"] == {**result["detection"], "tp": 2, "fn": 2, "fp": 0}
    assert result["tolerance_s"] == 0.5 and result["threshold"] == 0.5


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("picks") / "windows.zarr")
    dataset = write_picking_windows(url, n_earthquake=10, n_noise=5)
    return url, dataset


def _perfect_table(dataset, split: str | None = "test") -> pd.DataFrame:
    keep = np.ones(dataset.sizes["trace"], bool)
    if split:
        keep = dataset[cv.SPLIT_VAR].values == split
    p = dataset[cv.P_ARRIVAL_SAMPLE].values[keep] / RATE
    s = dataset[cv.S_ARRIVAL_SAMPLE].values[keep] / RATE
    return pd.DataFrame(
        {
            "trace_name": dataset[cv.TRACE_NAME].values[keep].astype(str),
            "detection": np.where(np.isnan(p), 0.1, 0.9),
            "p_time_s": p + 0.1,
            "s_time_s": s - 0.2,
        }
    )


def test_store_scores_equal_the_loop_from_tables_in_csv_and_parquet(store, tmp_path):
    url, dataset = store
    table = _perfect_table(dataset, split=None)  # every split: rows of dev and train ignored
    table.loc[0, "p_time_s"] = 29.0
    table.loc[1, "detection"] = 1.0 - table.loc[1, "detection"]
    csv, parquet = tmp_path / "sub.csv", tmp_path / "sub.parquet"
    table.to_csv(csv, index=False)
    table.to_parquet(parquet, index=False)
    results = [score_picks(url, str(path), quiet=True) for path in (csv, parquet)]
    assert results[0]["name"] == "sub" and results[0]["dataset"] == "synthpick"
    for key in ("detection", "p", "s", "splits", "truth_commitment"):
        assert results[0][key] == results[1][key]
    test = dataset[cv.SPLIT_VAR].values == "test"
    truth_rows = zip(
        dataset[cv.TRACE_NAME].values[test],
        dataset[cv.P_ARRIVAL_SAMPLE].values[test],
        dataset[cv.S_ARRIVAL_SAMPLE].values[test],
        strict=True,
    )
    expected = reference_score(truth_rows, RATE, table.itertuples(index=False))
    _assert_metrics_equal(results[0], expected)
    assert results[0]["n_traces"] == int(test.sum())
    assert results[0]["n_ignored"] == len(table) - int(test.sum())
    assert list(results[0]["splits"]) == ["test"]


def test_truth_commitment_is_the_documented_hash_and_ignores_store_order(store):
    url, dataset = store
    truth = read_truth(StoreLocation(url))
    test = truth.scored("test")
    names = truth.labels[cv.TRACE_NAME].to_numpy()[test]
    p = dataset[cv.P_ARRIVAL_SAMPLE].values[test]
    s = dataset[cv.S_ARRIVAL_SAMPLE].values[test]
    order = sorted(range(len(names)), key=lambda i: names[i])
    digest = hashlib.sha256(b"seisctf picks truth v1\n")
    digest.update(b"sampling_rate_hz=100.0\n")
    digest.update(("\n".join(names[i] for i in order) + "\n").encode())
    for samples in (p, s):
        digest.update(b"".join(np.float64(samples[i]).tobytes() for i in order))
    assert truth_commitment(names, p, s, RATE) == digest.hexdigest()
    shuffled = np.random.default_rng(0).permutation(len(names))
    assert truth_commitment(names[shuffled], p[shuffled], s[shuffled], RATE) == digest.hexdigest()
    moved = p.copy()
    moved[np.flatnonzero(~np.isnan(p))[0]] += 1
    assert truth_commitment(names, moved, s, RATE) != digest.hexdigest()
    result = score_picks(url, _perfect_table(dataset), quiet=True)
    assert result["truth_commitment"] == digest.hexdigest()


def test_groups_bin_magnitude_and_stead_style_snr():
    labels = pd.DataFrame(
        {
            "source_magnitude": [0.2, 1.0, 1.99, np.nan, 3.5],
            "trace_snr_db": ["[5.0 15.0 10.0]", "25", "nan", "[]", "[31.0 nan 39.0]"],
            cv.NETWORK_CODE: ["A", "A", "B", "B", "A"],
            cv.STATION_CODE: ["X", "Y", "X", "X", "X"],
        }
    )
    cells, names = group_cells(labels, "magnitude")
    assert names == ["[0, 1)", "[1, 2)", "[3, 4)", "none"]
    assert cells.tolist() == [0, 1, 1, 3, 2]
    cells, names = group_cells(labels, "snr")
    assert names == ["[10, 20) dB", "[20, 30) dB", "[30, 40) dB", "none"]
    assert cells.tolist() == [0, 1, 3, 3, 2]
    cells, names = group_cells(labels, "station")
    assert names == ["A.X", "A.Y", "B.X"] and cells.tolist() == [0, 1, 2, 2, 0]


def test_truth_store_with_repeated_trace_names_is_refused(tmp_path):
    from seisctf.catalogs import event_windows

    dataset = picking_window_dataset(n_earthquake=4, n_noise=2)
    names = dataset[cv.TRACE_NAME].values.copy()
    names[3] = names[0]
    dataset = dataset.assign_coords({cv.TRACE_NAME: (cv.TRACE, names)})
    url = str(tmp_path / "dup.zarr")
    event_windows.write_event_windows(dataset, StoreLocation(url), quiet=True)
    with pytest.raises(InvalidInput, match=f"1 trace appear more than once.*'{names[0]}'"):
        read_truth(StoreLocation(url))


def test_store_without_split_needs_split_all(tmp_path):
    from seisctf.catalogs import event_windows

    dataset = picking_window_dataset(n_earthquake=3, n_noise=1).drop_vars(cv.SPLIT_VAR)
    url = str(tmp_path / "nosplit.zarr")
    event_windows.write_event_windows(dataset, StoreLocation(url), quiet=True)
    table = _perfect_table(dataset, split=None)
    with pytest.raises(InvalidInput, match="run `seisctf split` first"):
        score_picks(url, table)
    result = score_picks(url, table, split="all")
    assert result["p"]["f1"] == 1.0 and list(result["splits"]) == ["none"]


# --- the intake's refusals, through the CLI -------------------------------------------------------


def _bad_tables(table: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, str]]:
    """Each kind of bad submission and the text its error must hold (names the traces)."""
    first, second = table.trace_name[0], table.trace_name[1]

    def edited(column: str, row: int, value) -> pd.DataFrame:
        out = table.astype({column: object})
        out.loc[row, column] = value
        return out

    unknown = pd.concat([table, table.iloc[[0]].assign(trace_name="NOPE.X_9999")])
    return {
        "missing column": (table.drop(columns="s_time_s"), "missing column(s) ['s_time_s']"),
        "duplicate": (pd.concat([table, table.iloc[[1]]]), f"listed twice: '{second}'"),
        "unknown": (unknown, "not in the truth store: 'NOPE.X_9999'"),
        "missing trace": (table.iloc[1:], f"of the split missing: '{first}'"),
        "probability": (edited("detection", 1, 1.5), f"outside [0, 1]: '{second}'"),
        "no probability": (edited("detection", 0, ""), f"outside [0, 1]: '{first}'"),
        "infinite time": (edited("p_time_s", 0, "inf"), f"p_time_s not finite: '{first}'"),
        "negative time": (edited("p_time_s", 1, -0.5), f"negative (before the window): '{second}'"),
        "text": (edited("p_time_s", 1, "soon"), f"p_time_s not a number: '{second}'"),
    }


def test_cli_refuses_each_bad_submission_kind_with_exit_3(store, tmp_path, capsys, dask_cluster):
    url, dataset = store
    for kind, (table, message) in _bad_tables(_perfect_table(dataset)).items():
        path = tmp_path / f"{kind.replace(' ', '_')}.csv"
        table.to_csv(path, index=False)
        argv = ["score", "picks", "--truth", url, "--submission", str(path), "--quiet"]
        assert main([*argv, "--scheduler", dask_cluster.address]) == 3, kind
        err = capsys.readouterr().err
        assert message in err and str(path) in err and "Traceback" not in err, (kind, err)


def test_a_public_store_checks_a_table_as_the_referee_does_without_its_labels(store, tmp_path):
    """`check_pick_submission` against the store without its arrival columns (a public bundle):
    each bad table refused as `score_picks` refuses it, a good one passes with its ignored
    rows counted; the store's commitment of a split is the result's."""
    from seisctf.catalogs import event_windows
    from seisctf.scoring.picks import check_pick_submission

    url, dataset = store
    public = str(tmp_path / "public.zarr")
    unlabelled = dataset.drop_vars([cv.P_ARRIVAL_SAMPLE, cv.S_ARRIVAL_SAMPLE])
    event_windows.write_event_windows(unlabelled, StoreLocation(public), quiet=True)
    with pytest.raises(InvalidInput, match="has no per-trace"):
        read_truth(StoreLocation(public))
    for kind, (table, message) in _bad_tables(_perfect_table(dataset)).items():
        path = tmp_path / f"{kind.replace(' ', '_')}.csv"
        table.to_csv(path, index=False)
        with pytest.raises(InvalidInput) as refused:
            check_pick_submission(StoreLocation(public), StoreLocation(str(path)))
        assert message in str(refused.value) and str(path) in str(refused.value), kind
    good = tmp_path / "good.csv"
    _perfect_table(dataset, split=None).to_csv(good, index=False)
    ignored = check_pick_submission(StoreLocation(public), StoreLocation(str(good)))
    assert ignored == int((dataset[cv.SPLIT_VAR].values != "test").sum()) > 0
    result = score_picks(url, str(good))
    assert read_truth(StoreLocation(url)).commitment("test") == result["truth_commitment"]


def test_parquet_column_types_are_checked(store, tmp_path):
    url, dataset = store
    table = _perfect_table(dataset)
    boolean = tmp_path / "bool.parquet"
    table.assign(detection=table.detection > 0.5).to_parquet(boolean, index=False)
    with pytest.raises(InvalidInput, match="column 'detection' has type bool"):
        score_picks(url, str(boolean))
    text = tmp_path / "text.parquet"
    table.assign(s_time_s=table.s_time_s.astype(str).replace("nan", "")).to_parquet(text)
    assert score_picks(url, str(text))["s"]["f1"] == 1.0
    with pytest.raises(InvalidInput, match="expected a pick table ending in"):
        score_picks(url, str(tmp_path / "picks.json"))


def test_cli_records_a_picks_entry_and_writes_json_and_histogram(
    store, tmp_path, capsys, dask_cluster
):
    url, dataset = store
    submission = tmp_path / "perfect.parquet"
    _perfect_table(dataset).to_parquet(submission, index=False)
    db, out, png = tmp_path / "board.sqlite", tmp_path / "r.json", tmp_path / "residuals.png"
    argv = ["score", "picks", "--truth", url, "--submission", str(submission), "--quiet"]
    argv += ["--db", str(db), "--json", str(out), "--histogram", str(png), "--name", "oracle"]
    argv += ["--group-by", "station", "snr", "--scheduler", dask_cluster.address]
    assert main(argv) == 0, capsys.readouterr().err
    result = pd.read_json(out, typ="series")
    assert result["family"] == "picks" and result["p"]["f1"] == 1.0
    assert result["p"]["residual_mean_s"] == pytest.approx(0.1)
    assert result["s"]["residual_mean_s"] == pytest.approx(-0.2)
    assert sum(result["residual_histogram"]["p"]) == result["p"]["tp"]
    assert set(result["groups"]) == {"station", "snr"}
    (entry,) = leaderboard.entries(db, family="picks")
    assert entry["model"] == "oracle" and entry["dataset"] == "synthpick"
    assert entry["scores"] == {"detection_f1": 1.0, "p_f1": 1.0, "s_f1": 1.0}
    assert entry["truth_commitment"] == result["truth_commitment"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not math.isnan(result["detection"]["f1"])
