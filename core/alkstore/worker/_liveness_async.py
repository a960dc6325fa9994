"""A worker's liveness loop: extends its runs' leases and gives up the runs past their timeout (ADR 021).

Every ``HEARTBEAT_TICK`` of the store's clock it looks at the worker's live runs: a running run
past its task's timeout is given up (abandoned, its job retried at once by core's rule, or buried
on its last attempt; the run ended where the runtime can: ``end``); every other run whose lease
is a third gone gets one batched heartbeat; a run whose heartbeat finds its lease taken over is
given up as lost; every ``CANCEL_CHECK_EVERY`` it asks whether a running job's cancel was
requested, and stops such a run at once, its job ending cancelled (ADR 035). It also has the
worker report itself every ``REPORT_EVERY`` (``IDLE_REPORT_EVERY`` while its figures stay the same).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from alkstore.errors import DatabaseUnavailable, LeaseLost
from alkstore.port._time import StopToken
from alkstore.rules._lifecycle import last_attempt, lease_length, lease_until

from ._parts import CANCEL_CHECK_EVERY, HEARTBEAT_TICK, Run, Tally, describe
from ._reporting_async import AsyncReporter
from ._runs_async import AsyncRuns

if TYPE_CHECKING:
    from alkstore.store._job_async import AsyncJob
    from alkstore.store._kernel_async import AsyncKernel

__all__ = ["AsyncLiveness"]

log = logging.getLogger("alkstore.worker")


class AsyncLiveness:
    """The heartbeats and timeouts of one worker's runs; ``end`` ends a given-up run early where it can."""

    def __init__(
        self,
        kernel: AsyncKernel,
        runs: AsyncRuns,
        tally: Tally,
        reporter: AsyncReporter,
        end: Callable[[Run], None],
        label: str,
    ) -> None:
        self._kernel = kernel
        self._runs = runs
        self._tally = tally
        self._reporter = reporter
        self._end = end
        self._label = label
        self._checked_at: datetime | None = None

    async def run(self, stopping: StopToken) -> None:
        """Until ``stopping``: every ``HEARTBEAT_TICK``, heartbeats and timeouts; reports on their cadence."""
        clock = self._kernel.clock
        while not stopping.is_cancelled():
            await clock.sleep_async(HEARTBEAT_TICK, stopping)
            if stopping.is_cancelled():
                return
            try:
                await self.beat()
            except DatabaseUnavailable as exc:
                log.warning("worker %s: heartbeats failed (%s); trying again", self._label, exc)
            except Exception:
                log.exception("worker %s: the heartbeat loop hit an error; it carries on", self._label)
            if self._reporter.due(clock.now()):
                await self._reporter.report()

    async def beat(self) -> None:
        """Give up the runs past their timeout, extend the leases that are a third gone, stop the cancelled."""
        kernel = self._kernel
        now = kernel.clock.now()
        runs = self._runs.live()
        if runs and (self._checked_at is None or now - self._checked_at >= timedelta(seconds=CANCEL_CHECK_EVERY)):
            self._checked_at = now
            cancelled = {
                pair.job_id for pair in await kernel.live().cancel_requested([kernel.held_of(run.job) for run in runs])
            }
            for run in runs:
                if run.job.id in cancelled:
                    await self._cancelled(run)
            runs = [run for run in runs if run.job.id not in cancelled]
        timed_out = [
            run for run in runs if run.running and run.timeout is not None and now - run.started_at >= run.timeout
        ]
        for run in timed_out:
            assert run.timeout is not None
            await self._give_up(run, f"timed out after {run.timeout.total_seconds():g} s")
        due = []
        for run in runs:
            if run in timed_out:
                continue
            record = kernel.record_of(run.job)
            defaults = await kernel.defaults(run.job.queue)
            if now - run.beat_at >= lease_length(record, defaults) / 3:
                due.append((run, lease_until(record, defaults, now)))
        if not due:
            return
        # A cancel the beat finds is told by the check above, on its cadence.
        stale = await kernel.heartbeat_many([(run.job, until) for run, until in due])
        for run, _ in due:
            if run.job.id in stale:
                await self._lost(run)
            else:
                run.beat_at = now

    async def _give_up(self, run: Run, reason: str) -> None:
        """A run that outlived its timeout: end it, retry its job now (bury it, on its last attempt), and keep
        its slot serving."""
        job: AsyncJob = run.job
        if not await self._runs.abandon(run):
            return
        job.stop.cancel()
        self._tally.add(job.queue, job, (time.monotonic() - run.started) * 1000, timed_out=1)
        outcome = "dead, no attempts left" if last_attempt(job) else "to be retried"
        log.warning("job %s (%s) %s; it is given up, %s", job.id, describe(job), reason, outcome)
        self._end(run)
        try:
            await job.retry(reason)
        except LeaseLost:
            self._tally.add(lost=1)
        except DatabaseUnavailable as exc:
            log.error("job %s: could not give it up (%s); it runs again once its lease lapses", job.id, exc)

    async def _cancelled(self, run: Run) -> None:
        """The job was cancelled while it ran: stop the run and end the job cancelled now (fenced)."""
        job: AsyncJob = run.job
        if not await self._runs.abandon(run):
            return
        job.stop.cancel()
        self._tally.add(cancelled=1)
        log.warning("job %s (%s) was cancelled while it ran; the run is stopped", job.id, describe(job))
        self._end(run)
        try:
            await job.ack()  # a job whose cancel was requested ends cancelled, whichever way it finishes
        except LeaseLost:
            pass  # its lease was lost meanwhile: the next claim's sweep ends it cancelled
        except DatabaseUnavailable as exc:
            log.error("job %s: could not end it cancelled (%s); it ends so once its lease lapses", job.id, exc)

    async def _lost(self, run: Run) -> None:
        """A heartbeat found the lease taken over: tell the run, discard its outcome."""
        if not await self._runs.abandon(run):
            return
        run.job.stop.cancel()
        self._tally.add(lost=1)
        log.warning(
            "job %s (%s): its lease was lost (taken over by another claim); the run is cancelled and its outcome "
            "will not count",
            run.job.id,
            describe(run.job),
        )
        self._end(run)
