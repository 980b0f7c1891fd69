"""The static HTML leaderboard in a real browser: Debian's headless Chromium driven through its
chromedriver (Selenium), pages loaded from file://. Checks what a reader sees (rows, scores
rounded to 0.01 in the final view, public AvgScores alone in the season's, commitments), that
clicking or pressing Enter on a header button reorders the
rows, that no script from the database runs and the page's own script is not blocked; saves
screenshots to `test-artifacts/leaderboard/` (or $SEISCTF_TEST_ARTIFACTS/leaderboard/).

The browser, screenshots and the console's messages come from `tests/chromium.py`.
"""

from __future__ import annotations

import shutil

import pytest
from chromium import ARTIFACTS, browser, screenshot, severe_console_messages  # noqa: F401
from leaderboard_fixtures import (
    GLOBAL_COMMITMENT,
    HOSTILE,
    PICKS_COMMITMENT,
    ctf_result,
    populate,
    profile,
)

from seisctf import conventions as cv
from seisctf.scoring import ladder, leaderboard, release
from seisctf.scoring.site import pages as site

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-site")
    populate(root / "leaderboard.sqlite")
    # The final view: the fixture's entries (recorded without parts) show their whole scores.
    site.write_site(leaderboard.entries(root / "leaderboard.sqlite"), root / "html", final=True)
    return root / "html"


@pytest.fixture(scope="module")
def artifacts():
    folder = ARTIFACTS / "leaderboard"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def texts(driver, selector: str) -> list[str]:
    return [element.text for element in driver.find_elements("css selector", selector)]


def column_texts(driver, table_id: str, index: int) -> list[str]:
    return texts(driver, f"#{table_id} tbody tr > :nth-child({index + 1})")


def test_index_lists_datasets_and_links_their_pages(browser, site_dir, artifacts):  # noqa: F811
    browser.get((site_dir / "index.html").as_uri())
    assert browser.title == "seisctf leaderboard"
    assert column_texts(browser, "datasets", 0) == ["das", "global"]
    assert column_texts(browser, "datasets", 3) == ["2", "8"]  # distinct models
    screenshot(browser, artifacts / "index.png")
    browser.find_element("link text", "global").click()
    assert browser.current_url.endswith(site.page_names(["global"])["global"])
    assert browser.title == "seisctf leaderboard: global"
    assert severe_console_messages(browser) == []


def test_dataset_page_rows_scores_commitments_and_sorting(browser, site_dir, artifacts):  # noqa: F811
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.keys import Keys

    entries = [  # the public view: what the site is made from
        e
        for e in release.public_entries(
            leaderboard.entries(site_dir.parent / "leaderboard.sqlite", family="ctf"), final=True
        )
        if e["dataset"] == "global" and e["convention"] == "reference"
    ]
    browser.get((site_dir / site.page_names(["global"])["global"]).as_uri())
    provenance = texts(browser, "p.provenance")
    assert GLOBAL_COMMITMENT in provenance[0] and "reference" in provenance[0]
    assert "paper" in provenance[1] and PICKS_COMMITMENT in provenance[2]
    ranking = "ctf1-ranking"
    models = column_texts(browser, ranking, 1)
    assert len(models) == len(entries) == 11 and HOSTILE in models  # shown as text
    assert column_texts(browser, ranking, 3) == [f"{e['avg_score']:.2f}" for e in entries]
    screenshot(browser, artifacts / "dataset-global.png")

    header = browser.find_element("css selector", f"#{ranking} thead th:nth-child(2) button")
    header.click()
    assert models != column_texts(browser, ranking, 1)
    assert column_texts(browser, ranking, 1) == sorted(models, key=str.casefold)
    th = browser.find_element("css selector", f"#{ranking} thead th:nth-child(2)")
    assert th.get_attribute("aria-sort") == "ascending"
    header.click()
    assert column_texts(browser, ranking, 1) == sorted(models, key=str.casefold, reverse=True)
    assert th.get_attribute("aria-sort") == "descending"

    e3 = browser.find_element("css selector", f"#{ranking} thead th:nth-child(7) button")
    assert e3.text.startswith("E3")
    e3.send_keys(Keys.ENTER)  # a keyboard user sorts the same way
    wanted = sorted((e["scores"]["E3"] for e in entries), reverse=True)
    assert column_texts(browser, ranking, 6) == [f"{v:.2f}" for v in wanted]
    others = browser.find_elements("css selector", f"#{ranking} thead th[aria-sort]")
    assert [o.text.strip(" ▲▼") for o in others] == ["E3"]
    assert "Sorted by E3, descending" in browser.find_element("id", "sort-status").text
    screenshot(browser, artifacts / "dataset-global-sorted-by-E3.png")

    assert column_texts(browser, "picks1-f1", 1) == ["phasenet"] * 3 + ["stalta"]
    pf1 = browser.find_element("css selector", "#picks1-f1 thead th:nth-child(9) button")
    assert pf1.text.startswith("P pick F1")
    pf1.click()
    pf1.click()  # numeric columns sort descending first; the second click ascends
    assert column_texts(browser, "picks1-f1", 8) == ["0.62", "0.79", "0.81", "0.84"]
    svg_titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg > title')).map(t => t.textContent)"
    )
    assert "Score profiles of the top 5 models" in svg_titles
    assert not any("residual" in title for title in svg_titles)  # organisers' only
    with pytest.raises(NoAlertPresentException):  # the hostile name's onerror never ran
        browser.switch_to.alert  # noqa: B018
    assert severe_console_messages(browser) == []


def test_das_page_shows_the_unscorable_task(browser, site_dir, artifacts):  # noqa: F811
    browser.get((site_dir / site.page_names(["das"])["das"]).as_uri())
    assert column_texts(browser, "ctf1-ranking", 1) == ["zeros", "das-model"]
    e5 = cv.SCORE_NAMES.index("E5") + 4
    assert column_texts(browser, "ctf1-ranking", e5) == ["0.00", "—"]
    screenshot(browser, artifacts / "dataset-das.png")
    assert severe_console_messages(browser) == []


def test_season_page_shows_public_scores_alone(browser, tmp_path, artifacts):  # noqa: F811
    """Entries with parts, the season's view: one public score per entry (to the Ladder's step),
    no E1..E12 column, no profile; the column sorts."""
    db = tmp_path / "season.sqlite"
    public = {"zeros": 0.0, "persistence": 8.4, "dmd": 44.6, "lstm": 29.51}
    for model, level in public.items():
        result = ctf_result(model, {name: level for name in cv.SCORE_NAMES})
        private = profile(level, seed=len(model))
        result["metrics"] = dict.fromkeys(cv.SCORE_NAMES, "short_time")
        result["parts"] = {
            "public": {"scores": result["scores"], "avg_score": level},
            "private": {"scores": private, "avg_score": sum(private.values()) / 12},
        }
        leaderboard.record(db, result, truth_commitment=GLOBAL_COMMITMENT)
    index = site.write_site(leaderboard.entries(db), tmp_path / "html")
    browser.get((index.parent / site.page_names(["global"])["global"]).as_uri())
    heads = texts(browser, "#ctf1-ranking thead th")
    assert [h.strip(" ▲▼") for h in heads] == ["Rank", "Model", "Run", "Public score"]
    wanted = sorted(public, key=lambda m: -ladder.to_step(public[m]))
    assert column_texts(browser, "ctf1-ranking", 1) == wanted
    shown = column_texts(browser, "ctf1-ranking", 3)
    assert shown == [f"{ladder.to_step(public[m]):.2f}" for m in wanted]
    model = browser.find_element("css selector", "#ctf1-ranking thead th:nth-child(2) button")
    model.click()
    assert column_texts(browser, "ctf1-ranking", 1) == sorted(public, key=str.casefold)
    svg_titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg > title')).map(t => t.textContent)"
    )
    assert not any("profile" in title for title in svg_titles)
    assert "Season view" in browser.find_element("css selector", "p.note").text
    screenshot(browser, artifacts / "dataset-global-season.png")
    assert severe_console_messages(browser) == []
