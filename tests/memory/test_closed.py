"""After ``close()`` every facade entry point raises StoreClosed: the store's, and its handles'."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import alkstore
from alkstore import Job, Lock, ManualClock, Outbox, Queue, StopToken, Store, StoreClosed
from tests.support import must_claim

# Every public method of each facade, with arguments that would succeed on an open store.
STORE_CALLS: dict[str, Callable[[Store, dict[str, Any]], object]] = {
    "migrate": lambda s, h: s.migrate(),
    "queue": lambda s, h: s.queue("q"),
    "outbox": lambda s, h: s.outbox("mail"),
    "transaction": lambda s, h: s.transaction(),
    "enqueue_tx": lambda s, h: s.enqueue_tx(h["tx"], "q", 1),
    "enqueue_many_tx": lambda s, h: s.enqueue_many_tx(h["tx"], "q", [1, 2]),
    "outbox_enqueue_tx": lambda s, h: s.outbox_enqueue_tx(h["tx"], "mail", 1),
    "emit": lambda s, h: s.emit("paid", 1),
    "emit_tx": lambda s, h: s.emit_tx(h["tx"], "paid", 1),
    "ack_many": lambda s, h: s.ack_many([h["job"]]),
    "graph": lambda s, h: s.graph(),
    "enqueue_graph": lambda s, h: s.enqueue_graph(h["graph"]),
    "enqueue_graph_tx": lambda s, h: s.enqueue_graph_tx(h["tx"], h["graph"]),
    "get_job": lambda s, h: s.get_job(h["pending_id"]),
    "requeue_dead": lambda s, h: s.requeue_dead(h["dead_id"]),
    "skip_step": lambda s, h: s.skip_step(h["pending_id"], "charge", "ch_1"),
    "try_lock": lambda s, h: s.try_lock("free", "owner", 10),
    "schedule": lambda s, h: s.schedule("s2", "@every 1m", "q"),
    "schedule_many": lambda s, h: s.schedule_many([alkstore.ScheduleEntry("s3", "@every 1m", "q")]),
    "unschedule": lambda s, h: s.unschedule("s"),
    "fire_now": lambda s, h: s.fire_now("s"),
    "schedules": lambda s, h: s.schedules(),
    "tick": lambda s, h: s.tick(),
    "run_schedules": lambda s, h: s.run_schedules(StopToken()),
    "queue_stats": lambda s, h: s.queue_stats(),
    "jobs": lambda s, h: s.jobs("q"),
    "cancel": lambda s, h: s.cancel(h["pending_id"]),
    "requeue_dead_many": lambda s, h: s.requeue_dead_many([h["dead_id"]]),
    "requeue_dead_queue": lambda s, h: s.requeue_dead_queue("dead"),
    "purge_dead": lambda s, h: s.purge_dead("dead"),
    "result": lambda s, h: s.result(h["pending_id"]),
    "results": lambda s, h: s.results("q"),
    "purge_results": lambda s, h: s.purge_results(),
    "purge_dead_many": lambda s, h: s.purge_dead_many([h["dead_id"]]),
    "leader": lambda s, h: s.leader(),
    "workers": lambda s, h: s.workers(),
    "locks": lambda s, h: s.locks(),
    "log_action": lambda s, h: s.log_action("pause", "q", "paused", role="full", address="127.0.0.1"),
    "actions": lambda s, h: s.actions(),
    "purge_actions": lambda s, h: s.purge_actions(0),
    "throughput": lambda s, h: s.throughput(),
    "task_figures": lambda s, h: s.task_figures(),
}
QUEUE_CALLS: dict[str, Callable[[Queue], object]] = {
    "enqueue": lambda q: q.enqueue(1),
    "enqueue_many": lambda q: q.enqueue_many([1, 2]),
    "claim": lambda q: q.claim("w"),
    "claim_many": lambda q: q.claim_many("w", 5),
    "configure": lambda q: q.configure(max_attempts=5),
    "defaults": lambda q: q.defaults(),
    "pause": lambda q: q.pause(),
    "resume": lambda q: q.resume(),
}
JOB_CALLS: dict[str, Callable[[Job], object]] = {
    "ack": lambda j: j.ack(),
    "retry": lambda j: j.retry("e"),
    "fail": lambda j: j.fail("e"),
    "heartbeat": lambda j: j.heartbeat(),
    "release": lambda j: j.release(),
    "step": lambda j: j.step("s", lambda: 1),
    "step_tx": lambda j: j.step_tx("s"),
    "sleep": lambda j: j.sleep(1),
    "sleep_until": lambda j: j.sleep_until(j.run_at),
    "wait_for": lambda j: j.wait_for("e", timeout=1),
    "parent_results": lambda j: j.parent_results(),
}
LOCK_CALLS: dict[str, Callable[[Lock], object]] = {
    "renew": lambda lock: lock.renew(),
    "release": lambda lock: lock.release(),
}
OUTBOX_CALLS: dict[str, Callable[[Outbox], object]] = {
    "enqueue": lambda o: o.enqueue(1),
    "run_once": lambda o: o.run_once("w", lambda payload, job: None),
    "configure": lambda o: o.configure(visibility_timeout=10),
    "run": lambda o: o.run("w", lambda payload, job: None, StopToken()),
}
NOT_ENTRY_POINTS = {"close"}


def _public_methods(cls: type) -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member) and not isinstance(member, type)
    }


@pytest.mark.parametrize(
    ("cls", "listed"),
    [(Store, STORE_CALLS), (Queue, QUEUE_CALLS), (Job, JOB_CALLS), (Lock, LOCK_CALLS), (Outbox, OUTBOX_CALLS)],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_every_public_method_of_every_facade_is_covered_here(cls: type, listed: dict[str, object]) -> None:
    assert _public_methods(cls) - NOT_ENTRY_POINTS == set(listed)


@pytest.fixture
def closed(clock: ManualClock) -> Iterator[dict[str, Any]]:
    """A store with a handle of every kind taken while it was open, then closed."""
    store = alkstore.open("memory://", clock=clock)
    handles: dict[str, Any] = {"store": store, "queue": store.queue("q"), "outbox": store.outbox("mail")}
    handles["pending_id"] = store.queue("q").enqueue("pending")
    store.queue("dead").enqueue("dead")
    dead = must_claim(store.queue("dead"))
    dead.fail("buried")
    handles["dead_id"] = dead.id
    handles["job"] = store.queue("q").claim("w")
    handles["lock"] = store.try_lock("held", "owner", 30)
    handles["graph"] = store.graph()
    handles["graph"].add("only", "q", 1)
    store.schedule("s", "@every 1m", "q")
    transaction = store.transaction()
    handles["tx"] = transaction.__enter__()
    store.close()
    yield handles
    transaction.__exit__(None, None, None)


@pytest.mark.parametrize("method", sorted(STORE_CALLS))
def test_every_store_method_raises_store_closed_after_close(closed: dict[str, Any], method: str) -> None:
    with pytest.raises(StoreClosed):
        STORE_CALLS[method](closed["store"], closed)


@pytest.mark.parametrize("method", sorted(QUEUE_CALLS))
def test_a_queue_handle_raises_store_closed_after_close(closed: dict[str, Any], method: str) -> None:
    with pytest.raises(StoreClosed):
        QUEUE_CALLS[method](closed["queue"])


def test_a_waiting_claim_on_a_closed_store_raises_store_closed(closed: dict[str, Any]) -> None:
    with pytest.raises(StoreClosed):
        closed["queue"].claim("w", wait=30)


@pytest.mark.parametrize("method", sorted(JOB_CALLS))
def test_a_claimed_job_raises_store_closed_after_close(closed: dict[str, Any], method: str) -> None:
    with pytest.raises(StoreClosed):
        JOB_CALLS[method](closed["job"])


@pytest.mark.parametrize("method", sorted(LOCK_CALLS))
def test_a_held_lock_raises_store_closed_after_close(closed: dict[str, Any], method: str) -> None:
    with pytest.raises(StoreClosed):
        LOCK_CALLS[method](closed["lock"])


def test_leaving_a_lock_block_on_a_closed_store_raises_store_closed(closed: dict[str, Any]) -> None:
    with pytest.raises(StoreClosed), closed["lock"]:
        pass


@pytest.mark.parametrize("method", sorted(OUTBOX_CALLS))
def test_an_outbox_handle_raises_store_closed_after_close(closed: dict[str, Any], method: str) -> None:
    with pytest.raises(StoreClosed):
        OUTBOX_CALLS[method](closed["outbox"])


def test_close_is_idempotent_and_the_context_manager_closes(clock: ManualClock) -> None:
    with alkstore.open("memory://", clock=clock) as store:
        store.queue("q").enqueue(1)
    store.close()
    store.close()
    with pytest.raises(StoreClosed):
        store.queue("q")


def test_input_errors_still_come_first_on_a_closed_store(closed: dict[str, Any]) -> None:
    store = closed["store"]
    with pytest.raises(alkstore.InvalidName):
        store.queue("")
    with pytest.raises(alkstore.InvalidSpec):
        store.schedule("s", "@daily", "q")
