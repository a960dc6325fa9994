"""The job lifecycle's decisions, as pure functions: given the record and now, what to do.

Every runtime that claims and finishes jobs — the facades (``Queue.claim``, ``Job.retry``,
``Outbox.run_once``) and the worker, sync and async alike — asks these and carries out the
answer through the engine port; none states a rule of its own.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from alkstore.errors import InvalidArgument, InvalidOptions, InvalidPayload
from alkstore.port._records import Burial, JobRecord, Retry

from ._codec import Codec
from ._options import QueueDefaults, as_duration, retry_delay
from ._results import encode_attempt

#: The longest traceback kept on a job, in characters; a longer one keeps its end (where the error is).
MAX_TRACEBACK = 16_384

__all__ = [
    "MAX_TRACEBACK",
    "Backoff",
    "Decoded",
    "Failure",
    "HandBack",
    "Undecodable",
    "check_poll_interval",
    "check_wait",
    "claim_wait",
    "decode_claimed",
    "failure",
    "last_attempt",
    "lease_until",
    "on_failure",
]


# -- decode-or-bury ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decoded:
    """The claimed payload decoded: run the job."""

    payload: Any


@dataclass(frozen=True, slots=True)
class Undecodable:
    """The stored payload is not the codec's: bury the job with ``error`` (retrying cannot help)."""

    error: str


@dataclass(frozen=True, slots=True)
class HandBack:
    """Decoding failed for a reason that is not the payload's (the claimer's stack, memory, a codec bug).

    Release the job unfinished, without spending its attempt, and report ``cause``.
    """

    cause: BaseException


def decode_claimed(record: JobRecord, codec: Codec) -> Decoded | Undecodable | HandBack:
    """Decode a claimed job's payload, and say what to do if that fails.

    ``InvalidPayload`` from the codec means the bytes are not a valid encoding: bury. Any other
    exception says nothing against the payload: hand the job back.
    """
    try:
        return Decoded(codec.decode(record.payload))
    except InvalidPayload as exc:
        return Undecodable(f"undecodable payload: {exc}")
    except Exception as exc:
        return HandBack(exc)


# -- retry-or-bury ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failed attempt leaves on the job: the error text and, for an exception, its traceback."""

    error: str
    traceback: str | None = None
    #: The exception's class path (``module.QualName``); ``None`` for an error given as text.
    exception: str | None = None


def failure(error: object) -> Failure:
    """The ``Failure`` for ``error``: a ``str`` as given, an exception as its text and traceback.

    An exception's text is ``str(exc)``, or its type's name when that is empty or raises; a
    ``BaseException`` that is no ``Exception`` (``SystemExit(1)``: ``"1"``) leads with its type's name
    (``"SystemExit: 1"``, ADR 054). The traceback (when it has one) ends with a line naming its type
    and message.
    """
    if isinstance(error, BaseException):
        try:
            text = str(error)
        except Exception:
            text = ""
        name = type(error).__name__
        if not isinstance(error, Exception) and text and text != name:
            text = f"{name}: {text}"
        text = text or name
        kind = f"{type(error).__module__}.{type(error).__qualname__}"
        if error.__traceback__ is None:
            return Failure(text, None, kind)
        try:
            formatted = "".join(traceback.format_exception(error))
        except Exception:
            return Failure(text, None, kind)
        if len(formatted) > MAX_TRACEBACK:
            cut = len(formatted) - MAX_TRACEBACK
            formatted = f"[{cut} characters of the traceback left out]\n" + formatted[cut:]
        return Failure(text, formatted, kind)
    if not isinstance(error, str):
        raise InvalidArgument(f"error must be a str or an exception, not {type(error).__name__}")
    return Failure(error)


class _Attempted(Protocol):
    """A claim as the retry rule sees it: a ``JobRecord`` or a claimed job."""

    @property
    def attempts(self) -> int: ...

    @property
    def max_attempts(self) -> int: ...


def last_attempt(claim: _Attempted) -> bool:
    """Whether ``claim`` is its job's last attempt: failing it buries the job (``on_failure``'s rule)."""
    return claim.attempts >= claim.max_attempts


def on_failure(
    record: JobRecord,
    failed: Failure,
    defaults: QueueDefaults,
    delay: object,
    now: datetime,
    started_at: datetime | None = None,
) -> Retry | Burial:
    """Retry-or-bury for a failed attempt of the claim ``record`` (started at ``started_at``): retry after
    ``delay`` (``None``: the queue's curve), or bury once the job has used its last attempt. A queue
    that keeps results has the retry log the attempt (ADR 042), and the burial too (ADR 064)."""
    wait = retry_delay(defaults, record.attempts) if delay is None else as_duration(delay, "delay")
    if last_attempt(record):
        return burial(record, failed, defaults, now, started_at)
    try:
        run_at = now + wait
    except OverflowError:
        raise InvalidOptions(f"a retry delay of {wait} from {now.isoformat()} is out of range") from None
    attempt = logged(record, failed, defaults, now, started_at)
    return Retry(record.id, record.fence, failed.error, run_at, failed.traceback, attempt)


def burial(
    record: JobRecord, failed: Failure, defaults: QueueDefaults, now: datetime, started_at: datetime | None
) -> Burial:
    """The burial of the claim ``record`` for ``failed``, its attempt logged when its queue keeps results."""
    attempt = logged(record, failed, defaults, now, started_at)
    return Burial(record.id, record.fence, failed.error, failed.traceback, attempt)


def logged(
    record: JobRecord, failed: Failure, defaults: QueueDefaults, now: datetime, started_at: datetime | None
) -> bytes | None:
    """The attempt log entry of a failed attempt of ``record``, if its queue keeps results (else ``None``)."""
    if defaults.keep_results is None:
        return None
    return encode_attempt(failed.error, failed.exception, failed.traceback, record.worker_id, now, started_at)


# -- leases and waits -------------------------------------------------------------------------


def lease_length(record: JobRecord, defaults: QueueDefaults) -> timedelta:
    """How long a lease of the job lasts: its own visibility timeout, else its queue's."""
    return record.visibility if record.visibility is not None else defaults.visibility_timeout


def lease_until(record: JobRecord, defaults: QueueDefaults, now: datetime) -> datetime:
    """Where a heartbeat at ``now`` moves a job's lease end (``lease_length`` from ``now``)."""
    return now + lease_length(record, defaults)


def claimed_late(record: JobRecord, defaults: QueueDefaults, now: datetime) -> bool:
    """Whether the lease of a job whose claim returned at ``now`` is a third gone already: the claim's
    instant was read before it waited (for a connection, on a stalled host), so the lease it granted
    may even be born lapsed, for the next claim's sweep to take. Such a lease is renewed before the
    job is handed out (ADR 050)."""
    return record.lease_until is not None and (record.lease_until - now) * 3 < lease_length(record, defaults) * 2


def claim_wait(deadline: datetime, now: datetime, poll_interval: float) -> float | None:
    """How long a waiting claim parks before it looks again (wall seconds), or ``None`` once its wait is over.

    Never longer than what is left of the wait (on the store's clock), nor than ``poll_interval``,
    so a lost wake-up costs at most one interval.
    """
    remaining = (deadline - now).total_seconds()
    if remaining <= 0:
        return None
    return min(remaining, poll_interval)


def check_poll_interval(value: object) -> float:
    """A waiting claim's poll interval: a positive, finite number of seconds (``InvalidOptions`` otherwise)."""
    span = as_duration(value, "poll_interval", allow_zero=False)
    return span.total_seconds()


def check_wait(value: object) -> timedelta:
    """A claim's ``wait``: a non-negative duration (``InvalidOptions`` otherwise)."""
    return as_duration(value, "wait")


# -- riding out an outage ---------------------------------------------------------------------


class Backoff:
    """How long a loop waits between tries through an outage: 0.1 s doubling to 10 s, from the start
    again after a success. Every loop that rides out ``DatabaseUnavailable`` waits by this one curve."""

    __slots__ = ("_next",)

    FIRST = 0.1
    LAST = 10.0

    def __init__(self) -> None:
        self._next = self.FIRST

    def next(self) -> float:
        """The wait before the next try (seconds), doubling the one after it."""
        pause, self._next = self._next, min(self._next * 2, self.LAST)
        return pause

    def reset(self) -> None:
        """A try succeeded: the next outage starts from the shortest wait."""
        self._next = self.FIRST
