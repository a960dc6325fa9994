"""Enqueueing inside the caller's transaction: commit publishes, rollback leaves nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from alkstore import EnqueueOpts, JobState, ManualClock, Store
from tests.support import must_claim, must_get


class Abort(Exception):
    """Raised inside a transaction to roll it back."""


def rolled_back(store: Store, body: Callable[[Any], list[int]]) -> list[int]:
    """Run ``body(tx)`` in a transaction that then fails (rolls back); the ids ``body`` got."""
    ids: list[int] = []
    try:
        with store.transaction() as tx:
            ids.extend(body(tx))
            raise Abort
    except Abort:
        return ids


def test_a_job_enqueued_in_a_transaction_is_published_at_commit_and_not_before(
    store: Store, clock: ManualClock
) -> None:
    enqueued_at = clock.now()
    with store.transaction() as tx:
        job_id = store.enqueue_tx(tx, "jobs", {"order": 1}, EnqueueOpts(priority=2, expires=60))
        assert store.get_job(job_id) is None
        assert store.queue("jobs").claim("w1") is None
    info = must_get(store, job_id)
    assert (info.state, info.priority, info.payload) == (JobState.PENDING, 2, {"order": 1})
    assert (info.enqueued_at, info.expires_at) == (enqueued_at, enqueued_at + timedelta(seconds=60))
    job = must_claim(store.queue("jobs"), "w1")
    assert job.id == job_id


def test_a_rolled_back_transaction_leaves_no_job(store: Store) -> None:
    (job_id,) = rolled_back(store, lambda tx: [store.enqueue_tx(tx, "jobs", "never")])
    assert store.get_job(job_id) is None
    assert store.queue("jobs").claim("w1") is None


def test_every_job_of_a_transaction_is_published_together(store: Store) -> None:
    with store.transaction() as tx:
        ids = [store.enqueue_tx(tx, "jobs", n) for n in range(3)]
        message = store.outbox_enqueue_tx(tx, "mail", "hello")
    assert ids == sorted(set(ids))
    claimed = [store.queue("jobs").claim("w1") for _ in ids]
    assert [job.payload if job else None for job in claimed] == [0, 1, 2]
    delivered: list[object] = []
    assert store.outbox("mail").run_once("w1", lambda payload, job: delivered.append((job.id, payload))) is True
    assert delivered == [(message, "hello")]


def test_an_outbox_message_enqueued_in_a_transaction_is_delivered_after_commit(store: Store) -> None:
    with store.transaction() as tx:
        message = store.outbox_enqueue_tx(tx, "mail", {"to": "a@example.org"}, EnqueueOpts(max_attempts=2))
        assert store.outbox("mail").run_once("w1", lambda payload, job: None) is False
    info = must_get(store, message)
    assert (info.queue, info.max_attempts) == (store.outbox("mail").queue, 2)
    delivered: list[object] = []
    assert store.outbox("mail").run_once("w1", lambda payload, job: delivered.append(payload)) is True
    assert delivered == [{"to": "a@example.org"}]


def test_an_outbox_message_of_a_rolled_back_transaction_leaves_nothing(store: Store) -> None:
    message, job_id = rolled_back(
        store, lambda tx: [store.outbox_enqueue_tx(tx, "mail", "never"), store.enqueue_tx(tx, "jobs", "never either")]
    )
    assert store.get_job(message) is None
    assert store.get_job(job_id) is None
    assert store.outbox("mail").run_once("w1", lambda payload, job: None) is False
    assert store.queue("jobs").claim("w1") is None


def test_enqueue_tx_refuses_something_that_is_not_this_engines_transaction(store: Store) -> None:
    for foreign in (object(), None, "BEGIN"):
        with pytest.raises(TypeError):
            store.enqueue_tx(foreign, "jobs", "x")
    assert store.queue("jobs").claim("w1") is None
