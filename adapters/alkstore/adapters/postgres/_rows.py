"""Rows to records and records to parameters: the one place the engine's columns meet the port's fields.

Rows are read by column name (psycopg's ``kwargs_row`` calls these functions with a keyword
per column; the jobs' rows, the claim's hot path, find each column's position once per result
instead), so a statement may list its columns in any order. Instants are read in UTC (every
session runs with ``TimeZone = 'UTC'``); durations are stored as whole microseconds; error
texts and tracebacks as UTF-8 with lone surrogates passed through, so every ``str`` round-trips.

Over 500 lines: both directions of every table's mapping (rows to records, records to parameters)
stay in this one module, so that a column's reading and its writing change together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any, TypeVar

from psycopg.rows import BaseRowFactory, RowMaker, kwargs_row

from alkstore import engine as port
from alkstore.engine import TickPlan, registration_boundary

from ._positional import IntArray
from ._rates import rate_limit, rate_params

__all__ = [
    "ACTION",
    "CLAIM_ROW",
    "DUE_SCHEDULE",
    "JOB",
    "JOB_OR_SWEPT",
    "JOB_READ",
    "LOCK",
    "LOCK_AND_SOONEST",
    "NAMED_QUEUE_CONFIG",
    "QUEUE_CONFIG",
    "QUEUE_COUNTS",
    "RESULT",
    "SCHEDULE",
    "TABLE_STATS",
    "TASK_FIGURES",
    "THROUGHPUT",
    "WORKER",
    "alike",
    "alike_params",
    "config_params",
    "duration",
    "failure_params",
    "fenced_params",
    "fire_params",
    "job_params",
    "jobs_params",
    "keeping_params",
    "kept_params",
    "listing_params",
    "micros",
    "retry_params",
    "schedule_params",
    "text",
    "text_bytes",
    "utc",
    "worker_params",
]

_MICROSECOND = timedelta(microseconds=1)
_R = TypeVar("_R")
#: What takes a job's values (in ``JOB_READ``'s order) out of a row.
_Pick = Callable[[Sequence[Any]], tuple[Any, ...]]
#: The engine's storage states, as the port names them ('delayed' is a pending job not yet due).
_STATES = {
    "pending": port.JobState.PENDING,
    "delayed": port.JobState.PENDING,
    "waiting": port.JobState.PENDING,
    "running": port.JobState.RUNNING,
    "dead": port.JobState.DEAD,
}


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


#: The columns a job is read from, in the order ``_job`` takes them (each statement's own order may differ).
JOB_READ = (
    "id", "queue", "payload", "state", "priority", "run_at", "expires_at", "attempts", "max_attempts",
    "last_error", "last_traceback", "schedule", "boundary", "enqueued_at", "worker_id", "lease_until",
    "lease", "visibility_us", "task", "trace", "unique_key", "unique_running", "ordering_key",
    "cancel_requested", "claimed_at", "rate_key",
    "dependents",
)  # fmt: skip

#: The dependency fields between ``rate_key`` and ``dependents`` a job row does not read, at their defaults.
_UNREAD_LINKS = tuple(
    f.default for f in dataclasses.fields(port.JobRecord) if f.name in ("parents", "parents_left", "on_parent_failure")
)


def _job(
    c: tuple[Any, ...], died_at: datetime | None = None, attempt_log: Sequence[bytes] | None = None
) -> port.JobRecord:
    """A job from the values of ``JOB_READ``, in that order (and ``died_at``, for a dead one, and its attempt
    log where the statement reads it)."""
    (
        id_, queue, payload, state, priority, run_at, expires_at, attempts, max_attempts,
        last_error, last_traceback, schedule, boundary, enqueued_at, worker_id, lease_until,
        lease, visibility_us, task, trace, unique_key, unique_running, ordering_key,
        cancel_requested, claimed_at, rate_key,
        dependents,
    ) = c  # fmt: skip
    return port.job_record(  # in JobRecord's field order (tests/postgres/test_rows.py pins each column's field)
        int(id_), queue, bytes(payload), _STATES[state], priority, utc(run_at), _utc_or_none(expires_at),
        attempts, max_attempts, text(last_error), schedule, _utc_or_none(boundary), utc(enqueued_at), worker_id,
        _utc_or_none(lease_until), _utc_or_none(died_at), int(lease), duration(visibility_us), task,
        text(last_traceback), trace, unique_key, unique_running, ordering_key, state == "waiting",
        cancel_requested, _utc_or_none(claimed_at),
        tuple(bytes(entry) for entry in attempt_log) if attempt_log else (),
        rate_key, *_UNREAD_LINKS, dependents,
    )  # fmt: skip


def _job_rows(make: Callable[[_Pick, dict[str, int]], RowMaker[_R]]) -> BaseRowFactory[_R]:
    """A row factory for rows holding a job's columns, by name: ``make`` is given what picks ``JOB_READ``'s
    values out of a row and every column's position, and returns the row maker; made once per result shape
    (a statement's columns), not per result or row."""
    makers: dict[tuple[bytes | None, ...], RowMaker[_R]] = {}

    def factory(cursor: Any) -> RowMaker[_R]:
        result = cursor.pgresult
        if result is None or not result.nfields:
            return _no_rows
        shape = tuple(map(result.fname, range(result.nfields)))
        maker = makers.get(shape)
        if maker is None:
            positions = {bytes(name).decode(): at for at, name in enumerate(shape) if name is not None}
            maker = makers[shape] = make(itemgetter(*(positions[name] for name in JOB_READ)), positions)
        return maker

    return factory


def _no_rows(values: Sequence[Any]) -> Any:
    raise AssertionError("a statement without columns returned a row")


def _job_or_died(pick: _Pick, positions: dict[str, int]) -> RowMaker[port.JobRecord]:
    """A live job, or a dead one with its ``died_at`` where the statement reads it (and its attempt log)."""
    died, log = positions.get("died_at"), positions.get("attempt_log")
    if died is None:
        return lambda values: _job(pick(values))
    if log is None:
        return lambda values: _job(pick(values), values[died])
    return lambda values: _job(pick(values), values[died], values[log])


def _job_or_swept(pick: _Pick, positions: dict[str, int]) -> RowMaker[port.JobRecord | None]:
    """A claimed job, or ``None`` for the claim statement's row that says it swept instead."""
    swept = positions["swept"]
    return lambda values: None if values[swept] else _job(pick(values))


def _claim_row(pick: _Pick, positions: dict[str, int]) -> RowMaker[port.JobRecord | int | None]:
    """A row of ``ack_and_claim``: an acked job's id, ``None`` for the sweep marker, or a claimed job."""
    swept, acked = positions["swept"], positions["acked"]

    def row(values: Sequence[Any]) -> port.JobRecord | int | None:
        if values[acked] is not None:
            return int(values[acked])
        return None if values[swept] else _job(pick(values))

    return row


def _schedule(**c: Any) -> port.ScheduleRecord:
    """A schedule from a row of ``SCHEDULE_COLUMNS``, column by column."""
    return port.ScheduleRecord(
        name=c["name"],
        spec=c["spec"],
        interval_s=int(c["interval_s"]),
        queue=c["queue"],
        payload=bytes(c["payload"]),
        priority=c["priority"],
        max_attempts=c["max_attempts"],
        expires=duration(c["expires_us"]),
        task=c["task"],
        next_boundary=utc(c["next_boundary"]),
        last_boundary=_utc_or_none(c["last_boundary"]),
        anchor=_utc_or_none(c["anchor"]),
    )


def _due(**c: Any) -> port.DueSchedule:
    """A due schedule from a row of ``due_schedules``: no payload, its size."""
    return port.DueSchedule(
        name=c["name"],
        interval_s=int(c["interval_s"]),
        queue=c["queue"],
        priority=c["priority"],
        max_attempts=c["max_attempts"],
        expires=duration(c["expires_us"]),
        next_boundary=utc(c["next_boundary"]),
        payload_size=int(c["payload_size"]),
    )


def _lock(**c: Any) -> port.LockRecord:
    """A lock from a row of the lock columns."""
    return port.LockRecord(name=c["name"], owner=c["owner"], token=int(c["token"]), expires_at=utc(c["expires_at"]))


def _lock_and_soonest(*, soonest: datetime | None, **c: Any) -> tuple[port.LockRecord, datetime | None]:
    """A renewed lock and the soonest boundary, from a row of ``renew_lock_peek``."""
    return _lock(**c), None if soonest is None else utc(soonest)


def _config(**c: Any) -> port.QueueConfig:
    """A queue's stored config from a row of the config columns."""
    return port.QueueConfig(
        visibility_timeout=duration(c["visibility_us"]),
        max_attempts=c["max_attempts"],
        backoff_base=duration(c["backoff_base_us"]),
        backoff_cap=duration(c["backoff_cap_us"]),
        priority=c["priority"],
        concurrency=c["concurrency"],
        keep_results=duration(c["keep_results_us"]),
        rate=rate_limit(c["rate_count"], c["rate_per_us"]),
        key_rate=rate_limit(c["key_rate_count"], c["key_rate_per_us"]),
        paused=c["paused"],
    )


def _result(**c: Any) -> port.ResultRecord:
    """A kept outcome from a row of the results columns."""
    return port.ResultRecord(
        id=int(c["id"]),
        queue=c["queue"],
        payload=bytes(c["payload"]),
        task=c["task"],
        attempts=c["attempts"],
        max_attempts=c["max_attempts"],
        enqueued_at=utc(c["enqueued_at"]),
        started_at=_utc_or_none(c["started_at"]),
        finished_at=utc(c["finished_at"]),
        keep_until=utc(c["keep_until"]),
        worker_id=c["worker_id"],
        result=bytes(c["result"]),
        attempt_log=tuple(bytes(entry) for entry in c["attempt_log"] or ()),
    )


def _named_config(*, name: str, **columns: Any) -> tuple[str, port.QueueConfig]:
    return name, _config(**columns)


JOB: BaseRowFactory[port.JobRecord] = _job_rows(_job_or_died)
JOB_OR_SWEPT: BaseRowFactory[port.JobRecord | None] = _job_rows(_job_or_swept)
CLAIM_ROW: BaseRowFactory[port.JobRecord | int | None] = _job_rows(_claim_row)
NAMED_QUEUE_CONFIG: BaseRowFactory[tuple[str, port.QueueConfig]] = kwargs_row(_named_config)
SCHEDULE: BaseRowFactory[port.ScheduleRecord] = kwargs_row(_schedule)
DUE_SCHEDULE: BaseRowFactory[port.DueSchedule] = kwargs_row(_due)
LOCK: BaseRowFactory[port.LockRecord] = kwargs_row(_lock)
RESULT: BaseRowFactory[port.ResultRecord] = kwargs_row(_result)
LOCK_AND_SOONEST: BaseRowFactory[tuple[port.LockRecord, datetime | None]] = kwargs_row(_lock_and_soonest)
QUEUE_CONFIG: BaseRowFactory[port.QueueConfig] = kwargs_row(_config)


def config_params(queue: str, config: port.QueueConfig) -> dict[str, Any]:
    """A queue's config as the parameters of ``configure_queue``."""
    return {
        "queue": queue,
        "visibility_us": micros(config.visibility_timeout),
        "max_attempts": config.max_attempts,
        "backoff_base_us": micros(config.backoff_base),
        "backoff_cap_us": micros(config.backoff_cap),
        "priority": config.priority,
        "concurrency": config.concurrency,
        "keep_results_us": micros(config.keep_results),
        **rate_params("rate", config.rate),
        **rate_params("key_rate", config.key_rate),
    }


def keyed_params(job: port.NewJob, now: datetime, channel: str) -> dict[str, Any]:
    """One new job as the parameters of ``enqueue_keyed``: ``enqueue_one``'s and its keys."""
    return {
        **job_params(job, now, channel),
        "unique_key": job.unique_key,
        "unique_running": job.unique_running,
        "ordering_key": job.ordering_key,
        "rate_key": job.rate_key,
    }


def job_params(job: port.NewJob, now: datetime, channel: str) -> dict[str, Any]:
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


def alike(jobs: Sequence[port.NewJob]) -> bool:
    """Whether ``jobs`` differ in their payloads only (what one ``enqueue_many`` call makes)."""
    first = jobs[0]
    queue, priority, run_at, expires_at = first.queue, first.priority, first.run_at, first.expires_at
    max_attempts, visibility, task, trace = first.max_attempts, first.visibility, first.task, first.trace
    return all(
        job.queue == queue
        and job.priority == priority
        and job.run_at == run_at
        and job.expires_at == expires_at
        and job.max_attempts == max_attempts
        and job.visibility == visibility
        and job.task == task
        and job.trace == trace
        for job in jobs
    )


def alike_params(jobs: Sequence[port.NewJob], now: datetime, channel: str) -> dict[str, Any]:
    """Jobs alike but for their payloads as the parameters of ``enqueue_alike``: the first one's, and every payload."""
    params = job_params(jobs[0], now, channel)
    del params["payload"]
    params["payloads"] = [job.payload for job in jobs]
    return params


def jobs_params(jobs: Sequence[port.NewJob], now: datetime, schema: str) -> dict[str, Any]:
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


def ids(job_ids: Iterable[int]) -> IntArray:
    """Job ids as one ``bigint[]`` (the ids core hands out are an ``int`` subclass: each is sent as its number)."""
    return IntArray(job_ids)


def fenced_params(items: Sequence[port.Held]) -> dict[str, Any]:
    """The job ids and fences of a fenced batch, as the arrays every fenced statement takes."""
    return {"ids": ids(item.job_id for item in items), "fences": IntArray(item.fence for item in items)}


def keeping_params(items: Sequence[port.Held]) -> dict[str, Any]:
    """A batch of acks some of which keep their outcome (``Done``, ADR 042), as ``ack_keeping`` takes it."""
    done = [item if isinstance(item, port.Done) else None for item in items]
    return {
        **fenced_params(items),
        "keeps": [item is not None for item in done],
        "results": [item.result if isinstance(item, (port.Done, port.Handed)) else None for item in items],
        "started_ats": [None if item is None else item.started_at for item in done],
        "finished_ats": [None if item is None else item.finished_at for item in done],
        "keep_untils": [None if item is None else item.keep_until for item in done],
    }


def kept_params(done: port.Done) -> dict[str, Any]:
    """One ack that keeps its job's outcome, as ``ack_keeping_one`` takes it."""
    return {
        "id": int(done.job_id),
        "fence": done.fence,
        "result": done.result,
        "started_at": done.started_at,
        "finished_at": done.finished_at,
        "keep_until": done.keep_until,
    }


def retry_params(retries: Sequence[port.Retry]) -> dict[str, Any]:
    """The run instants, errors, tracebacks and logged attempts of a batch of retries."""
    return {
        **fenced_params(retries),
        "run_ats": [item.run_at for item in retries],
        **failure_params(retries),
        "attempt_entries": [item.attempt for item in retries],
    }


def failure_params(items: Sequence[port.Retry | port.Burial]) -> dict[str, Any]:
    """The errors and tracebacks of failed attempts, as stored."""
    return {
        "errors": [text_bytes(item.error) for item in items],
        "tracebacks": [text_bytes(item.traceback) for item in items],
    }


def schedule_params(
    batch: Sequence[port.NewSchedule], existing: dict[str, tuple[int, datetime, datetime | None]], now: datetime
) -> dict[str, Any]:
    return {
        "names": [schedule.name for schedule in batch],
        "specs": [schedule.spec for schedule in batch],
        "intervals": [schedule.interval_s for schedule in batch],
        "queues": [schedule.queue for schedule in batch],
        "payloads": [schedule.payload for schedule in batch],
        "priorities": [schedule.priority for schedule in batch],
        "max_attempts": [schedule.max_attempts for schedule in batch],
        "expires_us": [micros(schedule.expires) for schedule in batch],
        "tasks": [schedule.task for schedule in batch],
        "boundaries": [
            registration_boundary(existing.get(schedule.name), schedule.interval_s, now, schedule.anchor)
            for schedule in batch
        ],
        "anchors": [schedule.anchor for schedule in batch],
    }


def fire_params(ids: list[int], plan: TickPlan, now: datetime) -> dict[str, Any]:
    fires = plan.fires
    return {
        "ids": ids,
        "schedules": [fire.schedule for fire in fires],
        "boundaries": [fire.boundary for fire in fires],
        "queues": [fire.queue for fire in fires],
        "priorities": [fire.priority for fire in fires],
        "run_ats": [fire.run_at for fire in fires],
        "expires_ats": [fire.expires_at for fire in fires],
        "max_attempts": [fire.max_attempts for fire in fires],
        "now": now,
    }


# -- inspection and actions -----------------------------------------------------------------

#: Where a listing starts without a key: before every job in its order (see ``_sql.list_*``).
#: The priority is one past any int4, so "the rest of the key's priority" is empty.
_FIRST_PRIORITY = 2**31
_FIRST_AT = {
    port.JobPhase.READY: None,
    port.JobPhase.DELAYED: datetime.min.replace(tzinfo=UTC),
    port.JobPhase.WAITING: None,
    port.JobPhase.RUNNING: None,
    port.JobPhase.DEAD: datetime.max.replace(tzinfo=UTC),
}
_FIRST_ID = {
    port.JobPhase.READY: 0,
    port.JobPhase.DELAYED: 0,
    port.JobPhase.WAITING: 0,
    port.JobPhase.RUNNING: 0,
    port.JobPhase.DEAD: 2**63 - 1,
}
#: Where a listing in the order turned round starts (``list_*_reversed``): past the other end.
_FIRST_PRIORITY_REVERSED = -(2**31) - 1
_OTHER_END = {datetime.min.replace(tzinfo=UTC): datetime.max.replace(tzinfo=UTC)}
_OTHER_END.update({last: first for first, last in _OTHER_END.items()})
_FIRST_AT_REVERSED = {phase: None if at is None else _OTHER_END[at] for phase, at in _FIRST_AT.items()}
_FIRST_ID_REVERSED = {phase: 2**63 - 1 - job_id for phase, job_id in _FIRST_ID.items()}


def _queue_counts(**c: Any) -> port.QueueCounts:
    """A queue's counts from a row of ``queue_counts``."""
    return port.QueueCounts(
        queue=c["queue"],
        ready=int(c["ready"]),
        delayed=int(c["delayed"]),
        running=int(c["running"]),
        dead=int(c["dead"]),
        oldest_ready=_utc_or_none(c["oldest_ready"]),
        waiting=int(c["waiting"]),
        paused=bool(c["paused"]),
    )


def _worker(**c: Any) -> port.WorkerRecord:
    """A worker from a row of the workers table."""
    return port.WorkerRecord(
        id=c["id"],
        host=c["host"],
        pid=int(c["pid"]),
        queues=tuple(c["queues"]),
        concurrency=int(c["concurrency"]),
        started_at=utc(c["started_at"]),
        seen_at=utc(c["seen_at"]),
        running=int(c["running"]),
        processed=int(c["processed"]),
        failed=int(c["failed"]),
    )


QUEUE_COUNTS: BaseRowFactory[port.QueueCounts] = kwargs_row(_queue_counts)
WORKER: BaseRowFactory[port.WorkerRecord] = kwargs_row(_worker)
TABLE_STATS: BaseRowFactory[port.TableStats] = kwargs_row(port.TableStats)


def _throughput(minute: datetime, queue: str, done: int, failed: int) -> port.ThroughputRecord:
    return port.ThroughputRecord(queue, utc(minute), int(done), int(failed))


THROUGHPUT: BaseRowFactory[port.ThroughputRecord] = kwargs_row(_throughput)


def _task_figures(**c: Any) -> port.TaskFiguresRecord:
    return port.TaskFiguresRecord(
        c["queue"], c["task"], utc(c["minute"]), int(c["done"]), int(c["failed"]), c["run_ms"], c["latency_ms"]
    )


TASK_FIGURES: BaseRowFactory[port.TaskFiguresRecord] = kwargs_row(_task_figures)


def _action(**c: Any) -> port.ActionRecord:
    texts = (c["role"], c["address"], c["action"], c["target"], c["outcome"])
    return port.ActionRecord(int(c["id"]), utc(c["at"]), *texts)


ACTION: BaseRowFactory[port.ActionRecord] = kwargs_row(_action)


def listing_params(query: port.JobQuery) -> dict[str, Any]:
    """A page of a listing as the parameters of its ``list_*`` statement: the key, or the start."""
    after = query.after
    if after is None and query.reverse:
        phase = query.phase
        priority, at, job_id = _FIRST_PRIORITY_REVERSED, _FIRST_AT_REVERSED[phase], _FIRST_ID_REVERSED[phase]
    elif after is None:
        priority, at, job_id = _FIRST_PRIORITY, _FIRST_AT[query.phase], _FIRST_ID[query.phase]
    else:
        priority, at, job_id = after.priority, after.at, after.id
    return {
        "queue": query.queue,
        "now": query.now,
        "limit": query.limit,
        "priority": priority,
        "at": at,
        "id": job_id,
        "contains": query.contains,
        "task": query.task,
    }


def worker_params(
    worker: port.WorkerRecord,
    throughput: Sequence[port.ThroughputRecord] = (),
    figures: Sequence[port.TaskFiguresRecord] = (),
) -> dict[str, Any]:
    """A worker as the parameters of ``record_worker`` (its fields by name; the queues as an array), and its
    counts and task figures as those of ``record_worker_counting`` (an array per column)."""
    params = {**dataclasses.asdict(worker), "queues": list(worker.queues)}
    if throughput or figures:
        params.update(
            t_minutes=[count.minute for count in throughput],
            t_queues=[count.queue for count in throughput],
            t_done=[count.done for count in throughput],
            t_failed=[count.failed for count in throughput],
            f_minutes=[f.minute for f in figures],
            f_queues=[f.queue for f in figures],
            f_tasks=[f.task for f in figures],
            f_done=[f.done for f in figures],
            f_failed=[f.failed for f in figures],
            f_run_ms=[f.run_ms for f in figures],
            f_latency_ms=[f.latency_ms for f in figures],
        )
    return params
