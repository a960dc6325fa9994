"""What each page shows, read against the store it shows (on every engine)."""

from __future__ import annotations

import html
import re
from functools import partial
from urllib.parse import urlencode

import pytest

from alkstore import EnqueueOpts, JobPhase, RateLimit
from alkstore.adapters.web import DEAD_GROUP_PAGE, PAGE_SIZE
from alkstore.engine import NewJob, WorkerRecord
from tests.web._seed import HOSTILE, LEADER, seed
from tests.web.conftest import Served


def text(page: str) -> str:
    """A page's text as a reader sees it: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_overview_shows_every_queues_counts_the_leader_and_the_workers(served: Served) -> None:
    served.call(seed, served.store)
    stats = {s.queue: s for s in served.call(served.store.queue_stats)}
    page = served.client().get("/")
    assert page.status_code == 200
    shown = text(page.text)
    emails = stats["emails"]
    assert (emails.ready, emails.delayed, emails.running, emails.dead) == (1, 1, 1, 1)
    row = re.search(r'<tr data-queue="emails">(.*?)</tr>', page.text, re.S)
    assert row is not None
    assert text(row.group(1)).split()[:5] == ["emails", "1", "1", "1", "1"]
    assert {"emails", "hostile", "reports"} <= set(re.findall(r'data-queue="([^"]+)"', page.text))
    assert f"Leader {LEADER}" in shown
    worker = re.search(r'<tr data-worker="web-1:4242">(.*?)</tr>', page.text, re.S)
    assert worker is not None
    assert "1/8 1200 7" in text(worker.group(1))
    assert "emails, reports" in text(worker.group(1))


def test_the_overview_marks_an_outboxs_queue_with_its_couriers_or_none(served: Served) -> None:
    webhooks, audit = served.store.outbox("webhooks"), served.store.outbox("audit")
    served.call(webhooks.enqueue, {"event": "order.created"})
    served.call(audit.enqueue, {"event": "login"})
    now = served.store.clock.now()
    worker = WorkerRecord("web-1:1", "web-1", 1, (webhooks.queue,), 2, now, now)
    served.call(served.store.engine.record_worker, worker)
    page = served.client().get("/").text

    def badge(queue: str) -> str:
        row = re.search(rf'<tr data-queue="{re.escape(queue)}">(.*?)</tr>', page, re.S)
        assert row is not None
        found = re.search(r'<a class="badge outbox[^"]*"[^>]*>(.*?)</a>', row.group(1))
        assert found is not None
        return text(found.group(0))

    assert badge(webhooks.queue) == "outbox webhooks · 1 courier"
    assert badge(audit.queue) == "outbox audit · no courier"
    assert 'class="badge outbox idle"' in page


def test_the_overview_fragment_is_the_live_part_alone(served: Served) -> None:
    served.call(seed, served.store)
    fragment = served.client().get("/fragments/overview")
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert 'data-queue="emails"' in fragment.text
    served.call(served.store.queue("emails").enqueue, {"to": "new@example.com"})
    row = re.search(r'<tr data-queue="emails">(.*?)</tr>', served.client().get("/fragments/overview").text, re.S)
    assert row is not None
    assert text(row.group(1)).split()[1] == "2"


def test_counts_at_the_cap_show_as_at_least_the_cap(served: Served) -> None:
    served.call(served.store.queue("bulk").enqueue_many, [{"n": n} for n in range(5)])
    row = re.search(r'<tr data-queue="bulk">(.*?)</tr>', served.client(cap=3).get("/").text, re.S)
    assert row is not None
    assert re.findall(r'<td class="n ready">([^<]*)</td>', row.group(1)) == ["3+"]
    exact = re.search(r'<tr data-queue="bulk">(.*?)</tr>', served.client(cap=None).get("/").text, re.S)
    assert exact is not None
    capped_page = served.client(cap=3).get("/").text
    (asked,) = re.findall(r'<a href="([^"]+)">Count every job</a>', capped_page)
    counted = served.client(cap=3).get(html.unescape(asked)).text
    row = re.search(r'<tr data-queue="bulk">(.*?)</tr>', counted, re.S)
    assert row is not None
    assert re.findall(r'<td class="n ready">([^<]*)</td>', row.group(1)) == ["5"]
    assert 'data-refresh="/fragments/overview?exact=1"' in counted, "the refreshes count every job too"
    assert re.findall(r'<td class="n ready">([^<]*)</td>', exact.group(1)) == ["5"]


def test_a_queue_with_nothing_ready_shows_no_oldest_ready_age(served: Served) -> None:
    served.call(served.store.queue("later").enqueue, {"n": 1}, EnqueueOpts(delay=3600))
    served.call(served.store.queue("now").enqueue, {"n": 2})
    stats = {s.queue: s for s in served.call(served.store.queue_stats)}
    assert (stats["later"].ready, stats["now"].ready) == (0, 1)
    page = served.client().get("/").text
    lags = dict(re.findall(r'<tr data-queue="([^"]+)">.*?<td class="n lag">([^<]*)</td>', page, re.S))
    assert lags["later"] == "—"
    assert lags["now"] != "—"
    assert "oldest ready —" in text(served.client().get("/queues/later").text)


def test_an_empty_paused_queue_is_on_the_overview_paused_and_its_page_resumes_it(served: Served) -> None:
    served.call(served.store.queue("quiet").pause)
    page = served.client().get("/").text
    row = re.search(r'<tr data-queue="quiet">(.*?)</tr>', page, re.S)
    assert row is not None
    assert text(row.group(1)).split() == ["quiet", "paused", "0", "0", "0", "0", "—"]
    assert "Resume quiet" in text(served.client().get("/queues/quiet").text)


def test_an_empty_store_says_there_is_nothing(served: Served) -> None:
    shown = text(served.client().get("/").text)
    assert "No jobs in any queue." in shown
    assert "No leader: no scheduler holds the lease." in shown
    assert "No workers seen in the last 60 s." in shown
    assert "No dead jobs in any queue." in text(served.client().get("/dead").text)
    assert "No schedules." in text(served.client().get("/schedules").text)


def test_a_queue_page_lists_its_jobs_by_state_a_page_at_a_time(served: Served) -> None:
    ids = served.call(served.store.queue("pages").enqueue_many, [{"n": n} for n in range(PAGE_SIZE + 5)])
    client = served.client()
    first = client.get("/queues/pages")
    assert first.status_code == 200
    expected = served.call(served.store.jobs, "pages", JobPhase.READY)
    listed = [int(i) for i in re.findall(r'<tr data-job="(\d+)">', first.text)]
    assert listed == [job.id for job in expected.jobs][: len(listed)]
    assert len(listed) == PAGE_SIZE
    (following,) = re.findall(r'<a rel="next" href="([^"]+)"', first.text)
    second = client.get(html.unescape(following))
    rest = [int(i) for i in re.findall(r'<tr data-job="(\d+)">', second.text)]
    assert sorted(listed + rest) == sorted(ids)
    assert 'rel="next"' not in second.text
    assert "Ready jobs, in claim order" in text(first.text)


def test_a_queue_page_shows_each_state_and_the_queues_configuration(served: Served) -> None:
    seeded = served.call(seed, served.store)
    served.call(lambda: served.store.queue("emails").configure(max_attempts=7, priority=2))
    client = served.client()
    for state in ("delayed", "running", "dead"):
        page = client.get("/queues/emails", params={"state": state})
        assert [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)] == [seeded.ids[state]], state
    shown = text(client.get("/queues/emails").text)
    assert "Max attempts 7" in shown
    assert "Priority 2" in shown
    assert "Visibility timeout 5m00s" in shown
    assert "Rate limit" not in shown
    rate, key_rate = RateLimit(10, per=1), RateLimit(2, per=60)
    served.call(lambda: served.store.queue("emails").configure(rate=rate, key_rate=key_rate))
    assert "Rate limit 10 starts per 1.0s; 2 per 1m00s per rate key" in text(client.get("/queues/emails").text)
    assert client.get("/queues/emails", params={"state": "sleeping"}).status_code == 404


def test_the_job_page_shows_its_state_attempts_error_traceback_and_lease(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    dead = served.call(served.store.get_job, seeded.ids["dead"])
    assert dead is not None
    assert dead.last_traceback
    shown = text(client.get(f"/jobs/{dead.id}").text)
    assert "State dead" in shown
    assert f"Attempts {dead.attempts} of {dead.max_attempts}" in shown
    assert "550 mailbox unavailable" in shown
    assert "Traceback" in shown
    assert "ConnectionError" in shown
    assert '"to": "bounce@example.com"' in shown
    running = served.call(served.store.get_job, seeded.ids["running"])
    assert running is not None
    assert running.lease_until is not None
    shown = text(client.get(f"/jobs/{running.id}").text)
    assert "Lease holder web-1:4242" in shown
    assert f"Lease ends {running.lease_until:%Y-%m-%d %H:%M:%S} UTC" in shown
    assert "Requeue this job" not in shown


def test_a_payload_the_codec_cannot_decode_shows_as_bytes(served: Served) -> None:
    seeded = served.call(seed, served.store)
    shown = text(served.client().get(f"/jobs/{seeded.ids['raw']}").text)
    assert "2 bytes: b'\\xff\\x00'" in shown


def test_a_done_job_whose_queue_keeps_results_shows_its_result_and_earlier_failures(served: Served) -> None:
    queue = served.store.queue("billing")
    served.call(partial(queue.configure, keep_results=3600))
    job_id = served.call(queue.enqueue, {"invoice": 7})
    first = served.call(queue.claim, "web-1:4242")
    assert first is not None
    served.call(first.retry, ValueError("card declined <b>"), 0)
    second = served.call(queue.claim, "web-2:99")
    assert second is not None
    served.call(second.ack, {"total": "<script>alert(1)</script>"})
    kept = served.call(served.store.result, job_id)
    assert kept is not None
    page = served.client().get(f"/jobs/{job_id}")
    assert page.status_code == 200
    shown = text(page.text)
    assert f"done (its result is kept until {kept.keep_until:%Y-%m-%d %H:%M:%S} UTC)" in shown
    assert "Attempts 2 of" in shown
    assert "Workers web-1:4242, web-2:99" in shown
    assert '"total": "<script>alert(1)</script>"' in shown
    assert "<script>alert" not in page.text
    assert "card declined <b>" in shown
    assert '"invoice": 7' in shown


def test_a_missing_job_is_a_404_that_says_so(served: Served) -> None:
    page = served.client().get("/jobs/987654321")
    assert page.status_code == 404
    assert "No such job" in page.text


def test_hostile_payload_and_error_text_render_as_text_never_as_markup(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    pages = [
        client.get(f"/jobs/{seeded.ids['hostile']}"),
        client.get("/dead"),
        client.get("/queues/hostile?state=dead"),
    ]
    for page in pages:
        assert "<script>alert" not in page.text
        assert "<img" not in page.text
        assert "onerror=alert(1)>" not in page.text.replace("onerror=alert(1)&gt;", "")
    job_page = pages[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in job_page.text
    assert HOSTILE[0] in text(job_page.text)
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in job_page.text or "&quot;&gt;&lt;img" in job_page.text
    assert "script-src 'self'" in job_page.headers["content-security-policy"]


def test_dead_letters_group_by_task_error_class_and_message_with_ids_and_numbers_masked(served: Served) -> None:
    queue = served.store.queue("flaky")
    errors = [
        "timeout",
        "timeout",
        "timeout ",
        "refused\nat line 3",
        "refused\nat line 4",
        "KeyError: order 17 not in shard 0x1f",
        "KeyError: order 4242 not in shard 0xa0",
        "ValueError: order 17 not in shard 0x1f",
        "LookupError: session 3f2a9c1e-1111-2222-3333-444455556666 gone (deadbeef42)",
        "LookupError: session 0d1e2f3a-aaaa-bbbb-cccc-ddddeeeeffff gone (c0ffee0099)",
    ]
    served.call(queue.enqueue_many, list(range(len(errors))), None)
    for n, error in enumerate(errors):
        job = served.call(queue.claim, f"w{n}")
        assert job is not None
        served.call(job.fail, error)
    served.call(served.store.queue("flaky").enqueue, 99)
    page = served.client().get("/dead")
    section = re.search(r'<section class="dead-queue" data-queue="flaky">(.*?)</section>', page.text, re.S)
    assert section is not None
    rows = re.findall(r'<tr class="group" data-key="\w+">(.*?)</tr>', section.group(1), re.S)
    shown = [text(re.search(r'<p class="kind">(.*?)</p>', row, re.S).group(1)) for row in rows]  # type: ignore[union-attr]
    # White space, numbers, hex and uuids do not part errors; the class does; the biggest group first.
    assert shown == [
        "timeout",
        "refused at line #",
        "KeyError : order # not in shard <hex>",
        "LookupError : session <uuid> gone (<hex>)",
        "ValueError : order # not in shard <hex>",
    ]
    dead = served.call(served.store.jobs, "flaky", JobPhase.DEAD)
    by_error: dict[str, set[int]] = {}
    for info in dead.jobs:
        by_error.setdefault(str(info.last_error).split(":")[0].split()[0], set()).add(info.id)
    for row, kind in zip(rows, ["timeout", "refused", "KeyError", "LookupError", "ValueError"], strict=True):
        ids = {int(i) for i in re.findall(r'<input type="checkbox" form="bulk" name="id" value="(\d+)"', row)}
        assert ids == by_error[kind], kind
        assert text(row).startswith(f"{len(ids)} —")  # the count, then no task
    assert "flaky : 10 dead" in text(section.group(1))


def test_a_big_group_shows_a_few_ids_and_pages_them_all_on_its_own_page(served: Served) -> None:
    queue = served.store.queue("bulk")
    count = DEAD_GROUP_PAGE + 30
    served.call(queue.enqueue_many, list(range(count)), None)
    for _ in range(count):
        job = served.call(queue.claim, "w")
        assert job is not None
        served.call(job.fail, f"LookupError: no row {job.id}")
    client = served.client()
    page = client.get("/dead?queue=bulk").text
    (row,) = re.findall(r'<tr class="group" data-key="\w+">(.*?)</tr>', page, re.S)
    assert len(re.findall(r'name="id" value="(\d+)"', row)) == 10
    (link,) = re.findall(r'<a class="all" href="([^"]+)">all 230 →</a>', row)
    seen: list[int] = []
    while link:
        listing = client.get(html.unescape(link))
        assert listing.status_code == 200
        assert "230 dead jobs of" in text(listing.text)
        seen += [
            int(i) for i in re.findall(r'<input type="checkbox" form="bulk" name="id" value="(\d+)"', listing.text)
        ]
        following = re.findall(r'<a rel="next" href="([^"]+)"', listing.text)
        link = following[0] if following else ""
    everything = served.call(partial(served.store.jobs, "bulk", JobPhase.DEAD, limit=1000))
    assert seen == [job.id for job in everything.jobs]
    assert client.get("/dead/group?queue=bulk&key=nothing").status_code == 404
    assert client.get("/dead/group?queue=&key=x").status_code == 404


def test_schedules_show_spec_queue_and_boundaries(served: Served) -> None:
    served.call(seed, served.store)
    (schedule,) = served.call(served.store.schedules)
    row = re.search(r'<tr data-schedule="nightly-digest">(.*?)</tr>', served.client().get("/schedules").text, re.S)
    assert row is not None
    shown = text(row.group(1))
    assert shown.startswith("nightly-digest @every 1d reports")
    assert f"{schedule.next_boundary:%Y-%m-%d %H:%M:%S} UTC" in shown
    assert '<td class="last">—</td>' in row.group(1)  # never fired


def test_mounted_under_a_prefix_every_link_and_asset_stays_under_it(served: Served) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    from alkstore.adapters.web import create_app

    served.call(seed, served.store)
    service = Starlette(routes=[Mount("/ops/alkstore", app=create_app(served.store))])
    client = TestClient(service, base_url="http://127.0.0.1")
    client.portal = served.portal
    page = client.get("/ops/alkstore/")
    assert page.status_code == 200
    links = re.findall(r'(?:href|src|action|data-refresh)="([^"]+)"', page.text)
    assert links
    assert all(link.startswith("/ops/alkstore/") for link in links), links
    assert client.get("/ops/alkstore/static/dashboard.js").status_code == 200
    (queue,) = [link for link in links if link.endswith("/queues/emails")]
    assert "emails" in client.get(queue).text


def test_any_queue_name_links_to_its_own_page_and_shows_as_text(served: Served) -> None:
    odd = '"><img src=x onerror=alert(1)>/a?b#c%d e'
    job_id = served.call(served.store.queue(odd).enqueue, {"odd": True})
    client = served.client()
    overview = client.get("/")
    assert "<img" not in overview.text
    (link,) = re.findall(r'<td class="name"><a href="([^"]+)">&#34;&gt;&lt;img', overview.text)
    page = client.get(html.unescape(link))
    assert page.status_code == 200
    assert [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)] == [job_id]
    assert odd in text(page.text)
    job = client.get(f"/jobs/{job_id}")
    (back,) = re.findall(r'<dt>Queue</dt><dd><a href="([^"]+)"', job.text)
    assert back == html.unescape(link)


def test_a_queue_page_filters_its_jobs_by_payload_containment_across_pages(served: Served) -> None:
    from alkstore.adapters.web import PAGE_SIZE as size

    queue = served.store.queue("orders")
    payloads = [{"customer": 42 if n % 2 else 7, "n": n} for n in range(2 * size + 4)]
    ids = served.call(queue.enqueue_many, payloads, None)
    wanted = [job_id for job_id, payload in zip(ids, payloads, strict=True) if payload["customer"] == 42]
    client = served.client()
    shown: list[int] = []
    path = "/queues/orders?" + urlencode({"state": "ready", "contains": '{"customer": 42}'})
    while path:
        page = client.get(path)
        assert page.status_code == 200
        assert 'whose payload contains {"customer": 42}' in text(page.text)
        shown += [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)]
        following = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        path = html.unescape(following.group(1)) if following else ""
        assert not following or "contains=" in path, "the next page keeps the filter"
    assert shown == wanted
    for bad, named in (("{customer: 42}", "The payload filter is not JSON"), ("42", "InvalidArgument")):
        refused = client.get("/queues/orders?" + urlencode({"contains": bad}))
        assert refused.status_code == 400
        assert named in text(refused.text)
        assert "<tr data-job=" not in refused.text


def test_a_queue_page_filters_a_queue_holding_a_payload_with_a_nul(served: Served) -> None:
    payloads = [{"customer": 42, "note": "\x00"}, b"\x00raw", {"customer": 7}]
    ids = served.call(served.store.queue("nul").enqueue_many, payloads, None)
    page = served.client().get("/queues/nul?" + urlencode({"state": "ready", "contains": '{"customer": 42}'}))
    assert page.status_code == 200
    assert [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)] == [ids[0]]


def test_a_queue_page_filters_its_jobs_by_task_across_pages_and_each_jobs_task_links_to_its_filter(
    served: Served,
) -> None:
    from alkstore.adapters.web import PAGE_SIZE as size

    store = served.store
    now = store.clock.now()
    tasks = ["mail" if n % 3 else "report" for n in range(2 * size + 5)]
    jobs = [NewJob("work", f'{{"n": {n}}}'.encode(), 0, now, None, 3, task=task) for n, task in enumerate(tasks)]
    served.call(store.engine.enqueue, jobs, now)
    wanted: list[int] = []
    cursor = None
    while True:
        listing = served.call(partial(store.jobs, "work", cursor=cursor, task="mail"))
        wanted += [job.id for job in listing.jobs]
        if (cursor := listing.cursor) is None:
            break
    assert len(wanted) == tasks.count("mail")
    client = served.client()
    first = client.get("/queues/work")
    (link,) = set(re.findall(r'<td class="task"><a href="([^"]+)"[^>]*>report</a>', first.text))
    assert "task=report" in html.unescape(link)
    shown: list[int] = []
    path = "/queues/work?" + urlencode({"state": "ready", "task": "mail", "order": "reversed"})
    while path:
        page = client.get(path)
        assert page.status_code == 200
        assert "Ready jobs of task mail , claim order turned round" in text(page.text)
        assert set(re.findall(r'<td class="task"><a [^>]*>([^<]+)</a>', page.text)) == {"mail"}
        shown += [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)]
        following = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        path = html.unescape(following.group(1)) if following else ""
        assert not following or ("task=mail" in path and "order=reversed" in path), "the next page keeps both"
    assert shown == list(reversed(wanted))
    refused = client.get("/queues/work?" + urlencode({"task": "x" * 200}))
    assert refused.status_code == 400
    assert "The task filter is not a task name" in text(refused.text)


def test_a_queue_page_toggles_between_its_order_and_the_order_turned_round(served: Served) -> None:
    from alkstore.adapters.web import PAGE_SIZE as size

    ids = served.call(served.store.queue("orders").enqueue_many, [{"n": n} for n in range(size + 3)], None)
    client = served.client()
    first = client.get("/queues/orders")
    (toggle,) = re.findall(r'<a class="toggle" href="([^"]+)">Newest first</a>', first.text)
    shown: list[int] = []
    path = html.unescape(toggle)
    while path:
        page = client.get(path)
        assert "claim order turned round: lowest priority first, then the newest" in text(page.text)
        shown += [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)]
        following = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        path = html.unescape(following.group(1)) if following else ""
    assert shown == list(reversed(ids)), "every page in the order turned round"
    back = client.get(html.unescape(toggle))
    assert '<a class="toggle" href="/queues/orders?state=ready">Claim order</a>' in back.text
    waiting = client.get("/queues/orders?state=waiting")
    assert waiting.status_code == 200
    assert "Oldest first" not in waiting.text
    assert "Newest first" in waiting.text


def test_every_queues_dead_letters_group_the_newest_few_and_one_queues_page_groups_more(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    import alkstore.adapters.web._listing as app

    monkeypatch.setattr(app, "DEAD_SCAN_EACH", 4)
    queue = served.store.queue("many")
    served.call(queue.enqueue_many, list(range(6)), None)
    for n in range(6):
        job = served.call(queue.claim, "w")
        assert job is not None
        served.call(job.fail, "old kind" if n < 2 else f"new kind {n}")
    client = served.client()
    page = client.get("/dead").text
    assert "Grouped below: the newest 4 deaths." in text(page)
    counts = re.findall(r'<td class="n count">(\d+)</td>', page)
    assert counts == ["4"], "the two oldest, of another kind, were not read"
    (more,) = re.findall(r'<a href="([^"]+)">Group more of them</a>', page)
    everything = client.get(html.unescape(more)).text
    assert re.findall(r'<td class="n count">(\d+)</td>', everything) == ["4", "2"]
    assert "Grouped below" not in everything
