"""The referee service's pages in a real browser (headless Chromium through its chromedriver,
`tests/chromium.py`), against a real `seisctf serve` on loopback scoring on a real Dask cluster.

A team logs in with its token through the home page's form, uploads the persistence baseline
through the team page's form, and watches its submission's row reach `scored` without the page
being reloaded. The live page, left open, counts a second submission (sent through the API) once
scored and its board frame shows it, again without the page being reloaded. Neither page logs a
severe console message (a script or style the Content-Security-Policy blocked would). Screenshots
go to `test-artifacts/service/` (or $SEISCTF_TEST_ARTIFACTS/service/)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromium
import numpy as np
import pytest
import zarr
from chromium import ARTIFACTS, browser, screenshot, severe_console_messages  # noqa: F401
from running_service import FINISHED, Service, add_team, upload, wait_finished
from service_fixtures import competition, persistence_zip, tiny_bundle  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT_S = 180.0
MARKED = "return window.__marker === 1"
# The state cell of a submission's row in the team page's table, or null while it has none.
STATE = """
const row = document.querySelector(`#submissions tr[data-id="${arguments[0]}"]`);
return row ? row.children[3].textContent : null;
"""
# The board frame's index: the "Best CTF model" column of its datasets table.
BOARD_BEST = """
const doc = document.getElementById('board').contentDocument;
if (!doc) return null;
return Array.from(doc.querySelectorAll('#datasets tbody tr > :nth-child(5)'), c => c.textContent);
"""


@pytest.fixture
def service(competition: Path, dask_cluster: Any) -> Iterator[Service]:  # noqa: F811
    running = Service(competition, scheduler=dask_cluster.address).start()
    yield running
    running.stop()


@pytest.fixture
def artifacts() -> Path:
    folder = ARTIFACTS / "service"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def half_persistence(persistence_zip: Path, out: Path) -> Path:  # noqa: F811
    """An .npz of the persistence baseline's arrays times 0.5: another valid submission."""
    group = zarr.open_group(str(persistence_zip.with_suffix(".zarr")), mode="r")
    arrays = {f"X{n}test": np.asarray(group[f"X{n}test"]) * 0.5 for n in range(1, 10)}
    np.savez(out, **arrays)
    return out


def wait(driver: Any, timeout_s: float = TIMEOUT_S) -> Any:
    return chromium.wait(driver, timeout_s)


def test_a_team_follows_its_scores_live_in_the_browser(
    browser: Any,  # noqa: F811
    service: Service,
    competition: Path,  # noqa: F811
    persistence_zip: Path,  # noqa: F811
    artifacts: Path,
    tmp_path: Path,
) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support import expected_conditions as ec

    token = add_team(competition, "Browser Team")
    browser.get(service.url + "/")
    browser.find_element("id", "token").send_keys(token)
    browser.find_element("id", "login").click()
    wait(browser, 30).until(ec.url_to_be(service.url + "/team"))

    # The upload form: the page posts, and the server sends the browser back to /team.
    browser.find_element("id", "model").send_keys("persistence")
    browser.find_element("id", "file").send_keys(str(persistence_zip.resolve()))
    button = browser.find_element("id", "upload")
    button.click()
    wait(browser, 60).until(chromium.replaced(button))
    assert browser.current_url == service.url + "/team"
    # The id is read inside the wait: the page re-renders its rows as the state changes.
    ident = wait(browser, 30).until(
        lambda d: d.find_element("css selector", "#submissions tr[data-id]").get_attribute(
            "data-id"
        )
    )
    browser.execute_script("window.__marker = 1")

    # The row follows the job table in place: queued, then scored, with no reload. The API says
    # when the referee is done; the page's script then has a few of its polls to show it.
    seen = [browser.execute_script(STATE, ident)]

    def shown_state(driver: Any) -> str | None:
        state = driver.execute_script(STATE, ident)
        if state != seen[-1]:
            seen.append(state)
        return state

    with service.client(token) as client:
        wait(browser).until(
            lambda d: (
                shown_state(d) in FINISHED
                or client.get(f"/api/submissions/{ident}").json()["state"] in FINISHED
            )
        )
    with contextlib.suppress(TimeoutException):
        wait(browser, 10).until(lambda d: shown_state(d) in FINISHED)
    assert seen[-1] == "scored", f"the page showed {seen}; the server's log:\n{service.log()}"
    assert seen[0] not in FINISHED, seen  # the change happened on screen
    assert browser.execute_script(MARKED), "the team page was reloaded"
    shown = browser.find_element("css selector", f'#submissions tr[data-id="{ident}"]')
    assert "public score" in shown.text
    # The row the script drew links the receipt (downloaded and verified: test_service_hostile).
    link = shown.find_element("css selector", "a.receipt")
    assert link.get_attribute("href") == f"{service.url}/api/submissions/{ident}/receipt"
    assert link.get_attribute("download") == f"receipt-{ident}.json"
    assert severe_console_messages(browser) == []
    screenshot(browser, artifacts / "team.png")

    # The live page, left open while a second submission is scored.
    browser.get(service.url + "/live")
    count = int(
        wait(browser, 30).until(
            lambda d: (t := d.find_element("id", "scored").text).isdigit() and t
        )
    )
    assert count == 1
    assert wait(browser, 30).until(lambda d: d.execute_script(BOARD_BEST)) == ["persistence"]
    browser.execute_script("window.__marker = 1")

    half = half_persistence(persistence_zip, tmp_path / "half.npz")
    with service.client(token) as client:
        sent = upload(client, half, model="half-persistence")
        assert sent.status_code == 201, sent.text
        view = wait_finished(client, sent.json()["id"])
    # Half the baseline scores better on the tiny bundle: the team's new best, so the board's.
    assert view["state"] == "scored" and view["released"]["improved"], view

    wait(browser, 30).until(
        lambda d: d.find_element("id", "scored").text == str(count + 1),
        f"the live page's count did not go from {count} to {count + 1}",
    )
    wait(browser, 30).until(
        lambda d: d.execute_script(BOARD_BEST) == ["half-persistence"],
        "the board frame does not show the new best entry",
    )
    assert browser.execute_script(MARKED), "the live page was reloaded"
    assert severe_console_messages(browser) == []
    screenshot(browser, artifacts / "live.png")
