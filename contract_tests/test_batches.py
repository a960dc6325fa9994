"""Batches (ADR 014): several jobs claimed or finished in one call, each fenced on its own.

A batch with stale fences changes the jobs whose fence still holds and reports the others,
which it leaves as they are; the port's finishing calls (ack, retry, bury, heartbeat, release)
all behave so, on every engine.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidArgument, InvalidOptions, Job, JobState, ManualClock, Store
from alkstore.engine import Burial, ClaimRequest, Heartbeat, Held, Retry
from tests.support import must_claim

VISIBILITY = timedelta(seconds=300)


def claimed(store: Store, count: int, queue: str = "jobs") -> list[Job]:
    jobs = store.queue(queue).claim_many("w1", count)
    assert len(jobs) == count
    return jobs


def lapsed_and_reclaimed(store: Store, clock: ManualClock) -> tuple[Job, Job]:
    """A job claimed, lapsed and claimed again: the first handle is stale, the second fresh."""
    store.queue("other").enqueue("lapsing")
    (stale,) = store.queue("other").claim_many("slow", 1)
    clock.advance(VISIBILITY)
    (fresh,) = store.queue("other").claim_many("fast", 1)
    assert (fresh.id, fresh.attempts) == (stale.id, 2)
    return stale, fresh


def test_claim_many_takes_up_to_its_limit_best_first_and_fences_each_job(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    ids = [queue.enqueue(n, EnqueueOpts(priority=n % 3)) for n in range(7)]
    first = queue.claim_many("w1", 4)
    assert [(job.priority, job.id) for job in first] == sorted(
        ((job.priority, job.id) for job in first), key=lambda key: (-key[0], key[1])
    )
    assert [job.id for job in first] == [ids[2], ids[5], ids[1], ids[4]]
    assert all(job.state is JobState.RUNNING and job.worker_id == "w1" for job in first)
    assert all(job.lease_until == clock.now() + VISIBILITY for job in first)
    rest = queue.claim_many("w2", 10)
    assert sorted(job.id for job in rest) == sorted({ids[0], ids[3], ids[6]})
    assert queue.claim_many("w3", 10) == []


def test_claim_many_refuses_a_limit_out_of_range(store: Store) -> None:
    store.queue("jobs").enqueue("x")
    for limit in (0, -1, 1001):
        with pytest.raises(InvalidOptions, match="limit"):
            store.queue("jobs").claim_many("w1", limit)
    for bad in ("3", 2.0, None, True):
        with pytest.raises(InvalidArgument, match="limit"):
            store.queue("jobs").claim_many("w1", bad)  # type: ignore[arg-type]
    assert store.queue("jobs").claim("w1") is not None  # the refused claims took nothing


def test_ack_many_finishes_the_held_jobs_and_reports_the_stale_one_which_it_leaves_alone(
    store: Store, clock: ManualClock
) -> None:
    for n in range(3):
        store.queue("jobs").enqueue(n)
    stale, fresh = lapsed_and_reclaimed(store, clock)
    held = claimed(store, 3)
    before = store.get_job(fresh.id)
    assert store.ack_many([*held, stale]) == [stale]
    assert all(store.get_job(job.id) is None for job in held)
    assert store.get_job(fresh.id) == before
    assert store.ack_many([]) == []
    assert store.ack_many([fresh, fresh]) == []  # one claim, acked once
    assert store.get_job(fresh.id) is None


def test_ack_many_refuses_what_is_not_one_of_its_claimed_jobs(engine: Any, store: Store, clock: ManualClock) -> None:
    store.queue("jobs").enqueue("x")
    job = must_claim(store.queue("jobs"), "w1")
    with pytest.raises(InvalidArgument, match=r"alkstore\.(Async)?Job"):
        store.ack_many([job, store.get_job(job.id)])  # type: ignore[list-item]
    with engine.store(clock) as other, pytest.raises(InvalidArgument, match="another store"):
        other.ack_many([job])
    assert store.get_job(job.id) is not None


#: Each finishing call of the port, applied to a batch of held pairs (the engine's own records).
PORT_CALLS: dict[str, Callable[[Store, list[Held]], list[Held]]] = {
    "ack": lambda store, held: store.engine.ack(held),
    "retry": lambda store, held: store.engine.retry(
        [Retry(pair.job_id, pair.fence, "again", store.clock.now() + timedelta(seconds=5)) for pair in held],
        store.clock.now(),
    ),
    "bury": lambda store, held: store.engine.bury(
        [Burial(pair.job_id, pair.fence, "dead", "Traceback…") for pair in held], store.clock.now()
    ),
    "heartbeat": lambda store, held: _beaten(store, held),
    "release": lambda store, held: store.engine.release(held, store.clock.now()),
    "ack_and_claim": lambda store, held: _acked_then_claimed(store, held),
}
#: What each call leaves of a job whose fence held: ``None`` for done and gone, else (state, attempts).
AFTER: dict[str, tuple[JobState, int] | None] = {
    "ack": None,
    "retry": (JobState.PENDING, 1),
    "bury": (JobState.DEAD, 1),
    "heartbeat": (JobState.RUNNING, 1),
    "release": (JobState.PENDING, 0),
    "ack_and_claim": None,
}


def _beaten(store: Store, held: list[Held]) -> list[Held]:
    """``heartbeat`` of jobs none of whose cancel was requested: its stale pairs, having found no cancel."""
    stale, asked = store.engine.heartbeat(
        [Heartbeat(pair.job_id, pair.fence, store.clock.now() + timedelta(hours=1)) for pair in held]
    )
    assert asked == []
    return stale


def _acked_then_claimed(store: Store, held: list[Held]) -> list[Held]:
    """``ack_and_claim`` on a queue with nothing left to claim: its stale acks, having claimed nothing."""
    stale, claimed = store.engine.ack_and_claim(held, ClaimRequest("jobs", "w1", store.clock.now(), VISIBILITY, 5))
    assert claimed == []
    return stale


def port_claim(store: Store, queue: str, worker: str, limit: int) -> list[Held]:
    records = store.engine.claim(ClaimRequest(queue, worker, store.clock.now(), VISIBILITY, limit))
    return [Held(record.id, record.fence) for record in records]


@pytest.mark.parametrize("call", PORT_CALLS)
def test_a_port_batch_with_a_stale_fence_changes_the_others_and_reports_it(
    store: Store, clock: ManualClock, call: str
) -> None:
    for n in range(3):
        store.queue("jobs").enqueue(n)
    store.queue("other").enqueue("lapsing")
    (stale,) = port_claim(store, "other", "slow", 1)
    clock.advance(VISIBILITY)
    (fresh,) = port_claim(store, "other", "fast", 1)
    assert fresh == Held(stale.job_id, stale.fence + 1)
    held = port_claim(store, "jobs", "w1", 3)
    assert len(held) == 3
    before = store.get_job(fresh.job_id)
    assert PORT_CALLS[call](store, [held[0], stale, *held[1:]]) == [stale]
    assert store.get_job(fresh.job_id) == before
    for pair in held:
        after = store.get_job(pair.job_id)
        assert (None if after is None else (after.state, after.attempts)) == AFTER[call], pair
    assert PORT_CALLS[call](store, []) == []


def test_a_port_heartbeat_tells_which_of_the_jobs_it_moved_were_asked_to_stop(store: Store, clock: ManualClock) -> None:
    """ADR 035: the pairs whose job's cancel was requested, in the order given, among those it moved; a stale
    pair is only stale, even when the claim that superseded it was asked to stop."""
    for n in range(3):
        store.queue("jobs").enqueue(n)
    store.queue("other").enqueue("lapsing")
    (stale,) = port_claim(store, "other", "slow", 1)
    clock.advance(VISIBILITY)
    (fresh,) = port_claim(store, "other", "fast", 1)
    first, second, third = port_claim(store, "jobs", "w1", 3)
    for pair in (third, first, fresh):
        store.cancel(pair.job_id)
    until = clock.now() + timedelta(hours=1)
    beats = [Heartbeat(pair.job_id, pair.fence, until) for pair in (first, stale, second, third)]
    assert store.engine.heartbeat(beats) == ([stale], [first, third])
    moved = [store.get_job(pair.job_id) for pair in (first, second, third)]
    assert [info.lease_until if info else None for info in moved] == [until] * 3, "asked to stop, a lease still moves"
    assert store.engine.heartbeat([]) == ([], [])


def test_ack_and_claim_finishes_the_held_jobs_and_claims_the_next_ones_best_first(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    ids = [queue.enqueue(n, EnqueueOpts(priority=n % 2)) for n in range(6)]
    held = port_claim(store, "jobs", "w1", 2)
    assert [pair.job_id for pair in held] == [ids[1], ids[3]]
    stale, records = store.engine.ack_and_claim(held, ClaimRequest("jobs", "w1", clock.now(), VISIBILITY, 3))
    assert stale == []
    assert all(store.get_job(pair.job_id) is None for pair in held)
    assert [record.id for record in records] == [ids[5], ids[0], ids[2]]
    assert all(record.state is JobState.RUNNING and record.attempts == 1 for record in records)
    finished = [Held(record.id, record.fence) for record in records]
    # Their leases lapse but nobody takes them: the acks still hold, and the claim that sweeps
    # lapsed leases sweeps none of the jobs it acks (it neither revives nor kills them).
    clock.advance(VISIBILITY)
    stale, records = store.engine.ack_and_claim(finished, ClaimRequest("jobs", "w2", clock.now(), VISIBILITY, 10))
    assert stale == []
    assert [record.id for record in records] == [ids[4]]
    assert all(store.get_job(pair.job_id) is None for pair in finished)
    assert store.engine.ack_and_claim(finished, ClaimRequest("jobs", "w3", clock.now(), VISIBILITY, 1)) == (
        finished,
        [],
    )
    assert store.get_job(ids[4]) is not None


def test_ack_and_claim_sweeps_the_lapsed_jobs_it_does_not_ack(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    ids = [queue.enqueue(n) for n in range(3)]
    mine, lapsing, _ = port_claim(store, "jobs", "w1", 3)
    clock.advance(VISIBILITY)
    stale, records = store.engine.ack_and_claim([mine], ClaimRequest("jobs", "w2", clock.now(), VISIBILITY, 5))
    assert stale == []
    assert store.get_job(mine.job_id) is None
    assert sorted(record.id for record in records) == sorted(ids[1:])
    assert all(record.attempts == 2 and record.worker_id == "w2" for record in records)
    assert store.engine.ack([lapsing]) == [lapsing]
