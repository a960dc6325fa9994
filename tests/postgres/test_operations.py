"""Inspection on PostgreSQL: reads that write nothing, so a read-only session serves them."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from alkstore import DatabaseError, EnqueueOpts, JobPhase, ManualClock, QueueStats, Store
from alkstore.engine import ClaimRequest, Held
from alkstore.rules._operations import STATS_CAP
from tests.support import must_claim

from .conftest import PATIENCE, OpenStore, count, engine_of

pytestmark = pytest.mark.postgres


def read_only(url: str) -> str:
    """``url`` with every session of it read-only (a write raises)."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-c%20default_transaction_read_only%3Don"


def test_every_inspection_runs_in_a_read_only_session(
    open_store: OpenStore, store: Store, clock: ManualClock, pg_dsn: str, pg_module_schema: str
) -> None:
    queue = store.queue("inspected")
    queue.enqueue("ready")
    queue.enqueue("delayed", EnqueueOpts(delay=60))
    queue.enqueue("running", EnqueueOpts(priority=1))
    must_claim(queue)
    queue.enqueue("dead", EnqueueOpts(priority=2))
    dead = must_claim(queue)
    dead.fail("boom")
    queue.enqueue("keyed head", EnqueueOpts(ordering_key="k", delay=120))  # delayed, its key held
    queue.enqueue("waiting", EnqueueOpts(ordering_key="k"))
    store.schedule("inspected-schedule", "@every 1m", "inspected")

    reader = open_store(url=read_only(pg_dsn), migrate=False, clock=clock)
    with pytest.raises(DatabaseError, match="read-only"):
        reader.queue("inspected").enqueue("refused")

    assert reader.queue_stats() == [QueueStats("inspected", 1, 2, 1, 1, timedelta(0), STATS_CAP, waiting=1)]
    assert reader.queue_stats("inspected") == reader.queue_stats()
    listed = {phase: [job.payload for job in reader.jobs("inspected", phase).jobs] for phase in JobPhase}
    assert listed == {
        JobPhase.READY: ["ready"],
        JobPhase.DELAYED: ["delayed", "keyed head"],
        JobPhase.WAITING: ["waiting"],
        JobPhase.RUNNING: ["running"],
        JobPhase.DEAD: ["dead"],
    }
    assert [schedule.name for schedule in reader.schedules()] == ["inspected-schedule"]
    assert reader.leader() is None
    assert reader.workers() == []


def test_version_4_adds_the_workers_table_and_no_index_on_jobs(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    assert count(db, pg_module_schema, "workers") == 0
    indexes = db.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'jobs' ORDER BY indexname",
        [pg_module_schema],
    ).fetchall()
    # Version 6 adds the keys' two (ADR 031, ADR 032), version 8 the keys' heads and the waiting
    # jobs; version 4 added none.
    names = [
        "jobs_claim",
        "jobs_delayed",
        "jobs_expiry",
        "jobs_lease",
        "jobs_ordering",
        "jobs_ordering_head",
        "jobs_pkey",
        "jobs_unique",
        "jobs_waiting",
    ]
    assert [name for (name,) in indexes] == names


def test_only_the_held_jobs_whose_cancel_was_requested_are_told_so(open_store: OpenStore, clock: ManualClock) -> None:
    """A worker asks which of the jobs it holds are to stop: the one whose cancel was requested, once,
    never another running job it holds (all claimed under the same fence number)."""
    store = open_store(clock=clock)
    store.queue("cancelling").enqueue_many([1, 2, 3])
    engine = engine_of(store)
    jobs = engine.claim(ClaimRequest("cancelling", "w", clock.now(), timedelta(minutes=5), limit=3))
    assert len(jobs) == 3
    assert engine.request_cancel([jobs[0].id]) == [jobs[0].id]
    held = [Held(job.id, job.fence) for job in jobs]
    assert engine.cancel_requested(held) == [Held(jobs[0].id, jobs[0].fence)]


def test_a_requeue_of_a_dead_keyed_job_waits_for_an_enqueue_of_its_key_in_flight(
    open_store: OpenStore, db: psycopg.Connection[Any]
) -> None:
    """``requeue_dead`` locks the ordering keys of the jobs it brings back (``dead_ordering_keys``), as a
    keyed enqueue does: a requeue racing an uncommitted enqueue of the key waits for it, and the key
    keeps one job ready, never two."""
    store = open_store()
    queue = store.queue("requeued-keys")
    dead = queue.enqueue("first", EnqueueOpts(ordering_key="k", max_attempts=1))
    must_claim(queue).fail("boom")
    assert queue.enqueue("other key, dead too", EnqueueOpts(ordering_key="other", max_attempts=1))
    must_claim(queue).fail("boom")
    requeued: list[bool] = []
    with store.transaction() as tx:
        store.enqueue_tx(tx, "requeued-keys", "second", EnqueueOpts(ordering_key="k"))
        racing = threading.Thread(target=lambda: requeued.append(store.requeue_dead(dead)))
        racing.start()
        waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        deadline = time.monotonic() + PATIENCE
        while racing.is_alive() and db.execute(waiting).fetchone() == (0,) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert racing.is_alive(), "the requeue went ahead of the enqueue holding its key"
    racing.join(PATIENCE)
    assert requeued == [True]
    states = [job.waiting for job in store.jobs("requeued-keys", JobPhase.READY).jobs] + [
        job.waiting for job in store.jobs("requeued-keys", JobPhase.WAITING).jobs
    ]
    assert sorted(states) == [False, True], "one job of the key ready, the other behind it"
