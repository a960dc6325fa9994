"""Rows to records and records to parameters: the one place the SQLite engine's columns meet the port's fields.

Instants are stored as integer microseconds since the Unix epoch (UTC), durations as integer
microseconds, an attempt log as its entries each behind its length. A claimed row becomes a
``JobRecord`` here, on every claim's hot path, so the conversions are the quickest exact ones.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

from alkstore import engine as port

from ._rates import rate_limit

__all__ = [
    "EPOCH",
    "US",
    "bare",
    "bare_job_row",
    "bind_as_they_are",
    "claimed_of",
    "config_of",
    "delta",
    "instant",
    "job_of",
    "job_row",
    "maybe_at",
    "maybe_us",
    "pack_log",
    "plain_job_row",
    "result_of",
    "schedule_of",
    "span",
    "unpack_log",
    "us",
    "worker_of",
]

#: The epoch instants are stored from, and their unit: ``us`` and ``span``'s, for a caller that inlines them.
EPOCH = _EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US = _US = timedelta(microseconds=1)
_LEN = struct.Struct(">I")
#: A claimed row's (``CLAIMED_COLUMNS``) priority, and its run_at and id: ``claimed_of``'s sort keys.
_PRIORITY, _RUN_AT_ID = itemgetter(2), itemgetter(3, 0)
_STATES = {state.value: state for state in port.JobState}


# -- binds ----------------------------------------------------------------------------------------


#: ``None`` for ``None``, called in C: an empty dict's ``get`` (a function of Python's is a Python call, about
#: 1,000 instructions, for each ``NULL`` bound: four a plain enqueue).
_null = dict[None, None]().get


def bind_as_they_are() -> None:
    """Give ``bytes`` and ``None`` the adapters the ``sqlite3`` module falls back to anyway (the value itself),
    where none is registered: the module binds an int, a float or a str as it is, but looks every other value
    up as an adaptable one, and the miss of that lookup costs more than the value's bind (an exception raised
    and dropped: about 2,000 instructions for each payload and each ``NULL`` bound, five a plain enqueue).
    Adapters are the process's, not a connection's: what is bound is unchanged for every connection, and one
    registered before (the application's) is left as it is."""
    if (bytes, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(bytes, bytes)
    if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(type(None), _null)


# -- values as stored -----------------------------------------------------------------------------


def us(at: datetime) -> int:
    """An instant as stored: microseconds since the epoch."""
    return (at - _EPOCH) // _US


def maybe_us(at: datetime | None) -> int | None:
    return None if at is None else us(at)


def maybe_at(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + _US * value


def instant(value: int) -> datetime:
    return _EPOCH + _US * value  # a timedelta times an int: exact, and the quickest way back (a claim reads many)


def span(value: timedelta | None) -> int | None:
    return None if value is None else value // _US


def delta(value: int | None) -> timedelta | None:
    return None if value is None else _US * value


def pack_log(log: Sequence[bytes]) -> bytes | None:
    """An attempt log as stored: each entry's length, then its bytes."""
    return b"".join(_LEN.pack(len(entry)) + entry for entry in log) if log else None


def unpack_log(blob: bytes | None) -> tuple[bytes, ...]:
    entries: list[bytes] = []
    at = 0
    while blob is not None and at < len(blob):
        (size,) = _LEN.unpack_from(blob, at)
        entries.append(bytes(blob[at + 4 : at + 4 + size]))
        at += 4 + size
    return tuple(entries)


def job_of(row: Sequence[Any]) -> port.JobRecord:
    """A job from the values of ``JOB_COLUMNS``, in that order (and its attempt log, where the read has it).

    On every claim's hot path: the record's fields up to ``claimed_at`` passed by position, the instants
    converted inline (a function call each would cost as much as the conversion), a claim's row unpacked as
    it is (a slice would copy its 29 values)."""
    epoch, one = _EPOCH, _US
    (
        job_id, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts, last_error, schedule,
        boundary, enqueued_at, worker_id, lease_until, died_at, fence, visibility, task, last_traceback, trace,
        unique_key, unique_running, ordering_key, waiting, cancel_requested, claimed_at, rate_key, dependents,
    ) = row if len(row) == 29 else row[:29]  # fmt: skip
    return port.JobRecord(
        job_id,
        queue,
        bytes(payload),
        _STATES[state],
        priority,
        epoch + one * run_at,
        None if expires_at is None else epoch + one * expires_at,
        attempts,
        max_attempts,
        last_error,
        schedule,
        None if boundary is None else epoch + one * boundary,
        epoch + one * enqueued_at,
        worker_id,
        None if lease_until is None else epoch + one * lease_until,
        None if died_at is None else epoch + one * died_at,
        fence,
        None if visibility is None else one * visibility,
        task,
        last_traceback,
        trace,
        unique_key,
        bool(unique_running),
        ordering_key,
        bool(waiting),
        bool(cancel_requested),
        None if claimed_at is None else epoch + one * claimed_at,
        unpack_log(row[29]) if len(row) > 29 else (),
        rate_key,
        dependents=dependents,
    )


def claimed_of(rows: list[Any], request: port.ClaimRequest) -> list[port.JobRecord]:
    """The jobs ``request``'s take claimed, from its rows of ``CLAIMED_COLUMNS``, in the claim's order (priority
    descending, ``run_at``, id: ``RETURNING`` keeps none; core's ``claim_order`` on the stored integers).

    What the claim set is not read back: the queue, the state, the worker, the claim's instant, the lease
    (``now`` plus the job's own visibility, else ``lease``: the take's sum, exact in microseconds), no death
    and not waiting (a take finds only pending jobs not waiting); so each row is 22 values, not 29."""
    if len(rows) > 1:  # by run_at and id, then (stable) by priority descending: two sorts in C, no key call a row
        rows.sort(key=_RUN_AT_ID)
        rows.sort(key=_PRIORITY, reverse=True)
    epoch, one, running, make = _EPOCH, _US, port.JobState.RUNNING, port.job_record
    queue, worker_id, now = request.queue, request.worker_id, request.now
    leased = now + request.lease
    claimed = []
    for (
        job_id, payload, priority, run_at, expires_at, attempts, max_attempts, last_error, schedule, boundary,
        enqueued_at, fence, visibility, task, last_traceback, trace, unique_key, unique_running, ordering_key,
        cancel_requested, rate_key, dependents,
    ) in rows:  # fmt: skip
        claimed.append(
            make(
                job_id,
                queue,
                payload,
                running,
                priority,
                epoch + one * run_at,
                None if expires_at is None else epoch + one * expires_at,
                attempts,
                max_attempts,
                last_error,
                schedule,
                None if boundary is None else epoch + one * boundary,
                epoch + one * enqueued_at,
                worker_id,
                leased if visibility is None else now + one * visibility,
                None,
                fence,
                None if visibility is None else one * visibility,
                task,
                last_traceback,
                trace,
                unique_key,
                bool(unique_running),
                ordering_key,
                False,
                bool(cancel_requested),
                now,
                (),
                rate_key,
                (),
                0,
                port.ParentFailure.CANCEL,
                dependents,
            )
        )
    return claimed


def result_of(row: Sequence[Any]) -> port.ResultRecord:
    return port.ResultRecord(
        id=row[0],
        queue=row[1],
        payload=bytes(row[2]),
        task=row[3],
        attempts=row[4],
        max_attempts=row[5],
        enqueued_at=instant(row[6]),
        started_at=maybe_at(row[7]),
        finished_at=instant(row[8]),
        keep_until=instant(row[9]),
        worker_id=row[10],
        result=bytes(row[11]),
        attempt_log=unpack_log(row[12]),
    )


def schedule_of(row: Sequence[Any]) -> port.ScheduleRecord:
    return port.ScheduleRecord(
        name=row[0],
        spec=row[1],
        interval_s=row[2],
        queue=row[3],
        payload=bytes(row[4]),
        priority=row[5],
        max_attempts=row[6],
        expires=delta(row[7]),
        task=row[8],
        anchor=maybe_at(row[9]),
        next_boundary=instant(row[10]),
        last_boundary=maybe_at(row[11]),
    )


def config_of(row: Sequence[Any] | None) -> port.QueueConfig | None:
    if row is None:
        return None
    return port.QueueConfig(
        visibility_timeout=delta(row[0]),
        max_attempts=row[1],
        backoff_base=delta(row[2]),
        backoff_cap=delta(row[3]),
        priority=row[4],
        concurrency=row[5],
        keep_results=delta(row[6]),
        paused=bool(row[7]),
        rate=rate_limit(row[8], row[9]),
        key_rate=rate_limit(row[10], row[11]),
    )


def worker_of(row: Sequence[Any]) -> port.WorkerRecord:
    return port.WorkerRecord(
        id=row[0],
        host=row[1],
        pid=row[2],
        queues=tuple(json.loads(row[3])),
        concurrency=row[4],
        started_at=instant(row[5]),
        seen_at=instant(row[6]),
        running=row[7],
        processed=row[8],
        failed=row[9],
    )


def job_row(
    job_id: int,
    job: port.NewJob,
    now: int,
    line: int,
    waiting: bool,
    schedule: str | None = None,
    boundary: datetime | None = None,
) -> tuple[Any, ...]:
    """The parameters of ``INSERT_JOB`` for ``job``."""
    return (
        job_id,
        job.queue,
        job.payload,
        job.priority,
        us(job.run_at),
        maybe_us(job.expires_at),
        job.max_attempts,
        schedule,
        maybe_us(boundary),
        now,
        span(job.visibility),
        job.task,
        job.trace,
        job.unique_key,
        int(job.unique_running),
        job.ordering_key,
        int(waiting),
        line,
        job.rate_key,
    )


def plain_job_row(job_id: int, job: port.NewJob, now: int) -> tuple[Any, ...]:
    """The parameters of ``INSERT_PLAIN_JOB`` for ``job`` (no unique or ordering key, not a schedule's)."""
    return (
        job_id,
        job.queue,
        job.payload,
        job.priority,
        (job.run_at - _EPOCH) // _US,  # ``us``, inline: a row of every enqueue
        None if job.expires_at is None else us(job.expires_at),
        job.max_attempts,
        now,
        None if job.visibility is None else job.visibility // _US,
        job.task,
        job.trace,
        int(job.unique_running),
    )


def bare(job: port.NewJob) -> bool:
    """Whether ``job`` (a plain one) goes ``INSERT_BARE_JOB``'s way: no expiry, visibility, task or trace."""
    return job.expires_at is None and job.visibility is None and job.task is None and job.trace is None


def bare_job_row(job_id: int, job: port.NewJob, now: int) -> tuple[Any, ...]:
    """The parameters of ``INSERT_BARE_JOB`` for ``job`` (a plain job, ``bare``)."""
    return (
        job_id,
        job.queue,
        job.payload,
        job.priority,
        (job.run_at - _EPOCH) // _US,
        job.max_attempts,
        now,
        int(job.unique_running),
    )
