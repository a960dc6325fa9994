"""A clock that jumps backwards (ManualClock.set to the past) never makes anything due early or twice."""

from __future__ import annotations

from datetime import datetime, timedelta

from alkstore import EnqueueOpts, ManualClock, Queue, Store
from tests.support import must_claim


def claim_at(queue: Queue, clock: ManualClock, instant: datetime) -> int | None:
    """Set the clock to ``instant`` and claim: the id of the job taken, or ``None``."""
    clock.set(instant)
    job = queue.claim("w")
    return None if job is None else job.id


def test_a_delayed_job_is_not_claimable_after_the_clock_goes_back_before_its_run_at(
    store: Store, clock: ManualClock
) -> None:
    start, queue = clock.now(), store.queue("q")
    job_id = queue.enqueue("later", EnqueueOpts(delay=60))
    assert claim_at(queue, clock, start - timedelta(hours=1)) is None
    assert claim_at(queue, clock, start + timedelta(seconds=59)) is None
    assert claim_at(queue, clock, start + timedelta(seconds=60)) == job_id


def test_a_job_seen_due_is_not_claimable_once_the_clock_goes_back_before_its_run_at(
    store: Store, clock: ManualClock
) -> None:
    start, queue = clock.now(), store.queue("q")
    later_id = queue.enqueue("later", EnqueueOpts(delay=10))
    now_id = queue.enqueue("now")
    # Both are due at +20 s; the claim sees both and takes the older run_at.
    assert claim_at(queue, clock, start + timedelta(seconds=20)) == now_id
    assert claim_at(queue, clock, start + timedelta(seconds=5)) is None
    assert claim_at(queue, clock, start + timedelta(seconds=10)) == later_id


def test_a_retried_job_is_not_claimable_before_its_retry_time_after_the_clock_goes_back(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now()
    queue = store.queue("q")
    queue.enqueue("x")
    job = must_claim(queue)
    clock.set(start + timedelta(seconds=100))
    job.retry("later", delay=30)  # due at start+130
    clock.set(start + timedelta(seconds=200))
    queue.enqueue("filler", EnqueueOpts(priority=1))
    filler = queue.claim("w")  # this claim sees the retried job due, but takes the filler first
    assert filler is not None
    assert filler.payload == "filler"
    clock.set(start + timedelta(seconds=129))
    assert queue.claim("w") is None
    clock.set(start + timedelta(seconds=130))
    again = must_claim(queue)
    assert (again.id, again.attempts) == (job.id, 2)


def test_a_lease_does_not_lapse_when_the_clock_goes_back(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    store.queue("q").enqueue("x")
    job = must_claim(store.queue("q"), "w1")
    clock.set(start - timedelta(days=1))
    assert store.queue("q").claim("w2") is None
    clock.set(start + timedelta(seconds=299))
    assert store.queue("q").claim("w2") is None
    job.ack()
    assert store.get_job(job.id) is None


def test_a_lock_stays_held_when_the_clock_goes_back(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    lock = store.try_lock("leader", "a", 10)
    assert lock is not None
    clock.set(start - timedelta(hours=1))
    assert store.try_lock("leader", "b", 10) is None
    clock.set(start + timedelta(seconds=10))
    assert store.try_lock("leader", "b", 10) is not None


def test_a_boundary_never_fires_twice_when_the_clock_goes_back(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    store.schedule("s", "@every 1m", "q")
    clock.set(start + timedelta(minutes=3))
    first = store.tick()
    assert [fire.boundary for fire in first] == [start + timedelta(minutes=m) for m in (1, 2, 3)]
    clock.set(start)
    assert store.tick() == []
    clock.set(start + timedelta(minutes=3))
    assert store.tick() == []
    clock.set(start + timedelta(minutes=4))
    assert [fire.boundary for fire in store.tick()] == [start + timedelta(minutes=4)]
