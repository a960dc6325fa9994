"""The claim from a cursor (ADR 061): what it must still find, and what it stops reading under a pinned horizon.

Time is the store's ``ManualClock``: the backstop (a full claim at least every ``claim_backstop``
seconds of it) fires only when a test moves the clock.
"""

from __future__ import annotations

import re
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import EnqueueOpts, Job, ManualClock, StopToken, Store
from alkstore.adapters.postgres._cursors import _EVER as EVER
from alkstore.adapters.postgres._cursors import FULL_EVERY, LEASE_AHEAD, _segments
from alkstore.engine import ClaimRequest, Held
from alkstore.worker._parts import IDLE_RECHECK

from .conftest import OpenStore, engine_of

pytestmark = pytest.mark.postgres

#: A backstop no test reaches unless it moves the clock that far.
HOUR = 3600.0


def claim_ids(store: Store, limit: int = 1, queue: str = "q") -> list[int]:
    """Claim up to ``limit`` jobs of ``queue`` as worker ``w`` and ack them at once: their ids, in claim order."""
    jobs = store.queue(queue).claim_many("w", limit)
    for job in jobs:
        job.ack()
    return [job.id for job in jobs]


def move_the_cursor(store: Store, clock: ManualClock, count: int = 6, step: float = 20) -> None:
    """Enqueue ``count`` jobs ``step`` s on and claim them one by one: the cursor stands past all enqueued before."""
    clock.advance(step)
    store.queue("q").enqueue_many([f"filler {n}" for n in range(count)])
    for _ in range(count):
        assert len(claim_ids(store)) == 1


@pytest.fixture
def cursor_store(open_store: OpenStore, clock: ManualClock) -> Store:
    """A store whose claims read from their cursor until the test moves its clock an hour on."""
    return open_store(clock=clock, claim_backstop=HOUR)


def test_jobs_of_priorities_it_has_no_band_for_are_claimed_in_order_by_a_claim_from_the_cursor(
    cursor_store: Store,
) -> None:
    queue = cursor_store.queue("q")
    a, b, c = queue.enqueue_many(["a", "b", "c"])
    assert claim_ids(cursor_store) == [a]  # the first claim reads in full; the next ones from the cursor
    high = queue.enqueue("high", EnqueueOpts(priority=5))
    low = queue.enqueue("low", EnqueueOpts(priority=-5))
    assert claim_ids(cursor_store, 4) == [high, b, c, low]


def commit_late(store: Store, clock: ManualClock, by: float) -> int:
    """A job enqueued ``by`` seconds before the jobs its transaction waits for are claimed, then committed: its id."""
    store.queue("q").enqueue("first")
    claim_ids(store)
    with store.transaction() as tx:
        late = store.enqueue_tx(tx, "q", "late")
        move_the_cursor(store, clock, step=by)
    return late


def test_a_job_committed_a_few_seconds_late_is_claimed_by_the_next_wide_claim(
    cursor_store: Store, clock: ManualClock
) -> None:
    late = commit_late(cursor_store, clock, by=5)  # 5 s before the newest job claimed: within WIDE
    assert claim_ids(cursor_store) == []  # behind the cursor: left to the backstop
    clock.advance(HOUR)  # one backstop on: a wide claim
    assert claim_ids(cursor_store) == [late]


def test_a_job_committed_further_behind_than_a_wide_claim_reads_is_claimed_by_the_full_claim(
    cursor_store: Store, clock: ManualClock
) -> None:
    late = commit_late(cursor_store, clock, by=20)  # 20 s before the newest job claimed
    assert claim_ids(cursor_store) == []
    clock.advance(HOUR)  # a wide claim reads 10 s behind the newest job: not as far as this one
    assert claim_ids(cursor_store) == []
    clock.advance(HOUR * (FULL_EVERY - 1))  # the full claim is due
    assert claim_ids(cursor_store) == [late]


def test_a_released_job_is_claimed_by_the_next_claim(cursor_store: Store, clock: ManualClock) -> None:
    queue = cursor_store.queue("q")
    queue.enqueue("held")
    held = queue.claim_many("w", 1)[0]
    move_the_cursor(cursor_store, clock)
    held.release()
    assert claim_ids(cursor_store) == [held.id]


def test_a_delayed_job_is_claimed_by_the_claim_that_promotes_it(cursor_store: Store, clock: ManualClock) -> None:
    # Every claim probes for due delayed jobs first, so one is never promoted behind a cursor that moved past it.
    queue = cursor_store.queue("q")
    queue.enqueue("first")
    claim_ids(cursor_store)
    delayed = queue.enqueue("later", EnqueueOpts(delay=5))
    clock.advance(20)
    fillers = queue.enqueue_many(["a", "b"])
    assert claim_ids(cursor_store, 3) == [delayed, *fillers]


def test_the_next_job_of_an_ordering_key_is_claimed_when_the_one_before_is_acked(
    cursor_store: Store, clock: ManualClock
) -> None:
    queue = cursor_store.queue("q")
    first = queue.enqueue("k1", EnqueueOpts(ordering_key="k"))
    second = queue.enqueue("k2", EnqueueOpts(ordering_key="k"))
    held = queue.claim_many("w", 1)[0]
    assert held.id == first
    move_the_cursor(cursor_store, clock)
    held.ack()
    assert claim_ids(cursor_store) == [second]


def record_calls(call: Callable[..., Any], calls: list[object]) -> Callable[..., Any]:
    """``call``, noting each call in ``calls``."""

    def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return call(*args, **kwargs)

    return recorded


@dataclass(frozen=True)
class HeldParent:
    """A parent claimed and held, its dependent, and the store and clock they are on."""

    store: Store
    clock: ManualClock
    held: Job
    child: int


@pytest.fixture
def parent_behind_the_cursor(open_store: OpenStore) -> HeldParent:
    """A parent and its dependent, the parent claimed, then the cursor moved past both, on a store whose clock
    stands a day behind the server's: a dependent its parent's ack makes ready is promoted to pending (one
    whose run_at were ahead of the server's clock would be delayed, and the claim's probe for due delayed
    jobs would find it whatever the cursor)."""
    clock = ManualClock(datetime.now(UTC) - timedelta(days=1))
    store = open_store(clock=clock, claim_backstop=HOUR)
    queue = store.queue("q")
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", EnqueueOpts(after=[parent]))
    held = queue.claim_many("w", 1)[0]
    assert held.id == parent
    move_the_cursor(store, clock)
    return HeldParent(store, clock, held, child)


def test_a_dependent_enqueued_before_the_jobs_claimed_since_is_claimed_when_its_parent_is_acked(
    parent_behind_the_cursor: HeldParent,
) -> None:
    parent_behind_the_cursor.held.ack()
    assert claim_ids(parent_behind_the_cursor.store) == [parent_behind_the_cursor.child]


def test_the_ack_of_a_parent_whose_dependents_the_cursor_still_reaches_keeps_the_claims_on_the_cursor(
    cursor_store: Store, clock: ManualClock
) -> None:
    # A chain's next job stands after its parent in claim order: no full read per step (ADR 066, 067).
    queue = cursor_store.queue("q")
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", EnqueueOpts(after=[parent]))
    held = queue.claim_many("w", 1)[0]
    assert held.id == parent
    held.ack()
    assert engine_of(cursor_store)._cursors.params("q", clock.now())["full"] is False
    assert claim_ids(cursor_store) == [child]


def test_the_claim_that_carries_a_parents_ack_takes_the_dependent_it_made_ready_in_one_round_trip(
    parent_behind_the_cursor: HeldParent,
) -> None:
    # A statement does not see its triggers' writes: the claim after the ack is a second statement, sent
    # with it in one pipeline (ADR 073).
    store, clock, held, child = (
        parent_behind_the_cursor.store,
        parent_behind_the_cursor.clock,
        parent_behind_the_cursor.held,
        parent_behind_the_cursor.child,
    )
    engine = engine_of(store)
    pipelines: list[object] = []
    engine._connections.two = record_calls(engine._connections.two, pipelines)  # type: ignore[method-assign]
    request = ClaimRequest(queue="q", worker_id="w", now=clock.now(), lease=timedelta(seconds=300), limit=1)
    stale, claimed = engine.ack_and_claim([Held(held.id, held.fence)], request)
    assert (stale, [job.id for job in claimed], len(pipelines)) == ([], [child], 1)
    assert store.get_job(held.id) is None
    assert engine.ack([Held(child, claimed[0].fence)]) == []  # the module's schema is left with no job


@pytest.fixture
def behind() -> ManualClock:
    """A frozen clock a day behind the server's: a child promoted by its parent's ack is pending at once (its
    run_at has come by the database's clock), so the claim after the ack takes it without a sweep."""
    return ManualClock(datetime.now(UTC) - timedelta(days=1))


def test_a_chain_step_reads_the_claims_cursor_once_and_sends_its_ack_and_claim_in_one_round_trip(
    open_store: OpenStore, behind: ManualClock
) -> None:
    # The claim after a parent's ack reads the cursor after the acks end (ADR 073); the read before
    # them, which only a claim carried by other acks uses, is not made for it.
    clock = behind
    cursor_store = open_store(clock=clock, claim_backstop=HOUR)
    engine = engine_of(cursor_store)
    graph = cursor_store.graph()
    for n in range(6):
        graph.add(f"j{n}", "q", n, after=[f"j{n - 1}"] if n else ())
    cursor_store.enqueue_graph(graph)
    request = ClaimRequest(queue="q", worker_id="w", now=clock.now(), lease=timedelta(seconds=300), limit=1)
    (held,) = engine.claim(request)
    reads: list[object] = []
    pipelines: list[object] = []
    statements: list[object] = []
    engine._cursors.params = record_calls(engine._cursors.params, reads)  # type: ignore[method-assign]
    engine._connections.two = record_calls(engine._connections.two, pipelines)  # type: ignore[method-assign]
    engine._connections.all = record_calls(engine._connections.all, statements)  # type: ignore[method-assign]
    engine._connections.one = record_calls(engine._connections.one, statements)  # type: ignore[method-assign]
    for _ in range(5):
        stale, (held,) = engine.ack_and_claim([Held(held.id, held.fence)], request)
        assert stale == []
    assert (len(reads), len(pipelines), len(statements)) == (5, 5, 0)
    assert engine.ack([Held(held.id, held.fence)]) == []


def test_a_one_slot_worker_runs_each_step_of_a_chain_with_the_claim_its_parents_ack_carries(
    open_store: OpenStore, behind: ManualClock
) -> None:
    # Between two runs of a chain's jobs the worker sends one pipeline (the parent's ack, then the claim
    # that takes the child) and nothing else that claims or waits: no empty claim, no idle read.
    store = open_store(clock=behind, claim_backstop=HOUR, min_size=1, max_size=2)
    engine = engine_of(store)
    sql = engine._sql
    tasks = alkstore.Tasks()
    steps = 8
    stop = StopToken()
    events: list[str] = []

    @tasks.task("step", queue="chained")
    def step(n: int) -> None:
        events.append(f"run {n}")
        if n == steps - 1:
            stop.cancel()

    names = {sql.claim: "claim", sql.claim_full: "claim", sql.soonest_due: "soonest_due"}
    names.update({sql.ack_and_claim: "ack_and_claim", sql.ack_and_claim_full: "ack_and_claim"})

    def noted(call: Callable[..., Any], fixed: str | None = None) -> Callable[..., Any]:
        def note(*args: Any, **kwargs: Any) -> Any:
            name = fixed or (names.get(args[0]) if args else None)
            if name is not None:
                events.append(name)
            return call(*args, **kwargs)

        return note

    engine._connections.all = noted(engine._connections.all)  # type: ignore[method-assign]
    engine._connections.one = noted(engine._connections.one)  # type: ignore[method-assign]
    engine._connections.two = noted(engine._connections.two, "ack, then claim")  # type: ignore[method-assign]
    store.enqueue_graph(alkstore.chain(*(step.s(n=n) for n in range(steps))))
    alkstore.Worker(store, tasks, worker_id="chained", concurrency=1).run(stop)
    ran = [n for n, event in enumerate(events) if event.startswith("run ")]
    assert [events[n] for n in ran] == [f"run {n}" for n in range(steps)]
    between = [events[ran[n] + 1 : ran[n + 1]] for n in range(steps - 1)]
    assert between == [["ack, then claim"]] * (steps - 1), events


def test_a_claim_from_the_cursor_runs_the_cursors_statement_and_a_full_claim_the_full_one(
    cursor_store: Store, clock: ManualClock
) -> None:
    # Each claim's statement carries only its own read, with its own generic plan (ADR 061, amended
    # 2026-12-07): a wake's claim (from the cursor) never runs the full read's plan nodes, nor the
    # backstop's (in full) the cursor's segments.
    engine = engine_of(cursor_store)
    sql = engine._sql
    ran: list[object] = []
    engine._connections.all = record_calls(engine._connections.all, ran)  # type: ignore[method-assign]
    queue = cursor_store.queue("q")
    queue.enqueue_many(["a", "b", "c", "d"])
    request = ClaimRequest(queue="q", worker_id="w", now=clock.now(), lease=timedelta(days=30), limit=1)
    first = engine.claim(request)  # the queue's first claim: in full
    _, second = engine.ack_and_claim([Held(job.id, job.fence) for job in first], request)  # from the cursor
    third = engine.claim(request)  # from the cursor
    clock.advance(HOUR * FULL_EVERY)  # the backstop's full claim is due (the leases last longer: no sweep)
    request = ClaimRequest(queue="q", worker_id="w", now=clock.now(), lease=timedelta(days=30), limit=1)
    _, fourth = engine.ack_and_claim([Held(job.id, job.fence) for job in (*second, *third)], request)
    assert [len(jobs) for jobs in (first, second, third, fourth)] == [1, 1, 1, 1]
    names = {sql.claim: "claim", sql.claim_full: "claim_full"}
    names.update({sql.ack_and_claim: "ack_and_claim", sql.ack_and_claim_full: "ack_and_claim_full"})
    run = [names[call[0]] for call in ran if isinstance(call, tuple) and call and call[0] in names]
    assert run == ["claim_full", "ack_and_claim", "claim", "ack_and_claim_full"]
    assert engine.ack([Held(job.id, job.fence) for job in fourth]) == []


def test_a_lapsed_lease_is_reclaimed_by_a_claim_from_the_cursor(cursor_store: Store, clock: ManualClock) -> None:
    queue = cursor_store.queue("q")
    queue.enqueue("slow", EnqueueOpts(visibility_timeout=30))
    lapsing = queue.claim_many("w", 1)[0]
    move_the_cursor(cursor_store, clock)
    clock.advance(timedelta(seconds=10) - timedelta(microseconds=1))
    assert claim_ids(cursor_store) == []  # its lease ends 30 s after its claim
    clock.advance(timedelta(microseconds=1))
    assert claim_ids(cursor_store) == [lapsing.id]


def test_every_job_a_sweep_put_back_is_claimed_though_the_claim_after_it_takes_one(
    cursor_store: Store, clock: ManualClock
) -> None:
    queue = cursor_store.queue("q")
    ids = queue.enqueue_many(["a", "b", "c"], EnqueueOpts(visibility_timeout=30))
    assert [job.id for job in queue.claim_many("w", 3)] == ids
    move_the_cursor(cursor_store, clock)  # 20 s on: the cursor stands past them
    clock.advance(10)  # their leases lapse: the next claim sweeps all three back, behind the cursor
    assert [claim_ids(cursor_store) for _ in ids] == [[job_id] for job_id in ids]


def test_a_job_another_engine_released_is_claimed_by_the_next_wide_claim_or_the_full_one(
    open_store: OpenStore, clock: ManualClock
) -> None:
    # Nothing tells this engine of another's release: the job keeps its run_at, behind this engine's cursor.
    here, there = (open_store(clock=clock, claim_backstop=HOUR) for _ in range(2))
    queue = there.queue("q")
    far = queue.enqueue("far")
    clock.advance(15)
    near = queue.enqueue("near")
    held = {job.id: job for job in queue.claim_many("elsewhere", 2)}
    assert set(held) == {near, far}
    move_the_cursor(here, clock, step=5)  # this engine's newest claimed job is 5 s after near, 20 s after far
    held[near].release()
    held[far].release()
    assert claim_ids(here) == []  # behind the cursor: left to the backstop
    # The idle read reads from where the next wide claim does: it announces near, which that claim takes.
    assert here.engine.soonest_due(["q"]) == there.get_job(near).run_at  # type: ignore[union-attr]
    clock.advance(HOUR)  # a wide claim reads 10 s behind the newest job: near, not far
    assert claim_ids(here) == [near]
    assert here.engine.soonest_due(["q"]) is None  # far is left to the full claim
    assert claim_ids(here) == []
    clock.advance(HOUR * (FULL_EVERY - 1))  # the full claim is due
    assert claim_ids(here) == [far]


def test_a_job_this_engine_retried_is_claimed_by_the_next_claim(cursor_store: Store, clock: ManualClock) -> None:
    queue = cursor_store.queue("q")
    queue.enqueue("flaky", EnqueueOpts(max_attempts=3))
    held = queue.claim_many("w", 1)[0]
    move_the_cursor(cursor_store, clock)
    # Retried at once: its run_at is the retry's instant, ahead of every bound, so the claim from the cursor (and
    # the idle read) find it with or without the full claim this engine's put-back brings.
    held.retry("flaky", delay=0)
    assert cursor_store.engine.soonest_due(["q"]) is not None
    assert claim_ids(cursor_store) == [held.id]


def test_a_dead_job_this_engine_requeued_is_claimed_by_the_next_claim_and_announced_by_the_idle_read(
    cursor_store: Store, clock: ManualClock
) -> None:
    # A requeue gives the job its own instant for run_at, ahead of every bound; the engine resets every queue's
    # cursor as well, so the next claim and the idle read would find it in full if it kept an older one.
    queue = cursor_store.queue("q")
    queue.enqueue("doomed", EnqueueOpts(max_attempts=1))
    held = queue.claim_many("w", 1)[0]
    held.fail("no")
    move_the_cursor(cursor_store, clock)
    assert cursor_store.requeue_dead(held.id)
    assert cursor_store.engine.soonest_due(["q"]) is not None
    assert claim_ids(cursor_store) == [held.id]


def test_jobs_enqueued_after_the_clock_stepped_back_are_claimed(cursor_store: Store, clock: ManualClock) -> None:
    queue = cursor_store.queue("q")
    move_the_cursor(cursor_store, clock)
    clock.set(clock.now() - timedelta(seconds=30))  # behind every job the cursor was made of
    ids = queue.enqueue_many(["a", "b", "c"])
    assert [claim_ids(cursor_store) for _ in ids] == [[job_id] for job_id in ids]


def test_with_a_backstop_of_zero_every_claim_reads_in_full(open_store: OpenStore, clock: ManualClock) -> None:
    store = open_store(clock=clock, claim_backstop=0)
    queue = store.queue("q")
    queue.enqueue("first")
    claim_ids(store)
    with store.transaction() as tx:
        late = store.enqueue_tx(tx, "q", "late")
        move_the_cursor(store, clock)
    assert claim_ids(store) == [late]


@pytest.mark.parametrize("value", [-1, float("nan"), "1", True])
def test_a_backstop_that_is_not_seconds_is_refused(pg_dsn: str, value: Any) -> None:
    with pytest.raises(alkstore.errors.InvalidOptions, match="claim_backstop"):
        alkstore.open(pg_dsn, claim_backstop=value)


# -- under a pinned horizon ----------------------------------------------------------------------


@pytest.fixture
def pinned(pg_dsn: str) -> Iterator[None]:
    """One transaction holding an xid, idle, for the test's length: nothing deleted after it is reclaimed."""
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("SELECT txid_current()")
        yield
        conn.rollback()


def test_a_worker_drains_a_queue_under_a_pinned_horizon_running_each_job_once(
    open_store: OpenStore, pinned: None
) -> None:
    store = open_store(max_size=4)
    tasks = alkstore.Tasks()
    ran: Counter[int] = Counter()
    total = 3000
    stop = StopToken()
    lock = threading.Lock()

    @tasks.task("count", queue="pinned")
    def count(n: int) -> None:
        with lock:
            ran[n] += 1
            if len(ran) == total:
                stop.cancel()

    for start in range(0, total, 500):
        count.enqueue_many(store, [{"n": n} for n in range(start, start + 500)])
    worker = alkstore.Worker(store, tasks, worker_id="pinned", concurrency=4, poll_interval=0.05)
    stats = worker.run(stop)
    assert sorted(ran) == list(range(total))
    assert set(ran.values()) == {1}
    assert stats.succeeded == total
    (counts,) = store.queue_stats("pinned")
    assert (counts.ready, counts.running, counts.delayed) == (0, 0, 0)


def claim_buffers(store: Store, queue: str) -> int:
    """The shared buffers of the claim of 4 that the engine would run next, under EXPLAIN (ANALYZE, BUFFERS)."""
    engine = engine_of(store)
    now = store.clock.now()
    request = ClaimRequest(queue=queue, worker_id="w", now=now, lease=timedelta(seconds=300), limit=4)
    params = {
        **engine._cursors.params(queue, now),
        "probe": True,
        "queue": request.queue,
        "worker": request.worker_id,
        "now": request.now,
        "lease_us": 300_000_000,
        "limit": request.limit,
        "limited": False,
        "lease_expired_error": b"lease expired",
        "job_expired_error": b"job expired",
    }
    with engine.pool.connection() as conn:
        claim = engine._sql.claim_full if params["full"] else engine._sql.claim
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + claim, params).fetchall()
    found = re.search(r"shared hit=(\d+)(?: read=(\d+))?", str(plan[1][0]))
    assert found is not None, plan[:3]
    return int(found.group(1)) + int(found.group(2) or 0)


def finish(store: Store, queue: str, count: int) -> None:
    """Enqueue ``count`` jobs and claim and ack them through the engine, 100 a claim (few claims: under a pinned
    horizon a full claim reads every entry finished before it, so each costs more than the last)."""
    q = store.queue(queue)
    q.enqueue_many(["x"] * count)
    left = count
    while left:
        jobs = q.claim_many("builder", 100)
        assert jobs
        assert store.ack_many(jobs) == []
        left -= len(jobs)


@pytest.mark.parametrize("backstop", [HOUR, 0.0])
def test_under_a_pinned_horizon_a_claim_from_the_cursor_reads_as_much_whatever_finished_before_it(
    open_store: OpenStore, clock: ManualClock, pinned: None, backstop: float
) -> None:
    store = open_store(clock=clock, claim_backstop=backstop)
    buffers = []
    for queue, finished in (("small", 2000), ("large", 10000)):
        finish(store, queue, finished)
        store.queue(queue).enqueue_many(["live"] * 8)
        buffers.append(claim_buffers(store, queue))
    small, large = buffers
    if backstop:
        assert large - small < 20, buffers
    else:  # every claim from the left end: it reads every finished job's dead entry
        assert large - small > 200, buffers


def idle_buffers(store: Store, queue: str) -> int:
    """The shared buffers of the engine's ``soonest_due`` of ``queue`` (an idle worker's read), under EXPLAIN."""
    engine = engine_of(store)
    with engine.pool.connection() as conn:
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + engine._sql.soonest_due, engine._cursors.idle_params([queue])
        ).fetchall()
    found = re.search(r"shared hit=(\d+)(?: read=(\d+))?", str(plan[1][0]))
    assert found is not None, plan[:3]
    return int(found.group(1)) + int(found.group(2) or 0)


@pytest.mark.parametrize("backstop", [HOUR, 0.0])
def test_under_a_pinned_horizon_an_idle_read_reads_as_much_whatever_finished_before_it(
    open_store: OpenStore, clock: ManualClock, pinned: None, backstop: float
) -> None:
    # Finished jobs leave dead entries at the left ends of the ready index and of the lease index (their
    # leases end in claim order); the read starts where the next wide claim reads (10 s of claims back) and
    # looks at the leases from the last probe to LEASE_AHEAD past it, once the pin is older than the leases too.
    store = open_store(clock=clock, claim_backstop=backstop)
    buffers = []
    for queue, finished in (("idle-small", 2000), ("idle-large", 10000)):
        q = store.queue(queue)
        for _ in range(finished // 100):  # 100 jobs a second, enqueued and claimed: their run_at and leases spread
            q.enqueue_many(["x"] * 100)
            jobs = q.claim_many("builder", 100)
            assert len(jobs) == 100
            assert store.ack_many(jobs) == []
            clock.advance(1)
        q.enqueue_many(["live"] * 8)
        buffers.append(idle_buffers(store, queue))
        clock.advance(300)  # the finished jobs' leases have all ended by now
        assert claim_ids(store, 8, queue)
        assert claim_ids(store, 8, queue) == []
        buffers.append(idle_buffers(store, queue))
    small, small_lapsed, large, large_lapsed = buffers
    if backstop:
        assert large - small < 20, buffers
        assert large_lapsed - small_lapsed < 20, buffers
    else:  # every read from the left ends: it reads every finished job's dead entries
        assert large - small > 400, buffers
        assert large_lapsed - small_lapsed > 400, buffers


def test_an_idle_read_looks_further_ahead_than_an_idle_worker_waits() -> None:
    # The idle read sees a lease end only within LEASE_AHEAD of its queue's last claim; an idle worker's
    # rounds (each a claim) come at least every IDLE_RECHECK, so each lease end is read before it comes.
    assert timedelta(seconds=IDLE_RECHECK) < LEASE_AHEAD


def test_a_lease_end_is_announced_once_a_claim_comes_within_lease_ahead_of_it(
    cursor_store: Store, clock: ManualClock
) -> None:
    queue = cursor_store.queue("q")
    queue.enqueue("slow", EnqueueOpts(visibility_timeout=60))
    held = queue.claim_many("w", 1)[0]
    assert held.lease_until is not None
    assert cursor_store.engine.soonest_due(["q"]) is None  # 60 s past the last probe: left to a later read
    clock.advance(timedelta(seconds=60) - LEASE_AHEAD)
    assert claim_ids(cursor_store) == []  # an idle worker's round
    assert cursor_store.engine.soonest_due(["q"]) == held.lease_until
    clock.advance(LEASE_AHEAD)
    assert claim_ids(cursor_store) == [held.id]  # the lease lapsed: swept and claimed again


def test_the_segments_priorities_are_made_once_per_set_of_bands_and_sent_as_made() -> None:
    # A queue's claims from its cursor send the same segments of priorities while its bands are the same
    # priorities (ADR 061, amended 2026-12-07): the two arrays and their literals are made once, not at each claim.
    at = datetime(2026, 12, 7, tzinfo=UTC)
    first = _segments({0: (at, 5)})
    again = _segments({0: (at + timedelta(seconds=1), 9)})
    top, bottom = 2**31 - 1, -(2**31)
    assert (list(first["band_his"]), list(first["band_los"])) == ([top, 0, -1], [1, 0, bottom])
    assert (list(first["band_ats"]), list(first["band_ids"])) == ([EVER, at, EVER], [0, 5, 0])
    assert (list(again["band_ats"]), list(again["band_ids"])) == ([EVER, at + timedelta(seconds=1), EVER], [0, 9, 0])
    assert again["band_his"] is first["band_his"]
    assert again["band_los"] is first["band_los"]
    # the server's binary bigint[] (ADR 071, amended 2026-12-07): one dimension of 3 from 1, each element 8 bytes
    binary = struct.pack("!iiIii" + "iq" * 3, 1, 0, 20, 3, 1, 8, top, 8, 0, 8, -1)
    assert first["band_his"].literal == binary
    two = _segments({5: (at, 1), -3: (at, 2)})
    assert (list(two["band_his"]), list(two["band_los"])) == ([top, 5, 4, -3, -4], [6, 5, -2, -3, bottom])
    assert list(two["band_ids"]) == [0, 1, 0, 2, 0]


def test_a_claim_from_the_cursor_checks_run_at_on_the_rows_it_fetches_not_on_every_index_entry(
    open_store: OpenStore, clock: ManualClock
) -> None:
    # A segment's scan reads the rest of the leaf page it starts on, each entry against each index key
    # (ADR 061, amended 2026-12-07): "run_at <= now" is a filter of the fetched rows, not one of those keys;
    # the band's bounds and the cursor's row comparison stay keys (where the scan starts and stops).
    store = open_store(clock=clock, claim_backstop=HOUR)
    queue = store.queue("keys")
    queue.enqueue_many(list(range(8)))
    assert len(queue.claim_many("w", 2)) == 2  # the first claim is full; the next reads from the cursor
    engine = engine_of(store)
    now = store.clock.now()
    params = {
        **engine._cursors.params("keys", now),
        "probe": True, "queue": "keys", "worker": "w", "now": now, "lease_us": 300_000_000, "limit": 4,
        "limited": False, "lease_expired_error": b"lease expired", "job_expired_error": b"job expired",
    }  # fmt: skip
    assert params["full"] is False
    with engine.pool.connection() as conn:
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + engine._sql.claim, params).fetchall())
    scans = re.findall(r"Index Scan using jobs_claim .*\n\s+Index Cond: (.*)\n\s+Filter: (.*)", plan)
    assert len(scans) == 1, plan
    ((keys, rows),) = scans
    assert "(priority >= b.band_lo) AND (ROW(run_at, id) >= ROW(b.band_at, b.band_id))" in keys, plan
    assert "run_at <=" not in keys, plan
    assert "run_at <=" in rows, plan


def test_a_claim_from_the_cursor_takes_its_segments_in_order_and_reads_no_further_than_its_limit(
    open_store: OpenStore, clock: ManualClock
) -> None:
    # The segments cut the claim order in it (highest priorities first), and each reads in that order: the
    # first ``limit`` rows of their concatenation are the best, so the claim sorts nothing and stops reading
    # once it has them (ADR 061, amended "the segments in their order"). An idle worker's wake: one job of
    # the band's priority, found by the band's segment; the priorities below are never read.
    store = open_store(clock=clock, claim_backstop=HOUR)
    queue = store.queue("order")
    queue.enqueue_many(list(range(4)))
    assert len(queue.claim_many("w", 1)) == 1  # the first claim is full; the next reads from the cursor
    engine = engine_of(store)
    now = store.clock.now()
    params = {
        **engine._cursors.params("order", now),
        "probe": True, "queue": "order", "worker": "w", "now": now, "lease_us": 300_000_000, "limit": 1,
        "limited": False, "lease_expired_error": b"lease expired", "job_expired_error": b"job expired",
    }  # fmt: skip
    assert params["full"] is False
    assert len(params["band_his"]) == 3  # above the band, the band, below it
    with engine.pool.connection() as conn:
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN ANALYZE " + engine._sql.claim, params).fetchall())
    assert "Sort" not in plan, plan
    scans = re.findall(r"Index Scan using jobs_claim .*\(actual .* loops=(\d+)\)", plan)
    assert scans == ["2"], plan  # the segment above (empty) and the band's; not the one below
