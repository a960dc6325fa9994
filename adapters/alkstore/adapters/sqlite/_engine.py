"""The SQLite engine for the sync runtime: ``alkstore.open("sqlite:///path/to/jobs.db")``.

Each port method is one transaction of the engine's ``SqliteTables`` (``_tables``); parked claims
wait on its ``Signals`` (``_signals``). See ``alkstore.engine.Engine`` for the contract and
``docs/adr/063-the-sqlite-engine.md`` for the serialization, wake-up and durability decisions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from alkstore import engine as port
from alkstore.engine import Clock, StopToken, SystemClock

from ._options import parse_options
from ._signals import Signals
from ._steps import SqliteSteps
from ._tables import SqliteTables, SqliteTransaction

__all__ = ["SqliteEngine", "open_engine"]


def open_engine(url: str, **options: Any) -> SqliteEngine:
    """Entry point for ``sqlite:///``: the file's engine, its schema checked (or migrated) and WAL on."""
    engine = SqliteEngine(url, **options)
    try:
        engine.start()
    except BaseException:
        engine.close()
        raise
    return engine


class _SqliteWaiter(port.Waiter):
    """A parked claim's wait: until the engine's signal count moves past what it last saw."""

    def __init__(self, signals: Signals) -> None:
        self._signals = signals
        self._seen = signals.count

    def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        self._seen = self._signals.wait(self._seen, timeout, stop)

    @property
    def hears(self) -> bool:
        return True


class SqliteEngine(port.Engine, port.StepsPort):
    """Queues, leases and schedules in one SQLite file; many processes may share it (ADR 063)."""

    def __init__(self, url: str, **options: Any) -> None:
        self._options = parse_options(url, options)
        self._signals = Signals(self._options)
        self._tables = SqliteTables(self._options)
        self._tables.on_signal = self._signals.signal
        self._steps = SqliteSteps(self._tables)
        # The port's calls of every job go straight to the tables' own (one Python call less each): the engine's
        # methods of the same names only pass them on.
        self.enqueue = self._tables.enqueue  # type: ignore[method-assign]
        self.claim = self._tables.claim  # type: ignore[method-assign]
        self.ack = self._tables.ack  # type: ignore[method-assign]
        self.ack_and_claim = self._tables.ack_and_claim  # type: ignore[method-assign]

    def __repr__(self) -> str:
        return f"<alkstore.adapters.sqlite.{type(self).__name__} {self._options.path!r}>"

    def start(self) -> None:
        """Check the file, turn WAL on, and check (or bring up to date) its schema."""
        self._tables.prepare(self._options.migrate)

    # -- lifecycle -----------------------------------------------------------------

    def migrate(self) -> None:
        self._tables.migrate()

    def close(self) -> None:
        self._tables.close()
        self._signals.close()

    @property
    def offers_dependencies(self) -> bool:
        """Jobs wait on their parents here (ADR 073)."""
        return True

    def default_clock(self) -> Clock:
        """The system clock: every process sharing a SQLite file runs on its one host."""
        return SystemClock()

    # -- queue configuration --------------------------------------------------------

    def configure_queue(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        return self._tables.configure_queue(queue, config)

    def set_paused(self, queue: str, paused: bool) -> port.QueueConfig | None:
        return self._tables.set_paused(queue, paused)

    def queue_config(self, queue: str, tx: Any = None) -> port.QueueConfig | None:
        return self._tables.queue_config(queue, tx)

    # -- jobs ----------------------------------------------------------------------

    def caller_transaction(self, tx: Any) -> SqliteTransaction | sqlite3.Connection:
        return self._tables.caller_transaction(tx)

    def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        return self._tables.enqueue(jobs, now, tx)

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        tables = self._tables
        tx = tables.begin()
        try:
            yield tx
        except BaseException:
            tables.rollback(tx)
            raise
        tables.commit(tx)

    def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        return self._tables.claim(request)

    def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        return self._tables.ack_and_claim(acks, request)

    @contextmanager
    def waiter(self, *queues: str) -> Iterator[port.Waiter]:
        self._tables.check_open()
        self._signals.watch()
        yield _SqliteWaiter(self._signals)

    def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        return self._tables.ack(held)

    def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        return self._tables.retry(retries, now)

    def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        return self._tables.bury(burials, now)

    def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        return self._tables.release(held, now)

    def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        return self._tables.heartbeat(beats)

    def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        return self._tables.cancel_requested(held)

    def get_job(self, job_id: int) -> port.JobRecord | None:
        return self._tables.get_job(job_id)

    def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        return self._tables.requeue_dead(job_ids, now)

    # -- steps, sleeps and events (ADR 069) ----------------------------------------

    def resume(self, held: port.Held) -> list[port.StepRecord] | None:
        return self._steps.resume(held)

    def save_step(self, held: port.Held, step: port.StepRecord, tx: Any = None) -> bool:
        return self._steps.save_step(held, step, tx)

    def suspend(self, held: port.Held, wait: port.Wait, now: datetime, step: port.StepRecord | None = None) -> bool:
        return self._steps.suspend(held, wait, now, step)

    def emit(self, event: port.EventRecord, tx: Any = None) -> bool:
        return self._steps.emit(event, tx)

    def read_event(self, name: str, now: datetime) -> port.EventRecord | None:
        return self._steps.read_event(name, now)

    def purge_steps(self, limit: int) -> int:
        return self._steps.purge_steps(limit)

    def skip_step(self, job_id: int, step: port.StepRecord) -> port.JobState | None:
        return self._steps.skip_step(job_id, step)

    def job_steps(self, job_id: int) -> tuple[list[port.StepRecord], port.Wait | None]:
        return self._steps.job_steps(job_id)

    # -- locks ---------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        return self._tables.try_lock(name, owner, now, expires_at)

    def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        return self._tables.renew_lock(lock, now, expires_at)

    def renew_lock_peek(
        self, lock: port.LockRecord, now: datetime, expires_at: datetime
    ) -> tuple[port.LockRecord, datetime | None]:
        return self._tables.renew_lock_peek(lock, now, expires_at)

    def release_lock(self, lock: port.LockRecord) -> bool:
        return self._tables.release_lock(lock)

    # -- schedules -----------------------------------------------------------------

    def register_schedules(self, schedules: Sequence[port.NewSchedule], now: datetime) -> list[port.ScheduleRecord]:
        return self._tables.register_schedules(schedules, now)

    def unschedule(self, name: str) -> bool:
        return self._tables.unschedule(name)

    def schedules(self) -> list[port.ScheduleRecord]:
        return self._tables.schedules()

    def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        return self._tables.tick(now, budget, fired)

    def soonest_boundary(self) -> datetime | None:
        return self._tables.soonest_boundary()

    def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        return self._tables.soonest_due(queues)

    # -- inspection and actions ----------------------------------------------------

    def queue_counts(self, now: datetime, queue: str | None = None, cap: int | None = None) -> list[port.QueueCounts]:
        return self._tables.queue_counts(now, queue, cap)

    def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        return self._tables.list_jobs(query)

    def read_lock(self, name: str) -> port.LockRecord | None:
        return self._tables.read_lock(name)

    def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[port.LockRecord]:
        return self._tables.list_locks(now, limit, after)

    def record_action(self, action: port.NewAction) -> int:
        return self._tables.record_action(action)

    def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        return self._tables.list_actions(limit, before)

    def purge_actions(self, before: datetime, limit: int) -> int:
        return self._tables.purge_actions(before, limit)

    def cancel(self, job_ids: Sequence[int]) -> list[int]:
        return self._tables.cancel(job_ids)

    def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        return self._tables.request_cancel(job_ids)

    def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        return self._tables.purge_dead(queue, died_before, limit)

    def get_result(self, job_id: int) -> port.ResultRecord | None:
        return self._tables.get_result(job_id)

    def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        return self._tables.list_results(queue, limit, after)

    def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        return self._tables.purge_results(queue, now, limit)

    def purge_dead_ids(self, job_ids: Sequence[int]) -> list[int]:
        return self._tables.purge_dead_jobs(job_ids)

    def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        self._tables.record_worker(worker, throughput, figures)

    def remove_worker(self, worker_id: str) -> bool:
        return self._tables.remove_worker(worker_id)

    def workers(self, since: datetime) -> list[port.WorkerRecord]:
        return self._tables.workers(since)

    def forget_workers(self, seen_before: datetime) -> int:
        return self._tables.forget_workers(seen_before)

    def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        return self._tables.throughput(since)

    def purge_throughput(self, before: datetime) -> int:
        return self._tables.purge_throughput(before)

    def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        return self._tables.task_figures(since, queue)

    def roll_up_task_figures(self, before: datetime) -> int:
        return self._tables.roll_up_task_figures(before)

    def purge_task_figures(self, before: datetime) -> int:
        return self._tables.purge_task_figures(before)

    # -- storage upkeep: SQLite reuses a deleted row's pages itself; nothing for core to schedule ------

    def table_stats(self) -> list[port.TableStats]:
        return []

    def vacuum(self, tables: Sequence[str]) -> list[str]:
        return []
