"""Queues and jobs: ordering, delays, expiry, fenced leases, the retry curve, dead jobs, ``get_job``."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from alkstore import (
    EnqueueOpts,
    Job,
    JobState,
    JsonCodec,
    LeaseLost,
    ManualClock,
    Store,
    StoreClosed,
)
from alkstore.engine import JOB_EXPIRED_ERROR, LEASE_EXPIRED_ERROR
from tests.support import must_get

from ._checks import assert_utc, job_fields
from ._runners import PROGRESS_TIMEOUT

VISIBILITY = timedelta(seconds=300)


def claim(store: Store, queue: str = "jobs", worker: str = "w1") -> Job:
    job = store.queue(queue).claim(worker)
    assert job is not None, f"expected a claimable job on {queue!r}"
    return job


def test_a_plain_queue_derives_300_s_leases_3_attempts_and_a_5_s_backoff(store: Store) -> None:
    defaults = store.queue("jobs").defaults()
    assert defaults.visibility_timeout == VISIBILITY
    assert defaults.max_attempts == 3
    assert defaults.backoff_base == timedelta(seconds=5)
    assert store.queue("jobs").name == "jobs"


def test_claims_take_the_highest_priority_then_the_earliest_run_at_then_the_lowest_id(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    now = clock.now()
    ids = {
        "low": queue.enqueue("low", EnqueueOpts(priority=-1)),
        "plain": queue.enqueue("plain"),
        "high-late": queue.enqueue("high-late", EnqueueOpts(priority=5)),
        "high-early": queue.enqueue("high-early", EnqueueOpts(priority=5, run_at=now - timedelta(seconds=10))),
        "high-late-2": queue.enqueue("high-late-2", EnqueueOpts(priority=5)),
        "plain-2": queue.enqueue("plain-2", EnqueueOpts(priority=0)),
    }
    assert list(ids.values()) == sorted(ids.values()), "ids increase with every insert"
    order = [claim(store).payload for _ in ids]
    assert order == ["high-early", "high-late", "high-late-2", "plain", "plain-2", "low"]
    assert queue.claim("w1") is None


def test_queues_do_not_share_jobs(store: Store) -> None:
    store.queue("a").enqueue("for a")
    assert store.queue("b").claim("w1") is None
    assert claim(store, "a").payload == "for a"


def test_a_delayed_job_becomes_claimable_exactly_when_its_delay_has_passed(store: Store, clock: ManualClock) -> None:
    enqueued_at = clock.now()
    job_id = store.queue("jobs").enqueue("later", EnqueueOpts(delay=30))
    info = must_get(store, job_id)
    assert info.run_at == enqueued_at + timedelta(seconds=30)
    clock.advance(timedelta(seconds=30) - timedelta(microseconds=1))
    assert store.queue("jobs").claim("w1") is None
    clock.advance(timedelta(microseconds=1))
    assert claim(store).id == job_id


def test_a_job_with_run_at_waits_for_that_instant_and_a_past_run_at_is_due_at_once(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    future = queue.enqueue("future", EnqueueOpts(run_at=clock.now() + timedelta(hours=2)))
    past = queue.enqueue("past", EnqueueOpts(run_at=clock.now() - timedelta(hours=2)))
    first = claim(store)
    assert first.id == past
    first.ack()
    assert queue.claim("w1") is None
    clock.advance(timedelta(hours=2))
    assert claim(store).id == future


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_an_expired_job_is_never_claimed_and_ends_dead_with_the_expiry_error(
    store: Store, clock: ManualClock, absolute: bool
) -> None:
    queue = store.queue("jobs")
    expires = clock.now() + timedelta(seconds=10) if absolute else 10
    doomed = queue.enqueue("doomed", EnqueueOpts(priority=9, expires=expires))
    survivor = queue.enqueue("survivor")
    info = must_get(store, doomed)
    assert info.expires_at == clock.now() + timedelta(seconds=10)
    clock.advance(10)
    assert claim(store).id == survivor
    dead = must_get(store, doomed)
    assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, JOB_EXPIRED_ERROR, 0)
    assert dead.died_at == clock.now()
    assert queue.claim("w1") is None


def test_a_job_is_still_claimable_a_microsecond_before_it_expires(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue("just in time", EnqueueOpts(expires=10))
    clock.advance(timedelta(seconds=10) - timedelta(microseconds=1))
    assert claim(store).id == job_id


def _lapse_and_reclaim(store: Store, clock: ManualClock) -> tuple[Job, Job]:
    store.queue("jobs").enqueue({"n": 1})
    stale = claim(store, worker="slow")
    clock.advance(VISIBILITY)
    fresh = claim(store, worker="fast")
    assert (fresh.id, fresh.attempts, stale.attempts) == (stale.id, 2, 1)
    return stale, fresh


FENCED_CALLS = {
    "ack": lambda job: job.ack(),
    "retry on the curve": lambda job: job.retry("late"),
    "retry with a delay": lambda job: job.retry("late", delay=1),
    "fail": lambda job: job.fail("late"),
    "heartbeat": lambda job: job.heartbeat(),
}


@pytest.mark.parametrize("call", FENCED_CALLS)
def test_a_worker_whose_lease_lapsed_and_was_reclaimed_gets_lease_lost_and_changes_nothing(
    store: Store, clock: ManualClock, call: str
) -> None:
    stale, fresh = _lapse_and_reclaim(store, clock)
    before = must_get(store, fresh.id)
    assert (before.state, before.worker_id, before.attempts) == (JobState.RUNNING, "fast", 2)
    with pytest.raises(LeaseLost):
        FENCED_CALLS[call](stale)
    assert store.get_job(fresh.id) == before
    fresh.ack()
    with pytest.raises(LeaseLost):
        FENCED_CALLS[call](stale)
    assert store.get_job(fresh.id) is None


def test_each_claim_of_a_job_holds_a_greater_fence_than_the_one_before(store: Store, clock: ManualClock) -> None:
    stale, fresh = _lapse_and_reclaim(store, clock)
    assert (stale.id, stale.fence) != (fresh.id, fresh.fence)
    assert stale.id == fresh.id
    assert fresh.fence > stale.fence


@pytest.mark.parametrize("call", FENCED_CALLS)
def test_a_finished_job_cannot_be_finished_twice(store: Store, call: str) -> None:
    store.queue("jobs").enqueue("once")
    job = claim(store)
    job.fail("first")
    before = store.get_job(job.id)
    with pytest.raises(LeaseLost):
        FENCED_CALLS[call](job)
    assert store.get_job(job.id) == before


def test_a_lapsed_lease_nobody_reclaimed_still_lets_its_worker_finish(store: Store, clock: ManualClock) -> None:
    store.queue("jobs").enqueue("slow")
    job = claim(store)
    clock.advance(VISIBILITY * 2)
    info = must_get(store, job.id)
    assert info.state is JobState.RUNNING  # a lapse is noticed by the next claim, not by the clock
    job.heartbeat()
    job.ack()
    assert store.get_job(job.id) is None


def test_a_lapsed_lease_with_attempts_left_is_claimed_again_with_the_next_attempt(
    store: Store, clock: ManualClock
) -> None:
    job_id = store.queue("jobs").enqueue("again")
    first = claim(store)
    clock.advance(VISIBILITY - timedelta(microseconds=1))
    assert store.queue("jobs").claim("w2") is None
    clock.advance(timedelta(microseconds=1))
    second = claim(store, worker="w2")
    assert (second.id, second.attempts, second.worker_id) == (job_id, 2, "w2")
    assert second.lease_until == clock.now() + VISIBILITY
    assert first.attempts == 1


def test_a_lapsed_lease_on_the_last_attempt_goes_dead_on_the_next_claim(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue("fragile", EnqueueOpts(max_attempts=1))
    claim(store)
    clock.advance(VISIBILITY)
    assert store.queue("jobs").claim("w2") is None
    dead = must_get(store, job_id)
    assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, LEASE_EXPIRED_ERROR, 1)
    assert dead.died_at == clock.now()
    assert (dead.worker_id, dead.lease_until) == (None, None)


def test_heartbeat_moves_the_lease_to_a_visibility_timeout_from_now(store: Store, clock: ManualClock) -> None:
    store.queue("jobs").enqueue("long")
    job = claim(store)
    clock.advance(200)
    new_lease = job.heartbeat()
    assert new_lease == clock.now() + VISIBILITY
    assert job.lease_until == new_lease
    info = must_get(store, job.id)
    assert info.lease_until == new_lease
    clock.advance(200)  # 400 s after the claim: the original lease would have lapsed
    assert store.queue("jobs").claim("w2") is None
    job.ack()


def test_retry_on_the_curve_waits_5_10_20_40_seconds_then_buries_with_the_last_error(
    store: Store, clock: ManualClock
) -> None:
    job_id = store.queue("jobs").enqueue("flaky", EnqueueOpts(max_attempts=5))
    for attempt, wait in enumerate([5, 10, 20, 40], start=1):
        job = claim(store)
        assert job.attempts == attempt
        job.retry(f"failure {attempt}")
        info = must_get(store, job_id)
        assert (info.state, info.last_error, info.attempts) == (JobState.PENDING, f"failure {attempt}", attempt)
        assert info.run_at == clock.now() + timedelta(seconds=wait)
        assert (info.worker_id, info.lease_until) == (None, None)
        clock.advance(wait - 1)
        assert store.queue("jobs").claim("w1") is None
        clock.advance(1)
    last = claim(store)
    assert last.attempts == 5
    last.retry(ValueError("final straw"))
    dead = must_get(store, job_id)
    assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, "final straw", 5)
    assert dead.died_at == clock.now()
    assert store.queue("jobs").claim("w1") is None


def test_an_explicit_retry_delay_replaces_the_curve(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue("later")
    claim(store).retry("not yet", delay=timedelta(minutes=7))
    info = must_get(store, job_id)
    assert info.run_at == clock.now() + timedelta(minutes=7)
    claim_at = clock.advance(timedelta(minutes=7))
    job = claim(store)
    job.retry("zero wait", delay=0)
    assert claim(store).run_at == claim_at


def test_a_job_exhausts_its_default_three_attempts_and_goes_dead_with_the_last_error(
    store: Store, clock: ManualClock
) -> None:
    job_id = store.queue("jobs").enqueue("doomed")
    for attempt in (1, 2, 3):
        job = claim(store)
        job.retry(KeyError("missing") if attempt == 3 else f"error {attempt}", delay=0)
    dead = must_get(store, job_id)
    assert (dead.state, dead.attempts, dead.max_attempts) == (JobState.DEAD, 3, 3)
    assert dead.last_error == "'missing'"
    assert store.queue("jobs").claim("w1") is None


def test_fail_buries_the_job_at_once_whatever_attempts_remain(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue("hopeless", EnqueueOpts(max_attempts=10))
    claim(store).fail(RuntimeError())
    dead = must_get(store, job_id)
    assert (dead.state, dead.attempts, dead.last_error) == (JobState.DEAD, 1, "RuntimeError")
    assert dead.died_at == clock.now()


def test_get_job_reports_pending_then_running_then_dead_and_none_once_acked(store: Store, clock: ManualClock) -> None:
    enqueued_at = clock.now()
    opts = EnqueueOpts(delay=5, priority=3, max_attempts=4, expires=timedelta(hours=1))
    job_id = store.queue("jobs").enqueue({"k": [1, "two"]}, opts)

    pending = must_get(store, job_id)
    assert job_fields(pending) == {
        "id": job_id,
        "queue": "jobs",
        "payload": {"k": [1, "two"]},
        "state": JobState.PENDING,
        "priority": 3,
        "run_at": enqueued_at + timedelta(seconds=5),
        "expires_at": enqueued_at + timedelta(hours=1),
        "attempts": 0,
        "max_attempts": 4,
        "last_error": None,
        "schedule": None,
        "boundary": None,
        "enqueued_at": enqueued_at,
        "worker_id": None,
        "lease_until": None,
        "died_at": None,
        "task": None,
        "last_traceback": None,
        "unique_key": None,
        "ordering_key": None,
        "waiting": False,
        "cancel_requested": False,
        "trace": None,
        "claimed_at": None,
        "rate_key": None,
        "errors": (),  # its queue keeps no results: no attempt is logged (ADR 064)
        "steps": (),  # it ran no step and sleeps for nothing (ADR 069)
        "waits_for": None,
        "parents": (),  # it waits on no job, and none on it (ADR 073)
        "waiting_on": (),
        "children": (),
    }

    claimed_at = clock.advance(5)
    job = claim(store)
    running = must_get(store, job_id)
    assert job_fields(running) == {
        **job_fields(pending),
        "state": JobState.RUNNING,
        "attempts": 1,
        "worker_id": "w1",
        "lease_until": claimed_at + VISIBILITY,
        "claimed_at": claimed_at,
    }
    job.fail("gave up")
    dead = must_get(store, job_id)
    assert job_fields(dead) == {
        **job_fields(pending),
        "state": JobState.DEAD,
        "attempts": 1,
        "last_error": "gave up",
        "died_at": claimed_at,
    }
    for info in (pending, running, dead):
        assert_utc(info.run_at, info.expires_at, info.enqueued_at, info.lease_until, info.died_at)

    other = store.queue("jobs").enqueue("acked")
    claim(store).ack()
    assert store.get_job(other) is None


def test_a_claimed_job_carries_exactly_the_fields_get_job_reports(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue(["payload"], EnqueueOpts(priority=2, max_attempts=6, expires=600))
    job = claim(store)
    info = must_get(store, job_id)
    assert job_fields(job) == job_fields(info)
    assert_utc(job.run_at, job.expires_at, job.enqueued_at, job.lease_until)


def test_get_job_of_an_id_that_never_existed_is_none(store: Store) -> None:
    store.queue("jobs").enqueue("x")
    for job_id in (0, -1, 10**9, 2**63 - 1, 2**63):
        assert store.get_job(job_id) is None
    with pytest.raises(TypeError):
        store.get_job("1")  # type: ignore[arg-type]


def test_requeue_dead_brings_a_dead_job_back_with_zero_attempts_and_its_last_error(
    store: Store, clock: ManualClock
) -> None:
    job_id = store.queue("jobs").enqueue("phoenix", EnqueueOpts(priority=4, max_attempts=2, expires=60))
    claim(store).fail("first death")
    requeued_at = clock.advance(30)
    assert store.requeue_dead(job_id) is True
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 0, "first death")
    assert (info.run_at, info.expires_at, info.died_at) == (requeued_at, None, None)
    assert (info.priority, info.max_attempts, info.payload) == (4, 2, "phoenix")
    clock.advance(3600)  # it no longer expires
    job = claim(store)
    assert (job.id, job.attempts) == (job_id, 1)
    assert store.requeue_dead(job_id) is False  # running, not dead
    job.ack()
    assert store.requeue_dead(job_id) is False  # gone
    assert store.requeue_dead(10**9) is False


PAYLOADS: list[object] = [
    None,
    True,
    0,
    -(2**63),
    2**64 + 1,
    1.5,
    1e300,
    -0.0,
    "",
    "naïve ☃ \u0000 nul and \U0001f600",
    [],
    {},
    {"nested": {"list": [1, [2, [3]]], "unicode": "ключ"}, "z": None, "a": False},
    b"",
    b"\x00\xff raw \x00",
]


def test_payloads_round_trip_exactly(store: Store) -> None:
    queue = store.queue("jobs")
    ids = [queue.enqueue(payload) for payload in PAYLOADS]
    seen = []
    for job_id, payload in zip(ids, PAYLOADS, strict=True):
        info = must_get(store, job_id)
        job = claim(store)
        for got in (info.payload, job.payload):
            assert got == payload
            assert type(got) is type(payload)
        seen.append(job.payload)
        job.ack()
    codec = JsonCodec()
    assert [codec.encode(p) for p in seen] == [codec.encode(p) for p in PAYLOADS]


def test_a_waiting_claim_returns_a_job_enqueued_while_it_waits(store: Store) -> None:
    got: list[Job | None] = []
    waiter = threading.Thread(target=lambda: got.append(store.queue("jobs").claim("w1", wait=60, poll_interval=0.05)))
    waiter.start()
    job_id = store.queue("jobs").enqueue("wake up")
    waiter.join(PROGRESS_TIMEOUT)
    assert not waiter.is_alive()
    assert [job.id if job else None for job in got] == [job_id]


def test_a_waiting_claim_returns_none_once_its_wait_has_passed_on_the_store_clock(
    store: Store, clock: ManualClock
) -> None:
    got: list[Job | None] = []
    waiter = threading.Thread(target=lambda: got.append(store.queue("jobs").claim("w1", wait=30, poll_interval=0.02)))
    waiter.start()
    try:
        for _ in range(29):
            clock.advance(1)
        waiter.join(0.1)
        assert waiter.is_alive(), "the wait is measured on the store's clock, which has not reached it"
        for _ in range(600):  # the wait started at or after T0, so it ends within 30 more seconds of the clock
            clock.advance(1)
            waiter.join(0.05)
            if not waiter.is_alive():
                break
        assert not waiter.is_alive()
        assert got == [None]
    finally:
        clock.advance(3600)
        waiter.join(PROGRESS_TIMEOUT)


def test_a_waiting_claim_takes_a_delayed_job_when_the_clock_reaches_it(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue("soon", EnqueueOpts(delay=10))
    got: list[Job | None] = []
    waiter = threading.Thread(target=lambda: got.append(store.queue("jobs").claim("w1", wait=60, poll_interval=0.02)))
    waiter.start()
    clock.advance(10)
    waiter.join(PROGRESS_TIMEOUT)
    assert not waiter.is_alive()
    assert [job.id if job else None for job in got] == [job_id]


def test_a_store_refuses_every_call_once_closed_and_closing_twice_is_harmless(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue("x")
    with store:
        pass  # leaving the block closes it
    store.close()
    for call in (
        lambda: store.queue("jobs"),
        lambda: store.outbox("mail"),
        lambda: queue.enqueue("y"),
        lambda: queue.claim("w1"),
        lambda: store.get_job(job_id),
        lambda: store.requeue_dead(job_id),
        lambda: store.transaction(),
        lambda: store.try_lock("resource", "me", 5),
        lambda: store.schedules(),
        lambda: store.tick(),
        lambda: store.migrate(),
    ):
        with pytest.raises(StoreClosed):
            call()


def test_migrate_is_idempotent_and_keeps_what_is_stored(store: Store) -> None:
    job_id = store.queue("jobs").enqueue("kept")
    store.migrate()
    store.migrate()
    info = must_get(store, job_id)
    assert info.payload == "kept"


def test_a_claimed_job_is_one_claim_whose_identity_survives_heartbeats(store: Store, clock: ManualClock) -> None:
    store.queue("jobs").enqueue("long")
    job = claim(store)
    held = {job}
    before = hash(job)
    clock.advance(100)
    job.heartbeat()
    assert job in held
    assert hash(job) == before
    clock.advance(VISIBILITY)  # the lease lapses and the job is claimed again: another claim
    again = claim(store, worker="w2")
    assert again.id == job.id
    assert again != job
    assert again not in held


def test_release_hands_a_job_back_at_once_without_spending_its_attempt(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("jobs").enqueue("unfinished", EnqueueOpts(max_attempts=1))
    job = claim(store)
    job.release()
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.worker_id, info.lease_until) == (JobState.PENDING, 0, None, None)
    assert info.run_at == job.run_at
    with pytest.raises(LeaseLost):
        job.ack()  # the released claim is over
    again = claim(store, worker="w2")
    assert (again.id, again.attempts) == (job_id, 1)  # its only attempt is still there
    with pytest.raises(LeaseLost):
        job.release()
    again.ack()
