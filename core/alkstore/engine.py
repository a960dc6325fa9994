"""The engine port: what every storage adapter implements, and the records it exchanges.

``Engine`` is deliberately narrow and "dumb": it stores and atomically transitions rows.
Everything that is a rule (name validation, option resolution, retry curves, the decision
to bury an exhausted job, boundary arithmetic, the leader loop) lives once in core and is
handed to the engine as concrete values. Each method's docstring is the contract both the
memory and the Postgres adapters obey; ``contract_tests/`` holds them to it.

Instants are timezone-aware UTC ``datetime`` values with microsecond resolution. Every
method may raise ``DatabaseError`` (raised ``from`` the driver error) where storage fails.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._boundary import catch_up
from ._options import JobStamps, ScheduleOpts, resolve_schedule
from ._spec import Every

__all__ = [
    "JOB_EXPIRED_ERROR",
    "LEASE_EXPIRED_ERROR",
    "Engine",
    "EngineFactory",
    "Fire",
    "JobRecord",
    "JobState",
    "LockRecord",
    "NewJob",
    "ScheduleRecord",
    "TickPlan",
    "TickResult",
    "Waiter",
    "plan_tick",
]

#: ``last_error`` of a job buried because its lease lapsed on its last allowed attempt.
LEASE_EXPIRED_ERROR = "lease expired on the last attempt"
#: ``last_error`` of a pending job buried because its ``expires_at`` passed (never claimed, or its lease lapsed).
JOB_EXPIRED_ERROR = "expired before it could run"


class JobState(enum.StrEnum):
    """Where a stored job is. A job that was acked is deleted ("done and gone")."""

    PENDING = "pending"
    RUNNING = "running"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to insert: its queue, encoded payload, resolved stamps, and its schedule fire, if any."""

    queue: str
    payload: bytes
    stamps: JobStamps
    schedule: str | None = None
    boundary: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A stored job (live or dead), exactly as the engine holds it.

    ``attempts`` counts claims against ``max_attempts`` (``requeue_dead`` resets it);
    ``lease`` is the fencing token: it grows by one with every claim of this job and is never
    reset, so a stale holder can never match a later lease. ``worker_id``/``lease_until`` are
    set only while running (they survive a lapse until the next claim's sweep); ``died_at``
    only once dead.
    """

    id: int
    queue: str
    payload: bytes
    state: JobState
    priority: int
    run_at: datetime
    expires_at: datetime | None
    attempts: int
    max_attempts: int
    last_error: str | None
    schedule: str | None
    boundary: datetime | None
    enqueued_at: datetime
    worker_id: str | None
    lease_until: datetime | None
    died_at: datetime | None
    lease: int


@dataclass(frozen=True, slots=True)
class LockRecord:
    """A held lease: ``token`` is unique to this acquisition and increases with every new one."""

    name: str
    owner: str
    token: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A stored schedule; ``opts`` is normalised (durations as ``timedelta``)."""

    name: str
    spec: str
    interval_s: int
    queue: str
    payload: bytes
    opts: ScheduleOpts
    next_boundary: datetime


@dataclass(frozen=True, slots=True)
class Fire:
    """One boundary fired by a tick: the job it enqueued."""

    schedule: str
    boundary: datetime
    queue: str
    job_id: int


@dataclass(frozen=True, slots=True)
class TickResult:
    """A tick's outcome: fires ordered by ``(boundary, schedule)``, skips per schedule, the new soonest."""

    fires: tuple[Fire, ...]
    skipped: tuple[tuple[str, int], ...]
    soonest: datetime | None


class Waiter(ABC):
    """A parked listener for enqueues on one queue (see ``Engine.waiter``)."""

    @abstractmethod
    def wait(self, timeout: float) -> None:
        """Block at most ``timeout`` wall-clock seconds, returning early when a job may be available.

        A spurious return is allowed (the caller re-claims); a missed signal must cost no
        more than the timeout.
        """


class Engine(ABC):
    """Storage and atomic transitions for queues, jobs, locks and schedules."""

    # -- lifecycle -----------------------------------------------------------------

    @abstractmethod
    def migrate(self) -> None:
        """Bring storage up to the current schema; idempotent and safe from concurrent processes."""

    @abstractmethod
    def close(self) -> None:
        """Release every resource (connections, threads). Idempotent."""

    # -- jobs ----------------------------------------------------------------------

    @abstractmethod
    def enqueue(self, job: NewJob, now: datetime) -> int:
        """Insert ``job`` as ``PENDING`` with 0 attempts, ``enqueued_at=now``; return its new id.

        Ids are positive and increase with every insert. Wakes waiters on ``job.queue``.
        """

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """A transaction object for ``enqueue_tx``: commits on normal exit, rolls back on error."""

    @abstractmethod
    def enqueue_tx(self, tx: Any, job: NewJob, now: datetime) -> int:
        """Like ``enqueue`` but inside the caller's transaction ``tx``.

        The job is visible to claims and ``get_job`` only once ``tx`` commits, and is gone
        if it rolls back; waiters are woken at commit. ``tx`` must be this engine's kind of
        transaction (Postgres: a ``psycopg.Connection``; memory: what ``transaction()``
        yields), else ``TypeError``; a finished memory transaction raises ``ValueError``.
        """

    @abstractmethod
    def claim(self, queue: str, worker_id: str, now: datetime, lease_until: datetime) -> JobRecord | None:
        """Lease the best claimable job of ``queue`` to ``worker_id`` until ``lease_until``.

        First, in this order, sweep ``queue``: a ``RUNNING`` job whose ``lease_until <= now``
        becomes ``DEAD`` with ``LEASE_EXPIRED_ERROR`` if ``attempts >= max_attempts``, else
        ``PENDING`` again (worker and lease cleared); then a ``PENDING`` job whose
        ``expires_at <= now`` becomes ``DEAD`` with ``JOB_EXPIRED_ERROR``. Then take the
        ``PENDING`` job with ``run_at <= now`` that sorts first by priority descending,
        ``run_at``, id; set it ``RUNNING``, add one to ``attempts`` and to ``lease``, record the worker and
        lease, and return it. ``None`` when nothing is claimable. Concurrent claims never
        return the same job twice (Postgres: ``FOR UPDATE SKIP LOCKED``).
        """

    @abstractmethod
    def waiter(self, queue: str) -> AbstractContextManager[Waiter]:
        """Listen for enqueues on ``queue`` while the context is open (see ``Waiter``)."""

    @abstractmethod
    def ack(self, job_id: int, lease: int) -> None:
        """Delete a job that is ``RUNNING`` under ``lease``; else raise ``LeaseLost`` and change nothing."""

    @abstractmethod
    def retry(self, job_id: int, lease: int, error: str, run_at: datetime) -> None:
        """Fenced like ``ack``: make the job ``PENDING`` at ``run_at`` with ``last_error=error``.

        Worker and lease end are cleared; ``attempts`` and ``lease`` are kept. Raises
        ``LeaseLost`` if the job is not ``RUNNING`` under ``lease``.
        """

    @abstractmethod
    def bury(self, job_id: int, lease: int, error: str, now: datetime) -> None:
        """Fenced like ``ack``: make the job ``DEAD`` with ``last_error=error``, ``died_at=now``.

        The dead job keeps its id, queue, payload, stamps, attempts, lease and schedule fire.
        """

    @abstractmethod
    def heartbeat(self, job_id: int, lease: int, lease_until: datetime) -> None:
        """Fenced like ``ack``: move the job's ``lease_until``. Raises ``LeaseLost`` otherwise."""

    @abstractmethod
    def get_job(self, job_id: int) -> JobRecord | None:
        """The job (pending, running or dead), or ``None`` if acked or never stored."""

    @abstractmethod
    def requeue_dead(self, job_id: int, now: datetime) -> bool:
        """Bring a ``DEAD`` job back as ``PENDING`` at ``run_at=now`` with 0 attempts.

        Keeps its id, queue, payload, priority, ``max_attempts``, ``lease``, schedule fire and
        ``last_error``; clears ``expires_at`` (requeueing is a decision to run it) and
        ``died_at``. ``False`` if the job is not dead. Wakes waiters on its queue.
        """

    # -- locks ---------------------------------------------------------------------

    @abstractmethod
    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> LockRecord | None:
        """Take the lease ``name`` for ``owner`` until ``expires_at``, or ``None`` if another owner holds it.

        A lease whose ``expires_at <= now`` is free: taking it issues a new, larger token.
        The same owner taking a lease it still holds extends it and keeps the token.
        ``name`` is not validated here (core does it; the engine's own names are reserved).
        """

    @abstractmethod
    def renew_lock(self, lock: LockRecord, now: datetime, expires_at: datetime) -> LockRecord:
        """Extend a lease still held under ``lock.token`` and unexpired at ``now``; else ``LeaseLost``."""

    @abstractmethod
    def release_lock(self, lock: LockRecord) -> bool:
        """Free the lease if it is still stored under ``lock.token``; ``False`` if it was not."""

    # -- schedules -----------------------------------------------------------------

    @abstractmethod
    def register_schedule(
        self,
        name: str,
        every: Every,
        queue: str,
        payload: bytes,
        opts: ScheduleOpts,
        now: datetime,
    ) -> ScheduleRecord:
        """Insert or update the schedule ``name`` atomically and return it as stored.

        The next boundary is ``registration_boundary(stored (interval, boundary) or None,
        every.seconds, now)`` computed under a lock on the existing row, so an unchanged
        interval keeps its phase and backlog and a changed one restarts at ``now + I``.
        """

    @abstractmethod
    def unschedule(self, name: str) -> bool:
        """Delete the schedule ``name``; ``False`` if there was none. Jobs it fired stay."""

    @abstractmethod
    def schedules(self) -> list[ScheduleRecord]:
        """Every stored schedule, ordered by name."""

    @abstractmethod
    def tick(self, now: datetime) -> TickResult:
        """Fire every elapsed boundary at ``now`` in one atomic step.

        Lock the schedules with ``next_boundary <= now`` (in name order, so a concurrent tick
        waits and then sees them advanced) and let ``plan_tick(due, now)`` decide: insert its
        ``jobs`` in order (ids increasing), store its ``advanced`` boundaries, and return
        ``plan.fires(ids)``, its ``skipped`` and the new soonest boundary. The inserts, the
        advances and the read of ``soonest`` commit together or not at all. Waiters on every
        fired queue are woken.
        """

    @abstractmethod
    def soonest_boundary(self) -> datetime | None:
        """The earliest ``next_boundary`` of all schedules, or ``None`` when there are none."""


@dataclass(frozen=True, slots=True)
class TickPlan:
    """What one tick does: the fires in ``(boundary, schedule)`` order, the new boundaries, the skips."""

    planned: tuple[tuple[str, datetime, NewJob], ...]
    advanced: tuple[tuple[str, datetime], ...]
    skipped: tuple[tuple[str, int], ...]

    @property
    def jobs(self) -> list[NewJob]:
        """The fire jobs to insert, in order."""
        return [job for _, _, job in self.planned]

    def fires(self, ids: Sequence[int]) -> tuple[Fire, ...]:
        """The ``Fire`` of each planned job, given the ids the engine stored them under (same order)."""
        return tuple(
            Fire(name, boundary, job.queue, job_id)
            for job_id, (name, boundary, job) in zip(ids, self.planned, strict=True)
        )


def plan_tick(due: Iterable[ScheduleRecord], now: datetime) -> TickPlan:
    """Plan a tick at ``now`` over the due schedules: the one owner of how fires become jobs.

    Each schedule fires ``catch_up(next_boundary, interval_s, now)``'s boundaries as jobs on
    its queue with its payload, stamped ``resolve_schedule(opts, queue, now)``; all fires are
    ordered by ``(boundary, schedule)``. Schedules not yet due are left out of the plan.
    """
    planned: list[tuple[str, datetime, NewJob]] = []
    advanced: list[tuple[str, datetime]] = []
    skipped: list[tuple[str, int]] = []
    for record in sorted(due, key=lambda record: record.name):
        if record.next_boundary > now:
            continue
        step = catch_up(record.next_boundary, record.interval_s, now)
        stamps = resolve_schedule(record.opts, record.queue, now)
        planned.extend(
            (record.name, boundary, NewJob(record.queue, record.payload, stamps, record.name, boundary))
            for boundary in step.fired
        )
        advanced.append((record.name, step.next_boundary))
        if step.skipped:
            skipped.append((record.name, step.skipped))
    planned.sort(key=lambda item: (item[1], item[0]))
    return TickPlan(tuple(planned), tuple(advanced), tuple(skipped))


#: An engine's entry point (group ``alkstore.engines``, named by URL scheme): ``factory(url, **options)``.
EngineFactory = Callable[..., Engine]
