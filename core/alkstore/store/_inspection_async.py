"""The store's calls for operators (ADR 020): inspection, kept results, and the actions on jobs.

``_AsyncInspection`` is a part of ``AsyncStore`` (``_store_async``), which inherits these calls;
each validates before any I/O and reads or acts through the store's kernel. Reading never
writes, so the per-job paths pay nothing for it. Queue names here may also be an outbox's
backing queue, as the listings show them. The other runtime's part is generated from this file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from functools import partial
from typing import Any

from alkstore.errors import InvalidArgument
from alkstore.port._records import JobKey, JobPhase, JobQuery, JobState
from alkstore.rules._actions import check_before, new_action
from alkstore.rules._args import ids_of, valid_id
from alkstore.rules._names import SCHEDULER_LOCK, validate_label, validate_listed_queue
from alkstore.rules._operations import (
    BATCH,
    DEFAULT_PAGE,
    RESULTS_LISTING,
    STATS_CAP,
    as_phase,
    check_cap,
    check_minutes,
    check_page_size,
    check_task_minutes,
    containment_probe,
    minute_of,
    read_cursor,
    stats_of,
    write_cursor,
)
from alkstore.rules._options import as_duration
from alkstore.rules._orders import key_of
from alkstore.rules._records import (
    ActionInfo,
    CancelOutcome,
    JobPage,
    Leader,
    LockInfo,
    QueueStats,
    TaskFiguresInfo,
    ThroughputInfo,
    WorkerInfo,
    info_of,
)
from alkstore.rules._results import JobResult, ResultPage, result_of

from ._kernel_async import AsyncKernel

__all__ = ["_AsyncInspection"]

#: How often ``cancel`` tries a job that was running at its cancel and pending just after.
_CANCEL_TRIES = 3


class _AsyncInspection:
    """The store's calls for operators; ``AsyncStore`` inherits them (its ``_kernel`` is theirs)."""

    __slots__ = ()
    _kernel: AsyncKernel

    async def result(self, job_id: int) -> JobResult | None:
        """The kept outcome of the job (its queue's ``keep_results``, ADR 042); ``None`` if it has none:
        not done yet, done while its queue kept no results, or pruned since."""
        engine = self._kernel.ops("result")
        if not valid_id(job_id):
            return None
        record = await engine.get_result(job_id)
        return None if record is None else result_of(record, self._kernel.decode_lenient)

    async def results(self, queue: str, *, limit: int = DEFAULT_PAGE, cursor: str | None = None) -> ResultPage:
        """A page of ``queue``'s kept results, newest first (``finished_at``, then id, descending); pass the
        page's ``cursor`` back for the next (``None`` after the last)."""
        validate_listed_queue(queue)
        size = check_page_size(limit)
        after = read_cursor(cursor, queue, RESULTS_LISTING)
        kernel = self._kernel
        records = await kernel.ops("results").list_results(queue, size + 1, after)
        page = records[:size]
        results = tuple(result_of(record, kernel.decode_lenient) for record in page)
        more = len(records) > size
        last = JobKey(page[-1].id, at=page[-1].finished_at) if more else None
        return ResultPage(results, None if last is None else write_cursor(queue, RESULTS_LISTING, last))

    async def purge_results(self, queue: str | None = None) -> int:
        """Delete the kept results past their ``keep_until`` (of ``queue``, or of every queue); return how many."""
        if queue is not None:
            validate_listed_queue(queue)
        engine = self._kernel.ops("purge_results")
        return await _in_batches(partial(engine.purge_results, queue, self._kernel.clock.now()))

    async def requeue_dead(self, job_id: int) -> bool:
        """Bring a dead job back to its queue with 0 attempts; ``False`` if it is not dead."""
        engine = self._kernel.ops("requeue_dead")
        if not valid_id(job_id):
            return False
        return bool(await engine.requeue_dead((job_id,), self._kernel.clock.now()))

    async def skip_step(self, job_id: int, name: str, result: Any = None) -> JobState:
        """Store the step ``name`` of a job nobody holds as finished with ``result``: its next run gets ``result``
        from ``job.step(name, ...)`` without running the step (ADR 077). A step of that name stored already is
        replaced. For a pending, waiting, sleeping or dead job (requeue a dead one to run it): its state is
        returned. ``JobHeld`` while a worker runs the job, ``UnknownJob`` when it is stored neither live nor dead;
        a bad name or a result the codec cannot encode is refused before any I/O. Nothing is written then.
        """
        return await self._kernel.stepper().skip(job_id, name, result)

    async def queue_stats(self, queue: str | None = None, *, cap: int | None = STATS_CAP) -> list[QueueStats]:
        """Each queue's ready, delayed, running and dead jobs and its lag now, ordered by name.

        Every queue holding a job (live or dead) appears, and every paused queue (an empty one too, so it
        can be seen paused and resumed); with ``queue``, that queue alone.
        Counts stop at ``cap`` (10,000 by default; ``None`` counts everything, at a cost that
        grows with the table), which keeps a call cheap enough to poll every few seconds on
        any table (ADR 020); the lag is exact either way. Reads only.
        """
        if queue is not None:
            validate_listed_queue(queue)
        limit = check_cap(cap)
        engine = self._kernel.ops("queue_stats")
        now = self._kernel.clock.now()
        return [stats_of(counts, now, limit) for counts in await engine.queue_counts(now, queue, limit)]

    async def jobs(
        self,
        queue: str,
        phase: JobPhase | str = JobPhase.READY,
        *,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
        contains: Any = None,
        reverse: bool = False,
        task: str | None = None,
    ) -> JobPage:
        """A page of ``queue``'s jobs in ``phase``, payloads decoded as ``get_job`` decodes them.

        Orders: ready jobs as claims take them (priority descending, run_at, id); delayed by
        run_at, id; running by id; dead newest death first. Pass the page's ``cursor`` back
        for the next page (``None`` after the last), with the same ``contains`` and ``task``.

        ``contains`` (a JSON object or array; the JSON codec only) keeps the jobs whose payload
        contains it, as PostgreSQL's ``jsonb @>`` does: ``{"customer": 42}`` matches
        ``{"customer": 42, "total": 9}``. No index serves it: a filtered page reads the phase's
        jobs in order until it has ``limit`` matches, so it is for finding jobs, not for polling.

        ``task`` keeps the jobs of that task (``Task.name``): on PostgreSQL a filtered page reads the
        phase's jobs in order until it has ``limit`` of the task's, as ``contains`` does (ADR 048).

        ``reverse`` pages the same jobs in the order turned round (ready: lowest priority, newest
        first; delayed: latest due; running: newest; dead: oldest death first).
        """
        validate_listed_queue(queue)
        wanted = as_phase(phase)
        size = check_page_size(limit)
        if not isinstance(reverse, bool):
            raise InvalidArgument(f"reverse must be a bool, not {type(reverse).__name__}")
        if task is not None:
            validate_label(task, "task")
        after = read_cursor(cursor, queue, wanted, reverse)
        kernel = self._kernel
        probe = containment_probe(kernel.codec, contains)
        query = JobQuery(queue, wanted, kernel.clock.now(), size + 1, after, probe, reverse, task)
        records = await kernel.ops("jobs").list_jobs(query)
        page = records[:size]
        jobs = tuple(info_of(record, kernel.decode_lenient(record.payload)) for record in page)
        more = len(records) > size
        return JobPage(jobs, write_cursor(queue, wanted, key_of(page[-1], wanted), reverse) if more else None)

    async def cancel(self, job_id: int) -> CancelOutcome:
        """Cancel the job: a pending one (ready, delayed or waiting) is deleted at once; a running one is
        marked, its worker stops the run at its next look (within seconds) and the job ends cancelled
        whatever the run comes to, or once its lease lapses if its worker died (``CANCELLING``,
        ADR 035). A dead or missing job is reported as such.
        """
        engine = self._kernel.ops("cancel")
        if not valid_id(job_id):
            return CancelOutcome.MISSING
        for _ in range(_CANCEL_TRIES):
            if await engine.cancel((job_id,)):
                return CancelOutcome.CANCELLED
            if await engine.request_cancel((job_id,)):
                return CancelOutcome.CANCELLING
            record = await self._kernel.live().get_job(job_id)
            if record is None:
                return CancelOutcome.MISSING
            if record.state is JobState.DEAD:
                return CancelOutcome.DEAD
            # Claimed between the two calls, or pending again since: try once more.
        return CancelOutcome.CANCELLING

    async def requeue_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        """Bring the dead jobs among ``job_ids`` back to their queues with 0 attempts; return those requeued."""
        ids = ids_of(job_ids)
        engine = self._kernel.ops("requeue_dead_many")
        now = self._kernel.clock.now()
        requeued: list[int] = []
        for start in range(0, len(ids), BATCH):
            requeued.extend(await engine.requeue_dead(ids[start : start + BATCH], now))
        return requeued

    async def requeue_dead_queue(self, queue: str) -> int:
        """Bring every job that died on ``queue`` so far back with 0 attempts; return how many.

        Works through the dead jobs newest death first, a batch per engine call, so jobs that
        die meanwhile are left for a later call rather than chased.
        """
        validate_listed_queue(queue)
        engine = self._kernel.ops("requeue_dead_queue")
        now = self._kernel.clock.now()
        after = JobKey(2**63 - 1, at=now)
        requeued = 0
        while True:
            page = await engine.list_jobs(JobQuery(queue, JobPhase.DEAD, now, BATCH, after))
            if page:
                requeued += len(await engine.requeue_dead([record.id for record in page], now))
                after = key_of(page[-1], JobPhase.DEAD)
            if len(page) < BATCH:
                return requeued

    async def purge_dead(self, queue: str, older_than: float | timedelta = 0) -> int:
        """Delete ``queue``'s dead jobs that died at least ``older_than`` ago (default: all); return how many."""
        validate_listed_queue(queue)
        span = as_duration(older_than, "older_than")
        engine = self._kernel.ops("purge_dead")
        return await _in_batches(partial(engine.purge_dead, queue, self._kernel.clock.now() - span))

    async def purge_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        """Delete the dead jobs among ``job_ids`` (live ones are never touched); return those deleted, ascending."""
        ids = ids_of(job_ids)
        engine = self._kernel.ops("purge_dead_many")
        purged: list[int] = []
        for start in range(0, len(ids), BATCH):
            purged.extend(await engine.purge_dead_ids(ids[start : start + BATCH]))
        return purged

    async def leader(self) -> Leader | None:
        """The scheduler's leader (the owner holding its lease) and its lease end; ``None`` when none leads."""
        engine = self._kernel.ops("leader")
        lock = await engine.read_lock(SCHEDULER_LOCK)
        if lock is None or lock.expires_at <= self._kernel.clock.now():
            return None
        return Leader(lock.owner, lock.expires_at)

    async def locks(self, *, limit: int = DEFAULT_PAGE, after: str | None = None) -> list[LockInfo]:
        """The locks held now (the scheduler's lease among them), by name: up to ``limit`` (1 to 1,000).

        Each is its name, owner, fencing token and lease end; a lapsed lock not yet taken or released
        is not held and is left out. With ``after`` (a name: the last of the previous call), only the
        names that sort after it (by code point) are listed, so a full list of ``limit`` is paged on
        from its last name. Reads only.
        """
        size = check_page_size(limit)
        if after is not None:
            validate_label(after, "lock")
        engine = self._kernel.ops("locks")
        return await engine.list_locks(self._kernel.clock.now(), size, after)

    async def workers(self, within: float | timedelta = 60) -> list[WorkerInfo]:
        """The workers that reported themselves in the last ``within`` (seconds or a timedelta), by id."""
        span = as_duration(within, "within", allow_zero=False)
        engine = self._kernel.ops("workers")
        return await engine.workers(self._kernel.clock.now() - span)

    async def throughput(self, minutes: int = 60) -> list[ThroughputInfo]:
        """Runs done and failed per queue and minute over the last ``minutes`` minutes, the current one
        included, oldest minute first, then by queue; a queue-minute with no run ended is absent.

        The workers count their runs and store the counts with their reports (every few seconds
        while busy), so the current minute fills in as it passes; counts are kept a day (ADR 048).
        """
        wanted = check_minutes(minutes)
        engine = self._kernel.ops("throughput")
        since = minute_of(self._kernel.clock.now()) - timedelta(minutes=wanted - 1)
        return await engine.throughput(since)

    async def task_figures(self, minutes: int = 60, queue: str | None = None) -> list[TaskFiguresInfo]:
        """Runs per queue (``queue``'s alone, when given), task and minute over the last ``minutes`` minutes (at
        most a week), with their summed run time and pickup latency in ms; oldest first, then queue and task.

        Stored with the workers' reports like ``throughput``; past a day, a task's minutes are rolled up into
        one row per UTC hour, at the hour's start (ADR 075). A task-less job's task is ``""``.
        """
        wanted = check_task_minutes(minutes)
        if queue is not None:
            validate_listed_queue(queue)
        engine = self._kernel.ops("task_figures")
        since = minute_of(self._kernel.clock.now()) - timedelta(minutes=wanted - 1)
        return await engine.task_figures(since, queue)

    async def log_action(self, action: str, target: str, outcome: str, *, role: str, address: str) -> int:
        """Append an operator's action to the action log (ADR 068), stamped with the store's clock; its id.

        ``role`` and ``address`` say who (a console's role and the client's address), ``action`` what
        (each a name of 1 to 128 printable characters), ``target`` on what (up to 1,000 characters, empty
        for none) and ``outcome`` what came of it (1 to 2,000); no text may hold NUL. Writes one entry.
        """
        entry = new_action(self._kernel.clock.now(), role, address, action, target, outcome)
        return await self._kernel.ops("log_action").record_action(entry)

    async def actions(self, *, limit: int = DEFAULT_PAGE, before: int | None = None) -> list[ActionInfo]:
        """The action log, newest first: up to ``limit`` (1 to 1,000) entries; with ``before`` (the last
        id of the previous call), only older ones, so a full list of ``limit`` is paged on. Reads only."""
        size = check_page_size(limit)
        older = check_before(before)
        return await self._kernel.ops("actions").list_actions(size, older)

    async def purge_actions(self, older_than: float | timedelta) -> int:
        """Delete the action log's entries written more than ``older_than`` ago, a batch at a time; return how
        many. What a worker's upkeep does past its ``action_retention``, for a cron job or by hand (ADR 068)."""
        span = as_duration(older_than, "older_than")
        engine = self._kernel.ops("purge_actions")
        return await _in_batches(partial(engine.purge_actions, self._kernel.clock.now() - span))


async def _in_batches(purge: Callable[[int], Awaitable[int]]) -> int:
    """Call ``purge`` with a limit of ``BATCH`` until it deletes fewer; how many it deleted in all."""
    purged = 0
    while True:
        count = await purge(BATCH)
        purged += count
        if count < BATCH:
            return purged
