"""Kept results (ADR 042): what a job that succeeded leaves behind when its queue keeps results.

One owner for the rules: whether an ack keeps the outcome (the queue's ``keep_results``), how
long, how a failed attempt is written into the job's attempt log and read back, and how a kept
record becomes the public ``JobResult``. Engines store the bytes and instants core hands them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alkstore.errors import InvalidPayload
from alkstore.port._records import Done, Held, ResultRecord

from ._codec import Codec

__all__ = [
    "AttemptFailure",
    "JobResult",
    "ResultPage",
    "attempts_of",
    "decode_attempt",
    "done",
    "encode_attempt",
    "result_of",
]

#: The version of an attempt log entry's encoding (a JSON array led by it): 2 adds the attempt's start
#: (ADR 064); entries of version 1 are still read.
_ATTEMPT_VERSION = 2


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """One failed attempt of a job whose queue keeps results: its error text, the exception's class path
    (``module.QualName``; ``None`` for an error given as text), its traceback, the worker that ran it,
    when it failed and when it started (its claim; ``None`` in entries written before ADR 064)."""

    error: str
    exception: str | None
    traceback: str | None
    worker_id: str | None
    failed_at: datetime | None
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobResult:
    """The kept outcome of a job that succeeded, as ``store.result`` returns it (payload and result decoded).

    ``started_at`` is when its last attempt started (the claim, or the worker's start of the run),
    ``finished_at`` its ack; ``errors`` are its earlier failed attempts, oldest first (those that
    reported their failure: a lapsed lease leaves none); the outcome is kept until ``keep_until``.
    """

    id: int
    queue: str
    task: str | None
    payload: Any
    result: Any
    attempts: int
    max_attempts: int
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime
    keep_until: datetime
    worker_id: str | None
    errors: tuple[AttemptFailure, ...] = ()

    @property
    def worker_ids(self) -> tuple[str, ...]:
        """The workers that ran it, each once, in the order of its attempts (the last one's last)."""
        seen = [failed.worker_id for failed in self.errors] + [self.worker_id]
        return tuple(dict.fromkeys(worker for worker in seen if worker is not None))


@dataclass(frozen=True, slots=True)
class ResultPage:
    """A page of a queue's kept results, newest first; pass ``cursor`` to ``results`` for the next."""

    results: tuple[JobResult, ...]
    cursor: str | None


def done(
    held: Held, codec: Codec, result: Any, keep: timedelta | None, now: datetime, started_at: datetime | None
) -> Held:
    """The ack of ``held``: as it is when its queue keeps no results, else a ``Done`` keeping ``result``
    (encoded by ``codec``: ``InvalidPayload`` before any I/O if it cannot be) for ``keep`` from ``now``."""
    if keep is None:
        return held
    try:
        data = codec.encode(result)
    except InvalidPayload as exc:
        raise InvalidPayload(f"the result of job {held.job_id} cannot be kept: {exc}") from exc
    return Done(held.job_id, held.fence, data, started_at, now, now + keep)


def encode_attempt(
    error: str,
    exception: str | None,
    traceback: str | None,
    worker_id: str | None,
    failed_at: datetime,
    started_at: datetime | None = None,
) -> bytes:
    """One failed attempt as the attempt log stores it (JSON; any text survives, NUL included)."""
    started = None if started_at is None else started_at.isoformat()
    entry = [_ATTEMPT_VERSION, error, exception, traceback, worker_id, failed_at.isoformat(), started]
    return json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def decode_attempt(data: bytes) -> AttemptFailure:
    """An attempt log entry read back (version 1 or 2); one this code did not write reads as its bytes, as
    the error."""
    try:
        version, error, exception, traceback, worker_id, failed_at, *rest = json.loads(bytes(data))
        if (version, len(rest)) not in ((1, 0), (_ATTEMPT_VERSION, 1)):
            raise ValueError(version)
        started = rest[0] if rest else None
        return AttemptFailure(
            error,
            exception,
            traceback,
            worker_id,
            datetime.fromisoformat(failed_at),
            None if started is None else datetime.fromisoformat(started),
        )
    except (ValueError, TypeError):
        return AttemptFailure(repr(bytes(data)), None, None, None, None)


def attempts_of(log: tuple[bytes, ...]) -> tuple[AttemptFailure, ...]:
    """A job's attempt log read back, oldest first."""
    return tuple(decode_attempt(entry) for entry in log) if log else ()


def result_of(record: ResultRecord, decode: Callable[[bytes], Any]) -> JobResult:
    """The public snapshot of a kept outcome, its payload and result decoded with ``decode``."""
    return JobResult(
        id=record.id,
        queue=record.queue,
        task=record.task,
        payload=decode(record.payload),
        result=decode(record.result),
        attempts=record.attempts,
        max_attempts=record.max_attempts,
        enqueued_at=record.enqueued_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        keep_until=record.keep_until,
        worker_id=record.worker_id,
        errors=attempts_of(record.attempt_log),
    )
