"""The team page's form with an uploads bucket, in a real browser (headless Chromium through its
chromedriver, `tests/chromium.py`): the page's script asks the server for presigned URLs, sends
the file's parts straight to the bucket (a real SeaweedFS, the page's Content-Security-Policy
allowing its origin), completes the upload, and the submission is scored. The page is never
left (the form is not posted to the server), the browser's own record of its requests shows the
parts PUT to the bucket, and nothing is left in the bucket afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import browser, severe_console_messages, wait  # noqa: F401
from running_service import FINISHED, Service, add_team, wait_finished
from servers import CLUSTER_CREDENTIALS
from service_fixtures import PREFIX, bucket_competition, persistence_zip, tiny_bundle  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The URLs of the requests the page made to another origin than its own.
REQUESTED_ELSEWHERE = """
return performance.getEntriesByType('resource').map(e => e.name)
  .filter(name => !name.startsWith(location.origin));
"""


@pytest.fixture
def service(tiny_bundle, tmp_path, s3_server, s3_bucket, dask_cluster) -> Iterator[Service]:  # noqa: F811
    competition = bucket_competition(tiny_bundle, tmp_path, s3_server, s3_bucket)
    running = Service(competition, scheduler=dask_cluster.address, env=CLUSTER_CREDENTIALS)
    yield running.start()
    running.stop()


def test_the_form_sends_the_file_to_the_bucket_not_through_the_server(
    browser: Any,  # noqa: F811
    service: Service,
    persistence_zip: Path,  # noqa: F811
    s3_server: Any,
    s3_bucket: str,
) -> None:
    from selenium.webdriver.support import expected_conditions as ec

    token = add_team(service.competition, "Bucket Team")
    browser.get(service.url + "/")
    browser.find_element("id", "token").send_keys(token)
    browser.find_element("id", "login").click()
    wait(browser, 30).until(ec.url_to_be(service.url + "/team"))
    browser.execute_script("window.__marker = 1")

    browser.find_element("id", "model").send_keys("persistence")
    browser.find_element("id", "file").send_keys(str(persistence_zip.resolve()))
    browser.find_element("id", "upload").click()
    wait(browser, 60).until(
        lambda d: (
            d.find_element("id", "upload-state").text in ("received", "")
            or "error" in (d.find_element("id", "upload-state").get_attribute("class") or "")
        )
    )
    state = browser.find_element("id", "upload-state")
    assert state.text == "received", f"{state.text!r}; the server's log:\n{service.log()}"
    assert browser.execute_script("return window.__marker === 1"), "the page was left"

    requested = browser.execute_script(REQUESTED_ELSEWHERE)
    bucket = s3_bucket.removeprefix("s3://")
    parts = [url for url in requested if url.startswith(f"{s3_server.endpoint_url}/{bucket}/")]
    assert parts and all(f"/{PREFIX}/incoming/" in u and "partNumber=1" in u for u in parts)

    # The id is read inside the wait: the page re-renders its rows as the state changes.
    ident = wait(browser, 30).until(
        lambda d: d.find_element("css selector", "#submissions tr[data-id]").get_attribute(
            "data-id"
        )
    )
    with service.client(token) as client:
        view = wait_finished(client, ident)
    assert view["state"] == "scored", view
    wait(browser, 30).until(
        lambda d: (
            d.find_element("css selector", f'#submissions tr[data-id="{ident}"]')
            .find_elements("css selector", "td")[3]
            .text
            in FINISHED
        )
    )
    assert severe_console_messages(browser) == []
    fs = s3_server.filesystem()
    fs.invalidate_cache()
    assert fs.find(bucket) == []  # the object was taken in and deleted
    assert fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", []) == []
