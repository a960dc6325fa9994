"""Events (ADR 069): ``job.wait_for(name, timeout)`` sleeps until ``emit(name, payload)``, or times out.

The first emit of a name wins and is kept for ``keep`` (``DEFAULT_EVENT_KEEP`` unless the emit
says), so a wait that begins after it still gets its payload; every waiter wakes, without
spending an attempt. ``emit_tx`` emits inside the caller's transaction. A wait that reaches its
timeout raises ``EventTimeout``, and so does every later run of the job at that wait. Time moves
only through the store's ``ManualClock``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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

from ._engines import T0, EngineTarget


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


#: Payloads holding NUL, which PostgreSQL's text and jsonb refuse: kept as a job's payload is (as bytes).
NUL_PAYLOADS = {"nul:json": {"note": "a\x00b", "\x00": ["\x00"]}, "nul:raw": b"\x00\xff\x00"}


def test_an_events_payload_with_nul_comes_back_intact_to_a_waiter_as_a_jobs_payload_does(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    for name, payload in NUL_PAYLOADS.items():
        job_id = queue.enqueue(payload)
        job = must_claim(queue)
        assert job.payload == payload
        with pytest.raises(JobSuspended):  # asleep first, so the emit wakes it
            job.wait_for(name, timeout=600)
        assert store.emit(name, payload) is True
        job = must_claim(queue)
        assert job.wait_for(name, timeout=600) == payload  # read from the event
        with pytest.raises(JobSuspended):
            job.sleep(60)
        clock.advance(60)
        job = must_claim(queue)
        assert job.id == job_id
        assert job.wait_for(name, timeout=600) == payload  # read from the wait's checkpoint
        job.ack()


def test_a_lone_surrogate_in_an_events_payload_is_refused_as_in_a_jobs_and_nul_or_one_in_its_name_is_invalid(
    store: Store,
) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    for payload in ("\ud800", {"note": "a\udfffb"}, {"\udc80": 1}):
        with pytest.raises(InvalidPayload):
            queue.enqueue(payload)
        with pytest.raises(InvalidPayload):
            store.emit("odd", payload)
    job = must_claim(queue)
    for name in ("nul\x00", "\ud800", "a\udc80b"):
        with pytest.raises(InvalidName):
            store.emit(name, 1)
        with pytest.raises(InvalidName), store.transaction() as tx:
            store.emit_tx(tx, name, 1)
        with pytest.raises(InvalidName):
            job.wait_for(name, timeout=60)
    assert store.emit("odd", 1) is True  # nothing of the refused ones was stored
    assert must_get(store, job_id).state is JobState.RUNNING


# -- a property: however emits, waits and time interleave, each wait ends as a naive model says ------------


Op = tuple[str, int]


@settings(max_examples=15, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("emit"), st.integers(0, 1)),
            st.tuples(st.just("run"), st.just(0)),
            st.tuples(st.just("advance"), st.sampled_from([5, 30])),
        ),
        max_size=14,
    )
)
def test_every_wait_ends_with_the_first_emit_before_it_or_its_timeout_and_a_woken_job_never_sleeps_again(
    engine: EngineTarget, ops: list[Op]
) -> None:
    with engine.store(ManualClock(T0)) as store:
        clock = store.clock
        queue = store.queue("jobs")
        names = {queue.enqueue(n): f"e{n % 2}" for n in range(3)}
        first: dict[str, str] = {}  # the model: the first payload of each name
        deadlines: dict[int, Any] = {}
        outcomes: dict[int, str] = {}

        def run_one() -> bool:
            job = queue.claim("w")
            if job is None:  # then every job left sleeps, for an event not emitted, before its timeout
                for job_id in set(names) - set(outcomes):
                    assert job_id in deadlines, "a job never run is claimable"
                    assert names[job_id] not in first, "an emit did not wake its waiter"
                    assert clock.now() < deadlines[job_id], "a job past its timeout is not claimable"
                return False
            now = clock.now()
            name = names[job.id]
            first_run = job.id not in deadlines
            deadlines.setdefault(job.id, now + timedelta(seconds=60))
            expected = first.get(name, "timeout" if now >= deadlines[job.id] else "asleep")
            assert first_run or expected != "asleep", "a job ran before its event or its timeout"
            try:
                got = job.wait_for(name, timeout=60)
            except JobSuspended:
                got = "asleep"
            except EventTimeout:
                got = "timeout"
            assert got == expected
            if got != "asleep":
                outcomes[job.id] = got
                job.ack()
            return True

        for action, value in ops:
            if action == "emit":
                name = f"e{value}"
                payload = f"{name} at {(clock.now() - T0).total_seconds():g}"
                assert store.emit(name, payload) is (name not in first)
                first.setdefault(name, payload)
            elif action == "run":
                run_one()
            else:
                clock.advance(value)
        for _ in range(2):  # each job's first wait, then its timeout
            clock.advance(61)
            while run_one():
                pass
        assert set(outcomes) == set(names), "every job ended"
