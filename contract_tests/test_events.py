"""Events (ADR 069): ``job.wait_for(name, timeout)`` sleeps until ``emit(name, payload)``, or times out.

The first emit of a name wins and is kept for ``keep`` (``DEFAULT_EVENT_KEEP`` unless the emit
says), so a wait that begins after it still gets its payload; every waiter wakes, without
spending an attempt. ``emit_tx`` emits inside the caller's transaction. A wait that reaches its
timeout raises ``EventTimeout``, and so does every later run of the job at that wait. Time moves
only through the store's ``ManualClock``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import (
    DEFAULT_EVENT_KEEP,
    EnqueueOpts,
    EventTimeout,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    JobState,
    JobSuspended,
    ManualClock,
    ReservedName,
    Store,
    WaitInfo,
)
from tests.support import must_claim, must_get

from ._engines import T0


class Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def test_an_event_emitted_before_the_wait_is_seen_at_once(store: Store) -> None:
    queue = store.queue("jobs")
    queue.enqueue(None)
    assert store.emit("paid:7", {"amount": 12}) is True
    job = must_claim(queue)
    assert job.wait_for("paid:7", timeout=60) == {"amount": 12}
    job.ack()


def test_a_waiter_sleeps_until_the_emit_and_then_gets_its_payload(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None, EnqueueOpts(max_attempts=1))
    job = must_claim(queue)
    with pytest.raises(JobSuspended):
        job.wait_for("approved", timeout=timedelta(hours=1))
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.sleeping) == (JobState.PENDING, 0, True)
    assert info.waits_for == WaitInfo(T0 + timedelta(hours=1), "approved")
    assert queue.claim("w") is None
    clock.advance(5)
    assert store.emit("approved", "yes") is True
    assert not must_get(store, job_id).sleeping
    again = must_claim(queue)
    assert again.attempts == 1  # the wait spent no attempt (max_attempts is 1)
    assert again.wait_for("approved", timeout=timedelta(hours=1)) == "yes"
    again.ack()


def test_every_waiter_wakes_and_the_first_emit_wins(store: Store) -> None:
    queue = store.queue("jobs")
    for n in range(3):
        queue.enqueue(n)
    for _ in range(3):
        with pytest.raises(JobSuspended):
            must_claim(queue).wait_for("go", timeout=600)
    assert queue.claim("w") is None
    assert store.emit("go", 1) is True
    assert store.emit("go", 2) is False
    woken = [must_claim(queue) for _ in range(3)]
    assert [job.wait_for("go", timeout=600) for job in woken] == [1, 1, 1]


def test_a_wait_that_reaches_its_timeout_raises_event_timeout_and_keeps_raising_it(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    queue.enqueue(None)
    with pytest.raises(JobSuspended):
        must_claim(queue).wait_for("never", timeout=30)
    clock.advance(29)
    assert queue.claim("w") is None
    clock.advance(1)
    job = must_claim(queue)
    with pytest.raises(EventTimeout):
        job.wait_for("never", timeout=30)
    job.retry("handled later", delay=0)
    store.emit("never", "too late")
    with pytest.raises(EventTimeout):  # the outcome of a wait is kept: a later run sees the same
        must_claim(queue).wait_for("never", timeout=30)


def test_an_event_is_kept_for_its_keep_and_then_a_new_emit_wins(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    assert store.emit("tick", "old", keep=10) is True
    clock.advance(10)
    queue.enqueue(None)
    with pytest.raises(JobSuspended):
        must_claim(queue).wait_for("tick", timeout=60)
    assert store.emit("tick", "new") is True
    assert must_claim(queue).wait_for("tick", timeout=60) == "new"
    assert timedelta(days=1) == DEFAULT_EVENT_KEEP


def test_emit_tx_wakes_waiters_at_commit_and_a_rollback_emits_nothing(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    with pytest.raises(JobSuspended):
        must_claim(queue).wait_for("shipped", timeout=600)

    def rolled_back() -> None:
        with store.transaction() as tx:
            store.emit_tx(tx, "shipped", "lost")
            raise Rollback

    with pytest.raises(Rollback):
        rolled_back()
    assert must_get(store, job_id).sleeping
    with store.transaction() as tx:
        assert store.emit_tx(tx, "shipped", "box") is True
    assert must_claim(queue).wait_for("shipped", timeout=600) == "box"


def test_bad_event_names_keeps_and_payloads_are_refused_before_any_io(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    for name, error in (("", InvalidName), ("__alkstore_x", ReservedName)):
        with pytest.raises(error):
            store.emit(name, 1)
    for keep in (0, -1):
        with pytest.raises(InvalidOptions):
            store.emit("fine", 1, keep=keep)
    with pytest.raises(InvalidPayload):
        store.emit("fine", object())
    job = must_claim(queue)
    with pytest.raises(InvalidOptions):
        job.wait_for("fine", timeout=-1)
    with pytest.raises(InvalidName):
        job.wait_for(" fine", timeout=1)
    assert store.emit("fine", 1) is True  # nothing of the refused ones was stored
    assert must_get(store, job_id).state is JobState.RUNNING
