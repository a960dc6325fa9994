"""The live fragments of the pages that show counts (the dead letters, the workers, the locks, a queue's and
an outbox's counts): each served alone, from the same reads as its page, escaped as it is, behind the same
guards, and readable by the read-only role. Their refreshing in a browser: ``test_browser_live``."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import quote

from alkstore import EnqueueOpts
from alkstore.engine import WorkerRecord
from tests.web._seed import HOSTILE, seed
from tests.web.conftest import Served
from tests.web.test_action_log import roles
from tests.web.test_pages import text

#: A name that would run script were a fragment not escaped (a queue's, a lock's, a worker's).
NAME = "<script>alert('live')</script>"
FRAGMENTS = ["/fragments/dead", "/fragments/workers", "/fragments/locks", "/fragments/counts/emails"]


def dead_counts(page: str) -> dict[str, str]:
    """The dead counts a dead-letters page or its fragment shows, by queue."""
    found = re.findall(r'<span class="dead" data-queue="([^"]*)">([^<]*)</span>', page)
    return {html.unescape(queue): count for queue, count in found}


def test_the_dead_letters_fragment_counts_each_queues_dead_as_its_page_does(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    fragment = client.get("/fragments/dead")
    assert fragment.status_code == 200
    assert fragment.headers["cache-control"] == "no-store"
    assert "<html" not in fragment.text, "a fragment is not a page"
    assert dead_counts(fragment.text) == dead_counts(client.get("/dead").text) == {"emails": "1", "hostile": "1"}
    queue = served.store.queue("emails")
    served.call(queue.enqueue, {"n": 1}, EnqueueOpts(max_attempts=1))
    job = served.call(queue.claim, "w")
    assert job is not None
    served.call(job.fail, "boom")
    assert dead_counts(client.get("/fragments/dead").text) == {"emails": "2", "hostile": "1"}
    assert dead_counts(client.get("/fragments/dead?queue=hostile").text) == {"hostile": "1"}
    assert "No dead jobs in quiet." in text(client.get("/fragments/dead?queue=quiet").text)
    assert client.get("/fragments/dead?queue=" + "x" * 300).status_code == 200, "no queue has that name: none dead"


def test_the_dead_letters_page_refreshes_its_counts_from_its_fragment(served: Served) -> None:
    served.call(seed, served.store)
    client = served.client()
    page = client.get("/dead").text
    assert 'id="dead-counts" data-refresh="/fragments/dead"' in page
    only = client.get("/dead?queue=a%20b%26c").text
    assert 'data-refresh="/fragments/dead?queue=a+b%26c"' in only, "the one queue asked for, kept and quoted"


def test_the_workers_fragment_lists_a_new_worker_and_the_locks_fragment_a_new_lock(served: Served) -> None:
    client = served.client()
    assert "No worker reported" in text(client.get("/fragments/workers").text)
    assert "No lock is held" in text(client.get("/fragments/locks").text)
    now = served.store.clock.now()
    worker = WorkerRecord("fresh:1", "host-1", 1, ("emails",), 4, now - timedelta(minutes=1), now)
    served.call(served.store.engine.record_worker, worker)
    assert served.call(served.store.try_lock, "nightly-report", "owner-1", 60) is not None
    workers = client.get("/fragments/workers").text
    assert '<tr data-worker="fresh:1">' in workers
    assert workers.count("<tr data-worker=") == 1
    locks = client.get("/fragments/locks").text
    assert re.findall(r'<tr data-lock="([^"]*)">', locks) == ["nightly-report"]
    assert client.get("/fragments/locks?after=nightly-report").text.count("<tr data-lock=") == 0
    assert client.get("/fragments/locks?after=" + "x" * 129).status_code == 400
    assert 'id="workers-live" data-refresh="/fragments/workers"' in client.get("/workers").text
    assert 'id="held" data-refresh="/fragments/locks?after=a+b"' in client.get("/locks?after=a+b").text


def test_an_outboxs_counts_say_how_many_couriers_are_live(served: Served) -> None:
    outbox = served.store.outbox("webhooks")
    served.call(outbox.enqueue, {"event": "order.created"})
    client = served.client()
    path = f"/fragments/counts/{quote(outbox.queue, safe='')}"
    assert f'data-refresh="{path}"' in client.get("/outboxes/webhooks").text
    shown = text(client.get(path).text)
    assert shown.startswith("Ready 1 · delayed 0 · running 0 · dead 0 · oldest ready ")
    assert shown.endswith("· no courier live")
    now = served.store.clock.now()
    courier = WorkerRecord("courier:1", "host-1", 1, (outbox.queue,), 1, now, now)
    served.call(served.store.engine.record_worker, courier)
    assert text(client.get(path).text).endswith("· 1 courier live")
    assert "courier" not in text(client.get("/fragments/counts/emails").text), "a plain queue has none"


def test_every_fragment_escapes_a_hostile_name(served: Served) -> None:
    served.call(seed, served.store)
    queue = served.store.queue(NAME)
    served.call(queue.enqueue, {"n": 1}, EnqueueOpts(max_attempts=1))
    job = served.call(queue.claim, NAME)
    assert job is not None
    served.call(job.fail, HOSTILE[0])
    now = served.store.clock.now()
    served.call(served.store.engine.record_worker, WorkerRecord(NAME, NAME, 1, (NAME,), 1, now, now))
    assert served.call(served.store.try_lock, NAME, NAME, 60) is not None
    client = served.client()
    for path in [*FRAGMENTS, "/fragments/dead?queue=" + NAME]:
        fragment = client.get(path)
        assert fragment.status_code == 200, path
        assert NAME not in fragment.text, path
        assert "<script" not in fragment.text, path
    assert NAME in text(client.get("/fragments/dead").text)
    assert NAME in text(client.get("/fragments/workers").text)
    assert NAME in text(client.get("/fragments/locks").text)


def test_the_read_role_and_a_read_only_dashboard_get_every_fragment_and_a_rebound_name_none(served: Served) -> None:
    served.call(seed, served.store)
    _, reader = roles(served)
    for path in FRAGMENTS:
        assert reader.get(path).status_code == 200, path
        assert served.client(read_only=True).get(path).status_code == 200, path
        assert 'method="post"' not in reader.get(path).text, path
        rebound = served.client(base_url="http://rebound.example:8080").get(path)
        assert rebound.status_code == 400, path
        assert "emails" not in rebound.text
    unauthenticated = served.client(token="full-token-of-32-characters-long")
    assert all(unauthenticated.get(path).status_code == 401 for path in FRAGMENTS)
