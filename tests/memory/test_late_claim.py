"""A claim that returns late (a wait for a pooled connection, a stalled host) renews its leases first (ADR 050).

The claim's instant is read before the engine call, so a claim that returns late granted a
lease that is partly gone, or lapsed already, for the next claim's sweep to take while the job
runs. Over a memory engine whose claims return late on the store's manual clock: a lease a
third gone is renewed before the job is handed out, one another claim took meanwhile is left
to it (the job is not handed out twice), and a claim on time costs no renewal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from alkstore import EnqueueOpts, ManualClock, Store
from alkstore.adapters.memory import MemoryEngine
from alkstore.engine import ClaimRequest, Heartbeat, Held, JobRecord
from tests.support import MIDNIGHT

LEASE = timedelta(seconds=3)


class Late(MemoryEngine):
    """A memory engine whose next claim returns ``late`` on ``clock``, after ``meanwhile`` has run."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.late = timedelta(0)
        self.meanwhile: Callable[[], None] | None = None
        self.heartbeats = 0

    def ack_and_claim(self, acks: Sequence[Held], request: ClaimRequest) -> tuple[list[Held], list[JobRecord]]:
        result = super().ack_and_claim(acks, request)
        late, meanwhile = self.late, self.meanwhile
        self.late, self.meanwhile = timedelta(0), None  # once: the claims made meanwhile are on time
        self.clock.advance(late)
        if meanwhile is not None:
            meanwhile()
        return result

    def claim(self, request: ClaimRequest) -> list[JobRecord]:
        return self.ack_and_claim((), request)[1]

    def heartbeat(self, beats: Sequence[Heartbeat]) -> tuple[list[Held], list[Held]]:
        self.heartbeats += 1
        return super().heartbeat(beats)


def setup() -> tuple[ManualClock, Late, Store, int]:
    clock = ManualClock(MIDNIGHT)
    engine = Late(clock)
    store = Store(engine, clock=clock)
    job_id = store.queue("jobs").enqueue({"n": 1}, EnqueueOpts(visibility_timeout=LEASE))
    return clock, engine, store, int(job_id)


def test_a_claim_that_returns_with_its_lease_a_third_gone_renews_it_before_the_job_runs() -> None:
    clock, engine, store, job_id = setup()
    engine.late = timedelta(seconds=2.5)
    job = store.queue("jobs").claim("w1")
    assert job is not None
    assert job.id == job_id
    assert job.lease_until == clock.now() + LEASE, "the lease runs from the claim's return"
    stored = store.get_job(job_id)
    assert stored is not None
    assert stored.lease_until == job.lease_until
    clock.advance(timedelta(seconds=1))  # past the lease as first granted, within the renewed one
    assert Store(engine, clock=clock).queue("jobs").claim("w2") is None, "another claim took a running job"
    job.ack()


def test_a_job_another_claim_took_while_the_late_claim_waited_is_left_to_it() -> None:
    clock, engine, store, job_id = setup()
    other = Store(engine, clock=clock)
    taken = []
    engine.late = timedelta(seconds=4)  # the lease granted is born lapsed
    engine.meanwhile = lambda: taken.append(other.queue("jobs").claim("w2"))
    assert store.queue("jobs").claim("w1") is None, "a job leased to another claim was handed out again"
    assert taken[0] is not None
    assert taken[0].id == job_id
    assert taken[0].attempts == 2
    taken[0].ack()
    assert store.get_job(job_id) is None


def test_a_claim_on_time_renews_nothing() -> None:
    clock, engine, store, _ = setup()
    claimed_at = clock.now()
    engine.late = timedelta(seconds=0.9)  # under a third of the lease
    job = store.queue("jobs").claim("w1")
    assert job is not None
    assert job.lease_until == claimed_at + LEASE
    assert engine.heartbeats == 0
