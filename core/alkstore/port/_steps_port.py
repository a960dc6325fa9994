# GENERATED FILE, DO NOT EDIT: made from core/alkstore/port/_steps_port_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The steps port: checkpoints of a running job, durable sleep and events (ADR 069).

An engine offers it beside the runtime port; a store on an engine without it raises
``NotOffered`` for ``job.step``, ``job.sleep``, ``job.wait_for`` and ``emit`` (``steps_of``).
Every job-bound call is fenced like ``ack``: it takes effect only while the job is ``RUNNING``
under the pair's fence, and a stale pair changes nothing. Rules (step names, bounds, what a
checkpoint holds) stay in core; the engine stores bytes and moves rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any

from ._records import Held, JobState
from ._runtime_port import RuntimePort
from ._step_records import EventRecord, StepRecord, Wait

__all__ = ["StepsPort", "steps_of"]


class StepsPort(ABC):
    """Checkpoints, sleeps and events of jobs: what ``job.step``, ``job.sleep`` and ``emit`` need."""

    @abstractmethod
    def resume(self, held: Held) -> list[StepRecord] | None:
        """The job's stored steps, oldest first, and its wait cleared (it runs again); ``None`` when stale."""

    @abstractmethod
    def save_step(self, held: Held, step: StepRecord, tx: Any = None) -> bool:
        """Store ``step`` for the job, replacing one of its name; ``False`` (nothing written) when stale.

        With ``tx`` (what ``caller_transaction`` returned, or ``transaction()`` yielded) the fence is
        read under a lock on the job held until that transaction ends, and the step commits with it.
        """

    @abstractmethod
    def suspend(self, held: Held, wait: Wait, now: datetime, step: StepRecord | None = None) -> bool:
        """Fenced like ``release``: the job is ``PENDING`` again at ``wait.until`` with ``attempts`` one less,
        worker and lease cleared, ``wait`` stored and ``step`` saved, all in one atomic step.

        With ``wait.event``, an unexpired event of that name already stored makes the job due at ``now``
        instead (an emit racing the wait is never missed: both serialize on the event's name).
        ``False`` (nothing changed) when stale.
        """

    @abstractmethod
    def emit(self, event: EventRecord, tx: Any = None) -> bool:
        """Store ``event`` unless an unexpired one of its name is stored (the first emit wins); whether stored.

        Every job waiting on the name becomes due at ``event.at`` and its wait is cleared, in the same
        step, whoever won; expired events of the name are replaced. With ``tx``, in the caller's
        transaction (waiters woken at its commit).
        """

    @abstractmethod
    def read_event(self, name: str, now: datetime) -> EventRecord | None:
        """The stored event ``name`` unless it expired by ``now``."""

    @abstractmethod
    def purge_steps(self, limit: int) -> int:
        """Delete the steps and waits of at most ``limit`` jobs no longer stored (acked, cancelled, purged);
        how many jobs' rows went. A dead job keeps its steps (a requeued one resumes); an upkeep pass calls it."""

    @abstractmethod
    def skip_step(self, job_id: int, step: StepRecord) -> JobState | None:
        """An operator's: store ``step`` for a job nobody holds (pending, waiting or dead), replacing one of its
        name, and add one to the job's fence (so its next claim is no first one, and its run reads its steps).

        One atomic step that a claim cannot interleave: the job's state as found is returned (``None``: no
        job stored live or dead), and nothing is written when it is ``RUNNING`` or ``None`` (ADR 077).
        """

    @abstractmethod
    def job_steps(self, job_id: int) -> tuple[list[StepRecord], Wait | None]:
        """The job's stored steps (oldest first) and its wait, for ``get_job``; empty for an unknown job."""


def steps_of(engine: RuntimePort) -> StepsPort | None:
    """``engine``'s steps port, or ``None`` when it does not offer one."""
    return engine if isinstance(engine, StepsPort) else None
