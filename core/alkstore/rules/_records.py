"""The public records: snapshots both runtimes hand out (jobs, schedules, queue stats, pages, leaders).

They depend on the port's records only, so every module of either runtime (and the telemetry
port) can import them without importing a runtime. Each is a frozen value: reading one never
touches storage.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from alkstore.port._records import (
    ActionRecord,
    Existing,
    JobRecord,
    JobState,
    LockRecord,
    NewJob,
    NewSchedule,
    ScheduleRecord,
    TaskFiguresRecord,
    ThroughputRecord,
    WorkerRecord,
    new_job,
)

from ._args import check_opts
from ._codec import Codec
from ._names import outbox_of, validate_name
from ._options import JobStamps, ScheduleOpts
from ._results import AttemptFailure, attempts_of
from ._spec import parse_spec
from ._steps import StepInfo, WaitInfo

__all__ = [
    "ActionInfo",
    "CancelOutcome",
    "JobId",
    "JobInfo",
    "JobPage",
    "Leader",
    "LockInfo",
    "QueueStats",
    "Schedule",
    "ScheduleEntry",
    "TaskFiguresInfo",
    "ThroughputInfo",
    "WorkerInfo",
    "info_of",
    "job_ids",
    "new_jobs",
    "new_schedule",
    "schedule_of",
    "values_of",
]


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of a stored job, as ``get_job`` returns it (payload decoded).

    ``task`` names the task the job is for (``None`` for a plain job); ``last_traceback`` is the
    traceback of the failure that left ``last_error``, when that was an exception. ``unique_key``
    is set while the job holds its key (ADR 031); a pending job is ``waiting`` while an earlier
    job of its ``ordering_key`` is unfinished (ADR 032); a running job has ``cancel_requested``
    once a cancel asked its worker to stop it (ADR 035). ``trace`` is the W3C ``traceparent`` of the
    enqueue that wrote it, when telemetry stored one (ADR 024). ``claimed_at`` is when its latest claim
    was: a running job's attempt started then (``None`` before its first claim and once dead; ADR
    064). ``errors`` are its failed attempts,
    oldest first, when its queue keeps results (ADR 064): ``get_job`` reads them, a dead job keeps
    them (the last one's too); a claimed job's are not read (empty). ``parents``, ``waiting_on`` and
    ``children`` are its dependencies (ADR 073).
    """

    id: int
    queue: str
    payload: Any
    state: JobState
    priority: int
    run_at: datetime
    expires_at: datetime | None
    attempts: int
    max_attempts: int
    last_error: str | None
    schedule: str | None
    boundary: datetime | None
    enqueued_at: datetime
    worker_id: str | None
    lease_until: datetime | None
    died_at: datetime | None
    task: str | None = None
    last_traceback: str | None = None
    unique_key: str | None = None
    ordering_key: str | None = None
    waiting: bool = False
    cancel_requested: bool = False
    trace: str | None = None
    claimed_at: datetime | None = None
    #: The key whose rate limit its starts count against (ADR 070).
    rate_key: str | None = None
    errors: tuple[AttemptFailure, ...] = ()
    #: Its finished steps, oldest first, and what it sleeps for, as ``get_job`` reads them (ADR 069).
    steps: tuple[StepInfo, ...] = ()
    waits_for: WaitInfo | None = None
    #: Its parents (``after``), those of them that have not finished yet, and the jobs waiting on it
    #: (ADR 073): read by ``get_job`` (empty on a claimed job and in listings).
    parents: tuple[int, ...] = ()
    waiting_on: tuple[int, ...] = ()
    children: tuple[int, ...] = ()

    @property
    def sleeping(self) -> bool:
        """Whether the job is in the sleeping state: pending until ``waits_for.until`` or its event (ADR 069)."""
        return self.waits_for is not None and self.state is JobState.PENDING


#: The fields ``values_of`` works out rather than copies: the decoded payload and errors, the steps and
#: sleep ``get_job`` adds (ADR 069), and the dependencies read from the links (ADR 073).
_DERIVED = frozenset({"payload", "errors", "steps", "waits_for", "parents", "waiting_on", "children"})
#: ``JobInfo``'s fields in their order. Every one not derived is copied from the ``JobRecord`` attribute of its
#: name, by two getters (the fields before the payload, and those from it to the errors), so a new field
#: cannot land in another's slot; the derived ones are where ``_check_layout`` finds them.
_NAMES = tuple(f.name for f in fields(JobInfo))
_BEFORE_PAYLOAD = attrgetter(*_NAMES[: _NAMES.index("payload")])
_TO_ERRORS = attrgetter(*_NAMES[_NAMES.index("payload") + 1 : _NAMES.index("errors")])


def _check_layout() -> None:
    """Refuse (at import) a ``JobInfo`` whose derived fields are not where ``values_of`` puts them."""
    tail = ("errors", "steps", "waits_for", "parents", "waiting_on", "children")
    between = _NAMES[_NAMES.index("payload") + 1 : _NAMES.index("errors")]
    if _NAMES[-len(tail) :] != tail or _DERIVED.intersection(between) or len(_NAMES) != len(set(_NAMES)):
        raise TypeError(f"JobInfo's fields moved: values_of must follow them ({_NAMES})")


_check_layout()


def values_of(record: JobRecord, payload: Any) -> tuple[Any, ...]:
    """A ``JobInfo``'s field values in its field order, from ``record`` and the decoded ``payload``: the
    arguments a claimed job is made from, per job on the claim's hot path (no keyword per field)."""
    if record.parent_links or record.children:  # read by get_job only (not by a claim, a listing)
        waiting_on = tuple(link.id for link in record.parent_links if link.state == "waiting")
        dependencies: tuple[Any, ...] = (record.parents, waiting_on, record.children)
    else:
        dependencies = ((), (), ())
    # the steps and what it sleeps for stay at their defaults here: get_job adds them (ADR 069)
    errors = attempts_of(record.attempt_log)
    return (*_BEFORE_PAYLOAD(record), payload, *_TO_ERRORS(record), errors, (), None, *dependencies)


def info_of(record: JobRecord, payload: Any) -> JobInfo:
    """The public snapshot of ``record``, its payload decoded as ``payload``."""
    return JobInfo(*values_of(record, payload))


def new_jobs(
    queue: str,
    data: list[bytes],
    stamps: JobStamps,
    task: str | None,
    trace: str | None,
    keyed: Sequence[tuple[str | None, bool, str | None, str | None]] | None = None,
) -> list[NewJob]:
    """The jobs of one enqueue: one per encoded payload, all stamped alike, each carrying ``trace``.

    ``keyed`` gives each job's (unique key, unique_running, ordering key, rate key) where the stamps give none.
    """
    if keyed is None:  # the common batch: every field but the payload read once
        priority, run_at, expires_at, max_attempts = (
            stamps.priority,
            stamps.run_at,
            stamps.expires_at,
            stamps.max_attempts,
        )
        visibility, unique, running, ordering, rated = (
            stamps.visibility,
            stamps.unique_key,
            stamps.unique_running,
            stamps.ordering_key,
            stamps.rate_key,
        )
        after, policy = stamps.after, stamps.on_parent_failure
        return [
            new_job(
                queue,
                payload,
                priority,
                run_at,
                expires_at,
                max_attempts,
                visibility,
                task,
                trace,
                unique,
                running,
                ordering,
                rated,
                after,
                (),
                policy,
            )
            for payload in data
        ]
    return [
        _new_job(
            queue,
            payload,
            stamps,
            task,
            trace,
            stamps.unique_key or unique,
            stamps.unique_running if stamps.unique_key else running,
            stamps.ordering_key or ordering,
            stamps.rate_key or rated,
        )
        for payload, (unique, running, ordering, rated) in zip(data, keyed, strict=True)
    ]


def _new_job(
    queue: str,
    payload: bytes,
    stamps: JobStamps,
    task: str | None,
    trace: str | None,
    unique_key: str | None = None,
    unique_running: bool = False,
    ordering_key: str | None = None,
    rate_key: str | None = None,
) -> NewJob:
    return new_job(
        queue,
        payload,
        stamps.priority,
        stamps.run_at,
        stamps.expires_at,
        stamps.max_attempts,
        stamps.visibility,
        task,
        trace,
        unique_key or stamps.unique_key,
        unique_running or stamps.unique_running,
        ordering_key or stamps.ordering_key,
        rate_key or stamps.rate_key,
        stamps.after,
        (),
        stamps.on_parent_failure,
    )


class JobId(int):
    """A job's id as an enqueue returns it: an ``int`` that also says whether this call made the job
    (``created``) or found one already holding its unique key (ADR 031)."""

    __slots__ = ()

    @property
    def created(self) -> bool:
        """Whether this enqueue created the job (``False``: it found the one holding its ``unique_key``)."""
        return True

    def __repr__(self) -> str:
        return int.__repr__(self)


class _Found(JobId):
    """A ``JobId`` of a job the enqueue found holding its key."""

    __slots__ = ()

    @property
    def created(self) -> bool:
        return False


def job_ids(ids: Sequence[int]) -> list[JobId]:
    """The ids an engine returned (``Existing`` for a job found by its unique key) as ``JobId``s."""
    return [_Found(job_id) if isinstance(job_id, Existing) else JobId(job_id) for job_id in ids]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A registered schedule, as stored: ``next_boundary`` is the next instant it fires; ``task`` the task
    its jobs run (a periodic task's schedule, ``Tasks.periodic``), ``None`` for plain jobs."""

    name: str
    spec: str
    interval: timedelta
    queue: str
    payload: Any
    opts: ScheduleOpts
    next_boundary: datetime
    last_boundary: datetime | None = None  # the last boundary fired (None before the first)
    task: str | None = None


def schedule_of(record: ScheduleRecord, payload: Any) -> Schedule:
    """The public snapshot of a stored schedule, its payload decoded as ``payload``."""
    return Schedule(
        name=record.name,
        spec=record.spec,
        interval=timedelta(seconds=record.interval_s),
        queue=record.queue,
        payload=payload,
        opts=ScheduleOpts(
            priority=record.priority, max_attempts=record.max_attempts, expires=record.expires, anchor=record.anchor
        ),
        next_boundary=record.next_boundary,
        last_boundary=record.last_boundary,
        task=record.task,
    )


def new_schedule(
    codec: Codec, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None, task: str | None = None
) -> NewSchedule:
    """A schedule to register, every argument checked (before any I/O); its fires for ``task``, if given."""
    validate_name(name, "schedule")
    every = parse_spec(spec)
    validate_name(queue, "queue")
    opts = check_opts(opts, ScheduleOpts)
    data = codec.encode(payload)
    expires = opts.expires if isinstance(opts.expires, timedelta) else None
    return NewSchedule(
        name, str(every), every.seconds, queue, data, opts.priority, opts.max_attempts, expires, task, opts.anchor
    )


@dataclass(frozen=True, slots=True)
class ScheduleEntry:
    """One schedule of a bulk registration (``schedule_many``): ``schedule``'s arguments."""

    name: str
    spec: str
    queue: str
    payload: Any = None
    opts: ScheduleOpts | None = None


# -- inspection (ADR 020) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue at one instant: its jobs by phase, and ``lag``, how long its oldest ready job has waited.

    A pending job is ``ready`` once its ``run_at`` has come, ``delayed`` before, ``waiting``
    while an earlier job of its ordering key is unfinished; ``lag`` is zero when nothing is
    ready. Counts stop at ``cap`` (a count equal to it means at least that many; ``None``: every
    count is exact); ``lag`` is exact either way. A ``paused`` queue's jobs are not claimed.
    """

    queue: str
    ready: int
    delayed: int
    running: int
    dead: int
    lag: timedelta
    cap: int | None
    waiting: int = 0
    paused: bool = False

    @property
    def outbox(self) -> str | None:
        """The outbox this queue backs (``Outbox.queue``), or ``None`` for a queue of jobs (ADR 057)."""
        return outbox_of(self.queue)


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of a job listing; pass ``cursor`` to ``jobs`` for the next (``None``: this was the last)."""

    jobs: tuple[JobInfo, ...]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class Leader:
    """The scheduler's current leader: the owner token of the runner holding the lease, and its end."""

    owner: str
    lease_until: datetime


#: A logged operator's action (see ``actions``): the port's record, handed out as it is.
ActionInfo = ActionRecord
#: A held lock (see ``locks``): its name, owner, fencing token and lease end; the port's record,
#: handed out as it is.
LockInfo = LockRecord
#: A worker process as it last reported itself (see ``workers``): the port's record, which holds
#: only plain values, handed out as it is.
WorkerInfo = WorkerRecord
#: The runs of one queue that ended in one minute, done and failed (see ``throughput``): the port's
#: record, handed out as it is.
ThroughputInfo = ThroughputRecord
#: The runs of one task of one queue that ended in one minute (an hour, past a day), with their summed run
#: time and pickup latency in ms (see ``task_figures``; ADR 075): the port's record, handed out as it is.
TaskFiguresInfo = TaskFiguresRecord


class CancelOutcome(enum.StrEnum):
    """What ``cancel`` did: cancelled the pending job, asked the worker running it to stop it
    (``CANCELLING``: it ends cancelled, ADR 035), or found it dead or missing."""

    CANCELLED = "cancelled"
    CANCELLING = "cancelling"
    DEAD = "dead"
    MISSING = "missing"
