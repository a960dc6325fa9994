"""Queue configuration (ADR 016): what one store sets for a queue, every store on the storage uses.

A second ``Store`` over the same engine stands for another process: it has its own cache of
what it read, so it sees a change within ``CONFIG_TTL`` of its clock, and a fresh one sees it
at once. Enqueues stamp attempts and priority from the configuration, claims and heartbeats
lease for its visibility timeout (a job's own wins), retries follow its curve, and the
scheduler's fires resolve over it as they are made.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidOptions, Job, JobState, ManualClock, QueueDefaults, ScheduleOpts, Store
from alkstore.store._kernel import CONFIG_TTL
from tests.support import must_get

from ._runtimes import store_of
from .test_validation import not_refused

SECOND = timedelta(seconds=1)
PLAIN = QueueDefaults(300 * SECOND, 3, 5 * SECOND, timedelta(hours=1), 0)
OUTBOX = QueueDefaults(60 * SECOND, 5, 5 * SECOND, timedelta(hours=1), 0)
CONFIGURED = QueueDefaults(30 * SECOND, 7, 2 * SECOND, 60 * SECOND, 4)


def other_process(store: Store, clock: ManualClock) -> Store:
    """Another store on the same storage, with a cache of its own (not closed: it shares the engine)."""
    other: Store = store_of(store.engine, clock=clock)
    return other


def configure_all(store: Store, queue: str = "jobs") -> QueueDefaults:
    return store.queue(queue).configure(
        visibility_timeout=30, max_attempts=7, backoff_base=timedelta(seconds=2), backoff_cap=60, priority=4
    )


def claimed(store: Store, queue: str = "jobs", worker: str = "w1") -> Job:
    job = store.queue(queue).claim(worker)
    assert job is not None, f"expected a claimable job on {queue!r}"
    return job


def test_configure_returns_the_effective_defaults_and_replaces_what_was_stored(store: Store) -> None:
    queue = store.queue("jobs")
    assert queue.defaults() == PLAIN
    assert configure_all(store) == CONFIGURED
    assert queue.defaults() == CONFIGURED
    # A later call replaces the whole config: what it leaves out is derived again.
    partial = queue.configure(max_attempts=9)
    assert partial == QueueDefaults(300 * SECOND, 9, 5 * SECOND, timedelta(hours=1), 0)
    assert queue.defaults() == partial
    assert queue.configure() == PLAIN
    assert queue.defaults() == PLAIN
    assert store.queue("other").defaults() == PLAIN  # one queue's config is its own


def test_every_store_on_the_storage_sees_a_configuration_within_the_config_ttl(
    store: Store, clock: ManualClock
) -> None:
    other = other_process(store, clock)
    assert other.queue("jobs").defaults() == PLAIN  # read, and cached
    configure_all(store)
    assert other_process(store, clock).queue("jobs").defaults() == CONFIGURED  # a new process reads it at once
    clock.advance(CONFIG_TTL)
    assert other.queue("jobs").defaults() == CONFIGURED
    store.queue("jobs").configure()
    clock.advance(CONFIG_TTL)
    assert other.queue("jobs").defaults() == PLAIN


def test_enqueues_on_any_store_stamp_attempts_and_priority_from_the_configuration(
    store: Store, clock: ManualClock
) -> None:
    configure_all(store)
    other = other_process(store, clock)
    plain = store.get_job(other.queue("jobs").enqueue("plain"))
    chosen = store.get_job(other.queue("jobs").enqueue("chosen", EnqueueOpts(priority=-2, max_attempts=1)))
    with other.transaction() as tx:
        in_tx = other.enqueue_tx(tx, "jobs", "in a transaction")
    in_tx_job = store.get_job(in_tx)
    assert plain is not None
    assert chosen is not None
    assert in_tx_job is not None
    assert (plain.max_attempts, plain.priority) == (7, 4)
    assert (chosen.max_attempts, chosen.priority) == (1, -2)  # per-call options still win
    assert (in_tx_job.max_attempts, in_tx_job.priority) == (7, 4)
    unconfigured = store.get_job(other.queue("elsewhere").enqueue("x"))
    assert unconfigured is not None
    assert (unconfigured.max_attempts, unconfigured.priority) == (3, 0)


def test_claims_and_heartbeats_lease_for_the_configured_visibility_and_a_jobs_own_wins(
    store: Store, clock: ManualClock
) -> None:
    configure_all(store)
    other = other_process(store, clock)
    queue = store.queue("jobs")
    plain_id = queue.enqueue("plain")
    own_id = queue.enqueue("own", EnqueueOpts(visibility_timeout=90))
    now = clock.now()
    plain, own = claimed(other), claimed(other)
    assert (plain.id, own.id) == (plain_id, own_id)
    assert plain.lease_until == now + 30 * SECOND
    assert own.lease_until == now + 90 * SECOND
    clock.advance(10)
    assert plain.heartbeat() == clock.now() + 30 * SECOND
    assert own.heartbeat() == clock.now() + 90 * SECOND
    clock.advance(30)  # the plain job's lease lapsed, the other's has 60 s left
    again = claimed(store, worker="w2")
    assert (again.id, again.attempts) == (plain_id, 2)
    assert store.queue("jobs").claim("w2") is None


def test_retries_follow_the_configured_curve_and_attempts(store: Store, clock: ManualClock) -> None:
    store.queue("jobs").configure(max_attempts=4, backoff_base=2, backoff_cap=5)
    job_id = store.queue("jobs").enqueue("flaky")
    other = other_process(store, clock)
    waits = []
    for _ in range(3):
        job = claimed(other)
        job.retry("again")
        info = must_get(store, job_id)
        assert info.state is JobState.PENDING
        waits.append(info.run_at - clock.now())
        clock.set(info.run_at)
    assert waits == [2 * SECOND, 4 * SECOND, 5 * SECOND]  # base, doubled, capped
    claimed(other).retry("last")
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.last_error) == (JobState.DEAD, 4, "last")


def test_the_schedulers_fires_resolve_over_the_configuration_as_they_are_made(store: Store, clock: ManualClock) -> None:
    other = other_process(store, clock)
    assert other.queue("reports").defaults() == PLAIN  # cached, stale once configured below
    store.schedule("plain", "@every 1m", "reports", "p")
    store.schedule("stamped", "@every 1m", "reports", "s", ScheduleOpts(priority=8, max_attempts=2))
    configure_all(store, "reports")
    clock.advance(60)
    fires = other.tick()  # no wait for the cache: the tick reads stored configs itself
    assert len(fires) == 2
    by_schedule = {fire.schedule: store.get_job(fire.job_id) for fire in fires}
    plain, stamped = by_schedule["plain"], by_schedule["stamped"]
    assert plain is not None
    assert stamped is not None
    assert (plain.priority, plain.max_attempts) == (4, 7)
    assert (stamped.priority, stamped.max_attempts) == (8, 2)  # the schedule's own options win
    now = clock.now()
    first = claimed(other_process(store, clock), "reports")
    assert first.lease_until == now + 30 * SECOND


def test_jobs_already_queued_keep_their_stamps_and_take_the_new_lease_at_their_next_claim(
    store: Store, clock: ManualClock
) -> None:
    job_id = store.queue("jobs").enqueue("early")
    configure_all(store)
    now = clock.now()
    job = claimed(store)
    assert job.id == job_id
    assert (job.max_attempts, job.priority) == (3, 0)  # stamped at enqueue, before the config
    assert job.lease_until == now + 30 * SECOND
    job.retry("boom")
    info = must_get(store, job_id)
    assert info.run_at == now + 2 * SECOND  # the curve is the queue's as the retry is made


def test_an_outboxs_backing_queue_keeps_60_5_5_until_configured(store: Store, clock: ManualClock) -> None:
    outbox = store.outbox("mail")
    assert other_process(store, clock).outbox("mail").configure() == OUTBOX
    configured = outbox.configure(visibility_timeout=10, max_attempts=2, backoff_base=1)
    assert configured == QueueDefaults(10 * SECOND, 2, SECOND, timedelta(hours=1), 0)
    assert store.queue("mail").defaults() == PLAIN  # a plain queue of the same name is another queue
    message_id = outbox.enqueue("hello")
    info = must_get(store, message_id)
    assert info.max_attempts == 2
    failures: list[object] = []

    def refuse(payload: object, job: Job) -> None:
        assert job.lease_until is not None
        failures.append(job.lease_until - clock.now())
        raise RuntimeError("no")

    assert outbox.run_once("courier", refuse) is True
    info = must_get(store, message_id)
    assert info.run_at == clock.now() + SECOND
    clock.advance(1)
    assert outbox.run_once("courier", refuse) is True
    info = must_get(store, message_id)
    assert info.state is JobState.DEAD
    assert failures == [10 * SECOND, 10 * SECOND]
    assert outbox.configure() == OUTBOX


BAD_CONFIGS: dict[str, dict[str, Any]] = {
    "zero visibility": {"visibility_timeout": 0},
    "negative visibility": {"visibility_timeout": -1},
    "text visibility": {"visibility_timeout": "30"},
    "nan visibility": {"visibility_timeout": float("nan")},
    "a century and a day of visibility": {"visibility_timeout": timedelta(days=36501)},
    "zero attempts": {"max_attempts": 0},
    "bool attempts": {"max_attempts": True},
    "float attempts": {"max_attempts": 2.0},
    "priority above int32": {"priority": 2**31},
    "zero base": {"backoff_base": 0},
    "base above cap": {"backoff_base": 10, "backoff_cap": 5},
    "cap below the derived base": {"backoff_cap": 1},
    "base above the derived cap": {"backoff_base": timedelta(hours=2)},
}


def test_a_bad_configuration_is_refused_and_what_was_stored_stays(store: Store, clock: ManualClock) -> None:
    configure_all(store)
    queue, outbox = store.queue("jobs"), store.outbox("mail")
    assert not_refused(InvalidOptions, BAD_CONFIGS, lambda case: queue.configure(**BAD_CONFIGS[case])) == []
    assert not_refused(InvalidOptions, BAD_CONFIGS, lambda case: outbox.configure(**BAD_CONFIGS[case])) == []
    fresh = other_process(store, clock)
    assert fresh.queue("jobs").defaults() == CONFIGURED
    assert fresh.outbox("mail").configure() == OUTBOX


def test_a_configuration_is_judged_before_the_engine_is_touched(store: Store) -> None:
    queue, outbox = store.queue("jobs"), store.outbox("mail")
    store.close()
    with pytest.raises(InvalidOptions):
        queue.configure(max_attempts=0)
    with pytest.raises(InvalidOptions):
        outbox.configure(visibility_timeout=-5)
