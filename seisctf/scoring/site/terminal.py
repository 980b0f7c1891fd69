"""The leaderboard in the terminal (`seisctf leaderboard`): rich tables of the public view."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from seisctf import conventions as cv
from seisctf.scoring.leaderboard import PICK_SCORE_KEYS
from seisctf.scoring.release import public_entries


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def print_table(entries_: list[dict[str, Any]]) -> None:
    """Rich tables per dataset of the public view (`release.public_entries`): CTF entries
    ranked by AvgScore, pick entries with their F1s, all to 0.01."""
    shown = public_entries(entries_)
    console = Console(width=None if Console().is_terminal else 220)
    views = {"ctf": ("AvgScore", cv.SCORE_NAMES), "picks": (None, tuple(PICK_SCORE_KEYS))}
    for dataset in sorted({e["dataset"] for e in shown}):
        for family, (average, score_names) in views.items():
            ranked = [e for e in shown if e["dataset"] == dataset and e["family"] == family]
            if not ranked:
                continue
            suffix = "" if family == "ctf" else " — picks"
            table = Table(title=f"seisctf leaderboard — {dataset}{suffix}")
            columns = ("rank", "model", "convention", *([average] if average else []))
            for column in (*columns, *score_names):
                table.add_column(
                    column,
                    justify="left" if column in ("model", "convention") else "right",
                    no_wrap=True,
                )
            for rank, entry in enumerate(ranked, start=1):
                table.add_row(
                    str(rank),
                    entry["model"],
                    str(entry["convention"]),
                    *([_fmt(entry["avg_score"])] if average else []),
                    *(_fmt(entry["scores"].get(name)) for name in score_names),
                )
            console.print(table)
