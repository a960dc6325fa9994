"""``Store.jobs(..., reverse=True)``: each phase's listing in its order turned round, paged alike, on every engine."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidArgument, InvalidOptions, JobPhase, ManualClock, Store
from alkstore.engine import JobQuery, NewJob


def listed(store: Store, phase: JobPhase, *, reverse: bool, limit: int, **filters: Any) -> list[int]:
    found: list[int] = []
    cursor: str | None = None
    while True:
        page = store.jobs("mixed", phase, limit=limit, cursor=cursor, reverse=reverse, **filters)
        found += [job.id for job in page.jobs]
        if page.cursor is None:
            return found
        cursor = page.cursor


def fill(store: Store, clock: ManualClock) -> None:
    """Jobs of every phase, with ties on priority and instants, so every field of each order counts."""
    queue = store.queue("mixed")
    for n in range(12):
        queue.enqueue({"n": n, "even": n % 2 == 0}, EnqueueOpts(priority=n % 3))
        if n % 4 == 0:
            clock.advance(timedelta(seconds=1))
    for n in range(5):
        queue.enqueue({"n": 100 + n}, EnqueueOpts(delay=60 * (n % 2 + 1)))
    queue.enqueue({"key": 1}, EnqueueOpts(ordering_key="k"))
    queue.enqueue({"key": 2}, EnqueueOpts(ordering_key="k"))  # waits behind the first
    queue.enqueue({"key": 3}, EnqueueOpts(ordering_key="k"))  # and behind the second
    queue.enqueue({"unique": 1}, EnqueueOpts(unique_key="u", unique_running=True))
    for n in range(6):
        job = queue.claim(f"w{n}")
        assert job is not None
        if n % 2:
            job.fail("boom")
            clock.advance(timedelta(seconds=n % 3))


@pytest.mark.parametrize("phase", list(JobPhase))
def test_a_reversed_listing_is_the_listing_turned_round_page_after_page(
    store: Store, clock: ManualClock, phase: JobPhase
) -> None:
    fill(store, clock)
    forward = listed(store, phase, reverse=False, limit=1000)
    assert forward, f"the scenario leaves no {phase.value} job"
    for limit in (1, 2, 1000):
        assert listed(store, phase, reverse=True, limit=limit) == forward[::-1], limit
    evens = listed(store, phase, reverse=False, limit=1000, contains={"even": True})
    assert listed(store, phase, reverse=True, limit=2, contains={"even": True}) == evens[::-1]


def test_a_cursor_belongs_to_its_direction(store: Store, clock: ManualClock) -> None:
    fill(store, clock)
    forward = store.jobs("mixed", JobPhase.READY, limit=1)
    backward = store.jobs("mixed", JobPhase.READY, limit=1, reverse=True)
    assert forward.cursor is not None
    assert backward.cursor is not None
    with pytest.raises(InvalidOptions, match="in reverse"):
        store.jobs("mixed", JobPhase.READY, cursor=forward.cursor, reverse=True)
    with pytest.raises(InvalidOptions):
        store.jobs("mixed", JobPhase.READY, cursor=backward.cursor)
    with pytest.raises(InvalidArgument, match="reverse must be a bool"):
        store.jobs("mixed", reverse="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("phase", list(JobPhase))
@pytest.mark.parametrize("reverse", [False, True])
def test_every_listed_record_is_as_get_job_returns_it(
    store: Store, clock: ManualClock, phase: JobPhase, reverse: bool
) -> None:
    """The port's contract: a listing's records are ``get_job``'s, field for field (a dead job's
    keys and cancel flag included), whichever direction it reads."""
    fill(store, clock)
    store.queue("mixed").claim("w-last")  # the unique job, running: it holds its key while it runs
    records = store.engine.list_jobs(JobQuery("mixed", phase, clock.now(), 1000, reverse=reverse))
    assert records, f"the scenario leaves no {phase.value} job"
    for record in records:
        assert record == store.engine.get_job(record.id)
    for limit in (1, 2):
        query = JobQuery("mixed", phase, clock.now(), limit, reverse=reverse)
        assert store.engine.list_jobs(query) == records[:limit], "at most the limit, the first of the order"


def test_jobs_due_but_still_stored_delayed_are_listed_ready_in_the_claim_order(
    store: Store, clock: ManualClock
) -> None:
    """A delayed job whose instant has come is ready before any claim sweeps it: each listing direction
    takes it in the claim order among the jobs stored pending, with either filter, page after page."""
    now = clock.now()
    priorities = [0, 2, 1, 2, 0, 1, 1, 2]
    made: dict[int, tuple[int, int, int, bool]] = {}  # id: the claim order's key, and whether task "t"
    for stored_due in (False, True):
        jobs = [
            NewJob(
                "mixed",
                json.dumps({"n": n, "even": n % 2 == 0}).encode(),
                priority,
                now + timedelta(seconds=0 if stored_due else 60 + n % 3),
                None,
                3,
                task="t" if n % 3 else None,
            )
            for n, priority in enumerate(priorities)
        ]
        for job, job_id in zip(jobs, store.engine.enqueue(jobs, now), strict=True):
            made[int(job_id)] = (-job.priority, int((job.run_at - now).total_seconds()), int(job_id), job.task == "t")
    clock.advance(120)
    ready = sorted(made, key=lambda job_id: made[job_id][:3])
    evens = [job_id for job_id in ready if json.loads(store.engine.get_job(job_id).payload)["even"]]  # type: ignore[union-attr]
    tasks = [job_id for job_id in ready if made[job_id][3]]
    for limit in (1, 2, 3, 1000):
        assert listed(store, JobPhase.READY, reverse=False, limit=limit) == ready, limit
        assert listed(store, JobPhase.READY, reverse=True, limit=limit) == ready[::-1], limit
        assert listed(store, JobPhase.READY, reverse=False, limit=limit, contains={"even": True}) == evens
        assert listed(store, JobPhase.READY, reverse=True, limit=limit, contains={"even": True}) == evens[::-1]
        assert listed(store, JobPhase.READY, reverse=False, limit=limit, task="t") == tasks
        assert listed(store, JobPhase.READY, reverse=True, limit=limit, task="t") == tasks[::-1]
    assert listed(store, JobPhase.DELAYED, reverse=False, limit=1) == []


@pytest.mark.parametrize("phase", [JobPhase.READY, JobPhase.DELAYED])
def test_a_long_run_of_jobs_stored_in_the_other_state_is_read_from_its_far_end(
    store: Store, clock: ManualClock, phase: JobPhase
) -> None:
    """More jobs than a page holds, all stored in the state their phase does not usually hold (due but
    stored delayed; not yet due but stored pending by a host whose clock runs ahead), some at one
    instant: read backwards, the first page starts at the latest instant and highest id."""
    now = clock.now()
    offsets = [60, 61, 62, 70, 70, 70]
    stored_at = now if phase is JobPhase.READY else now + timedelta(seconds=100)  # the host's now
    jobs = [
        NewJob("mixed", json.dumps({"n": n}).encode(), 0, now + timedelta(seconds=offset), None, 3)
        for n, offset in enumerate(offsets)
    ]
    ids = [int(job_id) for job_id in store.engine.enqueue(jobs, stored_at)]
    if phase is JobPhase.READY:
        clock.advance(120)
    backwards = [job_id for _, job_id in sorted(zip(offsets, ids, strict=True), reverse=True)]
    for limit in (1, 2):
        assert listed(store, phase, reverse=True, limit=limit) == backwards, limit
        assert listed(store, phase, reverse=False, limit=limit) == backwards[::-1], limit
