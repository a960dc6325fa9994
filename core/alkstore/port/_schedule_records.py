"""The runtime port's records of schedules and their ticks (ADR 014): registrations, the stored
schedules, what a tick plans and fires. Part of ``_records``, which names them too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["DueSchedule", "Fire", "NewSchedule", "PlannedFire", "ScheduleRecord", "TickBudget", "TickResult"]


@dataclass(frozen=True, slots=True)
class NewSchedule:
    """A schedule to register: spec and interval already parsed, payload encoded, stamps normalised."""

    name: str
    spec: str
    interval_s: int
    queue: str
    payload: bytes
    priority: int | None = None
    max_attempts: int | None = None
    expires: timedelta | None = None
    task: str | None = None
    anchor: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScheduleRecord(NewSchedule):
    """A stored schedule: what was registered, its next boundary, and the last boundary it fired
    (``None`` before its first)."""

    next_boundary: datetime = field(kw_only=True)
    last_boundary: datetime | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class DueSchedule:
    """What a tick reads of a due schedule: everything but its payload, whose size it plans with."""

    name: str
    interval_s: int
    queue: str
    priority: int | None
    max_attempts: int | None
    expires: timedelta | None
    next_boundary: datetime
    payload_size: int


@dataclass(frozen=True, slots=True)
class PlannedFire:
    """One boundary a tick fires: a job on the schedule's queue, with the schedule's payload and task.

    The engine copies the payload and task from the stored schedule (they never pass through
    the tick's client); core has resolved the stamps.
    """

    schedule: str
    boundary: datetime
    queue: str
    priority: int
    run_at: datetime
    expires_at: datetime | None
    max_attempts: int


@dataclass(frozen=True, slots=True)
class TickBudget:
    """The most one tick transaction may write: ``rows`` fires and ``bytes`` of their payloads."""

    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Fire:
    """One boundary fired by a tick: the job it enqueued."""

    schedule: str
    boundary: datetime
    queue: str
    job_id: int


@dataclass(frozen=True, slots=True)
class TickResult:
    """One tick transaction's outcome.

    ``fires`` are ordered by ``(boundary, schedule)``; ``skipped`` counts, per schedule, the
    boundaries skipped forward past the catch-up cap; ``soonest`` is the earliest next
    boundary after the transaction; ``more`` says the budget cut the tick short, so another
    transaction of the same tick has more to fire.
    """

    fires: tuple[Fire, ...]
    skipped: tuple[tuple[str, int], ...]
    soonest: datetime | None
    more: bool = False


# -- the operations port's records (inspection and actions, workers, upkeep, kept results) ------
