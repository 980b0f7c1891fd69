"""The static HTML leaderboard's files: an index page and one page per dataset, no server, no
CDN (`write_site`).

Pages are made from the public view of the entries (`seisctf.scoring.release.public_entries`)
alone; what they say comes from `seisctf.scoring.site.sections`, their frame and tables from
`seisctf.scoring.site.markup`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from seisctf.scoring.release import public_entries
from seisctf.scoring.site.markup import INDEX, page
from seisctf.scoring.site.sections import dataset_page, index_page

PAGE_PREFIX = "dataset-"


def page_names(datasets: Iterable[str]) -> dict[str, str]:
    """A safe, distinct file name per dataset: its letters, digits, `-` and `_`, plus a short
    hash when that changed the name (so "a/b" and "a_b" never collide)."""
    names = {}
    for dataset in sorted(set(datasets)):
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", dataset)[:60] or "dataset"
        if safe != dataset:
            safe += "-" + hashlib.sha256(dataset.encode()).hexdigest()[:8]
        names[dataset] = f"{PAGE_PREFIX}{safe}.html"
    return names


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_site(
    entries: list[dict[str, Any]],
    out_dir: str | Path,
    final: bool = False,
    chosen: Collection[int] = (),
) -> Path:
    """Write `index.html` and a page per dataset into `out_dir`; returns the index path.

    The pages are made from the public view of the entries alone (`release.public_entries`:
    the season's, a CTF entry's public-part AvgScore alone; with `final`, the close's, its
    private part's scores to 0.01; no raw values, counts or residuals), so no page can show
    more; `chosen`: the entry ids participants chose as their final ones (`release.standing`).
    Dataset pages of an earlier rendering whose dataset is gone are removed; nothing else
    in `out_dir` is touched."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for entry in public_entries(entries, final, chosen):
        by_dataset.setdefault(entry["dataset"], []).append(entry)
    names = page_names(by_dataset)
    for dataset, name in names.items():
        title, body = dataset_page(dataset, by_dataset[dataset], final)
        _write_atomic(out / name, page(title, body, back_link=True))
    for stale in out.glob(f"{PAGE_PREFIX}*.html"):
        if stale.name not in names.values():
            stale.unlink()
    title, body = index_page(by_dataset, names, final)
    index = out / INDEX
    _write_atomic(index, page(title, body, back_link=False))
    return index
