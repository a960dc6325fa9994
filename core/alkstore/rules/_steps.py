"""The rules of steps, durable sleep and events (ADR 069): names, bounds, and what a checkpoint holds.

A job's code is run again from its start on every attempt and after every sleep; each ``step``,
``sleep`` and ``wait_for`` is found again by its name. User steps are named by the caller (a
valid name, never reserved); a sleep or wait is named by its place among the run's sleeps and
waits, under the reserved prefix, so it can never meet a user's step. A sleep's or wait's
checkpoint holds a small mark, encoded here and read back here only.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alkstore.errors import InvalidOptions, InvalidPayload
from alkstore.port._time import as_utc

from ._names import RESERVED_PREFIX, validate_name
from ._options import MAX_DURATION, as_duration

__all__ = [
    "DEFAULT_EVENT_KEEP",
    "JobSuspended",
    "SleepMark",
    "StepInfo",
    "WaitInfo",
    "due_after",
    "due_at",
    "event_keep",
    "event_name",
    "mark",
    "read_mark",
    "step_name",
    "wait_step",
]

#: How long an emitted event is kept for a wait that begins after it, unless ``emit`` says (ADR 069).
DEFAULT_EVENT_KEEP = timedelta(days=1)


def step_name(name: object) -> str:
    """A user's step name: a valid name (``InvalidName``), never reserved (``ReservedName``)."""
    return validate_name(name, "step")


def event_name(name: object) -> str:
    """An event's name: a valid name (``InvalidName``), never reserved (``ReservedName``)."""
    return validate_name(name, "event")


def wait_step(ordinal: int) -> str:
    """The checkpoint name of the run's ``ordinal``-th sleep or wait (from 1): reserved, so no user step's."""
    return f"{RESERVED_PREFIX}wait:{ordinal}"


def due_after(now: datetime, duration: object, what: str = "sleep") -> datetime:
    """``now`` plus ``duration`` (seconds or ``timedelta``, 0 to ``MAX_DURATION``; ``InvalidOptions`` else)."""
    span = as_duration(duration, what)
    try:
        return now + span
    except OverflowError:
        raise InvalidOptions(f"{what} of {span} from {now.isoformat()} is past the last instant") from None


def due_at(now: datetime, instant: object) -> datetime:
    """``instant`` as UTC, at most ``MAX_DURATION`` after ``now`` (``InvalidOptions`` else); a past one is due now."""
    at = as_utc(instant, "sleep_until", InvalidOptions)
    if at - now > MAX_DURATION:
        raise InvalidOptions(f"sleep_until must be within {MAX_DURATION.days} days of now, not {at.isoformat()}")
    return at


def event_keep(keep: object) -> timedelta:
    """How long an event is kept: more than 0, at most ``MAX_DURATION`` (``InvalidOptions`` else)."""
    return as_duration(keep, "keep", allow_zero=False)


@dataclass(frozen=True, slots=True)
class SleepMark:
    """What a sleep's or wait's checkpoint says: due at ``until`` (still waiting), the event's ``payload``
    (the wait was answered), or ``timed_out``."""

    until: datetime | None = None
    payload: bytes | None = None
    timed_out: bool = False


def mark(value: SleepMark) -> bytes:
    """``value`` as stored in its checkpoint (JSON, whatever the store's codec)."""
    if value.payload is not None:
        body: dict[str, object] = {"event": base64.b64encode(value.payload).decode("ascii")}
    elif value.timed_out:
        body = {"timeout": True}
    else:
        assert value.until is not None
        body = {"until": value.until.isoformat()}
    return json.dumps(body).encode()


def read_mark(data: bytes) -> SleepMark:
    """A checkpoint written by ``mark``; ``InvalidPayload`` for anything else (a step of another shape)."""
    try:
        body = json.loads(data)
        if "event" in body:
            return SleepMark(payload=base64.b64decode(body["event"]))
        if body.get("timeout") is True:
            return SleepMark(timed_out=True)
        return SleepMark(until=as_utc(datetime.fromisoformat(body["until"]), "until", InvalidPayload))
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidPayload(f"a sleep's checkpoint cannot be read: {exc}") from None


@dataclass(frozen=True, slots=True)
class StepInfo:
    """A finished step of a job, as ``get_job`` shows it: its name, its result (decoded) and when it finished."""

    name: str
    result: Any
    at: datetime


@dataclass(frozen=True, slots=True)
class WaitInfo:
    """What a sleeping job waits for: the instant it runs again, or sooner the event named ``event``."""

    until: datetime
    event: str | None = None


class JobSuspended(BaseException):
    """Raised by ``job.sleep``/``wait_for``: it unwinds the task (an ``except Exception`` does not catch it)
    and tells the worker to store the job asleep, its run ended without an outcome (a job claimed by hand
    is stored asleep before it is raised)."""

    #: What the worker stores (core's record); ``None`` when it is stored already.
    suspension: object = None
