"""The HTML building blocks of the static leaderboard: the page frame and its
Content-Security-Policy, cells and sortable tables.

Each page is one self-contained HTML file (CSS, figures as inline SVG, a small sorting script)
whose Content-Security-Policy allows only its own script and style (by hash), so nothing from the
database can run even if it slipped past the escaping. Every text from the database is
HTML-escaped; links are made only from http(s) URLs. Tables are real tables (`<caption>`,
`<th scope>`), sortable with keyboard-usable header buttons that keep `aria-sort` up to date.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import urlsplit

INDEX = "index.html"
MISSING = "—"

# Diverging cell colours around 0 (the all-zero prediction): blue above, red below, five steps
# of 20 score points each; blended into white so #111 text keeps a contrast ratio of at least
# 6:1 on the darkest step (WCAG AA asks 4.5:1).
_POSITIVE, _NEGATIVE = (33, 102, 172), (178, 24, 43)
_STEPS = 5
_MAX_BLEND = 0.55


def _blend(rgb: tuple[int, int, int], fraction: float) -> str:
    mixed = (round(255 + (c - 255) * fraction) for c in rgb)
    return "#" + "".join(f"{c:02x}" for c in mixed)


def _score_css() -> str:
    rules = []
    for step in range(1, _STEPS + 1):
        fraction = _MAX_BLEND * step / _STEPS
        rules.append(f"td.p{step}{{background:{_blend(_POSITIVE, fraction)}}}")
        rules.append(f"td.n{step}{{background:{_blend(_NEGATIVE, fraction)}}}")
    return "".join(rules)


CSS = (
    "body{font-family:system-ui,sans-serif;color:#111;background:#fff;margin:1.5em auto;"
    "max-width:90em;padding:0 1em;line-height:1.45}"
    "a{color:#0645ad}a:focus-visible,button:focus-visible{outline:3px solid #b35900;"
    "outline-offset:2px}"
    "table{border-collapse:collapse;margin:.6em 0 1.4em;font-variant-numeric:tabular-nums}"
    "caption{text-align:left;font-weight:600;padding:.3em 0;caption-side:top}"
    "th,td{border:1px solid #999;padding:.25em .45em;text-align:right;vertical-align:top}"
    "th[scope=row],td.text,th.text{text-align:left}thead th{background:#eef0f3}"
    ".nowrap{white-space:nowrap}"
    "th button{font:inherit;font-weight:600;color:inherit;background:none;border:0;padding:0;"
    "cursor:pointer;text-align:inherit}"
    "th[aria-sort=ascending] button::after{content:' ▲'}"
    "th[aria-sort=descending] button::after{content:' ▼'}"
    "code{word-break:break-all;background:#f3f3f3;padding:0 .2em}"
    ".scroll{overflow-x:auto}.figures{display:flex;flex-wrap:wrap;gap:1em}"
    "figure{margin:0}figcaption{font-size:.9em;max-width:26em}"
    ".provenance{border-left:4px solid #0072b2;padding:.2em .8em;background:#f5f8fb}"
    ".note{color:#333;font-size:.95em}"
    ".visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;"
    "clip:rect(0 0 0 0);white-space:nowrap}" + _score_css()
)

# Sorting: a header button sorts the rows by its column's `data-sort` values (numbers or
# text); cells without a value stay last in both directions.
SCRIPT = """
(function () {
  var status = document.getElementById('sort-status');
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, column) {
      var button = th.querySelector('button');
      if (!button) { return; }
      button.addEventListener('click', function () {
        var numeric = th.getAttribute('data-type') === 'number';
        var now = th.getAttribute('aria-sort');
        var order = now ? (now === 'ascending' ? 'descending' : 'ascending')
                        : (numeric ? 'descending' : 'ascending');
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', order);
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var key = function (row) { return row.cells[column].getAttribute('data-sort'); };
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          if (x === '' || y === '') { return (x === '') - (y === ''); }
          var c = numeric ? Number(x) - Number(y) : x.localeCompare(y);
          return order === 'ascending' ? c : -c;
        });
        rows.forEach(function (row) { body.appendChild(row); });
        if (status) { status.textContent = 'Sorted by ' + button.textContent + ', ' + order; }
      });
    });
  });
})();
"""


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


CSP = (
    f"default-src 'none'; style-src {_csp_hash(CSS)}; script-src {_csp_hash(SCRIPT)}; "
    "base-uri 'none'; form-action 'none'"
)


def page(title: str, body: str, *, back_link: bool) -> str:
    """A complete HTML page around `body` (already escaped HTML)."""
    nav = f'<nav><a href="{INDEX}">← All datasets</a></nav>' if back_link else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{nav}"
        f'<main><h1>{escape(title)}</h1>{body}</main><p id="sort-status" class="visually-hidden" '
        f'aria-live="polite"></p><script>{SCRIPT}</script></body></html>\n'
    )


# --- cells and tables ----------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One table cell: its escaped HTML, its sort key (None: no value) and CSS classes."""

    html: str
    sort: float | str | None = None
    classes: str = ""


@dataclass(frozen=True)
class Column:
    """A table column: header label, how a row's cell is made, numeric or text."""

    label: str
    cell: Callable[[Any], Cell]
    numeric: bool = True


def text_cell(value: object) -> Cell:
    if value is None or value == "":
        return Cell(MISSING, None, "text")
    text = str(value)
    return Cell(escape(text), text.casefold(), "text")


def number_cell(value: float | int | None, digits: int = 2) -> Cell:
    """A number with `digits` decimals (integers as they are); it sorts by the value shown."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return Cell(MISSING)
    if not isinstance(value, float):
        return Cell(str(value), value)
    return Cell(f"{value:.{digits}f}", round(value, digits) + 0.0)


def score_cell(value: float | None) -> Cell:
    """A 100-point score coloured around 0: class p1..p5 above, n1..n5 below."""
    cell = number_cell(value)
    if value is None or cell.sort is None or value == 0:
        return cell
    step = min(_STEPS, max(1, math.ceil(abs(value) / (100 / _STEPS))))
    return Cell(cell.html, cell.sort, f"{'p' if value > 0 else 'n'}{step}")


def link(url: object, text: str | None = None) -> str:
    """An escaped link when `url` is an http(s) URL with a host, else the escaped text."""
    if not isinstance(url, str) or not url:
        return MISSING
    parts = urlsplit(url.strip())
    label = escape(text if text is not None else url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return label
    href = escape(url.strip(), quote=True)
    return f'<a href="{href}" rel="nofollow noopener noreferrer">{label}</a>'


def table(
    ident: str,
    caption: str,
    columns: Sequence[Column],
    rows: Iterable[Any],
    *,
    row_header: int = 1,
    sorted_by: tuple[int, str] | None = None,
) -> str:
    """A sortable table; column `row_header` holds each row's header cell (`<th scope=row>`).
    `caption` is escaped HTML; `sorted_by` = (column, "ascending"|"descending") marks the
    order the rows already have."""
    heads = []
    for index, column in enumerate(columns):
        sort = f' aria-sort="{sorted_by[1]}"' if sorted_by and sorted_by[0] == index else ""
        kind = "number" if column.numeric else "text"
        heads.append(
            f'<th scope="col" class="{kind}" data-type="{kind}"{sort}><button type="button">'
            f"{escape(column.label)}</button></th>"
        )
    body = []
    for row in rows:
        cells = []
        for index, column in enumerate(columns):
            cell = column.cell(row)
            tag = "th" if index == row_header else "td"
            scope = ' scope="row"' if tag == "th" else ""
            classes = f' class="{cell.classes}"' if cell.classes else ""
            sort = "" if cell.sort is None else escape(str(cell.sort), quote=True)
            cells.append(f'<{tag}{scope}{classes} data-sort="{sort}">{cell.html}</{tag}>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<div class="scroll"><table class="sortable" id="{escape(ident)}">'
        f"<caption>{caption}</caption><thead><tr>{''.join(heads)}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def group_by(
    entries: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any]
) -> dict[Any, list[Mapping[str, Any]]]:
    """Entries grouped by `key`, groups and entries in first-seen order."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(key(entry), []).append(entry)
    return groups
