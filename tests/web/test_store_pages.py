"""The rest of the store on pages of its own, and no link of the dashboard's leading nowhere (every engine)."""

from __future__ import annotations

import html
import re
from functools import partial
from urllib.parse import urljoin, urlsplit

from alkstore import EnqueueOpts, JobPhase
from tests.web._seed import seed
from tests.web.conftest import Served
from tests.web.test_pages import text


async def refuse(payload: object, job: object) -> None:
    raise ConnectionError("503 from the hook")


async def deliver(payload: object, job: object) -> None:
    """A delivery that succeeds."""


def links(page: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'<a [^>]*href="([^"]+)"', page)]


def test_every_link_on_every_page_reached_from_the_overview_answers(served: Served) -> None:
    seeded = served.call(seed, served.store)
    outbox = served.store.outbox("webhooks")
    served.call(outbox.enqueue, {"event": "order.created"}, EnqueueOpts(max_attempts=1))
    assert served.call(outbox.run_once, "courier-1", refuse)
    served.call(outbox.enqueue, {"event": "order.paid"})
    served.call(partial(served.store.queue("kept").configure, keep_results=3600))
    served.call(served.store.queue("kept").enqueue, {"n": 1})
    job = served.call(served.store.queue("kept").claim, "w")
    assert job is not None
    served.call(job.ack, {"ok": True})
    client = served.client()
    seen: dict[str, int] = {}
    waiting = ["/", "/dead", "/schedules", "/workers", "/results/kept"]
    while waiting and len(seen) < 400:
        path = waiting.pop()
        if path in seen:
            continue
        answer = client.get(path, follow_redirects=False)
        seen[path] = answer.status_code
        for link in links(answer.text):
            target = urlsplit(urljoin("http://127.0.0.1" + path, link))
            whole = target.path + (f"?{target.query}" if target.query else "")
            if target.netloc == "127.0.0.1" and not target.path.startswith("/static") and whole not in seen:
                waiting.append(whole)
    failing = {path: status for path, status in seen.items() if status != 200}
    assert failing == {}
    assert any(path.startswith("/outboxes/") for path in seen)
    assert f"/jobs/{seeded.ids['dead']}" in seen
    assert "/outboxes/webhooks" in seen


def test_an_outbox_has_a_page_of_its_messages_and_its_failed_deliveries(served: Served) -> None:
    outbox = served.store.outbox("webhooks")
    ready = served.call(outbox.enqueue, {"event": "order.created"})
    failing = served.call(outbox.enqueue, {"event": "refund"}, EnqueueOpts(max_attempts=1))
    client = served.client()
    overview = client.get("/").text
    assert '<a class="badge outbox idle" href="/outboxes/webhooks"' in overview
    page = client.get("/outboxes/webhooks")
    assert page.status_code == 200
    shown = text(page.text)
    assert "Outbox webhooks : its messages" in shown
    assert [int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)] == [ready, failing]
    assert "Pause" not in shown, "an outbox's backing queue is not paused from here"
    assert served.call(outbox.run_once, "courier-1", deliver)
    assert served.call(outbox.run_once, "courier-1", refuse)
    dead = client.get("/outboxes/webhooks?state=dead")
    assert [int(i) for i in re.findall(r'<tr data-job="(\d+)">', dead.text)] == [failing]
    assert "503 from the hook" in text(dead.text)
    assert "503 from the hook" in text(client.get("/dead").text)
    back = re.findall(r'<dt>Queue</dt><dd><a href="([^"]+)"', client.get(f"/jobs/{failing}").text)
    assert client.get(html.unescape(back[0])).status_code == 200
    assert client.get("/outboxes/__alkstore_x").status_code == 404


def test_kept_results_have_a_page_a_queue_links_to(served: Served) -> None:
    queue = served.store.queue("kept")
    served.call(partial(queue.configure, keep_results=3600))
    ids = served.call(queue.enqueue_many, [{"n": n} for n in range(3)])
    for _ in ids:
        job = served.call(queue.claim, "w-1")
        assert job is not None
        served.call(job.ack, {"total": job.id})
    client = served.client()
    served.call(queue.enqueue, {"n": 9})
    assert "/results/kept" in links(client.get("/queues/kept").text)
    page = client.get("/results/kept")
    assert page.status_code == 200
    assert sorted(int(i) for i in re.findall(r'<tr data-job="(\d+)">', page.text)) == sorted(ids)
    assert "w-1" in text(page.text)
    assert f'"total": {ids[0]}' in text(client.get(f"/jobs/{ids[0]}").text)
    assert "No kept results" in text(client.get("/results/other").text)
    assert served.call(served.store.jobs, "kept", JobPhase.READY).jobs


def test_a_job_is_found_by_its_id_from_every_page(served: Served) -> None:
    seeded = served.call(seed, served.store)
    client = served.client()
    for path in ("/", "/dead", "/schedules", "/workers", "/queues/emails", f"/jobs/{seeded.ids['ready']}"):
        assert '<form class="find" method="get" action="/find"' in client.get(path).text, path
    found = client.get(f"/find?id={seeded.ids['dead']}", follow_redirects=False)
    assert (found.status_code, found.headers["location"]) == (303, f"/jobs/{seeded.ids['dead']}")
    assert client.get(f"/find?id=%20%23{seeded.ids['dead']}%20").status_code == 200
    assert client.get("/find?id=999999999").status_code == 404
    for bad in ("abc", "", "1e5", "9" * 30, "<script>"):
        answer = client.get("/find", params={"id": bad})
        assert answer.status_code == 400, bad
        assert "<script>" not in answer.text


def test_a_queue_pages_counts_are_a_fragment_of_their_own(served: Served) -> None:
    served.call(served.store.queue("counted").enqueue_many, [{"n": n} for n in range(3)])
    client = served.client()
    page = client.get("/queues/counted").text
    (fragment,) = re.findall(r'<div id="counts" data-refresh="([^"]+)"', page)
    assert text(client.get(html.unescape(fragment)).text).startswith("Ready 3 · delayed 0 · running 0 · dead 0")
    assert text(client.get("/fragments/counts/empty").text).startswith("Ready 0 · delayed 0")
    assert client.get("/fragments/counts/__alkstore_x").status_code == 404
