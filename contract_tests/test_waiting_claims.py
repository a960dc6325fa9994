"""A waiting claim (``claim(wait=…)``) parks, on every engine, and is woken by what makes a job claimable.

The clock is frozen, so a parked claim can only return through a wake-up (or its wall-clock
``poll_interval``, set far beyond the test's patience so polling cannot mask a missing wake).
"""

from __future__ import annotations

import pytest

from alkstore import ManualClock, Store, StoreClosed
from tests._claimer import Claimer
from tests.support import must_claim

from ._engines import EngineTarget


def test_a_waiting_claim_is_woken_by_an_enqueue_from_another_thread(store: Store) -> None:
    claimer = Claimer(store, "q")
    job_id = store.queue("q").enqueue({"wake": True})
    assert claimer.finished()
    assert claimer.error is None
    assert claimer.result is not None
    assert (claimer.result.id, claimer.result.payload) == (job_id, {"wake": True})


def test_a_waiting_claim_is_woken_by_a_commit(store: Store) -> None:
    claimer = Claimer(store, "q")
    with store.transaction() as tx:
        job_id = store.enqueue_tx(tx, "q", "committed")
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.id == job_id


def test_a_waiting_claim_is_woken_by_a_batch_enqueue_on_its_own_and_in_a_transaction(store: Store) -> None:
    claimer = Claimer(store, "q")
    first, _ = store.queue("q").enqueue_many(["one", "two"])
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.id == first
    claimer = Claimer(store, "other")
    with store.transaction() as tx:
        (committed,) = store.enqueue_many_tx(tx, "other", ["committed"])
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.id == committed


def test_a_waiting_claim_is_woken_by_a_retry_that_makes_a_job_claimable_again(store: Store) -> None:
    store.queue("q").enqueue("again")
    first = must_claim(store.queue("q"), "first-worker")
    claimer = Claimer(store, "q")
    first.retry("try again", delay=0)
    assert claimer.finished()
    assert claimer.result is not None
    assert (claimer.result.id, claimer.result.attempts) == (first.id, 2)


def test_a_waiting_claim_is_woken_by_requeueing_a_dead_job(store: Store) -> None:
    store.queue("q").enqueue("revived")
    job = must_claim(store.queue("q"))
    job.fail("dead")
    claimer = Claimer(store, "q")
    assert store.requeue_dead(job.id)
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.id == job.id


def test_a_waiting_claim_is_woken_by_a_tick_that_fires_onto_its_queue(store: Store, clock: ManualClock) -> None:
    store.schedule("every-minute", "@every 1m", "q", "tick")
    claimer = Claimer(store, "q")
    clock.advance(60)
    (fire,) = store.tick()
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.id == fire.job_id


def test_a_commit_on_another_queue_does_not_satisfy_a_waiting_claim(store: Store) -> None:
    claimer = Claimer(store, "q")
    with store.transaction() as tx:
        store.enqueue_tx(tx, "other", 1)
    assert not claimer.finished(timeout=0.2)
    job_id = store.queue("q").enqueue(2)
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.id == job_id


def test_a_rolled_back_transaction_does_not_wake_a_waiting_claim_with_a_job(store: Store) -> None:
    claimer = Claimer(store, "q")
    with pytest.raises(RuntimeError), store.transaction() as tx:
        _enqueue_then_fail(store, tx)
    assert not claimer.finished(timeout=0.2)
    store.queue("q").enqueue("real")
    assert claimer.finished()
    assert claimer.result is not None
    assert claimer.result.payload == "real"


def _enqueue_then_fail(store: Store, tx: object) -> None:
    store.enqueue_tx(tx, "q", "never")
    raise RuntimeError("rolled back")


def test_closing_the_store_releases_a_waiting_claim_with_store_closed(engine: EngineTarget, clock: ManualClock) -> None:
    with engine.store(clock) as store:
        claimer = Claimer(store, "q")
        store.close()
        assert claimer.finished()
        assert isinstance(claimer.error, StoreClosed)


def test_a_waiting_claim_returns_none_once_its_wait_has_passed_on_the_clock(store: Store, clock: ManualClock) -> None:
    claimer = Claimer(store, "q", wait=30, poll_interval=0.01)
    clock.advance(29)
    assert not claimer.finished(timeout=0.1)
    clock.advance(1)
    assert claimer.finished()
    assert claimer.error is None
    assert claimer.result is None


def test_a_claim_without_wait_never_parks(store: Store) -> None:
    assert store.queue("q").claim("w") is None
    assert store.queue("q").claim("w", wait=0) is None
