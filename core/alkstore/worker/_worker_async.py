"""The worker: runs tasks (or plain per-queue handlers) for the jobs of its queues (ADR 021, 029).

A worker holds ``concurrency`` run slots (in the async runtime, tasks of its event loop; in the
sync twin, threads) and claims only for free ones, so it never holds a lease it cannot work on;
idle, it parks on one waiter over all its queues. Claim rounds take turns: the claim loop's, or
that of a slot whose run just ended and which so claims its own next job with the ack of the
last, without a wake of the claim loop and back per job (ADR 049); under a backlog the round (the
slot's or the claim loop's) waits briefly for every slot to free, so that one claim carries all
their acks (``Gathering``, ADR 022). An ``async def`` task or handler is awaited in
its slot; a plain one runs on a thread (in the sync twin: the slot's own), so one that blocks
stalls nothing else. While jobs run, one liveness loop extends the leases of every running job
(a third of the way into each lease) and gives up the runs past their task's timeout: an async
run is cancelled, a plain one is left to return and its outcome discarded by its fence. The
rules are core's: a failed run is retried on the queue's curve or buried (``on_failure``
through ``retry``), an undecodable payload is buried by the claim, a lease end is
``lease_until``. The loop only decides how to wait.

Stopping: ``stop`` ends claiming; running jobs get ``grace`` seconds to finish; what still runs
then is handed back (``release``: another worker takes it at once, without spending an
attempt). ``abort`` skips the grace. A handed-back, timed-out or lost job's later outcome is
discarded by its fence, so nothing is acked twice and nothing is lost.

The worker is made of parts with one job each: validated options, stats and the ack buffer
(``_parts``, no I/O), the run table (``_runs_async``), a run's life and its outcome
(``_execution_async``), liveness (``_liveness_async``) and reporting (``_reporting_async``); this
module is the slots, the claim loop, the idle wait and the drain.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from alkstore.errors import AlkstoreError, DatabaseUnavailable, InvalidArgument
from alkstore.port._acompat import ASYNC, AHelper, AQueue, AThreads, agather, aspawn
from alkstore.port._runtime_port_async import AsyncWaiter
from alkstore.port._time import StopToken
from alkstore.rules._lifecycle import Backoff
from alkstore.rules._records import new_schedule
from alkstore.store._job_async import AsyncJob
from alkstore.store._kernel_async import AsyncKernel, kernel_of
from alkstore.store._store_async import AsyncStore
from alkstore.store._tasks import Tasks

from ._execution_async import AsyncExecution
from ._liveness_async import AsyncLiveness
from ._maintenance_async import AsyncMaintenance
from ._parts import (
    DEFAULT_ACK_DELAY,
    DEFAULT_GRACE,
    DEFAULT_POLL_INTERVAL,
    IDLE_RECHECK,
    SUMMARY_EVERY,
    AckBuffer,
    Gathering,
    KnownDue,
    Run,
    Tally,
    WorkerOptions,
    WorkerStats,
    put_back,
)
from ._reporting_async import AsyncReporter
from ._runs_async import AsyncRuns, hand_back
from ._upkeep import DEFAULT_ACTION_RETENTION, DEFAULT_DEAD_RETENTION

if ASYNC:
    pass

__all__ = ["AsyncHandler", "AsyncWorker"]

#: This runtime, as the worker's options name it (only the async one may run ``async def`` code).
_RUNTIME = "async" if ASYNC else "sync"

log = logging.getLogger("alkstore.worker")

#: A plain handler of a queue's jobs: called with the decoded payload and the job; raising fails the run.
#: In the async runtime an ``async def`` handler is awaited on the loop and a plain one runs on a thread.
AsyncHandler = Callable[[Any, AsyncJob], object]


class AsyncWorker:
    """Runs the jobs of its queues: tasks from a ``Tasks`` registry, or plain handlers per queue.

    ``queues`` defaults to every queue of ``tasks`` and ``handlers``. ``concurrency`` jobs run at
    once; ``grace`` is how long a stopping worker waits for running jobs; with ``schedules`` the
    worker also runs the scheduler (leading, or standing by). Periodic tasks of its queues
    register their schedules when the worker starts. A successful run's ack is written with the
    worker's next claim, at most ``ack_delay`` later (``0``: at once, by the run itself; a stopping
    worker's runs write theirs at once too). Whatever a task raises fails its attempt, ``SystemExit``
    and ``KeyboardInterrupt`` included: the worker serves on (ADR 054).
    ``prefetch`` jobs may be claimed beyond the free slots, to wait for one (default 0: claim only
    for free slots); their leases are extended while they wait, and a stopping worker hands them
    back at once (ADR 022). Dead jobs of its queues are kept ``dead_retention`` (default 7 days;
    ``None``: forever) and then pruned, and the action log's entries ``action_retention`` (default
    90 days; ``None``: forever, ADR 068); a worker also vacuums the storage when its dead rows pile
    up (ADR 023). The async worker awaits ``async def`` tasks on its loop and runs plain ones on
    threads; the sync ``Worker`` runs plain ones only, each slot a thread (ADR 029). The couriers of
    ``tasks`` deliver their outboxes' messages as jobs of the outboxes' queues (``outboxes``: which
    outboxes; default every courier's, ADR 057).
    """

    def __init__(
        self,
        store: AsyncStore,
        tasks: Tasks | None = None,
        *,
        handlers: Mapping[str, AsyncHandler] | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int = 1,
        grace: float | timedelta = DEFAULT_GRACE,
        schedules: bool = False,
        worker_id: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        ack_delay: float | timedelta = DEFAULT_ACK_DELAY,
        prefetch: int = 0,
        dead_retention: float | timedelta | None = DEFAULT_DEAD_RETENTION,
        outboxes: Sequence[str] | None = None,
        action_retention: float | timedelta | None = DEFAULT_ACTION_RETENTION,
    ) -> None:
        if not isinstance(store, AsyncStore):
            raise InvalidArgument(f"store must be an alkstore.{AsyncStore.__name__}, not {type(store).__name__}")
        self._options = options = WorkerOptions.check(
            tasks,
            handlers=handlers,
            queues=queues,
            concurrency=concurrency,
            grace=grace,
            schedules=schedules,
            worker_id=worker_id,
            poll_interval=poll_interval,
            ack_delay=ack_delay,
            prefetch=prefetch,
            dead_retention=dead_retention,
            runtime=_RUNTIME,
            outboxes=outboxes,
            action_retention=action_retention,
        )
        self._store = store
        self._kernel: AsyncKernel = kernel_of(store)
        self.worker_id = options.worker_id
        self._tally = Tally()
        self.stats: WorkerStats = self._tally.stats
        self._maintenance = AsyncMaintenance(
            self._kernel,
            options.queues,
            dead_retention=options.dead_retention,
            label=self.worker_id,
            churn=self._churn,
            action_retention=options.action_retention,
        )
        self._runs = AsyncRuns(options.slots)
        self._acks = AckBuffer()
        self._reporter = AsyncReporter(self._kernel, options, self._runs, self._tally)
        self._liveness = AsyncLiveness(self._kernel, self._runs, self._tally, self._reporter, self._end, self.worker_id)
        self._inbox: AQueue[AsyncJob | None] = AQueue()
        self._calls = AThreads(options.concurrency)
        self._slots: list[AHelper] = []
        self._stopping = StopToken()  # the internal stop of the helper loops
        self._stop: StopToken | None = None  # run()'s tokens, for the slots that claim
        self._abort: StopToken | None = None
        self._healthy = True  # the last claim round went through
        self._next_queue = 0  # where the next round begins in the queues (each round begins one further)
        self._known_due: KnownDue | None = None  # the idle waits' last read (ADR 066)
        self._woken = False  # the last idle wait ended by a wake (an enqueue's, or spurious)
        self._gathering = Gathering(options.slots, options.ack_delay)  # when a round begins (ADR 022)
        self._summary_at = time.monotonic() + SUMMARY_EVERY
        self._execution = AsyncExecution(self._kernel, options, self._acks, self._tally, self._calls, self._stopping)

    def __repr__(self) -> str:
        options = self._options
        return (
            f"<alkstore.{type(self).__name__} {self.worker_id!r} queues={list(options.queues)}"
            f" concurrency={options.concurrency}>"
        )

    def _churn(self) -> int:
        """What this worker did that leaves dead rows: its runs ended one way or another."""
        stats = self.stats
        return stats.processed + stats.timed_out + stats.lost + stats.released + stats.cancelled

    @property
    def queues(self) -> list[str]:
        """The queues this worker claims from, in the order it looks at them."""
        return list(self._options.queues)

    # -- running ----------------------------------------------------------------------

    async def run(self, stop: StopToken, *, abort: StopToken | None = None) -> WorkerStats:
        """Work until ``stop`` is cancelled, then stop gracefully (``abort``: at once); return the stats."""
        if not isinstance(stop, StopToken) or (abort is not None and not isinstance(abort, StopToken)):
            raise InvalidArgument("stop and abort must be alkstore.StopTokens")
        abort = abort if abort is not None else StopToken()
        options = self._options
        await self._register_periodic()
        log.info(
            "worker %s serving %s with %d %s",
            self.worker_id,
            ", ".join(repr(name) for name in options.queues),
            options.concurrency,
            _slot_word(options.concurrency),
        )
        await self._reporter.report()
        for _ in range(options.concurrency):
            self._start_slot()
        scheduler_stop = StopToken()
        helpers = [
            aspawn(self._liveness.run, self._stopping, name=f"alkstore-heartbeat-{self.worker_id}"),
            aspawn(self._maintenance.run, self._stopping, name=f"alkstore-maintenance-{self.worker_id}"),
        ]
        if options.schedules:
            helpers.append(aspawn(self._lead, scheduler_stop, name=f"alkstore-scheduler-{self.worker_id}"))
        try:
            await self._claim_loop(stop, abort)
        finally:
            await self._drain(abort)
            await self._execution.flush_acks()  # put back by a slot's claim that met an outage meanwhile
            self._stopping.cancel()
            scheduler_stop.cancel()
            for _ in self._slots:
                self._inbox.put_nowait(None)
            await agather(*helpers)
            self._calls.close()
            await self._reporter.unreport()
        stats = self.stats
        log.info(
            "worker %s stopped: %d processed (%d ok, %d retried, %d dead), %d timed out, %d lost, %d handed back",
            self.worker_id,
            stats.processed,
            stats.succeeded,
            stats.retried,
            stats.buried,
            stats.timed_out,
            stats.lost,
            stats.released,
        )
        return stats

    async def _register_periodic(self) -> None:
        codec = self._kernel.codec
        schedules = [
            new_schedule(codec, task.name, periodic.spec, task.queue, dict(periodic.kwargs), periodic.opts, task.name)
            for periodic in self._options.tasks.periodic_tasks
            if (task := periodic.task).queue in self._options.queues
        ]
        if schedules:
            await self._kernel.register(schedules)

    async def _lead(self, stop: StopToken) -> None:
        try:
            await self._store.run_schedules(stop, standby=True)
        except AlkstoreError as exc:  # permanent: stopping the whole worker would lose running jobs' grace
            log.error("the scheduler of worker %s stopped: %s", self.worker_id, exc)

    async def _claim_loop(self, stop: StopToken, abort: StopToken) -> None:
        kernel = self._kernel
        queues = self._options.queues
        backoff = Backoff()
        self._stop, self._abort = stop, abort
        self._summary_at = time.monotonic() + SUMMARY_EVERY
        async with kernel.live().waiter(*queues) as waiter:
            while not stop.is_cancelled() and not abort.is_cancelled():
                free = await self._runs.free(stop, abort)
                if not free:
                    break
                free = await self._gather(free)
                round_at = kernel.clock.now()
                try:
                    claimed = await self._round(free)
                    backoff.reset()
                except DatabaseUnavailable as exc:
                    await self._runs.end_turn()
                    pause = backoff.next()
                    log.warning("worker %s: database unavailable (%s); again in %.1f s", self.worker_id, exc, pause)
                    await stop.wait_async(pause)
                    continue
                except (RecursionError, MemoryError) as exc:  # a job handed back by the claim (see _lifecycle)
                    await self._runs.end_turn()
                    log.error("worker %s: a claimed job could not be decoded (%r); handed back", self.worker_id, exc)
                    await stop.wait_async(backoff.next())
                    continue
                await self._runs.end_turn()
                if self._woken and not claimed:
                    self._known_due = None  # woken for nothing claimable: maybe an earlier delayed job (ADR 066)
                self._woken = False
                if not claimed:
                    await self._idle(waiter, stop, round_at)
            await self._execution.flush_acks()

    async def _round(self, free: int) -> int:
        """One claim round, the turn held: up to ``free`` jobs from the queues in turn, with the acks waiting,
        each dispatched to a slot as it comes; how many. Unwritten acks are put back if the store fails."""
        kernel = self._kernel
        queues = self._options.queues
        acks = self._acks.take()
        began = kernel.clock.now()
        self._healthy = False  # until the round is through: a slot leaves the rounds of an outage to the loop
        claimed = 0
        try:
            for offset in range(len(queues)):
                queue = queues[(self._next_queue + offset) % len(queues)]
                stale, jobs = await kernel.claim(
                    queue, self.worker_id, free - claimed, [(job, held) for job, _, held in acks]
                )
                self._execution.acked(acks, stale)
                acks = []
                if jobs:
                    await self._dispatch(jobs)
                claimed += len(jobs)
                if claimed >= free:
                    break
        except DatabaseUnavailable:
            self._acks.put_back(acks)  # fenced: written again later, or found done
            raise
        self._next_queue = (self._next_queue + 1) % len(queues)
        self._gathering.claimed(free, claimed, began, kernel.clock.now())
        self._healthy = True
        if time.monotonic() >= self._summary_at:
            self._reporter.summary()
            self._summary_at = time.monotonic() + SUMMARY_EVERY
        return claimed

    async def _claim_next(self, run: Run) -> bool:
        """A slot whose ``run`` ended claims for the free slots itself (its own included) when no other round
        is under way, the worker is not stopping and the last round went through: no wake of the claim
        loop and back per job (ADR 049). Whether ``run`` was forgotten (a claim or not); if not, it is left
        for ``finished``."""
        stop, abort = self._stop, self._abort
        if not self._healthy or stop is None or stop.is_cancelled() or (abort is not None and abort.is_cancelled()):
            return False
        free = await self._runs.take_turn(run)  # forgets ``run`` whether or not the turn is the slot's
        if not free:
            return True
        try:
            await self._round(await self._gather(free))
        except (AlkstoreError, RecursionError, MemoryError) as exc:  # the claim loop's next round meets it too
            log.debug("worker %s: a slot's claim failed (%r); left to the claim loop", self.worker_id, exc)
        finally:
            await self._runs.end_turn()  # wakes the claim loop if slots are still free (too little came)
        return True

    async def _gather(self, free: int) -> int:
        """The turn held for ``free`` slots: under a backlog, wait (``Gathering``) for more to free, so one
        claim carries their acks and jobs in one commit (ADR 022, amended); how many are free then."""
        gathering = self._gathering
        wait = gathering.wait(free)
        if wait <= 0:
            return free
        free = await self._runs.more_free(gathering.want(), wait)
        gathering.waited(free)
        return free

    async def _idle(self, waiter: AsyncWaiter, stop: StopToken, round_at: datetime) -> None:
        """Nothing was claimed by the round begun at ``round_at``: park until an enqueue, or until a job of
        the queues may be due (with acks to write or runs going, ``ack_delay`` at most)."""
        options = self._options
        if self._acks or self._runs.live():
            await waiter.wait(options.ack_delay or options.poll_interval, stop)
            return
        try:
            await self._until_due(waiter, stop, round_at)
        except DatabaseUnavailable as exc:
            log.warning(
                "worker %s: could not look at its queues (%s); again in %g s",
                self.worker_id,
                exc,
                options.poll_interval,
            )
            await waiter.wait(options.poll_interval, stop)

    async def _until_due(self, waiter: AsyncWaiter, stop: StopToken, round_at: datetime) -> None:
        """The idle wait (ADR 044): one read of the soonest instant a claim of the queues may find work, then
        park until that instant, an enqueue's wake, or ``IDLE_RECHECK`` (``poll_interval`` for a waiter that
        cannot hear enqueues), then read again. The waits that follow within that time go on the same
        read while it holds (ADR 066): an idle moment between two jobs costs no read. A job that was due
        when the round began is one the round could not take (its queue at its global limit): it is
        looked at again every ``poll_interval``."""
        kernel = self._kernel
        options = self._options
        while not stop.is_cancelled():
            recheck = IDLE_RECHECK if waiter.hears else options.poll_interval
            known, returned = self._known_due, put_back(self.stats)
            if known is None or not known.holds(kernel.clock.now(), time.monotonic(), returned, recheck):
                due = await kernel.live().soonest_due(options.queues)
                known = self._known_due = KnownDue(due, time.monotonic(), returned)
            due, looked = known.at, known.read
            if due is not None and due <= round_at:
                await waiter.wait(options.poll_interval, stop)
                return
            while (left := recheck - (time.monotonic() - looked)) > 0:
                now = kernel.clock.now()
                if due is not None and now >= due:
                    return
                step = min(left, options.poll_interval)
                if due is not None:
                    step = min(step, (due - now).total_seconds())
                began = time.monotonic()
                await waiter.wait(step, stop)
                if stop.is_cancelled() or time.monotonic() - began < step:
                    self._woken = True
                    return  # woken: an enqueue (or a spurious wake: the round finds nothing)

    async def _dispatch(self, jobs: list[AsyncJob]) -> None:
        """The jobs of one claim to the slots: their runs added to the run table at once, each claimed (and
        its lease last extended) at the claim's instant, then each put in the inbox."""
        timeout_of = self._options.timeout_of
        now = jobs[0]._claimed_at or self._kernel.clock.now()  # one claim's jobs share its instant
        claimed = time.monotonic()
        await self._runs.add([Run(job, now, now, timeout_of(job), claimed) for job in jobs])
        for job in jobs:
            self._inbox.put_nowait(job)

    def _start_slot(self) -> None:
        self._slots.append(aspawn(self._serve, name=f"alkstore-worker-{self.worker_id}-{len(self._slots) + 1}"))

    # -- one job ------------------------------------------------------------------------

    async def _serve(self) -> None:
        while (job := await self._inbox.get()) is not None:
            run = await self._runs.start(job)
            if run is None:
                continue  # handed back (or lost) before it started
            run.started_at = self._kernel.clock.now()  # its run (and its timeout) starts now
            run.started = time.monotonic()
            await self._execution.execute(run)
            if self._retires(run):
                await self._runs.finished(run)
                return
            if not await self._claim_next(run):
                await self._runs.finished(run)

    def _retires(self, run: Run) -> bool:
        """Whether the slot that ran ``run`` ends now: a thread whose run was given up has been replaced
        (see ``_end``), so it retires; an async slot keeps serving."""
        if ASYNC:
            return False
        return run.abandoned

    def _end(self, run: Run) -> None:
        """End a given-up run early where the runtime can: an async run is cancelled at its next await;
        a thread cannot be, so a running one gets a replacement slot and retires when it returns."""
        if not run.running:
            return
        if ASYNC:
            if run.task is not None:
                run.task.cancel()
        else:
            self._start_slot()

    # -- stopping -----------------------------------------------------------------------

    async def _drain(self, abort: StopToken) -> None:
        """Hand back the jobs waiting for a slot at once; give running jobs the grace, then hand back the rest.

        No claim follows to carry an ack, so the acks waiting are written now and a run that finishes
        within the grace writes its own at once (ADR 054): a worker killed in its grace runs nothing
        that finished again, and hands back only what still runs."""
        acks = self._acks.close()
        running = self._runs.running()
        if running and not abort.is_cancelled():
            log.info(
                "worker %s stopping: %d running job%s get%s %g s of grace; each is acked as it finishes",
                self.worker_id,
                running,
                "" if running == 1 else "s",
                "s" if running == 1 else "",
                self._options.grace,
            )
        await self._execution.flush_acks(acks)
        await hand_back(self._kernel, await self._runs.abandon_waiting(), "waiting", self._tally, self.worker_id)
        remaining = await self._runs.drain(self._options.grace, abort)
        if ASYNC:
            for run in remaining:
                self._end(run)
        await hand_back(self._kernel, remaining, "running", self._tally, self.worker_id)


def _slot_word(count: int) -> str:
    if ASYNC:
        return "slot" if count == 1 else "slots"
    return "thread" if count == 1 else "threads"
