"""The live pages in a real browser (headless Chromium, as ``test_browser``): the dead letters, the workers,
the locks and an outbox page each take a change in the store from their fragment, without a reload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from alkstore import EnqueueOpts
from alkstore.engine import WorkerRecord
from tests.support import PATIENCE
from tests.web import test_browser
from tests.web.test_browser import Live, console_errors

pytestmark = pytest.mark.slow

#: ``test_browser``'s fixtures: a seeded memory store served by uvicorn, and one headless Chromium.
live = test_browser.live
browser = test_browser.browser


def texts(driver: Any, selector: str) -> list[str]:
    """The text of each element ``selector`` finds now."""
    return [element.text for element in driver.find_elements(By.CSS_SELECTOR, selector)]


def refreshed(browser: Any, region: str, shown: Callable[[Any], bool], what: str) -> None:
    """Wait (generously) until ``shown`` holds of the page, then check the page was not reloaded to get
    there and the region is the one polling (marked by the page's script)."""
    assert browser.find_element(By.ID, region).get_attribute("data-live") == "polling"
    WebDriverWait(browser, PATIENCE, ignored_exceptions=[StaleElementReferenceException]).until(shown, what)
    assert browser.execute_script("return window.notReloaded === true;"), "the page reloaded instead of refreshing"
    assert console_errors(browser) == []


def load(live: Live, browser: Any, path: str) -> None:
    browser.get(live.url + path)
    browser.execute_script("window.notReloaded = true;")


def kill(live: Live, queue: str, error: str) -> None:
    """A job of ``queue`` enqueued, claimed and failed for good: one more dead letter."""
    jobs = live.store.queue(queue)
    live.call(jobs.enqueue({"n": 1}, EnqueueOpts(max_attempts=1)))
    job = live.call(jobs.claim("browser-killer"))
    assert job is not None
    live.call(job.fail(error))


def test_the_dead_letters_page_counts_a_new_death_in_place(live: Live, browser: Any) -> None:
    kill(live, "dying", "first")
    load(live, browser, "/dead")
    count = 'span.dead[data-queue="dying"]'
    assert texts(browser, count) == ["1"]
    kill(live, "dying", "second")
    kill(live, "dying-too", "another queue's")
    refreshed(browser, "dead-counts", lambda d: texts(d, count) == ["2"], "the dead count never refreshed")
    assert texts(browser, 'span.dead[data-queue="dying-too"]') == ["1"], "a queue that had none shows up"


def test_the_workers_page_lists_a_worker_that_started_in_place(live: Live, browser: Any) -> None:
    load(live, browser, "/workers")
    arrived = 'tr[data-worker="arrived:7"]'
    assert texts(browser, arrived) == []
    now = live.store.clock.now()
    live.call(live.store.engine.record_worker(WorkerRecord("arrived:7", "host-7", 7, ("emails",), 3, now, now)))
    refreshed(browser, "workers-live", lambda d: len(texts(d, arrived)) == 1, "the new worker never showed")
    assert "host-7" in texts(browser, arrived)[0]


def test_the_locks_page_lists_a_lock_taken_in_place(live: Live, browser: Any) -> None:
    load(live, browser, "/locks")
    held = 'tr[data-lock="nightly-export"] td.owner'
    assert texts(browser, held) == []
    assert live.call(live.store.try_lock("nightly-export", "exporter-1", 120)) is not None
    refreshed(browser, "held", lambda d: texts(d, held) == ["exporter-1"], "the new lock never showed")


def test_an_outbox_page_counts_new_messages_and_a_courier_in_place(live: Live, browser: Any) -> None:
    outbox = live.store.outbox("browser-hooks")
    live.call(outbox.enqueue({"event": "one"}))
    load(live, browser, "/outboxes/browser-hooks")
    counts = "#counts .counts"
    assert texts(browser, counts)[0].startswith("Ready 1 ·")
    assert texts(browser, counts)[0].endswith("no courier live")
    live.call(outbox.enqueue({"event": "two"}))
    now = live.store.clock.now()
    live.call(live.store.engine.record_worker(WorkerRecord("courier:9", "host-9", 9, (outbox.queue,), 1, now, now)))
    refreshed(
        browser,
        "counts",
        lambda d: texts(d, counts)[0].startswith("Ready 2 ·") and texts(d, counts)[0].endswith("1 courier live"),
        "the outbox's counts never refreshed",
    )
