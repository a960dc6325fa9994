"""An idle worker's reads of the soonest due instant (ADR 044, ADR 066), counted on the memory engine.

Between two jobs a worker that heard the enqueue goes idle for a moment; it waits on its last read
while that read holds (younger than ``IDLE_RECHECK``, its instant still ahead, no job put back by
the worker since), so a stream of jobs costs a read every ``IDLE_RECHECK``, not one per job. A wake
that brings nothing to claim (an earlier delayed job was enqueued) and a job the worker put back
itself (a retry's ``run_at``) each make it read again, so neither waits for the recheck.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta

from alkstore import EnqueueOpts, Job, StopToken, Store, Worker
from alkstore.adapters.memory import MemoryEngine
from alkstore.worker._parts import IDLE_RECHECK
from tests.support import wait_until

#: How late (wall seconds) a job that must not wait for the recheck may start: well under it.
LATE = IDLE_RECHECK / 2


class Counting(MemoryEngine):
    """A memory engine that counts the soonest-due reads made of it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        self.reads += 1
        return super().soonest_due(queues)


@contextmanager
def working(store: Store, handler: object) -> Iterator[Worker]:
    """A worker on queue ``q`` running ``handler`` in a thread of the test, stopped at the end."""
    worker = Worker(store, handlers={"q": handler}, concurrency=1)  # type: ignore[dict-item]
    stop = StopToken()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        stop.cancel()
        thread.join(timeout=30)


def test_a_stream_of_jobs_costs_a_read_per_recheck_not_one_per_job() -> None:
    engine = Counting()
    store = Store(engine)
    done: list[int] = []
    jobs = 40
    with working(store, lambda payload, job: done.append(payload)) as worker:
        began = time.monotonic()
        for number in range(jobs):
            store.queue("q").enqueue(number)
            wait_until(lambda n=number: len(done) > n, f"job {number} to run")  # type: ignore[misc]
            wait_until(lambda n=number: worker.stats.succeeded > n, "its ack")  # type: ignore[misc]
        spent = time.monotonic() - began
    assert done == list(range(jobs))
    # One read when it first idles, one more per IDLE_RECHECK the stream lasted, and one spare.
    assert engine.reads <= 2 + spent / IDLE_RECHECK + 1, f"{engine.reads} reads for {jobs} jobs in {spent:.1f} s"
    store.close()


def test_an_earlier_delayed_job_enqueued_while_it_idles_starts_at_its_run_at() -> None:
    store = Store(Counting())
    started: list[float] = []
    with working(store, lambda payload, job: started.append(time.monotonic())):
        store.queue("q").enqueue("far", EnqueueOpts(delay=timedelta(hours=1)))
        time.sleep(0.3)  # idle, on a read that names the far job
        enqueued = time.monotonic()
        store.queue("q").enqueue("soon", EnqueueOpts(delay=timedelta(seconds=0.5)))
        wait_until(lambda: started, "the soon job to start")
    assert started[0] - enqueued < 0.5 + LATE, "the delayed job waited for the recheck"
    store.close()


def test_a_job_the_worker_retried_itself_is_not_left_to_the_recheck() -> None:
    store = Store(Counting())
    store.queue("q").configure(backoff_base=0.5, backoff_cap=0.5)
    attempts: list[float] = []

    def flaky(payload: object, job: Job) -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")

    with working(store, flaky) as worker:
        store.queue("q").enqueue("x")
        wait_until(lambda: worker.stats.succeeded == 1, "the retried job to succeed")
    assert attempts[1] - attempts[0] < 0.5 + LATE + 0.5, "the retry waited for the recheck"
    store.close()
