"""A wait and an emit of one event, racing on PostgreSQL, never miss each other (ADR 069); nor do an
operator's skipped step and a claim of its job (ADR 077).

The engine's ``suspend`` of a job waiting for an event and an ``emit`` of that event run at once on
two threads, many times: whichever commits first, the job ends due at once (the emit found its wait,
or the wait found the emit), never asleep until its timeout. Both take the event name's advisory
lock in a statement before the one that reads, so the second reads what the first committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from alkstore import JobHeld, ManualClock
from alkstore.engine import EventRecord, Held, Wait
from tests.postgres.conftest import OpenStore, engine_of
from tests.support import PATIENCE, must_claim

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
