"""A store with something on every page: queues in every phase, a dead job with a traceback, a hostile
payload, undecodable bytes, schedules, a leader and a worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from alkstore import AsyncStore, EnqueueOpts
from alkstore.engine import NewJob, WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK

__all__ = ["HOSTILE", "LEADER", "Seeded", "seed"]

#: Payload and error text that would run script if a page did not escape it.
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']
LEADER = "web-1:4240:1893456000:5f3a9c21"


@dataclass
class Seeded:
    ids: dict[str, int] = field(default_factory=dict)


async def seed(store: AsyncStore) -> Seeded:
    seeded = Seeded()
    ids = seeded.ids
    await store.schedule("nightly-digest", "@every 1d", "reports", {"kind": "digest"})
    emails = store.queue("emails")
    ids["ready"] = await emails.enqueue({"to": "ada@example.com"})
    ids["delayed"] = await emails.enqueue({"to": "later@example.com"}, EnqueueOpts(delay=3600))
    ids["running"] = await emails.enqueue({"to": "busy@example.com"}, EnqueueOpts(priority=9))
    running = await emails.claim("web-1:4242")
    assert running is not None
    assert running.id == ids["running"]
    ids["dead"] = await emails.enqueue({"to": "bounce@example.com"}, EnqueueOpts(priority=9))
    dying = await emails.claim("web-1:4242")
    assert dying is not None
    try:
        raise ConnectionError("550 mailbox unavailable")
    except ConnectionError as exc:
        await dying.fail(exc)
    hostile = store.queue("hostile")
    ids["hostile"] = await hostile.enqueue({"name": HOSTILE[0], "title": HOSTILE[1]}, EnqueueOpts(max_attempts=1))
    job = await hostile.claim("web-2")
    assert job is not None
    await job.fail(" and ".join(HOSTILE))
    now = store.clock.now()
    (ids["raw"],) = await store.engine.enqueue([NewJob("reports", b"\xff\x00", 0, now, None, 3)], now)
    assert await store.engine.try_lock(SCHEDULER_LOCK, LEADER, now, now + timedelta(seconds=30))
    await store.engine.record_worker(
        WorkerRecord(
            "web-1:4242",
            "web-1",
            4242,
            ("emails", "reports"),
            8,
            now - timedelta(hours=2),
            now - timedelta(seconds=3),
            running=1,
            processed=1200,
            failed=7,
        )
    )
    return seeded
