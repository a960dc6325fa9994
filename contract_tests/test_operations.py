"""Inspection and actions (ADR 020): counts and lag, listings and cursors, cancel, bulk requeue and
purge, the scheduler's leader, workers; the same on every engine."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

import alkstore.store._inspection
from alkstore import (
    CancelOutcome,
    EnqueueOpts,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    Job,
    JobPage,
    JobPhase,
    JobState,
    Leader,
    ManualClock,
    QueueStats,
    ReservedName,
    Store,
    StoreClosed,
    WorkerInfo,
)
from alkstore.engine import NewJob, WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK
from tests.support import must_get

from ._checks import assert_utc
from .test_concurrency import run_together

ZERO = timedelta(0)
#: Where ``queue_stats`` stops counting unless told otherwise.
CAP = 10_000


def claim(store: Store, queue: str = "jobs", worker: str = "w1") -> Job:
    job = store.queue(queue).claim(worker)
    assert job is not None, f"expected a claimable job on {queue!r}"
    return job


def kill(store: Store, queue: str = "jobs", error: str = "boom") -> int:
    """Enqueue a job and bury it at once; return its id."""
    store.queue(queue).enqueue({"doomed": True}, EnqueueOpts(priority=100))
    job = claim(store, queue)
    job.fail(error)
    return job.id


def every_page(store: Store, queue: str, phase: JobPhase | str, limit: int) -> list[list[int]]:
    """The ids of every page of a listing, following its cursors to the end."""
    pages: list[list[int]] = []
    cursor: str | None = None
    while True:
        page = store.jobs(queue, phase, limit=limit, cursor=cursor)
        assert isinstance(page, JobPage)
        pages.append([job.id for job in page.jobs])
        cursor = page.cursor
        if cursor is None:
            return pages
        assert isinstance(cursor, str)


# -- counts and lag ----------------------------------------------------------------------------


def test_queue_stats_count_each_queue_by_phase_and_measure_the_oldest_ready_jobs_wait(
    store: Store, clock: ManualClock
) -> None:
    emails = store.queue("emails")
    emails.enqueue("oldest")
    clock.advance(30)
    emails.enqueue("newer")
    emails.enqueue("later", EnqueueOpts(delay=60))
    emails.enqueue("much later", EnqueueOpts(delay=3600))
    claim(store, "emails")  # "oldest" is running now
    kill(store, "reports")
    store.queue("reports").enqueue("waiting")
    clock.advance(12)

    assert store.queue_stats() == [
        QueueStats("emails", ready=1, delayed=2, running=1, dead=0, lag=timedelta(seconds=12), cap=CAP),
        QueueStats("reports", ready=1, delayed=0, running=0, dead=1, lag=timedelta(seconds=12), cap=CAP),
    ]
    assert store.queue_stats("emails") == store.queue_stats()[:1]


def test_a_delayed_job_counts_and_lists_as_ready_once_due_even_before_a_claim_looks(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    plain = queue.enqueue("plain")
    urgent = queue.enqueue("urgent later", EnqueueOpts(delay=10, priority=5))
    (stats,) = store.queue_stats("jobs")
    assert (stats.ready, stats.delayed, stats.lag) == (1, 1, ZERO)
    assert [job.id for job in store.jobs("jobs", JobPhase.DELAYED).jobs] == [urgent]

    clock.advance(25)

    (stats,) = store.queue_stats("jobs")
    assert (stats.ready, stats.delayed) == (2, 0)
    assert stats.lag == timedelta(seconds=25)  # the plain job has waited since its enqueue
    assert [job.id for job in store.jobs("jobs").jobs] == [urgent, plain]  # claim order, across both
    assert store.jobs("jobs", JobPhase.DELAYED).jobs == ()
    assert claim(store).id == urgent


def test_a_job_whose_run_at_is_ahead_of_now_counts_as_delayed_even_if_it_was_due_when_stored(
    store: Store, clock: ManualClock
) -> None:
    job_id = store.queue("jobs").enqueue("due at enqueue")
    clock.set(clock.now() - timedelta(seconds=1))  # the clock stepped back

    (stats,) = store.queue_stats("jobs")
    assert (stats.ready, stats.delayed, stats.lag) == (0, 1, ZERO)
    assert [job.id for job in store.jobs("jobs", "delayed").jobs] == [job_id]
    assert store.jobs("jobs", "ready").jobs == ()


def test_a_lapsed_lease_still_counts_as_running_until_a_claim_sweeps_it(store: Store, clock: ManualClock) -> None:
    store.queue("jobs").enqueue("slow")
    claim(store)
    clock.advance(timedelta(hours=1))  # far past the 300 s lease

    (stats,) = store.queue_stats("jobs")
    assert (stats.ready, stats.running) == (0, 1)
    assert claim(store, worker="w2").attempts == 2
    (stats,) = store.queue_stats("jobs")
    assert (stats.ready, stats.running) == (0, 1)


def test_counts_stop_at_the_cap_while_the_lag_stays_exact(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    queue.enqueue("oldest, lowest priority", EnqueueOpts(priority=-3))
    clock.advance(20)
    for n in range(4):
        queue.enqueue(n, EnqueueOpts(priority=n % 2))
    for n in range(3):
        queue.enqueue(n, EnqueueOpts(delay=60 + n))
    for _ in range(3):
        claim(store)
    clock.advance(5)

    exact = QueueStats("jobs", 2, 3, 3, 0, timedelta(seconds=25), None)
    assert store.queue_stats(cap=None) == [exact]
    assert store.queue_stats("jobs", cap=2) == [QueueStats("jobs", 2, 2, 2, 0, timedelta(seconds=25), 2)]
    assert store.queue_stats(cap=1) == [QueueStats("jobs", 1, 1, 1, 0, timedelta(seconds=25), 1)]
    assert store.queue_stats(cap=3) == [QueueStats("jobs", 2, 3, 3, 0, timedelta(seconds=25), 3)]
    assert store.queue_stats()[0].cap == CAP


def test_the_lag_is_the_oldest_ready_jobs_whatever_its_priority_or_stored_state(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    queue.enqueue("urgent, newest", EnqueueOpts(priority=9, run_at=clock.now() - timedelta(seconds=1)))
    queue.enqueue("low, older", EnqueueOpts(priority=-9, run_at=clock.now() - timedelta(seconds=40)))
    queue.enqueue("delayed, due soonest", EnqueueOpts(run_at=clock.now() + timedelta(seconds=10)))
    assert store.queue_stats("jobs")[0].lag == timedelta(seconds=40)
    clock.advance(timedelta(minutes=5))  # the delayed job is due for 4m50s; the low one waits 5m40s
    (stats,) = store.queue_stats(cap=1)
    assert (stats.ready, stats.lag) == (1, timedelta(minutes=5, seconds=40))
    low = store.jobs("jobs").jobs[1]
    assert low.payload == "delayed, due soonest"  # claim order: priority 9, then 0, then -9
    claim(store).ack()
    claim(store).ack()
    assert store.queue_stats("jobs")[0].lag == timedelta(minutes=5, seconds=40)


def test_jobs_ahead_of_a_clock_that_stepped_back_count_as_delayed_in_every_priority_band(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    for priority in (5, 0, -5):
        queue.enqueue(priority, EnqueueOpts(priority=priority))
        queue.enqueue(priority, EnqueueOpts(priority=priority))
    clock.set(clock.now() - timedelta(seconds=1))
    assert store.queue_stats("jobs", cap=None) == [QueueStats("jobs", 0, 6, 0, 0, ZERO, None)]
    assert store.queue_stats(cap=4) == [QueueStats("jobs", 0, 4, 0, 0, ZERO, 4)]


def test_a_cap_must_be_a_positive_int_or_none(store: Store) -> None:
    for bad in (0, -1, 2**62 + 1):
        with pytest.raises(InvalidOptions, match="cap"):
            store.queue_stats(cap=bad)
    for wrong in (1.5, "10", True):
        with pytest.raises(InvalidArgument, match="cap"):
            store.queue_stats(cap=wrong)  # type: ignore[arg-type]
    store.close()
    with pytest.raises(InvalidOptions):
        store.queue_stats(cap=0)


def test_a_named_queue_without_jobs_has_zero_counts_and_every_queue_without_a_name_is_listed(
    store: Store, clock: ManualClock
) -> None:
    assert store.queue_stats() == []
    assert store.queue_stats("idle") == [QueueStats("idle", 0, 0, 0, 0, ZERO, CAP)]
    kill(store, "only-dead")
    store.outbox("webhooks").enqueue({"event": "paid"})

    listed = store.queue_stats()

    backing = store.outbox("webhooks").queue
    assert [stats.queue for stats in listed] == sorted(["only-dead", backing])
    assert store.queue_stats(backing) == [QueueStats(backing, 1, 0, 0, 0, ZERO, CAP)]
    assert store.queue_stats("only-dead") == [QueueStats("only-dead", 0, 0, 0, 1, ZERO, CAP)]
    assert [stats.outbox for stats in listed] == ["webhooks", None]  # the outbox a backing queue's stats are of


def test_acked_and_cancelled_jobs_leave_the_counts(store: Store) -> None:
    queue = store.queue("jobs")
    first = queue.enqueue(1)
    second = queue.enqueue(2)
    acked = claim(store)
    assert acked.id == first
    acked.ack()
    assert store.cancel(second) is CancelOutcome.CANCELLED
    assert store.queue_stats("jobs") == [QueueStats("jobs", 0, 0, 0, 0, ZERO, CAP)]
    assert store.queue_stats() == []


# -- listings --------------------------------------------------------------------------------


def test_ready_jobs_are_listed_in_claim_order_a_page_at_a_time_each_exactly_once(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    now = clock.now()
    ids = {}
    for n in range(11):
        opts = EnqueueOpts(priority=n % 3, run_at=now - timedelta(seconds=n % 4))
        ids[n] = queue.enqueue({"n": n}, opts)
    order = sorted(ids, key=lambda n: (-(n % 3), -(n % 4), ids[n]))

    pages = every_page(store, "jobs", JobPhase.READY, limit=3)

    assert [len(page) for page in pages] == [3, 3, 3, 2]
    assert [job_id for page in pages for job_id in page] == [ids[n] for n in order]
    claimed = [claim(store).id for _ in ids]
    assert claimed == [ids[n] for n in order], "the listing is the order claims take"


def test_a_page_holding_the_last_job_has_no_cursor(store: Store) -> None:
    ids = [store.queue("jobs").enqueue(n) for n in range(4)]
    page = store.jobs("jobs", limit=4)
    assert [job.id for job in page.jobs] == ids
    assert page.cursor is None
    assert store.jobs("empty").jobs == ()
    assert store.jobs("empty").cursor is None


def test_delayed_jobs_are_listed_soonest_due_first(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    late = queue.enqueue("late", EnqueueOpts(delay=300))
    soon = queue.enqueue("soon", EnqueueOpts(delay=10, priority=-5))
    tied = [queue.enqueue(f"tied {n}", EnqueueOpts(delay=60, priority=n)) for n in range(3)]
    queue.enqueue("ready now")

    assert every_page(store, "jobs", JobPhase.DELAYED, limit=2) == [[soon, tied[0]], [tied[1], tied[2]], [late]]


def test_running_jobs_are_listed_by_id_with_their_worker_and_lease(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    ids = [queue.enqueue(n, EnqueueOpts(priority=n)) for n in range(3)]
    for worker in ("w-a", "w-b", "w-c"):
        claim(store, worker=worker)

    page = store.jobs("jobs", JobPhase.RUNNING, limit=2)
    rest = store.jobs("jobs", JobPhase.RUNNING, limit=2, cursor=page.cursor)

    listed = [*page.jobs, *rest.jobs]
    assert [job.id for job in listed] == ids
    assert [job.worker_id for job in listed] == ["w-c", "w-b", "w-a"]  # the highest priority was claimed first
    assert {job.lease_until for job in listed} == {clock.now() + timedelta(seconds=300)}
    assert all(job.state is JobState.RUNNING for job in listed)
    assert rest.cursor is None


def test_dead_jobs_are_listed_newest_death_first_with_their_error(store: Store, clock: ManualClock) -> None:
    first = kill(store, error="first")
    clock.advance(5)
    second = kill(store, error="second")
    third = kill(store, error="third")  # died at the same instant as the second: the higher id first

    pages = every_page(store, "jobs", JobPhase.DEAD, limit=2)

    assert pages == [[third, second], [first]]
    listed = store.jobs("jobs", "dead").jobs
    assert [job.last_error for job in listed] == ["third", "second", "first"]
    assert [job.died_at for job in listed] == [clock.now(), clock.now(), clock.now() - timedelta(seconds=5)]
    assert all(job.state is JobState.DEAD for job in listed)


def test_a_listed_job_is_the_snapshot_get_job_gives_payloads_decoded_or_bytes(store: Store, clock: ManualClock) -> None:
    good = store.queue("jobs").enqueue({"to": "ada@example.com"}, EnqueueOpts(priority=1))
    raw = store.queue("jobs").enqueue(b"\x00\xffraw")
    (garbled,) = store.engine.enqueue([NewJob("jobs", b"\xff not json", 0, clock.now(), None, 3)], clock.now())

    listed = store.jobs("jobs").jobs

    assert [job.id for job in listed] == [good, raw, garbled]
    assert list(listed) == [store.get_job(job_id) for job_id in (good, raw, garbled)]
    assert [job.payload for job in listed] == [{"to": "ada@example.com"}, b"\x00\xffraw", b"\xff not json"]
    for job in listed:
        assert_utc(job.run_at, job.enqueued_at)


def test_a_job_claimed_between_two_pages_is_not_listed_twice(store: Store) -> None:
    ids = [store.queue("jobs").enqueue(n) for n in range(6)]
    first = store.jobs("jobs", limit=3)
    claim(store).ack()  # the first listed job leaves
    second = store.jobs("jobs", limit=3, cursor=first.cursor)
    assert [job.id for job in first.jobs] == ids[:3]
    assert [job.id for job in second.jobs] == ids[3:]


def test_a_cursor_belongs_to_its_own_listing(store: Store) -> None:
    for n in range(3):
        store.queue("jobs").enqueue(n)
        store.queue("other").enqueue(n)
    cursor = store.jobs("jobs", limit=1).cursor
    assert cursor is not None

    with pytest.raises(InvalidOptions, match="cursor"):
        store.jobs("other", cursor=cursor)
    with pytest.raises(InvalidOptions, match="cursor"):
        store.jobs("jobs", JobPhase.DELAYED, cursor=cursor)
    for garbage in ("", "not a cursor", cursor[:-3], "W10", "WzEsImpvYnMiLCJyZWFkeSIsMSwwLG51bGxd"):
        with pytest.raises(InvalidOptions, match="cursor"):
            store.jobs("jobs", cursor=garbage)
    with pytest.raises(InvalidArgument):
        store.jobs("jobs", cursor=b"bytes")  # type: ignore[arg-type]


def test_bad_listing_arguments_are_refused_before_the_engine_is_touched(store: Store) -> None:
    store.close()
    bad: list[tuple[type[Exception], dict[str, Any]]] = [
        (InvalidOptions, {"phase": "pending"}),
        (InvalidOptions, {"phase": "READY"}),
        (InvalidArgument, {"phase": 3}),
        (InvalidOptions, {"limit": 0}),
        (InvalidOptions, {"limit": 1001}),
        (InvalidArgument, {"limit": 2.0}),
        (InvalidArgument, {"limit": True}),
        (InvalidOptions, {"cursor": "nope"}),
    ]
    for error, kwargs in bad:
        with pytest.raises(error):
            store.jobs("jobs", **kwargs)
    with pytest.raises(StoreClosed):
        store.jobs("jobs", "running", limit=1000)


@pytest.mark.parametrize(
    "call",
    [
        lambda store, name: store.queue_stats(name),
        lambda store, name: store.jobs(name),
        lambda store, name: store.requeue_dead_queue(name),
        lambda store, name: store.purge_dead(name),
    ],
    ids=["queue_stats", "jobs", "requeue_dead_queue", "purge_dead"],
)
def test_inspection_takes_user_queues_and_outbox_backing_queues_and_refuses_other_names(
    store: Store, call: Any
) -> None:
    call(store, "jobs")
    call(store, store.outbox("mail").queue)
    store.close()
    for name in ("", " padded", "x" * 129, 42, "__alkstore_outbox: padded", "__alkstore_outbox:"):
        with pytest.raises(InvalidName):
            call(store, name)
    for name in ("__alkstore_scheduler", "__alkstore_x", "__alkstore_outbox:__alkstore_x"):
        with pytest.raises(ReservedName):
            call(store, name)
    with pytest.raises(StoreClosed):
        call(store, "jobs")


# -- cancel ----------------------------------------------------------------------------------


def test_cancel_deletes_a_pending_job_asks_a_running_ones_worker_and_says_what_it_did(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    ready = queue.enqueue("ready")
    delayed = queue.enqueue("delayed", EnqueueOpts(delay=60))
    dead = kill(store)
    running = queue.enqueue("running", EnqueueOpts(priority=9))
    held = claim(store)
    assert held.id == running

    assert store.cancel(ready) is CancelOutcome.CANCELLED
    assert store.cancel(delayed) is CancelOutcome.CANCELLED
    assert store.cancel(running) is CancelOutcome.CANCELLING
    assert store.cancel(dead) is CancelOutcome.DEAD
    assert store.cancel(ready) is CancelOutcome.MISSING
    assert store.cancel(10**12) is CancelOutcome.MISSING
    assert store.cancel(0) is CancelOutcome.MISSING

    assert store.get_job(ready) is None
    assert store.get_job(delayed) is None
    clock.advance(60)
    assert queue.claim("w2") is None
    assert must_get(store, running).cancel_requested  # marked; its holder learns and stops the run
    held.retry("the run failed after all")  # however its run ends, the job ends cancelled
    assert store.get_job(running) is None
    dead_job = must_get(store, dead)
    assert dead_job.state is JobState.DEAD
    with pytest.raises(InvalidArgument):
        store.cancel("1")  # type: ignore[arg-type]


def test_a_claim_and_a_cancel_racing_for_the_same_jobs_never_both_win(store: Store) -> None:
    ids = [store.queue("race").enqueue(n) for n in range(60)]

    def claim_all() -> list[int]:
        claimed = []
        while (job := store.queue("race").claim("racer")) is not None:
            claimed.append(job.id)
        return claimed

    def cancel_all() -> dict[int, CancelOutcome]:
        return {job_id: store.cancel(job_id) for job_id in reversed(ids)}

    claimed, outcomes = run_together([claim_all, cancel_all])

    cancelled = {job_id for job_id, outcome in outcomes.items() if outcome is CancelOutcome.CANCELLED}
    assert cancelled.isdisjoint(claimed)
    assert cancelled | set(claimed) == set(ids)
    assert all(outcomes[job_id] is CancelOutcome.CANCELLING for job_id in set(ids) - cancelled)


# -- requeue and purge -----------------------------------------------------------------------


def test_requeue_dead_many_brings_back_the_dead_among_the_ids_with_0_attempts(store: Store) -> None:
    dead = [kill(store) for _ in range(3)]
    alive = store.queue("jobs").enqueue("alive")

    requeued = store.requeue_dead_many([dead[2], dead[0], alive, dead[0], 10**12, 0])

    assert requeued == [dead[0], dead[2]]
    assert store.requeue_dead_many([]) == []
    (stats,) = store.queue_stats("jobs")
    assert (stats.ready, stats.dead) == (3, 1)
    assert [job.id for job in store.jobs("jobs", "dead").jobs] == [dead[1]]
    back = must_get(store, dead[0])
    assert (back.state, back.attempts, back.died_at) == (JobState.PENDING, 0, None)
    with pytest.raises(InvalidArgument):
        store.requeue_dead_many([dead[1], "2"])  # type: ignore[list-item]
    assert store.jobs("jobs", "dead").jobs[0].id == dead[1], "a bad id in the batch requeues nothing"


def test_purge_dead_many_deletes_the_dead_among_the_ids_and_never_a_live_job(store: Store) -> None:
    dead = [kill(store) for _ in range(3)]
    alive = store.queue("jobs").enqueue("alive")

    purged = store.purge_dead_many([dead[2], dead[0], alive, dead[0], 10**12, 0])

    assert purged == [dead[0], dead[2]]
    assert store.purge_dead_many([dead[0]]) == []
    assert store.purge_dead_many([]) == []
    assert must_get(store, alive).state is JobState.PENDING
    assert store.get_job(dead[0]) is None
    assert [job.id for job in store.jobs("jobs", "dead").jobs] == [dead[1]]
    with pytest.raises(InvalidArgument):
        store.purge_dead_many([dead[1], "2"])  # type: ignore[list-item]
    assert store.jobs("jobs", "dead").jobs[0].id == dead[1], "a bad id in the batch purges nothing"


@pytest.mark.parametrize("batch", [1000, 2])
def test_requeue_dead_queue_brings_back_every_job_dead_on_that_queue_alone(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    monkeypatch.setattr(alkstore.store._inspection, "BATCH", batch)
    dead = []
    for _ in range(5):
        dead.append(kill(store))
        clock.advance(1)
    elsewhere = kill(store, "elsewhere")

    assert store.requeue_dead_queue("jobs") == 5

    assert store.queue_stats() == [
        QueueStats("elsewhere", 0, 0, 0, 1, ZERO, CAP),
        QueueStats("jobs", 5, 0, 0, 0, ZERO, CAP),
    ]
    assert sorted(claim(store).id for _ in dead) == dead
    assert store.get_job(elsewhere) is not None
    assert store.requeue_dead_queue("jobs") == 0


def test_purge_dead_deletes_the_jobs_that_died_long_enough_ago_on_that_queue_alone(
    store: Store, clock: ManualClock
) -> None:
    old = [kill(store) for _ in range(2)]
    clock.advance(timedelta(days=8))
    recent = kill(store)
    elsewhere = kill(store, "elsewhere")
    pending = store.queue("jobs").enqueue("pending")

    assert store.purge_dead("jobs", timedelta(days=7)) == 2
    assert [store.get_job(job_id) for job_id in old] == [None, None]
    assert store.purge_dead("jobs", 60) == 0
    clock.advance(60)
    assert store.purge_dead("jobs", 60) == 1
    assert store.get_job(recent) is None
    assert store.get_job(elsewhere) is not None
    assert store.get_job(pending) is not None
    assert store.purge_dead("elsewhere") == 1
    assert store.queue_stats() == [QueueStats("jobs", 1, 0, 0, 0, timedelta(seconds=60), CAP)]
    for bad in (-1, "7d", float("nan")):
        with pytest.raises(InvalidOptions):
            store.purge_dead("jobs", bad)  # type: ignore[arg-type]


def test_purge_dead_works_through_more_dead_jobs_than_one_batch(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alkstore.store._inspection, "BATCH", 2)
    for _ in range(5):
        kill(store)
        clock.advance(1)
    assert store.purge_dead("jobs", 2) == 4  # died at T0 to T0+3, the clock at T0+5
    assert store.purge_dead("jobs") == 1


def test_the_engines_purge_takes_the_oldest_deaths_first_up_to_its_limit(store: Store, clock: ManualClock) -> None:
    dead = []
    for _ in range(4):
        dead.append(kill(store))
        clock.advance(1)
    assert store.engine.purge_dead("jobs", clock.now(), 3) == 3
    assert [job.id for job in store.jobs("jobs", "dead").jobs] == [dead[3]]


# -- schedules, the leader, workers ------------------------------------------------------------


def test_a_schedule_shows_its_last_fired_boundary(store: Store, clock: ManualClock) -> None:
    stored = store.schedule("nightly", "@every 1m", "reports")
    assert stored.last_boundary is None
    assert store.schedules()[0].last_boundary is None

    clock.advance(150)
    fires = store.tick()

    (schedule,) = store.schedules()
    assert schedule.last_boundary == fires[-1].boundary == stored.next_boundary + timedelta(minutes=1)
    assert schedule.next_boundary == stored.next_boundary + timedelta(minutes=2)
    again = store.schedule("nightly", "@every 1m", "reports", {"changed": True})
    assert again.last_boundary == schedule.last_boundary, "re-registration keeps the last boundary"


def test_the_leader_is_whoever_holds_the_scheduler_lease_until_it_lapses(store: Store, clock: ManualClock) -> None:
    assert store.leader() is None
    now = clock.now()
    lock = store.engine.try_lock(SCHEDULER_LOCK, "host-a:1", now, now + timedelta(seconds=10))
    assert lock is not None

    leader = store.leader()

    assert leader == Leader("host-a:1", now + timedelta(seconds=10))
    assert leader is not None
    assert (leader.owner, leader.lease_until) == ("host-a:1", lock.expires_at)
    assert_utc(leader.lease_until)
    clock.advance(10)
    assert store.leader() is None, "a lapsed lease leads no one"
    assert store.engine.read_lock(SCHEDULER_LOCK) == lock, "the lapsed lock is read as stored"
    assert store.engine.release_lock(lock)
    assert store.engine.read_lock(SCHEDULER_LOCK) is None


def test_a_running_scheduler_is_the_leader(store: Store, clock: ManualClock) -> None:
    stop = alkstore.StopToken()
    runner = threading.Thread(target=store.run_schedules, args=(stop,), daemon=True)
    runner.start()
    try:
        clock.wait_for_sleepers(1, timeout=30)
        leader = store.leader()
        assert leader is not None
        assert leader.lease_until == clock.now() + timedelta(seconds=10)
    finally:
        stop.cancel()
        runner.join(30)
    assert not runner.is_alive()
    assert store.leader() is None, "a runner that stops releases its lease"


def worker(worker_id: str, clock: ManualClock, **changes: Any) -> WorkerRecord:
    fields: dict[str, Any] = {
        "host": "web-1",
        "pid": 4242,
        "queues": ("emails", "reports"),
        "concurrency": 8,
        "started_at": clock.now() - timedelta(minutes=5),
        "seen_at": clock.now(),
        "running": 3,
        "processed": 1200,
        "failed": 7,
    }
    fields.update(changes)
    return WorkerRecord(worker_id, **fields)


def test_a_worker_that_reported_recently_is_listed_with_what_it_said(store: Store, clock: ManualClock) -> None:
    store.engine.record_worker(worker("w-b", clock))
    store.engine.record_worker(worker("w-a", clock, queues=("emails",), running=0, processed=0, failed=0))

    listed = store.workers()

    assert [info.id for info in listed] == ["w-a", "w-b"]
    info = listed[1]
    assert isinstance(info, WorkerInfo)
    assert info == WorkerInfo(
        "w-b", "web-1", 4242, ("emails", "reports"), 8, clock.now() - timedelta(minutes=5), clock.now(), 3, 1200, 7
    )
    assert_utc(info.started_at, info.seen_at)
    assert listed[0].queues == ("emails",)


def test_a_workers_heartbeat_replaces_what_it_reported_and_old_reports_fall_out_of_the_list(
    store: Store, clock: ManualClock
) -> None:
    store.engine.record_worker(worker("w-1", clock))
    clock.advance(5)
    store.engine.record_worker(worker("w-1", clock, running=1, processed=1300))
    store.engine.record_worker(worker("w-2", clock))
    clock.advance(55)

    (one, two) = store.workers(within=60)
    assert (one.seen_at, one.running, one.processed) == (clock.now() - timedelta(seconds=55), 1, 1300)
    assert two.id == "w-2"
    assert store.workers(timedelta(seconds=30)) == []
    assert store.engine.workers(clock.now() - timedelta(seconds=55)) == [
        worker(
            "w-1",
            clock,
            seen_at=clock.now() - timedelta(seconds=55),
            running=1,
            processed=1300,
            started_at=clock.now() - timedelta(seconds=55, minutes=5),
        ),
        worker(
            "w-2",
            clock,
            seen_at=clock.now() - timedelta(seconds=55),
            started_at=clock.now() - timedelta(seconds=55, minutes=5),
        ),
    ]
    for bad in (0, -1, "60"):
        with pytest.raises(InvalidOptions):
            store.workers(bad)  # type: ignore[arg-type]


def test_a_worker_that_stops_removes_itself_and_silent_ones_can_be_forgotten(store: Store, clock: ManualClock) -> None:
    store.engine.record_worker(worker("silent", clock))
    clock.advance(3600)
    store.engine.record_worker(worker("clean", clock))
    store.engine.record_worker(worker("busy", clock))

    assert store.engine.remove_worker("clean") is True
    assert store.engine.remove_worker("clean") is False
    assert [info.id for info in store.workers(within=timedelta(days=1))] == ["busy", "silent"]
    assert store.engine.forget_workers(clock.now() - timedelta(minutes=10)) == 1
    assert [info.id for info in store.workers(within=timedelta(days=1))] == ["busy"]
    assert store.engine.forget_workers(clock.now()) == 0
