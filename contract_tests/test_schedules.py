"""Schedules: upsert and read-back, the re-registration rule, listing, and ``tick`` catch-up."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest

import alkstore
from alkstore import JobState, ManualClock, ScheduleOpts, Store
from alkstore.engine import NewSchedule
from tests.support import must_claim, must_get

from ._checks import assert_utc
from ._runners import PROGRESS_TIMEOUT

SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)


def test_the_catch_up_cap_is_64() -> None:
    assert alkstore.CATCH_UP_CAP == 64


def test_schedule_stores_the_schedule_and_returns_it_as_read_back(store: Store, clock: ManualClock) -> None:
    opts = ScheduleOpts(priority=3, max_attempts=7, expires=90)
    stored = store.schedule("report", "@every 15m", "reports", {"kind": "daily", "n": [1]}, opts)
    assert stored.name == "report"
    assert stored.spec == "@every 15m"
    assert stored.interval == timedelta(minutes=15)
    assert stored.queue == "reports"
    assert stored.payload == {"kind": "daily", "n": [1]}
    assert stored.opts == ScheduleOpts(priority=3, max_attempts=7, expires=timedelta(seconds=90))
    assert stored.next_boundary == clock.now() + timedelta(minutes=15)
    assert_utc(stored.next_boundary)
    assert store.schedules() == [stored]


def test_schedules_lists_every_schedule_by_name(store: Store) -> None:
    for name in ("charlie", "alpha", "bravo"):
        store.schedule(name, "@every 1h", "jobs", name)
    assert [(s.name, s.payload) for s in store.schedules()] == [
        ("alpha", "alpha"),
        ("bravo", "bravo"),
        ("charlie", "charlie"),
    ]


def test_re_registering_updates_the_target_payload_and_options_in_place(store: Store, clock: ManualClock) -> None:
    first = store.schedule("report", "@every 1h", "reports", "v1")
    clock.advance(60)
    second = store.schedule("report", "@every 1h", "other", "v2", ScheduleOpts(priority=-4))
    assert (second.queue, second.payload, second.opts) == ("other", "v2", ScheduleOpts(priority=-4))
    assert second.next_boundary == first.next_boundary
    assert store.schedules() == [second]


def test_re_registering_the_same_interval_keeps_the_phase_and_the_backlog(store: Store, clock: ManualClock) -> None:
    registered_at = clock.now()
    store.schedule("beat", "@every 10s", "jobs")
    clock.advance(35)  # three boundaries elapsed, none fired
    again = store.schedule("beat", "@every 10s", "jobs")
    assert again.next_boundary == registered_at + 10 * SECOND
    fired = store.tick()
    assert [f.boundary for f in fired] == [registered_at + n * 10 * SECOND for n in (1, 2, 3)]


def test_an_equivalent_spelling_of_the_interval_keeps_the_phase(store: Store, clock: ManualClock) -> None:
    registered_at = clock.now()
    store.schedule("beat", "@every 2m", "jobs")
    clock.advance(30)
    again = store.schedule("beat", "@every 120s", "jobs")
    assert again.spec == "@every 120s"
    assert again.next_boundary == registered_at + timedelta(minutes=2)


def test_a_changed_interval_restarts_the_phase_at_now_plus_the_new_interval(store: Store, clock: ManualClock) -> None:
    store.schedule("beat", "@every 10s", "jobs")
    changed_at = clock.advance(35)  # a backlog of three
    changed = store.schedule("beat", "@every 1m", "jobs")
    assert (changed.spec, changed.interval) == ("@every 1m", timedelta(minutes=1))
    assert changed.next_boundary == changed_at + timedelta(minutes=1)
    assert store.tick() == []  # the backlog went with the old phase
    clock.advance(timedelta(minutes=1))
    assert [f.boundary for f in store.tick()] == [changed_at + timedelta(minutes=1)]


def test_unschedule_removes_a_schedule_once_and_leaves_its_fired_jobs(store: Store, clock: ManualClock) -> None:
    store.schedule("beat", "@every 10s", "jobs")
    store.schedule("other", "@every 1h", "jobs")
    clock.advance(10)
    (fire,) = store.tick()
    assert store.unschedule("beat") is True
    assert store.unschedule("beat") is False
    assert store.unschedule("never-registered") is False
    assert [s.name for s in store.schedules()] == ["other"]
    clock.advance(60)
    assert store.tick() == []
    info = must_get(store, fire.job_id)
    assert (info.state, info.schedule) == (JobState.PENDING, "beat")


def test_a_schedule_registered_again_after_unschedule_starts_a_new_phase(store: Store, clock: ManualClock) -> None:
    store.schedule("beat", "@every 10s", "jobs")
    clock.advance(25)
    store.unschedule("beat")
    again_at = clock.advance(timedelta(milliseconds=1500))
    again = store.schedule("beat", "@every 10s", "jobs")
    assert again.next_boundary == again_at + 10 * SECOND


def test_a_new_schedule_first_fires_one_interval_after_registration(store: Store, clock: ManualClock) -> None:
    registered_at = clock.now()
    store.schedule("beat", "@every 10s", "jobs", "tock")
    clock.advance(10 * SECOND - timedelta(microseconds=1))
    assert store.tick() == []
    clock.advance(timedelta(microseconds=1))
    (fire,) = store.tick()
    assert (fire.schedule, fire.boundary, fire.queue) == ("beat", registered_at + 10 * SECOND, "jobs")
    assert_utc(fire.boundary)
    assert store.schedules()[0].next_boundary == registered_at + 20 * SECOND


def test_every_1s_1000_s_behind_fires_exactly_64_oldest_first_then_keeps_its_phase(
    store: Store, clock: ManualClock
) -> None:
    first = store.schedule("beat", "@every 1s", "jobs").next_boundary
    now = clock.advance(timedelta(seconds=1000, milliseconds=500) + SECOND)  # B + 1000.5 s
    fires = store.tick()
    assert [f.boundary for f in fires] == [first + n * SECOND for n in range(64)]
    (after,) = store.schedules()
    assert after.next_boundary == first + 1001 * SECOND
    assert now < after.next_boundary <= now + SECOND
    assert store.tick() == []
    clock.set(after.next_boundary)
    assert [f.boundary for f in store.tick()] == [first + 1001 * SECOND]


def test_an_hourly_schedule_four_hours_behind_fires_five(store: Store, clock: ManualClock) -> None:
    first = store.schedule("hourly", "@every 1h", "jobs").next_boundary
    clock.set(first + 4 * HOUR)
    assert [f.boundary for f in store.tick()] == [first + n * HOUR for n in range(5)]
    assert store.schedules()[0].next_boundary == first + 5 * HOUR


def test_a_second_tick_at_the_same_instant_fires_nothing(store: Store, clock: ManualClock) -> None:
    store.schedule("beat", "@every 1s", "jobs")
    store.schedule("slow", "@every 7s", "jobs")
    clock.advance(30)
    assert len(store.tick()) == 30 + 4
    assert store.tick() == []


def test_the_64_cap_holds_per_schedule_not_per_tick(store: Store, clock: ManualClock) -> None:
    for name in ("a", "b", "c"):
        store.schedule(name, "@every 1s", "jobs")
    clock.advance(200)
    fires = store.tick()
    assert Counter(f.schedule for f in fires) == {"a": 64, "b": 64, "c": 64}


def test_fires_are_ordered_by_boundary_then_schedule_name(store: Store, clock: ManualClock) -> None:
    start = clock.now()
    store.schedule("zulu", "@every 2s", "jobs")
    store.schedule("alpha", "@every 3s", "jobs")
    clock.advance(6)
    fires = store.tick()
    assert [(f.boundary - start, f.schedule) for f in fires] == [
        (2 * SECOND, "zulu"),
        (3 * SECOND, "alpha"),
        (4 * SECOND, "zulu"),
        (6 * SECOND, "alpha"),
        (6 * SECOND, "zulu"),
    ]
    ids = [f.job_id for f in fires]
    assert ids == sorted(set(ids))


def test_fired_jobs_carry_the_schedule_options_over_the_queue_defaults(store: Store, clock: ManualClock) -> None:
    store.schedule("stamped", "@every 1m", "reports", {"r": 1}, ScheduleOpts(priority=8, max_attempts=9, expires=90))
    store.schedule("plain", "@every 1m", "reports", "p")
    fired_at = clock.advance(timedelta(minutes=2, seconds=5))
    fires = store.tick()
    assert len(fires) == 4
    for fire in fires:
        info = must_get(store, fire.job_id)
        stamped = fire.schedule == "stamped"
        assert (info.schedule, info.boundary, info.queue) == (fire.schedule, fire.boundary, "reports")
        assert info.payload == ({"r": 1} if stamped else "p")
        assert (info.state, info.attempts, info.run_at, info.enqueued_at) == (JobState.PENDING, 0, fired_at, fired_at)
        assert info.priority == (8 if stamped else 0)
        assert info.max_attempts == (9 if stamped else 3)
        assert info.expires_at == (fired_at + timedelta(seconds=90) if stamped else None)
        assert_utc(info.boundary, info.run_at, info.expires_at)
    job = must_claim(store.queue("reports"), "w1")
    assert (job.schedule, job.priority) == ("stamped", 8)


def test_fired_jobs_of_a_schedule_that_expire_die_unclaimed(store: Store, clock: ManualClock) -> None:
    store.schedule("fleeting", "@every 1m", "jobs", None, ScheduleOpts(expires=30))
    clock.advance(60)
    (fire,) = store.tick()
    clock.advance(30)
    assert store.queue("jobs").claim("w1") is None
    info = must_get(store, fire.job_id)
    assert info.state is JobState.DEAD


def test_concurrent_tickers_never_fire_a_boundary_twice(store: Store, clock: ManualClock) -> None:
    for name in ("a", "b", "c", "d"):
        store.schedule(name, "@every 1s", "jobs")
    clock.advance(100)
    barrier = threading.Barrier(3)
    results: list[list[alkstore.Fire]] = []

    def tick() -> None:
        barrier.wait(PROGRESS_TIMEOUT)
        results.append(store.tick())

    threads = [threading.Thread(target=tick) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PROGRESS_TIMEOUT)
    assert len(results) == 3
    fired = [(f.schedule, f.boundary) for result in results for f in result]
    assert len(fired) == len(set(fired)) == 4 * 64


def test_schedule_many_registers_every_entry_as_schedule_would_and_keeps_phases(
    store: Store, clock: ManualClock
) -> None:
    kept = store.schedule("kept", "@every 1h", "jobs", "v1")
    clock.advance(60)
    entries = [
        alkstore.ScheduleEntry("kept", "@every 1h", "other", "v2", ScheduleOpts(priority=2)),
        alkstore.ScheduleEntry("fresh", "@every 10m", "jobs"),
        *(alkstore.ScheduleEntry(f"bulk-{n:04}", "@every 1m", "jobs", {"n": n}) for n in range(500)),
    ]
    stored = store.schedule_many(entries)
    assert [schedule.name for schedule in stored] == [entry.name for entry in entries]
    assert (stored[0].next_boundary, stored[0].queue, stored[0].payload) == (kept.next_boundary, "other", "v2")
    assert stored[0].opts.priority == 2
    assert stored[1].next_boundary == clock.now() + timedelta(minutes=10)
    assert stored[-1].payload == {"n": 499}
    assert {schedule.name: schedule for schedule in store.schedules()} == {s.name: s for s in stored}
    assert store.schedule_many([]) == []


def test_schedule_many_rejects_the_whole_batch_on_bad_input_before_anything_is_stored(store: Store) -> None:
    good = alkstore.ScheduleEntry("good", "@every 1m", "jobs")
    bad_batches: list[tuple[object, type[Exception], str]] = [
        ([good, alkstore.ScheduleEntry("bad", "*/5 * * * *", "jobs")], alkstore.InvalidSpec, "cron"),
        ([good, alkstore.ScheduleEntry("", "@every 1m", "jobs")], alkstore.InvalidName, "schedule name"),
        ([good, alkstore.ScheduleEntry("x", "@every 1m", "jobs", {1, 2})], alkstore.InvalidPayload, "JSON"),
        ([good, good], alkstore.InvalidOptions, "'good' appears twice"),
        ([good, ("x", "@every 1m", "jobs")], alkstore.InvalidArgument, "ScheduleEntry"),
        (good, alkstore.InvalidArgument, "iterable of ScheduleEntry"),
    ]
    for batch, error, match in bad_batches:
        with pytest.raises(error, match=match):
            store.schedule_many(batch)  # type: ignore[arg-type]
    assert store.schedules() == []


def test_fire_now_enqueues_what_a_fire_would_with_its_task_and_leaves_the_boundaries(
    store: Store, clock: ManualClock
) -> None:
    plain = store.schedule("digest", "@every 1h", "mail", {"kind": "digest"}, ScheduleOpts(priority=4, expires=600))
    (periodic,) = store.engine.register_schedules(
        [NewSchedule("nightly", "@every 1d", 86400, "reports", b'{"full": true}', max_attempts=9, task="rebuild")],
        clock.now(),
    )
    (listed,) = [schedule for schedule in store.schedules() if schedule.name == "nightly"]
    assert (listed.task, plain.task) == ("rebuild", None), "a schedule names the task its fires run"

    clock.advance(5)
    fired, again = store.fire_now("nightly"), store.fire_now("digest")
    assert fired is not None
    assert again is not None
    job = must_get(store, fired)
    assert (job.queue, job.task, job.payload, job.max_attempts) == ("reports", "rebuild", {"full": True}, 9)
    assert (job.state, job.run_at, job.schedule, job.boundary) == (JobState.PENDING, clock.now(), None, None)
    other = must_get(store, again)
    assert (other.queue, other.task, other.payload, other.priority) == ("mail", None, {"kind": "digest"}, 4)
    assert other.expires_at == clock.now() + timedelta(seconds=600)
    assert {s.name: s.next_boundary for s in store.schedules()} == {
        "digest": plain.next_boundary,
        "nightly": periodic.next_boundary,
    }, "firing now moves no boundary"
    assert store.fire_now("missing") is None
    with pytest.raises(alkstore.InvalidName):
        store.fire_now("")
