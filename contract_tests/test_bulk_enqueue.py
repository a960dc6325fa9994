"""Bulk enqueue (issue 11): many jobs in one call, in a transaction of their own or the caller's.

The ids come back in payload order; bad input anywhere rejects the whole batch before any I/O;
a batch commits together or not at all, and wakes the queue's waiting claims.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import (
    EnqueueOpts,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    JobState,
    ManualClock,
    Store,
    Tasks,
)
from alkstore.engine import NewJob
from contract_tests._runtimes import task_call
from tests.support import must_get


class Abort(Exception):
    """Raised inside a transaction to roll it back."""


def drained(store: Store, queue: str) -> list[object]:
    """Every job of ``queue``, claimed in claim order and acked; their payloads."""
    payloads: list[object] = []
    while jobs := store.queue(queue).claim_many("w1", 100):
        payloads.extend(job.payload for job in jobs)
        store.ack_many(jobs)
    return payloads


def test_enqueue_many_stores_every_payload_with_the_same_options_and_returns_the_ids_in_order(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    before = queue.enqueue("first")
    ids = queue.enqueue_many(({"n": n} for n in range(250)), EnqueueOpts(priority=3, expires=60))
    assert len(ids) == 250
    assert ids == sorted(ids)
    assert ids[0] > before
    for n in (0, 137, 249):
        info = must_get(store, ids[n])
        assert (info.payload, info.priority, info.state, info.attempts) == ({"n": n}, 3, JobState.PENDING, 0)
        assert info.expires_at == clock.now() + timedelta(seconds=60)
    assert drained(store, "jobs") == [{"n": n} for n in range(250)] + ["first"]


def test_an_empty_batch_stores_nothing(store: Store) -> None:
    assert store.queue("jobs").enqueue_many([]) == []
    with store.transaction() as tx:
        assert store.enqueue_many_tx(tx, "jobs", iter(())) == []
    assert store.queue("jobs").claim("w1") is None


def test_a_delayed_batch_is_claimable_once_due(store: Store, clock: ManualClock) -> None:
    ids = store.queue("jobs").enqueue_many(["a", "b"], EnqueueOpts(delay=30))
    assert store.queue("jobs").claim("w1") is None
    clock.advance(30)
    assert [job.id for job in store.queue("jobs").claim_many("w1", 5)] == ids


@pytest.mark.parametrize(
    ("payloads", "error", "match"),
    [
        (["ok", {1, 2}, "ok"], InvalidPayload, "JSON"),
        ("abc", InvalidArgument, "payloads must be an iterable"),
        (b"abc", InvalidArgument, "payloads must be an iterable"),
        ({"a": 1}, InvalidArgument, "payloads must be an iterable"),
        (42, InvalidArgument, "payloads must be an iterable"),
    ],
)
def test_bad_input_anywhere_rejects_the_whole_batch_before_anything_is_stored(
    store: Store, payloads: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        store.queue("jobs").enqueue_many(payloads)  # type: ignore[arg-type]
    with store.transaction() as tx, pytest.raises(error, match=match):
        store.enqueue_many_tx(tx, "jobs", payloads)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match="priority"):
        store.queue("jobs").enqueue_many(["a", "b"], EnqueueOpts(priority=10**12))
    with store.transaction() as tx, pytest.raises(InvalidName, match="queue name"):
        store.enqueue_many_tx(tx, "", ["a"])
    assert store.queue("jobs").claim("w1") is None


def test_a_batch_in_the_callers_transaction_is_published_at_commit_and_erased_by_rollback(store: Store) -> None:
    with store.transaction() as tx:
        ids = store.enqueue_many_tx(tx, "jobs", ["a", "b", "c"])
        assert all(store.get_job(job_id) is None for job_id in ids)
    assert [info.payload if info else None for info in map(store.get_job, ids)] == ["a", "b", "c"]
    rolled: list[int] = []
    try:
        with store.transaction() as tx:
            rolled.extend(store.enqueue_many_tx(tx, "jobs", ["x", "y"]))
            raise Abort
    except Abort:
        pass
    assert len(rolled) == 2
    assert all(store.get_job(job_id) is None for job_id in rolled)
    assert drained(store, "jobs") == ["a", "b", "c"]


def test_a_batch_larger_than_one_statement_is_stored_whole_and_in_order(store: Store) -> None:
    ids = store.queue("jobs").enqueue_many(range(10_001))  # two statements of 5,000 and one of a single job
    assert len(ids) == len(set(ids)) == 10_001
    assert ids == sorted(ids)
    first, last = store.get_job(ids[0]), store.get_job(ids[-1])
    assert (first.payload if first else None, last.payload if last else None) == (0, 10_000)
    with store.transaction() as tx:
        more = store.enqueue_many_tx(tx, "jobs", range(6_000))
    assert len(more) == 6_000
    assert more[0] > ids[-1]


def test_a_task_enqueues_many_runs_by_keyword(store: Store) -> None:
    tasks = Tasks()
    send = tasks.task("send", queue="mail", priority=2)(lambda to: None)
    ids = task_call(send.enqueue_many, store, [{"to": "ada"}, {"to": "bob"}])
    with store.transaction() as tx:
        ids += task_call(send.enqueue_many_tx, store, tx, [{"to": "eve"}])
    infos = [store.get_job(job_id) for job_id in ids]
    assert [(info.task, info.priority, info.payload) for info in infos if info] == [
        ("send", 2, {"to": "ada"}),
        ("send", 2, {"to": "bob"}),
        ("send", 2, {"to": "eve"}),
    ]
    for bad in ([("to", "x")], [{1: "x"}], {"to": "x"}, "to"):
        with pytest.raises(InvalidArgument, match="keyword"):
            task_call(send.enqueue_many, store, bad)
    assert len(drained(store, "mail")) == 3


def test_a_batch_of_differing_jobs_stores_each_ones_own_fields(store: Store, clock: ManualClock) -> None:
    """A batch whose jobs differ (what a task layer or a mixed batch hands the engine) is one insert
    of arrays: each job keeps its own queue, priority, instants, attempts, lease length, task and trace."""
    now = clock.now()
    jobs = [
        NewJob("mixed", b"1", 3, now, now + timedelta(hours=1), 5, timedelta(seconds=7), "send", "trace-1"),
        NewJob("other", b"2", 0, now + timedelta(seconds=30), None, 2, None, None, None),
        NewJob("mixed", b"3", -1, now, None, 1, timedelta(minutes=2), "report", None),
    ]
    ids = store.engine.enqueue(jobs, now)
    for job, job_id in zip(jobs, ids, strict=True):
        record = store.engine.get_job(job_id)
        assert record is not None
        stored = (record.queue, record.payload, record.priority, record.run_at, record.expires_at, record.max_attempts)
        assert stored == (job.queue, job.payload, job.priority, job.run_at, job.expires_at, job.max_attempts)
        assert (record.visibility, record.task, record.trace) == (job.visibility, job.task, job.trace)


def test_a_keyed_job_is_read_back_with_its_keys(store: Store, clock: ManualClock) -> None:
    now = clock.now()
    keyed = NewJob("keyed", b"1", 0, now, None, 3, unique_key="u", unique_running=True, ordering_key="k")
    (job_id,) = store.engine.enqueue([keyed], now)
    record = store.engine.get_job(job_id)
    assert record is not None
    assert (record.unique_key, record.unique_running, record.ordering_key) == ("u", True, "k")
    (plain_id,) = store.engine.enqueue([NewJob("keyed", b"2", 0, now, None, 3)], now)
    plain = store.engine.get_job(plain_id)
    assert plain is not None
    assert (plain.unique_key, plain.unique_running, plain.ordering_key) == (None, False, None)
