"""A worker's runs of its jobs' code, and what becomes of each run (ADR 021, 022, 054).

``AsyncExecution`` calls a job's task (or its queue's handler) in the slot that runs it, then
finishes the job through its store's kernel: the ack (at once, or buffered to ride on the next
claim: ``AckBuffer``), or the retry or burial the queue's curve decides, each riding out a short
outage. The worker (``_worker_async``) owns the slots and the claim loop; this is one run's life.
The other runtime's twin is generated from this file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

from alkstore.errors import DatabaseUnavailable, InvalidPayload, LeaseLost
from alkstore.port._acompat import ASYNC, AThreads, asleep
from alkstore.port._records import Held
from alkstore.port._time import StopToken
from alkstore.rules._lifecycle import Backoff, failure, last_attempt
from alkstore.rules._steps import JobSuspended
from alkstore.store._job_async import AsyncJob
from alkstore.store._kernel_async import AsyncKernel
from alkstore.store._tasks import set_current

from ._parts import AckBuffer, Run, Tally, WorkerOptions, describe

if ASYNC:
    import asyncio

__all__ = ["AsyncExecution"]

log = logging.getLogger("alkstore.worker")
#: The ids of the acks lost when none was (most acks): no set built per claim.
_NONE_LOST: frozenset[int] = frozenset()


class AsyncExecution:
    """Runs a claimed job's code and records its outcome: one worker's, shared by its slots."""

    __slots__ = ("_acks", "_calls", "_kernel", "_options", "_stopping", "_tally", "worker_id")

    def __init__(
        self,
        kernel: AsyncKernel,
        options: WorkerOptions,
        acks: AckBuffer,
        tally: Tally,
        calls: AThreads,
        stopping: StopToken,
    ) -> None:
        self._kernel = kernel
        self._options = options
        self._acks = acks
        self._tally = tally
        self._calls = calls
        #: The worker's internal stop: an outage is no longer ridden out once it is cancelled.
        self._stopping = stopping
        self.worker_id = options.worker_id

    async def flush_acks(self, acks: list[tuple[AsyncJob, float, Held]] | None = None) -> None:
        """Write the acks still waiting (a stopping worker's; or ``acks``), riding out a short outage."""
        if acks is None:
            acks = self._acks.take()
        if not acks:
            return
        kernel = self._kernel
        held = [(job, pair) for job, _, pair in acks]
        stale: list[Held] = []

        async def ack() -> None:
            stale.extend(await kernel.ack_many(held))

        try:
            await self.with_retries(ack)
        except DatabaseUnavailable as exc:
            log.error(
                "worker %s: %d acks could not be written (%s); those jobs run again", self.worker_id, len(held), exc
            )
            return
        self.acked(acks, stale)

    def acked(self, acks: list[tuple[AsyncJob, float, Held]], stale: list[Held]) -> None:
        """Count and log the runs whose acks were just written (``stale``: those whose lease was lost); the
        kernel that wrote them told the telemetry."""
        lost = {pair.job_id for pair in stale} if stale else _NONE_LOST
        self._tally.acked([(job, elapsed_ms) for job, elapsed_ms, _ in acks if job.id not in lost], len(lost))
        logged = log.isEnabledFor(logging.INFO)  # the hot path: describe each job only if it is logged
        if not lost and not logged:
            return
        for job, elapsed_ms, _ in acks:
            if job.id in lost:
                log.warning("job %s (%s): its lease was lost before its ack; outcome discarded", job.id, describe(job))
            elif logged:
                log.info("job %s (%s) done in %.1f ms", job.id, describe(job), elapsed_ms)

    async def _attempt(self, run: Run) -> BaseException | str | None:
        """Call the job's code: its failure (the exception, or why it could not run), ``None`` on success.

        Whatever the code raises is its attempt's failure, ``BaseException`` included (``SystemExit``,
        ``KeyboardInterrupt``: ADR 054), so no task takes its worker down; a run given up meanwhile has
        its outcome discarded. In the async runtime ``run.task`` names the task running the call, for
        ``_end`` to cancel: that cancellation ends here, one of the slot itself (the worker cancelled
        from outside) goes on.
        """
        job: AsyncJob = run.job
        kernel = self._kernel
        set_current(job)
        kernel.run_by_worker(job)
        if ASYNC:
            run.task = asyncio.current_task()
        try:
            if kernel.telemetry is None:
                return await self._call(run)
            with kernel.telemetry.run(kernel.record_of(job), kernel.clock) as report:
                reason = await self._call(run)
                if reason is not None:
                    report.refused(reason)
                return reason
        except Exception as exc:
            return exc
        except BaseException as exc:
            if run.abandoned:  # given up: its outcome is discarded, whatever it was
                if ASYNC:
                    _uncancel()
                return None
            if _slot_cancelled(exc):
                raise  # the worker itself is cancelled, from outside: not the task's failure
            return exc  # the task's own: SystemExit, KeyboardInterrupt, ... fail its attempt, the worker serves on
        finally:
            run.task = None
            set_current(None)

    async def execute(self, run: Run) -> None:
        job: AsyncJob = run.job
        error = await self._attempt(run)
        elapsed_ms = (time.monotonic() - run.started) * 1000
        if run.abandoned:
            log.warning(
                "job %s (%s) finished after it was given up, in %.1f ms; its outcome is discarded",
                job.id,
                describe(job),
                elapsed_ms,
            )
            return
        kernel = self._kernel
        asked = kernel.sleep_asked(job)  # a caught sleep is kept: an ack would end the job before its end (ADR 069)
        if asked is not None and (error is None or isinstance(error, JobSuspended)):
            if error is None:
                log.warning(
                    "job %s (%s) returned after its sleep or wait was caught; what it returned is discarded, it sleeps",
                    job.id,
                    describe(job),
                )
            error = asked  # the first sleep or wait asked: what ran after it ran too early
        try:
            if isinstance(error, JobSuspended):  # the run asked to sleep (ADR 069): its ack is "sleeping"
                await self.with_retries(partial(kernel.suspend, job, error))
                self._tally.add(job.queue, slept=1)
                log.info("job %s (%s) sleeps after %.1f ms: %s", job.id, describe(job), elapsed_ms, error)
                return
            if error is None:
                try:
                    held = await kernel.finished(job, run.value, run.started_at)
                except InvalidPayload as exc:  # a result its queue would keep cannot be: the attempt failed
                    error = exc
            if error is None and self._options.ack_delay and self._acks.push(job, elapsed_ms, held):
                return  # written with the next claim (a stopping worker's buffer is closed: written now)
            if error is None:
                await self.with_retries(partial(kernel.ack, job, held=held))
                self._tally.add(job.queue, job, elapsed_ms, succeeded=1)
                if log.isEnabledFor(logging.INFO):  # each run's own ack: describe the job only if it is logged
                    log.info("job %s (%s) done in %.1f ms", job.id, describe(job), elapsed_ms)
                return
            failed = error

            async def retry() -> None:
                await job.retry(failed)

            await self.with_retries(retry)
            buried = last_attempt(job)
            self._tally.add(job.queue, job, elapsed_ms, **({"buried": 1} if buried else {"retried": 1}))
            log.info(
                "job %s (%s) failed in %.1f ms: %s; %s",
                job.id,
                describe(job),
                elapsed_ms,
                _told(error),
                "dead, no attempts left" if buried else "to be retried",
            )
        except LeaseLost:
            self._tally.add(lost=1)
            log.warning(
                "job %s (%s): its lease was lost before it finished; its outcome is discarded", job.id, describe(job)
            )
        except DatabaseUnavailable as exc:
            log.error(
                "job %s (%s): could not record its outcome (%s); it will be run again once its lease lapses",
                job.id,
                describe(job),
                exc,
            )

    async def _call(self, run: Run) -> str | None:
        """Run the job's task (or its queue's handler), keeping what it returns on ``run``; the reason it
        cannot be run, if it cannot."""
        job: AsyncJob = run.job
        options = self._options
        handler = options.handlers.get(job.queue)
        task = options.tasks.get(job.task) if job.task is not None else None
        if task is None and handler is not None:
            run.value = await self._calls.call(handler, job.payload, job)
            return None
        if job.task is None:
            return f"queue {job.queue!r} has no handler here, and the job names no task"
        if task is None:
            known = ", ".join(sorted(t.name for t in options.tasks)) or "none"
            return f"unknown task {job.task!r} (this worker knows: {known})"
        if not isinstance(job.payload, dict):
            return f"the payload of a task run must be its keyword arguments, not {type(job.payload).__name__}"
        run.value = await self._calls.call(task.func, **job.payload)
        return None

    async def with_retries(self, call: Callable[[], Awaitable[None]]) -> None:
        """Record an outcome, riding out a short outage (fenced calls are safe to repeat)."""
        backoff = Backoff()
        deadline = time.monotonic() + 30.0
        while True:
            try:
                await call()
                return
            except DatabaseUnavailable:
                pause = backoff.next()
                if time.monotonic() + pause > deadline or self._stopping.is_cancelled():
                    raise
                await asleep(pause)


def _told(error: BaseException | str) -> str:
    """A failed attempt's error as its log line tells it: an exception's type, then its text."""
    if isinstance(error, str):
        return error
    text = failure(error).error
    return f"{type(error).__name__}: {text}" if isinstance(error, Exception) else text  # a BaseException's has it


if ASYNC:

    def _uncancel() -> None:
        """Take back the cancellation the worker asked of the current task (it keeps serving)."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            task.uncancel()

    def _slot_cancelled(exc: BaseException) -> bool:
        """Whether ``exc`` is the cancellation of the slot's own task, asked from outside; a ``CancelledError``
        the task's code raised while nobody cancelled the slot is its failure, as anything it raises."""
        task = asyncio.current_task()
        return isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling() > 0

else:

    def _slot_cancelled(exc: BaseException) -> bool:
        """A thread is never cancelled: whatever the code raised is its failure."""
        return False
