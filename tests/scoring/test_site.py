"""The static HTML leaderboard as markup: pages, tables, numbers, escaping, SVG figures.

The browser's view of the same site (sorting, screenshots) is test_site_browser.py."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from leaderboard_fixtures import (
    DAS_COMMITMENT,
    GLOBAL_COMMITMENT,
    HOSTILE,
    HOSTILE_DESCRIPTION,
    PICKS_COMMITMENT,
    ctf_result,
    pick_result,
    populate,
)

from seisctf import conventions as cv
from seisctf.scoring import leaderboard
from seisctf.scoring.site import markup
from seisctf.scoring.site import pages as site
from seisctf.scoring.uncertainty import mean_interval, misranking_probability

SVG_NS = "{http://www.w3.org/2000/svg}"


class Tables(HTMLParser):
    """Every table of a page by id: caption, header cells and body rows of (tag, attrs, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict] = {}
        self._table: dict | None = None
        self._cell: list | None = None
        self._in_caption = False
        self._section = ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = {"caption": "", "head": [], "rows": []}
            self.tables[attrs.get("id", f"table{len(self.tables)}")] = self._table
        elif self._table is None:
            return
        elif tag == "caption":
            self._in_caption = True
        elif tag in ("thead", "tbody"):
            self._section = tag
        elif tag == "tr" and self._section == "tbody":
            self._table["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = [tag, attrs, ""]

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "caption":
            self._in_caption = False
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            cell = (self._cell[0], self._cell[1], self._cell[2].strip())
            target = self._table["head"] if self._section == "thead" else self._table["rows"][-1]
            target.append(cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2] += data
        elif self._in_caption and self._table is not None:
            self._table["caption"] += data


def tables_of(page: str) -> dict[str, dict]:
    parser = Tables()
    parser.feed(page)
    return parser.tables


def column(table: dict, label: str) -> list[str]:
    index = [cell[2] for cell in table["head"]].index(label)
    return [row[index][2] for row in table["rows"]]


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    recorded = populate(root / "leaderboard.sqlite")
    # The final view: the fixture's entries (recorded without parts) show their whole scores.
    entries = leaderboard.entries(root / "leaderboard.sqlite")
    index = site.write_site(entries, root / "html", final=True)
    return index.parent, recorded


def read(site_dir, dataset: str) -> str:
    return (site_dir[0] / site.page_names([dataset])[dataset]).read_text()


def test_index_links_one_page_per_dataset(site_dir):
    out, recorded = site_dir
    names = site.page_names(["global", "das"])
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.html", *names.values()])
    index = (out / "index.html").read_text()
    table = tables_of(index)["datasets"]
    assert column(table, "Dataset") == ["das", "global"]
    for dataset, name in names.items():
        assert f'<a href="{name}">{dataset}</a>' in index
    assert column(table, "CTF submissions") == ["2", "12"]
    assert column(table, "Pick submissions") == ["0", "4"]
    assert column(table, "Best CTF model") == ["zeros", "dmd"]
    assert table["head"][0][1]["aria-sort"] == "ascending"


def test_pages_state_convention_and_truth_commitment(site_dir):
    page = read(site_dir, "global")
    provenance = re.findall(r'<p class="provenance">(.*?)</p>', page)
    assert len(provenance) == 3  # reference CTF, paper CTF, picks
    assert "<strong>reference</strong>" in provenance[0] and GLOBAL_COMMITMENT in provenance[0]
    assert "<strong>paper</strong>" in provenance[1] and GLOBAL_COMMITMENT in provenance[1]
    assert PICKS_COMMITMENT in provenance[2] and "±0.5 s" in provenance[2]
    assert "threshold 0.5" in provenance[2]
    assert DAS_COMMITMENT in read(site_dir, "das")


def test_ranking_by_avg_score_with_colours_around_zero(site_dir):
    out, recorded = site_dir
    expected = sorted(
        (
            r["result"]
            for r in recorded
            if r["family"] == "ctf"
            and r["result"]["dataset"] == "global"
            and r["result"]["convention"] == "reference"
        ),
        key=lambda r: -r["avg_score"],
    )
    table = tables_of(read(site_dir, "global"))["ctf1-ranking"]
    assert [cell[2] for cell in table["head"]] == [
        "Rank",
        "Model",
        "Run",
        "AvgScore",
        *cv.SCORE_NAMES,
    ]
    assert all(cell[1]["scope"] == "col" for cell in table["head"])
    assert len(table["rows"]) == len(expected) == 11
    assert column(table, "Model") == [r["name"] for r in expected]
    assert column(table, "AvgScore") == [f"{r['avg_score']:.2f}" for r in expected]
    assert column(table, "Rank") == [str(i) for i in range(1, 12)]
    for row, result in zip(table["rows"], expected, strict=True):
        assert row[1][0] == "th" and row[1][1]["scope"] == "row"
        for cell, name in zip(row[4:], cv.SCORE_NAMES, strict=True):
            value = result["scores"][name]
            assert float(cell[1]["data-sort"]) == value
            step = min(5, max(1, math.ceil(abs(value) / 20)))
            wanted = "" if value == 0 else f"{'p' if value > 0 else 'n'}{step}"
            assert cell[1].get("class", "") == wanted
    assert "Ranking by AvgScore" in table["caption"]
    das = tables_of(read(site_dir, "das"))["ctf1-ranking"]
    assert column(das, "Model") == ["zeros", "das-model"]
    assert column(das, "E5") == ["0.00", "—"]  # unscorable


def test_database_text_is_escaped_and_only_http_links_made(site_dir):
    out, _ = site_dir
    for page_path in out.glob("*.html"):
        page = page_path.read_text()
        assert HOSTILE not in page and "<script>alert" not in page
        links = re.findall(r'(?:href|src)="([^"]*)"', page)
        assert links and all(re.match(r"https?://|dataset-|index\.html", u) for u in links)
        assert page.count("<script>") == 1
    page = read(site_dir, "global")
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt; &amp; more" in page
    assert '<a href="https://example.org/dmd" rel="nofollow noopener noreferrer">' in page
    assert "javascript:alert(1)" in page  # shown as text, not as a link
    hostile_rows = [
        row for row in tables_of(page)["ctf1-submissions"]["rows"] if row[1][2] == HOSTILE
    ]
    assert [row[4][2] for row in hostile_rows] == ["javascript:alert(1)"]
    assert [row[5][2] for row in hostile_rows] == [HOSTILE_DESCRIPTION]


def test_csp_allows_exactly_the_inline_script_and_style(site_dir):
    page = read(site_dir, "global")
    script = re.search(r"<script>(.*?)</script>", page, flags=re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", page, flags=re.S).group(1)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    for text in (script, style):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert " style=" not in page  # inline style attributes would be blocked


def test_svg_figures_are_well_formed_and_titled(site_dir):
    page = read(site_dir, "global")
    figures = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    ids = []
    for figure in figures:
        root = ET.fromstring(figure)
        assert root.get("role") == "img"
        title, desc = root.find(f"{SVG_NS}title"), root.find(f"{SVG_NS}desc")
        assert title is not None and title.text and desc is not None and desc.text
        assert root.get("aria-labelledby") == f"{title.get('id')} {desc.get('id')}"
        ids.append(root.get("id"))
    assert len(ids) == len(set(ids))
    radars = [i for i in ids if i.startswith("ctf1-radar-")]
    assert len(radars) == 6  # one per model
    overlay = ET.fromstring(next(f for f in figures if 'id="ctf1-overlay"' in f))
    assert len(overlay.findall(f"{SVG_NS}polygon")) == 4 + 5  # grid rings + top-5 models
    assert "dmd" in overlay.find(f"{SVG_NS}desc").text


def test_uncertainty_tables_match_the_uncertainty_module(site_dir):
    out, recorded = site_dir
    runs: dict[str, list[float]] = {}
    for r in recorded:
        result = r["result"]
        if (
            r["family"] == "ctf"
            and result["dataset"] == "global"
            and (result["convention"] == "reference")
        ):
            runs.setdefault(result["name"], []).append(round(result["avg_score"], 2))
    tables = tables_of(read(site_dir, "global"))
    table = tables["ctf1-uncertainty"]
    by_model = {row[0][2]: [cell[2] for cell in row] for row in table["rows"]}
    for model in ("dmd", "lstm"):
        mean, low, high = mean_interval(runs[model])
        assert by_model[model][1:] == [
            str(len(runs[model])),
            f"{mean:.2f}",
            f"{low:.2f}",
            f"{high:.2f}",
        ]
    assert by_model["zeros"][1:] == ["1", "0.00", "—", "—"]
    for row in table["rows"]:  # each row sorts by the numbers it shows, no finer
        assert all(float(a["data-sort"]) == float(t) for _, a, t in row[1:] if t != "—")
    matrix = tables["ctf1-uncertainty-misranking"]
    heads = [cell[2] for cell in matrix["head"]][1:]
    row = next(r for r in matrix["rows"] if r[0][2] == "dmd")
    cell = row[1 + heads.index("lstm")][2]
    assert cell == f"{misranking_probability(runs['dmd'], runs['lstm']):.3f}"
    assert row[1 + heads.index("dmd")][2] == "—"
    # A group without repeated runs (paper convention) has no uncertainty section.
    assert "ctf2-uncertainty" not in tables and "ctf2-ranking" in tables


def test_pick_tables_show_rounded_rates_and_uncertainty_only(site_dir):
    out, recorded = site_dir
    page = read(site_dir, "global")
    tables = tables_of(page)
    f1 = tables["picks1-f1"]
    assert column(f1, "Model") == ["phasenet", "phasenet", "phasenet", "stalta"]
    assert column(f1, "P pick F1") == ["0.84", "0.81", "0.79", "0.62"]
    assert column(f1, "Detection F1")[0] == "0.89"
    assert column(f1, "S pick precision")[0] == "0.77"
    # Counts, residual statistics, breakdowns and histograms are computed against the truth:
    # none of them is on the page, although every stored result carries them.
    assert not {"picks1-residuals", "picks1-splits"} & set(tables)
    assert "histogram" not in page and not re.search(r"residual (mean|std|MAE)|residuals<", page)
    for r in recorded:
        if r["family"] == "picks":
            assert all("residual_mean_s" in r["result"][part] for part in ("p", "s"))
    headers = {cell[2] for table in tables.values() for cell in table["head"]}
    assert not {h for h in headers if h.endswith((" TP", " FP", " FN", "Traces"))}
    for part in ("detection", "p", "s"):
        assert f"picks1-uncertainty-{part}" in tables
    p_table = tables["picks1-uncertainty-p"]
    mean, low, high = mean_interval([0.81, 0.84, 0.79])
    assert [c[2] for c in p_table["rows"][0]] == [
        "phasenet",
        "3",
        f"{mean:.3f}",
        f"{low:.3f}",
        f"{high:.3f}",
    ]


def test_pages_show_scores_and_rates_rounded_to_a_hundredth_only(tmp_path):
    """Entries whose scores, rates and averages carry every digit of float64 (and raw scores
    beyond the clip) appear on the pages with two decimals at most, in the text and in the
    sort keys, and no digit beyond those."""
    db = tmp_path / "lb.sqlite"
    scores = {name: 100 * (0.123456789 + 0.0711 * i) - 50 for i, name in enumerate(cv.SCORE_NAMES)}
    ctf = ctf_result("digits", scores)
    ctf["raw_scores"] = {name: value - 150.0 for name, value in scores.items()}
    ctf["avg_score"] = sum(scores.values()) / len(scores)
    leaderboard.record(db, ctf, truth_commitment=GLOBAL_COMMITMENT)
    picks = pick_result("digits-picker", 0.7654321)
    picks["p"] |= {"precision": 0.81234567, "recall": 0.7123456, "residual_mean_s": 0.0123456}
    leaderboard.record(db, picks, family="picks", truth_commitment=PICKS_COMMITMENT)
    index = site.write_site(leaderboard.entries(db), tmp_path / "html", final=True)
    text = "".join(path.read_text() for path in index.parent.glob("*.html"))
    tables = {
        ident: table
        for path in index.parent.glob("*.html")
        for ident, table in tables_of(path.read_text()).items()
    }
    ranking = tables["ctf1-ranking"]
    assert column(ranking, "E2") == [f"{round(scores['E2'], 2):.2f}"]
    assert column(ranking, "AvgScore") == [f"{round(ctf['avg_score'], 2):.2f}"]
    assert column(tables["picks1-f1"], "P pick precision") == ["0.81"]
    assert column(tables["picks1-f1"], "P pick F1") == ["0.77"]
    shown = 0
    for ident in ("ctf1-ranking", "picks1-f1", "datasets"):
        for row in tables[ident]["rows"]:
            for _, attrs, cell_text in row:
                for value in (attrs.get("data-sort", ""), cell_text):
                    if re.fullmatch(r"-?\d+\.\d+", value):
                        assert re.fullmatch(r"-?\d+\.\d\d?", value), (ident, value)
                        assert -100 <= float(value) <= 100
                        shown += 1
    assert shown > 2 * (len(cv.SCORE_NAMES) + 1)
    hidden = [*ctf["raw_scores"].values(), *scores.values(), ctf["avg_score"], 0.7654321,
              0.81234567, 0.7123456, 0.0123456]  # fmt: skip
    for value in hidden:
        for digits in (3, 4, 6, 8):
            assert f"{value:.{digits}f}" not in text, (value, digits)
        assert repr(value) not in text


def test_pick_results_without_histograms_or_breakdowns(tmp_path):
    db = tmp_path / "lb.sqlite"
    bare = pick_result("bare", 0.5)
    for key in ("splits", "groups", "residual_histogram"):
        bare.pop(key)
    leaderboard.record(db, bare, family="picks", truth_commitment=None)
    page = (
        site.write_site(leaderboard.entries(db), tmp_path / "html").parent
        / site.page_names(["global"])["global"]
    ).read_text()
    assert "none recorded" in page and "<svg" not in page
    assert column(tables_of(page)["picks1-f1"], "P pick F1") == ["0.50"]


def test_rewriting_removes_stale_dataset_pages_only(site_dir, tmp_path):
    out = tmp_path / "html"
    out.mkdir()
    (out / "dataset-old.html").write_text("old")
    (out / "notes.txt").write_text("keep")
    db = tmp_path / "lb.sqlite"
    populate(db)
    site.write_site(leaderboard.entries(db), out)
    assert not (out / "dataset-old.html").exists() and (out / "notes.txt").read_text() == "keep"
    assert not list(out.glob(".*partial"))


def test_page_names_are_safe_and_distinct():
    names = site.page_names(["global", "a/b", "a_b", "../x", "a b", ""])
    assert len(set(names.values())) == 6
    assert names["global"] == "dataset-global.html" and names["a_b"] == "dataset-a_b.html"
    for name in names.values():
        assert re.fullmatch(r"dataset-[A-Za-z0-9_-]+\.html", name)


def test_link_accepts_only_http_urls():
    assert markup.link("https://x.org/a?b=1&c=2") == (
        '<a href="https://x.org/a?b=1&amp;c=2" rel="nofollow noopener noreferrer">'
        "https://x.org/a?b=1&amp;c=2</a>"
    )
    for url in ("javascript:alert(1)", "data:text/html,hi", "//x.org", "ftp://x.org", "http:/x"):
        assert "<a" not in markup.link(url)
    assert markup.link(None) == "—"


def test_real_pick_scorer_results_render(tmp_path):
    """Results of the real pick scorer (a small event-window store, picks built from its
    labels) go through the leaderboard into the page with their numbers."""
    import numpy as np
    import pandas as pd
    from event_window_fixtures import RATE, write_picking_windows

    from seisctf.scoring.picks import score_picks

    store = str(tmp_path / "windows.zarr")
    dataset = write_picking_windows(store, n_earthquake=8, n_noise=4)
    p_s = dataset[cv.P_ARRIVAL_SAMPLE].values / RATE
    s_s = dataset[cv.S_ARRIVAL_SAMPLE].values / RATE
    names = dataset[cv.TRACE_NAME].values
    db = tmp_path / "lb.sqlite"
    for shift_s in (0.0, 0.3, 0.7):
        table = pd.DataFrame(
            {
                "trace_name": names,
                "detection": np.where(np.isnan(p_s), 0.1, 0.9),
                "p_time_s": p_s + shift_s,
                "s_time_s": s_s,
            }
        )
        result = score_picks(store, table, name=f"shift-{shift_s}", split="all")
        leaderboard.record(db, result, family="picks", truth_commitment=result["truth_commitment"])
    index = site.write_site(leaderboard.entries(db), tmp_path / "html")
    page = (index.parent / site.page_names([result["dataset"]])[result["dataset"]]).read_text()
    season = tables_of(page)["picks1-f1"]
    labels = [cell[2] for cell in season["head"]]
    assert "Public score" in labels and "P pick F1" not in labels and "S pick F1" not in labels
    # The close's view: the private half's rates, ranked by its mean F1.
    index = site.write_site(leaderboard.entries(db), tmp_path / "html", final=True)
    page = (index.parent / site.page_names([result["dataset"]])[result["dataset"]]).read_text()
    tables = tables_of(page)
    assert column(tables["picks1-f1"], "Model") == ["shift-0.0", "shift-0.3", "shift-0.7"]
    assert column(tables["picks1-f1"], "P pick F1") == ["1.00", "1.00", "0.00"]
    assert column(tables["picks1-f1"], "S pick F1") == ["1.00"] * 3
    detection = result["detection"]
    assert column(tables["picks1-f1"], "Detection precision")[-1] == (
        f"{detection['tp'] / (detection['tp'] + detection['fp']):.2f}"
    )
    assert result["p"]["tp"] == 0 and result["s"]["residual_mean_s"] == 0.0
    assert result["truth_commitment"] in page
    assert "<svg" not in page and "histogram" not in page


def test_extended_scores_get_columns_and_json_keeps_their_average(tmp_path):
    db = tmp_path / "lb.sqlite"
    scores = {f"E{i}": float(i) for i in range(1, 17)}
    result = ctf_result("sim", scores, dataset="crustal")
    result["avg_score"] = sum(range(1, 13)) / 12
    result["extended_avg_score"] = sum(range(13, 17)) / 4
    leaderboard.record(db, result, truth_commitment=GLOBAL_COMMITMENT)
    rows = leaderboard.entries(db)
    page = (
        site.write_site(rows, tmp_path / "html", final=True).parent
        / site.page_names(["crustal"])["crustal"]
    ).read_text()
    ranking = next(t for t in tables_of(page).values() if "AvgScore" in str(t["head"]))
    labels = [cell[2] for cell in ranking["head"]]
    assert labels[-16:] == [f"E{i}" for i in range(1, 17)]
    assert column(ranking, "E16") == ["16.00"] and column(ranking, "E10") == ["10.00"]
    (row,) = leaderboard.as_json(rows, final=True)
    assert row["extended_avg_score"] == 14.5 and row["scores"]["E15"] == 15.0
