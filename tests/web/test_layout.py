"""Every page at a phone's width (390 px) and a desktop's (1280 px), over hostile content, in headless Chromium.

A page passes when its body never scrolls sideways (``scrollWidth <= innerWidth``): what is wider
than the screen (a table, a payload) scrolls inside its own box. Each page's screenshot at each
width is saved under ``$ALKSTORE_SCREENSHOTS`` (default: the test's temporary directory).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import uvicorn
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from alkstore import AsyncStore, JobPhase, open_async
from alkstore.adapters.web import create_app
from alkstore.adapters.web._bulk import Run, signature
from alkstore.adapters.web._views import group_key
from tests.support import PATIENCE
from tests.web._flow import seed_flow
from tests.web._hostile import HOSTILE_TASK, LONG_NAME, WIDE, seed_hostile
from tests.web._seed import seed
from tests.web.test_browser import chrome, console_errors

pytestmark = pytest.mark.slow

WIDTHS = (390, 1280)
#: The site's secret, so a test can sign a bulk run's progress page as the dashboard would.
SECRET = "layout-secret"
#: A payload filter as long as a form sends, with markup and U+202E, unbroken.
HOSTILE_FILTER = '{"note": "<b>x</b>\u202e' + "y" * 3_000 + '"}'


@dataclass
class Site:
    url: str
    ids: dict[str, int]


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    ids: dict[str, int] = {}

    async def open_store() -> AsyncStore:
        store = await open_async("memory://")
        ids.update((await seed(store)).ids)
        ids.update(await seed_hostile(store))
        ids.update(await seed_flow(store))
        return store

    app = create_app(open_store, secret=SECRET)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + PATIENCE
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it started"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Site(f"http://127.0.0.1:{sock.getsockname()[1]}", ids)
    finally:
        server.should_exit = True
        thread.join(PATIENCE)
        sock.close()


def pages(site: Site) -> dict[str, str]:
    """Every page the dashboard serves on a GET, by a name for its screenshot."""
    ids = site.ids
    long = LONG_NAME
    found = {
        "overview": "/",
        "dead": "/dead",
        "schedules": "/schedules",
        "workers": "/workers",
        "locks": "/locks",
        "actions": "/actions",
        "charts-day": f"/charts?queue={LONG_NAME}&range=24h",
        "charts-task-week": "/charts?" + urlencode({"queue": LONG_NAME, "task": HOSTILE_TASK, "range": "7d"}),
        "charts-tasks-hour": f"/charts?queue={LONG_NAME}",
        "dead-wide": f"/dead?queue={WIDE}",
        "results": f"/results/{WIDE}",
        "outbox": "/outboxes/" + "o" * 100,
        "dead-group": f"/dead/group?queue={WIDE}&key={group_key(None, 'KeyError', 'order # not found in shard <hex>')}",
        "job-huge-error": f"/jobs/{ids['huge']}",
        "job-rtl-deep": f"/jobs/{ids['rtl']}",
        "job-running": f"/jobs/{ids['running']}",
        "job-workflow": f"/jobs/{ids['left']}",
        "job-steps": f"/jobs/{ids['stepped']}",
        "graph": f"/jobs/{ids['bottom']}/graph",
        "graph-dead": f"/jobs/{ids['lost']}/graph",
        "job-raw": f"/jobs/{ids['raw']}",
        "job-missing": "/jobs/999999999",
        "not-found": "/nowhere",
        "queue-long-name": f"/queues/{long}",
        "queue-long-running": f"/queues/{long}?state=running",
    }
    run = Run("cancel", LONG_NAME, JobPhase.READY, LONG_NAME, HOSTILE_FILTER, None, "c" * 300, 123_456, 987_654)
    found["bulk-progress"] = "/progress?" + urlencode({**run.fields(), "sig": signature(SECRET.encode(), run)})
    for state in ("ready", "delayed", "waiting", "running", "dead"):
        found[f"queue-wide-{state}"] = f"/queues/{WIDE}?state={state}"
    found["queue-emails-dead"] = "/queues/emails?state=dead"
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways_at_a_phones_or_a_desktops_width(
    site: Site, width: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = Path(os.environ.get("ALKSTORE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    driver = chrome()
    try:
        driver.set_window_size(width, 900)
        inner = driver.execute_script("return window.innerWidth;")
        assert abs(inner - width) <= 20, f"the window is {inner} px wide, not about {width}"
        overflowing = {}
        for name, path in pages(site).items():
            driver.get(site.url + path)
            # a live page may replace its content while it is read: read it again until it holds still
            WebDriverWait(driver, PATIENCE, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: d.find_element(By.TAG_NAME, "main").text, path
            )
            wide, inner = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
            height = driver.execute_script("return document.documentElement.scrollHeight;")
            driver.set_window_size(width, min(max(height + 140, 900), 16_000))
            driver.save_screenshot(str(folder / f"{name}-{width}.png"))
            driver.set_window_size(width, 900)
            if wide > inner:
                overflowing[path] = wide
        assert overflowing == {}, f"pages wider than {inner} px at {width} px"
        # (the pages that answer 404 on purpose log their status: only what a script said counts)
        assert [entry for entry in console_errors(driver) if entry["source"] != "network"] == []
    finally:
        driver.quit()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_pages_an_action_answers_with_fit_too(
    site: Site, width: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A bulk action's confirmation over a hostile filter, and a settings form refused over a 100 KB value: the
    pages a POST answers with, reached by submitting the forms (nothing is acted on)."""
    folder = Path(os.environ.get("ALKSTORE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    driver = chrome()
    try:
        driver.set_window_size(width, 900)
        driver.get(f"{site.url}/queues/{LONG_NAME}?" + urlencode({"state": "ready", "contains": '{"n": 2}'}))
        driver.execute_script(
            "document.querySelector('form.bulk-filter input[name=contains]').value = arguments[0];", HOSTILE_FILTER
        )
        driver.find_element(By.CSS_SELECTOR, "form.bulk-filter button[value=cancel]").click()
        shown = _after_navigation(driver, "question")
        assert shown.startswith("Cancel 0 ready jobs of " + LONG_NAME), shown[:200]
        overflowing = {"confirm": driver.execute_script(_WIDE)}
        driver.save_screenshot(str(folder / f"bulk-confirm-{width}.png"))
        driver.get(f"{site.url}/queues/{quote(WIDE)}")
        driver.find_element(By.CSS_SELECTOR, "#settings summary").click()
        driver.execute_script(
            "document.querySelector('#settings input[name=priority]').value = arguments[0];",
            "<script>x</script>\u202e" + "9" * 100_000,
        )
        driver.find_element(By.CSS_SELECTOR, "#settings button[type=submit]").click()
        assert "is not a whole number" in _after_navigation(driver, "settings-problem")
        overflowing["settings-refused"] = driver.execute_script(_WIDE)
        driver.save_screenshot(str(folder / f"settings-refused-{width}.png"))
        assert overflowing == {"confirm": False, "settings-refused": False}
    finally:
        driver.quit()


def _after_navigation(driver: Any, element_id: str) -> str:
    """The text of the element ``element_id`` of the page a click navigated to, once that page has it."""
    found: str = WebDriverWait(driver, PATIENCE, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda d: d.find_elements(By.ID, element_id) and d.find_element(By.ID, element_id).text
    )
    return found


#: Whether the page's body is wider than the window.
_WIDE = "return document.documentElement.scrollWidth > window.innerWidth;"
