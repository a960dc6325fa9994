"""The outbox: a validated handle over a reserved backing queue with the 60/5/5 set, delivered by ``run_once``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import EnqueueOpts, InvalidName, Job, JobState, LeaseLost, ManualClock, ReservedName, Store
from tests.support import must_get


class DeliveryFailed(Exception):
    """What a failing delivery raises."""


def refuse(payload: object, job: Job) -> None:
    raise DeliveryFailed(f"smtp said no to {payload}")


def test_an_outbox_handle_validates_its_name(store: Store) -> None:
    with pytest.raises(InvalidName):
        store.outbox("")
    with pytest.raises(ReservedName):
        store.outbox("__alkstore_mail")
    outbox = store.outbox("mail")
    assert outbox.name == "mail"


def test_the_backing_queue_is_reserved_and_reachable_only_through_the_outbox(store: Store) -> None:
    outbox = store.outbox("mail")
    assert outbox.queue.startswith("__alkstore_")
    outbox.enqueue("hello")
    with pytest.raises(ReservedName):
        store.queue(outbox.queue)
    with store.transaction() as tx, pytest.raises(ReservedName):
        store.enqueue_tx(tx, outbox.queue, "sneaky")
    with pytest.raises(ReservedName):
        store.schedule("sneaky", "@every 1s", outbox.queue)
    delivered: list[object] = []
    assert outbox.run_once("w1", lambda payload, job: delivered.append(payload)) is True
    assert outbox.run_once("w1", lambda payload, job: delivered.append(payload)) is False
    assert delivered == ["hello"]


def test_outbox_messages_get_60_s_leases_and_5_attempts_unless_max_attempts_says_otherwise(
    store: Store, clock: ManualClock
) -> None:
    outbox = store.outbox("mail")
    plain = outbox.enqueue("plain")
    capped = outbox.enqueue("capped", EnqueueOpts(max_attempts=2, priority=-1))
    info, capped_info = store.get_job(plain), store.get_job(capped)
    assert info is not None
    assert capped_info is not None
    assert (info.queue, info.max_attempts, info.priority, info.state) == (outbox.queue, 5, 0, JobState.PENDING)
    assert (capped_info.max_attempts, capped_info.priority) == (2, -1)
    leases: list[object] = []
    outbox.run_once("w1", lambda payload, job: leases.append(job.lease_until))
    assert leases == [clock.now() + timedelta(seconds=60)]


def test_run_once_acks_a_delivered_message_and_reports_an_empty_outbox(store: Store) -> None:
    outbox = store.outbox("mail")
    assert outbox.run_once("w1", refuse) is False
    message = outbox.enqueue({"to": "x@example.org"})
    seen: list[tuple[object, int, str | None]] = []
    assert outbox.run_once("w1", lambda payload, job: seen.append((payload, job.id, job.worker_id))) is True
    assert seen == [({"to": "x@example.org"}, message, "w1")]
    assert store.get_job(message) is None
    assert outbox.run_once("w1", refuse) is False


def test_a_failed_delivery_is_retried_on_the_5_s_curve_until_five_attempts_bury_it(
    store: Store, clock: ManualClock
) -> None:
    outbox = store.outbox("mail")
    message = outbox.enqueue("letter")
    for attempt, wait in enumerate([5, 10, 20, 40], start=1):
        assert outbox.run_once("w1", refuse) is True
        info = must_get(store, message)
        assert (info.state, info.attempts) == (JobState.PENDING, attempt)
        assert info.last_error == "smtp said no to letter"
        assert info.run_at == clock.now() + timedelta(seconds=wait)
        clock.advance(wait - 1)
        assert outbox.run_once("w1", refuse) is False
        clock.advance(1)
    assert outbox.run_once("w2", lambda payload, job: refuse(f"{payload} (last try)", job)) is True
    dead = must_get(store, message)
    assert (dead.state, dead.attempts) == (JobState.DEAD, 5)
    assert dead.last_error == "smtp said no to letter (last try)"
    clock.advance(timedelta(hours=2))
    assert outbox.run_once("w1", refuse) is False


def test_max_attempts_override_buries_a_message_sooner(store: Store, clock: ManualClock) -> None:
    outbox = store.outbox("mail")
    message = outbox.enqueue("once", EnqueueOpts(max_attempts=1))
    assert outbox.run_once("w1", refuse) is True
    dead = must_get(store, message)
    assert (dead.state, dead.attempts, dead.last_error) == (JobState.DEAD, 1, "smtp said no to once")


def test_a_slow_delivery_can_heartbeat_to_keep_its_message(store: Store, clock: ManualClock) -> None:
    outbox = store.outbox("mail")
    message = outbox.enqueue("big attachment")
    other_worker: list[bool] = []

    def slow(payload: object, job: Job) -> None:
        clock.advance(50)
        assert job.heartbeat() == clock.now() + timedelta(seconds=60)
        clock.advance(50)  # 100 s after the claim: past the original 60 s lease
        other_worker.append(outbox.run_once("w2", refuse))

    assert outbox.run_once("w1", slow) is True
    assert other_worker == [False]
    assert store.get_job(message) is None  # acked by w1


def test_no_heartbeat_runs_during_delivery_so_a_slow_delivery_loses_its_message(
    store: Store, clock: ManualClock
) -> None:
    outbox = store.outbox("mail")
    message = outbox.enqueue("big attachment")
    taken_over: list[bool] = []

    def quick(payload: object, job: Job) -> None:
        clock.advance(1)

    def too_slow(payload: object, job: Job) -> None:
        clock.advance(60)
        taken_over.append(outbox.run_once("w2", quick))

    with pytest.raises(LeaseLost):
        outbox.run_once("w1", too_slow)
    assert taken_over == [True]
    assert store.get_job(message) is None  # delivered and acked by w2
