"""The SQLite engine for the async runtime: ``alkstore.open_async("sqlite:///path/to/jobs.db")``.

The sqlite3 module blocks, so each port method runs the sync engine's transaction (``SqliteTables``)
on the engine's own worker thread (one: the tables take one call at a time anyway), never on the
loop; a parked claim waits on the loop itself (``Signals.wait_async``). See ADR 063 for why the
engine is not written once in the ``*_async.py`` style.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

from alkstore import engine as port
from alkstore.engine import Clock, StopToken, SystemClock

from ._options import parse_options
from ._signals import Signals
from ._steps import SqliteSteps
from ._tables import SqliteTables, SqliteTransaction

__all__ = ["AsyncSqliteEngine", "open_engine"]

_T = TypeVar("_T")


async def open_engine(url: str, **options: Any) -> AsyncSqliteEngine:
    """Entry point for ``sqlite:///`` in the async runtime: the file's engine, checked (or migrated), WAL on."""
    engine = AsyncSqliteEngine(url, **options)
    try:
        await engine.start()
    except BaseException:
        await engine.close()
        raise
    return engine


class _AsyncSqliteWaiter(port.AsyncWaiter):
    """A parked claim's wait, on the loop: until the engine's signal count moves past what it last saw."""

    def __init__(self, signals: Signals) -> None:
        self._signals = signals
        self._seen = signals.count

    async def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        self._seen = await self._signals.wait_async(self._seen, timeout, stop)

    @property
    def hears(self) -> bool:
        return True


class AsyncSqliteEngine(port.AsyncEngine, port.AsyncStepsPort):
    """Queues, leases and schedules in one SQLite file, for asyncio; see ``SqliteEngine`` (ADR 063)."""

    def __init__(self, url: str, **options: Any) -> None:
        self._options = parse_options(url, options)
        self._signals = Signals(self._options)
        self._tables = SqliteTables(self._options)
        self._tables.on_signal = self._signals.signal
        self._steps = SqliteSteps(self._tables)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alkstore-sqlite")

    def __repr__(self) -> str:
        return f"<alkstore.adapters.sqlite.{type(self).__name__} {self._options.path!r}>"

    async def _call(self, method: Callable[..., _T], *args: Any) -> _T:
        """``method(*args)`` on the engine's thread (``StoreClosed`` once the engine is closed)."""
        self._tables.check_open()
        return await asyncio.get_running_loop().run_in_executor(self._thread, method, *args)

    async def _call_with(self, tx: Any, method: Callable[..., _T], *args: Any) -> _T:
        """``_call``, but on the calling thread when ``tx`` is the caller's own connection (a ``sqlite3.Connection``
        may be used on the thread that made it only, SQLAlchemy's too): a short write in the caller's transaction."""
        if tx is not None and not isinstance(tx, SqliteTransaction):
            self._tables.check_open()
            return method(*args)
        return await self._call(method, *args)

    async def start(self) -> None:
        """Check the file, turn WAL on, and check (or bring up to date) its schema."""
        await self._call(self._tables.prepare, self._options.migrate)

    # -- lifecycle -----------------------------------------------------------------

    async def migrate(self) -> None:
        await self._call(self._tables.migrate)

    async def close(self) -> None:
        if not self._tables.closed:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._tables.close)
        self._signals.close()
        self._thread.shutdown(wait=False)

    @property
    def offers_dependencies(self) -> bool:
        """Jobs wait on their parents here (ADR 073)."""
        return True

    def default_clock(self) -> Clock:
        """The system clock: every process sharing a SQLite file runs on its one host."""
        return SystemClock()

    # -- queue configuration --------------------------------------------------------

    async def configure_queue(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        return await self._call(self._tables.configure_queue, queue, config)

    async def set_paused(self, queue: str, paused: bool) -> port.QueueConfig | None:
        return await self._call(self._tables.set_paused, queue, paused)

    async def queue_config(self, queue: str, tx: Any = None) -> port.QueueConfig | None:
        return await self._call_with(tx, self._tables.queue_config, queue, tx)

    # -- jobs ----------------------------------------------------------------------

    async def caller_transaction(self, tx: Any) -> SqliteTransaction | sqlite3.Connection:
        return await self._call_with(tx, self._tables.caller_transaction, tx)

    async def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        return await self._call_with(tx, self._tables.enqueue, jobs, now, tx)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteTransaction]:
        tables = self._tables
        tx = tables.begin()
        try:
            yield tx
        except BaseException:
            await self._call(tables.rollback, tx)
            raise
        await self._call(tables.commit, tx)

    async def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        return await self._call(self._tables.claim, request)

    async def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        return await self._call(self._tables.ack_and_claim, acks, request)

    @asynccontextmanager
    async def waiter(self, *queues: str) -> AsyncIterator[port.AsyncWaiter]:
        self._tables.check_open()
        self._signals.watch()
        yield _AsyncSqliteWaiter(self._signals)

    async def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        return await self._call(self._tables.ack, held)

    async def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        return await self._call(self._tables.retry, retries, now)

    async def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        return await self._call(self._tables.bury, burials, now)

    async def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        return await self._call(self._tables.release, held, now)

    async def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        return await self._call(self._tables.heartbeat, beats)

    async def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        return await self._call(self._tables.cancel_requested, held)

    async def get_job(self, job_id: int) -> port.JobRecord | None:
        return await self._call(self._tables.get_job, job_id)

    async def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        return await self._call(self._tables.requeue_dead, job_ids, now)

    # -- steps, sleeps and events (ADR 069) ----------------------------------------

    async def resume(self, held: port.Held) -> list[port.StepRecord] | None:
        return await self._call(self._steps.resume, held)

    async def save_step(self, held: port.Held, step: port.StepRecord, tx: Any = None) -> bool:
        return await self._call_with(tx, self._steps.save_step, held, step, tx)

    async def suspend(
        self, held: port.Held, wait: port.Wait, now: datetime, step: port.StepRecord | None = None
    ) -> bool:
        return await self._call(self._steps.suspend, held, wait, now, step)

    async def emit(self, event: port.EventRecord, tx: Any = None) -> bool:
        return await self._call_with(tx, self._steps.emit, event, tx)

    async def read_event(self, name: str, now: datetime) -> port.EventRecord | None:
        return await self._call(self._steps.read_event, name, now)

    async def purge_steps(self, limit: int) -> int:
        return await self._call(self._steps.purge_steps, limit)

    async def skip_step(self, job_id: int, step: port.StepRecord) -> port.JobState | None:
        return await self._call(self._steps.skip_step, job_id, step)

    async def job_steps(self, job_id: int) -> tuple[list[port.StepRecord], port.Wait | None]:
        return await self._call(self._steps.job_steps, job_id)

    # -- locks ---------------------------------------------------------------------

    async def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        return await self._call(self._tables.try_lock, name, owner, now, expires_at)

    async def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        return await self._call(self._tables.renew_lock, lock, now, expires_at)

    async def renew_lock_peek(
        self, lock: port.LockRecord, now: datetime, expires_at: datetime
    ) -> tuple[port.LockRecord, datetime | None]:
        return await self._call(self._tables.renew_lock_peek, lock, now, expires_at)

    async def release_lock(self, lock: port.LockRecord) -> bool:
        return await self._call(self._tables.release_lock, lock)

    # -- schedules -----------------------------------------------------------------

    async def register_schedules(
        self, schedules: Sequence[port.NewSchedule], now: datetime
    ) -> list[port.ScheduleRecord]:
        return await self._call(self._tables.register_schedules, schedules, now)

    async def unschedule(self, name: str) -> bool:
        return await self._call(self._tables.unschedule, name)

    async def schedules(self) -> list[port.ScheduleRecord]:
        return await self._call(self._tables.schedules)

    async def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        return await self._call(self._tables.tick, now, budget, fired)

    async def soonest_boundary(self) -> datetime | None:
        return await self._call(self._tables.soonest_boundary)

    async def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        return await self._call(self._tables.soonest_due, queues)

    # -- inspection and actions ----------------------------------------------------

    async def queue_counts(
        self, now: datetime, queue: str | None = None, cap: int | None = None
    ) -> list[port.QueueCounts]:
        return await self._call(self._tables.queue_counts, now, queue, cap)

    async def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        return await self._call(self._tables.list_jobs, query)

    async def read_lock(self, name: str) -> port.LockRecord | None:
        return await self._call(self._tables.read_lock, name)

    async def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[port.LockRecord]:
        return await self._call(self._tables.list_locks, now, limit, after)

    async def record_action(self, action: port.NewAction) -> int:
        return await self._call(self._tables.record_action, action)

    async def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        return await self._call(self._tables.list_actions, limit, before)

    async def purge_actions(self, before: datetime, limit: int) -> int:
        return await self._call(self._tables.purge_actions, before, limit)

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        return await self._call(self._tables.cancel, job_ids)

    async def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        return await self._call(self._tables.request_cancel, job_ids)

    async def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        return await self._call(self._tables.purge_dead, queue, died_before, limit)

    async def get_result(self, job_id: int) -> port.ResultRecord | None:
        return await self._call(self._tables.get_result, job_id)

    async def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        return await self._call(self._tables.list_results, queue, limit, after)

    async def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        return await self._call(self._tables.purge_results, queue, now, limit)

    async def purge_dead_ids(self, job_ids: Sequence[int]) -> list[int]:
        return await self._call(self._tables.purge_dead_jobs, job_ids)

    async def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        await self._call(self._tables.record_worker, worker, throughput, figures)

    async def remove_worker(self, worker_id: str) -> bool:
        return await self._call(self._tables.remove_worker, worker_id)

    async def workers(self, since: datetime) -> list[port.WorkerRecord]:
        return await self._call(self._tables.workers, since)

    async def forget_workers(self, seen_before: datetime) -> int:
        return await self._call(self._tables.forget_workers, seen_before)

    async def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        return await self._call(self._tables.throughput, since)

    async def purge_throughput(self, before: datetime) -> int:
        return await self._call(self._tables.purge_throughput, before)

    async def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        return await self._call(self._tables.task_figures, since, queue)

    async def roll_up_task_figures(self, before: datetime) -> int:
        return await self._call(self._tables.roll_up_task_figures, before)

    async def purge_task_figures(self, before: datetime) -> int:
        return await self._call(self._tables.purge_task_figures, before)

    # -- storage upkeep: SQLite reuses a deleted row's pages itself; nothing for core to schedule ------

    async def table_stats(self) -> list[port.TableStats]:
        return []

    async def vacuum(self, tables: Sequence[str]) -> list[str]:
        return []
