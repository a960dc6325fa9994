"""The operations port: what operators read and do through an engine (ADR 020, 023, 042, 048, 062).

Listings and counts, cancels, requeues and purges of dead jobs, kept results, the workers'
reports and their throughput, and the storage upkeep a worker's maintenance runs. None of it is
on a job's own path (enqueue, claim, ack): reads never write, so that path pays nothing for it.
Together with the runtime port (``_runtime_port_async``) it makes an engine (``_engine_async``).
The sync runtime's port is generated from this file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime

from ._records import (
    ActionRecord,
    JobKey,
    JobQuery,
    JobRecord,
    LockRecord,
    NewAction,
    QueueCounts,
    ResultRecord,
    TableStats,
    TaskFiguresRecord,
    ThroughputRecord,
    WorkerRecord,
)

__all__ = ["AsyncOperationsPort"]


class AsyncOperationsPort(ABC):
    """What operators read and do: listings, actions on jobs, kept results, workers, throughput, upkeep.

    Calls of one engine may come from any number of tasks at once (in the sync twin, threads).
    """

    # -- inspection and actions ----------------------------------------------------
    # What an operator reads and does (ADR 020). Reads never write, so the per-job paths
    # (enqueue, claim, ack) pay nothing for them: no trigger, no counter row.

    @abstractmethod
    async def queue_counts(self, now: datetime, queue: str | None = None, cap: int | None = None) -> list[QueueCounts]:
        """Count each queue's jobs at ``now``, one ``QueueCounts`` per queue, ordered by name.

        A ``PENDING`` job is ready when its ``run_at <= now`` and delayed otherwise, whatever
        the engine stores it as; ``running`` counts every ``RUNNING`` job (a lapsed lease too,
        until a claim sweeps it) and ``dead`` every ``DEAD`` one; ``oldest_ready`` is the
        earliest ``run_at`` of the ready jobs (``None`` when none is), exact whatever the cap.
        With ``cap``, each count stops there (``cap`` then means "at least that many"), so the
        cost is bounded by the cap per queue and phase, not by the table; without, counts are
        exact. Without ``queue``, every queue holding a job, live or dead, and every paused queue
        (empty or not) appears; with it, that queue alone (zeros when it holds none). One
        snapshot, read without writing anything.
        """

    @abstractmethod
    async def list_jobs(self, query: JobQuery) -> list[JobRecord]:
        """Up to ``query.limit`` jobs of ``query.queue`` in ``query.phase`` at ``query.now``, in its order.

        The phases and their orders (each total, so pages never overlap):
        ``READY`` (pending, ``run_at <= now``): priority descending, ``run_at``, id (the claim
        order); ``DELAYED`` (pending, ``run_at > now``): ``run_at``, id; ``RUNNING``: id;
        ``DEAD``: ``died_at`` descending, id descending (the newest death first). With
        ``query.after`` (a ``JobKey``), only the jobs that sort strictly after that key are
        listed; with ``query.contains`` and ``query.task`` (see ``JobQuery``), only the jobs that
        match both. Records are as ``get_job`` returns them.
        """

    @abstractmethod
    async def read_lock(self, name: str) -> LockRecord | None:
        """The lock ``name`` as stored (held, or lapsed but not yet taken or released), or ``None``.

        Callers compare its ``expires_at`` with their now; nothing is written.
        """

    @abstractmethod
    async def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[LockRecord]:
        """Up to ``limit`` locks held at ``now`` (``expires_at > now``), ordered by name, as ``read_lock`` reads them.

        Names sort by code point (the order of their UTF-8 bytes); with ``after``, only the names
        that sort strictly after it are listed, so pages never overlap. A lapsed lock not yet
        taken or released is left out; nothing is written.
        """

    @abstractmethod
    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        """Delete the ``PENDING`` jobs (ready or delayed) among ``job_ids``; return their ids, ascending.

        Fenced by state: a ``RUNNING`` job is never deleted here (a claim and a cancel of one job
        never both succeed: see ``request_cancel``), and dead or missing ids are left out.
        """

    @abstractmethod
    async def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        """Mark the ``RUNNING`` jobs among ``job_ids`` ``cancel_requested``; return their ids, ascending.

        Such a job ends cancelled (deleted) at its holder's next fenced ack, retry, burial or
        release, or once its lease lapses (ADR 035).
        """

    @abstractmethod
    async def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        """Delete up to ``limit`` ``DEAD`` jobs of ``queue`` with ``died_at <= died_before``, oldest first.

        Returns how many were deleted (fewer than ``limit``: none is left to purge).
        """

    @abstractmethod
    async def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        """Bring the ``DEAD`` jobs among ``job_ids`` back as ``PENDING`` at ``run_at=now`` with 0 attempts.

        Each keeps its id, queue, payload, priority, ``max_attempts``, fence, task, schedule fire,
        ``ordering_key`` (it waits behind an unfinished job of its key) and ``last_error``;
        ``expires_at`` (requeueing is a decision to run it), ``died_at`` and its ``unique_key`` are
        cleared. Returns the ids requeued, ascending (ids that were not dead are left out).
        Wakes waiters on their queues.
        """

    # -- kept results (ADR 042) ------------------------------------------------------

    @abstractmethod
    async def get_result(self, job_id: int) -> ResultRecord | None:
        """The kept outcome of the job ``job_id`` (kept by a ``Done`` ack), or ``None``; expired ones too,
        until they are purged."""

    @abstractmethod
    async def list_results(self, queue: str, limit: int, after: JobKey | None = None) -> list[ResultRecord]:
        """Up to ``limit`` kept outcomes of ``queue``, ``finished_at`` descending, id descending (the newest
        first); with ``after`` (``id`` and ``at``: a ``finished_at``) only those that sort strictly after it."""

    @abstractmethod
    async def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        """Delete up to ``limit`` kept outcomes of ``queue`` (``None``: of any) whose ``keep_until <= now``,
        the soonest first; return how many (fewer than ``limit``: none is left to purge)."""

    @abstractmethod
    async def purge_dead_ids(self, job_ids: Sequence[int]) -> list[int]:
        """Delete the ``DEAD`` jobs among ``job_ids``; return their ids, ascending (live or missing ids left out)."""

    @abstractmethod
    async def record_worker(
        self,
        worker: WorkerRecord,
        throughput: Sequence[ThroughputRecord] = (),
        figures: Sequence[TaskFiguresRecord] = (),
    ) -> None:
        """Store ``worker`` under its id, replacing what was stored (a worker's heartbeat).

        In the same transaction, add each of ``throughput``'s ``done`` and ``failed`` to the counts
        stored for its queue and minute (a new pair starts at zero), so that many workers' counts of
        one minute add up and a worker's counts cost no transaction of their own (ADR 048); and each
        of ``figures``' four sums to those stored for its queue, task and minute likewise (ADR 075).
        """

    @abstractmethod
    async def remove_worker(self, worker_id: str) -> bool:
        """Delete the worker ``worker_id`` (a clean stop); ``False`` if none was stored."""

    @abstractmethod
    async def workers(self, since: datetime) -> list[WorkerRecord]:
        """The workers whose ``seen_at >= since``, ordered by id."""

    @abstractmethod
    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete the workers whose ``seen_at < seen_before`` (stopped without saying so); return how many."""

    @abstractmethod
    async def throughput(self, since: datetime) -> list[ThroughputRecord]:
        """The counts stored by ``record_worker`` for every queue and minute with ``minute >= since``,
        ordered by minute, then queue; nothing is written."""

    @abstractmethod
    async def purge_throughput(self, before: datetime) -> int:
        """Delete the counts of every minute with ``minute < before``; return how many queue-minutes."""

    @abstractmethod
    async def task_figures(self, since: datetime, queue: str | None = None) -> list[TaskFiguresRecord]:
        """The sums stored by ``record_worker`` for every queue (or ``queue`` alone), task and minute with
        ``minute >= since``, ordered by minute, queue, task; nothing is written (ADR 075)."""

    @abstractmethod
    async def roll_up_task_figures(self, before: datetime) -> int:
        """Fold the task figures of each minute before ``before`` that does not start an hour into the row of its
        UTC hour's first minute (adding its four sums there), deleting it; return how many rows were folded."""

    @abstractmethod
    async def purge_task_figures(self, before: datetime) -> int:
        """Delete the task figures of every minute with ``minute < before``; return how many rows."""

    # -- the action log (ADR 068) -----------------------------------------------------
    # What operators did through a console: appended, listed newest first, never edited.

    @abstractmethod
    async def record_action(self, action: NewAction) -> int:
        """Append ``action`` to the action log; return its id, greater than every id the log gave before."""

    @abstractmethod
    async def list_actions(self, limit: int, before: int | None = None) -> list[ActionRecord]:
        """Up to ``limit`` logged actions, newest first (id descending); with ``before``, only those whose
        id is less than it, so pages never overlap. Texts come back as stored; nothing is written."""

    @abstractmethod
    async def purge_actions(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` logged actions whose ``at < before``, lowest id first (a worker's upkeep
        prunes the log past its retention this way, a bounded batch a statement); return how many."""

    # -- storage upkeep (ADR 023) ------------------------------------------------------
    # What a worker's maintenance reads and does so that churn leaves the tables flat: core
    # decides from ``table_stats`` which tables are due (``_maintenance.vacuum_due``).

    @abstractmethod
    async def table_stats(self) -> list[TableStats]:
        """The engine's tables that keep dead rows until they are reclaimed, ordered by name.

        Counts are the storage's own estimates (Postgres: its statistics, a second or so
        behind). An engine that never keeps a dead row (memory) returns none.
        """

    @abstractmethod
    async def vacuum(self, tables: Sequence[str]) -> list[str]:
        """Reclaim the dead rows (and dead index entries) of ``tables``, names as ``table_stats`` gives them.

        Each table is vacuumed on its own, outside any transaction, never waiting: one that
        another vacuum is working on, or that this engine's role may not vacuum (see
        ``TableStats.vacuumable``), is skipped. Returns the tables vacuumed, in order; the memory
        engine has nothing to reclaim and returns none.
        """
