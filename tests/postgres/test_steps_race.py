"""A wait and an emit of one event, racing on PostgreSQL, never miss each other (ADR 069); nor do an
operator's skipped step and a claim of its job (ADR 077).

The engine's ``suspend`` of a job waiting for an event and an ``emit`` of that event run at once on
two threads, many times: whichever commits first, the job ends due at once (the emit found its wait,
or the wait found the emit), never asleep until its timeout. Both take the event name's advisory
lock in a statement before the one that reads, so the second reads what the first committed.

Another connection's open transaction that emits (``emit_tx``) holds its name: an emit and a wait of
that name wait for it to end and then see its outcome; an emit of another name never waits for it,
nor purges the event it stores when that had replaced an expired one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import psycopg
import pytest

from alkstore import JobHeld, JobSuspended, ManualClock, Store
from alkstore.engine import EventRecord, Held, Wait
from tests.postgres.conftest import OpenStore, engine_of
from tests.support import PATIENCE, must_claim, must_get, wait_until

ROUNDS = 40


def at_once(*calls: Callable[[], object]) -> None:
    """Run ``calls`` on threads of their own, released together; raise the first error any raised."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            barrier.wait(PATIENCE)
            call()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    if errors:
        raise errors[0]


def test_a_wait_and_an_emit_racing_never_leave_the_job_asleep(open_store: OpenStore, clock: ManualClock) -> None:
    store = open_store(clock=clock)
    engine: Any = engine_of(store)
    queue = store.queue("racing")
    now = clock.now()
    for round_ in range(ROUNDS):
        job_id = queue.enqueue(round_)
        job = must_claim(queue)
        name = f"race:{round_}"
        held = Held(job.id, job.fence)
        wait = Wait(now + timedelta(hours=1), name)
        event = EventRecord(name, b'"go"', now, now + timedelta(days=1))
        at_once(partial(engine.suspend, held, wait, now), partial(engine.emit, event))
        info = store.get_job(job_id)
        assert info is not None
        assert info.run_at <= now, f"round {round_}: the job sleeps until its timeout, the emit missed"
        again = must_claim(queue)
        assert again.id == job_id
        again.ack()


class Background:
    """A call on a thread of its own: its result or what it raised, once it returns."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.outcome: list[object] = []
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            self.outcome.append(call())
        except BaseException as exc:
            self.outcome.append(exc)

    def result(self) -> object:
        """What the call returned or raised; a failure if it is still blocked after ``PATIENCE``."""
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive(), "the call is still blocked"
        return self.outcome[0]


def blocked_by(db: psycopg.Connection[Any], holder: psycopg.Connection[Any]) -> int:
    """How many sessions wait for a lock ``holder``'s session holds, right now."""
    row = db.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (holder.info.backend_pid,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_an_emit_of_another_name_neither_waits_for_an_open_emit_nor_purges_the_event_it_replaced(
    store: Store, clock: ManualClock, pg_dsn: str
) -> None:
    assert store.emit("open:old", "expired", keep=1)
    clock.advance(10)  # open:old expired: the next emit of another name may purge it
    with psycopg.connect(pg_dsn) as other:
        assert store.emit_tx(other, "open:old", "fresh")  # replaces the expired row, and holds it
        emitting = Background(lambda: store.emit("open:other", "mine"))
        assert emitting.result() is True  # it returned while the other transaction was still open
        other.commit()
    queue = store.queue("open-purge")
    queue.enqueue(None)
    job = must_claim(queue)
    assert job.wait_for("open:old", timeout=60) == "fresh"  # the emit that committed is kept
    job.ack()


@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_an_emit_and_a_wait_of_a_name_an_open_transaction_emits_wait_for_it_then_see_its_outcome(
    store: Store, clock: ManualClock, pg_dsn: str, db: psycopg.Connection[Any], ending: str
) -> None:
    name = f"open:{ending}"
    queue = store.queue(f"open-{ending}")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    with psycopg.connect(pg_dsn) as other:
        assert store.emit_tx(other, name, "theirs")
        emitting = Background(lambda: store.emit(name, "ours"))
        waiting = Background(lambda: job.wait_for(name, timeout=timedelta(hours=1)))
        wait_until(lambda: blocked_by(db, other) == 2, "the emit and the wait to wait for the name")
        assert emitting.outcome == []
        assert waiting.outcome == []
        if ending == "commit":
            other.commit()
        else:
            other.rollback()
        first = emitting.result()
    assert isinstance(waiting.result(), JobSuspended)
    assert first is (ending == "rollback")  # the first emit that committed wins
    info = must_get(store, job_id)
    assert info.run_at <= clock.now(), "the waiter was left asleep until its timeout"
    again = must_claim(queue)
    assert again.wait_for(name, timeout=60) == ("theirs" if ending == "commit" else "ours")
    again.ack()


def test_a_skipped_step_and_a_claim_racing_never_lose_the_step(open_store: OpenStore, clock: ManualClock) -> None:
    """Whichever commits first: the skip stored the step and the claim's run gets it without running it, or the
    claim came first and the skip was refused (the run then runs the step); never a skip the run misses."""
    store = open_store(clock=clock)
    queue = store.queue("racing")
    outcomes: set[str] = set()
    for round_ in range(ROUNDS):
        job_id = queue.enqueue(round_)
        said: list[object] = []

        def skip(job_id: int = job_id, said: list[object] = said) -> None:
            try:
                said.append(store.skip_step(job_id, "charge", "by hand"))
            except JobHeld:
                said.append("held")

        claimed: list[Any] = []

        def claim(claimed: list[Any] = claimed) -> None:
            claimed.append(queue.claim("w"))

        at_once(skip, claim)
        (job,) = claimed
        if job is None:  # the claim passed the job by while the skip held its row (SKIP LOCKED): the next takes it
            assert said != ["held"]
            job = must_claim(queue)
        assert job.id == job_id
        ran: list[int] = []
        result = job.step("charge", lambda ran=ran: ran.append(1) or "charged")
        if said == ["held"]:
            assert (result, ran) == ("charged", [1]), f"round {round_}"
        else:
            assert (result, ran) == ("by hand", []), f"round {round_}: the run missed the skipped step"
        outcomes.add(str(said[0]))
        job.ack()
    assert outcomes  # which orders came up depends on the machine; each round holds either way
