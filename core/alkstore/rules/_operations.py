"""Inspection and actions for operators (ADR 020): the rules behind the stores' inspection methods.

This module owns what both runtimes' inspection methods share: the lag formula, the limits of
counts, pages and batches, and the opaque cursor that carries a listing's key (``_orders.key_of``)
from one page to the next. Reading never writes anything, so the per-job paths pay nothing for it.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._records import JobKey, JobPhase, QueueCounts

from ._codec import Codec, JsonCodec
from ._orders import keyed_by_instant
from ._records import QueueStats

__all__ = [
    "BATCH",
    "DEFAULT_PAGE",
    "MAX_CAP",
    "MAX_PAGE",
    "RESULTS_LISTING",
    "STATS_CAP",
    "THROUGHPUT_RETENTION",
    "as_phase",
    "check_cap",
    "check_minutes",
    "check_page_size",
    "containment_probe",
    "lag",
    "minute_of",
    "payload_contains",
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
#: How long the workers' per-minute counts of done and failed runs are kept (ADR 048): the pruning
#: worker deletes older minutes, and ``Store.throughput`` reads at most this far back.
THROUGHPUT_RETENTION = timedelta(days=1)
#: How long the per-task figures (runs, run time, pickup latency per minute) are kept (ADR 075): a week.
TASK_FIGURES_RETENTION = timedelta(days=7)
_MINUTE = timedelta(minutes=1)
#: The cursor format's version: a cursor of another version is refused, never misread.
_CURSOR_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MAX_ID = 2**63 - 1
_INT32 = 2**31


def lag(oldest_ready: datetime | None, now: datetime) -> timedelta:
    """How long the oldest ready job has waited at ``now`` (zero when none is ready, or it is not late)."""
    if oldest_ready is None or oldest_ready >= now:
        return timedelta(0)
    return now - oldest_ready


def minute_of(at: datetime) -> datetime:
    """The start of the UTC minute holding ``at``: the bucket a run that ended at ``at`` counts in (ADR 048)."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def check_minutes(minutes: object) -> int:
    """How many minutes of throughput to read: an int from 1 to the retention's (1,440)."""
    most = THROUGHPUT_RETENTION // _MINUTE
    if not isinstance(minutes, int) or isinstance(minutes, bool):
        raise InvalidArgument(f"minutes must be an int, not {type(minutes).__name__}")
    if not 1 <= minutes <= most:
        raise InvalidOptions(f"minutes must be between 1 and {most}, not {minutes}")
    return minutes


def check_task_minutes(minutes: object) -> int:
    """How many minutes of task figures to read: an int from 1 to their retention's (10,080, ADR 075)."""
    most = TASK_FIGURES_RETENTION // _MINUTE
    if not isinstance(minutes, int) or isinstance(minutes, bool):
        raise InvalidArgument(f"minutes must be an int, not {type(minutes).__name__}")
    if not 1 <= minutes <= most:
        raise InvalidOptions(f"minutes must be between 1 and {most}, not {minutes}")
    return minutes


def stats_of(counts: QueueCounts, now: datetime, cap: int | None) -> QueueStats:
    """The public snapshot of one queue's counts at ``now``, taken up to ``cap``."""
    return QueueStats(
        counts.queue,
        counts.ready,
        counts.delayed,
        counts.running,
        counts.dead,
        lag(counts.oldest_ready, now),
        cap,
        counts.waiting,
        counts.paused,
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


#: The listing of a queue's kept results (ADR 042), as its cursors name it beside the phases.
RESULTS_LISTING = "done"


def write_cursor(queue: str, phase: str, key: JobKey, reverse: bool = False) -> str:
    """An opaque cursor resuming the listing of ``phase`` jobs (or ``RESULTS_LISTING``) of ``queue``
    (``reverse``: in the order turned round) after ``key``."""
    at = None if key.at is None else (key.at - _EPOCH) // _MICROSECOND
    fields: list[object] = [_CURSOR_VERSION, queue, str(phase), key.id, key.priority, at]
    text = json.dumps([*fields, True] if reverse else fields, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def read_cursor(cursor: object, queue: str, phase: str, reverse: bool = False) -> JobKey | None:
    """The key a cursor of this listing (``queue``, ``phase`` or ``RESULTS_LISTING``, ``reverse``) resumes
    after; ``None`` for no cursor.

    A cursor that is not one ``write_cursor`` made for this very listing is ``InvalidOptions``.
    """
    if cursor is None:
        return None
    if not isinstance(cursor, str):
        raise InvalidArgument(f"cursor must be a str, not {type(cursor).__name__}")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, of_queue, of_phase, job_id, priority, at, *turned = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise InvalidOptions(f"not a job listing cursor: {cursor!r}") from None
    if turned not in ([], [True]):
        raise InvalidOptions(f"not a job listing cursor: {cursor!r}")
    if version != _CURSOR_VERSION or of_queue != queue or of_phase != str(phase) or bool(turned) != reverse:
        order = " in reverse" if reverse else ""
        raise InvalidOptions(f"the cursor is not one of the listing of {phase} jobs of queue {queue!r}{order}")
    timed = phase == RESULTS_LISTING or keyed_by_instant(JobPhase(phase))  # a results key holds an instant
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


# -- payload filters -----------------------------------------------------------------------------


def containment_probe(codec: Codec, contains: Any) -> str | None:
    """``contains`` as the JSON text a listing's payload filter takes; ``None`` for no filter.

    A probe is a JSON object or array (a scalar payload can contain neither, so none is left
    out by the engines' cheap first-byte test), and filtering needs payloads stored as JSON text:
    the store's codec must be the JSON codec.
    """
    if contains is None:
        return None
    if not isinstance(contains, dict | list):
        raise InvalidArgument(f"contains must be a JSON object or array, not {type(contains).__name__}")
    if type(codec) is not JsonCodec:
        raise InvalidOptions("a payload filter needs payloads stored as JSON: this store's codec is not JsonCodec")
    return codec.encode(contains).decode("utf-8")


def payload_contains(payload: bytes, probe: str) -> bool:
    """Whether a stored ``payload`` contains the JSON ``probe`` as PostgreSQL's ``jsonb @>`` decides.

    An object contains another when each of its keys is there with a value containing the probe's;
    an array contains another when each probe element is contained by some element (order and
    repeats do not matter); scalars must be equal (``1`` and ``1.0`` are, ``true`` and ``1`` are not).
    Payloads that are not JSON objects or arrays (raw bytes, scalars) contain no probe.
    """
    if not payload or payload[:1] not in (b"{", b"["):
        return False
    try:
        value = json.loads(payload, parse_float=Decimal)
    except ValueError:
        return False
    return _contains(value, json.loads(probe, parse_float=Decimal))


def _contains(value: Any, probe: Any) -> bool:
    if isinstance(probe, dict):
        return isinstance(value, dict) and all(
            key in value and _contains(value[key], item) for key, item in probe.items()
        )
    if isinstance(probe, list):
        return isinstance(value, list) and all(any(_contains(mine, item) for mine in value) for item in probe)
    if isinstance(value, dict | list) or isinstance(value, bool) is not isinstance(probe, bool):
        return False
    return bool(value == probe)


def hour_of(at: datetime) -> datetime:
    """The start of the UTC hour holding ``at``: the bucket task figures older than a day are rolled into (ADR 075)."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def task_figures_roll_up_before(now: datetime) -> datetime:
    """Task figures of minutes before this are rolled up per hour: a day's minutes stay whole (ADR 075)."""
    return hour_of(now - timedelta(days=1))


def pickup_latency_ms(run_at: datetime, claimed_at: datetime | None) -> float:
    """A run's pickup latency (ADR 075): from the job's ``run_at`` to its claim, in ms, never below zero."""
    if claimed_at is None:
        return 0.0
    return max((claimed_at - run_at).total_seconds() * 1000, 0.0)
