"""The runtime port: what the store, its workers and its scheduler need of an engine (ADR 014, 026, 062).

An engine is both ports (``AsyncEngine``, in ``_engine_async``): this one, the least an engine
does for jobs to be enqueued, claimed, finished, locked and scheduled; and the operations port
(``_operations_port_async``), what operators read and do. The port is written once, in its async
form; the sync runtime's is generated from it (``tools/async_to_sync.py``). An engine implements
one runtime's port or both (the bundled engines write the async one and get the sync one the same
way). Each method's docstring is the contract both runtimes and every engine obey;
``contract_tests/`` holds them to it, and ``docs/engines.md`` walks an engine author through it.

The port is deliberately narrow and "dumb": it stores and atomically transitions rows.
Everything that is a rule (name validation, option resolution, retry curves, the decision to bury
an exhausted job, boundary arithmetic, the leader loop) lives once in core and is handed to the
engine as concrete values. It is shaped for batches: a claim takes a limit and returns a list, the
fenced finishing calls take several ``(job, fence)`` pairs and return the ones whose fence was stale
(the others take effect; a stale pair changes nothing), and enqueue takes a sequence of jobs.

Instants are timezone-aware UTC ``datetime`` values with microsecond resolution. Every method may
raise ``DatabaseError`` (``DatabaseUnavailable`` when a retry may succeed), raised ``from`` the
driver error, where storage fails.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from ._records import (
    Burial,
    ClaimRequest,
    Heartbeat,
    Held,
    JobRecord,
    LockRecord,
    NewJob,
    NewSchedule,
    QueueConfig,
    Retry,
    ScheduleRecord,
    TickBudget,
    TickResult,
)
from ._time import Clock, StopToken

__all__ = ["AsyncRuntimePort", "AsyncWaiter"]


class AsyncWaiter(ABC):
    """A parked listener for enqueues on some queues (see ``AsyncEngine.waiter``)."""

    @abstractmethod
    async def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        """Block at most ``timeout`` wall-clock seconds, returning early when a job may be available.

        Also returns soon (well within a second) once ``stop`` is cancelled, and at once when
        the engine closes. A spurious return is allowed (the caller re-claims); a missed
        signal must cost no more than the timeout.
        """

    @property
    def hears(self) -> bool:
        """Whether a wait ends early when a job is enqueued; one that cannot (a polling waiter) only sleeps.

        An idle worker looks at its queues rarely while its waiter hears, every ``poll_interval``
        while it does not (ADR 044).
        """
        return False


class AsyncRuntimePort(ABC):
    """What the store, the worker and the scheduler need of storage: the least an engine implements.

    Storage and atomic transitions for queues, jobs, locks and schedules. Calls of one engine may
    come from any number of tasks at once (in the sync twin, threads).
    """

    # -- lifecycle -----------------------------------------------------------------

    @abstractmethod
    async def migrate(self) -> None:
        """Bring storage up to the current schema; idempotent and safe from concurrent processes."""

    @abstractmethod
    async def close(self) -> None:
        """Release every resource (connections, threads) and wake every parked waiter. Idempotent."""

    @abstractmethod
    def default_clock(self) -> Clock:
        """The time source a store on this engine uses unless it is given one.

        It must be the same instant for every process sharing the storage (Postgres: the
        database server's clock, ADR 015); the memory engine lives in one process and uses
        the system clock.
        """

    # -- queue configuration --------------------------------------------------------

    @abstractmethod
    async def configure_queue(self, queue: str, config: QueueConfig) -> QueueConfig | None:
        """Store ``config``'s settings for ``queue``, replacing the stored ones (all ``None``: none left);
        return what is stored now (``None`` when nothing is). Whether the queue is paused is kept."""

    @abstractmethod
    async def set_paused(self, queue: str, paused: bool) -> QueueConfig | None:
        """Pause ``queue`` (or resume it), keeping its settings; return what is stored now.

        A paused queue's config reads ``paused=True``; claims honour it through core (ADR 033),
        so the engine's claim itself never reads it.
        """

    @abstractmethod
    async def queue_config(self, queue: str, tx: Any = None) -> QueueConfig | None:
        """The config stored for ``queue`` (settings and ``paused``), or ``None`` if there is none.

        With ``tx`` (what ``caller_transaction`` returned) it is read in the caller's transaction,
        so an enqueue inside one never needs a second connection.
        """

    # -- jobs ----------------------------------------------------------------------

    @abstractmethod
    async def enqueue(self, jobs: Sequence[NewJob], now: datetime, tx: Any = None) -> list[int]:
        """Insert ``jobs`` as ``PENDING`` with 0 attempts, ``enqueued_at=now``; return their ids in order.

        Ids are positive and increase with every insert, in the order given. Without ``tx`` the
        jobs commit together in a transaction of their own, or none does. With ``tx`` they are
        written in the caller's transaction: visible to claims and ``get_job`` only once it
        commits, gone if it rolls back. ``tx`` must be this engine's kind of transaction and
        still open (Postgres: a ``psycopg.Connection`` inside a transaction, or a SQLAlchemy
        ``Connection``/``Session`` on one; memory: what ``transaction()`` yields), else
        ``InvalidTransaction`` and nothing is written. Waiters on each job's queue are woken
        (at commit, with ``tx``).

        A job with a ``unique_key`` is not inserted while a job of its queue holds that key (one
        pending, delayed or waiting with it, or running with ``unique_running``): the holder's id
        is returned in its place, as ``Existing(id)``; so is the first one's for a later job of the
        same batch with the same key. Concurrent enqueues of one key insert one job (a unique
        index, not a read then a write). A job with an ``ordering_key`` is stored ``waiting``
        while another job of its queue and key is pending, delayed, waiting or running, and
        enqueues of one key are serialized until their transactions end, so the key's jobs are
        in the order their transactions committed (ADR 032).

        Dependencies (ADR 073; only on an engine whose ``offers_dependencies`` is true): a job's
        parents are its ``after`` ids and the ids of the jobs at its ``after_batch`` positions of the
        same call (earlier ones). Every ``after`` id must name a job stored live, dead, or acked with
        its outcome kept (read in ``tx`` with one), else ``UnknownParent`` and nothing is written. A
        parent live when the job is stored (at commit, with ``tx``) holds it ``waiting`` (never
        claimed) until it succeeds; one already dead counts as having died then; one kept, or gone
        meanwhile, as succeeded. While it waits, a parent cannot be acked or die unseen: the
        promotion cannot miss a dependent that was being enqueued.

        ``jobs`` given as ``Alike`` differ in their payloads only: an engine may take every other
        field, and the path the batch needs (keys, parents), from the first job.
        """

    @abstractmethod
    async def caller_transaction(self, tx: Any) -> Any:
        """The caller's transaction ``tx`` as ``enqueue`` takes it; ``InvalidTransaction`` if it cannot be one.

        It can be one when it is this engine's kind and still open (see ``enqueue``); ``None`` is
        not. May begin a transaction the caller's object manages (a SQLAlchemy ``Connection``),
        so that its commit is the one that publishes; does no other I/O.
        """

    @abstractmethod
    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A transaction object for ``enqueue(…, tx=…)``: commits on normal exit, rolls back on error."""

    @abstractmethod
    async def claim(self, request: ClaimRequest) -> list[JobRecord]:
        """Lease up to ``request.limit`` claimable jobs of ``request.queue`` to ``request.worker_id``.

        First, in this order, sweep the queue at ``now``: a ``RUNNING`` job whose
        ``lease_until <= now`` becomes ``DEAD`` with ``LEASE_EXPIRED_ERROR`` if ``attempts >=
        max_attempts``, else ``PENDING`` again (worker and lease end cleared), unless its cancel
        was requested: it is then deleted (it ends cancelled); then a ``PENDING`` job whose
        ``expires_at <= now`` becomes ``DEAD`` with ``JOB_EXPIRED_ERROR``. A job that leaves the
        unfinished states (dead, deleted) lets the next ``waiting`` job of its ordering key, if
        any, become ``PENDING`` (or delayed, by its ``run_at``): here and in every call below.
        Then take the ``PENDING`` jobs with ``run_at <= now`` that sort first by priority
        descending, ``run_at``, id; set each ``RUNNING``, add one to ``attempts`` and to
        ``fence``, record the worker and ``lease_until = now + (job.visibility or
        request.lease)``, and return them in that order (empty when nothing is claimable).
        Concurrent claims never return the same job twice (Postgres: ``FOR UPDATE SKIP LOCKED``).
        A ``waiting`` job is never claimed. A claimed job keeps its ``unique_key`` only with
        ``unique_running`` (without, the key is free from its claim on, for good). A claimed job's
        ``dependents`` counts the jobs waiting on it (so its worker hands its result over, ADR 073).

        With ``request.concurrency``, the claim takes no more than leaves the queue's stored
        ``concurrency`` (read under a lock that serializes such claims) minus its ``RUNNING`` jobs
        whose lease has not lapsed: a crashed holder's slot frees when its lease lapses (ADR 033).
        """

    @abstractmethod
    async def ack_and_claim(self, acks: Sequence[Held], request: ClaimRequest) -> tuple[list[Held], list[JobRecord]]:
        """``ack(acks)``, then ``claim(request)``: what a worker does when it finishes jobs and takes the
        next ones, in one round trip where the engine can (ADR 022).

        Returns the stale acks and the claimed jobs. The acks take effect whether or not the claim
        finds anything; a claimed job is never one of ``acks``.
        """

    @abstractmethod
    def waiter(self, *queues: str) -> AbstractAsyncContextManager[AsyncWaiter]:
        """Listen for enqueues on each of ``queues`` while the context is open (see ``AsyncWaiter``).

        A job made claimable on any of them ends a wait. Raises ``StoreClosed`` on a closed engine.
        """

    @abstractmethod
    async def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        """The soonest instant a claim of one of ``queues`` may find work, or ``None`` when none may.

        The earliest ``run_at`` of their ``PENDING`` jobs not yet due (a ``waiting`` one aside) and
        ``lease_until`` of their ``RUNNING`` ones, or, when one of their jobs is due, an instant no
        later than now: the ``run_at`` of a due job, which one an engine's choice (an ``expires_at``
        is never sooner than its job's ``run_at``); queues stored as paused are left out. One read
        for all the queues: what an idle worker waits for (ADR 044). An engine whose claims read from
        a cursor may read from there too (ADR 078): it then leaves out a ready job behind where its
        next claim of the queue reads (its claims' backstop takes it) and a lease that ends more than
        a few seconds after its last claim of the queue (an idle worker claims again before then).
        """

    @abstractmethod
    async def ack(self, held: Sequence[Held]) -> list[Held]:
        """Delete each job that is ``RUNNING`` under its fence; return the pairs that were not (stale).

        A stale pair changes nothing; the others take effect whatever the stale ones are. A ``Done``
        pair also keeps the job's outcome (ADR 042), in the same atomic step: a ``ResultRecord`` of
        the job as it was (its attempt log included) with the pair's result and instants, unless
        the job's cancel was requested (it ends cancelled). The job itself is deleted all the same.

        Dependencies (ADR 073): in the same atomic step, the acked job's dependents that wait on it
        count it as succeeded (``parents_left`` one less), with the result of a ``Done`` or
        ``Handed`` pair handed to them; a dependent with no parent left becomes ``PENDING`` (or
        delayed, by its ``run_at``) and its queue's waiters are woken. A job that leaves the
        unfinished states otherwise (dead by any call or sweep, cancelled, deleted) has died as a
        parent: each dependent waiting on it follows its ``on_parent_failure`` (``ParentFailure``),
        transitively, in that same step.
        """

    @abstractmethod
    async def retry(self, retries: Sequence[Retry], now: datetime) -> list[Held]:
        """Fenced like ``ack``: make each job ``PENDING`` at its ``run_at`` with its error and traceback
        (a job whose cancel was requested is deleted instead: it ends cancelled).

        Worker and lease end are cleared; ``attempts`` and ``fence`` are kept; a retry's ``attempt``
        (when given) is appended to the job's attempt log. ``now`` is the
        instant of the retry (a job whose ``run_at`` is still ahead of it is delayed). Waiters on
        the jobs' queues are woken. Returns the stale pairs.
        """

    @abstractmethod
    async def bury(self, burials: Sequence[Burial], now: datetime) -> list[Held]:
        """Fenced like ``ack``: make each job ``DEAD`` with its error and traceback, ``died_at=now`` (a job
        whose cancel was requested is deleted instead).

        A dead job keeps its id, queue, payload, stamps, attempts, fence, task and schedule
        fire. Returns the stale pairs.
        """

    @abstractmethod
    async def release(self, held: Sequence[Held], now: datetime) -> list[Held]:
        """Fenced like ``ack``: hand each job back unfinished, as if this claim never took an attempt.

        The job becomes ``PENDING`` with ``attempts`` one less, ``run_at`` unchanged (so it is
        claimable at once if it was), worker and lease end cleared, its last error kept; the
        fence is kept, so the releasing holder's later calls are stale. Waiters are woken. A job
        whose cancel was requested is deleted instead. Returns the stale pairs.
        """

    @abstractmethod
    async def heartbeat(self, beats: Sequence[Heartbeat]) -> tuple[list[Held], list[Held]]:
        """Fenced like ``ack``: move each job's ``lease_until``. Returns the stale pairs, and the pairs it moved
        whose job's cancel was requested (ADR 035): one round trip tells a holder both."""

    @abstractmethod
    async def get_job(self, job_id: int) -> JobRecord | None:
        """The job (pending, running or dead), or ``None`` if acked or never stored.

        On an engine that offers dependencies, its ``parent_links`` (each parent's state and the result
        it handed over, in ``parents`` order) and ``children`` (the jobs waiting on it, ascending) too.
        """

    @property
    def offers_dependencies(self) -> bool:
        """Whether this engine stores ``after`` and the graph semantics of ``enqueue`` and ``ack`` (ADR 073);
        core refuses a dependency with ``NotOffered``, before any I/O, on an engine that does not."""
        return False

    @abstractmethod
    async def cancel_requested(self, held: Sequence[Held]) -> list[Held]:
        """The pairs among ``held`` whose job is ``RUNNING`` under its fence with its cancel requested."""

    # -- locks ---------------------------------------------------------------------

    @abstractmethod
    async def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> LockRecord | None:
        """Take the lock ``name`` for ``owner`` until ``expires_at``, or ``None`` if another owner holds it.

        A lock whose ``expires_at <= now`` is free: taking it issues a new, larger token.
        The same owner taking a lock it still holds extends it and keeps the token.
        ``name`` is not validated here (core does it; the engine's own names are reserved).
        """

    @abstractmethod
    async def renew_lock(self, lock: LockRecord, now: datetime, expires_at: datetime) -> LockRecord:
        """Extend a lock still held under ``lock.token`` and unexpired at ``now``; else ``LeaseLost``."""

    async def renew_lock_peek(
        self, lock: LockRecord, now: datetime, expires_at: datetime
    ) -> tuple[LockRecord, datetime | None]:
        """``renew_lock``, then ``soonest_boundary()``: the leader's renewal across its sleep (ADR 044).

        An engine whose calls cost a transaction each does both in one; this default makes two calls.
        """
        renewed = await self.renew_lock(lock, now, expires_at)
        return renewed, await self.soonest_boundary()

    @abstractmethod
    async def release_lock(self, lock: LockRecord) -> bool:
        """Free the lock if it is still stored under ``lock.token``; ``False`` if it was not."""

    # -- schedules -----------------------------------------------------------------

    @abstractmethod
    async def register_schedules(self, schedules: Sequence[NewSchedule], now: datetime) -> list[ScheduleRecord]:
        """Insert or update each schedule atomically (all or none) and return them as stored, in order.

        Each next boundary is ``registration_boundary(stored (interval, boundary, anchor) or None,
        interval_s, now, anchor)``, decided under a lock on the existing row, so an unchanged
        interval and anchor keep the phase and backlog and a changed one restarts on its phase;
        the last fired boundary is kept. Names must be distinct.
        """

    @abstractmethod
    async def unschedule(self, name: str) -> bool:
        """Delete the schedule ``name``; ``False`` if there was none. Jobs it fired stay."""

    @abstractmethod
    async def schedules(self) -> list[ScheduleRecord]:
        """Every stored schedule, ordered by name."""

    @abstractmethod
    async def tick(self, now: datetime, budget: TickBudget, fired: dict[str, int]) -> TickResult:
        """Fire elapsed boundaries at ``now`` in one atomic step, within ``budget``.

        Lock the schedules with ``next_boundary <= now`` in ``DueSchedule`` plan order (payload
        size, next boundary, name; a concurrent tick waits and then sees them advanced) and
        let ``plan_tick(due, configs, now, budget, fired)`` decide, where ``configs`` are the
        stored configs of their queues and ``fired`` counts this tick's earlier fires per
        schedule. Insert its fires in order (ids increasing) with each schedule's stored
        payload and task, store its new boundaries (and each fired schedule's last boundary),
        and return its fires with their ids, its skips, the new soonest boundary and whether
        it left more to fire. The inserts, the advances and the read of ``soonest`` commit
        together or not at all. Waiters on every fired queue are woken.
        """

    @abstractmethod
    async def soonest_boundary(self) -> datetime | None:
        """The earliest ``next_boundary`` of all schedules, or ``None`` when there are none."""
