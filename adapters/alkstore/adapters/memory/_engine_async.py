"""The in-memory engine as the async runtime's port (its sync twin is generated, ADR 026).

Each port method is one transition of the store's ``MemoryTables`` (``_tables``), which never
blocks, so the method runs it directly on the calling task; only a parked claim waits, on the
loop. See ``alkstore.engine.AsyncEngine`` for the contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from alkstore import engine as port
from alkstore.engine import Clock, StopToken, SystemClock
from alkstore.errors import InvalidOptions

from ._tables import MemoryTables, MemoryTransaction

__all__ = ["AsyncMemoryEngine", "open_engine"]


async def open_engine(url: str, **options: Any) -> AsyncMemoryEngine:
    """Entry point for ``memory://``: each call is a new, empty, private store."""
    if url.rstrip("/").lower() != "memory:":
        raise InvalidOptions(f"the memory engine takes the URL 'memory://' only, not {url!r}")
    if options:
        raise InvalidOptions(f"the memory engine takes no options, not {', '.join(sorted(options))}")
    return AsyncMemoryEngine()


class _AsyncMemoryWaiter(port.AsyncWaiter):
    """A parked claim's wait: until the tables signal one of its queues past what it last saw."""

    def __init__(self, tables: MemoryTables, queues: tuple[str, ...]) -> None:
        self._tables = tables
        self._queues = queues
        self._seen = tables.signals(queues)

    async def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        self._seen = await self._tables.wait_signal_async(self._queues, self._seen, timeout, stop)

    @property
    def hears(self) -> bool:
        return True


class AsyncMemoryEngine(port.AsyncEngine, port.AsyncStepsPort):
    """All state in this process, guarded by one lock (``MemoryTables``)."""

    def __init__(self) -> None:
        self._tables = MemoryTables()

    def __repr__(self) -> str:
        return f"<alkstore.adapters.memory.{type(self).__name__} {self._tables!r}>"

    # -- lifecycle -----------------------------------------------------------------

    async def migrate(self) -> None:
        """Nothing to migrate in memory."""

    async def close(self) -> None:
        self._tables.close()

    def default_clock(self) -> Clock:
        """The system clock: a memory store lives in one process, so there is no other host to agree with."""
        return SystemClock()

    @property
    def offers_dependencies(self) -> bool:
        """Jobs wait on their parents here (ADR 073)."""
        return True

    # -- queue configuration --------------------------------------------------------

    async def configure_queue(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        return self._tables.configure_queue(queue, config)

    async def set_paused(self, queue: str, paused: bool) -> port.QueueConfig | None:
        return self._tables.set_paused(queue, paused)

    async def queue_config(self, queue: str, tx: Any = None) -> port.QueueConfig | None:
        return self._tables.queue_config(queue, tx)

    # -- jobs ----------------------------------------------------------------------

    async def caller_transaction(self, tx: Any) -> MemoryTransaction:
        return self._tables.caller_transaction(tx)

    async def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        return self._tables.enqueue(jobs, now, tx)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[MemoryTransaction]:
        tables = self._tables
        tx = tables.begin()
        try:
            yield tx
        except BaseException:
            tables.rollback(tx)
            raise
        tables.commit(tx)

    async def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        return self._tables.claim(request)

    async def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        return self._tables.ack_and_claim(acks, request)

    @asynccontextmanager
    async def waiter(self, *queues: str) -> AsyncIterator[port.AsyncWaiter]:
        self._tables.check_open()
        yield _AsyncMemoryWaiter(self._tables, queues)

    async def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        return self._tables.ack(held)

    async def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        return self._tables.retry(retries, now)

    async def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        return self._tables.bury(burials, now)

    async def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        return self._tables.release(held, now)

    async def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        return self._tables.heartbeat(beats)

    async def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        return self._tables.cancel_requested(held)

    async def get_job(self, job_id: int) -> port.JobRecord | None:
        return self._tables.get_job(job_id)

    async def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        return self._tables.requeue_dead(job_ids, now)

    # -- steps, sleeps and events (ADR 069) ----------------------------------------

    async def resume(self, held: port.Held) -> list[port.StepRecord] | None:
        return self._tables.resume(held)

    async def save_step(self, held: port.Held, step: port.StepRecord, tx: Any = None) -> bool:
        return self._tables.save_step(held, step, tx)

    async def suspend(
        self, held: port.Held, wait: port.Wait, now: datetime, step: port.StepRecord | None = None
    ) -> bool:
        return self._tables.suspend(held, wait, now, step)

    async def emit(self, event: port.EventRecord, tx: Any = None) -> bool:
        return self._tables.emit(event, tx)

    async def read_event(self, name: str, now: datetime) -> port.EventRecord | None:
        return self._tables.read_event(name, now)

    async def purge_steps(self, limit: int) -> int:
        return self._tables.purge_steps(limit)

    async def skip_step(self, job_id: int, step: port.StepRecord) -> port.JobState | None:
        return self._tables.skip_step(job_id, step)

    async def job_steps(self, job_id: int) -> tuple[list[port.StepRecord], port.Wait | None]:
        return self._tables.job_steps(job_id)

    # -- locks ---------------------------------------------------------------------

    async def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        return self._tables.try_lock(name, owner, now, expires_at)

    async def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        return self._tables.renew_lock(lock, now, expires_at)

    async def release_lock(self, lock: port.LockRecord) -> bool:
        return self._tables.release_lock(lock)

    # -- schedules -----------------------------------------------------------------

    async def register_schedules(
        self, schedules: Sequence[port.NewSchedule], now: datetime
    ) -> list[port.ScheduleRecord]:
        return self._tables.register_schedules(schedules, now)

    async def unschedule(self, name: str) -> bool:
        return self._tables.unschedule(name)

    async def schedules(self) -> list[port.ScheduleRecord]:
        return self._tables.schedules()

    async def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        return self._tables.tick(now, budget, fired)

    async def soonest_boundary(self) -> datetime | None:
        return self._tables.soonest_boundary()

    async def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        return self._tables.soonest_due(queues)

    # -- inspection and actions ----------------------------------------------------

    async def queue_counts(
        self, now: datetime, queue: str | None = None, cap: int | None = None
    ) -> list[port.QueueCounts]:
        return self._tables.queue_counts(now, queue, cap)

    async def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        return self._tables.list_jobs(query)

    async def read_lock(self, name: str) -> port.LockRecord | None:
        return self._tables.read_lock(name)

    async def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[port.LockRecord]:
        return self._tables.list_locks(now, limit, after)

    async def record_action(self, action: port.NewAction) -> int:
        return self._tables.record_action(action)

    async def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        return self._tables.list_actions(limit, before)

    async def purge_actions(self, before: datetime, limit: int) -> int:
        return self._tables.purge_actions(before, limit)

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        return self._tables.cancel(job_ids)

    async def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        return self._tables.request_cancel(job_ids)

    async def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        return self._tables.purge_dead(queue, died_before, limit)

    async def get_result(self, job_id: int) -> port.ResultRecord | None:
        return self._tables.get_result(job_id)

    async def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        return self._tables.list_results(queue, limit, after)

    async def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        return self._tables.purge_results(queue, now, limit)

    async def purge_dead_ids(self, job_ids: Sequence[int]) -> list[int]:
        return self._tables.purge_dead_ids(job_ids)

    async def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        self._tables.record_worker(worker, throughput, figures)

    async def remove_worker(self, worker_id: str) -> bool:
        return self._tables.remove_worker(worker_id)

    async def workers(self, since: datetime) -> list[port.WorkerRecord]:
        return self._tables.workers(since)

    async def forget_workers(self, seen_before: datetime) -> int:
        return self._tables.forget_workers(seen_before)

    async def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        return self._tables.throughput(since)

    async def purge_throughput(self, before: datetime) -> int:
        return self._tables.purge_throughput(before)

    async def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        return self._tables.task_figures(since, queue)

    async def roll_up_task_figures(self, before: datetime) -> int:
        return self._tables.roll_up_task_figures(before)

    async def purge_task_figures(self, before: datetime) -> int:
        return self._tables.purge_task_figures(before)

    # -- storage upkeep: a dict keeps no dead rows, so there is nothing to count or reclaim ------

    async def table_stats(self) -> list[port.TableStats]:
        return self._tables.table_stats()

    async def vacuum(self, tables: Sequence[str]) -> list[str]:
        return self._tables.vacuum(tables)
