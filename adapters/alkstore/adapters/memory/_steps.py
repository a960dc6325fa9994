"""The memory engine's steps, sleeps and events (ADR 069): the steps port as transitions under the one lock."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from alkstore import engine as port

from ._state import MemoryTransaction, TableState

__all__ = ["StepTables"]


class StepTables(TableState):
    """Each job's checkpoints and wait, the stored events and who waits on each: one atomic transition a call."""

    def __init__(self) -> None:
        super().__init__()
        self._steps: dict[int, dict[str, port.StepRecord]] = {}
        self._waits: dict[int, port.Wait] = {}
        self._events: dict[str, port.EventRecord] = {}
        self._waiters: dict[str, set[int]] = {}

    def _delete(self, job: port.JobRecord) -> None:
        """A job gone (acked or cancelled) takes its steps and wait with it."""
        super()._delete(job)
        self._steps.pop(job.id, None)
        self._unwait(job.id)

    def _unwait(self, job_id: int) -> None:
        wait = self._waits.pop(job_id, None)
        if wait is not None and wait.event is not None:
            self._waiters.get(wait.event, set()).discard(job_id)

    def _checked(self, tx: Any) -> MemoryTransaction | None:
        if tx is None:
            return None
        checked: MemoryTransaction = self.caller_transaction(tx)  # type: ignore[attr-defined]
        return checked

    def resume(self, held: port.Held) -> list[port.StepRecord] | None:
        with self._cond:
            if self._held(held.job_id, held.fence) is None:
                return None
            self._unwait(held.job_id)
            return self._ordered(held.job_id)

    def save_step(self, held: port.Held, step: port.StepRecord, tx: Any = None) -> bool:
        self._checked(tx)  # the checkpoint is written at once: a memory transaction holds only enqueues
        with self._cond:
            if self._held(held.job_id, held.fence) is None:
                return False
            self._steps.setdefault(held.job_id, {})[step.name] = step
            return True

    def suspend(self, held: port.Held, wait: port.Wait, now: datetime, step: port.StepRecord | None = None) -> bool:
        with self._cond:
            job = self._held(held.job_id, held.fence)
            if job is None:
                return False
            if step is not None:
                self._steps.setdefault(job.id, {})[step.name] = step
            run_at = wait.until
            if wait.event is not None:
                if self._live_event(wait.event, now) is not None:
                    run_at = now
                else:
                    self._waiters.setdefault(wait.event, set()).add(job.id)
            self._waits[job.id] = wait
            if job.cancel_requested:
                self._delete(job)
                return True
            self._make_pending(job, attempts=max(0, job.attempts - 1), run_at=run_at)
            self._signal(job.queue)
            return True

    def _live_event(self, name: str, now: datetime) -> port.EventRecord | None:
        event = self._events.get(name)
        return None if event is None or event.expires_at <= now else event

    def emit(self, event: port.EventRecord, tx: Any = None) -> bool:
        checked = self._checked(tx)
        if checked is not None:
            with self._cond:
                first = self._live_event(event.name, event.at) is None and event.name not in checked._events
                checked._events.setdefault(event.name, event)
            return first
        with self._cond:
            return self._emit(event)

    def _emit(self, event: port.EventRecord) -> bool:
        """Store ``event`` if it is the first of its name, and wake its waiters (under the lock)."""
        first = self._live_event(event.name, event.at) is None
        if first:
            self._events[event.name] = event
        for job_id in sorted(self._waiters.pop(event.name, set())):
            job = self._jobs.get(job_id)
            wait = self._waits.get(job_id)
            if job is None or wait is None or wait.event != event.name or job.state is not port.JobState.PENDING:
                continue
            del self._waits[job_id]
            self._make_pending(job, run_at=min(job.run_at, event.at))
            self._signal(job.queue)
        return first

    def read_event(self, name: str, now: datetime) -> port.EventRecord | None:
        with self._cond:
            return self._live_event(name, now)

    def purge_steps(self, limit: int) -> int:
        with self._cond:
            stored = self._jobs.keys() | self._dead.keys()
            gone = sorted(job_id for job_id in {*self._steps, *self._waits} if job_id not in stored)[:limit]
            for job_id in gone:
                self._steps.pop(job_id, None)
                self._unwait(job_id)
            return len(gone)

    def skip_step(self, job_id: int, step: port.StepRecord) -> port.JobState | None:
        with self._cond:
            job = self._jobs.get(job_id)
            dead = self._dead.get(job_id) if job is None else None
            if job is not None and job.state is port.JobState.RUNNING:
                return job.state
            if job is not None:  # a new fence: the next claim is no first one, and its run reads its steps
                self._make_pending(job, fence=job.fence + 1)
            elif dead is not None:
                self._dead[job_id] = replace(dead, fence=dead.fence + 1)
            else:
                return None
            self._steps.setdefault(job_id, {})[step.name] = step
            return port.JobState.PENDING if dead is None else port.JobState.DEAD

    def job_steps(self, job_id: int) -> tuple[list[port.StepRecord], port.Wait | None]:
        with self._cond:
            return self._ordered(job_id), self._waits.get(job_id)

    def _ordered(self, job_id: int) -> list[port.StepRecord]:
        """The job's steps oldest first (by instant, then name, as every engine orders them)."""
        return sorted(self._steps.get(job_id, {}).values(), key=lambda step: (step.at, step.name))
