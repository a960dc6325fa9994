"""Queues and claimed jobs: ``AsyncQueue`` enqueues and claims, ``AsyncJob`` finishes or extends one claim.

Both are handles on a store's kernel (``_kernel_async``); every rule they follow is core's:
stamps from ``_options``, retry-or-bury, lease ends and claim waits from ``_lifecycle``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Unpack

from alkstore.errors import InvalidArgument, InvalidOptions, LeaseLost
from alkstore.port._records import Burial, Heartbeat, Held, JobRecord, Retry
from alkstore.port._time import StopToken
from alkstore.rules._args import batch
from alkstore.rules._lifecycle import check_poll_interval, check_wait, claim_wait, failure, lease_until, on_failure
from alkstore.rules._names import validate_label
from alkstore.rules._options import EnqueueOpts, QueueDefaults, QueueSettings, check_queue_config
from alkstore.rules._records import JobId, JobInfo

if TYPE_CHECKING:
    from ._kernel_async import AsyncKernel

__all__ = ["MAX_CLAIM", "AsyncJob", "AsyncQueue"]

#: The most jobs one claim may take.
MAX_CLAIM = 1000


class AsyncQueue:
    """A named queue: ``enqueue`` jobs, ``claim`` them; its defaults in ``defaults()``."""

    __slots__ = ("_kernel", "name")

    def __init__(self, kernel: AsyncKernel, name: str) -> None:
        self._kernel = kernel
        self.name = name

    def __repr__(self) -> str:
        return f"<alkstore.{type(self).__name__} {self.name!r}>"

    async def defaults(self) -> QueueDefaults:
        """Visibility timeout, attempts, retry curve and priority this queue's jobs get by default."""
        return await self._kernel.defaults(self.name)

    async def configure(self, **settings: Unpack[QueueSettings]) -> QueueDefaults:
        """Store this queue's defaults for every process sharing the storage; return the effective ones.

        Replaces what was stored: a ``None`` falls back to the derived default, all ``None`` removes
        the config. Other stores see it within ``CONFIG_TTL`` of their clocks, the scheduler's
        fires at once. Jobs already queued keep their attempts and priority; their next claim,
        retry and heartbeat use the new lease and curve (ADR 016), and their acks from then on keep
        (or stop keeping) their outcomes as ``keep_results`` says (ADR 042).
        """
        return await self._kernel.configure(self.name, check_queue_config(self.name, **settings))

    async def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Store a job now (its own transaction); return its id (with a ``unique_key``, perhaps the id of the
        job already holding it: ``JobId.created`` says which)."""
        return (await self._kernel.enqueue(self.name, (payload,), opts))[0]

    async def enqueue_many(self, payloads: Iterable[Any], opts: EnqueueOpts | None = None) -> list[JobId]:
        """Store one job per payload, all with ``opts``, in one transaction of their own; the ids in order.

        All or nothing, as ``enqueue_many_tx``: bad input anywhere rejects the batch before I/O.
        """
        return await self._kernel.enqueue(self.name, batch(payloads), opts)

    async def pause(self) -> None:
        """Stop every worker, on every host, claiming this queue's jobs (within ``CONFIG_TTL``, 2 s; ADR 033).

        Enqueues and schedule fires into it still succeed, and running jobs finish.
        """
        await self._kernel.set_paused(self.name, True)

    async def resume(self) -> None:
        """Let workers claim this queue's jobs again (within ``CONFIG_TTL``)."""
        await self._kernel.set_paused(self.name, False)

    async def claim(
        self,
        worker_id: str,
        *,
        wait: float | timedelta | None = None,
        poll_interval: float = 1.0,
        stop: StopToken | None = None,
    ) -> AsyncJob | None:
        """Lease the next job to ``worker_id``, or ``None``.

        With ``wait`` (seconds of the store's clock), park until a job arrives, the wait ends
        or ``stop`` is cancelled, looking again at least every ``poll_interval`` wall seconds
        (a lost wake-up costs at most that). A parked claim is woken by the enqueue's
        notification; in the async runtime, cancelling the task that awaits it ends it too.
        """
        validate_label(worker_id, "worker id")
        kernel = self._kernel
        if wait is None:  # the common, non-blocking claim: no deadline to read the clock for
            if poll_interval != 1.0:
                check_poll_interval(poll_interval)
            jobs = (await kernel.claim(self.name, worker_id, 1))[1]
            return jobs[0] if jobs else None
        span = check_wait(wait)
        interval = check_poll_interval(poll_interval)
        if stop is not None and not isinstance(stop, StopToken):
            raise InvalidArgument(f"stop must be an alkstore.StopToken, not {type(stop).__name__}")
        deadline = kernel.clock.now() + span
        jobs = (await kernel.claim(self.name, worker_id, 1))[1]
        if jobs or not span:
            return jobs[0] if jobs else None
        async with kernel.live().waiter(self.name) as waiter:
            while stop is None or not stop.is_cancelled():
                jobs = (await kernel.claim(self.name, worker_id, 1))[1]
                if jobs:
                    return jobs[0]
                pause = claim_wait(deadline, kernel.clock.now(), interval)
                if pause is None:
                    return None
                await waiter.wait(pause, stop)
        return None

    async def claim_many(self, worker_id: str, limit: int) -> list[AsyncJob]:
        """Lease up to ``limit`` jobs to ``worker_id`` in one round trip, best first; empty when none is ready."""
        validate_label(worker_id, "worker id")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidArgument(f"limit must be an int, not {type(limit).__name__}")
        if not 1 <= limit <= MAX_CLAIM:
            raise InvalidOptions(f"limit must be between 1 and {MAX_CLAIM}, not {limit}")
        return (await self._kernel.claim(self.name, worker_id, limit))[1]


@dataclass(frozen=True, slots=True, eq=False)
class AsyncJob(JobInfo):
    """A claimed job: its fields, and the fenced calls that finish or extend its lease.

    ``ack``, ``retry``, ``fail`` and ``heartbeat`` raise ``LeaseLost`` (changing nothing)
    if the lease lapsed and another worker claimed the job since. A job is one claim:
    two are equal when they are the same claim of the same job, whatever their lease end.
    Its fields are as claimed (``lease_until`` follows its heartbeats); a cancel requested since
    is told by ``stop`` (ADR 035), not by ``cancel_requested``, which ``get_job`` reads fresh.
    """

    _kernel: AsyncKernel = field(repr=False, kw_only=True)
    _record: JobRecord = field(repr=False, kw_only=True)
    _stop: StopToken | None = field(default=None, repr=False, kw_only=True)
    #: The instant of its claim (by the store's clock): a kept result's start, unless the worker says.
    _claimed_at: datetime | None = field(default=None, repr=False, kw_only=True)

    @property
    def fence(self) -> int:
        """This claim's fencing token: it grows with every claim of the job, so a holder whose lease
        lapsed (a lower fence) is refused; a log of claims keyed by it tells the claims apart (ADR 009)."""
        return self._record.fence

    @property
    def stop(self) -> StopToken:
        """Cancelled when this claim should end early: its lease was lost, its timeout passed, its worker is
        stopping at once, or its cancel was requested (told by its worker, or by its own ``heartbeat``).
        Long work checks it and returns; its outcome would not count."""
        if self._stop is None:
            object.__setattr__(self, "_stop", StopToken())
        assert self._stop is not None
        return self._stop

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AsyncJob):
            return NotImplemented
        return (self.id, self._record.fence) == (other.id, other._record.fence)

    def __hash__(self) -> int:
        return hash((AsyncJob, self.id, self._record.fence))

    def _fenced(self, stale: list[Held]) -> None:
        if stale:
            raise LeaseLost(f"job {self.id} is no longer held under its claim (fence {self._record.fence})")

    async def ack(self, result: Any = None) -> None:
        """Done: delete the job. When its queue keeps results (``keep_results``, ADR 042) its outcome is kept,
        ``result`` included (encoded by the store's codec: ``InvalidPayload`` before any I/O, the job still
        held, when it cannot be); otherwise ``result`` is ignored."""
        kernel = self._kernel
        await kernel.ack(self, await kernel.finished(self, result))

    async def retry(self, error: str | BaseException, delay: float | timedelta | None = None) -> None:
        """Failed this attempt: run again after ``delay`` (``None`` = the queue's curve).

        The error is kept as ``last_error`` (an exception's traceback too); with no attempts
        left the job goes dead instead.
        """
        failed = failure(error)
        kernel = self._kernel
        now = kernel.clock.now()
        outcome = on_failure(self._record, failed, await kernel.defaults(self.queue), delay, now)
        engine = kernel.live()
        if isinstance(outcome, Retry):
            self._fenced(await engine.retry((outcome,), now))
        else:
            self._fenced(await engine.bury((outcome,), now))
        if kernel.telemetry is not None:
            (kernel.telemetry.retried if isinstance(outcome, Retry) else kernel.telemetry.buried)((self._record,))

    async def release(self) -> None:
        """Hand the job back unfinished, as if this claim never took an attempt: another worker may take it
        at once. Used by a worker stopping before the job could finish."""
        kernel = self._kernel
        self._fenced(await kernel.live().release((Held(self.id, self._record.fence),), kernel.clock.now()))

    async def fail(self, error: str | BaseException) -> None:
        """Give up now: the job goes dead with ``error``, whatever attempts are left."""
        failed = failure(error)
        burial = Burial(self.id, self._record.fence, failed.error, failed.traceback)
        kernel = self._kernel
        self._fenced(await kernel.live().bury((burial,), kernel.clock.now()))
        if kernel.telemetry is not None:
            kernel.telemetry.buried((self._record,))

    async def heartbeat(self) -> datetime:
        """Extend the lease by the job's (or its queue's) visibility timeout from now; return the new lease end.

        If the job's cancel was requested (``Store.cancel``, ADR 035) it also cancels ``stop``: the holder of
        a claim learns of a cancel at its heartbeat, as a worker's run learns of it from its worker. The lease
        is still extended, to wind up in; whatever the holder calls next ends the job cancelled.
        """
        kernel = self._kernel
        until = lease_until(self._record, await kernel.defaults(self.queue), kernel.clock.now())
        stale, asked = await kernel.live().heartbeat((Heartbeat(self.id, self._record.fence, until),))
        self._fenced(stale)
        object.__setattr__(self, "lease_until", until)
        if asked:
            self.stop.cancel()
        return until
