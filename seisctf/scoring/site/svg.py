"""Inline SVG figures for the static leaderboard: radar profiles and interval charts.

Pure functions returning SVG text, with no dependency beyond the standard library, so a page
embeds its figures and needs neither image files nor a plotting backend. Every figure is an
`<svg role="img">` labelled by its own `<title>` and `<desc>` (screen readers read both); every
text from outside (model names) is XML-escaped here. Series differ by dash pattern as well as
colour (Okabe–Ito palette, safe for the common colour-vision deficiencies).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

# Okabe & Ito (2008) colours, those with enough contrast on white for lines.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4", "4 2 1 2")
FONT = 'font-family="system-ui, sans-serif"'
MAX_LABEL_CHARS = 40


def style_of(index: int) -> tuple[str, str]:
    """(colour, dash pattern) of the series at `index`."""
    return PALETTE[index % len(PALETTE)], DASHES[index % len(DASHES)]


def _label(text: str) -> str:
    """An escaped label, shortened to fit a figure (the full text is in the page's tables)."""
    short = text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"
    return escape(short)


def _number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if math.isfinite(value) else "0"


def _open(ident: str, width: float, height: float, title: str, description: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" id="{escape(ident)}" '
        f'viewBox="0 0 {_number(width)} {_number(height)}" width="{_number(width)}" '
        f'height="{_number(height)}" aria-labelledby="{escape(ident)}-t {escape(ident)}-d">'
        f'<title id="{escape(ident)}-t">{escape(title)}</title>'
        f'<desc id="{escape(ident)}-d">{escape(description)}</desc>'
    )


def _stroke(colour: str, dash: str, width: float = 2.0) -> str:
    dashes = f' stroke-dasharray="{dash}"' if dash else ""
    return f'stroke="{colour}" stroke-width="{width}"{dashes}'


def radar(
    profiles: Sequence[tuple[str, Mapping[str, float | None]]],
    axes: Sequence[str],
    *,
    ident: str,
    title: str,
    lower: float = -100.0,
    upper: float = 100.0,
    size: float = 340.0,
) -> str:
    """Radar chart of one polygon per (label, scores) over `axes` on a [lower, upper] radial
    scale; the dashed ring is 0, the all-zero prediction. A missing score (None) is drawn at 0
    with a hollow marker and said so in the description."""
    radius = size * 0.36
    centre = size / 2
    legend_rows = len(profiles) if len(profiles) > 1 else 0
    height = size + 18 * legend_rows

    def point(axis_index: float, value: float) -> tuple[float, float]:
        angle = 2 * math.pi * axis_index / len(axes) - math.pi / 2
        r = radius * (min(max(value, lower), upper) - lower) / (upper - lower)
        return centre + r * math.cos(angle), centre + r * math.sin(angle)

    parts = [_rings(axes, point, lower, upper, centre)]
    described = []
    for index, (label, scores) in enumerate(profiles):
        colour, dash = style_of(index)
        values = [scores.get(axis) for axis in axes]
        corners = [point(i, 0.0 if v is None else float(v)) for i, v in enumerate(values)]
        path = " ".join(f"{_number(x)},{_number(y)}" for x, y in corners)
        parts.append(
            f'<polygon points="{path}" fill="{colour}" fill-opacity="0.08" '
            f'{_stroke(colour, dash)} stroke-linejoin="round"/>'
        )
        for (x, y), value in zip(corners, values, strict=True):
            fill = "#ffffff" if value is None else colour
            parts.append(
                f'<circle cx="{_number(x)}" cy="{_number(y)}" r="2.6" fill="{fill}" '
                f'stroke="{colour}" stroke-width="1.2"/>'
            )
        described.append(
            f"{label}: "
            + ", ".join(
                f"{axis} {'unscorable' if v is None else f'{v:.1f}'}"
                for axis, v in zip(axes, values, strict=True)
            )
        )
        if legend_rows:
            y = size + 18 * index + 4
            parts.append(
                f'<line x1="12" y1="{_number(y)}" x2="40" y2="{_number(y)}" '
                f"{_stroke(colour, dash, 2.5)}/>"
                f'<text x="46" y="{_number(y + 4)}" font-size="12" {FONT} fill="#111">'
                f"{_label(label)}</text>"
            )
    description = (
        f"Scores {axes[0]} to {axes[-1]} on a radial scale from {_number(lower)} (centre) to "
        f"{_number(upper)} (outer ring); the dashed ring is 0, the all-zero prediction. "
        + "; ".join(described)
        + "."
    )
    return (
        _open(ident, size, height, title, description)
        + '<rect width="100%" height="100%" fill="#ffffff"/>'
        + "".join(parts)
        + "</svg>"
    )


def _rings(axes: Sequence[str], point, lower: float, upper: float, centre: float) -> str:
    """Grid of a radar chart: rings at quarter steps of the scale, the 0 ring dashed, spokes
    and axis names."""
    parts = []
    for step in range(1, 5):
        value = lower + (upper - lower) * step / 4
        ring = " ".join(
            f"{_number(x)},{_number(y)}" for x, y in (point(i, value) for i in range(len(axes)))
        )
        zero = value == 0
        parts.append(
            f'<polygon points="{ring}" fill="none" '
            + (_stroke("#333", "4 3", 1.4) if zero else _stroke("#bbb", "", 0.8))
            + "/>"
        )
        x, y = point(0.5, value)  # between the first two spokes, clear of their names
        parts.append(
            f'<text x="{_number(x + 2)}" y="{_number(y + 3)}" font-size="9" {FONT} '
            f'fill="#555">{_number(value)}</text>'
        )
    for i, axis in enumerate(axes):
        x, y = point(i, upper)
        parts.append(
            f'<line x1="{_number(centre)}" y1="{_number(centre)}" x2="{_number(x)}" '
            f'y2="{_number(y)}" {_stroke("#ddd", "", 0.8)}/>'
        )
        lx, ly = point(i, upper + (upper - lower) * 0.1)
        parts.append(
            f'<text x="{_number(lx)}" y="{_number(ly + 4)}" text-anchor="middle" '
            f'font-size="12" {FONT} fill="#111">{escape(axis)}</text>'
        )
    return "".join(parts)


def intervals(
    rows: Sequence[tuple[str, float, float, float]],
    *,
    ident: str,
    title: str,
    x_label: str,
    width: float = 520.0,
) -> str:
    """Interval chart: per (label, mean, low, high) a dot at the mean and a bar from low to high
    (no bar where the interval is unknown, NaN)."""
    left, right, top, row_h = 170.0, 20.0, 10.0, 24.0
    height = top + row_h * len(rows) + 40
    plot_w = width - left - right
    finite = [v for _, *values in rows for v in values if math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    pad = (high - low) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def x_of(value: float) -> float:
        return left + plot_w * (value - low) / (high - low)

    parts = ['<rect width="100%" height="100%" fill="#ffffff"/>']
    described = []
    for index, (label, mean, lo, hi) in enumerate(rows):
        y = top + row_h * index + row_h / 2
        parts.append(
            f'<text x="{_number(left - 8)}" y="{_number(y + 4)}" font-size="12" '
            f'text-anchor="end" {FONT} fill="#111">{_label(label)}</text>'
        )
        if math.isfinite(lo) and math.isfinite(hi):
            parts.append(
                f'<line x1="{_number(x_of(lo))}" y1="{_number(y)}" x2="{_number(x_of(hi))}" '
                f'y2="{_number(y)}" {_stroke(PALETTE[0], "", 2.5)}/>'
            )
            described.append(f"{label}: mean {mean:.3g}, interval {lo:.3g} to {hi:.3g}")
        else:
            described.append(f"{label}: {mean:.3g} (one run, no interval)")
        parts.append(
            f'<circle cx="{_number(x_of(mean))}" cy="{_number(y)}" r="4" fill="{PALETTE[1]}"/>'
        )
    axis_y = top + row_h * len(rows) + 4
    parts.append(
        f'<line x1="{_number(left)}" y1="{_number(axis_y)}" x2="{_number(left + plot_w)}" '
        f'y2="{_number(axis_y)}" {_stroke("#333", "", 1)}/>'
    )
    for value, anchor in ((low, "start"), ((low + high) / 2, "middle"), (high, "end")):
        parts.append(
            f'<text x="{_number(x_of(value))}" y="{_number(axis_y + 14)}" font-size="11" '
            f'text-anchor="{anchor}" {FONT} fill="#111">{value:.3g}</text>'
        )
    parts.append(
        f'<text x="{_number(left + plot_w / 2)}" y="{_number(axis_y + 30)}" font-size="11" '
        f'text-anchor="middle" {FONT} fill="#111">{escape(x_label)}</text>'
    )
    description = f"{x_label}: " + "; ".join(described) + "."
    return _open(ident, width, height, title, description) + "".join(parts) + "</svg>"
