"""What the static leaderboard's pages say: the index, and per dataset its CTF rankings, score
profiles, pick F1 tables and the uncertainty of repeated runs.

Each function returns escaped HTML for `seisctf.scoring.site.pages`, built with
`seisctf.scoring.site.markup`. Entries are the public view of
`leaderboard.entries` rows (`release.public_entry`: during the season a CTF entry's
public-part AvgScore to the Ladder's step alone; at the close, `final`, its private part's
scores clipped and rounded to 0.01; no raw values, counts or residuals), so every number on a
page is a rounded score or rate or a statistic of them (a radar of means, intervals over
runs). Entries are compared only with entries scored under the same convention against the same
truth commitment (a CTF group) or the same truth commitment, tolerance and threshold (a picks
group); each group's section states them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from seisctf import conventions as cv
from seisctf.scoring.ladder import STEP
from seisctf.scoring.release import METADATA_KEYS, shown_score
from seisctf.scoring.site import svg
from seisctf.scoring.site.markup import (
    MISSING,
    Cell,
    Column,
    group_by,
    link,
    number_cell,
    score_cell,
    table,
    text_cell,
)
from seisctf.scoring.uncertainty import mean_interval, misranking_probability
from seisctf.wording import counted

Entry = Mapping[str, Any]
TOP_MODELS = 5
MAX_MATRIX_MODELS = 10
PICK_PARTS = (("detection", "Detection"), ("p", "P pick"), ("s", "S pick"))


# --- shared pieces -------------------------------------------------------------------------


def run_label(entry: Entry) -> str:
    """How one submission of a model is told from its other runs: metadata run or seed, else
    the row id."""
    metadata = entry.get("metadata") or {}
    for key in ("run", "seed"):
        if metadata.get(key) not in (None, ""):
            return f"{key} {metadata[key]}"
    return f"#{entry['id']}"


def _model_column() -> Column:
    return Column("Model", lambda e: text_cell(e["model"]), numeric=False)


def _run_column() -> Column:
    """The run label, sorted as text with its numbers in numeric order (seed 2 < seed 10)."""

    def cell(entry: Entry) -> Cell:
        label = run_label(entry)
        key = re.sub(r"\d+", lambda m: m.group().zfill(12), label.casefold())
        return Cell(escape(label), key, "text nowrap")

    return Column("Run", cell, numeric=False)


def _provenance(items: Sequence[tuple[str, str]]) -> str:
    """The `<p>` stating where a section's numbers come from; values are escaped HTML."""
    said = " · ".join(f"{label} {value}" for label, value in items)
    return f'<p class="provenance">{said}</p>'


def _commitment(value: object) -> str:
    if not value:
        return "<em>none recorded</em>"
    return f"<code>{escape(str(value))}</code>"


def _details_table(ident: str, entries: Sequence[Entry]) -> str:
    """Every submission of a section with its submitter metadata."""

    def others(entry: Entry) -> Cell:
        extra = {k: v for k, v in (entry.get("metadata") or {}).items() if k not in METADATA_KEYS}
        text = "; ".join(f"{k}={v}" for k, v in sorted(extra.items()))
        return text_cell(text)

    def code(entry: Entry) -> Cell:
        url = (entry.get("metadata") or {}).get("code_url")
        return Cell(link(url), url.casefold() if isinstance(url, str) and url else None, "text")

    def verified(entry: Entry) -> Cell:
        flag = (entry.get("result") or {}).get("truth_sha256_verified")
        return text_cell(None if flag is None else ("yes" if flag else "no"))

    columns = [
        Column("Entry", lambda e: number_cell(int(e["id"]))),
        _model_column(),
        _run_column(),
        Column("Submitted (UTC)", lambda e: text_cell(e["timestamp"]), numeric=False),
        Column("Code", code, numeric=False),
        Column(
            "Description",
            lambda e: text_cell((e.get("metadata") or {}).get("description")),
            numeric=False,
        ),
        Column("Truth hashes verified", verified, numeric=False),
        Column("Other metadata", others, numeric=False),
    ]
    return "<h3>Submissions</h3>" + table(
        ident,
        "Every submission in this section, with what its submitter said about it",
        columns,
        sorted(entries, key=lambda e: int(e["id"])),
        sorted_by=(0, "ascending"),
    )


def _finite(value: object) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _descending(value: object) -> float:
    """Sort key putting the largest value first and missing values last."""
    finite = _finite(value)
    return math.inf if finite is None else -finite


# --- uncertainty ---------------------------------------------------------------------------


def uncertainty_section(
    ident: str, metric: str, runs: Mapping[str, Sequence[float]], digits: int = 2
) -> str:
    """Mean and 95 % interval of `metric` per model, and the probability that one run of each
    of two models ranks them opposite to their means; empty when no model has repeated runs."""
    runs = {model: list(values) for model, values in runs.items() if values}
    if not any(len(values) > 1 for values in runs.values()):
        return ""
    rows = sorted(
        ((model, len(values), *mean_interval(values)) for model, values in runs.items()),
        key=lambda row: (-row[2], row[0]),
    )
    columns = [
        Column("Model", lambda r: text_cell(r[0]), numeric=False),
        Column("Runs", lambda r: number_cell(r[1])),
        Column(f"Mean {metric}", lambda r: number_cell(r[2], digits)),
        Column("95 % interval low", lambda r: number_cell(r[3], digits)),
        Column("95 % interval high", lambda r: number_cell(r[4], digits)),
    ]
    caption = (
        f"Mean {escape(metric)} over repeated runs with its 95 % Student-t interval "
        "(a model with one run has no interval)"
    )
    chart = svg.intervals(
        [(model, mean, low, high) for model, _, mean, low, high in rows],
        ident=f"{ident}-chart",
        title=f"Mean {metric} and 95 % intervals",
        x_label=metric,
    )
    top = [row[0] for row in rows[:MAX_MATRIX_MODELS]]
    heads = "".join(f'<th scope="col">{escape(model)}</th>' for model in top)
    body = []
    for model_a in top:
        cells = []
        for model_b in top:
            p = (
                math.nan
                if model_a == model_b
                else misranking_probability(runs[model_a], runs[model_b])
            )
            cells.append(f"<td>{MISSING if math.isnan(p) else f'{p:.3f}'}</td>")
        body.append(f'<tr><th scope="row">{escape(model_a)}</th>{"".join(cells)}</tr>')
    matrix = (
        '<p class="note">Mis-ranking probability: the chance that one run of the row\'s model '
        "and one run of the column's model come out in the order opposite to their means "
        f"{escape(metric)}, simulated from the spread of their runs (0.5 is a coin toss; a dash: "
        "neither model has repeated runs).</p>"
        f'<div class="scroll"><table id="{escape(ident)}-misranking"><caption>Mis-ranking '
        f"probability, {escape(metric)}</caption>"
        f"<thead><tr><td></td>{heads}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )
    return (
        f"<h3>Uncertainty of {escape(metric)} over repeated runs</h3>"
        + table(ident, caption, columns, rows, row_header=0, sorted_by=(2, "descending"))
        + f"<figure>{chart}</figure>"
        + matrix
    )


# --- CTF -----------------------------------------------------------------------------------


def _score_names(entries: Sequence[Entry]) -> tuple[str, ...]:
    """E1..E12, then any extended scores (E13+, crustal bundles) the entries hold, in order."""
    extended = {name for e in entries for name in e["scores"] if name not in cv.SCORE_NAMES}
    return cv.SCORE_NAMES + tuple(
        sorted(extended, key=lambda name: (int(name[1:]) if name[1:].isdigit() else 0, name))
    )


def _mean_profile(
    entries: Sequence[Entry], names: Sequence[str] = cv.SCORE_NAMES
) -> dict[str, float | None]:
    profile = {}
    for name in names:
        values = [v for e in entries if (v := _finite(e["scores"].get(name))) is not None]
        profile[name] = sum(values) / len(values) if values else None
    return profile


def _mean_shown(entries: Sequence[Entry]) -> float:
    values = [v for e in entries if (v := _finite(shown_score(e))) is not None]
    return sum(values) / len(values) if values else -math.inf


SEASON_NOTE = (
    '<p class="note">Season view: each entry\'s public score, the mean of its short-time and '
    "reconstruction scores on the truth's <strong>public part</strong> (half of its sensors, "
    "drawn from the commitment salt that is revealed at the close), rounded to {step:g}; "
    "long-time scores are not in it. A participant's entry shows their best through the "
    "Ladder: a release reports a new value only when it beats their previous best by at least "
    "{step:g} point, else the old best, and only the entry that set it is listed. E1..E12, "
    "AvgScore and the final ranking, on the <strong>private part</strong> (the other half), "
    "are published when the challenge closes.</p>"
)
FINAL_NOTE = (
    '<p class="note">Final view: scores on the truth\'s <strong>private part</strong> (half of '
    "its sensors, never released during the season; anyone can recompute the split from the "
    "revealed commitment salt). Each score Ei = 100·(1 − error), clipped to [−100, 100] and "
    "shown rounded to 0.01; 0 is the all-zero prediction (cells above it blue, below it red, "
    "darker farther from 0), 100 a perfect prediction. AvgScore is the mean of E1..E12 (rounded "
    "after averaging); a dash is a task that could not be scored. A participant is ranked by the "
    "entry that set their best public score.</p>"
)


def ctf_section(
    ident: str,
    convention: str | None,
    commitment: str | None,
    entries: Sequence[Entry],
    final: bool = False,
) -> str:
    """Ranking by AvgScore, uncertainty and submissions of one CTF group; with `final` (the
    close's view) also E1..E12 and radar profiles."""
    ranked = sorted(entries, key=lambda e: (_descending(shown_score(e)), e["id"]))
    rank = {id(entry): index for index, entry in enumerate(ranked, start=1)}
    names = _score_names(ranked) if final else ()
    average = "AvgScore" if final else "Public score"
    columns = [
        Column("Rank", lambda e: number_cell(rank[id(e)])),
        _model_column(),
        _run_column(),
        Column(average, lambda e: score_cell(_finite(shown_score(e)))),
        *(_score_column(name) for name in names),
    ]
    by_model = group_by(ranked, lambda e: e["model"])
    models = sorted(by_model, key=lambda m: (-_mean_shown(by_model[m]), m))
    caption = (
        f"Ranking by {average}: {counted(len(ranked), 'submission')} of "
        f"{counted(len(models), 'model')} "
        f"(convention {escape(str(convention))})"
    )
    runs = {
        m: [v for e in by_model[m] if (v := _finite(shown_score(e))) is not None] for m in models
    }
    head = _provenance(
        [
            ("Convention", f"<strong>{escape(str(convention))}</strong>"),
            ("truth commitment", _commitment(commitment)),
        ]
    )
    ranking = table(f"{ident}-ranking", caption, columns, ranked, sorted_by=(3, "descending"))
    tail = uncertainty_section(f"{ident}-uncertainty", average, runs) + _details_table(
        f"{ident}-submissions", ranked
    )
    if not final:
        return head + SEASON_NOTE.format(step=STEP) + ranking + tail
    overlay = svg.radar(
        [(model, _mean_profile(by_model[model], names)) for model in models[:TOP_MODELS]],
        names,
        ident=f"{ident}-overlay",
        title=f"Score profiles of the top {counted(min(TOP_MODELS, len(models)), 'model')}",
        size=420,
    )
    figures = [f"<figure>{overlay}<figcaption>Top models by mean AvgScore.</figcaption></figure>"]
    for index, model in enumerate(models):
        model_runs = by_model[model]
        title = f"{model}: score profile" + (
            f" (mean of {len(model_runs)} runs)" if len(model_runs) > 1 else ""
        )
        chart = svg.radar(
            [(model, _mean_profile(model_runs, names))],
            names,
            ident=f"{ident}-radar-{index}",
            title=title,
            size=260,
        )
        figures.append(f"<figure>{chart}<figcaption>{escape(title)}</figcaption></figure>")
    profiles = '<h3>Score profiles</h3><div class="figures">' + "".join(figures) + "</div>"
    return head + FINAL_NOTE + ranking + profiles + tail


# --- picks ---------------------------------------------------------------------------------


def _score_column(name: str) -> Column:
    """The score `name` (E1..E12) of each entry."""
    return Column(name, lambda e: score_cell(_finite(e["scores"].get(name))))


def _part(entry: Entry, part: str) -> Mapping[str, Any]:
    return (entry.get("result") or {}).get(part) or {}


def _rate_columns(parts: Sequence[tuple[str, str]]) -> list[Column]:
    """Precision, recall and F1 per part (e.g. "P pick F1" from ("p", "P pick")), to 0.01."""
    rates = (("precision", "precision"), ("recall", "recall"), ("f1", "F1"))
    return [
        _rate_column(f"{label} {metric_label}", part, key)
        for part, label in parts
        for key, metric_label in rates
    ]


def _rate_column(title: str, part: str, key: str) -> Column:
    """The rate `key` of part `part` of each entry, to 0.01."""
    return Column(title, lambda e: number_cell(_finite(_part(e, part).get(key))))


def picks_section(ident: str, key: tuple, entries: Sequence[Entry]) -> str:
    """F1 ranking, uncertainty and submissions of one picks group; ranked by the entries'
    `shown_score` (the season's public score, or at the close the private half's mean F1 in
    percent; entries scored before traces were split have none), then P-pick F1, then S-pick
    F1. Counts, residual statistics, breakdowns and histograms are computed against the truth
    and stay with the organisers (docs/release.md)."""
    commitment, tolerance_s, threshold = key

    def order(entry: Entry) -> tuple:
        rates = tuple(_descending(_part(entry, part).get("f1")) for part in ("p", "s"))
        return (_descending(shown_score(entry)), *rates)

    ranked = sorted(entries, key=lambda e: (*order(e), e["id"]))
    rank = {id(entry): index for index, entry in enumerate(ranked, start=1)}
    head = [Column("Rank", lambda e: number_cell(rank[id(e)])), _model_column(), _run_column()]
    season = any("public_score" in entry for entry in entries)
    scored = any(_finite(shown_score(entry)) is not None for entry in entries)
    by = "public score" if season else ("mean F1 (%)" if scored else "P-pick F1")
    columns = [Column(by[0].upper() + by[1:], lambda e: score_cell(_finite(shown_score(e))))]
    f1_table = table(
        f"{ident}-f1",
        f"Detection and picking: {counted(len(ranked), 'submission')}, ranked by {by}",
        head + (columns if season else (columns if scored else []) + _rate_columns(PICK_PARTS)),
        ranked,
        sorted_by=(0, "ascending"),
    )
    by_model = group_by(ranked, lambda e: e["model"])
    uncertainty = "".join(
        uncertainty_section(
            f"{ident}-uncertainty-{part}",
            f"{label} F1",
            {
                m: [v for e in runs if (v := _finite(_part(e, part).get("f1"))) is not None]
                for m, runs in by_model.items()
            },
            digits=3,
        )
        for part, label in PICK_PARTS
    )
    return (
        _provenance(
            [
                ("Truth commitment", _commitment(commitment)),
                ("tolerance", f"±{escape(_plain(tolerance_s))} s"),
                ("detection threshold", escape(_plain(threshold))),
            ]
        )
        + '<p class="note">A P or S pick is a true positive only within the tolerance of the '
        "catalogue arrival; an imprecise pick is both a false positive and a false negative. "
        "Precision, recall and F1 are shown rounded to 0.01; pick counts, residuals and "
        "per-split or per-group values are not published.</p>"
        + f1_table
        + uncertainty
        + _details_table(f"{ident}-submissions", ranked)
    )


def _plain(value: object) -> str:
    return MISSING if value is None else f"{value:g}" if isinstance(value, float) else str(value)


# --- pages ---------------------------------------------------------------------------------


def _ctf_key(entry: Entry) -> tuple:
    return entry["convention"], entry["truth_commitment"]


def _picks_key(entry: Entry) -> tuple:
    result = entry.get("result") or {}
    return entry["truth_commitment"], result.get("tolerance_s"), result.get("threshold")


def truth_notes(entries: Iterable[Entry]) -> set[str]:
    """The notes of entries scored against a truth anyone can regenerate (the manifest's stamp,
    `cv.PUBLIC_TRUTH_NOTE`): empty for hidden truths."""
    return {
        str(e["result"]["truth_note"]) for e in entries if (e.get("result") or {}).get("truth_note")
    }


def _truth_banner(entries: Iterable[Entry], where: str) -> str:
    """A note at the top of a page whose scores come from a regenerable truth ("" otherwise)."""
    notes = truth_notes(entries)
    if not notes:
        return ""
    return (
        f'<p class="truth-note" role="note"><strong>{escape("; ".join(sorted(notes)))}</strong>: '
        f"{escape(where)} scored against a truth anyone can regenerate from public commands (an "
        "explicit seed or the published demo secret), so they rank nothing.</p>"
    )


def dataset_page(dataset: str, entries: Sequence[Entry], final: bool = False) -> tuple[str, str]:
    """(title, body) of a dataset's page (the season's view, or with `final` the close's)."""
    parts = [_truth_banner(entries, "these submissions were")]
    for family, heading, key, section, label in (
        (
            "ctf",
            "Wavefield CTF scores" + (" (final)" if final else " (season)"),
            _ctf_key,
            lambda i, k, g: ctf_section(i, k[0], k[1], g, final),
            lambda k: f"convention {k[0]}",
        ),
        ("picks", "Phase picking", _picks_key, picks_section, lambda k: f"±{_plain(k[1])} s"),
    ):
        groups = group_by([e for e in entries if e["family"] == family], key)
        for index, (group, members) in enumerate(groups.items(), start=1):
            ident = f"{family}{index}"
            suffix = (
                f" ({index} of {len(groups)}: {escape(label(group))})" if len(groups) > 1 else ""
            )
            parts.append(
                f'<section aria-labelledby="{ident}-h"><h2 id="{ident}-h">{heading}{suffix}'
                f"</h2>{section(ident, group, members)}</section>"
            )
    return f"seisctf leaderboard: {dataset}", "".join(parts)


def index_page(
    by_dataset: Mapping[str, Sequence[Entry]], names: Mapping[str, str], final: bool = False
) -> tuple[str, str]:
    """(title, body) of the index: one row per dataset, linking its page."""

    def best(entries: Sequence[Entry]) -> Entry | None:
        scored = [
            e for e in entries if e["family"] == "ctf" and _finite(shown_score(e)) is not None
        ]
        return max(scored, key=lambda e: (shown_score(e), -e["id"]), default=None)

    def listing(values: Iterable[object]) -> Cell:
        shown = sorted({str(v) for v in values if v})
        return text_cell(", ".join(shown) or None)

    rows = sorted(by_dataset.items())
    columns = [
        Column(
            "Dataset",
            lambda r: Cell(f'<a href="{escape(names[r[0]])}">{escape(r[0])}</a>', r[0], "text"),
            numeric=False,
        ),
        Column("CTF submissions", lambda r: number_cell(sum(e["family"] == "ctf" for e in r[1]))),
        Column(
            "Pick submissions", lambda r: number_cell(sum(e["family"] == "picks" for e in r[1]))
        ),
        Column("Models", lambda r: number_cell(len({e["model"] for e in r[1]}))),
        Column(
            "Best CTF model", lambda r: text_cell((best(r[1]) or {}).get("model")), numeric=False
        ),
        Column(
            "Best AvgScore" if final else "Best public score",
            lambda r: score_cell(shown_score(top) if (top := best(r[1])) else None),
        ),
        Column("Conventions", lambda r: listing(e["convention"] for e in r[1]), numeric=False),
        Column(
            "Truth commitments",
            lambda r: listing(
                str(e["truth_commitment"])[:16] + "…" for e in r[1] if e["truth_commitment"]
            ),
            numeric=False,
        ),
    ]
    total = sum(len(entries) for entries in by_dataset.values())
    regenerable = [name for name, entries in sorted(by_dataset.items()) if truth_notes(entries)]
    banner = _truth_banner(
        [e for name in regenerable for e in by_dataset[name]],
        f"the submissions on {', '.join(regenerable)} were",
    )
    intro = banner + (
        f"<p>{counted(total, 'scored submission')} on {counted(len(by_dataset), 'dataset')}. "
        "Each dataset's page "
        "ranks its submissions, shows their score profiles and pick metrics, and states the "
        "scoring convention and the truth commitment (SHA-256 over the published truth "
        "hashes) its numbers come from.</p>"
        + (
            "<p>Final view: CTF scores on the private part of each truth.</p>"
            if final
            else "<p>Season view: CTF public scores (short-time and reconstruction scores on the "
            f"public part of each truth; the Ladder's best, to {STEP:g}); every score of the "
            "private part is published at the close.</p>"
        )
    )
    if not rows:
        return "seisctf leaderboard", intro
    return "seisctf leaderboard", intro + table(
        "datasets", "Datasets", columns, rows, row_header=0, sorted_by=(0, "ascending")
    )
