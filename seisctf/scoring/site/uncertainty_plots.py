"""Figures of `seisctf compare`: learning-efficiency curves with intervals and QQ plots."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from seisctf.scoring.site.plots import pyplot, save


def learning_curves(
    section: Mapping[str, Any], metric: str, path: str | Path, level: float = 0.95
) -> Path:
    """Metric against budget per approach: cell means with their intervals (band and bars) and
    each draw's mean as a faint dot; budgets whose draws are one training set are marked."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.5))
    by_approach: dict[str, list[Mapping[str, Any]]] = {}
    for cell in section["cells"]:
        by_approach.setdefault(cell["approach"], []).append(cell)
    deterministic = set(section["deterministic_approaches"])
    for index, (approach, cells) in enumerate(sorted(by_approach.items())):
        colour = f"C{index % 10}"
        budgets = np.array([float(c["budget"]) for c in cells])
        order = np.argsort(budgets)
        means = np.array([c["mean"] for c in cells])[order]
        intervals = np.array(
            [[np.nan if v is None else v for v in c["interval"]] for c in cells], dtype=float
        )[order]
        label = approach.replace("$", r"\$") + (
            " (deterministic)" if approach in deterministic else ""
        )
        axes.plot(budgets[order], means, "o-", color=colour, label=label)
        axes.fill_between(
            budgets[order], intervals[:, 0], intervals[:, 1], color=colour, alpha=0.15
        )
        axes.errorbar(
            budgets[order],
            means,
            yerr=np.abs(intervals.T - means),
            fmt="none",
            ecolor=colour,
            capsize=3,
        )
        for cell in cells:
            draws = list(cell["draw_means"].values())
            axes.plot([float(cell["budget"])] * len(draws), draws, ".", color=colour, alpha=0.3)
    for budget in section["identical_draw_budgets"]:
        axes.axvline(float(budget), color="grey", linestyle=":", linewidth=1)
        axes.annotate(
            "draws identical",
            (float(budget), 1.0),
            xycoords=("data", "axes fraction"),
            fontsize="small",
            color="grey",
            ha="right",
            va="top",
            rotation=90,
        )
    axes.set_xlabel("training budget (clusters)")
    axes.set_ylabel(metric)
    axes.set_title(f"Learning efficiency: {metric} (means, {level:.0%} t intervals)")
    axes.legend(fontsize="small")
    return save(figure, Path(path))


def qq_plots(residuals: Mapping[str, np.ndarray], metric: str, path: str | Path) -> Path:
    """Normal QQ plots (statsmodels) of residuals, each kind standardised by its own mean and
    standard deviation, one panel per kind."""
    from statsmodels.graphics.gofplots import qqplot

    plt = pyplot()
    kinds = [(name, np.asarray(v, float)) for name, v in residuals.items() if np.size(v) > 1]
    figure, axes = plt.subplots(
        1, max(len(kinds), 1), figsize=(4 * max(len(kinds), 1), 4), squeeze=False
    )
    for ax, (name, values) in zip(axes[0], kinds, strict=False):
        spread = values.std() or 1.0
        qqplot((values - values.mean()) / spread, line="45", ax=ax, markersize=3)
        ax.set_title(name, fontsize="small")
    if not kinds:
        axes[0][0].text(0.5, 0.5, "no residuals", ha="center")
    figure.suptitle(f"QQ plots of standardised residuals: {metric}")
    return save(figure, Path(path))
