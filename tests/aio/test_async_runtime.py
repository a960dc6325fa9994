"""What only the async runtime has: tasks cancelled, coroutines awaited, blocking code kept off the loop.

The contract suite runs every scenario on this runtime too (through a blocking view); these tests
drive it natively, from one event loop, for what a blocking view cannot show: a parked claim ends
when its task is cancelled; ``async def`` tasks run on the worker's loop and are cancelled past
their timeout; a blocking plain task does not stall the async tasks beside it; the sync worker
refuses ``async def`` code.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from datetime import timedelta

import pytest

import alkstore
from alkstore import AsyncJob, AsyncWorker, InvalidOptions, JobState, StopToken, Tasks, WorkerStats, current_job
from alkstore.testing import Scratch
from tests.support import PATIENCE

from .conftest import opened, run

pytestmark = pytest.mark.filterwarnings("error")


async def eventually(predicate: object, what: str, timeout: float = PATIENCE) -> None:
    """Poll ``predicate()`` on the loop until it holds; fail after ``timeout`` wall seconds."""
    end = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def working(worker: AsyncWorker) -> tuple[StopToken, asyncio.Task[WorkerStats]]:
    """``worker`` running on the test's loop, and the stop token that ends it."""
    stop = StopToken()
    return stop, asyncio.create_task(worker.run(stop))


def test_a_parked_claim_ends_when_the_task_awaiting_it_is_cancelled(scratch: Scratch) -> None:
    async def body() -> None:
        async with opened(scratch) as store:
            queue = store.queue("parked")
            claim = asyncio.create_task(queue.claim("w", wait=3600, poll_interval=3600))
            await asyncio.sleep(0.3)
            assert not claim.done()
            claim.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(claim, PATIENCE)
            job_id = await queue.enqueue("after")  # the store carries on: its waiter went back whole
            job = await queue.claim("w", wait=5)
            assert job is not None
            assert job.id == job_id
            await job.ack()

    run(body)


def test_a_parked_claim_is_woken_by_an_enqueue_from_another_task(scratch: Scratch) -> None:
    async def body() -> None:
        async with opened(scratch) as store:
            queue = store.queue("woken")
            claim = asyncio.create_task(queue.claim("w", wait=3600, poll_interval=3600))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            job_id = await queue.enqueue("wake")
            job = await asyncio.wait_for(claim, PATIENCE)
            assert job is not None
            assert job.id == job_id
            assert time.monotonic() - started < PATIENCE / 2  # by the notification, not a poll an hour out
            await job.ack()

    run(body)


def test_async_def_tasks_run_on_the_workers_loop_and_see_their_job(scratch: Scratch) -> None:
    seen: list[tuple[bool, int, bool]] = []
    tasks = Tasks()

    @tasks.task(queue="aio")
    async def note(n: int) -> None:
        await asyncio.sleep(0)
        job = current_job()
        seen.append((asyncio.get_running_loop() is loop, n, isinstance(job, AsyncJob) and job.payload == {"n": n}))

    async def body() -> None:
        async with opened(scratch) as store:
            for n in range(3):
                await note.aenqueue(store, n=n)
            stop, running = await working(AsyncWorker(store, tasks, concurrency=2, poll_interval=0.05))
            await eventually(lambda: len(seen) == 3, "the three runs")
            stop.cancel()
            stats = await asyncio.wait_for(running, PATIENCE)
            assert stats.succeeded == 3
            assert sorted(seen) == [(True, 0, True), (True, 1, True), (True, 2, True)]

    loop: asyncio.AbstractEventLoop

    async def main() -> None:
        nonlocal loop
        loop = asyncio.get_running_loop()
        await body()

    run(main)


def test_an_async_run_past_its_timeout_is_cancelled_and_its_job_retried(scratch: Scratch) -> None:
    attempts: list[str] = []
    tasks = Tasks()

    @tasks.task(queue="slow", timeout=0.3)
    async def crawl() -> None:
        if attempts:
            attempts.append("quick")
            return
        attempts.append("started")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            attempts.append("cancelled")
            raise

    async def body() -> None:
        async with opened(scratch) as store:
            job_id = await crawl.aenqueue(store)
            worker = AsyncWorker(store, tasks, poll_interval=0.05)
            stop, running = await working(worker)
            await eventually(lambda: "quick" in attempts, "the retried run", PATIENCE)
            stop.cancel()
            stats = await asyncio.wait_for(running, PATIENCE)
            assert attempts == ["started", "cancelled", "quick"]
            assert (stats.timed_out, stats.succeeded) == (1, 1)
            assert await store.get_job(job_id) is None  # acked on its second attempt

    run(body)


def test_a_blocking_plain_task_does_not_stall_the_async_tasks_beside_it(scratch: Scratch) -> None:
    release = threading.Event()
    done: list[str] = []
    tasks = Tasks()

    @tasks.task(queue="mixed")
    def block() -> None:
        release.wait(PATIENCE)  # a plain task holding its thread: the loop must not be it
        done.append("block")

    @tasks.task(queue="mixed")
    async def quick(n: int) -> None:
        await asyncio.sleep(0.01)
        done.append(f"quick-{n}")

    async def body() -> None:
        async with opened(scratch) as store:
            await block.aenqueue(store)
            for n in range(5):
                await quick.aenqueue(store, n=n)
            stop, running = await working(AsyncWorker(store, tasks, concurrency=3, poll_interval=0.05))
            await eventually(lambda: len(done) == 5, "the five quick runs while the plain one blocks")
            assert "block" not in done
            release.set()
            await eventually(lambda: "block" in done, "the blocked run")
            stop.cancel()
            stats = await asyncio.wait_for(running, PATIENCE)
            assert stats.succeeded == 6

    run(body)


def test_a_failing_async_task_is_retried_with_its_traceback_then_buried(scratch: Scratch) -> None:
    tasks = Tasks()

    @tasks.task(queue="bad", max_attempts=2)
    async def explode() -> None:
        await asyncio.sleep(0)
        raise ValueError("kaboom")

    async def body() -> None:
        async with opened(scratch) as store:
            await store.queue("bad").configure(backoff_base=0.01, backoff_cap=0.01)
            job_id = await explode.aenqueue(store)
            stop, running = await working(AsyncWorker(store, tasks, poll_interval=0.05))

            async def dead() -> bool:
                info = await store.get_job(job_id)
                return info is not None and info.state is JobState.DEAD

            end = time.monotonic() + PATIENCE
            while not await dead():
                assert time.monotonic() < end, "the job never went dead"
                await asyncio.sleep(0.05)
            stop.cancel()
            stats = await asyncio.wait_for(running, PATIENCE)
            info = await store.get_job(job_id)
            assert info is not None
            assert info.last_error == "kaboom"
            assert info.last_traceback is not None
            assert "in explode" in info.last_traceback
            assert (stats.retried, stats.buried) == (1, 1)

    run(body)


def test_an_async_def_delivery_is_awaited_on_the_workers_loop_and_retried_when_it_raises(scratch: Scratch) -> None:
    seen: list[tuple[bool, object, int]] = []
    tasks = Tasks()

    @tasks.courier("webhooks")
    async def post(payload: object, job: AsyncJob) -> None:
        await asyncio.sleep(0)
        seen.append((asyncio.get_running_loop() is loop, payload, job.attempts))
        if job.attempts == 1:
            raise ConnectionError("endpoint down")

    loop: asyncio.AbstractEventLoop

    async def main() -> None:
        nonlocal loop
        loop = asyncio.get_running_loop()
        async with opened(scratch) as store:
            outbox = store.outbox("webhooks")
            await outbox.configure(backoff_base=0.01, backoff_cap=0.01)
            async with store.transaction() as tx:
                message = await store.outbox_enqueue_tx(tx, "webhooks", {"order": 1})
            stop, running = await working(AsyncWorker(store, tasks, poll_interval=0.05))
            await eventually(lambda: len(seen) == 2, "the delivery and its retry")
            stop.cancel()
            stats = await asyncio.wait_for(running, PATIENCE)
            assert seen == [(True, {"order": 1}, 1), (True, {"order": 1}, 2)]
            assert (stats.retried, stats.succeeded) == (1, 1)
            assert await store.get_job(message) is None

    run(main)


class Halt(BaseException):
    """A ``BaseException`` of the application's own, which is no ``Exception``."""


def _raise(kind: str) -> None:
    if kind == "raise SystemExit":
        raise SystemExit
    if kind == "sys.exit(1)":
        sys.exit(1)
    if kind == "raise KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "raise CancelledError":
        raise asyncio.CancelledError
    raise Halt("stop here")


#: What an ``async def`` task raises on the worker's loop, and the error kept for it.
RAISED = {
    "raise SystemExit": "SystemExit",
    "sys.exit(1)": "SystemExit: 1",
    "raise KeyboardInterrupt": "KeyboardInterrupt",
    "a BaseException of its own": "Halt: stop here",
    "raise CancelledError": "CancelledError",  # its own, not the worker's cancellation of the run
}


@pytest.mark.parametrize("kind", RAISED)
def test_whatever_an_async_task_raises_on_the_loop_fails_its_attempt_and_the_worker_serves_on(
    scratch: Scratch, kind: str
) -> None:
    done: list[str] = []
    tasks = Tasks()

    @tasks.task("halt", queue="halting", max_attempts=2)
    async def halt() -> None:
        await asyncio.sleep(0)
        _raise(kind)

    @tasks.task("after", queue="halting")
    async def after() -> None:
        done.append("after")

    async def body() -> None:
        async with opened(scratch) as store:
            job_id = await halt.aenqueue(store)
            await after.aenqueue(store)
            stop, running = await working(AsyncWorker(store, tasks, poll_interval=0.05))  # one slot serves both
            await eventually(lambda: done == ["after"], "the next job to run")
            end = time.monotonic() + PATIENCE
            while (info := await store.get_job(job_id)) is not None and info.attempts == 0:
                assert time.monotonic() < end, "the attempt never failed"
                await asyncio.sleep(0.05)
            assert info is not None
            assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 1, RAISED[kind])
            assert info.last_traceback is not None
            assert "in halt" in info.last_traceback
            assert not running.done(), "the worker serves on"
            stop.cancel()
            stats = await asyncio.wait_for(running, PATIENCE)
            assert (stats.retried, stats.succeeded) == (1, 1)

    run(body)


def test_the_sync_worker_refuses_async_def_code_and_names_the_async_worker() -> None:
    tasks = Tasks()

    @tasks.task(queue="aio")
    async def later() -> None: ...

    async def handler(payload: object, job: object) -> None: ...

    with alkstore.open("memory://") as store:
        with pytest.raises(InvalidOptions, match="AsyncWorker"):
            alkstore.Worker(store, tasks)
        with pytest.raises(InvalidOptions, match="AsyncWorker"):
            alkstore.Worker(store, handlers={"hooks": handler})

    couriers = Tasks()
    couriers.courier("webhooks")(handler)
    with alkstore.open("memory://") as store:
        with pytest.raises(InvalidOptions, match=r"courier of outbox 'webhooks' is async: .*AsyncWorker"):
            alkstore.Worker(store, couriers)
        assert alkstore.Worker(store, couriers, outboxes=[], queues=["other"]).queues == ["other"]


def test_a_task_refuses_the_other_runtimes_store_with_a_named_error() -> None:
    tasks = Tasks()
    ping = tasks.task(queue="q")(lambda: None)

    async def body() -> None:
        async with await alkstore.open_async("memory://") as store:
            with pytest.raises(alkstore.InvalidArgument, match=r"alkstore\.Store"):
                ping.enqueue(store)  # type: ignore[arg-type]
            with alkstore.open("memory://") as sync_store:
                with pytest.raises(alkstore.InvalidArgument, match=r"alkstore\.AsyncStore"):
                    await ping.aenqueue(sync_store)  # type: ignore[arg-type]
                with pytest.raises(alkstore.InvalidArgument, match="AsyncStore"):
                    AsyncWorker(sync_store, tasks)  # type: ignore[arg-type]

    run(body)


def test_a_stop_token_wakes_its_threads_and_its_tasks_at_once() -> None:
    stop = StopToken()
    woken: list[str] = []
    waiter = threading.Thread(target=lambda: woken.append(f"thread {stop.wait(PATIENCE)}"))
    waiter.start()

    async def body() -> None:
        task = asyncio.create_task(stop.wait_async(PATIENCE))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        threading.Timer(0.05, stop.cancel).start()  # from another thread, as a signal handler's would be
        assert await task is True
        assert time.monotonic() - started < PATIENCE / 2
        assert await stop.wait_async(0) is True
        assert await StopToken().wait_async(0.01) is False

    run(body)
    waiter.join(PATIENCE)
    assert woken == ["thread True"]


def test_a_manual_clock_wakes_its_sleeping_tasks_when_moved_past_their_deadline() -> None:
    clock = alkstore.ManualClock(alkstore.SystemClock().now())

    async def body() -> None:
        sleeper = asyncio.create_task(clock.sleep_async(10))
        await asyncio.sleep(0.05)
        assert clock.parked() == 1
        clock.advance(9)
        await asyncio.sleep(0.05)
        assert not sleeper.done()
        clock.advance(timedelta(seconds=1))
        await asyncio.wait_for(sleeper, PATIENCE)
        stop = StopToken()
        stopped = asyncio.create_task(clock.sleep_async(3600, stop))
        await asyncio.sleep(0.05)
        stop.cancel()
        await asyncio.wait_for(stopped, PATIENCE)
        assert clock.parked() == 0

    run(body)
