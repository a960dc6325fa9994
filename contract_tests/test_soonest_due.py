"""``Engine.soonest_due``: the one read an idle worker waits on (ADR 044), the same on every engine.

It is the soonest instant a claim of the given queues may find work: a ready job's ``run_at``, a
delayed one's, a running one's ``lease_until``; paused queues and other queues left out.
"""

from __future__ import annotations

from datetime import timedelta

from alkstore import EnqueueOpts, ManualClock, Store
from tests.support import must_claim

from ._engines import T0


def test_nothing_queued_is_never_due(store: Store) -> None:
    assert store.engine.soonest_due(["q", "r"]) is None


def test_the_soonest_of_delayed_jobs_and_leases_of_the_queues_asked_about(store: Store, clock: ManualClock) -> None:
    queue = store.queue("q")
    queue.enqueue("later", EnqueueOpts(delay=60))
    queue.enqueue("sooner", EnqueueOpts(delay=30))
    store.queue("other").enqueue("elsewhere", EnqueueOpts(delay=5))
    assert store.engine.soonest_due(["q"]) == T0 + timedelta(seconds=30)
    assert store.engine.soonest_due(["q", "other"]) == T0 + timedelta(seconds=5)
    queue.enqueue("expiring", EnqueueOpts(delay=40, expires=50))
    assert store.engine.soonest_due(["q"]) == T0 + timedelta(seconds=30)
    store.queue("leased").enqueue("running", EnqueueOpts(visibility_timeout=7))
    must_claim(store.queue("leased"), "w1")
    assert store.engine.soonest_due(["leased"]) == T0 + timedelta(seconds=7)
    clock.advance(timedelta(seconds=1))
    store.queue("leased").enqueue("ready")
    assert store.engine.soonest_due(["leased", "q"]) == T0 + timedelta(seconds=1)  # claimable now


def test_a_paused_queue_is_left_out_until_it_is_resumed(store: Store) -> None:
    queue = store.queue("q")
    queue.enqueue("ready")
    queue.pause()
    assert store.engine.soonest_due(["q"]) is None
    queue.resume()
    assert store.engine.soonest_due(["q"]) == T0


def test_each_queue_is_judged_by_its_own_jobs_however_many_and_whatever_the_others_hold(
    store: Store, clock: ManualClock
) -> None:
    ready = store.queue("ready")
    ready.enqueue("low", EnqueueOpts(priority=0))
    clock.advance(timedelta(seconds=1))
    ready.enqueue("high", EnqueueOpts(priority=5))
    leased = store.queue("leased")
    leased.enqueue("first", EnqueueOpts(visibility_timeout=9))
    leased.enqueue("second", EnqueueOpts(visibility_timeout=7))
    must_claim(leased, "w1")
    must_claim(leased, "w2")
    store.queue("idle").enqueue("later", EnqueueOpts(delay=30))
    store.queue("stopped").pause()
    now = T0 + timedelta(seconds=1)
    # Two ready jobs: an instant already past (which one's run_at is the engine's choice).
    due = store.engine.soonest_due(["ready"])
    assert due is not None
    assert due <= now
    # Two running jobs: the lease that ends first.
    assert store.engine.soonest_due(["leased"]) == now + timedelta(seconds=7)
    # Another queue's leases and another queue's pause change nothing here.
    assert store.engine.soonest_due(["idle"]) == now + timedelta(seconds=30)
    assert store.engine.soonest_due(["idle", "stopped"]) == now + timedelta(seconds=30)
