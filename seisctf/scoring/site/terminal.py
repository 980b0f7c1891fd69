"""The terminal: the leaderboard (`seisctf leaderboard`) as rich tables of the public view, and
the short table of a scoring run's results (`seisctf score … --json FILE`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from seisctf import conventions as cv
from seisctf.scoring.leaderboard import PICK_SCORE_KEYS
from seisctf.scoring.release import public_entries, shown_score
from seisctf.scoring.site.sections import truth_notes

SEASON_TITLE = " (season: public score alone)"
FINAL_TITLE = " (final: private part)"


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _stepped(value: float | None) -> str:
    """A season's AvgScore, a multiple of the Ladder's step: no more digits than it has."""
    return "—" if value is None else f"{value:g}"


def print_table(entries_: list[dict[str, Any]], final: bool = False) -> None:
    """Rich tables per dataset of the public view (`release.public_entries`; the season's, or
    with `final` the close's): CTF entries ranked by their public score (the season) or by
    AvgScore with E1..E12 (the close), pick entries by their public score (the season) or with
    their private half's mean F1 (%) and F1s (the close; entries scored before the halves: their
    F1s)."""
    shown = public_entries(entries_, final)
    console = Console(width=None if Console().is_terminal else 220)
    ctf_scores = cv.SCORE_NAMES if final else ()
    ctf_average = "AvgScore" if final else "Public score"
    views = {"ctf": (ctf_average, ctf_scores), "picks": (None, tuple(PICK_SCORE_KEYS))}
    for dataset in sorted({e["dataset"] for e in shown}):
        for family, (average, score_names) in views.items():
            ranked = [e for e in shown if e["dataset"] == dataset and e["family"] == family]
            if not ranked:
                continue
            if family == "picks":  # entries with halves: the public score, or at the close
                season = any("public_score" in e for e in ranked)  # the private mean F1
                scored = any(shown_score(e) is not None for e in ranked)
                average = "Public score" if season else ("Mean F1 (%)" if scored else None)
                score_names = () if season else tuple(PICK_SCORE_KEYS)
            suffix = (FINAL_TITLE if final else SEASON_TITLE) if family == "ctf" else " — picks"
            notes = truth_notes(ranked)
            table = Table(
                title=f"seisctf leaderboard — {dataset}{suffix}",
                caption="; ".join(sorted(notes)) or None,
            )
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
                    *([(_fmt if final else _stepped)(shown_score(entry))] if average else []),
                    *(_fmt(entry["scores"].get(name)) for name in score_names),
                )
            console.print(table)


def print_results(results: list[dict[str, Any]]) -> None:
    """One row per result (CTF or picks, full or released): its name, `avg_score` when it has
    one, a released CTF result's `public_score` and whether it `improved` the participant's
    best, then its `scores` (to 0.01) in the order of the first result's."""
    names = list(dict.fromkeys(name for r in results for name in r.get("scores", {})))
    average = any("avg_score" in r for r in results)
    ladder = any("public_score" in r for r in results)
    table = Table(title=f"seisctf scores — {results[0].get('dataset', '')}".rstrip(" —"))
    heads = ("model", *(["AvgScore"] if average else []))
    heads += ("Public score", "improved") if ladder else ()
    for column in (*heads, *names):
        table.add_column(column, justify="left" if column == "model" else "right", no_wrap=True)
    for result in results:
        improved = {True: "yes", False: "no"}.get(result.get("improved", "—"), "—")
        table.add_row(
            str(result.get("name", "")),
            *([_fmt(result.get("avg_score"))] if average else []),
            *([_stepped(result.get("public_score")), improved] if ladder else []),
            *(_fmt(result.get("scores", {}).get(name)) for name in names),
        )
    Console(width=None if Console().is_terminal else 220).print(table)
