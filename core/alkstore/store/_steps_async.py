"""A running job's steps, sleeps and event waits, and a store's emits (ADR 069).

``AsyncStepper`` is one store's: its engine's steps port, clock and codec. A claimed job calls it
with its fenced pair and its ``Claim`` (where the steps read at the run's first call are kept, and
the count of its sleeps and waits). The rules are ``rules/_steps``'; this carries them out.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NoReturn

from alkstore.errors import EventTimeout, JobHeld, LeaseLost, UnknownJob
from alkstore.port._acompat import ASYNC
from alkstore.port._records import Held, JobState
from alkstore.port._runtime_port_async import AsyncRuntimePort
from alkstore.port._step_records import EventRecord, StepRecord, Wait
from alkstore.port._steps_port_async import AsyncStepsPort
from alkstore.port._time import Clock
from alkstore.rules._args import valid_id
from alkstore.rules._codec import Codec
from alkstore.rules._names import RESERVED_PREFIX
from alkstore.rules._records import JobInfo
from alkstore.rules._steps import (
    JobSuspended,
    SleepMark,
    StepInfo,
    WaitInfo,
    due_after,
    event_keep,
    event_name,
    mark,
    read_mark,
    step_name,
    wait_step,
)

__all__ = ["AsyncStepper", "StepTx", "StepsHeld", "Suspension", "job_steps"]


@dataclass(slots=True)
class StepTx:
    """A transactional step as its block sees it: ``done`` when a former run finished it (its ``result``
    is then the stored one, and the block must do nothing), else ``tx`` to write in and ``result`` to set."""

    tx: Any
    done: bool
    result: Any = None


@dataclass(frozen=True, slots=True)
class Suspension:
    """A sleep a worker stores as it ends the run: the claim, the wait, when it was asked, and its checkpoint."""

    held: Held
    wait: Wait
    now: datetime
    step: StepRecord | None


class StepsHeld:
    """What one claim of a job knows of its steps: those stored (read at its first step), and how many
    sleeps and waits its run has passed."""

    __slots__ = ("asked", "by_worker", "ordinal", "stored", "unsure")

    def __init__(self) -> None:
        self.stored: dict[str, bytes] | None = None
        self.ordinal = 0
        #: Set once a step was written in a caller's transaction: what is stored must be read again.
        self.unsure = False
        #: Whether a worker runs it: its worker then stores the sleep as it ends the run (while its claim is
        #: held and heartbeated), rather than the job at once.
        self.by_worker = False
        #: The first sleep or wait the run asked for (a worker's run): it ends the run asleep even if the
        #: run caught its ``JobSuspended`` and returned (ADR 069, amended 2026-12-07).
        self.asked: JobSuspended | None = None


class AsyncStepper:
    """One store's steps, sleeps, waits and emits, through its engine's steps port."""

    __slots__ = ("_clock", "_codec", "_engine", "_port")

    def __init__(self, engine: AsyncRuntimePort, port: AsyncStepsPort, clock: Clock, codec: Codec) -> None:
        self._engine = engine
        self._port = port
        self._clock = clock
        self._codec = codec

    async def _stored(self, held: Held, steps: StepsHeld) -> dict[str, bytes]:
        if steps.stored is None and held.fence == 1 and not steps.unsure:
            steps.stored = {}  # the job's first claim ever: no run before it stored a step or a wait
        if steps.stored is None:
            records = await self._port.resume(held)
            if records is None:
                raise _lost(held)
            steps.stored = {record.name: record.result for record in records}
        return steps.stored

    async def _save(self, held: Held, steps: dict[str, bytes] | None, record: StepRecord, tx: Any = None) -> None:
        """Write a checkpoint (fenced); ``steps`` remembers it, when given (not for one in a transaction that
        may yet roll back)."""
        if not await self._port.save_step(held, record, tx):
            raise _lost(held)
        if steps is not None:
            steps[record.name] = record.result

    async def step(
        self, held: Held, steps: StepsHeld, name: str, fn: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)`` once for the job: its stored result (decoded) if a former run finished it."""
        name = step_name(name)
        stored = await self._stored(held, steps)
        if name in stored:
            return self._codec.decode(stored[name])
        value = fn(*args, **kwargs)
        if ASYNC:  # noqa: SIM102 - the sync twin keeps neither side (ADR 026)
            if inspect.isawaitable(value):
                value = await value
        data = self._codec.encode(value)
        await self._save(held, stored, StepRecord(name, data, self._clock.now()))
        return self._codec.decode(data)

    @asynccontextmanager
    async def step_tx(self, held: Held, steps: StepsHeld, name: str, tx: Any = None) -> AsyncIterator[StepTx]:
        """A step whose writes and checkpoint commit together, in ``tx`` or in a transaction of the engine's."""
        name = step_name(name)
        stored = await self._stored(held, steps)
        if name in stored:
            yield StepTx(tx, True, self._codec.decode(stored[name]))
            return
        if tx is not None:  # remembered by no run: the caller's transaction may yet roll back, then read again
            caller = await self._engine.caller_transaction(tx)
            block = StepTx(tx, False)
            yield block
            await self._checkpoint(held, name, block, caller)
            steps.stored, steps.unsure = None, True
            return
        async with self._engine.transaction() as own:
            block = StepTx(own, False)
            yield block
            data = await self._checkpoint(held, name, block, own)
        stored[name] = data  # committed

    async def _checkpoint(self, held: Held, name: str, block: StepTx, tx: Any) -> bytes:
        data = self._codec.encode(block.result)
        await self._save(held, None, StepRecord(name, data, self._clock.now()), tx)
        block.result = self._codec.decode(data)
        return data

    async def sleep(self, held: Held, steps: StepsHeld, due: Callable[[datetime], datetime]) -> None:
        """Sleep until ``due(now)`` as first asked (a later run keeps that instant); returns once it passed."""
        now = self._clock.now()
        wanted = due(now)
        stored = await self._stored(held, steps)
        steps.ordinal += 1
        name = wait_step(steps.ordinal)
        found = stored.get(name)
        until = wanted if found is None else read_mark(found).until
        if until is None or until <= now:
            return
        record = None if found is not None else StepRecord(name, mark(SleepMark(until=until)), now)
        await self._suspend(held, steps, Wait(until), now, record)

    async def wait_for(self, held: Held, steps: StepsHeld, event: str, timeout: object) -> Any:
        """The payload of ``event`` (emitted before or during the wait), or ``EventTimeout`` after ``timeout``."""
        event = event_name(event)
        now = self._clock.now()
        deadline = due_after(now, timeout, "timeout")
        stored = await self._stored(held, steps)
        steps.ordinal += 1
        name = wait_step(steps.ordinal)
        found = None if name not in stored else read_mark(stored[name])
        if found is not None and found.payload is not None:
            return self._codec.decode(found.payload)
        if found is not None and found.timed_out:
            raise _timed_out(event)
        if found is not None and found.until is not None:
            deadline = found.until
        emitted = await self._port.read_event(event, now)
        if emitted is not None:
            await self._save(held, stored, StepRecord(name, mark(SleepMark(payload=emitted.payload)), now))
            return self._codec.decode(emitted.payload)
        if deadline <= now:
            await self._save(held, stored, StepRecord(name, mark(SleepMark(timed_out=True)), now))
            raise _timed_out(event)
        record = None if found is not None else StepRecord(name, mark(SleepMark(until=deadline)), now)
        return await self._suspend(held, steps, Wait(deadline, event), now, record)

    async def _suspend(
        self, held: Held, steps: StepsHeld, wait: Wait, now: datetime, record: StepRecord | None
    ) -> NoReturn:
        waits = f"event {wait.event!r} until" if wait.event is not None else "until"
        signal = JobSuspended(f"job {held.job_id} sleeps: it waits for {waits} {wait.until.isoformat()}")
        if steps.by_worker:
            signal.suspension = Suspension(held, wait, now, record)
            if steps.asked is None:
                steps.asked = signal
        else:
            await self.suspend(Suspension(held, wait, now, record))
        raise signal

    async def suspend(self, suspension: Suspension) -> None:
        """Store the job asleep as ``suspension`` says; ``LeaseLost`` if its claim was lost."""
        held = suspension.held
        if not await self._port.suspend(held, suspension.wait, suspension.now, suspension.step):
            raise _lost(held)

    async def emit(self, name: str, payload: Any, keep: object, tx: Any = None, in_caller_tx: bool = False) -> bool:
        """Emit ``name`` with ``payload``: whether this emit was the first (the one kept); every waiter wakes."""
        name = event_name(name)
        span = event_keep(keep)
        data = self._codec.encode(payload)
        now = self._clock.now()
        if in_caller_tx:
            tx = await self._engine.caller_transaction(tx)
        return await self._port.emit(EventRecord(name, data, now, now + span), tx)

    async def skip(self, job_id: int, name: str, result: Any) -> JobState:
        """Store the step ``name`` of a job nobody holds as finished with ``result`` (an operator's, ADR 077):
        the job's state found; ``JobHeld`` while it runs, ``UnknownJob`` when no job is stored, nothing written."""
        known = valid_id(job_id)
        name = step_name(name)
        data = self._codec.encode(result)
        state = None if not known else await self._port.skip_step(job_id, StepRecord(name, data, self._clock.now()))
        if state is None:
            raise UnknownJob(f"job {job_id} is stored neither live nor dead: no step of it can be skipped")
        if state is JobState.RUNNING:
            raise JobHeld(f"job {job_id} is running: its step {name!r} can be skipped once the run ends")
        return state

    async def purge(self, limit: int) -> int:
        """Delete the steps and waits of at most ``limit`` jobs no longer stored; how many jobs'."""
        return await self._port.purge_steps(limit)

    async def job_steps(self, job_id: int) -> tuple[list[StepRecord], Wait | None]:
        """The job's stored steps and its wait, for ``get_job``."""
        return await self._port.job_steps(job_id)


async def job_steps(kernel: Any, info: JobInfo) -> JobInfo:
    """``info`` with the job's finished steps (a user's, decoded leniently) and what it sleeps for."""
    records, wait = await kernel.stepper().job_steps(info.id)
    steps = tuple(
        StepInfo(record.name, kernel.decode_lenient(record.result), record.at)
        for record in records
        if not record.name.startswith(RESERVED_PREFIX)
    )
    waits = None if wait is None else WaitInfo(wait.until, wait.event)
    return replace(info, steps=steps, waits_for=waits)


def _lost(held: Held) -> LeaseLost:
    return LeaseLost(f"job {held.job_id} is no longer held under its claim (fence {held.fence})")


def _timed_out(event: str) -> EventTimeout:
    return EventTimeout(f"event {event!r} was not emitted before the wait's timeout")
