"""Unique jobs (ADR 031): while a job with a key is unfinished, enqueueing the key again finds it.

"Unfinished" is pending (ready or delayed) or waiting behind its ordering key; with
``unique_running`` also running. The first job's key is free once it is acked, dead or
cancelled, and (without ``unique_running``) once it is claimed, for good: a retry of it does not
take the key back. Every enqueue says whether it created the job (``JobId.created``).
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidArgument, InvalidOptions, JobState, ManualClock, Store, Tasks
from tests.support import must_claim, must_get

from ._checks import committed
from ._runtimes import task_call
from .test_concurrency import run_together

KEY = EnqueueOpts(unique_key="sync-user:42")
RUNNING_TOO = EnqueueOpts(unique_key="sync-user:42", unique_running=True)


def test_a_second_enqueue_of_a_key_finds_the_first_job_and_says_so(store: Store) -> None:
    queue = store.queue("sync")
    first = queue.enqueue({"user": 42}, KEY)
    again = queue.enqueue({"user": 42, "later": True}, KEY)
    assert first.created
    assert not again.created
    assert again == first
    other_key = queue.enqueue({"user": 7}, EnqueueOpts(unique_key="sync-user:7"))
    other_queue = store.queue("elsewhere").enqueue({"user": 42}, KEY)  # a key is one queue's
    assert other_key.created
    assert other_queue.created
    job = must_claim(queue)
    assert (job.id, job.payload) == (first, {"user": 42})  # the first job, as it was enqueued
    assert must_claim(queue).id == other_key
    assert queue.claim("w") is None


def test_plain_enqueues_say_they_created_their_jobs(store: Store) -> None:
    ids = store.queue("plain").enqueue_many(["a", "b"])
    assert [job_id.created for job_id in ids] == [True, True]
    assert store.queue("plain").enqueue("c").created


def test_the_key_holds_while_pending_or_delayed_and_is_free_once_the_job_is_claimed(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("sync")
    delayed = queue.enqueue("later", EnqueueOpts(unique_key="k", delay=60))
    assert queue.enqueue("now", EnqueueOpts(unique_key="k")) == delayed  # delayed holds it
    clock.advance(60)
    job = must_claim(queue)
    assert job.id == delayed
    second = queue.enqueue("while it runs", EnqueueOpts(unique_key="k"))
    assert second.created  # claimed: the key is free (unique_running not asked for)
    job.retry("failed")
    assert must_get(store, delayed).unique_key is None  # a retried job does not take its key back
    third = queue.enqueue("again", EnqueueOpts(unique_key="k"))
    assert third == second
    assert not third.created


def test_with_unique_running_the_key_holds_until_the_job_is_acked_dead_or_cancelled(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("sync")
    first = queue.enqueue("first", RUNNING_TOO)
    job = must_claim(queue)
    assert queue.enqueue("x", RUNNING_TOO) == first  # running holds it
    job.retry("failed", delay=0)
    assert queue.enqueue("x", RUNNING_TOO) == first  # retried: pending again, still holding
    must_claim(queue).ack()
    acked = queue.enqueue("after the ack", RUNNING_TOO)
    assert acked.created
    must_claim(queue).fail("given up")
    assert must_get(store, acked).state is JobState.DEAD
    after_death = queue.enqueue("after its death", RUNNING_TOO)
    assert after_death.created
    assert store.cancel(after_death).value == "cancelled"
    assert queue.enqueue("after the cancel", RUNNING_TOO).created


def test_a_requeued_dead_job_holds_no_key(store: Store) -> None:
    queue = store.queue("sync")
    dead = queue.enqueue("dies", KEY)
    must_claim(queue).fail("dead")
    holder = queue.enqueue("holds it now", KEY)
    assert holder.created
    assert store.requeue_dead(dead)
    assert must_get(store, dead).unique_key is None
    assert queue.enqueue("x", KEY) == holder


def test_a_batch_returns_ids_in_order_and_duplicates_within_it_find_their_first(store: Store) -> None:
    queue = store.queue("sync")
    held = queue.enqueue("already", EnqueueOpts(unique_key="a"))
    ids = [
        queue.enqueue_many(["x"], EnqueueOpts(unique_key=key))[0]
        for key in ("a", "b", "b")  # a batch's opts key every job alike: one key per batch here
    ]
    assert ids[0] == held
    assert not ids[0].created
    assert ids[1].created
    assert ids[2] == ids[1]
    assert not ids[2].created
    same = queue.enqueue_many(["one", "two", "three"], EnqueueOpts(unique_key="c"))
    assert [job_id.created for job_id in same] == [True, False, False]
    assert len(set(same)) == 1


def test_a_task_keys_each_run_from_its_arguments_and_a_batch_mixes_created_and_found(store: Store) -> None:
    tasks = Tasks()
    sync_user = tasks.task("sync-user", queue="sync", unique_key="sync-user:{user_id}")(lambda user_id: None)
    by_function = tasks.task("reindex", queue="sync", unique_key=lambda call: f"reindex:{call['table']}")(
        lambda table: None
    )
    first = task_call(sync_user.enqueue, store, user_id=42)
    ids = task_call(sync_user.enqueue_many, store, [{"user_id": 42}, {"user_id": 7}, {"user_id": 7}])
    assert [(job_id == first, job_id.created) for job_id in ids[:1]] == [(True, False)]
    assert ids[1].created
    assert (ids[2] == ids[1], ids[2].created) == (True, False)
    assert task_call(by_function.enqueue, store, table="orders").created
    assert not task_call(by_function.enqueue, store, table="orders").created
    assert must_get(store, first).unique_key == "sync-user:42"
    loose = tasks.task("loose", queue="sync", unique_key="sync-user:{user_id}")(lambda **kwargs: None)
    with pytest.raises(InvalidArgument, match="unique_key"):
        task_call(loose.enqueue, store, user=1)  # the call binds, but the template needs user_id
    with pytest.raises(InvalidOptions, match="unique_key"):
        task_call(sync_user.with_options(EnqueueOpts(unique_key="")).enqueue, store, user_id=1)


def test_an_enqueue_in_a_transaction_keys_its_job_and_a_rollback_frees_the_key(store: Store) -> None:
    queue = store.queue("sync")

    def roll_back() -> None:
        with store.transaction() as tx:
            store.enqueue_tx(tx, "sync", "rolled back", KEY)
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        roll_back()
    created = committed(store, lambda tx: store.enqueue_tx(tx, "sync", "committed", KEY))
    assert isinstance(created, int)
    assert queue.enqueue("after", KEY) == created


def test_bad_keys_are_refused_before_anything_is_stored(store: Store) -> None:
    bad: list[dict[str, Any]] = [
        {"unique_key": ""},
        {"unique_key": "x" * 256},
        {"unique_key": 42},
        {"unique_key": "tab\tkey"},
        {"unique_running": True},
        {"unique_key": "k", "unique_running": "yes"},
    ]
    for options in bad:
        with pytest.raises(InvalidOptions):
            store.queue("sync").enqueue("x", EnqueueOpts(**options))
    assert store.queue("sync").claim("w") is None


def test_many_threads_enqueueing_one_key_at_once_create_exactly_one_job(store: Store) -> None:
    threads = 8

    def enqueue(n: int) -> list[tuple[int, bool]]:
        queue = store.queue("sync")
        return [(job_id, job_id.created) for job_id in (queue.enqueue({"thread": n, "i": i}, KEY) for i in range(5))]

    results = run_together([lambda n=n: enqueue(n) for n in range(threads)])  # type: ignore[misc]
    outcomes = [outcome for result in results for outcome in result]
    assert len({job_id for job_id, _ in outcomes}) == 1
    assert sum(created for _, created in outcomes) == 1
    must_claim(store.queue("sync")).ack()
    assert store.queue("sync").claim("w") is None
