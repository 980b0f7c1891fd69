"""Uncertainty of scores from repeated runs (arXiv 2501.14809; `seisctf compare`).

A score y of approach a at data budget b (training clusters), data draw d and training seed s
follows y = γ + μ_b + α_a + θ_ab + ε_data(abd) + ε_train(abds): the draws of a cell (a, b) are
random training sets, the seeds within a draw random initialisations of training (an ensemble per
draw). Fitted three ways: ordinary least squares for the fixed effects (statsmodels, budget ×
approach); a mixed model (statsmodels MixedLM, REML) with one random intercept per draw of a
cell and pooled variances; and per cell a nested random-effects ANOVA whose method-of-moments
(MoM) components can be negative, beside the cell's REML fit, which cannot. The runs table and
the report are described in docs/contract.md ("Uncertainty of repeated runs").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
from scipy import stats

from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.wording import counted

__all__ = [
    "RUN_COLUMNS",
    "NestedAnova",
    "chi2_interval",
    "identical_draw_budgets",
    "mean_interval",
    "misranking_probability",
    "mls_interval",
    "nested_anova",
    "read_runs",
    "simulated_misranking",
    "validate_runs",
]

RUN_COLUMNS = ("approach", "budget", "data_draw", "training_seed", "metric", "value")
CLUSTERS_COLUMN = "n_clusters_total"  # optional: training clusters a budget draws from
CELL_KEYS = ("metric", "approach", "budget")
RUN_KEYS = (*CELL_KEYS, "data_draw", "training_seed")


def _finite_values(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise InvalidInput(what, "no values")
    if not np.all(np.isfinite(array)):
        raise InvalidInput(what, "non-finite values")
    return array


def mean_se_df(values: np.ndarray) -> tuple[float, float, int]:
    """Mean, standard error of the mean and its degrees of freedom (nan, 0 for one value)."""
    if values.size < 2:
        return float(values.mean()), math.nan, 0
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size)), values.size - 1


def t_interval(mean: float, se: float, df: float, level: float) -> tuple[float, float, float]:
    """(mean, low, high) of a Student-t interval; a zero standard error gives zero width."""
    if se == 0.0:
        return mean, mean, mean
    if not (df > 0 and math.isfinite(se)):
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return mean, mean - half, mean + half


def mean_interval(
    values: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided Student-t interval of the mean of independent values.

    One value gives (value, nan, nan): its spread is unknown. Identical values give a
    zero-width interval.
    """
    return t_interval(*mean_se_df(_finite_values(values, "mean_interval")), level)


def misranking_probability(
    runs_a: Sequence[float] | np.ndarray,
    runs_b: Sequence[float] | np.ndarray,
    *,
    n_sim: int = 100_000,
    seed: int = 0,
) -> float:
    """Probability that one single run of a and one of b are ordered opposite to their means.

    Approximation: a single run of each approach is an independent normal draw with the mean and
    sample variance (ddof=1) of the runs given, i.e. the total variance (data sampling plus
    training) of a run trained on a fresh data draw; it is simulated `n_sim` times with a seeded
    generator (deterministic; close to Φ(−|Δ| / √(s²_a + s²_b))). An approach with one run
    has variance 0 (a fixed value); with one run on both sides nothing is known: nan. Equal means:
    0.5 (either order is as likely).
    """
    a = _finite_values(runs_a, "misranking_probability: runs_a")
    b = _finite_values(runs_b, "misranking_probability: runs_b")
    if a.size < 2 and b.size < 2:
        return math.nan
    variance_a = float(a.var(ddof=1)) if a.size > 1 else 0.0
    variance_b = float(b.var(ddof=1)) if b.size > 1 else 0.0
    return simulated_misranking(
        float(a.mean() - b.mean()), [variance_a], [variance_b], n_sim=n_sim, seed=seed
    )


def simulated_misranking(
    difference: float,
    variances_a: Sequence[float],
    variances_b: Sequence[float],
    *,
    n_sim: int = 100_000,
    seed: int = 0,
) -> float:
    """Fraction of `n_sim` simulated single-run pairs ordered against the mean difference Δ.

    A run of a is Δ plus one independent normal term per variance in `variances_a` (e.g. data
    sampling, then training), a run of b the sum of terms of `variances_b`. Δ = 0 gives 0.5; an
    unknown (nan) variance gives nan.
    """
    if not all(math.isfinite(v) for v in (*variances_a, *variances_b)):
        return math.nan
    if difference == 0.0:
        return 0.5
    rng = np.random.default_rng(seed)
    gap = np.full(n_sim, difference)
    for sign, variances in ((1.0, variances_a), (-1.0, variances_b)):
        for variance in variances:
            gap += sign * math.sqrt(max(variance, 0.0)) * rng.standard_normal(n_sim)
    return float(np.mean(np.sign(difference) * gap < 0))


@dataclass(frozen=True)
class NestedAnova:
    """Method-of-moments fit of y = m + ε_data(draw) + ε_train in one approach × budget cell.

    MS_between = Σ n_d (ȳ_d − ȳ)² / (D − 1), MS_within = Σ (y − ȳ_d)² / (N − D) and
    n0 = (N − Σ n_d² / N) / (D − 1) (the seeds per draw when balanced); σ²_train = MS_within,
    σ²_data = (MS_between − MS_within) / n0, which is negative when the draws differ less than
    the seeds within them would make them.
    """

    n_draws: int
    n_runs: int
    n0: float
    ms_between: float
    df_between: int
    ms_within: float
    df_within: int

    @property
    def training_variance(self) -> float:
        return self.ms_within if self.df_within > 0 else math.nan

    @property
    def data_variance(self) -> float:
        if self.df_between < 1 or self.df_within < 1:
            return math.nan
        return (self.ms_between - self.ms_within) / self.n0

    def intervals(self, level: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """(data, training) variance intervals: MLS for the data variance (lower bound clipped
        at 0), the exact χ² interval for the training variance."""
        low, high = mls_interval(
            1 / self.n0,
            self.ms_between,
            self.df_between,
            1 / self.n0,
            self.ms_within,
            self.df_within,
            level,
        )
        return (max(low, 0.0), high), chi2_interval(self.ms_within, self.df_within, level)


def nested_anova(values: np.ndarray, draws: np.ndarray) -> NestedAnova:
    """Mean squares of the runs `values` grouped by `draws` (one label per run)."""
    values = np.asarray(values, dtype=float)
    labels, index = np.unique(np.asarray(draws), return_inverse=True)
    counts = np.bincount(index).astype(float)
    means = np.bincount(index, weights=values) / counts
    n_runs, n_draws = values.size, labels.size
    ss_between = float(np.sum(counts * (means - values.mean()) ** 2))
    ss_within = float(np.sum((values - means[index]) ** 2))
    return pooled_anova([(ss_between, n_draws - 1, ss_within, n_runs - n_draws, counts)])


def pooled_anova(parts: Sequence[tuple[float, int, float, int, np.ndarray]]) -> NestedAnova:
    """The nested ANOVA of several cells with their own means (the mixed model's fixed effects):
    sums of squares and degrees of freedom add, n0 = Σ (N − Σ n_d²/N) / Σ (D − 1)."""
    ss_b = sum(p[0] for p in parts)
    df_b = sum(p[1] for p in parts)
    ss_w = sum(p[2] for p in parts)
    df_w = sum(p[3] for p in parts)
    weight = sum(c.sum() - np.sum(c**2) / c.sum() for *_, c in parts)
    return NestedAnova(
        n_draws=sum(p[1] + 1 for p in parts),
        n_runs=int(sum(p[4].sum() for p in parts)),
        n0=float(weight / df_b) if df_b else math.nan,
        ms_between=ss_b / df_b if df_b else math.nan,
        df_between=df_b,
        ms_within=ss_w / df_w if df_w else math.nan,
        df_within=df_w,
    )


def chi2_interval(mean_square: float, df: int, level: float) -> tuple[float, float]:
    """Exact interval of a variance σ² from a mean square with `df` degrees of freedom."""
    if df < 1 or not math.isfinite(mean_square):
        return math.nan, math.nan
    tail = (1 - level) / 2
    ss = df * mean_square
    return ss / float(stats.chi2.ppf(1 - tail, df)), ss / float(stats.chi2.ppf(tail, df))


def mls_interval(
    c1: float, ms1: float, df1: int, c2: float, ms2: float, df2: int, level: float
) -> tuple[float, float]:
    """Modified large-sample interval of c1·E[MS1] − c2·E[MS2] (Ting, Burdick, Graybill,
    Jeyaratnam and Lu 1990; Burdick and Graybill 1992, §3.2), unclipped."""
    if df1 < 1 or df2 < 1 or not (math.isfinite(ms1) and math.isfinite(ms2)):
        return math.nan, math.nan
    tail = (1 - level) / 2
    g1 = 1 - df1 / stats.chi2.ppf(1 - tail, df1)
    h1 = df1 / stats.chi2.ppf(tail, df1) - 1
    g2 = 1 - df2 / stats.chi2.ppf(1 - tail, df2)
    h2 = df2 / stats.chi2.ppf(tail, df2) - 1
    f_high, f_low = stats.f.ppf(1 - tail, df1, df2), stats.f.ppf(tail, df1, df2)
    g12 = ((f_high - 1) ** 2 - g1**2 * f_high**2 - h2**2) / f_high
    h12 = ((1 - f_low) ** 2 - h1**2 * f_low**2 - g2**2) / f_low
    a, b = c1 * ms1, c2 * ms2
    low = a - b - math.sqrt(max(g1**2 * a**2 + h2**2 * b**2 + g12 * a * b, 0.0))
    high = a - b + math.sqrt(max(h1**2 * a**2 + g2**2 * b**2 + h12 * a * b, 0.0))
    return float(low), float(high)


def reml_fit(formula: str, table: pd.DataFrame, groups: str):
    """statsmodels MixedLM (REML, random intercept per group), or None when it cannot be fitted.

    Powell first: statsmodels' default L-BFGS often stops on a singular matrix when a variance
    sits at the boundary (0); only the variance ratio is optimised (the fixed effects are
    profiled out), so Powell is cheap."""
    import statsmodels.formula.api as smf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = smf.mixedlm(formula, table, groups=table[groups])
            return model.fit(reml=True, method=["powell", "lbfgs"])
        except (np.linalg.LinAlgError, ValueError):
            return None


def _rows(mask: pd.Series | np.ndarray, limit: int = 8) -> str:
    rows = np.flatnonzero(np.asarray(mask)) + 1
    more = f" and {rows.size - limit} more" if rows.size > limit else ""
    return ", ".join(map(str, rows[:limit])) + more


def _text(column: pd.Series) -> pd.Series:
    """Labels as text ('' where missing); whole floats without '.0' (3.0 -> '3')."""

    def one(value) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value).strip()

    return column.map(one).astype(object)


def validate_runs(table: pd.DataFrame, what: str = "runs table") -> pd.DataFrame:
    """The runs table with checked, normalised columns (docs/contract.md); InvalidInput names
    the file, column and data rows (1 = first row after the header) at fault."""
    missing = [c for c in RUN_COLUMNS if c not in table.columns]
    if missing:
        raise InvalidInput(what, f"missing column(s) {', '.join(missing)}; expected {RUN_COLUMNS}")
    if table.empty:
        raise InvalidInput(what, "no runs")
    table = table.reset_index(drop=True)
    runs = pd.DataFrame({c: _text(table[c]) for c in ("approach", "data_draw", "metric")})
    for column in ("approach", "data_draw", "metric"):
        if (runs[column] == "").any():
            rows = _rows(runs[column] == "")
            raise InvalidInput(f"{what}: column {column}", f"empty at data row(s) {rows}")
    runs["training_seed"] = _text(table["training_seed"])
    for column, positive in (("budget", True), ("value", False), (CLUSTERS_COLUMN, True)):
        if column not in table.columns:
            continue
        numbers = pd.to_numeric(table[column], errors="coerce").astype(float)
        bad = ~np.isfinite(numbers) | ((numbers <= 0) if positive else False)
        if column == CLUSTERS_COLUMN:
            bad &= table[column].notna()
        if bad.any():
            expected = "a positive finite number" if positive else "a finite number"
            raise InvalidInput(
                f"{what}: column {column}", f"not {expected} at data row(s) {_rows(bad)}"
            )
        runs[column] = numbers
    duplicated = runs.duplicated(list(RUN_KEYS), keep=False)
    if duplicated.any():
        raise InvalidInput(
            what,
            f"runs repeat (metric, approach, budget, data_draw, training_seed) at data row(s) "
            f"{_rows(duplicated)}",
        )
    seeded = runs.groupby("approach")["training_seed"].agg(lambda s: (s == "").nunique())
    mixed = sorted(str(a) for a, kinds in seeded.items() if kinds > 1)
    if mixed:
        raise InvalidInput(
            f"{what}: column training_seed",
            f"empty for some runs of {', '.join(mixed)} but not all (empty means deterministic)",
        )
    return runs


def read_runs(runs: StoreLocation) -> pd.DataFrame:
    """Read and validate the runs table at `runs`: Parquet (`.parquet`, `.pq`) or CSV."""
    path, options = runs.url, runs.options
    try:
        if path.lower().endswith((".parquet", ".pq")):
            table = pd.read_parquet(path, storage_options=options)
        else:
            table = pd.read_csv(path, storage_options=options, dtype=str, keep_default_na=True)
    except FileNotFoundError:
        raise InvalidInput(path, "file not found") from None
    except Exception as error:  # pandas, pyarrow and fsspec each raise their own kinds
        raise InvalidInput(path, f"not a readable CSV or Parquet table ({error})") from None
    return validate_runs(table, path)


def budget_label(budget: float) -> str:
    """A budget as JSON keys and figures show it: 3.0 -> '3'."""
    return str(int(budget)) if float(budget).is_integer() else repr(float(budget))


def identical_draw_budgets(
    runs: pd.DataFrame,
    *,
    n_clusters: int | None = None,
    audit: Mapping | None = None,
    what: str = "runs table",
) -> dict[float, str]:
    """Budgets whose draws are all the same training set, each with the reason.

    Sources (any that are given): the column `n_clusters_total` (a budget equal to it),
    `n_clusters` (a budget equal to the number of training clusters) and a split audit of
    `seisctf split --audit` (a budget with `distinct_draws` 1).
    """
    flagged: dict[float, str] = {}
    budgets = sorted(runs["budget"].unique())
    if CLUSTERS_COLUMN in runs.columns:
        for key, totals in runs.groupby("budget")[CLUSTERS_COLUMN]:
            budget = cast(float, key)  # the column grouped by
            total = totals.dropna()
            if (total < budget).any():
                raise InvalidInput(
                    f"{what}: column {CLUSTERS_COLUMN}",
                    f"budget {budget_label(budget)} exceeds the clusters it draws from",
                )
            if (total == budget).any():
                flagged[budget] = f"budget = {CLUSTERS_COLUMN} ({budget_label(budget)})"
    if n_clusters is not None:
        for budget in budgets:
            if budget > n_clusters:
                raise InvalidInput(
                    "n_clusters",
                    f"budget {budget_label(budget)} exceeds {counted(n_clusters, 'cluster')}",
                )
            if budget == n_clusters:
                flagged[budget] = f"all {n_clusters} training clusters (--clusters)"
    if audit is not None:
        entries = audit.get("budgets") if isinstance(audit, Mapping) else None
        if not entries:
            raise InvalidInput("audit", "no budgets in the audit (a source-clusters split?)")
        for budget in budgets:
            entry = entries.get(budget_label(budget))
            if not isinstance(entry, Mapping) or "distinct_draws" not in entry:
                raise InvalidInput("audit", f"budget {budget_label(budget)} not in the audit")
            if entry["distinct_draws"] == 1:
                flagged[budget] = "one distinct draw in the split audit"
    return flagged


def deterministic_approaches(runs: pd.DataFrame) -> set[str]:
    """Approaches declared without training randomness: an empty `training_seed` in every run
    (an approach whose seeds happen to agree is not assumed deterministic: its training
    variance is estimated, as 0)."""
    empty = (runs["training_seed"] == "").groupby(runs["approach"]).all()
    return {str(approach) for approach, is_empty in empty.items() if is_empty}
