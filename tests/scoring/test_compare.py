"""`seisctf compare`: recovery of known variance components, the report and the command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from runs_fixtures import CELLS, simulate_runs
from scipy import stats

from seisctf.cli import main
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.compare import compare_metric, compare_runs
from seisctf.scoring.uncertainty import (
    identical_draw_budgets,
    read_runs,
    validate_runs,
)

HOMOGENEOUS = {
    (approach, budget): (0.5 + 0.1 * i + 0.05 * budget, 0.04, 0.03)
    for i, approach in enumerate(["a", "b", "c"])
    for budget in (1.0, 3.0, 6.0)
}


def _inside(interval, value) -> bool:
    return interval[0] <= value <= interval[1]


def _cell_hits(section: dict, truth: dict) -> list[bool]:
    hits = []
    for cell in section["cells"]:
        mean, data_sd, train_sd = truth[cell["approach"], float(cell["budget"])]
        hits.append(_inside(cell["interval"], mean))
        hits.append(_inside(cell["data_variance"]["interval"], data_sd**2))
        hits.append(_inside(cell["training_variance"]["interval"], train_sd**2))
    return hits


def test_mixed_model_recovers_known_components():
    """Acceptance: the pooled fit (MixedLM REML, equal to the pooled nested ANOVA on balanced
    data) recovers σ²_data and σ²_train within their intervals, with seed 0 and in at least 17
    of 20 intervals over ten seeds; 4× the true data variance is mostly outside."""
    hits, wrong = [], []
    for seed in range(10):
        runs = validate_runs(simulate_runs(HOMOGENEOUS, n_draws=10, n_seeds=4, seed=seed))
        section, _ = compare_metric(runs, identical={}, n_sim=1000)
        mixed = section["mixed_model"]
        pooled = mixed["anova_estimate"]
        assert mixed["fitted"] and mixed["n_groups"] == 90
        assert mixed["data_variance"] == pytest.approx(pooled["data_variance"], rel=1e-3)
        assert mixed["training_variance"] == pytest.approx(pooled["training_variance"], rel=1e-4)
        seed_hits = [
            _inside(pooled["data_variance_interval"], 0.04**2),
            _inside(pooled["training_variance_interval"], 0.03**2),
        ]
        if seed == 0:
            assert all(seed_hits)
        hits += seed_hits
        wrong.append(_inside(pooled["data_variance_interval"], 4 * 0.04**2))
    assert sum(hits) >= 17
    assert sum(wrong) <= 2


def test_cells_recover_heterogeneous_components_over_seeds():
    """Per cell (six cells of two approaches, each with its own components): 95 % intervals of
    the mean, σ²_data and σ²_train cover the truth in 88–99 % of 180 cases over ten seeds."""
    hits = []
    for seed in range(10):
        runs = validate_runs(simulate_runs(CELLS, n_draws=12, n_seeds=4, seed=seed))
        section, _ = compare_metric(runs, identical={}, n_sim=1000)
        hits += _cell_hits(section, CELLS)
    assert 0.88 <= np.mean(hits) <= 0.99


def test_report_pieces_against_independent_computations(tmp_path):
    table = simulate_runs(CELLS, n_draws=6, n_seeds=3, seed=4)
    runs = validate_runs(table)
    report = compare_runs(runs, out=tmp_path, seed=2, n_sim=50_000)
    section = report["metrics"]["f1"]
    # Cell intervals: scipy's 95 % Student-t intervals of the draw means.
    for cell in section["cells"]:
        rows = table[(table.approach == cell["approach"]) & (table.budget == float(cell["budget"]))]
        draw_means = rows.groupby("data_draw")["value"].mean().to_numpy()
        centre = np.mean(draw_means)
        low, high = stats.t.interval(
            0.95, len(draw_means) - 1, loc=centre, scale=stats.sem(draw_means)
        )
        assert [cell["mean"], *cell["interval"]] == pytest.approx([centre, low, high])
    # OLS on the saturated budget × approach model: R² = 1 − SS(within cells) / SS(total).
    within = table.groupby(["approach", "budget"])["value"].transform(lambda v: v - v.mean())
    total = table["value"] - table["value"].mean()
    r_squared = 1 - np.sum(within**2) / np.sum(total**2)
    assert section["fixed_effects"]["r_squared"] == pytest.approx(r_squared, rel=1e-9)
    # Mis-ranking from the cells' REML components: the normal formula Φ(−|Δ| / √Σσ²).
    cells = {(c["approach"], c["budget"]): c for c in section["cells"]}
    for pair in section["misranking"]:
        a, b = cells[pair["approach_a"], pair["budget"]], cells[pair["approach_b"], pair["budget"]]
        variances = [c["reml"][k] for c in (a, b) for k in ("data_variance", "training_variance")]
        spread = math.sqrt(sum(variances))
        expected = stats.norm.cdf(-abs(a["mean"] - b["mean"]) / spread)
        assert pair["probability"] == pytest.approx(expected, abs=0.006)
    # Overall mean of an approach: the mean of its budget means, Welch–Satterthwaite t interval.
    for approach, means in section["approach_means"].items():
        draw_means = [
            table[(table.approach == approach) & (table.budget == b)]
            .groupby("data_draw")["value"]
            .mean()
            for b in (1.0, 3.0, 6.0)
        ]
        variances = np.array([np.var(m, ddof=1) / len(m) for m in draw_means])
        df = np.sum(variances) ** 2 / np.sum(variances**2 / 5)
        half = stats.t.ppf(0.975, df) * math.sqrt(np.sum(variances)) / 3
        centre = np.mean([np.mean(m) for m in draw_means])
        assert means["overall"]["mean"] == pytest.approx(centre)
        assert means["overall"]["interval"] == pytest.approx([centre - half, centre + half])
    written = json.loads((tmp_path / "report.json").read_text(), parse_constant=_refuse)
    assert written == report
    for name in section["figures"].values():
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        compare_runs(runs, seed=2, n_sim=50_000)["metrics"]["f1"]["misranking"]
        == (section["misranking"])
    )


def _refuse(constant: str):
    raise AssertionError(f"{constant} in report.json")


def _with_reference(n_draws: int = 5) -> pd.DataFrame:
    """Two stochastic approaches, a deterministic one and a budget of all 12 clusters."""
    cells = {**CELLS, ("net", 12.0): (0.9, 0.0, 0.02), ("big", 12.0): (0.92, 0.0, 0.02)}
    cells |= {("stalta", b): (0.5, 0.03, 0.0) for b in (1.0, 3.0, 6.0)}
    cells[("stalta", 12.0)] = (0.55, 0.0, 0.0)
    return simulate_runs(cells, n_draws=n_draws, n_seeds=3, seed=9)


def test_deterministic_approach_and_identical_draws(tmp_path):
    runs = validate_runs(_with_reference())
    identical = identical_draw_budgets(runs, n_clusters=12)
    assert list(identical) == [12.0]
    section = compare_runs(runs, identical=identical)["metrics"]["f1"]
    assert section["deterministic_approaches"] == ["stalta"]
    assert section["identical_draw_budgets"] == {"12": "all 12 training clusters (--clusters)"}
    cells = {(c["approach"], c["budget"]): c for c in section["cells"]}
    for budget in ("1", "3", "6", "12"):
        cell = cells["stalta", budget]
        assert cell["deterministic"] and cell["training_variance"]["estimate"] == 0.0
        assert any("by construction" in note for note in cell["notes"])
    stalta = cells["stalta", "3"]
    draw_values = list(stalta["draw_means"].values())
    assert stalta["data_variance"]["estimate"] == pytest.approx(np.var(draw_values, ddof=1))
    for approach in ("net", "big", "stalta"):
        cell = cells[approach, "12"]
        assert not cell["data_identifiable"] and cell["data_variance"] is None
        assert any("not identifiable" in note for note in cell["notes"])
    assert cells["stalta", "12"]["interval"] == [0.55, 0.55]  # no randomness left at all
    net = cells["net", "12"]
    values = runs[(runs.approach == "net") & (runs.budget == 12)]["value"]
    assert net["training_variance"]["estimate"] == pytest.approx(np.var(values, ddof=1))
    # The deterministic approach stays out of the pooled mixed model and of the MoM count.
    assert section["mixed_model"]["approaches"] == ["big", "net"]
    assert section["negative_mom_data_variance"]["of"] == 6
    # Without the flag, the one-set budget is an error naming the cell... unless draws exist.
    one_draw = runs[~((runs.budget == 12) & (runs.data_draw != "0"))]
    with pytest.raises(InvalidInput, match="approach big, budget 12: one data draw"):
        compare_runs(one_draw)
    assert compare_runs(one_draw, identical=identical)["metrics"]["f1"]["cells"]


def test_equal_seeds_are_estimated_not_declared_deterministic():
    cells = {("flat", 1.0): (0.7, 0.05, 0.0), ("flat", 3.0): (0.8, 0.05, 0.0)}
    runs = simulate_runs(cells, n_draws=4, seed=2)
    runs = pd.concat([runs.assign(training_seed=s) for s in (0, 1)])  # two seeds, equal values
    section = compare_runs(validate_runs(runs))["metrics"]["f1"]
    assert section["deterministic_approaches"] == []
    for cell in section["cells"]:
        assert cell["training_variance"]["estimate"] == 0.0 and not cell["deterministic"]
        assert any("no variation between seeds" in note for note in cell["notes"])
        expected = np.var(list(cell["draw_means"].values()), ddof=1)
        assert cell["data_variance"]["estimate"] == pytest.approx(expected)


def test_identical_budgets_from_column_and_audit():
    runs = _with_reference(n_draws=3)
    with_column = validate_runs(runs.assign(n_clusters_total=12))
    assert list(identical_draw_budgets(with_column)) == [12.0]
    audit = {"budgets": {str(b): {"distinct_draws": 1 if b == 12 else 220} for b in (1, 3, 6, 12)}}
    assert list(identical_draw_budgets(validate_runs(runs), audit=audit)) == [12.0]
    with pytest.raises(InvalidInput, match="budget 3 not in the audit"):
        identical_draw_budgets(validate_runs(runs), audit={"budgets": {"1": {"distinct_draws": 3}}})
    with pytest.raises(InvalidInput, match="exceeds 9 clusters"):
        identical_draw_budgets(validate_runs(runs), n_clusters=9)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.drop(columns="data_draw"), "missing column(s) data_draw"),
        (
            lambda t: t.assign(value=t.value.where(t.index != 4, np.inf)),
            "column value: not a finite number at data row(s) 5",
        ),
        (
            lambda t: t.assign(value=t.value.astype(object).where(t.index != 2, "x")),
            "data row(s) 3",
        ),
        (lambda t: t.assign(budget=t.budget.where(t.index != 0, -1)), "column budget"),
        (
            lambda t: t.assign(approach=t.approach.where(t.index != 1, "")),
            "column approach: empty at data row(s) 2",
        ),
        (lambda t: pd.concat([t, t.iloc[:1]]), "runs repeat"),
        (
            lambda t: t.assign(training_seed=t.training_seed.where(t.index != 0, None)),
            "empty for some runs of net",
        ),
    ],
)
def test_bad_runs_tables_are_refused(tmp_path, capsys, change, message):
    path = tmp_path / "runs.csv"
    change(simulate_runs(CELLS, n_draws=3, n_seeds=2)).to_csv(path, index=False)
    with pytest.raises(InvalidInput, match=None) as error:
        read_runs(StoreLocation(path))
    assert message in str(error.value) and str(path) in str(error.value)
    assert main(["compare", str(path), "--out", str(tmp_path / "out")]) == 3
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "report.json").exists()


def test_command_line(tmp_path, capsys):
    runs = _with_reference(n_draws=4)
    path = tmp_path / "runs.parquet"
    runs.assign(metric="p_f1").pipe(
        lambda t: pd.concat([t, runs.assign(metric="s_f1")])
    ).to_parquet(path)
    audit = tmp_path / "audit.json"
    audit.write_text(
        json.dumps(
            {
                "budgets": {
                    "1": {"distinct_draws": 12},
                    "3": {"distinct_draws": 220},
                    "6": {"distinct_draws": 924},
                    "12": {"distinct_draws": 1},
                }
            }
        )
    )
    out = tmp_path / "report"
    code = main(
        [
            "compare",
            str(path),
            "--out",
            str(out),
            "--metric",
            "s_f1",
            "--audit",
            str(audit),
            "--seed",
            "3",
            "--level",
            "0.9",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "deterministic approach" in printed and f"wrote {out / 'report.json'}" in printed
    report = json.loads((out / "report.json").read_text())
    assert list(report["metrics"]) == ["s_f1"] and report["level"] == 0.9 and report["seed"] == 3
    assert sorted(p.name for p in out.glob("*.png")) == ["learning_curves_s_f1.png", "qq_s_f1.png"]
    assert main(["compare", str(path), "--out", str(out), "--metric", "nope"]) == 3
    assert "nope" in capsys.readouterr().err
    assert main(["compare", str(path), "--out", str(out), "--audit", str(tmp_path / "x.json")]) == 3
