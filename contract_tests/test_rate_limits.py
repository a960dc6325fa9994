"""Rate limits on starts (ADR 070): at most N starts per period, per queue and per ``rate_key``.

A limit of N per period spaces a queue's (or a key's) starts at least ``period / N`` apart, so
the starts in any window of the period never exceed N. A limited job is left where it is: not
claimed, no attempt spent, claimable once its limit allows, and the instant it becomes so is
what ``soonest_due`` says. Time is the test's ``ManualClock``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore import EnqueueOpts, InvalidOptions, Job, JobState, ManualClock, RateLimit, Store, Tasks
from tests.support import must_claim, must_get

from ._engines import T0, EngineTarget
from ._profiles import sized
from ._runners import wait_until
from ._runtimes import task_call, worker_of
from .test_concurrency import run_together
from .test_queue_config import other_process
from .test_worker import POLL, Running


def payloads(jobs: Sequence[Job]) -> list[str]:
    return sorted(str(job.payload) for job in jobs)


def test_a_queue_starts_at_most_n_per_period_spaced_evenly(store: Store, clock: ManualClock) -> None:
    queue = store.queue("mail")
    defaults = queue.configure(rate=RateLimit(4, per=1))
    assert defaults.rate == RateLimit(4, per=timedelta(seconds=1))
    for n in range(10):
        queue.enqueue(n)
    starts: list[datetime] = []
    for _ in range(40):  # a claim every 50 ms for two seconds
        jobs = queue.claim_many("w", 10)
        assert len(jobs) <= 1, "a queue's limit allows one start at a time"
        starts.extend(clock.now() for _ in jobs)
        clock.advance(0.05)
    assert starts == [T0 + timedelta(milliseconds=250 * n) for n in range(8)]


def test_a_limited_job_waits_until_the_interval_has_passed_and_not_a_microsecond_less(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("mail")
    queue.configure(rate=RateLimit(2, per=1))
    queue.enqueue("first")
    queue.enqueue("second")
    must_claim(queue).ack()
    clock.advance(timedelta(microseconds=499_999))
    assert queue.claim("w") is None
    clock.advance(timedelta(microseconds=1))
    assert must_claim(queue).payload == "second"


def test_each_key_has_its_own_limit_beside_unkeyed_jobs(store: Store, clock: ManualClock) -> None:
    queue = store.queue("api")
    queue.configure(key_rate=RateLimit(1, per=10))
    for n in range(2):
        queue.enqueue(f"a{n}", EnqueueOpts(rate_key="customer:a"))
        queue.enqueue(f"b{n}", EnqueueOpts(rate_key="customer:b"))
        queue.enqueue(f"free{n}")
    assert payloads(queue.claim_many("w", 10)) == ["a0", "b0", "free0", "free1"]
    assert queue.claim_many("w", 10) == []
    clock.advance(9.999)
    assert queue.claim_many("w", 10) == []
    clock.advance(0.001)
    assert payloads(queue.claim_many("w", 10)) == ["a1", "b1"]


def test_a_dead_job_keeps_its_rate_key_and_a_requeued_one_is_held_to_its_keys_limit(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("api")
    queue.configure(key_rate=RateLimit(1, per=10))
    doomed = queue.enqueue("doomed", EnqueueOpts(rate_key="customer:a", max_attempts=1))
    must_claim(queue).fail("the API said no")
    assert must_get(store, doomed).rate_key == "customer:a"
    clock.advance(10)
    queue.enqueue("fresh", EnqueueOpts(rate_key="customer:a"))
    assert payloads(queue.claim_many("w", 10)) == ["fresh"]
    assert store.requeue_dead(doomed)
    assert must_get(store, doomed).rate_key == "customer:a"
    assert queue.claim_many("w", 10) == []  # the key started "fresh" just now: its requeued job waits
    clock.advance(10)
    assert payloads(queue.claim_many("w", 10)) == ["doomed"]


def test_a_key_without_a_limit_on_its_queue_is_not_limited(store: Store) -> None:
    queue = store.queue("api")
    for n in range(3):
        queue.enqueue(n, EnqueueOpts(rate_key="k"))
    assert len(queue.claim_many("w", 10)) == 3


def test_the_queues_limit_and_a_keys_limit_both_hold(store: Store, clock: ManualClock) -> None:
    queue = store.queue("api")
    queue.configure(rate=RateLimit(10, per=1), key_rate=RateLimit(1, per=1))
    for n in range(3):
        queue.enqueue(f"k{n}", EnqueueOpts(rate_key="k"))
    ran: list[str] = []
    for _ in range(30):
        ran.extend(str(job.payload) for job in queue.claim_many("w", 10))
        clock.advance(0.1)
    assert ran == ["k0", "k1", "k2"]  # one a second: the key's limit, the tighter one


def test_a_limited_job_spends_no_attempt_and_is_not_claimed(store: Store, clock: ManualClock) -> None:
    queue = store.queue("api")
    queue.configure(rate=RateLimit(1, per=60))
    queue.enqueue("first", EnqueueOpts(max_attempts=1))
    waiting = queue.enqueue("second", EnqueueOpts(max_attempts=1))
    must_claim(queue).ack()
    for _ in range(5):
        assert queue.claim("w") is None
        clock.advance(10)
    info = must_get(store, waiting)
    assert (info.state, info.attempts, info.worker_id, info.last_error) == (JobState.PENDING, 0, None, None)
    clock.advance(10)
    job = must_claim(queue)
    assert (job.id, job.attempts) == (waiting, 1)


def test_soonest_due_is_the_soonest_start_the_limits_allow(store: Store, clock: ManualClock) -> None:
    queue = store.queue("api")
    queue.configure(key_rate=RateLimit(1, per=30))
    queue.enqueue("a0", EnqueueOpts(rate_key="a"))
    queue.enqueue("a1", EnqueueOpts(rate_key="a"))
    must_claim(queue)
    assert store.engine.soonest_due(["api"]) == T0 + timedelta(seconds=30)
    clock.advance(5)
    queue.enqueue("b0", EnqueueOpts(rate_key="b"))
    assert store.engine.soonest_due(["api"]) == T0 + timedelta(seconds=5)  # b is free: due now
    must_claim(queue)
    assert store.engine.soonest_due(["api"]) == T0 + timedelta(seconds=30)
    limited = store.queue("limited")
    limited.configure(rate=RateLimit(1, per=20))
    limited.enqueue("x")
    limited.enqueue("y")
    must_claim(limited)
    assert store.engine.soonest_due(["limited"]) == clock.now() + timedelta(seconds=20)


def test_a_tasks_rate_key_rule_keys_each_run(store: Store, clock: ManualClock) -> None:
    tasks = Tasks()
    call = tasks.task("call", queue="calls", rate_key="customer:{customer}")(lambda customer, n: None)
    store.queue("calls").configure(key_rate=RateLimit(1, per=1))
    for n in range(2):
        task_call(call.enqueue, store, customer="a", n=n)
        task_call(call.enqueue, store, customer="b", n=n)
    first = store.queue("calls").claim_many("w", 10)
    assert sorted(job.payload["customer"] for job in first) == ["a", "b"]
    assert store.queue("calls").claim_many("w", 10) == []


def test_workers_claiming_at_once_start_no_more_than_the_limits_allow(store: Store) -> None:
    """Claims at the same instant from several threads (other workers, other hosts): one start per key, and
    one for a queue with its own limit, whoever claims."""
    keyed, whole = store.queue("keyed"), store.queue("whole")
    keyed.configure(key_rate=RateLimit(1, per=60))
    whole.configure(rate=RateLimit(1, per=60))
    for n in range(30):
        keyed.enqueue(n, EnqueueOpts(rate_key=f"k{n % 3}"))
        whole.enqueue(n)

    def work(queue: str) -> list[object]:
        taken: list[object] = []
        for _ in range(5):
            taken.extend(job.payload for job in store.queue(queue).claim_many("w", 4))
        return taken

    keyed_runs = run_together([lambda: work("keyed") for _ in range(4)])
    assert sorted(f"k{n % 3}" for run in keyed_runs for n in run) == ["k0", "k1", "k2"]
    whole_runs = run_together([lambda: work("whole") for _ in range(4)])
    assert len([n for run in whole_runs for n in run]) == 1


@pytest.mark.parametrize(
    ("count", "per"),
    [(0, 1), (-1, 1), (1, 0), (1, -1), (1, math.nan), (1, math.inf), (1, -math.inf), (1.5, 1), (True, 1), (1, "1"),
     (1, timedelta(0)), (2, timedelta(microseconds=1)), (10**7, 1)],
)  # fmt: skip
def test_a_bad_limit_is_a_named_error(count: object, per: object) -> None:
    with pytest.raises(InvalidOptions):
        RateLimit(count, per)  # type: ignore[arg-type]


def test_a_bad_rate_setting_or_key_is_refused_and_nothing_is_written(store: Store) -> None:
    queue = store.queue("api")
    queue.configure(rate=RateLimit(3, per=1))
    for bad in (5, (5, 1), "5/s"):
        with pytest.raises(InvalidOptions):
            queue.configure(rate=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidOptions):
            queue.configure(key_rate=bad)  # type: ignore[arg-type]
    assert queue.defaults().rate == RateLimit(3, per=1)
    for key in ("", "x" * 256, "bell\a"):
        with pytest.raises(InvalidOptions):
            queue.enqueue("never", EnqueueOpts(rate_key=key))
    assert store.queue_stats("api")[0].ready == 0


def test_another_process_sees_the_limits(store: Store, clock: ManualClock) -> None:
    store.queue("api").configure(rate=RateLimit(5, per=60), key_rate=RateLimit(1, per=2))
    defaults = other_process(store, clock).queue("api").defaults()
    assert (defaults.rate, defaults.key_rate) == (RateLimit(5, per=60), RateLimit(1, per=2))


@sized(0.2)
@given(
    count=st.integers(1, 4),
    per_ms=st.integers(1, 2000),
    keyed=st.booleans(),
    gaps_ms=st.lists(st.integers(0, 700), min_size=1, max_size=25),
    batch=st.integers(1, 6),
)
def test_the_starts_in_any_window_never_exceed_the_limit(
    engine: EngineTarget, count: int, per_ms: int, keyed: bool, gaps_ms: list[int], batch: int
) -> None:
    """Over random claim times: in any window of the period no queue or key starts more than its limit, and a
    claim takes a job exactly when the limit allows (the model: one instant per limit, GCRA without a burst)."""
    limit = RateLimit(count, per=timedelta(milliseconds=per_ms))
    clock = ManualClock(T0)
    with engine.store(clock) as store:
        queue = store.queue("prop")
        queue.configure(**({"key_rate": limit} if keyed else {"rate": limit}))
        keys = ["a", "b", "c"] if keyed else [None]
        for i, key in enumerate(keys):  # more jobs of each key than 25 claims can take
            queue.enqueue_many(range(i, 90, len(keys)), EnqueueOpts(rate_key=key))
        starts: dict[str | None, list[datetime]] = defaultdict(list)
        model: dict[str | None, datetime] = {}
        for gap in gaps_ms:
            clock.advance(timedelta(milliseconds=gap))
            now = clock.now()
            allowed = [key for key in keys if model.get(key, now) <= now]
            expected = len(allowed) if keyed else min(1, len(allowed))
            jobs = queue.claim_many("w", batch)
            assert len(jobs) == min(batch, expected)
            for job in jobs:
                key = keys[job.payload % len(keys)] if keyed else None
                starts[key].append(now)
                model[key] = now + limit.interval
                job.ack()
        for key, times in starts.items():
            for i, start in enumerate(times):
                within = [t for t in times[i:] if t < start + limit.per]
                assert len(within) <= count, f"{key}: {len(within)} starts in a window from {start}"


def test_a_worker_runs_a_limited_queues_jobs_as_the_limit_allows_spending_one_attempt_each(
    store: Store, clock: ManualClock
) -> None:
    """The worker waits on ``soonest_due``, which says when the limit allows the next start: each job runs
    once the clock reaches it, and no claim of a limited job spends an attempt meanwhile."""
    tasks = Tasks()
    ran: list[int] = []
    call = tasks.task("call", queue="api")(lambda n: ran.append(n))
    store.queue("api").configure(rate=RateLimit(1, per=10))
    ids = [task_call(call.enqueue, store, n=n) for n in range(3)]
    running = Running(worker_of(store, tasks, poll_interval=POLL))
    try:
        wait_until(lambda: ran == [0], "the first start")
        assert store.engine.soonest_due(["api"]) == clock.now() + timedelta(seconds=10)
        clock.advance(10)
        wait_until(lambda: ran == [0, 1], "the second start, once the limit allows it")
        clock.advance(10)
        wait_until(lambda: ran == [0, 1, 2], "the third")
    finally:
        stats = running.finish()
    assert stats.succeeded == 3
    for job_id in ids:
        assert store.get_job(job_id) is None  # each ran once and was acked
