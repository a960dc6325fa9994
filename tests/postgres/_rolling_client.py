"""The processes of the rolling-upgrade test, run as a script by the old code and by the new alike.

It uses only calls every schema version's code has (``open``, ``queue().enqueue/claim``, a job's
``ack``/``fail``/``heartbeat``, ``schedule``, ``tick``, ``outbox().enqueue/run_once``), and writes
what it did as JSON lines appended to one journal the test reads: ``fill`` creates and fills a
schema with this code's migrate, ``work`` claims, runs, produces and ticks until SIGTERM, and
``probe`` opens the schema and reports what opening it raised.

Usage: ``python _rolling_client.py ROLE URL SCHEMA RUN_DIR [SIDE]``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import alkstore
from alkstore import EnqueueOpts

#: Queues: plain work (also the schedule's), the jobs buried before the upgrade, one long job, the
#: outbox, and one queue each side alone claims (so each runs jobs the other code enqueued).
WORK, GRAVES, LONG, HOOKS = "work", "graves", "long", "hooks"
ONLY = {"old": "for-old", "new": "for-new"}
#: Jobs each worker enqueues while it works, one every ``PRODUCE_EVERY`` seconds, every fourth delayed.
PRODUCE, PRODUCE_EVERY, DELAY = 12, 0.05, 0.5


class Journal:
    """Appends one JSON object per line; each line is one ``write`` on an ``O_APPEND`` file, so
    the processes' lines never interleave."""

    def __init__(self, run_dir: Path, side: str) -> None:
        self._fd = os.open(run_dir / "journal.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.side = side

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"ev": event, "side": self.side, **fields}, default=_stamp) + "\n"
        os.write(self._fd, line.encode())


def _stamp(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def fill(store: Any, journal: Journal) -> None:
    """Pending, delayed, dead and long jobs, a schedule and outbox messages, all by this code."""
    work = store.queue(WORK)
    for n in range(6):
        tag = f"fill-{n}"
        journal("enq", tag=tag, id=work.enqueue({"tag": tag}))
    for n in range(3):
        tag = f"fill-delayed-{n}"
        journal("enq", tag=tag, id=work.enqueue({"tag": tag}, EnqueueOpts(delay=1.0)))
    graves = store.queue(GRAVES)
    for n in range(2):
        tag = f"grave-{n}"
        journal("enq", tag=tag, id=graves.enqueue({"tag": tag}))
        job = graves.claim("filler")
        assert job is not None
        assert job.payload == {"tag": tag}, job
        job.fail("buried before the upgrade")
        journal("dead", tag=tag, id=job.id)
    journal("enq", tag="long", id=store.queue(LONG).enqueue({"tag": "long"}))
    for n in range(2):
        tag = f"fill-for-new-{n}"
        journal("enq", tag=tag, id=store.queue(ONLY["new"]).enqueue({"tag": tag}))
    schedule = store.schedule("beat", "@every 1s", WORK, {"tag": "beat"})
    journal("schedule", next=schedule.next_boundary)
    hooks = store.outbox(HOOKS)
    for n in range(3):
        tag = f"out-{n}"
        journal("enq", tag=tag, id=hooks.enqueue({"tag": tag}))


def work(store: Any, journal: Journal, run_dir: Path) -> None:
    """Hold the long job (old side) until the schema is migrated; claim, run, produce and tick until SIGTERM."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    worker_id = f"rolling-{journal.side}"
    migrated = run_dir / "migrated"
    queues = [store.queue(WORK), store.queue(GRAVES), store.queue(ONLY[journal.side])]
    hooks = store.outbox(HOOKS)
    long_job = store.queue(LONG).claim(worker_id) if journal.side == "old" else None
    if long_job is not None:
        journal("held", tag="long", id=long_job.id)
    print("ready", flush=True)
    produced, next_produce = 0, time.monotonic()

    def run(job: Any) -> None:
        tag = job.payload["tag"]
        if tag == "beat":
            tag = f"beat@{job.boundary.isoformat()}"
        journal("ran", tag=tag, id=job.id, post=migrated.exists(), at=time.time(), run_at=job.run_at.timestamp())
        job.ack()

    def deliver(payload: Any, job: Any) -> None:
        journal("ran", tag=payload["tag"], id=job.id, post=migrated.exists(), at=time.time(), run_at=0.0)

    def step() -> bool:
        nonlocal long_job, produced, next_produce
        busy = False
        if long_job is not None and migrated.exists():
            long_job.heartbeat()  # a lease renewed, then acked, by the old code on the new schema
            run(long_job)
            long_job = None
        if produced < PRODUCE and time.monotonic() >= next_produce:
            tag = f"{journal.side}-{produced}"
            delay = DELAY if produced % 4 == 3 else None
            journal(
                "enq", tag=tag, id=queues[0].enqueue({"tag": tag}, EnqueueOpts(delay=delay)), post=migrated.exists()
            )
            produced, next_produce = produced + 1, time.monotonic() + PRODUCE_EVERY
        for queue in queues:
            job = queue.claim(worker_id)
            if job is not None:
                run(job)
                busy = True
        for fire in store.tick():
            journal("fire", boundary=fire.boundary, id=fire.job_id, post=migrated.exists())
        return bool(hooks.run_once(worker_id, deliver)) or busy

    while not stopping:
        try:
            busy = step()
        except alkstore.errors.DatabaseError as exc:
            # A migration's DDL and a worker's transaction can deadlock; the server rolls one of them
            # back. When it is the migration, migrate tries again; when it is this worker's, the
            # worker tries again, as a worker's loop does (journalled, so the test can see it).
            if "[40P01]" not in str(exc):
                raise
            journal("deadlock", post=migrated.exists())
            busy = True
        time.sleep(0.01 if busy else 0.05)
    journal("stopped")


def probe(url: str, schema: str) -> None:
    """Open ``schema`` and say what happened: ``opened``, or the error's class and message."""
    try:
        alkstore.open(url, schema=schema, min_size=0, max_size=1).close()
    except Exception as exc:
        print(f"refused {type(exc).__name__}: {exc}", flush=True)
    else:
        print("opened", flush=True)


def main(role: str, url: str, schema: str, run_dir: str, side: str = "old") -> None:
    if role == "probe":
        probe(url, schema)
        return
    journal = Journal(Path(run_dir), side)
    with alkstore.open(url, schema=schema, migrate=role == "fill", min_size=0, max_size=2) as store:
        if role == "fill":
            fill(store, journal)
        else:
            work(store, journal, Path(run_dir))


if __name__ == "__main__":
    main(*sys.argv[1:])
