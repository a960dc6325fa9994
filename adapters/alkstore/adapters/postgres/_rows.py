"""Rows to records and records to parameters: the one place the engine's columns meet the port's fields.

Rows are read by column name (psycopg's ``kwargs_row`` calls these functions with a keyword
per column), so a statement may list its columns in any order. Instants are read in UTC (every
session runs with ``TimeZone = 'UTC'``); durations are stored as whole microseconds; error
texts and tracebacks as UTF-8 with lone surrogates passed through, so every ``str`` round-trips.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.rows import BaseRowFactory, kwargs_row

from alkstore.engine import DueSchedule, JobRecord, JobState, LockRecord, NewJob, QueueConfig, ScheduleRecord

__all__ = [
    "DUE_SCHEDULE",
    "JOB",
    "JOB_OR_SWEPT",
    "LOCK",
    "NAMED_QUEUE_CONFIG",
    "QUEUE_CONFIG",
    "SCHEDULE",
    "config_params",
    "duration",
    "job_params",
    "jobs_params",
    "micros",
    "text",
    "text_bytes",
    "utc",
]

_MICROSECOND = timedelta(microseconds=1)
#: The engine's storage states, as the port names them ('delayed' is a pending job not yet due).
_STATES = {"pending": JobState.PENDING, "delayed": JobState.PENDING, "running": JobState.RUNNING, "dead": JobState.DEAD}


def utc(value: datetime) -> datetime:
    """``value`` in ``datetime.UTC``; a naive value is read as UTC, as the engine's sessions store it."""
    if value.tzinfo is UTC:
        return value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def micros(value: timedelta | None) -> int | None:
    """A duration as the whole microseconds it is stored as."""
    return None if value is None else value // _MICROSECOND


def duration(value: int | None) -> timedelta | None:
    """Stored microseconds as a duration."""
    return None if value is None else timedelta(microseconds=value)


def text_bytes(value: str | None) -> bytes | None:
    """Text as stored: UTF-8 with lone surrogates passed through, so every ``str`` round-trips."""
    return None if value is None else value.encode("utf-8", "surrogatepass")


def text(data: bytes | None) -> str | None:
    """Stored text back as a ``str``."""
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


def _job(
    *,
    id: int,  # noqa: A002 - the column's name
    queue: str,
    payload: bytes,
    state: str,
    priority: int,
    run_at: datetime,
    expires_at: datetime | None,
    attempts: int,
    max_attempts: int,
    last_error: bytes | None,
    last_traceback: bytes | None,
    schedule: str | None,
    boundary: datetime | None,
    enqueued_at: datetime,
    worker_id: str | None,
    lease_until: datetime | None,
    lease: int,
    visibility_us: int | None,
    task: str | None,
    trace: str | None,
    died_at: datetime | None = None,
) -> JobRecord:
    return JobRecord(
        id=int(id),
        queue=queue,
        payload=bytes(payload),
        state=_STATES[state],
        priority=priority,
        run_at=utc(run_at),
        expires_at=_utc_or_none(expires_at),
        attempts=attempts,
        max_attempts=max_attempts,
        last_error=text(last_error),
        schedule=schedule,
        boundary=_utc_or_none(boundary),
        enqueued_at=utc(enqueued_at),
        worker_id=worker_id,
        lease_until=_utc_or_none(lease_until),
        died_at=_utc_or_none(died_at),
        fence=int(lease),
        visibility=duration(visibility_us),
        task=task,
        last_traceback=text(last_traceback),
        trace=trace,
    )


def _schedule(
    *,
    name: str,
    spec: str,
    interval_s: int,
    queue: str,
    payload: bytes,
    priority: int | None,
    max_attempts: int | None,
    expires_us: int | None,
    task: str | None,
    next_boundary: datetime,
    last_boundary: datetime | None,
) -> ScheduleRecord:
    return ScheduleRecord(
        name=name,
        spec=spec,
        interval_s=int(interval_s),
        queue=queue,
        payload=bytes(payload),
        priority=priority,
        max_attempts=max_attempts,
        expires=duration(expires_us),
        task=task,
        next_boundary=utc(next_boundary),
        last_boundary=_utc_or_none(last_boundary),
    )


def _due(
    *,
    name: str,
    interval_s: int,
    queue: str,
    priority: int | None,
    max_attempts: int | None,
    expires_us: int | None,
    next_boundary: datetime,
    payload_size: int,
) -> DueSchedule:
    return DueSchedule(
        name,
        int(interval_s),
        queue,
        priority,
        max_attempts,
        duration(expires_us),
        utc(next_boundary),
        int(payload_size),
    )


def _lock(*, name: str, owner: str, token: int, expires_at: datetime) -> LockRecord:
    return LockRecord(name=name, owner=owner, token=int(token), expires_at=utc(expires_at))


def _config(
    *,
    visibility_us: int | None,
    max_attempts: int | None,
    backoff_base_us: int | None,
    backoff_cap_us: int | None,
    priority: int | None,
    name: str | None = None,
) -> QueueConfig:
    return QueueConfig(
        visibility_timeout=duration(visibility_us),
        max_attempts=max_attempts,
        backoff_base=duration(backoff_base_us),
        backoff_cap=duration(backoff_cap_us),
        priority=priority,
    )


def _job_or_swept(*, swept: bool, **columns: Any) -> JobRecord | None:
    """A claimed job, or ``None`` for the claim statement's row that says it swept instead."""
    return None if swept else _job(**columns)


def _named_config(*, name: str, **columns: Any) -> tuple[str, QueueConfig]:
    return name, _config(**columns)


JOB: BaseRowFactory[JobRecord] = kwargs_row(_job)
JOB_OR_SWEPT: BaseRowFactory[JobRecord | None] = kwargs_row(_job_or_swept)
NAMED_QUEUE_CONFIG: BaseRowFactory[tuple[str, QueueConfig]] = kwargs_row(_named_config)
SCHEDULE: BaseRowFactory[ScheduleRecord] = kwargs_row(_schedule)
DUE_SCHEDULE: BaseRowFactory[DueSchedule] = kwargs_row(_due)
LOCK: BaseRowFactory[LockRecord] = kwargs_row(_lock)
QUEUE_CONFIG: BaseRowFactory[QueueConfig] = kwargs_row(_config)


def config_params(queue: str, config: QueueConfig) -> dict[str, Any]:
    """A queue's config as the parameters of ``configure_queue``."""
    return {
        "queue": queue,
        "visibility_us": micros(config.visibility_timeout),
        "max_attempts": config.max_attempts,
        "backoff_base_us": micros(config.backoff_base),
        "backoff_cap_us": micros(config.backoff_cap),
        "priority": config.priority,
    }


def job_params(job: NewJob, now: datetime, channel: str) -> dict[str, Any]:
    """One new job as the parameters of ``enqueue_one``."""
    return {
        "channel": channel,
        "queue": job.queue,
        "payload": job.payload,
        "priority": job.priority,
        "run_at": job.run_at,
        "expires_at": job.expires_at,
        "max_attempts": job.max_attempts,
        "visibility_us": micros(job.visibility),
        "task": job.task,
        "trace": job.trace,
        "now": now,
    }


def jobs_params(jobs: Sequence[NewJob], now: datetime, schema: str) -> dict[str, Any]:
    """New jobs as the array parameters of ``enqueue_many``."""
    return {
        "queues": [job.queue for job in jobs],
        "payloads": [job.payload for job in jobs],
        "priorities": [job.priority for job in jobs],
        "run_ats": [job.run_at for job in jobs],
        "expires_ats": [job.expires_at for job in jobs],
        "max_attempts": [job.max_attempts for job in jobs],
        "visibility_us": [micros(job.visibility) for job in jobs],
        "tasks": [job.task for job in jobs],
        "traces": [job.trace for job in jobs],
        "now": now,
        "schema": schema,
    }
