"""A claimed job: ``AsyncJob``, its fields and the calls that finish or extend its claim.

Every one of those calls goes through the one door of its store's kernel (``_kernel_async``):
ack, retry, fail (bury), release and heartbeat, with their rules (``_lifecycle``) and their
telemetry there, once. A job sees its kernel only as ``AsyncFinisher`` (so this module imports
no kernel, and the kernel, which makes the jobs it claims, imports this one).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from alkstore.port._assembly import assembler
from alkstore.port._records import Held, JobRecord
from alkstore.port._time import StopToken
from alkstore.rules._records import JobInfo
from alkstore.rules._steps import due_after, due_at

from ._steps_async import AsyncStepper, StepsHeld, StepTx

__all__ = ["AsyncFinisher", "AsyncJob", "Claim", "make_job"]

#: Where ``JobInfo`` keeps ``lease_until`` (its slot): a claimed job's value as claimed.
_CLAIMED_LEASE = JobInfo.__dict__["lease_until"]


class AsyncFinisher(Protocol):
    """The kernel as a claimed job calls it: the one door through which every claim is finished or extended."""

    async def ack(self, job: AsyncJob, result: Any) -> None: ...

    async def retry(self, job: AsyncJob, error: str | BaseException, delay: float | timedelta | None) -> None: ...

    async def fail(self, job: AsyncJob, error: str | BaseException) -> None: ...

    async def release(self, job: AsyncJob) -> None: ...

    async def heartbeat(self, job: AsyncJob) -> datetime: ...

    def stepper(self) -> AsyncStepper: ...
    async def parent_results(self, job_id: int) -> dict[int, Any]: ...


class Claim:
    """What changes while a claim is held, kept apart from the job (which never changes): the lease end
    its last heartbeat wrote, and its stop token (made when first asked for)."""

    __slots__ = ("_steps", "lease_until", "stop")

    def __init__(self) -> None:
        self.lease_until: datetime | None = None
        self.stop: StopToken | None = None
        self._steps: StepsHeld | None = None

    @property
    def steps(self) -> StepsHeld:
        """Its steps as read at its run's first step, sleep or wait (ADR 069): made when first asked for, as
        ``stop`` is (a job acked by its caller never asks)."""
        steps = self._steps
        if steps is None:
            steps = self._steps = StepsHeld()
        return steps


@dataclass(frozen=True, slots=True, eq=False)
class AsyncJob(JobInfo):
    """A claimed job: its fields, and the fenced calls that finish or extend its lease.

    ``ack``, ``retry``, ``fail`` and ``heartbeat`` raise ``LeaseLost`` (changing nothing)
    if the lease lapsed and another worker claimed the job since. A job is one claim:
    two are equal when they are the same claim of the same job, whatever their lease end.
    Its fields are as claimed (``lease_until`` follows its heartbeats); a cancel requested since
    is told by ``stop`` (ADR 035), not by ``cancel_requested``, which ``get_job`` reads fresh.
    """

    _kernel: AsyncFinisher = field(repr=False, kw_only=True)
    _record: JobRecord = field(repr=False, kw_only=True)
    #: What changes while the claim is held (``lease_until``, ``stop``): the kernel writes it, never the job.
    _claim: Claim = field(default_factory=Claim, repr=False, kw_only=True)
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
        claim = self._claim
        if claim.stop is None:
            claim.stop = StopToken()
        return claim.stop

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AsyncJob):
            return NotImplemented
        return (self.id, self._record.fence) == (other.id, other._record.fence)

    def __hash__(self) -> int:
        return hash((AsyncJob, self.id, self._record.fence))

    async def ack(self, result: Any = None) -> None:
        """Done: delete the job. When its queue keeps results (``keep_results``, ADR 042) its outcome is kept,
        ``result`` included (encoded by the store's codec: ``InvalidPayload`` before any I/O, the job still
        held, when it cannot be); otherwise ``result`` is ignored."""
        await self._kernel.ack(self, result)

    async def parent_results(self) -> dict[int, Any]:
        """What each parent of this job handed it when it succeeded (its return value), by parent id (ADR 073).

        A parent hands its result over whatever its queue's ``keep_results``; one that returned
        ``None`` (or finished before this job waited on it, unkept) is left out.
        """
        return await self._kernel.parent_results(self.id)

    async def retry(self, error: str | BaseException, delay: float | timedelta | None = None) -> None:
        """Failed this attempt: run again after ``delay`` (``None`` = the queue's curve).

        The error is kept as ``last_error`` (an exception's traceback too); with no attempts
        left the job goes dead instead.
        """
        await self._kernel.retry(self, error, delay)

    async def release(self) -> None:
        """Hand the job back unfinished, as if this claim never took an attempt: another worker may take it
        at once. Used by a worker stopping before the job could finish."""
        await self._kernel.release(self)

    async def fail(self, error: str | BaseException) -> None:
        """Give up now: the job goes dead with ``error``, whatever attempts are left."""
        await self._kernel.fail(self, error)

    async def heartbeat(self) -> datetime:
        """Extend the lease by the job's (or its queue's) visibility timeout from now; return the new lease end.

        If the job's cancel was requested (``Store.cancel``, ADR 035) it also cancels ``stop``: the holder of
        a claim learns of a cancel at its heartbeat, as a worker's run learns of it from its worker. The lease
        is still extended, to wind up in; whatever the holder calls next ends the job cancelled.
        """
        return await self._kernel.heartbeat(self)

    # -- steps, durable sleep and events (ADR 069) ----------------------------------------

    def _held(self) -> Held:
        return Held(self.id, self._record.fence)

    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once for this job: its result is stored (fenced, through the codec) and a
        later run of the job gets the stored result instead of running it again. ``LeaseLost`` if the claim was lost."""
        return await self._kernel.stepper().step(self._held(), self._claim.steps, name, fn, args, kwargs)

    def step_tx(self, name: str, tx: Any = None) -> AbstractAsyncContextManager[StepTx]:
        """A step whose own writes and its checkpoint commit together: in ``tx`` (the caller's transaction) or
        in one of the engine's (``StepTx.tx``). When ``StepTx.done`` a former run finished it: skip the block."""
        return self._kernel.stepper().step_tx(self._held(), self._claim.steps, name, tx)

    async def sleep(self, duration: float | timedelta) -> None:
        """Sleep ``duration`` without holding a worker or spending an attempt: see ``sleep_until``."""
        await self._kernel.stepper().sleep(self._held(), self._claim.steps, lambda now: due_after(now, duration))

    async def sleep_until(self, instant: datetime) -> None:
        """End this run until ``instant`` (raising ``JobSuspended``), the job back to pending without spending an
        attempt; the run after it passes this call at once, its finished steps skipped."""
        await self._kernel.stepper().sleep(self._held(), self._claim.steps, lambda now: due_at(now, instant))

    async def wait_for(self, event: str, timeout: float | timedelta) -> Any:
        """The payload of ``event``, emitted before or during the wait; the job sleeps meanwhile (``JobSuspended``).
        ``EventTimeout`` once ``timeout`` passed without it."""
        return await self._kernel.stepper().wait_for(self._held(), self._claim.steps, event, timeout)


def _lease_until(job: AsyncJob) -> datetime | None:
    """When this claim's lease ends: as claimed, then as its last heartbeat (or its worker's) moved it."""
    moved = job._claim.lease_until
    return moved if moved is not None else _CLAIMED_LEASE.__get__(job, type(job))


def _claimed_lease(job: AsyncJob, value: datetime | None) -> None:
    """Set by the dataclass's ``__init__`` only (the job is frozen): the lease end as claimed."""
    _CLAIMED_LEASE.__set__(job, value)


# ``lease_until`` is JobInfo's field, read through the claim once a heartbeat moved it. It is set on the
# class made by ``@dataclass`` (which, with slots, drops a class attribute named as a field).
setattr(AsyncJob, "lease_until", property(_lease_until, _claimed_lease, doc=_lease_until.__doc__))  # noqa: B010


#: ``AsyncJob(...)``, made by plain assignments (``assembler``): the kernel makes one per job it claims.
make_job: Callable[..., AsyncJob] = assembler(AsyncJob)
