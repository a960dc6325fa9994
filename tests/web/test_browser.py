"""The dashboard in a real browser: headless Chromium through Selenium, against uvicorn on a free port.

Needs Debian's ``chromium`` and ``chromium-driver`` (.ci/run installs them); Selenium is pointed
at them, never left to download a browser. Without them the tests skip, and under CI fail.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from alkstore import AsyncStore, open_async
from alkstore.adapters.web import create_app
from alkstore.adapters.web._views import instant
from alkstore.display import minute_of
from alkstore.engine import NewJob, ThroughputRecord, WorkerRecord
from tests.support import PATIENCE, under_ci
from tests.web._seed import HOSTILE, LEADER, Seeded, seed

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@dataclass
class Live:
    """The dashboard served by uvicorn in a thread, over a seeded memory store on that thread's loop."""

    url: str
    store: AsyncStore
    loop: asyncio.AbstractEventLoop
    seeded: Seeded

    def call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(PATIENCE)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    opened: dict[str, Any] = {}

    async def open_store() -> AsyncStore:
        store = await open_async("memory://")
        opened.update(store=store, loop=asyncio.get_running_loop(), seeded=await seed(store))
        return store

    server = uvicorn.Server(uvicorn.Config(create_app(open_store), log_level="warning", lifespan="on"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + PATIENCE
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it started"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Live(f"http://127.0.0.1:{port}", opened["store"], opened["loop"], opened["seeded"])
    finally:
        server.should_exit = True
        thread.join(PATIENCE)
        sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def chrome(*, javascript: bool = True, resolve: str | None = None) -> Any:
    """Headless Chromium from Debian's packages, its console log kept (JavaScript off if asked; with
    ``resolve``, that name resolves to 127.0.0.1, as a rebound name would)."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        reason = f"no {' or '.join(missing)} (apt-get install chromium chromium-driver)"
        if under_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    if resolve is not None:
        options.add_argument(f"--host-resolver-rules=MAP {resolve} 127.0.0.1")
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(PATIENCE)
    return driver


def shows(driver: Any, locator: tuple[str, str], text: str) -> None:
    """Wait until the element at ``locator`` contains ``text``, through the navigation a click started.

    Read while the old page is being replaced, an element can go stale or, in ChromeDriver, answer
    "Node with given id does not belong to the document" (a plain ``WebDriverException``): both
    mean "not yet". Any other error is raised.
    """

    def present(driver: Any) -> bool:
        try:
            return text in driver.find_element(*locator).text
        except StaleElementReferenceException:
            return False
        except WebDriverException as exc:
            if "does not belong to the document" in (exc.msg or ""):
                return False
            raise

    WebDriverWait(driver, PATIENCE).until(present)


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] in {"SEVERE", "ERROR"}]


def no_alert(driver: Any) -> bool:
    try:
        driver.switch_to.alert  # noqa: B018 - raises when no alert is open
    except NoAlertPresentException:
        return True
    return False


def test_the_overview_shows_the_queues_leader_and_workers_and_refreshes_in_place(live: Live, browser: Any) -> None:
    browser.get(live.url + "/")
    assert browser.title == "Overview · alkstore"
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="emails"]')
    assert row.find_element(By.CSS_SELECTOR, "td.ready").text == "1"
    assert row.find_element(By.CSS_SELECTOR, "td.dead").text == "1"
    assert LEADER in browser.find_element(By.ID, "leader").text
    assert "1/8" in browser.find_element(By.CSS_SELECTOR, 'tr[data-worker="web-1:4242"]').text
    assert browser.find_element(By.ID, "live").get_attribute("data-live") == "polling"
    browser.execute_script("window.notReloaded = true;")
    live.call(live.store.queue("emails").enqueue_many([{"n": 1}, {"n": 2}]))
    ready = (By.CSS_SELECTOR, 'tr[data-queue="emails"] td.ready')
    # The fragment is swapped in under the wait's feet: a stale element is just asked for again.
    WebDriverWait(browser, PATIENCE, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda driver: driver.find_element(*ready).text == "3", "the overview never showed the new jobs"
    )
    assert browser.execute_script("return window.notReloaded === true;"), "the page reloaded instead of refreshing"
    assert console_errors(browser) == []


def test_a_queue_pages_counts_refresh_in_place(live: Live, browser: Any) -> None:
    queue = live.store.queue("counted")
    live.call(queue.enqueue({"n": 0}))
    browser.get(live.url + "/queues/counted")
    counts = (By.CSS_SELECTOR, "#counts .counts")
    assert browser.find_element(*counts).text.startswith("Ready 1 ·")
    assert browser.find_element(By.ID, "counts").get_attribute("data-live") == "polling"
    browser.execute_script("window.notReloaded = true;")
    live.call(queue.enqueue_many([{"n": 1}, {"n": 2}]))
    WebDriverWait(browser, PATIENCE, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda driver: driver.find_element(*counts).text.startswith("Ready 3 ·"), "the counts never refreshed"
    )
    assert browser.execute_script("return window.notReloaded === true;"), "the page reloaded instead of refreshing"
    assert console_errors(browser) == []


def charted(browser: Any) -> dict[str, tuple[int, int]]:
    """The minutes the overview's chart draws with runs in them: each minute's instant, its done and failed.

    The live fragment may be swapped in while the minutes are read: a stale one means reading again.
    """
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            found = {}
            for minute in browser.find_elements(By.CSS_SELECTOR, "#throughput rect.minute"):
                done, failed = int(minute.get_attribute("data-done")), int(minute.get_attribute("data-failed"))
                if done or failed:
                    found[minute.get_attribute("data-minute")] = (done, failed)
            return found
        except StaleElementReferenceException:
            if time.monotonic() > deadline:
                raise


def stored(live: Live) -> dict[str, tuple[int, int]]:
    """What ``throughput()`` says of the last hour, summed over the queues per minute as the chart shows it."""
    sums: dict[str, tuple[int, int]] = {}
    for count in live.call(live.store.throughput()):
        done, failed = sums.get(instant(count.minute), (0, 0))
        sums[instant(count.minute)] = (done + count.done, failed + count.failed)
    return sums


def test_the_throughput_chart_shows_the_stored_hour_at_once_and_takes_new_counts_in_place(
    live: Live, browser: Any
) -> None:
    # Minutes well inside the hour, so a minute turning over between the page and the store changes nothing.
    earlier = minute_of(live.store.clock.now()) - timedelta(minutes=30)
    later = earlier + timedelta(minutes=25)
    worker = WorkerRecord("charting", "web-9", 9, ("emails",), 2, earlier, live.store.clock.now())
    counts = [ThroughputRecord("emails", earlier, 40, 3), ThroughputRecord("reports", earlier, 2, 0)]
    live.call(live.store.engine.record_worker(worker, counts))
    browser.get(live.url + "/")
    assert charted(browser) == stored(live) == {instant(earlier): (42, 3)}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#throughput rect.minute")) == 60
    browser.execute_script("window.notReloaded = true;")
    live.call(live.store.engine.record_worker(worker, [ThroughputRecord("emails", later, 5, 1)]))
    WebDriverWait(browser, PATIENCE, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda driver: instant(later) in charted(driver), "the chart never showed the new minute"
    )
    assert charted(browser) == stored(live) == {instant(earlier): (42, 3), instant(later): (5, 1)}
    assert browser.execute_script("return window.notReloaded === true;"), "the page reloaded instead of refreshing"
    assert console_errors(browser) == []


def test_a_hostile_payload_shows_as_text_and_runs_nothing(live: Live, browser: Any) -> None:
    browser.get(f"{live.url}/jobs/{live.seeded.ids['hostile']}")
    payload = browser.find_element(By.ID, "payload")
    assert HOSTILE[0] in payload.text
    assert HOSTILE[1] in payload.text
    assert HOSTILE[0] in browser.find_element(By.ID, "error").text
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    assert no_alert(browser)
    browser.get(live.url + "/dead")
    section = browser.find_element(By.CSS_SELECTOR, 'section[data-queue="hostile"]')
    assert HOSTILE[1] not in section.text, "a long error is folded"
    section.find_element(By.CSS_SELECTOR, "details.sample summary").click()
    assert HOSTILE[1] in section.find_element(By.CSS_SELECTOR, "details.sample pre").text
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    assert no_alert(browser)
    assert console_errors(browser) == []


def test_every_page_reads_without_console_errors(live: Live, browser: Any) -> None:
    pages = {
        "/queues/emails?state=dead": "550 mailbox unavailable",
        f"/jobs/{live.seeded.ids['raw']}": "2 bytes: b'\\xff\\x00'",
        "/schedules": "nightly-digest",
        "/dead": "Requeue all dead jobs of emails",
    }
    for path, expected in pages.items():
        browser.get(live.url + path)
        assert expected in browser.find_element(By.TAG_NAME, "main").text, path
    assert console_errors(browser) == []


def test_requeueing_from_the_dead_letters_page_brings_the_job_back(live: Live, browser: Any) -> None:
    dead = live.seeded.ids["dead"]
    browser.get(f"{live.url}/dead")
    browser.find_element(By.CSS_SELECTOR, f'form[action$="/jobs/{dead}/requeue"] button').click()
    done = f"Job {dead} is back on its queue."
    shows(browser, (By.TAG_NAME, "main"), done)
    job = live.call(live.store.get_job(dead))
    assert job is not None
    assert job.state.value == "pending"
    assert console_errors(browser) == []


def test_with_javascript_off_every_page_still_reads(live: Live) -> None:
    driver = chrome(javascript=False)
    try:
        driver.get(live.url + "/")
        assert driver.find_element(By.ID, "live").get_attribute("data-live") is None  # the script never ran
        row = driver.find_element(By.CSS_SELECTOR, 'tr[data-queue="emails"]')
        assert row.find_element(By.CSS_SELECTOR, "td.delayed").text == "1"
        assert LEADER in driver.find_element(By.ID, "leader").text
        driver.get(f"{live.url}/jobs/{live.seeded.ids['hostile']}")
        assert HOSTILE[0] in driver.find_element(By.ID, "payload").text
        driver.get(live.url + "/schedules")
        assert "@every 1d" in driver.find_element(By.TAG_NAME, "main").text
    finally:
        driver.quit()


def test_without_chromium_the_browser_tests_fail_under_ci_and_skip_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tests.web.test_browser as module

    monkeypatch.setattr(module, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no-chromium"):
        chrome()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium chromium-driver"):
        chrome()


def test_purging_a_queues_dead_asks_first_and_going_back_deletes_nothing(live: Live, browser: Any) -> None:
    browser.get(live.url + "/dead")
    browser.find_element(By.CSS_SELECTOR, 'section[data-queue="hostile"] button[value="purge"]').click()
    shows(browser, (By.ID, "question"), "Delete 1 dead jobs of hostile? This cannot be undone.")
    assert live.call(live.store.queue_stats("hostile"))[0].dead == 1, "asking deletes nothing"
    browser.find_element(By.LINK_TEXT, "Back").click()
    shows(browser, (By.TAG_NAME, "h1"), "Queue hostile")
    assert live.call(live.store.queue_stats("hostile"))[0].dead == 1
    assert console_errors(browser) == []


def test_pausing_a_queue_from_its_page_shows_it_paused_and_resuming_undoes_it(live: Live, browser: Any) -> None:
    live.call(live.store.queue("browsed").enqueue({"n": 1}))
    browser.get(live.url + "/queues/browsed")
    browser.find_element(By.CSS_SELECTOR, 'form[action$="/actions/pause/browsed"] button').click()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Paused browsed")
    assert live.call(live.store.queue_stats("browsed"))[0].paused
    browser.find_element(By.LINK_TEXT, "Back").click()
    badge = WebDriverWait(browser, PATIENCE).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "h1 .badge.paused"))
    )
    assert badge.text == "paused"
    browser.find_element(By.CSS_SELECTOR, 'form[action$="/actions/resume/browsed"] button').click()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Resumed browsed")
    assert not live.call(live.store.queue_stats("browsed"))[0].paused
    assert console_errors(browser) == []


def test_cancelling_a_running_job_says_cancelling(live: Live, browser: Any) -> None:
    queue = live.store.queue("long-runs")
    job_id = live.call(queue.enqueue({"n": 1}))
    assert live.call(queue.claim("w-browser")) is not None
    browser.get(live.url + "/queues/long-runs?state=running")
    button = (By.CSS_SELECTOR, f'tr[data-job="{job_id}"] td.cancel button')
    browser.find_element(*button).click()
    question = WebDriverWait(browser, PATIENCE).until(expected_conditions.alert_is_present())
    assert question.text == f"Cancel job {job_id}? Its worker is asked to stop it."
    question.dismiss()
    assert live.call(live.store.get_job(job_id)).cancel_requested is False, "a dismissed question cancels nothing"
    browser.find_element(*button).click()
    WebDriverWait(browser, PATIENCE).until(expected_conditions.alert_is_present()).accept()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "is running: cancelling")
    browser.get(live.url + "/queues/long-runs?state=running")
    assert browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{job_id}"] td.cancel').text == "cancelling"
    job = live.call(live.store.get_job(job_id))
    assert job is not None
    assert job.cancel_requested
    assert console_errors(browser) == []


def test_a_schedule_with_a_bad_spec_is_refused_by_name_and_a_good_one_is_added(live: Live, browser: Any) -> None:
    browser.get(live.url + "/schedules")
    form = browser.find_element(By.CSS_SELECTOR, "form.add")
    form.find_element(By.NAME, "name").send_keys("from-browser")
    form.find_element(By.NAME, "spec").send_keys("every 5 minutes")
    form.find_element(By.NAME, "queue").send_keys("browsed")
    form.find_element(By.NAME, "payload").send_keys('{"from": "browser"}')
    form.find_element(By.CSS_SELECTOR, "button").click()
    shown = expected_conditions.presence_of_element_located((By.ID, "problem"))
    problem = WebDriverWait(browser, PATIENCE).until(shown)
    assert "InvalidSpec" in problem.text
    assert "from-browser" not in [s.name for s in live.call(live.store.schedules())]
    (refusal,) = console_errors(browser)  # the refusal is a 400, which the console notes
    assert "/actions/schedules" in refusal["message"]
    assert "400" in refusal["message"]
    spec = browser.find_element(By.CSS_SELECTOR, 'form.add [name="spec"]')
    spec.clear()
    spec.send_keys("@every 5m")
    browser.find_element(By.CSS_SELECTOR, "form.add button").click()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Added schedule from-browser")
    added = {s.name: s for s in live.call(live.store.schedules())}["from-browser"]
    assert (added.spec, added.queue, added.payload) == ("@every 5m", "browsed", {"from": "browser"})
    browser.get(live.url + "/schedules")
    fire = 'tr[data-schedule="from-browser"] form[action$="/fire/from-browser"] button'
    browser.find_element(By.CSS_SELECTOR, fire).click()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Fired from-browser now")
    browser.find_element(By.LINK_TEXT, "Back").click()  # to the fired job's page
    state = WebDriverWait(browser, PATIENCE).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "dd.state"))
    )
    assert state.text == "pending"
    assert browser.find_element(By.ID, "payload").text.replace(" ", "").replace("\n", "") == '{"from":"browser"}'
    assert console_errors(browser) == []


def test_requeueing_a_selection_of_dead_jobs_goes_through_a_confirmation(live: Live, browser: Any) -> None:
    queue = live.store.queue("selected")
    ids = live.call(queue.enqueue_many([1, 2, 3]))
    for n in range(3):
        job = live.call(queue.claim(f"w{n}"))
        assert job is not None
        live.call(job.fail("quota exceeded"))
    browser.get(live.url + "/dead")
    for job_id in ids[:2]:
        browser.find_element(By.CSS_SELECTOR, f'input[type="checkbox"][value="{job_id}"]').click()
    browser.find_element(By.CSS_SELECTOR, '#bulk button[value="requeue"]').click()
    question = WebDriverWait(browser, PATIENCE).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "p.question"))
    )
    assert question.text == "Requeue 2 dead jobs (the jobs ticked below)?"
    assert live.call(live.store.queue_stats("selected"))[0].dead == 3
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Requeued 2 jobs.")
    (stats,) = live.call(live.store.queue_stats("selected"))
    assert (stats.ready, stats.dead) == (2, 1)
    assert console_errors(browser) == []


def test_the_payload_filter_narrows_a_queue_page(live: Live, browser: Any) -> None:
    ids = live.call(live.store.queue("customers").enqueue_many([{"customer": 42}, {"customer": 7}, {"customer": 42}]))
    browser.get(live.url + "/queues/customers")
    field = browser.find_element(By.CSS_SELECTOR, 'form.filter [name="contains"]')
    field.send_keys('{"customer": 42}')
    browser.find_element(By.CSS_SELECTOR, "form.filter button").click()
    shows(browser, (By.CSS_SELECTOR, "p.order"), "whose payload contains")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-job]")
    assert [int(row.get_attribute("data-job")) for row in rows] == [ids[0], ids[2]]
    assert console_errors(browser) == []


def test_the_task_filter_narrows_a_queue_page_and_the_tabs_keep_it(live: Live, browser: Any) -> None:
    now = live.store.clock.now()
    tasks = ["receipt", "invoice", "receipt", None, "receipt"]
    jobs = [NewJob("billing", b'{"n": 1}', 0, now, None, 3, task=task) for task in tasks]
    live.call(live.store.engine.enqueue(jobs, now))
    browser.get(live.url + "/queues/billing")
    browser.find_element(By.CSS_SELECTOR, 'form.filter [name="task"]').send_keys("receipt")
    browser.find_element(By.CSS_SELECTOR, "form.filter button").click()
    shows(browser, (By.CSS_SELECTOR, "p.order"), "of task receipt")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-job]")
    expected = live.call(live.store.jobs("billing", task="receipt")).jobs
    assert [int(row.get_attribute("data-job")) for row in rows] == [job.id for job in expected]
    assert {row.find_element(By.CSS_SELECTOR, "td.task").text for row in rows} == {"receipt"}
    assert len(expected) == 3
    browser.find_element(By.LINK_TEXT, "Dead").click()
    shows(browser, (By.CSS_SELECTOR, "p.order"), "Dead jobs of task receipt")
    assert browser.find_element(By.CSS_SELECTOR, 'form.filter [name="task"]').get_attribute("value") == "receipt"
    assert console_errors(browser) == []


def test_the_order_toggle_turns_a_listing_round(live: Live, browser: Any) -> None:
    ids = live.call(live.store.queue("toggled").enqueue_many([{"n": n} for n in range(3)]))
    browser.get(live.url + "/queues/toggled")
    browser.find_element(By.CSS_SELECTOR, "a.toggle").click()
    shows(browser, (By.CSS_SELECTOR, "p.order"), "turned round")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-job]")
    assert [int(row.get_attribute("data-job")) for row in rows] == list(reversed(ids))
    assert console_errors(browser) == []


def test_a_name_rebound_to_loopback_gets_a_refusal_and_no_page(live: Live) -> None:
    port = live.url.rsplit(":", 1)[1]
    driver = chrome(resolve="rebound.test")
    try:
        driver.get(f"http://rebound.test:{port}/dead")
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "does not answer to the host 'rebound.test:" in body
        assert driver.find_elements(By.TAG_NAME, "form") == []
        assert "Dead letters" not in driver.page_source
        driver.get(f"{live.url}/dead")  # the same browser, by the dashboard's own name, reads it
        assert driver.find_element(By.TAG_NAME, "h1").text == "Dead letters"
        assert driver.find_elements(By.TAG_NAME, "form") != []
    finally:
        driver.quit()


@contextmanager
def other_site(page: str) -> Iterator[str]:
    """Serve ``page`` (HTML) at ``/`` from another port of 127.0.0.1 while the block runs; yield its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(PATIENCE)


def test_a_page_on_another_port_that_plants_the_cookie_cannot_pause_a_queue(live: Live) -> None:
    live.call(live.store.queue("planted").enqueue({"n": 1}))
    attack = f"""<!doctype html><title>attack</title>
<form method="post" action="{live.url}/actions/pause/planted"><input name="csrf_token" value="planted"></form>
<script>document.cookie = "alkstore_csrf=planted; path=/"; document.forms[0].submit();</script>"""
    driver = chrome()
    try:
        with other_site(attack) as url:
            driver.get(url)
            WebDriverWait(driver, PATIENCE).until(lambda d: d.current_url.startswith(live.url))
            shows(driver, (By.TAG_NAME, "main"), "not from this dashboard's pages")
        assert driver.find_element(By.TAG_NAME, "h1").text == "403"
        assert driver.get_cookie("alkstore_csrf")["value"] == "planted"  # the planted cookie was sent
        assert not live.call(live.store.queue_stats("planted"))[0].paused
        driver.get(f"{live.url}/queues/planted")  # the dashboard's own page, under that cookie, acts
        driver.find_element(By.CSS_SELECTOR, 'form[action$="/actions/pause/planted"] button').click()
        shows(driver, (By.CSS_SELECTOR, "p.message"), "Paused planted")
        assert live.call(live.store.queue_stats("planted"))[0].paused
    finally:
        driver.quit()


def test_reloading_the_page_an_action_led_to_repeats_nothing(live: Live, browser: Any) -> None:
    live.call(live.store.schedule("reloaded", "@every 1d", "reloads", {"n": 1}))
    browser.get(live.url + "/schedules")
    browser.find_element(By.CSS_SELECTOR, 'tr[data-schedule="reloaded"] form[action$="/fire/reloaded"] button').click()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Fired reloaded now")
    assert "/done?" in browser.current_url
    assert live.call(live.store.queue_stats("reloads"))[0].ready == 1
    browser.refresh()
    shows(browser, (By.CSS_SELECTOR, "p.message"), "Fired reloaded now")
    assert no_alert(browser)  # no "resubmit the form?" question: the page is a GET
    assert live.call(live.store.queue_stats("reloads"))[0].ready == 1
    assert console_errors(browser) == []


def test_a_right_to_left_override_shows_spelled_out_not_reversing_the_text(live: Live, browser: Any) -> None:
    queue = live.store.queue("spelled")
    job_id = live.call(queue.enqueue({"file": "invoice\u202efdp.exe"}))
    browser.get(f"{live.url}/jobs/{job_id}")
    payload = browser.find_element(By.ID, "payload").text
    assert "invoice<U+202E>fdp.exe" in payload  # read as written, not as "invoiceexe.pdf"
    assert "\u202e" not in browser.page_source
    assert console_errors(browser) == []
