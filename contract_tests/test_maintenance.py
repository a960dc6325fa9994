"""Storage upkeep (ADR 023): dead jobs kept for a retention, then pruned; the vacuum duty; on every engine."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from alkstore import InvalidOptions, ManualClock, StopToken, Store
from alkstore.worker import _maintenance, _maintenance_async, _upkeep
from tests.support import PATIENCE, wait_until

from ._runtimes import maintenance_of, worker_of
from .test_operations import kill

WEEK = timedelta(days=7)


def duty(store: Store, *queues: str, retention: timedelta | None = WEEK) -> _maintenance.Maintenance:
    """A worker's storage duty over ``store``'s queues (in the store's runtime)."""
    duty: _maintenance.Maintenance = maintenance_of(store, queues or ("jobs",), dead_retention=retention, label="w1")
    return duty


def test_dead_jobs_are_kept_for_the_retention_then_pruned_on_the_duty_s_queues_alone(
    store: Store, clock: ManualClock
) -> None:
    oldest = kill(store)
    clock.advance(timedelta(days=1))
    younger = kill(store)
    elsewhere = kill(store, "elsewhere")
    clock.advance(timedelta(days=6) - timedelta(microseconds=1))
    assert duty(store).prune() == 0  # the oldest has been dead a microsecond less than the retention

    clock.advance(timedelta(microseconds=1))
    assert duty(store).prune() == 1
    assert store.get_job(oldest) is None
    assert store.get_job(younger) is not None
    clock.advance(timedelta(days=1))
    assert duty(store).prune() == 1
    assert store.get_job(younger) is None
    assert store.get_job(elsewhere) is not None, "a queue the duty does not serve keeps its dead jobs"
    assert duty(store, "jobs", "elsewhere").prune() == 1


def test_a_retention_of_none_keeps_dead_jobs_forever(store: Store, clock: ManualClock) -> None:
    dead = kill(store)
    clock.advance(timedelta(days=3650))
    assert duty(store, retention=None).prune() == 0
    assert store.get_job(dead) is not None


def test_one_prune_pass_deletes_a_bounded_number_and_leaves_the_rest_for_the_next(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for runtime in (_maintenance, _maintenance_async):
        monkeypatch.setattr(runtime, "BATCH", 2)
        monkeypatch.setattr(runtime, "PRUNE_BATCHES", 2)
    dead = [kill(store) for _ in range(5)]
    clock.advance(WEEK)
    assert duty(store).prune() == 4
    assert [store.get_job(job_id) is None for job_id in dead] == [True, True, True, True, False]
    assert duty(store).prune() == 1


def test_a_fresh_store_reports_no_dead_rows_to_speak_of_and_nothing_is_vacuumed(store: Store) -> None:
    queue = store.queue("jobs")
    job = queue.claim("w1") if queue.enqueue("x") else None
    assert job is not None
    job.ack()
    stats = store.engine.table_stats()
    assert all(table.dead_rows >= 0 and table.live_rows >= 0 for table in stats)
    assert all(table.horizon is None or isinstance(table.horizon, str) for table in stats)
    assert _upkeep.vacuum_due(stats) == []
    assert duty(store).vacuum() == []


def test_a_worker_prunes_its_queues_dead_jobs_past_its_retention(store: Store, clock: ManualClock) -> None:
    old = kill(store)
    unserved = kill(store, "elsewhere")
    clock.advance(timedelta(days=2))
    recent = kill(store)
    clock.advance(timedelta(days=1))
    stop = StopToken()
    worker = worker_of(store, handlers={"jobs": lambda payload, job: None}, dead_retention=timedelta(days=3))
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: store.get_job(old) is None, "the worker to prune the old dead job")
    finally:
        stop.cancel()
        thread.join(PATIENCE)
    assert not thread.is_alive(), "the worker did not stop"
    assert store.get_job(recent) is not None
    assert store.get_job(unserved) is not None


@pytest.mark.parametrize("bad", [-1, "7d", float("inf"), True])
def test_a_bad_dead_retention_is_refused_before_the_worker_runs(store: Store, bad: object) -> None:
    with pytest.raises(InvalidOptions, match="dead_retention"):
        worker_of(store, handlers={"jobs": lambda payload, job: None}, dead_retention=bad)
