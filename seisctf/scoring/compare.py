"""The report of `seisctf compare RUNS.csv`: variance components per approach × budget cell,
global fixed-effects and mixed-model fits, intervals of each approach's mean, single-run
mis-ranking probabilities, QQ plots and learning-efficiency curves (docs/contract.md)."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from seisctf.errors import InvalidInput
from seisctf.scoring import uncertainty as un
from seisctf.scoring.site.uncertainty_plots import learning_curves, qq_plots
from seisctf.wording import counted

DETERMINISTIC_NOTE = "deterministic approach: training variance 0 by construction"
CONFOUNDED_NOTE = "one training seed per draw: data and training variance are confounded"


def _cell(rows: pd.DataFrame, *, deterministic: bool, identical: str | None, level: float):
    """One approach × budget cell: its mean and interval, variance components and the variances
    of a single run (for the mis-ranking simulation). Returns (report entry, run variances)."""
    values = rows["value"].to_numpy(float)
    draws = rows["data_draw"].to_numpy()
    draw_means = rows.groupby("data_draw")["value"].mean()
    per_draw = rows.groupby("data_draw").size()
    # Independent units of the mean: the draws, or every run where the draws are one set.
    units = values if identical else draw_means.to_numpy(float)
    mean, se, df = un.mean_se_df(units)
    if deterministic and identical and np.ptp(units) == 0:
        se = 0.0  # no randomness left at all: the one value is exact
    _, low, high = un.t_interval(mean, se, df, level)
    entry: dict[str, Any] = {
        "approach": rows["approach"].iat[0],
        "budget": un.budget_label(rows["budget"].to_numpy(float)[0]),
        "n_draws": int(draw_means.size),
        "n_runs": int(values.size),
        "seeds_per_draw": [int(per_draw.min()), int(per_draw.max())],
        "mean": mean,
        "interval": [low, high],
        "standard_error": se,
        "deterministic": deterministic,
        "data_identifiable": identical is None,
        "data_variance": None,
        "training_variance": None,
        "mom": None,
        "reml": None,
        "notes": [],
        "draw_means": {str(k): float(v) for k, v in draw_means.items()},
    }
    notes = entry["notes"]
    if identical:
        notes.append(
            f"data variance not identifiable: every draw is the same training set ({identical})"
        )
    if deterministic:
        notes.append(DETERMINISTIC_NOTE)
        entry["training_variance"] = {"estimate": 0.0, "interval": [0.0, 0.0]}
        if identical:
            return entry, [0.0]
        variance = float(np.var(units, ddof=1))
        entry["data_variance"] = {
            "estimate": variance,
            "interval": list(un.chi2_interval(variance, units.size - 1, level)),
        }
        return entry, [variance]
    if identical:
        variance = float(np.var(values, ddof=1)) if values.size > 1 else math.nan
        entry["training_variance"] = {
            "estimate": variance,
            "interval": list(un.chi2_interval(variance, values.size - 1, level)),
        }
        return entry, [variance]
    anova = un.nested_anova(values, draws)
    if anova.df_within < 1:
        notes.append(CONFOUNDED_NOTE)
        variance = float(np.var(units, ddof=1))
        entry["total_variance"] = {
            "estimate": variance,
            "interval": list(un.chi2_interval(variance, units.size - 1, level)),
        }
        return entry, [variance]
    (data_low, data_high), training_interval = anova.intervals(level)
    entry["mom"] = {
        "data_variance": anova.data_variance,
        "training_variance": anova.training_variance,
        "negative_data_variance": anova.data_variance < 0,
        "ms_between": anova.ms_between,
        "df_between": anova.df_between,
        "ms_within": anova.ms_within,
        "df_within": anova.df_within,
        "n0": anova.n0,
    }
    entry["data_variance"] = {"estimate": anova.data_variance, "interval": [data_low, data_high]}
    entry["training_variance"] = {
        "estimate": anova.training_variance,
        "interval": list(training_interval),
    }
    if anova.ms_within == 0:
        notes.append("no variation between seeds: REML not fitted (training variance 0)")
        return entry, [max(anova.data_variance, 0.0), 0.0]
    fit = un.reml_fit("value ~ 1", rows.assign(value=values), "data_draw")
    if fit is None:
        notes.append("REML fit failed; the single-run variances use max(MoM, 0)")
        return entry, [max(anova.data_variance, 0.0), anova.training_variance]
    reml = (float(np.asarray(fit.cov_re)[0, 0]), float(fit.scale))
    entry["reml"] = {
        "data_variance": reml[0],
        "training_variance": reml[1],
        "converged": bool(fit.converged),
    }
    return entry, list(reml)


def _approach_means(cells: list[dict], level: float) -> dict[str, Any]:
    """Per approach: each budget's mean and interval, and the mean over budgets (equal weights)
    with a Welch–Satterthwaite t interval from the cells' standard errors."""
    result: dict[str, Any] = {}
    for approach, of_approach in itertools.groupby(cells, key=lambda c: c["approach"]):
        group = list(of_approach)
        means = np.array([c["mean"] for c in group])
        se = np.array([c["standard_error"] for c in group])
        df = np.array(
            [
                len(c["draw_means"]) - 1 if c["data_identifiable"] else c["n_runs"] - 1
                for c in group
            ],
            dtype=float,
        )
        if np.isnan(se).any():
            overall = (float(means.mean()), math.nan, math.nan)
            se_mean = math.nan
        else:
            variance = float(np.sum(se**2)) / means.size**2
            se_mean = math.sqrt(variance)
            spread = se > 0
            df_mean = (
                np.sum(se[spread] ** 2) ** 2 / np.sum(se[spread] ** 4 / df[spread])
                if spread.any()
                else math.inf
            )
            overall = un.t_interval(float(means.mean()), se_mean, float(df_mean), level)
        result[approach] = {
            "overall": {
                "mean": overall[0],
                "interval": list(overall[1:]),
                "standard_error": se_mean,
            },
            "per_budget": {
                c["budget"]: {"mean": c["mean"], "interval": c["interval"]} for c in group
            },
        }
    return result


def _terms(table: pd.DataFrame) -> str:
    """Right-hand side of value ~ budget × approach, dropping factors with one level."""
    factors = [f"C({c})" for c in ("budget", "approach") if table[c].nunique() > 1]
    return " * ".join(factors) if factors else "1"


def _fixed_effects(table: pd.DataFrame) -> tuple[dict[str, Any], np.ndarray]:
    """OLS of value ~ C(budget) * C(approach) with its type-II ANOVA table; and its residuals."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    formula = f"value ~ {_terms(table)}"
    fit = smf.ols(formula, table).fit()
    report: dict[str, Any] = {
        "formula": formula,
        "n": int(fit.nobs),
        "r_squared": float(fit.rsquared),
        "residual_df": float(fit.df_resid),
        "residual_std": math.sqrt(fit.scale) if fit.df_resid > 0 else None,
        "anova": None,
    }
    if fit.df_resid > 0 and formula != "value ~ 1":
        with np.errstate(all="ignore"):
            table_ii = sm.stats.anova_lm(fit, typ=2)
        report["anova"] = {
            term: {
                "df": row["df"],
                "sum_sq": row["sum_sq"],
                "F": row.get("F"),
                "p": row.get("PR(>F)"),
            }
            for term, row in table_ii.iterrows()
        }
    return report, np.asarray(fit.resid)


def _mixed_model(table: pd.DataFrame, level: float) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """MixedLM (REML) on the cells with both components identifiable: fixed budget × approach,
    one random intercept per draw of a cell, pooled data and training variances; beside it the
    pooled nested ANOVA (equal to REML for balanced data with a positive estimate)."""
    if table.empty:
        note = "no cell of a stochastic approach with several draws and seeds per draw"
        return {"fitted": False, "note": note}, {}
    table = table.assign(
        draw_unit=table["approach"]
        + "|"
        + table["budget"].map(un.budget_label)
        + "|"
        + table["data_draw"]
    )
    formula = f"value ~ {_terms(table)}"
    parts = []
    for _, rows in table.groupby(["approach", "budget"]):
        anova = un.nested_anova(rows["value"].to_numpy(float), rows["data_draw"].to_numpy())
        counts = rows.groupby("data_draw").size().to_numpy(float)
        parts.append(
            (
                anova.ms_between * anova.df_between,
                anova.df_between,
                anova.ms_within * anova.df_within,
                anova.df_within,
                counts,
            )
        )
    pooled = un.pooled_anova(parts)
    (data_low, data_high), training_interval = pooled.intervals(level)
    report: dict[str, Any] = {
        "fitted": False,
        "formula": formula,
        "groups": "approach × budget × data_draw",
        "method": "REML",
        "approaches": sorted(table["approach"].unique()),
        "budgets": [un.budget_label(b) for b in sorted(table["budget"].unique())],
        "n": int(len(table)),
        "n_groups": int(table["draw_unit"].nunique()),
        "anova_estimate": {
            "data_variance": pooled.data_variance,
            "data_variance_interval": [data_low, data_high],
            "training_variance": pooled.training_variance,
            "training_variance_interval": list(training_interval),
            "n0": pooled.n0,
            "df_between": pooled.df_between,
            "df_within": pooled.df_within,
        },
    }
    fit = un.reml_fit(formula, table, "draw_unit")
    if fit is None:
        report["note"] = "MixedLM could not be fitted"
        return report, {}
    data_variance = float(np.asarray(fit.cov_re)[0, 0])
    effects = np.array([float(np.asarray(v)[0]) for v in fit.random_effects.values()])
    bounds = fit.conf_int(alpha=1 - level)
    report.update(
        fitted=True,
        converged=bool(fit.converged),
        data_variance=data_variance,
        training_variance=float(fit.scale),
        fixed_effects={
            name: {"estimate": float(value), "interval": [float(v) for v in bounds.loc[name]]}
            for name, value in fit.fe_params.items()
        },
    )
    residuals = {
        "training residuals (MixedLM)": np.asarray(fit.resid),
        "draw effects (MixedLM BLUP)": effects if data_variance > 0 else np.zeros(0),
    }
    return report, residuals


def _misranking(
    cells: list[dict], run_variances: Mapping[tuple[str, str], list[float]], n_sim: int, seed: int
) -> list[dict[str, Any]]:
    """Per budget and pair of approaches: P(one run of each is ordered against the fitted
    means), each run simulated as the sum of independent normal components (REML data and
    training variances; the data part absent where draws are one training set)."""
    by_budget: dict[str, list[dict]] = {}
    for cell in cells:
        by_budget.setdefault(cell["budget"], []).append(cell)
    result = []
    for budget, group in by_budget.items():
        for a, b in itertools.combinations(sorted(group, key=lambda c: c["approach"]), 2):
            probability = un.simulated_misranking(
                a["mean"] - b["mean"],
                run_variances[a["approach"], budget],
                run_variances[b["approach"], budget],
                n_sim=n_sim,
                seed=seed,
            )
            result.append(
                {
                    "budget": budget,
                    "approach_a": a["approach"],
                    "approach_b": b["approach"],
                    "mean_a": a["mean"],
                    "mean_b": b["mean"],
                    "probability": probability,
                }
            )
    return result


def compare_metric(
    runs: pd.DataFrame,
    *,
    identical: Mapping[float, str],
    level: float = 0.95,
    seed: int = 0,
    n_sim: int = 100_000,
    what: str = "runs table",
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The report section of one metric's runs, and the residuals for its QQ plot."""
    deterministic = un.deterministic_approaches(runs)
    runs = runs.sort_values(["approach", "budget", "data_draw", "training_seed"], kind="stable")
    cells: list[dict[str, Any]] = []
    run_variances: dict[tuple[str, str], list[float]] = {}
    mixed_rows: list[pd.DataFrame] = []
    for key, rows in runs.groupby(["approach", "budget"], sort=True):
        approach, budget = cast("tuple[str, float]", key)  # the two columns grouped by
        label = f"{what}: metric {rows['metric'].iat[0]}, approach {approach}, budget " + (
            un.budget_label(budget)
        )
        if budget not in identical and rows["data_draw"].nunique() < 2:
            raise InvalidInput(
                label,
                "one data draw: the data-sampling variance needs at least 2 (or mark the budget's "
                "draws as one training set: {n_clusters}, {audit} or column n_clusters_total)",
                parameters=("n_clusters", "audit"),
            )
        entry, variances = _cell(
            rows,
            deterministic=approach in deterministic,
            identical=identical.get(budget),
            level=level,
        )
        cells.append(entry)
        run_variances[approach, entry["budget"]] = variances
        if entry["mom"] is not None:
            mixed_rows.append(rows)
    estimable = [c for c in cells if c["mom"] is not None]
    negative = sum(c["mom"]["negative_data_variance"] for c in estimable)
    fixed, ols_residuals = _fixed_effects(runs)
    mixed, residuals = _mixed_model(pd.concat(mixed_rows) if mixed_rows else runs.iloc[:0], level)
    section = {
        "n_runs": int(len(runs)),
        "approaches": sorted(runs["approach"].unique()),
        "budgets": [un.budget_label(b) for b in sorted(runs["budget"].unique())],
        "deterministic_approaches": sorted(deterministic),
        "identical_draw_budgets": {
            un.budget_label(b): r for b, r in sorted(identical.items()) if b in set(runs["budget"])
        },
        "cells": cells,
        "negative_mom_data_variance": {
            "count": int(negative),
            "of": len(estimable),
            "fraction": negative / len(estimable) if estimable else None,
        },
        "approach_means": _approach_means(cells, level),
        "fixed_effects": fixed,
        "mixed_model": mixed,
        "misranking": _misranking(cells, run_variances, n_sim, seed),
    }
    return section, {
        "OLS residuals (fixed effects)": ols_residuals,
        **residuals,
    }


def _jsonable(value: Any) -> Any:
    """JSON-safe copy: nan and inf become null, numpy scalars Python numbers."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def slug(name: str) -> str:
    """A metric name as part of a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "metric"


def compare_runs(
    runs: pd.DataFrame,
    *,
    out: str | Path | None = None,
    metric: str | None = None,
    level: float = 0.95,
    seed: int = 0,
    n_sim: int = 100_000,
    identical: Mapping[float, str] | None = None,
    source: str = "runs table",
) -> dict[str, Any]:
    """The whole report (one section per metric); with `out`, also `out/report.json`, a QQ plot
    and learning-efficiency curves per metric (PNG)."""
    if not 0 < level < 1:
        raise InvalidInput("level", f"expected a level in (0, 1), got {level}")
    metrics = sorted(runs["metric"].unique())
    if metric is not None:
        if metric not in metrics:
            raise InvalidInput("metric", f"{metric!r} is not in {source} ({', '.join(metrics)})")
        metrics = [metric]
    report: dict[str, Any] = {
        "runs": source,
        "level": level,
        "seed": seed,
        "n_sim": n_sim,
        "model": "y = γ + μ_budget + α_approach + θ_interaction + ε_data + ε_train",
        "metrics": {},
    }
    for name in metrics:
        section, residuals = compare_metric(
            runs[runs["metric"] == name],
            identical=identical or {},
            level=level,
            seed=seed,
            n_sim=n_sim,
            what=source,
        )
        if out is not None:
            directory = Path(out)
            directory.mkdir(parents=True, exist_ok=True)
            section["figures"] = {
                "learning_curves": learning_curves(
                    section, name, directory / f"learning_curves_{slug(name)}.png"
                ).name,
                "qq": qq_plots(residuals, name, directory / f"qq_{slug(name)}.png").name,
            }
        report["metrics"][name] = section
    report = _jsonable(report)
    if out is not None:
        path = Path(out) / "report.json"
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(report, indent=2, ensure_ascii=False))
        partial.replace(path)
    return report


def _number(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """A short human summary of a report."""
    lines = []
    for name, section in report["metrics"].items():
        runs = counted(section["n_runs"], "run")
        lines.append(f"metric {name}: {runs}, level {report['level']}")
        for cell in section["cells"]:
            low, high = cell["interval"]
            data = cell["data_variance"] or {}
            training = cell["training_variance"] or {}
            reml = cell["reml"] or {}
            lines.append(
                f"  {cell['approach']:>16} budget {cell['budget']:>4}: "
                f"mean {_number(cell['mean'])} [{_number(low)}, {_number(high)}]  "
                f"σ²_data {_number(data.get('estimate'))} "
                f"(REML {_number(reml.get('data_variance'))})  "
                f"σ²_train {_number(training.get('estimate'))}"
                + "".join(f"  ({note})" for note in cell["notes"])
            )
        negative = section["negative_mom_data_variance"]
        lines.append(
            f"  negative MoM data variances: {negative['count']} of {negative['of']} cells"
        )
        for pair in section["misranking"]:
            lines.append(
                f"  budget {pair['budget']}: P(single runs rank {pair['approach_a']} vs "
                f"{pair['approach_b']} wrongly) = {_number(pair['probability'], 3)}"
            )
    return lines
