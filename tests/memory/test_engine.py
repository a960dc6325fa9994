"""The memory engine's own machinery: lazily cleaned heap entries never act on a job that moved on,
and its ``tick`` reports fires, per-schedule skips and the soonest boundary as the port requires."""

from __future__ import annotations

from datetime import timedelta

from alkstore import EnqueueOpts, ManualClock, Store
from alkstore.engine import JOB_EXPIRED_ERROR, JobState
from alkstore.scheduler._tick import DEFAULT_BUDGET
from tests.support import must_claim, must_get


def test_a_heartbeat_leaves_the_old_lease_entry_harmless(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    store.queue("q").enqueue("x")
    job = must_claim(store.queue("q"), "w1")
    clock.set(start + timedelta(seconds=200))
    assert job.heartbeat() == start + timedelta(seconds=500)
    clock.set(start + timedelta(seconds=301))  # past the first lease, inside the extended one
    assert store.queue("q").claim("w2") is None
    info = must_get(store, job.id)
    assert (info.state, info.worker_id) == (JobState.RUNNING, "w1")
    clock.set(start + timedelta(seconds=500))
    again = must_claim(store.queue("q"), "w2")
    assert (again.id, again.attempts) == (job.id, 2)


def test_an_acked_job_is_not_resurrected_by_its_old_lease_entry(store: Store, clock: ManualClock) -> None:
    store.queue("q").enqueue("x")
    job = must_claim(store.queue("q"))
    job.ack()
    clock.advance(timedelta(days=1))
    assert store.queue("q").claim("w") is None
    assert store.get_job(job.id) is None


def test_a_requeued_dead_job_is_not_killed_again_by_its_old_expiry_entry(store: Store, clock: ManualClock) -> None:
    job_id = store.queue("q").enqueue("x", EnqueueOpts(expires=10))
    clock.advance(20)
    assert store.queue("q").claim("w") is None
    dead = must_get(store, job_id)
    assert (dead.state, dead.last_error) == (JobState.DEAD, JOB_EXPIRED_ERROR)
    assert store.requeue_dead(job_id)
    clock.advance(timedelta(days=1))
    job = must_claim(store.queue("q"))
    assert (job.id, job.expires_at, job.attempts) == (job_id, None, 1)


def test_a_retried_job_waits_for_its_new_run_at_not_its_old_one(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    store.queue("q").enqueue("x")
    job = must_claim(store.queue("q"))
    job.retry("boom")  # the plain curve: 5 s after the first attempt
    clock.set(start + timedelta(seconds=4))
    assert store.queue("q").claim("w") is None
    clock.set(start + timedelta(seconds=5))
    again = must_claim(store.queue("q"))
    assert (again.id, again.attempts, again.last_error) == (job.id, 2, "boom")


def test_a_tick_caps_each_schedule_at_64_and_reports_each_ones_skips(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    store.schedule("a", "@every 1s", "q")
    store.schedule("b", "@every 1s", "q")
    store.schedule("c", "@every 1h", "q")
    now = start + timedelta(seconds=1000)
    clock.set(now)
    result = store.engine.tick(now, DEFAULT_BUDGET, {})
    by_schedule = {name: [fire for fire in result.fires if fire.schedule == name] for name in "abc"}
    assert [len(by_schedule[name]) for name in "abc"] == [64, 64, 0]
    assert dict(result.skipped) == {"a": 1000 - 64, "b": 1000 - 64}
    assert [(fire.boundary, fire.schedule) for fire in result.fires] == sorted(
        (fire.boundary, fire.schedule) for fire in result.fires
    )
    assert result.soonest == now + timedelta(seconds=1)
    assert store.engine.soonest_boundary() == result.soonest
    assert {schedule.name: schedule.next_boundary for schedule in store.schedules()} == {
        "a": now + timedelta(seconds=1),
        "b": now + timedelta(seconds=1),
        "c": start + timedelta(hours=1),
    }


def test_fired_jobs_carry_their_schedule_and_boundary_and_are_claimed_oldest_first(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now()
    store.schedule("s", "@every 1m", "q", {"report": True})
    clock.set(start + timedelta(minutes=3))
    fires = store.tick()
    claimed = [store.queue("q").claim("w") for _ in fires]
    assert [job.id for job in claimed if job] == [fire.job_id for fire in fires]
    assert [(job.schedule, job.boundary, job.payload) for job in claimed if job] == [
        ("s", start + timedelta(minutes=m), {"report": True}) for m in (1, 2, 3)
    ]
