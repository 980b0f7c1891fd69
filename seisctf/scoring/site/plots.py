"""Figures people would rather look at than read: radar profiles of the twelve CTF scores
(`score ctf --plot`), histograms of pick residuals (`score picks --histogram`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.scoring.pick_metrics import PHASES
from seisctf.wording import counted


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display); imported on first use,
    since most commands draw nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(figure, path: Path) -> Path:
    """Write `figure` as a PNG to `path` (its folder made), close it; returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    pyplot().close(figure)
    return path


def radar_profile(
    profiles: Mapping[str, Mapping[str, float | None]],
    out: str | Path,
    title: str = "CTF score profile",
) -> Path:
    """One polygon per model over E1..E12 on a [-100, 100] radial axis; the 0 ring is the
    all-zero baseline. Unscorable tasks are drawn at 0 and marked in the legend."""
    plt = pyplot()
    angles = np.linspace(0, 2 * np.pi, len(cv.SCORE_NAMES), endpoint=False)
    closed = np.append(angles, angles[0])
    figure, axes = plt.subplots(figsize=(6, 6), subplot_kw={"projection": "polar"})
    for model, scores in profiles.items():
        values = [scores.get(name) for name in cv.SCORE_NAMES]
        # Escape "$" so a participant's model name is never parsed as mathtext.
        label = model.replace("$", r"\$") + (" (unscorable tasks at 0)" if None in values else "")
        radii = np.array([0.0 if v is None else float(v) for v in values])
        axes.plot(closed, np.append(radii, radii[0]), linewidth=1.5, label=label)
        axes.fill(closed, np.append(radii, radii[0]), alpha=0.1)
    axes.plot(closed, np.zeros_like(closed), color="black", linewidth=0.8, linestyle="--")
    axes.set_xticks(angles, cv.SCORE_NAMES)
    axes.set_ylim(-100, 100)
    axes.set_title(title)
    axes.legend(loc="upper right", bbox_to_anchor=(1.35, 1.1), fontsize="small")
    return save(figure, Path(out))


def plot_residual_histogram(result: Mapping[str, Any], out: str | Path) -> Path:
    """P and S residual histograms (PNG) from a result's `residual_histogram`."""
    plt = pyplot()
    histogram = result["residual_histogram"]
    edges = np.asarray(histogram["edges_s"])
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for axis, phase in zip(axes, PHASES, strict=True):
        stats = result[phase]
        axis.stairs(histogram[phase], edges, fill=True, alpha=0.7)
        mean, std = stats["residual_mean_s"], stats["residual_std_s"]
        summary = "no hits" if mean is None else f"mean {mean:+.3f} s, std {std:.3f} s"
        title = f"{phase.upper()}: {counted(stats['tp'], 'hit')}; {summary}"
        axis.set_title(title, fontsize="small")
        axis.set_xlabel("pick − arrival (s)")
    axes[0].set_ylabel("picks")
    name = str(result["name"]).replace("$", r"\$")
    figure.suptitle(
        f"{name} on {result['dataset']} ({result['split']}), ±{result['tolerance_s']} s"
    )
    return save(figure, Path(out))
