"""Pausing a queue and limiting it globally (ADR 033), and cancelling a running job (ADR 035).

A paused queue's jobs are not claimed by any store (within ``CONFIG_TTL`` of its clock), while
enqueues and fires into it succeed and running jobs finish. A queue's ``concurrency`` bounds its
running jobs across every store and worker, enforced where the jobs are; a lapsed lease frees its
slot. A cancelled running job is marked; its worker stops the run and the job ends cancelled
whatever the run comes to, or once its lease lapses if its worker died.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from alkstore import (
    CancelOutcome,
    EnqueueOpts,
    InvalidOptions,
    LeaseLost,
    ManualClock,
    StopToken,
    Store,
    Tasks,
    current_job,
)
from alkstore.store._kernel import CONFIG_TTL
from tests.support import PATIENCE, must_claim, must_get, wait_until

from ._runtimes import store_of, task_call, worker_of
from .test_concurrency import run_together


def test_a_paused_queue_keeps_its_jobs_unclaimed_and_still_takes_enqueues_and_fires(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("mail")
    queue.enqueue("before")
    running = must_claim(queue)
    queue.enqueue("waits")
    queue.pause()
    assert queue.claim("w") is None
    assert queue.claim_many("w", 5) == []
    queue.enqueue("while paused")
    store.schedule("beat", "@every 1s", "mail")
    clock.advance(1)
    assert len(store.tick()) == 1
    running.ack()  # a running job finishes as usual
    stats = store.queue_stats("mail")[0]
    assert (stats.paused, stats.ready) == (True, 3)
    store.queue("other").enqueue("elsewhere")
    assert must_claim(store.queue("other")).payload == "elsewhere"  # other queues go on
    queue.resume()
    assert {job.payload for job in queue.claim_many("w", 10)} == {"waits", "while paused", None}


def test_every_store_on_the_storage_sees_a_pause_within_the_config_ttl(store: Store, clock: ManualClock) -> None:
    other = store_of(store.engine, clock=clock)
    store.queue("mail").enqueue("x")
    assert other.queue("mail").claim("other") is not None  # reads (and caches) the queue's config
    store.queue("mail").enqueue("y")
    store.queue("mail").pause()
    clock.advance(CONFIG_TTL)
    assert other.queue("mail").claim("other") is None
    assert store.queue_stats()[0].paused
    store.queue("mail").resume()
    clock.advance(CONFIG_TTL)
    assert other.queue("mail").claim("other") is not None


def test_configuring_a_paused_queue_keeps_it_paused(store: Store) -> None:
    queue = store.queue("mail")
    queue.pause()
    queue.configure(max_attempts=7)
    queue.configure()  # every setting back to its default: still paused
    queue.enqueue("x")
    assert queue.claim("w") is None
    assert store.queue_stats("mail")[0].paused
    assert store.queue_stats() == store.queue_stats()  # a paused queue is listed, with or without jobs
    queue.resume()
    assert queue.defaults().max_attempts == 3


def test_an_empty_paused_queue_is_listed_paused_until_it_is_resumed(store: Store) -> None:
    store.queue("busy").enqueue("x")
    store.queue("quiet").pause()

    listed = {stats.queue: stats for stats in store.queue_stats()}
    assert sorted(listed) == ["busy", "quiet"]
    quiet = listed["quiet"]
    assert quiet.paused
    assert (quiet.ready, quiet.delayed, quiet.running, quiet.dead) == (0, 0, 0, 0)
    assert not listed["busy"].paused
    store.queue("quiet").resume()
    assert [stats.queue for stats in store.queue_stats()] == ["busy"], "an empty queue running as usual is not listed"


def test_a_global_limit_bounds_the_running_jobs_of_a_queue_across_stores(store: Store, clock: ManualClock) -> None:
    store.queue("scarce").configure(concurrency=2, visibility_timeout=30)
    other = store_of(store.engine, clock=clock)
    for n in range(6):
        store.queue("scarce").enqueue(n)
        store.queue("plenty").enqueue(n)
    assert len(store.queue("scarce").claim_many("a", 5)) == 2
    assert other.queue("scarce").claim_many("b", 5) == []
    assert len(other.queue("plenty").claim_many("b", 5)) == 5  # other queues are free meanwhile
    clock.advance(30)  # both leases lapse: their slots free
    taken = other.queue("scarce").claim_many("b", 5)
    assert len(taken) == 2
    taken[0].ack()
    assert len(store.queue("scarce").claim_many("a", 5)) == 1
    assert store.queue("scarce").defaults().concurrency == 2
    with pytest.raises(InvalidOptions, match="concurrency"):
        store.queue("scarce").configure(concurrency=0)


def test_three_claimers_at_once_never_hold_more_than_the_limit(store: Store) -> None:
    store.queue("scarce").configure(concurrency=3)
    for n in range(60):
        store.queue("scarce").enqueue(n)
    held: list[int] = []
    lock = threading.Lock()
    peak = [0]

    def claimer(name: str) -> int:
        done = 0
        idle = 0
        while idle < 100:
            jobs = store.queue("scarce").claim_many(name, 2)
            if not jobs:
                idle += 1
                continue
            idle = 0
            with lock:
                held.extend(job.id for job in jobs)
                peak[0] = max(peak[0], len(held))
            for job in jobs:
                with lock:
                    held.remove(job.id)
                job.ack()
                done += 1
        return done

    done = run_together([lambda n=n: claimer(f"c{n}") for n in range(3)])  # type: ignore[misc]
    assert sum(done) == 60
    assert peak[0] <= 3


def test_a_cancelled_running_job_is_stopped_by_its_worker_and_ends_cancelled(
    engine: Any, store: Store, clock: ManualClock
) -> None:
    tasks = Tasks()
    saw_stop = threading.Event()

    @tasks.task("long", queue="work")
    def long() -> None:
        job = current_job()
        started.set()
        while not job.stop.is_cancelled():
            job.stop.wait(0.01)
        saw_stop.set()

    started = threading.Event()
    job_id = task_call(long.enqueue, store)
    worker = worker_of(store, tasks, poll_interval=0.02)
    stop = StopToken()
    thread = threading.Thread(target=lambda: worker.run(stop), daemon=True)
    thread.start()
    try:
        assert started.wait(PATIENCE)
        assert store.cancel(job_id) is CancelOutcome.CANCELLING
        assert must_get(store, job_id).cancel_requested
        deadline_steps = 0
        while not saw_stop.is_set() and deadline_steps < 1000:  # its liveness looks every 2 s of the clock
            clock.advance(1)
            saw_stop.wait(0.02)
            deadline_steps += 1
        assert saw_stop.is_set(), "the run was told to stop"
        wait_until(lambda: store.get_job(job_id) is None, "the job to end cancelled")
    finally:
        stop.cancel()
        thread.join(PATIENCE)
    assert worker.stats.cancelled == 1


def test_a_bare_claims_heartbeat_tells_its_holder_of_a_cancel_from_another_store(
    store: Store, clock: ManualClock
) -> None:
    """A job claimed without a worker learns of a cancel at its next heartbeat (ADR 035): its ``stop`` is
    cancelled, its lease still extended to wind up in; whatever its holder calls next ends it cancelled."""
    other = store_of(store.engine, clock=clock)
    queue = store.queue("work")
    queue.configure(visibility_timeout=30)
    asked, left = queue.enqueue("asked"), queue.enqueue("left")
    job, neighbour = must_claim(queue, "holder"), must_claim(queue, "holder")
    assert (job.id, neighbour.id) == (asked, left)
    assert job.heartbeat() == clock.now() + timedelta(seconds=30)
    assert not job.stop.is_cancelled()
    assert other.cancel(asked) is CancelOutcome.CANCELLING
    clock.advance(10)
    assert job.heartbeat() == clock.now() + timedelta(seconds=30)
    assert job.stop.is_cancelled(), "the heartbeat told its holder"
    assert must_get(store, asked).lease_until == job.lease_until
    neighbour.heartbeat()
    assert not neighbour.stop.is_cancelled(), "another job's cancel is not this one's"
    job.retry("wound up")
    assert store.get_job(asked) is None, "its holder's next call ended it cancelled"
    neighbour.ack()


def test_a_cancelled_job_whose_worker_died_ends_cancelled_when_its_lease_lapses(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("work")
    queue.configure(visibility_timeout=30)
    job_id = queue.enqueue("abandoned")
    must_claim(queue, "died")  # its worker is gone: nobody will finish it
    assert store.cancel(job_id) is CancelOutcome.CANCELLING
    clock.advance(timedelta(seconds=30))
    assert queue.claim("w") is None  # the claim's sweep ends it cancelled, not pending again
    assert store.get_job(job_id) is None


def test_a_release_ends_its_own_job_cancelled_when_asked_and_no_other(store: Store, clock: ManualClock) -> None:
    """A holder that releases a job whose cancel was requested ends it cancelled (gone) rather than
    pending again; another running job whose cancel was requested, and a job held under a newer
    fence, are left as they are."""
    queue = store.queue("releasing")
    first, second = queue.enqueue(0), queue.enqueue(1)
    third = queue.enqueue(2, EnqueueOpts(visibility_timeout=10))
    held = [must_claim(queue) for _ in range(3)]
    assert [job.id for job in held] == [first, second, third]
    clock.advance(11)  # the third's lease lapses: a new claim holds it under a newer fence
    again = must_claim(queue, "w-again")
    assert again.id == third
    for job_id in (first, second, third):
        assert store.cancel(job_id) is CancelOutcome.CANCELLING
    held[0].release()
    assert store.get_job(first) is None, "released with its cancel requested: cancelled"
    assert must_get(store, second).cancel_requested, "another job's cancel is still to do"
    with pytest.raises(LeaseLost):
        held[2].release()  # a stale holder changes nothing
    assert must_get(store, third).worker_id == "w-again"
    assert again.id == third
