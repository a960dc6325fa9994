"""The dashboard over a sync ``Store``: the calls it makes, each run on a worker thread.

A service whose store is the sync runtime's (a Flask or Django app, ``alkstore demo``) can serve
the dashboard over that store itself rather than open a second, async one: the app awaits each
call on anyio's thread pool, so the event loop never blocks on the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from anyio import to_thread

from alkstore import (
    STATS_CAP,
    ActionInfo,
    CancelOutcome,
    Clock,
    EnqueueOpts,
    JobId,
    JobInfo,
    JobPage,
    JobPhase,
    JobResult,
    JobState,
    Leader,
    LockInfo,
    Outbox,
    Queue,
    QueueDefaults,
    QueueStats,
    ResultPage,
    Schedule,
    Store,
    TaskFiguresInfo,
    ThroughputInfo,
    WorkerInfo,
)

__all__ = ["ThreadedStore"]

T = TypeVar("T")


async def _run(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await to_thread.run_sync(partial(function, *args, **kwargs))


class _ThreadedQueue:
    """A queue's calls the dashboard makes, on a worker thread."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue

    async def defaults(self) -> QueueDefaults:
        return await _run(self._queue.defaults)

    async def configure(self, **settings: Any) -> QueueDefaults:
        return await _run(self._queue.configure, **settings)

    async def pause(self) -> None:
        await _run(self._queue.pause)

    async def resume(self) -> None:
        await _run(self._queue.resume)

    async def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        return await _run(self._queue.enqueue, payload, opts)


class ThreadedStore:
    """The store calls the dashboard makes, awaitable, over a sync ``Store`` its caller opened and closes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def clock(self) -> Clock:
        return self._store.clock

    def queue(self, name: str) -> _ThreadedQueue:
        return _ThreadedQueue(self._store.queue(name))

    async def close(self) -> None:
        """Nothing: the store is its caller's to close."""

    async def queue_stats(self, queue: str | None = None, *, cap: int | None = STATS_CAP) -> list[QueueStats]:
        return await _run(self._store.queue_stats, queue, cap=cap)

    async def jobs(
        self,
        queue: str,
        phase: JobPhase | str = JobPhase.READY,
        *,
        limit: int = 50,
        cursor: str | None = None,
        contains: Any = None,
        reverse: bool = False,
        task: str | None = None,
    ) -> JobPage:
        return await _run(
            self._store.jobs, queue, phase, limit=limit, cursor=cursor, contains=contains, reverse=reverse, task=task
        )

    async def get_job(self, job_id: int) -> JobInfo | None:
        return await _run(self._store.get_job, job_id)

    async def result(self, job_id: int) -> JobResult | None:
        return await _run(self._store.result, job_id)

    async def results(self, queue: str, *, limit: int = 50, cursor: str | None = None) -> ResultPage:
        return await _run(self._store.results, queue, limit=limit, cursor=cursor)

    def outbox(self, name: str) -> Outbox:
        return self._store.outbox(name)

    async def leader(self) -> Leader | None:
        return await _run(self._store.leader)

    async def locks(self, *, limit: int = 50, after: str | None = None) -> list[LockInfo]:
        return await _run(self._store.locks, limit=limit, after=after)

    async def log_action(self, action: str, target: str, outcome: str, *, role: str, address: str) -> int:
        return await _run(self._store.log_action, action, target, outcome, role=role, address=address)

    async def actions(self, *, limit: int = 50, before: int | None = None) -> list[ActionInfo]:
        return await _run(self._store.actions, limit=limit, before=before)

    async def workers(self, within: float | timedelta = 60) -> list[WorkerInfo]:
        return await _run(self._store.workers, within)

    async def throughput(self, minutes: int = 60) -> list[ThroughputInfo]:
        return await _run(self._store.throughput, minutes)

    async def task_figures(self, minutes: int = 60, queue: str | None = None) -> list[TaskFiguresInfo]:
        return await _run(self._store.task_figures, minutes, queue)

    async def cancel(self, job_id: int) -> CancelOutcome:
        return await _run(self._store.cancel, job_id)

    async def requeue_dead(self, job_id: int) -> bool:
        return await _run(self._store.requeue_dead, job_id)

    async def skip_step(self, job_id: int, name: str, result: Any = None) -> JobState:
        return await _run(self._store.skip_step, job_id, name, result)

    async def requeue_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        return await _run(self._store.requeue_dead_many, job_ids)

    async def requeue_dead_queue(self, queue: str) -> int:
        return await _run(self._store.requeue_dead_queue, queue)

    async def purge_dead(self, queue: str, older_than: float | timedelta = 0) -> int:
        return await _run(self._store.purge_dead, queue, older_than)

    async def purge_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        return await _run(self._store.purge_dead_many, job_ids)

    async def schedules(self) -> list[Schedule]:
        return await _run(self._store.schedules)

    async def schedule(self, name: str, spec: str, queue: str, payload: Any = None) -> Schedule:
        return await _run(self._store.schedule, name, spec, queue, payload)

    async def unschedule(self, name: str) -> bool:
        return await _run(self._store.unschedule, name)

    async def fire_now(self, name: str) -> JobId | None:
        return await _run(self._store.fire_now, name)
