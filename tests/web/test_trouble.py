"""The overview leads with what needs a human: each kind of trouble made to happen on each engine, then seen.

The store runs on a manual clock, so a worker "killed" is one whose last report grows old while its
claimed job stays running, as the engine holds them after a process dies without a word.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest

from alkstore import EnqueueOpts, ManualClock
from alkstore.engine import WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.testing import Scratch
from tests.support import T0
from tests.web.conftest import Served, serve


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def served(scratch: Scratch, clock: ManualClock) -> Iterator[Served]:
    yield from serve(scratch, clock)


def troubles(served: Served) -> dict[tuple[str, str], tuple[str, str]]:
    """The overview's trouble list: (kind, subject) -> (where it links, what it says)."""
    page = served.client().get("/")
    assert page.status_code == 200
    found = re.findall(
        r'<li data-kind="([^"]+)" data-subject="([^"]+)"><a href="([^"]+)">.*?</a>: (.*?)</li>', page.text, re.S
    )
    return {
        (kind, html.unescape(subject)): (html.unescape(href), html.unescape(what))
        for kind, subject, href, what in found
    }


def report(served: Served, worker: str, *queues: str, running: int = 0) -> None:
    """``worker`` reports itself now, serving ``queues``."""
    now = served.store.clock.now()
    record = WorkerRecord(worker, "host-1", 4242, queues, 4, now - timedelta(minutes=5), now, running=running)
    served.call(served.store.engine.record_worker, record)


def test_a_calm_store_says_nothing_needs_attention(served: Served) -> None:
    page = served.client().get("/").text
    assert troubles(served) == {}
    assert "Nothing needs attention" in page


def test_ready_work_with_no_live_worker_is_flagged_until_a_worker_serves_it(served: Served, clock: ManualClock) -> None:
    served.call(served.store.queue("orders").enqueue, {"n": 1})
    href, what = troubles(served)[("unserved", "orders")]
    assert href == "/queues/orders"
    assert "1 ready job and no live worker serves the queue" in what
    assert "no worker</span>" in served.client().get("/").text
    report(served, "w-1", "orders")
    assert ("unserved", "orders") not in troubles(served)
    clock.advance(61)  # the worker stops reporting: killed, or cut off
    found = troubles(served)
    assert ("unserved", "orders") in found
    href, what = found[("worker-gone", "w-1")]
    assert href == "/workers"
    assert "last seen 1m01s ago on host-1 (pid 4242), serving orders" in what


def test_a_paused_queue_with_ready_work_is_not_trouble(served: Served) -> None:
    served.call(served.store.queue("held").enqueue, {"n": 1})
    served.call(served.store.queue("held").pause)
    assert ("unserved", "held") not in troubles(served)


def test_a_served_queue_whose_oldest_ready_job_waits_over_a_minute_is_behind(
    served: Served, clock: ManualClock
) -> None:
    served.call(served.store.queue("slow").enqueue, {"n": 1})
    report(served, "w-1", "slow")
    assert troubles(served) == {}
    clock.advance(90)
    report(served, "w-1", "slow")
    href, what = troubles(served)[("lagging", "slow")]
    assert href == "/queues/slow"
    assert "waited 1m30s" in what


def test_running_jobs_of_a_killed_worker_are_flagged_and_the_pages_show_whose_they_are(
    served: Served, clock: ManualClock
) -> None:
    queue = served.store.queue("orders")
    job_id = served.call(queue.enqueue, {"n": 1}, EnqueueOpts(visibility_timeout=300))
    report(served, "w-1", "orders", running=1)
    claimed = served.call(queue.claim, "w-1")
    assert claimed is not None
    assert claimed.id == job_id
    assert troubles(served) == {}
    client = served.client()
    running = client.get("/queues/orders?state=running").text
    row = re.search(rf'<tr data-job="{job_id}">(.*?)</tr>', running, re.S)
    assert row is not None
    assert "w-1" in row.group(1)
    assert "not seen live" not in row.group(1)
    clock.advance(120)  # killed mid-run: no report, no ack, the job still running
    found = troubles(served)
    href, what = found[("orphaned", "orders")]
    assert href == "/queues/orders?state=running"
    assert what.startswith("1 running job held by a worker not seen live: ")
    assert ("worker-gone", "w-1") in found
    row = re.search(rf'<tr data-job="{job_id}">(.*?)</tr>', client.get(href).text, re.S)
    assert row is not None
    assert "not seen live" in row.group(1)
    assert "lapsed" not in row.group(1)
    workers = client.get("/workers").text
    held = re.search(r'<section class="held" data-worker="w-1">(.*?)</section>', workers, re.S)
    assert held is not None
    assert f'/jobs/{job_id}"' in held.group(1)
    assert "gone" in held.group(1)
    clock.advance(300)  # past the lease: the job is claimable again, and said to be
    assert "(1 past their lease)" in troubles(served)[("orphaned", "orders")][1]
    assert "lapsed" in client.get(href).text


def test_schedules_without_a_leader_are_flagged_and_a_leader_clears_it(served: Served, clock: ManualClock) -> None:
    served.call(served.store.schedule, "digest", "@every 5m", "reports", {"kind": "digest"})
    href, what = troubles(served)[("no-leader", "scheduler")]
    assert href == "/schedules"
    assert "1 schedule will not fire" in what
    now = clock.now()
    taken = served.call(served.store.engine.try_lock, SCHEDULER_LOCK, "sched-1", now, now + timedelta(seconds=30))
    assert taken
    assert ("no-leader", "scheduler") not in troubles(served)
    clock.advance(6 * 60 + 5)  # the leader's lease lapsed and the boundary passed a minute ago unfired
    found = troubles(served)
    assert ("no-leader", "scheduler") in found
    href, what = found[("overdue", "digest")]
    assert href == "/schedules"
    assert what.startswith("its boundary 1m05s ago has not fired")


def test_jobs_dying_are_flagged_for_an_hour_with_a_link_to_their_dead_letters(
    served: Served, clock: ManualClock
) -> None:
    queue = served.store.queue("mail")
    served.call(queue.enqueue, {"n": 1}, EnqueueOpts(max_attempts=1))
    report(served, "w-1", "mail")
    job = served.call(queue.claim, "w-1")
    assert job is not None
    served.call(job.fail, "SMTPError: 550")
    href, what = troubles(served)[("dying", "mail")]
    assert href == "/dead?queue=mail"
    assert what == "1 job died in the last hour."
    clock.advance(3601)
    report(served, "w-1", "mail")
    assert troubles(served) == {}


def test_an_outbox_whose_messages_no_courier_delivers_is_flagged_with_a_link_to_its_page(served: Served) -> None:
    outbox = served.store.outbox("hooks")
    served.call(outbox.enqueue, {"event": "paid"})
    href, what = troubles(served)[("unserved", outbox.queue)]
    assert href == "/outboxes/hooks"
    assert what.startswith("1 ready message and no live worker's courier delivers them")
    assert "<strong>outbox hooks</strong>" in served.client().get("/").text
    assert served.client().get(href).status_code == 200
    report(served, "courier-1", outbox.queue)
    assert ("unserved", outbox.queue) not in troubles(served)
