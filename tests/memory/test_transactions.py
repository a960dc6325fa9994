"""MemoryTransaction: what enqueue_tx accepts, commit publishes, an exception rolls back and re-raises."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import ManualClock, Store
from alkstore.adapters.memory import MemoryTransaction
from tests.support import must_claim, must_get


class Boom(Exception):
    """An error raised inside a transaction by the test."""


def abort_transaction(store: Store, error: BaseException, enqueued: list[int], queue: str = "q") -> None:
    """Enqueue onto ``queue`` and into the outbox ``mail`` in one transaction, then raise ``error`` in it."""
    with store.transaction() as tx:
        enqueued.append(store.enqueue_tx(tx, queue, "dropped"))
        enqueued.append(store.outbox_enqueue_tx(tx, "mail", "dropped"))
        raise error


def test_a_job_enqueued_in_a_transaction_is_invisible_until_commit(store: Store) -> None:
    with store.transaction() as tx:
        job_id = store.enqueue_tx(tx, "q", {"order": 1})
        assert store.get_job(job_id) is None
        assert store.queue("q").claim("w") is None
    job = must_claim(store.queue("q"))
    assert (job.id, job.payload) == (job_id, {"order": 1})


def test_commit_publishes_every_enqueue_of_the_transaction_at_once(store: Store) -> None:
    with store.transaction() as tx:
        ids = [store.enqueue_tx(tx, "a", 1), store.outbox_enqueue_tx(tx, "mail", 2), store.enqueue_tx(tx, "a", 3)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    assert all(store.get_job(job_id) is not None for job_id in ids)
    outbox_job = must_get(store, ids[1])
    assert outbox_job.queue == store.outbox("mail").queue
    assert outbox_job.max_attempts == 5


def test_an_exception_in_the_with_block_rolls_back_and_is_re_raised(store: Store) -> None:
    error = Boom("abort")
    enqueued: list[int] = []
    with pytest.raises(Boom) as info:
        abort_transaction(store, error, enqueued)
    assert info.value is error
    assert len(enqueued) == 2
    assert all(store.get_job(job_id) is None for job_id in enqueued)
    assert store.queue("q").claim("w") is None
    assert store.outbox("mail").run_once("w", lambda payload, job: None) is False


def test_a_base_exception_rolls_back_too(store: Store) -> None:
    enqueued: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        abort_transaction(store, KeyboardInterrupt(), enqueued)
    assert len(enqueued) == 2
    assert all(store.get_job(job_id) is None for job_id in enqueued)


def test_a_committed_transaction_refuses_further_enqueues_with_value_error(store: Store) -> None:
    with store.transaction() as tx:
        store.enqueue_tx(tx, "q", 1)
    with pytest.raises(ValueError, match="committed"):
        store.enqueue_tx(tx, "q", 2)
    with pytest.raises(ValueError, match="committed"):
        store.outbox_enqueue_tx(tx, "mail", 2)
    job = must_claim(store.queue("q"))
    assert job.payload == 1
    assert store.queue("q").claim("w") is None


def test_a_rolled_back_transaction_refuses_further_enqueues_with_value_error(store: Store) -> None:
    with pytest.raises(Boom), store.transaction() as tx:
        raise Boom
    assert repr(tx) == "<alkstore.adapters.memory.MemoryTransaction rolled back, 0 enqueued>"
    with pytest.raises(ValueError, match="rolled back"):
        store.enqueue_tx(tx, "q", 1)


@pytest.mark.parametrize("foreign", [object(), None, "tx", 1])
def test_enqueue_tx_with_something_that_is_not_a_memory_transaction_raises_type_error(
    store: Store, foreign: object
) -> None:
    with pytest.raises(TypeError, match="transaction"):
        store.enqueue_tx(foreign, "q", 1)
    with pytest.raises(TypeError, match="transaction"):
        store.outbox_enqueue_tx(foreign, "mail", 1)
    assert store.queue("q").claim("w") is None


def test_enqueue_tx_with_another_stores_transaction_raises_type_error(store: Store, clock: ManualClock) -> None:
    with alkstore.open("memory://", clock=clock) as other:
        with other.transaction() as tx:
            assert isinstance(tx, MemoryTransaction)
            with pytest.raises(TypeError):
                store.enqueue_tx(tx, "q", 1)
            with pytest.raises(TypeError):
                store.outbox_enqueue_tx(tx, "mail", 1)
        assert store.queue("q").claim("w") is None
        assert other.queue("q").claim("w") is None


def test_a_failed_enqueue_tx_leaves_the_transaction_usable(store: Store) -> None:
    with store.transaction() as tx:
        with pytest.raises(alkstore.InvalidPayload):
            store.enqueue_tx(tx, "q", {1, 2})
        with pytest.raises(alkstore.ReservedName):
            store.enqueue_tx(tx, "__alkstore_x", 1)
        job_id = store.enqueue_tx(tx, "q", "ok")
    job = must_get(store, job_id)
    assert job.payload == "ok"


def test_stamps_are_resolved_at_enqueue_tx_time_not_at_commit(store: Store, clock: ManualClock) -> None:
    enqueued_at = clock.now()
    with store.transaction() as tx:
        job_id = store.enqueue_tx(tx, "q", 1, alkstore.EnqueueOpts(delay=60, expires=600))
        clock.advance(30)
    job = must_get(store, job_id)
    assert job.enqueued_at == enqueued_at
    assert (job.run_at - enqueued_at).total_seconds() == 60
    assert job.expires_at is not None
    assert (job.expires_at - enqueued_at).total_seconds() == 600


def test_transactions_are_independent_of_each_other(store: Store) -> None:
    dropped: list[int] = []
    with store.transaction() as kept:
        kept_id = store.enqueue_tx(kept, "q", "kept")
        with pytest.raises(Boom):
            abort_transaction(store, Boom(), dropped)
    assert store.get_job(kept_id) is not None
    assert all(store.get_job(job_id) is None for job_id in dropped)
