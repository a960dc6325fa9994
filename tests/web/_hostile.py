"""Content written to break a page's layout: a 100 KB error, 200 dead jobs whose errors embed their ids,
right-to-left and U+202E text, NUL characters, a deeply nested payload, names at the length limit,
locks whose names and owners are at that limit and action log entries as long as they go."""

from __future__ import annotations

import json
from datetime import timedelta

from alkstore import AsyncStore, EnqueueOpts
from alkstore.engine import NewJob, TaskFiguresRecord, WorkerRecord

__all__ = ["HOSTILE_TASK", "LONG_NAME", "WIDE", "seed_hostile"]

#: A queue (and task) name as long as names go, without a place to break it.
LONG_NAME = "q" * 128
#: A task name with markup, U+202E and no place to break it, as long as a name goes (ADR 075's charts).
HOSTILE_TASK = "<script>alert(1)</script>\u202eexe." + "t" * 100
#: The queue that holds most of the hostile content.
WIDE = "wide"


def _deep(levels: int) -> object:
    payload: object = {"leaf": "x" * 300}
    for level in range(levels):
        payload = {f"level{level}": [payload, level]}
    return payload


async def seed_hostile(store: AsyncStore) -> dict[str, int]:
    """Hostile content on the queue ``WIDE`` and a queue named ``LONG_NAME``; the ids worth a page."""
    ids: dict[str, int] = {}
    wide = store.queue(WIDE)
    unbroken = "E" * 100_000
    now = store.clock.now()
    huge = NewJob(WIDE, json.dumps({"text": "a" * 5_000}).encode(), 0, now, None, 1, task="t" * 128)
    (ids["huge"],) = await store.engine.enqueue([huge], now)
    job = await wide.claim("wide-1")
    assert job is not None
    await job.fail(f"ValueError: {unbroken}")
    made = await wide.enqueue_many([{"order": n} for n in range(200)], EnqueueOpts(max_attempts=1))
    for _ in made:
        job = await wide.claim("wide-1")
        assert job is not None
        await job.fail(f"KeyError: order {job.id} not found in shard 0x{job.id * 7919:08x}")
    ids["many"] = made[0]
    ids["rtl"] = await wide.enqueue(
        {"name": "evil\u202eexe.txt", "arabic": "مرحبا بالعالم " * 40, "nul": "a\x00b", "deep": _deep(60)},
        EnqueueOpts(max_attempts=1),
    )
    job = await wide.claim("wide-1")
    assert job is not None
    await job.fail("RuntimeError: \u202eevil text and a\x00NUL " + "שלום " * 200)
    ids["ready"] = await wide.enqueue({"deep": _deep(60)})
    long = store.queue(LONG_NAME)
    (ids["long"],) = await store.engine.enqueue([NewJob(LONG_NAME, b'{"n": 1}', 0, now, None, 3, task=LONG_NAME)], now)
    ids["running"] = await long.enqueue({"n": 2})
    running = await long.claim("w" * 120)
    assert running is not None
    await store.outbox("o" * 100).enqueue({"deep": _deep(30)})
    await store.schedule("s" * 128, "@every 1h", LONG_NAME, {"deep": _deep(10)})
    now = store.clock.now()
    # Task figures of tasks whose names are as long as they go, with markup and U+202E, over a week (ADR 075).
    minute = now.replace(second=0, microsecond=0)
    figures = [
        TaskFiguresRecord(LONG_NAME, task, minute - timedelta(minutes=back), 3, 1, 120.0 * back, 9.0 * back)
        for back in (1, 2, 90, 60 * 30, 60 * 24 * 5)
        for task in (HOSTILE_TASK, LONG_NAME, "")
    ]
    await store.engine.record_worker(
        WorkerRecord(
            "w" * 120,
            "h" * 100,
            1,
            (LONG_NAME, WIDE, *(f"queue-{n}" for n in range(30))),
            4,
            now - timedelta(hours=1),
            now - timedelta(seconds=2),
            running=1,
        ),
        (),
        figures,
    )
    # Locks whose name and owner are as long as names go, unbroken, and one that is markup.
    for name, owner in (("L" * 128, "O" * 128), ("<b>lock</b>", "שלום-owner"), (LONG_NAME, "host:1")):
        assert await store.try_lock(name, owner, 3600) is not None
    # Action log entries as long as they go, unbroken, with markup and U+202E (ADR 068).
    await store.log_action("A" * 128, "T" * 1000, "O" * 2000, role="R" * 128, address="f" * 128)
    await store.log_action(
        "pause_queue", "queue <script>alert(1)</script>", "evil\u202eexe.txt " * 50, role="full", address="::1"
    )
    return ids
