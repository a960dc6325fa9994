"""Kept results (ADR 042): a queue with ``keep_results`` keeps each succeeded job's outcome for that long.

The outcome is readable by id from any store on the storage (``store.result``), listed per queue
newest first (``store.results``) and pruned once its retention has passed (``purge_results``, and
a worker's upkeep). It carries the return value (through the codec), the job's stamps and the
failed attempts before the one that succeeded. Off (the default) an ack keeps nothing. The job
itself leaves the jobs as every acked one does, so its ordering key's next job runs and its unique
key is free. Time moves only through the store's ``ManualClock``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from alkstore import (
    CancelOutcome,
    EnqueueOpts,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    JobResult,
    JobState,
    LeaseLost,
    ManualClock,
    Store,
    Tasks,
    Worker,
)
from alkstore.engine import ClaimRequest, Done, Held
from tests.support import PATIENCE, must_claim, must_get, wait_until

from ._engines import T0
from ._runtimes import maintenance_of, store_of, task_call, worker_of
from .test_worker import POLL, Running

KEEP = timedelta(minutes=10)


def keeping(store: Store, queue: str = "jobs", keep: timedelta = KEEP) -> None:
    store.queue(queue).configure(keep_results=keep)


def must_result(store: Store, job_id: int) -> JobResult:
    result = store.result(job_id)
    assert result is not None, f"job {job_id} has no kept result"
    return result


@contextmanager
def running(worker: Worker) -> Iterator[Running]:
    """``worker`` running on a thread while the block runs; stopped (once what it holds is done) after it."""
    started = Running(worker)
    try:
        yield started
    finally:
        started.stop.cancel()
        started.thread.join(PATIENCE)


def failed_with(message: str) -> ValueError:
    """A raised (so traced) ``ValueError``."""
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


# -- configuration ----------------------------------------------------------------------------


def test_keep_results_is_a_queue_setting_off_by_default(store: Store) -> None:
    queue = store.queue("jobs")
    assert queue.defaults().keep_results is None
    assert queue.configure(keep_results=90).keep_results == timedelta(seconds=90)
    assert queue.defaults().keep_results == timedelta(seconds=90)
    assert store.queue("other").defaults().keep_results is None
    assert queue.configure().keep_results is None  # replaced whole, as every setting is
    bad: Any
    for bad in (0, -1, timedelta(0), "1h", float("nan")):
        with pytest.raises(InvalidOptions, match="keep_results"):
            queue.configure(keep_results=bad)


# -- an ack keeps the outcome -----------------------------------------------------------------


def test_an_ack_keeps_the_outcome_while_the_queue_keeps_results(store: Store, clock: ManualClock) -> None:
    keeping(store)
    job_id = store.queue("jobs").enqueue({"to": "ada"}, EnqueueOpts(max_attempts=4))
    clock.advance(3)
    job = must_claim(store.queue("jobs"), "w1")
    clock.advance(2)
    job.ack(result={"sent": [1, 2], "to": "ada"})
    assert store.get_job(job_id) is None, "the job itself is done and gone"
    result = must_result(store, job_id)
    assert result == JobResult(
        id=job_id,
        queue="jobs",
        task=None,
        payload={"to": "ada"},
        result={"sent": [1, 2], "to": "ada"},
        attempts=1,
        max_attempts=4,
        enqueued_at=T0,
        started_at=T0 + timedelta(seconds=3),
        finished_at=T0 + timedelta(seconds=5),
        keep_until=T0 + timedelta(seconds=5) + KEEP,
        worker_id="w1",
        errors=(),
    )
    assert result.worker_ids == ("w1",)


def test_a_job_that_fails_for_good_keeps_every_failed_attempt_with_its_worker_and_start(
    store: Store, clock: ManualClock
) -> None:
    """ADR 064: ``get_job`` reads a job's failed attempts, oldest first, while it waits for its next one
    and once it is dead, its last attempt (a retry out of attempts, or a ``fail``) included."""
    keeping(store)
    retried_out = store.queue("jobs").enqueue("out of attempts", EnqueueOpts(max_attempts=2))
    given_up = store.queue("jobs").enqueue("given up")
    first_start = clock.now()
    must_claim(store.queue("jobs"), "w1").retry(failed_with("first"), delay=0)
    clock.advance(1)
    waiting = must_get(store, retried_out)
    assert waiting.claimed_at == first_start  # its latest claim, kept while it waits
    assert [(e.error, e.worker_id, e.started_at, e.failed_at) for e in waiting.errors] == [
        ("first", "w1", first_start, first_start)
    ]
    second_start = clock.now()
    second = must_claim(store.queue("jobs"), "w2")
    clock.advance(2)
    second.retry("second, as text")  # its last attempt: it dies
    dead = must_get(store, retried_out)
    assert (dead.state, dead.claimed_at) == (JobState.DEAD, None)
    assert [(e.error, e.exception, e.worker_id, e.started_at, e.failed_at) for e in dead.errors] == [
        ("first", "builtins.ValueError", "w1", first_start, first_start),
        ("second, as text", None, "w2", second_start, second_start + timedelta(seconds=2)),
    ]
    must_claim(store.queue("jobs"), "w3").fail(failed_with("hopeless"))
    [only] = must_get(store, given_up).errors
    assert (only.error, only.exception, only.worker_id) == ("hopeless", "builtins.ValueError", "w3")
    assert only.traceback is not None


def test_a_job_the_claims_sweep_buries_keeps_the_attempts_its_holders_logged(store: Store, clock: ManualClock) -> None:
    """ADR 064: a job whose last lease lapsed is buried by the next claim's sweep, not by a holder; it keeps
    the attempts logged before (the lapsed one reported by no holder adds none)."""
    keeping(store)
    job_id = store.queue("jobs").enqueue("lapses", EnqueueOpts(max_attempts=2, visibility_timeout=10))
    first_start = clock.now()
    must_claim(store.queue("jobs"), "w1").retry(failed_with("first"), delay=0)
    must_claim(store.queue("jobs"), "w2")  # its last attempt, never finished
    clock.advance(11)
    assert store.queue("jobs").claim_many("w3", 1) == []  # the sweep buries it
    dead = must_get(store, job_id)
    assert dead.state is JobState.DEAD
    assert [(e.error, e.worker_id, e.started_at) for e in dead.errors] == [("first", "w1", first_start)]


def test_a_job_of_a_queue_that_keeps_no_results_logs_no_attempts(store: Store) -> None:
    """ADR 064: the attempt log is kept only where results are (bounded like them)."""
    job_id = store.queue("jobs").enqueue("plain", EnqueueOpts(max_attempts=1))
    must_claim(store.queue("jobs"), "w1").retry("only")
    assert must_get(store, job_id).errors == ()


def test_nothing_is_kept_while_the_queue_keeps_no_results(store: Store) -> None:
    keeping(store, "kept")
    job_id = store.queue("jobs").enqueue("plain")
    must_claim(store.queue("jobs")).ack(result={"ignored": True})
    assert store.result(job_id) is None
    assert store.results("jobs").results == ()
    # A result that could not be encoded is not even looked at when it is not kept.
    other = store.queue("jobs").enqueue("plain")
    must_claim(store.queue("jobs")).ack(result=object())
    assert store.result(other) is None


def test_ack_many_keeps_each_outcome_without_a_result(store: Store, clock: ManualClock) -> None:
    keeping(store)
    ids = store.queue("jobs").enqueue_many(["a", "b"])
    jobs = store.queue("jobs").claim_many("w", 2)
    claimed_at = clock.now()
    clock.advance(2)
    assert store.ack_many(jobs) == []
    results = [must_result(store, job_id) for job_id in ids]
    assert [result.result for result in results] == [None, None]
    assert [result.payload for result in results] == ["a", "b"]
    # Each run timed from its claim (the time it started, as far as the store knows) to the ack.
    assert [(result.started_at, result.finished_at) for result in results] == [(claimed_at, clock.now())] * 2


def test_a_retried_then_successful_job_keeps_its_earlier_failures(store: Store, clock: ManualClock) -> None:
    keeping(store)
    job_id = store.queue("jobs").enqueue("flaky")
    must_claim(store.queue("jobs"), "w1").retry(failed_with("first"), delay=0)
    first_failed = clock.now()
    clock.advance(1)
    must_claim(store.queue("jobs"), "w2").retry("second, as text", delay=0)
    clock.advance(1)
    must_claim(store.queue("jobs"), "w3").ack(result=3)
    result = must_result(store, job_id)
    assert (result.result, result.attempts, result.worker_id) == (3, 3, "w3")
    assert [(e.error, e.exception, e.worker_id) for e in result.errors] == [
        ("first", "builtins.ValueError", "w1"),
        ("second, as text", None, "w2"),
    ]
    first, second = result.errors
    assert first.failed_at == first_failed
    assert first.traceback is not None
    assert first.traceback.rstrip().endswith("ValueError: first")
    assert second.traceback is None
    assert result.worker_ids == ("w1", "w2", "w3")


def test_a_claim_that_acks_keeps_the_outcomes_it_is_given_and_leaves_the_rest_as_plain_acks(
    store: Store, clock: ManualClock
) -> None:
    keeping(store)
    queue = store.queue("jobs")
    ids = queue.enqueue_many(["kept", "plain", "lapsed", "next"])
    now = clock.now()
    records = store.engine.claim(ClaimRequest("jobs", "w1", now, timedelta(seconds=30), 3))
    assert [record.id for record in records] == ids[:3]
    kept, plain, lapsed = records
    acks = [
        Done(kept.id, kept.fence, b'"kept"', now, now, now + KEEP),
        Held(plain.id, plain.fence),
        Done(lapsed.id, lapsed.fence + 1, b'"stale"', now, now, now + KEEP),  # a later claim's fence
    ]
    stale, claimed = store.engine.ack_and_claim(acks, ClaimRequest("jobs", "w1", now, timedelta(seconds=30), 5))
    assert stale == [Held(lapsed.id, lapsed.fence + 1)]
    assert [record.id for record in claimed] == [ids[3]]
    assert must_result(store, kept.id).result == "kept"
    assert store.result(plain.id) is None
    assert store.get_job(plain.id) is None
    assert store.result(lapsed.id) is None
    assert must_get(store, lapsed.id).state is JobState.RUNNING, "a stale ack changes nothing"
    # The same batch through ack, without a claim.
    queue.enqueue_many(["first", "second"])
    first, second = store.engine.claim(ClaimRequest("jobs", "w2", now, timedelta(seconds=30), 2))
    assert store.engine.ack([Held(first.id, first.fence), Done(second.id, second.fence, b"2", None, now, now)]) == []
    assert store.result(first.id) is None
    assert must_result(store, second.id).result == 2


def test_an_outcome_that_cannot_be_encoded_is_refused_at_ack_and_the_job_stays_held(store: Store) -> None:
    keeping(store)
    job_id = store.queue("jobs").enqueue("x")
    job = must_claim(store.queue("jobs"))
    with pytest.raises(InvalidPayload, match=f"the result of job {job_id} cannot be kept"):
        job.ack(result={"when": object()})
    assert must_get(store, job_id).state is JobState.RUNNING
    job.ack(result="fine")
    assert must_result(store, job_id).result == "fine"


def test_a_job_whose_cancel_was_requested_ends_cancelled_and_keeps_nothing(store: Store) -> None:
    keeping(store)
    job_id = store.queue("jobs").enqueue("x")
    job = must_claim(store.queue("jobs"))
    assert store.cancel(job_id) is CancelOutcome.CANCELLING
    job.ack(result="too late")
    assert store.get_job(job_id) is None
    assert store.result(job_id) is None


def test_an_ack_that_lost_its_lease_keeps_nothing_and_the_new_holders_ack_keeps_its_outcome(
    store: Store, clock: ManualClock
) -> None:
    keeping(store)
    queue = store.queue("jobs")
    job_id = queue.enqueue("x", EnqueueOpts(visibility_timeout=10))
    first = must_claim(queue)
    clock.advance(11)
    second = must_claim(queue)
    assert second.id == job_id
    with pytest.raises(LeaseLost):
        first.ack(result="stale")
    assert store.result(job_id) is None, "a stale ack keeps nothing"
    second.ack(result="fresh")
    assert must_result(store, job_id).result == "fresh"


def test_a_kept_result_holds_neither_the_ordering_key_nor_the_unique_key(store: Store) -> None:
    keeping(store)
    queue = store.queue("jobs")
    first = queue.enqueue("first", EnqueueOpts(ordering_key="k", unique_key="u", unique_running=True))
    second = queue.enqueue("second", EnqueueOpts(ordering_key="k"))
    must_claim(queue).ack(result=1)
    assert must_result(store, first).result == 1
    assert must_claim(queue).id == second, "the next job of the key runs"
    assert queue.enqueue("again", EnqueueOpts(unique_key="u")).created, "the unique key is free"


# -- reading it -------------------------------------------------------------------------------


def test_another_store_on_the_storage_reads_the_outcome(store: Store, clock: ManualClock) -> None:
    keeping(store)
    job_id = store.queue("jobs").enqueue({"n": 1})
    must_claim(store.queue("jobs")).ack(result={"n": 2})
    other: Store = store_of(store.engine, clock=clock)
    assert other.result(job_id) == store.result(job_id)
    assert other.results("jobs").results == (must_result(store, job_id),)


def test_results_are_listed_newest_first_a_page_at_a_time(store: Store, clock: ManualClock) -> None:
    keeping(store)
    queue = store.queue("jobs")
    ids = queue.enqueue_many([0, 1, 2, 3, 4])
    jobs = queue.claim_many("w", 5)
    for job in jobs[:2]:  # two finishing at the same instant: the higher id first
        job.ack(result=job.payload)
    for job in jobs[2:]:
        clock.advance(1)
        job.ack(result=job.payload)
    seen: list[int] = []
    cursor = None
    for _ in range(3):
        page = store.results("jobs", limit=2, cursor=cursor)
        seen.extend(result.id for result in page.results)
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == [ids[4], ids[3], ids[2], ids[1], ids[0]]
    for limit in (1, 2, 4):  # the port's bound: at most the limit, the first of the order
        assert [result.id for result in store.engine.list_results("jobs", limit)] == seen[:limit]
    assert store.results("other").results == ()
    first = store.results("jobs", limit=1).cursor
    with pytest.raises(InvalidOptions, match="cursor"):
        store.results("other", cursor=first)
    with pytest.raises(InvalidOptions, match="cursor"):
        store.jobs("jobs", cursor=first)


def test_bad_reads_of_results_are_refused_before_any_io(store: Store) -> None:
    assert [store.result(bad) for bad in (0, -1, 2**63)] == [None, None, None]
    with pytest.raises(InvalidName):
        store.results(" jobs")
    with pytest.raises(InvalidName):
        store.purge_results("")
    with pytest.raises(InvalidOptions, match="limit"):
        store.results("jobs", limit=0)


# -- pruning ----------------------------------------------------------------------------------


def test_results_are_pruned_once_their_retention_has_passed(store: Store, clock: ManualClock) -> None:
    keeping(store, keep=timedelta(seconds=60))
    keeping(store, "longer", keep=timedelta(seconds=120))
    early = store.queue("jobs").enqueue("early")
    must_claim(store.queue("jobs")).ack()
    clock.advance(30)
    late = store.queue("jobs").enqueue("late")
    must_claim(store.queue("jobs")).ack()
    longer = store.queue("longer").enqueue("longer")
    must_claim(store.queue("longer")).ack()
    clock.advance(29)
    assert store.purge_results() == 0
    clock.advance(1)  # the first one's keep_until
    assert store.purge_results("longer") == 0
    assert store.purge_results("jobs") == 1
    assert store.result(early) is None
    assert store.result(late) is not None
    clock.advance(30)
    assert maintenance_of(store, ["jobs"], dead_retention=None, label="w").prune() == 0  # counts dead jobs
    assert store.result(late) is None, "the upkeep duty prunes its queues' expired results"
    assert store.result(longer) is not None, "of its own queues only"
    clock.advance(60)
    assert store.purge_results() == 1
    assert store.result(longer) is None


def test_a_purge_deletes_at_most_its_limit_the_soonest_kept_first(store: Store, clock: ManualClock) -> None:
    keeping(store, keep=timedelta(seconds=60))
    queue = store.queue("jobs")
    ids = []
    for n in range(4):
        ids.append(queue.enqueue(n))
        must_claim(queue).ack()
        clock.advance(1)
    clock.advance(60)  # every one past its keep_until
    assert store.engine.purge_results("jobs", clock.now(), 3) == 3
    assert [job_id for job_id in ids if store.result(job_id) is not None] == [ids[3]], "the soonest kept go first"
    assert store.engine.purge_results(None, clock.now(), 3) == 1


# -- the worker -------------------------------------------------------------------------------


@pytest.mark.parametrize("ack_delay", [0, 0.05], ids=["ack-at-once", "ack-batched"])
def test_the_worker_keeps_what_a_task_returns(store: Store, ack_delay: float) -> None:
    keeping(store, "kept")
    tasks = Tasks()
    done = threading.Event()

    @tasks.task("add", queue="kept")
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    @tasks.task("plain", queue="plain")
    def plain() -> str:
        done.set()
        return "not kept"

    kept = [task_call(add.enqueue, store, a=n, b=1) for n in range(3)]
    other = task_call(plain.enqueue, store)
    with running(worker_of(store, tasks, concurrency=2, poll_interval=POLL, ack_delay=ack_delay)) as worker:
        wait_until(lambda: all(store.result(job_id) is not None for job_id in kept), "the results to be kept")
        wait_until(lambda: store.get_job(other) is None, "the plain job to be done")
    assert [must_result(store, job_id).result for job_id in kept] == [{"sum": 1}, {"sum": 2}, {"sum": 3}]
    first = must_result(store, kept[0])
    assert (first.task, first.payload, first.worker_id) == ("add", {"a": 0, "b": 1}, worker.worker.worker_id)
    assert store.result(other) is None
    assert worker.finish().succeeded == 4


def test_a_handlers_return_value_is_kept_too(store: Store) -> None:
    keeping(store)
    job_id = store.queue("jobs").enqueue("ada")

    def greet(payload: Any, job: Any) -> str:
        return f"hello {payload}"

    with running(worker_of(store, handlers={"jobs": greet}, poll_interval=POLL, ack_delay=0)):
        wait_until(lambda: store.result(job_id) is not None, "the result to be kept")
    assert must_result(store, job_id).result == "hello ada"


def test_a_return_value_that_cannot_be_kept_fails_the_attempt(store: Store) -> None:
    keeping(store, "kept")
    tasks = Tasks()

    @tasks.task("opaque", queue="kept", max_attempts=1)
    def opaque() -> object:
        return object()

    job_id = task_call(opaque.enqueue, store)
    with running(worker_of(store, tasks, poll_interval=POLL)) as worker:
        wait_until(lambda: (info := store.get_job(job_id)) is not None and info.state is JobState.DEAD, "the burial")
    dead = must_get(store, job_id)
    assert dead.last_error is not None
    assert f"the result of job {job_id} cannot be kept" in dead.last_error
    assert store.result(job_id) is None
    stats = worker.finish()
    assert (stats.succeeded, stats.buried) == (0, 1)
