"""Inspection and actions for operators (ADR 020): the public records, and the rules behind them.

This module owns what ``Store``'s inspection methods share: the lag formula, each listing's
sort key, and the opaque cursor that carries a key from one page to the next. The records are
snapshots; reading them never writes anything, so the per-job paths pay nothing for them.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from .engine import JobKey, JobPhase, JobRecord, QueueCounts, WorkerRecord
from .errors import InvalidArgument, InvalidOptions

if TYPE_CHECKING:
    from ._store import JobInfo

__all__ = [
    "BATCH",
    "DEFAULT_PAGE",
    "MAX_CAP",
    "MAX_PAGE",
    "STATS_CAP",
    "CancelOutcome",
    "JobPage",
    "Leader",
    "QueueStats",
    "WorkerInfo",
    "as_phase",
    "check_cap",
    "check_page_size",
    "key_of",
    "lag",
    "read_cursor",
    "stats_of",
    "write_cursor",
]

#: Jobs on one page of a listing by default, and at most.
DEFAULT_PAGE = 50
MAX_PAGE = 1000
#: Jobs one bulk action (requeue a queue's dead, purge) changes per engine call.
BATCH = 1000
#: Where ``Store.queue_stats`` stops counting by default: enough to tell a backlog from a blip,
#: cheap on any table (ADR 020); and the largest cap accepted.
STATS_CAP = 10_000
MAX_CAP = 2**62
#: The cursor format's version: a cursor of another version is refused, never misread.
_CURSOR_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MAX_ID = 2**63 - 1
_INT32 = 2**31


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue at one instant: its jobs by phase, and ``lag``, how long its oldest ready job has waited.

    A pending job is ``ready`` once its ``run_at`` has come, ``delayed`` before; ``lag`` is
    zero when nothing is ready. Counts stop at ``cap`` (a count equal to it means at least
    that many; ``None``: every count is exact); ``lag`` is exact either way.
    """

    queue: str
    ready: int
    delayed: int
    running: int
    dead: int
    lag: timedelta
    cap: int | None


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of a job listing; pass ``cursor`` to ``Store.jobs`` for the next (``None``: this was the last)."""

    jobs: tuple[JobInfo, ...]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class Leader:
    """The scheduler's current leader: the owner token of the runner holding the lease, and its end."""

    owner: str
    lease_until: datetime


#: A worker process as it last reported itself (see ``Store.workers``): the port's record, which
#: holds only plain values, handed out as it is.
WorkerInfo = WorkerRecord


class CancelOutcome(enum.StrEnum):
    """What ``Store.cancel`` did: cancelled the pending job, or found it running, dead or missing."""

    CANCELLED = "cancelled"
    RUNNING = "running"
    DEAD = "dead"
    MISSING = "missing"


def lag(oldest_ready: datetime | None, now: datetime) -> timedelta:
    """How long the oldest ready job has waited at ``now`` (zero when none is ready, or it is not late)."""
    if oldest_ready is None or oldest_ready >= now:
        return timedelta(0)
    return now - oldest_ready


def stats_of(counts: QueueCounts, now: datetime, cap: int | None) -> QueueStats:
    """The public snapshot of one queue's counts at ``now``, taken up to ``cap``."""
    return QueueStats(
        counts.queue, counts.ready, counts.delayed, counts.running, counts.dead, lag(counts.oldest_ready, now), cap
    )


def check_cap(cap: object) -> int | None:
    """A count cap: ``None`` (exact counts) or an int from 1 to ``MAX_CAP``."""
    if cap is None:
        return None
    if not isinstance(cap, int) or isinstance(cap, bool):
        raise InvalidArgument(f"cap must be an int or None, not {type(cap).__name__}")
    if not 1 <= cap <= MAX_CAP:
        raise InvalidOptions(f"cap must be between 1 and {MAX_CAP} (or None: exact counts), not {cap}")
    return cap


def as_phase(value: object) -> JobPhase:
    """``value`` (a ``JobPhase`` or its name: ready, delayed, running, dead) as a ``JobPhase``."""
    if isinstance(value, JobPhase):
        return value
    if not isinstance(value, str):
        raise InvalidArgument(f"phase must be an alkstore.JobPhase or a str, not {type(value).__name__}")
    try:
        return JobPhase(value)
    except ValueError:
        known = ", ".join(phase.value for phase in JobPhase)
        raise InvalidOptions(f"phase must be one of {known}, not {value!r}") from None


def check_page_size(limit: object) -> int:
    """A page size: an int from 1 to ``MAX_PAGE``."""
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidArgument(f"limit must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidOptions(f"limit must be between 1 and {MAX_PAGE}, not {limit}")
    return limit


def key_of(record: JobRecord, phase: JobPhase) -> JobKey:
    """The sort key of ``record`` in a listing of ``phase`` (see ``Engine.list_jobs``)."""
    if phase is JobPhase.READY:
        return JobKey(record.id, record.priority, record.run_at)
    if phase is JobPhase.DELAYED:
        return JobKey(record.id, at=record.run_at)
    if phase is JobPhase.DEAD:
        return JobKey(record.id, at=record.died_at)
    return JobKey(record.id)


def write_cursor(queue: str, phase: JobPhase, key: JobKey) -> str:
    """An opaque cursor resuming the listing of ``phase`` jobs of ``queue`` after ``key``."""
    at = None if key.at is None else (key.at - _EPOCH) // _MICROSECOND
    text = json.dumps([_CURSOR_VERSION, queue, phase.value, key.id, key.priority, at], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def read_cursor(cursor: object, queue: str, phase: JobPhase) -> JobKey | None:
    """The key a cursor of this listing (``queue``, ``phase``) resumes after; ``None`` for no cursor.

    A cursor that is not one ``write_cursor`` made for this very listing is ``InvalidOptions``.
    """
    if cursor is None:
        return None
    if not isinstance(cursor, str):
        raise InvalidArgument(f"cursor must be a str, not {type(cursor).__name__}")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, of_queue, of_phase, job_id, priority, at = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise InvalidOptions(f"not a job listing cursor: {cursor!r}") from None
    if version != _CURSOR_VERSION or of_queue != queue or of_phase != phase.value:
        raise InvalidOptions(f"the cursor is not one of the listing of {phase.value} jobs of queue {queue!r}")
    timed = phase is not JobPhase.RUNNING  # every order but the running jobs' has an instant in its key
    if not (
        _int_in(job_id, 0, _MAX_ID)
        and _int_in(priority, -_INT32, _INT32 - 1)
        and (_int_in(at) if timed else at is None)
    ):
        raise InvalidOptions(f"not a job listing cursor: {cursor!r}")
    try:
        instant = None if at is None else _EPOCH + at * _MICROSECOND
    except OverflowError:
        raise InvalidOptions(f"not a job listing cursor: {cursor!r}") from None
    return JobKey(job_id, priority, instant)


def _int_in(value: object, low: int | None = None, high: int | None = None) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return (low is None or value >= low) and (high is None or value <= high)
