"""Every engine under concurrent threads: nothing claimed twice, nothing lost, nothing fired twice."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from alkstore import ManualClock, Store
from tests.support import PATIENCE, must_claim


def run_together(workers: Sequence[Callable[[], Any]]) -> list[Any]:
    """Start every worker at the same moment (a barrier), wait for all, re-raise the first error."""
    barrier = threading.Barrier(len(workers))
    results: list[Any] = [None] * len(workers)
    errors: list[BaseException] = []

    def run(index: int, worker: Callable[[], Any]) -> None:
        try:
            barrier.wait(PATIENCE)
            results[index] = worker()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, w), daemon=True) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE)
    assert not any(thread.is_alive() for thread in threads), "a worker thread hung"
    if errors:
        raise errors[0]
    return results


def test_concurrent_enqueuers_and_claimers_claim_every_job_exactly_once(store: Store) -> None:
    producers, per_producer, consumers = 4, 250, 4
    produced_all = threading.Event()
    remaining = [producers]
    count_lock = threading.Lock()

    def produce(p: int) -> list[int]:
        queue = store.queue("jobs")
        ids: list[int] = [queue.enqueue({"producer": p, "n": n}) for n in range(per_producer)]
        with count_lock:
            remaining[0] -= 1
            if remaining[0] == 0:
                produced_all.set()
        return ids

    def consume(c: int) -> list[tuple[int, Any]]:
        queue = store.queue("jobs")
        claimed: list[tuple[int, Any]] = []
        while True:
            done = produced_all.is_set()
            job = queue.claim(f"worker-{c}")
            if job is None:
                if done:
                    return claimed
                continue
            claimed.append((job.id, job.payload))
            job.ack()

    workers: list[Callable[[], Any]] = [partial(produce, p) for p in range(producers)]
    workers += [partial(consume, c) for c in range(consumers)]
    results = run_together(workers)
    produced = [job_id for ids in results[:producers] for job_id in ids]
    claimed = [item for items in results[producers:] for item in items]

    assert len(produced) == producers * per_producer
    assert len(set(produced)) == len(produced), "an id was handed out twice"
    claimed_ids = [job_id for job_id, _ in claimed]
    assert len(claimed_ids) == len(set(claimed_ids)), "a job was claimed twice"
    assert set(claimed_ids) == set(produced), "a job was lost"
    payloads = {(payload["producer"], payload["n"]) for _, payload in claimed}
    assert payloads == {(p, n) for p in range(producers) for n in range(per_producer)}
    assert store.queue("jobs").claim("late") is None


def test_ids_from_concurrent_plain_and_transactional_enqueues_are_unique(store: Store) -> None:
    def plain() -> list[int]:
        return [store.queue("q").enqueue(n) for n in range(200)]

    def transactional() -> list[int]:
        ids: list[int] = []
        for n in range(20):
            with store.transaction() as tx:
                ids.extend(store.enqueue_tx(tx, "q", n) for _ in range(10))
        return ids

    results = run_together([plain, plain, transactional, transactional])
    ids = [job_id for ids in results for job_id in ids]
    assert len(ids) == 800
    assert len(set(ids)) == 800
    assert all(store.get_job(job_id) is not None for job_id in ids)


def test_concurrent_ticks_fire_each_boundary_once(store: Store, clock: ManualClock) -> None:
    store.schedule("fast", "@every 1s", "q")
    store.schedule("slow", "@every 1m", "q")
    clock.advance(timedelta(minutes=10))  # fast is 600 boundaries behind, slow 10

    results = run_together([store.tick for _ in range(6)])
    fires = [(fire.schedule, fire.boundary) for fires in results for fire in fires]
    assert len(fires) == len(set(fires)), "a boundary fired twice"
    assert sorted(name for name, _ in fires) == ["fast"] * 64 + ["slow"] * 10
    assert store.tick() == []


def test_concurrent_try_lock_grants_a_lease_to_exactly_one_owner(store: Store) -> None:
    results = run_together([partial(store.try_lock, "leader", f"owner-{n}", 30) for n in range(8)])
    winners = [lock for lock in results if lock is not None]
    assert len(winners) == 1
    assert store.try_lock("leader", "late-owner", 30) is None


def test_concurrent_fenced_calls_on_one_job_let_exactly_one_finish_it(store: Store) -> None:
    for round_ in range(20):
        store.queue("q").enqueue(round_)
        job = must_claim(store.queue("q"))
        results = run_together([partial(_outcome, job.ack), partial(_outcome, partial(job.fail, "no"))] * 2)
        assert sorted(results) == ["LeaseLost"] * 3 + ["ok"]


def _outcome(call: Callable[[], None]) -> str:
    try:
        call()
    except Exception as exc:
        return type(exc).__name__
    return "ok"
