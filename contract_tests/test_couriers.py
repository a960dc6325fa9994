"""Couriers in the worker on every engine and runtime (ADR 057): an outbox's messages delivered by the
worker serving it, in batches, retried on the outbox's curve, handed back when it stops.

Time moves only when a test moves it (the store's ``ManualClock``); see ``test_worker``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from alkstore import InvalidArgument, InvalidOptions, JobState, ManualClock, ReservedName, Store, Tasks, Worker
from tests.support import PATIENCE, must_get

from ._runners import step, wait_until
from ._runtimes import task_call, worker_of
from .test_worker import POLL, Running, is_at, started

__all__ = ["started"]  # the fixture, shared with test_worker


class Deliveries:
    """A delivery that records each payload; while ``held``, it blocks until opened (counting how many wait)."""

    def __init__(self, *, held: bool = False) -> None:
        self.opened = threading.Event()
        if not held:
            self.opened.set()
        self.delivered: list[Any] = []
        self.entered = 0
        self._lock = threading.Lock()

    def __call__(self, payload: Any, job: Any) -> None:
        with self._lock:
            self.entered += 1
        assert self.opened.wait(PATIENCE), "the delivery was never let through"
        with self._lock:
            self.delivered.append(payload)


def courier_of(deliveries: Callable[[Any, Any], object], outbox: str = "webhooks", **options: Any) -> Tasks:
    """A ``Tasks`` whose only entry is ``deliveries`` as the courier of ``outbox``."""
    tasks = Tasks()
    tasks.courier(outbox, **options)(deliveries)
    return tasks


def test_a_message_written_in_a_transaction_is_delivered_once_by_a_running_worker(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    deliveries = Deliveries()
    with store.transaction() as tx:
        kept = store.outbox_enqueue_tx(tx, "webhooks", {"event": "order.created", "order": 1})
    with contextlib.suppress(RuntimeError), store.transaction() as tx:
        store.outbox_enqueue_tx(tx, "webhooks", {"event": "order.created", "order": 2})
        raise RuntimeError("rolled back: no message")
    running = started(worker_of(store, courier_of(deliveries), poll_interval=POLL))
    assert running.worker.queues == [store.outbox("webhooks").queue]
    wait_until(lambda: store.get_job(kept) is None, "the message to be delivered and acked")
    store.outbox("webhooks").enqueue({"event": "order.paid", "order": 1})  # one written while it runs
    wait_until(lambda: len(deliveries.delivered) == 2, "the second message")
    stats = running.finish()
    assert deliveries.delivered == [{"event": "order.created", "order": 1}, {"event": "order.paid", "order": 1}]
    assert (stats.succeeded, stats.retried) == (2, 0)


def test_a_worker_delivers_as_many_messages_at_once_as_it_has_free_slots(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    deliveries = Deliveries(held=True)
    outbox = store.outbox("webhooks")
    for n in range(5):
        outbox.enqueue(n)
    running = started(worker_of(store, courier_of(deliveries), concurrency=3, poll_interval=POLL))
    wait_until(lambda: deliveries.entered == 3, "three deliveries at once")
    (stats,) = store.queue_stats()
    assert (stats.queue, stats.outbox) == (outbox.queue, "webhooks")
    assert (stats.running, stats.ready) == (3, 2), "it claims only for its free slots"
    deliveries.opened.set()
    wait_until(lambda: len(deliveries.delivered) == 5, "every message")
    assert sorted(deliveries.delivered) == [0, 1, 2, 3, 4]
    assert running.finish().succeeded == 5


def test_a_failing_delivery_is_retried_on_the_outboxs_curve_then_buried(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    outbox = store.outbox("webhooks")
    outbox.configure(max_attempts=3)  # the outbox's stored curve is the one the worker follows
    failures: list[int] = []

    def refuse(payload: Any, job: Any) -> None:
        failures.append(job.attempts)
        raise ConnectionError(f"endpoint down for {payload['order']}")

    message = outbox.enqueue({"order": 7})
    running = started(worker_of(store, courier_of(refuse), poll_interval=POLL))
    wait_until(is_at(store, message, JobState.PENDING, 1), "a first failure")
    info = must_get(store, message)
    assert info.last_error == "endpoint down for 7"
    assert info.max_attempts == 3
    assert info.run_at == clock.now() + timedelta(seconds=5), "the outbox's backoff base: 5 s"
    clock.advance(5)
    wait_until(is_at(store, message, JobState.PENDING, 2), "a second failure")
    assert must_get(store, message).run_at == clock.now() + timedelta(seconds=10), "doubled each attempt"
    clock.advance(10)
    wait_until(is_at(store, message, JobState.DEAD, 3), "the last failure")
    stats = running.finish()
    assert failures == [1, 2, 3]
    assert (stats.retried, stats.buried, stats.succeeded) == (2, 1, 0)


def test_a_message_is_leased_for_the_outboxs_visibility_timeout_and_kept_while_delivered(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    deliveries = Deliveries(held=True)
    message = store.outbox("webhooks").enqueue("slow")
    running = started(worker_of(store, courier_of(deliveries), poll_interval=POLL))
    wait_until(lambda: deliveries.entered == 1, "the delivery to start")
    info = must_get(store, message)
    assert info.lease_until == clock.now() + timedelta(seconds=60), "the outbox's 60 s lease"
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # the heartbeat
    for _ in range(150):  # more than two leases
        step(clock, sleepers=1)
    assert must_get(store, message).state is JobState.RUNNING
    deliveries.opened.set()
    wait_until(lambda: store.get_job(message) is None, "the delivery to be acked")
    assert running.finish().succeeded == 1


def test_a_delivery_past_its_couriers_timeout_is_given_up_and_retried(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    deliveries = Deliveries(held=True)
    message = store.outbox("webhooks").enqueue("hung")
    running = started(worker_of(store, courier_of(deliveries, timeout=10), poll_interval=POLL))
    wait_until(lambda: deliveries.entered == 1, "the delivery to start")
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    for _ in range(10):
        step(clock, sleepers=1)
    wait_until(is_at(store, message, JobState.PENDING, 1), "the delivery to be given up")
    assert must_get(store, message).last_error == "timed out after 10 s"
    deliveries.opened.set()
    assert running.finish().timed_out == 1


@pytest.mark.parametrize("abort", [False, True], ids=["grace", "abort"])
def test_a_stopping_worker_hands_back_a_delivery_still_under_way(
    store: Store, started: Callable[[Worker], Running], abort: bool
) -> None:
    deliveries = Deliveries(held=True)
    outbox = store.outbox("webhooks")
    message = outbox.enqueue("in flight")
    waiting = outbox.enqueue("not taken")
    running = started(worker_of(store, courier_of(deliveries), grace=0.1 if not abort else PATIENCE))
    wait_until(lambda: deliveries.entered == 1, "the delivery to start")
    stats = running.finish(abort=abort)
    deliveries.opened.set()
    assert (stats.released, stats.succeeded) == (1, 0)
    info = must_get(store, message)
    assert (info.state, info.attempts, info.worker_id) == (JobState.PENDING, 0, None), "no attempt spent"
    assert must_get(store, waiting).attempts == 0, "no new message taken while stopping"
    taken: list[tuple[Any, int]] = []
    assert outbox.run_once("next-courier", lambda payload, job: taken.append((payload, job.attempts)))
    assert taken == [("in flight", 1)], "another courier takes it at once"


def test_a_stopping_worker_lets_a_delivery_finish_within_its_grace(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    deliveries = Deliveries(held=True)
    message = store.outbox("webhooks").enqueue("almost done")
    running = started(worker_of(store, courier_of(deliveries), grace=PATIENCE))
    wait_until(lambda: deliveries.entered == 1, "the delivery to start")
    running.stop.cancel()
    threading.Timer(0.2, deliveries.opened.set).start()
    stats = running.finish()
    assert (stats.succeeded, stats.released) == (1, 0)
    assert store.get_job(message) is None


def test_tasks_and_couriers_share_one_worker_and_outboxes_picks_the_couriers_it_serves(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    tasks, done = Tasks(), Deliveries()
    note = tasks.task("note", queue="work")(lambda text: done.delivered.append(text))
    tasks.courier("webhooks")(done)
    tasks.courier("audit")(done)
    webhooks, audit = store.outbox("webhooks"), store.outbox("audit")
    assert [courier.outbox for courier in tasks.couriers] == ["audit", "webhooks"]
    assert worker_of(store, tasks, outboxes=[]).queues == ["work"]
    assert worker_of(store, tasks, queues=[], outboxes=["webhooks"]).queues == [webhooks.queue]
    task_call(note.enqueue, store, text="task")
    webhooks.enqueue("hook")
    held = audit.enqueue("not served")
    running = started(worker_of(store, tasks, outboxes=["webhooks"], poll_interval=POLL))
    assert running.worker.queues == ["work", webhooks.queue]
    wait_until(lambda: sorted(done.delivered) == ["hook", "task"], "the task and the message")
    assert running.finish().succeeded == 2
    assert must_get(store, held).state is JobState.PENDING


def test_bad_courier_input_is_refused_before_anything_runs(store: Store) -> None:
    tasks = Tasks()
    tasks.courier("webhooks")(lambda payload, job: None)
    with pytest.raises(InvalidOptions, match="already has a courier"):
        tasks.courier("webhooks")
    with pytest.raises(ReservedName):
        tasks.courier("__alkstore_x")
    with pytest.raises(InvalidOptions, match="timeout"):
        tasks.courier("other", timeout=0)
    with pytest.raises(InvalidArgument, match="must be a function"):
        tasks.courier("other")("not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match="no courier"):
        worker_of(store, tasks, outboxes=["audit"])
    with pytest.raises(InvalidArgument, match="one str"):
        worker_of(store, tasks, outboxes="webhooks")
    with pytest.raises(InvalidOptions, match="at least one queue"):
        worker_of(store, tasks, outboxes=[])
    with pytest.raises(ReservedName):
        worker_of(store, tasks, queues=[store.outbox("webhooks").queue])
