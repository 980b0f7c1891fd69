"""Debian's headless Chromium driven through its chromedriver (Selenium), shared by the browser
tests: the `browser` fixture, whole-page screenshots, the console's severe messages, and the
folder screenshots are saved under (`test-artifacts/`, or $SEISCTF_TEST_ARTIFACTS).

`make test` installs Chromium (`chromium`, `chromium-driver`) with apt-get, and stops when it
cannot. Without them the browser tests fail, saying what to install; `-m "not browser"` leaves
them out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
ARTIFACTS = Path(
    os.environ.get("SEISCTF_TEST_ARTIFACTS", Path(__file__).parents[1] / "test-artifacts")
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium (a Selenium `webdriver.Chrome`) keeping the console's messages."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver "
            "(`make test` does, with apt-get), or leave the browser tests out with "
            '-m "not browser"'
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for drivers online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in CHROMIUM_ARGS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait(driver: Any, timeout_s: float) -> Any:
    """A `WebDriverWait` polling every 0.2 s that looks again when an element it found was
    replaced meanwhile (`StaleElementReferenceException`): the live pages re-render their rows
    as a submission's state changes, between a lookup and the read of its text."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout_s, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException,))  # fmt: skip


def replaced(element: Any) -> Any:
    """A wait condition: `element` is gone from the page (the page was replaced). Chromedriver
    says so by `StaleElementReferenceException`, or at times by an "unknown error" that the node
    "does not belong to the document" (which selenium's `staleness_of` lets through)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def gone(_driver: Any) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise
        return False

    return gone


def screenshot(driver: Any, path: Path) -> None:
    """The whole page: the window grown to the document's height first."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(height + 40, 12000))
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    assert path.stat().st_size > 10_000


def severe_console_messages(driver: Any) -> list[str]:
    """The console's SEVERE messages since the last call (errors, CSP violations)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
