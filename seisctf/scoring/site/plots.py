"""Figures people would rather look at than read: radar profiles of the twelve CTF scores."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from seisctf import conventions as cv


def radar_profile(
    profiles: Mapping[str, Mapping[str, float | None]],
    out: str | Path,
    title: str = "CTF score profile",
) -> Path:
    """One polygon per model over E1..E12 on a [-100, 100] radial axis; the 0 ring is the
    all-zero baseline. Unscorable tasks are drawn at 0 and marked in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

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
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path
