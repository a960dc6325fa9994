"""Option resolution: per-call options over a queue's defaults, to concrete job stamps.

This is the one owner of the defaults and of the formulas that turn options into stamps. A
queue's defaults are its *derived* set (plain queues 300 s / 3 attempts / 5 s backoff base
capped at 1 h; outbox backing queues 60 s / 5 / 5 s) overlaid with what a user stored for it
(``QueueConfig``, ADR 016). Options are validated when constructed, so bad input fails before
any engine is touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypedDict, TypeVar

from alkstore.errors import InvalidOptions
from alkstore.port._assembly import assembler
from alkstore.port._dependency_records import ParentFailure
from alkstore.port._records import QueueConfig, RateLimit
from alkstore.port._time import as_utc

from ._names import is_outbox_queue

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_DURATION",
    "MAX_KEY_LENGTH",
    "NO_OPTS",
    "EnqueueOpts",
    "JobStamps",
    "QueueDefaults",
    "ScheduleOpts",
    "ScheduleStamps",
    "as_duration",
    "check_after",
    "check_key",
    "check_policy",
    "check_queue_config",
    "queue_defaults",
    "resolve_enqueue",
    "resolve_schedule",
    "retry_delay",
    "stamp_enqueue",
]

_INT32_MAX = 2**31 - 1
#: Longest delay, expiry or lease accepted: a hundred years keeps every instant representable.
MAX_DURATION = timedelta(days=36500)
#: The limit as messages state it: inclusive, for seconds and timedeltas alike.
_AT_MOST = f"at most {MAX_DURATION.days:,} days ({MAX_DURATION.total_seconds():.0f} s)"
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class QueueDefaults:
    """What a queue uses when a call does not say: lease length, attempts, retry curve, priority."""

    visibility_timeout: timedelta
    max_attempts: int
    backoff_base: timedelta
    backoff_cap: timedelta
    priority: int = 0
    #: At most this many of the queue's jobs run at once, on every worker and host (``None``: no limit).
    concurrency: int | None = None
    #: How long the outcome of each job that succeeds is kept (``None``: not kept, "done and gone"; ADR 042).
    keep_results: timedelta | None = None
    #: At most so many starts per period of the queue's jobs, on every worker and host (ADR 070).
    rate: RateLimit | None = None
    #: At most so many starts per period of the queue's jobs of each ``rate_key``.
    key_rate: RateLimit | None = None


PLAIN_DEFAULTS = QueueDefaults(timedelta(seconds=300), 3, timedelta(seconds=5), timedelta(hours=1))
OUTBOX_DEFAULTS = QueueDefaults(timedelta(seconds=60), 5, timedelta(seconds=5), timedelta(hours=1))


def queue_defaults(queue: str, stored: QueueConfig | None = None) -> QueueDefaults:
    """The defaults of ``queue``: its derived set (outbox 60/5/5, else plain) under what is ``stored``."""
    derived = OUTBOX_DEFAULTS if is_outbox_queue(queue) else PLAIN_DEFAULTS
    if stored is None:
        return derived
    return QueueDefaults(
        visibility_timeout=_either(stored.visibility_timeout, derived.visibility_timeout),
        max_attempts=_either(stored.max_attempts, derived.max_attempts),
        backoff_base=_either(stored.backoff_base, derived.backoff_base),
        backoff_cap=_either(stored.backoff_cap, derived.backoff_cap),
        priority=_either(stored.priority, derived.priority),
        concurrency=stored.concurrency,
        keep_results=stored.keep_results,
        rate=stored.rate,
        key_rate=stored.key_rate,
    )


_T = TypeVar("_T")


def _either(value: _T | None, fallback: _T) -> _T:
    return fallback if value is None else value


def retry_delay(defaults: QueueDefaults, attempt: int) -> timedelta:
    """The curve's wait after failed attempt ``attempt`` (1-based): ``base * 2**(attempt-1)``, capped."""
    if attempt < 1:
        raise InvalidOptions(f"attempt must be >= 1, not {attempt}")
    if attempt > 64:
        return defaults.backoff_cap
    # In integer microseconds: base * 2**(attempt-1) as a timedelta overflows from attempt ~45 on.
    base_us, cap_us = defaults.backoff_base // _MICROSECOND, defaults.backoff_cap // _MICROSECOND
    return timedelta(microseconds=min(base_us << (attempt - 1), cap_us))


def as_duration(value: object, what: str, *, allow_zero: bool = True) -> timedelta:
    """Seconds (int/float) or a ``timedelta`` as a validated, non-negative ``timedelta``.

    At most ``MAX_DURATION`` (36,500 days), inclusive, whether given as seconds or a ``timedelta``.
    """
    if isinstance(value, timedelta):
        delta = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidOptions(f"{what} must be finite, not {value!r}")
        if abs(value) > MAX_DURATION.total_seconds():
            raise InvalidOptions(f"{what} must be {_AT_MOST}, not {value!r} s")
        delta = timedelta(seconds=value)
    else:
        raise InvalidOptions(f"{what} must be seconds or a timedelta, not {type(value).__name__}")
    if delta < timedelta(0) or (not allow_zero and delta == timedelta(0)):
        raise InvalidOptions(f"{what} must be {'>= 0' if allow_zero else '> 0'}, not {value!r}")
    if delta > MAX_DURATION:
        raise InvalidOptions(f"{what} must be {_AT_MOST}, not {delta}")
    return delta


def _check_int(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOptions(f"{what} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidOptions(f"{what} must be between {low} and {high}, not {value}")
    return value


def _check_priority(value: int | None) -> None:
    if value is not None:
        _check_int(value, "priority", -_INT32_MAX - 1, _INT32_MAX)


def _check_max_attempts(value: int | None) -> None:
    if value is not None:
        _check_int(value, "max_attempts", 1, _INT32_MAX)


def _optional_duration(value: object, what: str) -> timedelta | None:
    return None if value is None else as_duration(value, what, allow_zero=False)


#: The longest unique or ordering key accepted, in characters.
MAX_KEY_LENGTH = 255
#: The highest global concurrency a queue may be configured with.
MAX_CONCURRENCY = 1_000_000


def check_key(value: object, what: str) -> str | None:
    """A unique or ordering key: ``None``, or a ``str`` of 1 to 255 printable characters (``InvalidOptions``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidOptions(f"{what} must be a str, not {type(value).__name__}")
    if not value or len(value) > MAX_KEY_LENGTH:
        raise InvalidOptions(f"{what} must be 1 to {MAX_KEY_LENGTH} characters long, not {len(value)}")
    if not value.isprintable():
        raise InvalidOptions(f"{what} {value!r} contains unprintable characters")
    return value


def check_after(after: object) -> tuple[int, ...]:
    """``after`` as the tuple of distinct job ids it names, in order; ``InvalidOptions`` for anything else."""
    if isinstance(after, (str, bytes)) or not isinstance(after, Iterable):
        raise InvalidOptions(f"after must be a sequence of job ids, not {type(after).__name__}")
    ids: dict[int, None] = {}
    for job_id in after:
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
            raise InvalidOptions(f"after must hold positive job ids, not {job_id!r}")
        ids[int(job_id)] = None
    return tuple(ids)


def check_policy(policy: object) -> ParentFailure:
    """``policy`` as a ``ParentFailure``: ``"cancel"``, ``"run"`` or ``"die"``; ``InvalidOptions`` else."""
    try:
        return ParentFailure(policy)  # type: ignore[arg-type]
    except ValueError:
        raise InvalidOptions(f"on_parent_failure must be 'cancel', 'run' or 'die', not {policy!r}") from None


class QueueSettings(TypedDict, total=False):
    """What ``Queue.configure`` and ``Outbox.configure`` take by keyword; ``None`` or left out: the default."""

    visibility_timeout: float | timedelta | None
    max_attempts: int | None
    backoff_base: float | timedelta | None
    backoff_cap: float | timedelta | None
    priority: int | None
    concurrency: int | None
    keep_results: float | timedelta | None
    rate: RateLimit | None
    key_rate: RateLimit | None


def _check_rate(value: object, what: str) -> RateLimit | None:
    if value is not None and not isinstance(value, RateLimit):
        raise InvalidOptions(f"{what} must be a RateLimit (e.g. RateLimit(5, per=1)), not {type(value).__name__}")
    return value


def check_queue_config(
    queue: str,
    *,
    visibility_timeout: object = None,
    max_attempts: object = None,
    backoff_base: object = None,
    backoff_cap: object = None,
    priority: object = None,
    concurrency: object = None,
    keep_results: object = None,
    rate: object = None,
    key_rate: object = None,
) -> QueueConfig:
    """A validated ``QueueConfig`` for ``queue``; ``None`` keeps the queue's derived default.

    Durations are seconds or ``timedelta`` (> 0, at most ``MAX_DURATION``), ``max_attempts`` and
    ``priority`` ints in range, ``keep_results`` how long a succeeded job's outcome is kept (ADR 042),
    ``rate`` and ``key_rate`` ``RateLimit``s (ADR 070),
    and the retry curve's base must not exceed its cap once the
    config is laid over the derived defaults (a cap of 1 s under the derived 5 s base is refused).
    """
    _check_max_attempts(max_attempts)  # type: ignore[arg-type]
    _check_priority(priority)  # type: ignore[arg-type]
    if concurrency is not None:
        _check_int(concurrency, "concurrency", 1, MAX_CONCURRENCY)
    config = QueueConfig(
        visibility_timeout=_optional_duration(visibility_timeout, "visibility_timeout"),
        max_attempts=max_attempts,  # type: ignore[arg-type]
        backoff_base=_optional_duration(backoff_base, "backoff_base"),
        backoff_cap=_optional_duration(backoff_cap, "backoff_cap"),
        priority=priority,  # type: ignore[arg-type]
        concurrency=concurrency,  # type: ignore[arg-type]
        keep_results=_optional_duration(keep_results, "keep_results"),
        rate=_check_rate(rate, "rate"),
        key_rate=_check_rate(key_rate, "key_rate"),
    )
    effective = queue_defaults(queue, config)
    if effective.backoff_base > effective.backoff_cap:
        raise InvalidOptions(
            f"backoff_base ({effective.backoff_base}) must not exceed backoff_cap ({effective.backoff_cap})"
            + ("" if config.backoff_base is not None and config.backoff_cap is not None else " (a derived default)")
        )
    return config


@dataclass(frozen=True, slots=True)
class EnqueueOpts:
    """Per-call enqueue options; ``None`` means the queue's default.

    ``delay`` (seconds or ``timedelta``) and ``run_at`` (aware ``datetime``) are exclusive;
    ``expires`` is relative to the enqueue instant (seconds or ``timedelta``) or absolute
    (aware ``datetime``); ``visibility_timeout`` is this job's own lease length, used by every
    claim and heartbeat of it instead of the queue's. Durations are normalised to
    ``timedelta``, instants to UTC.

    ``unique_key``: while a job of the queue with this key is unfinished (pending or delayed, or
    behind its ordering key; with ``unique_running`` also while it runs), enqueueing another
    returns that job's id instead (ADR 031). ``ordering_key``: the queue's jobs with this key run
    one at a time, in the order they were enqueued (ADR 032). ``rate_key``: the job's starts count
    against its queue's ``key_rate`` for this key (ADR 070).

    ``after``: ids of jobs (any queue) this one waits on: it runs once every one of them succeeded;
    ``on_parent_failure`` (``"cancel"``, ``"run"`` or ``"die"``) says what becomes of it if one dies
    (ADR 073). A job waits on its parents or on its ordering key, not both.
    """

    delay: float | timedelta | None = None
    run_at: datetime | None = None
    priority: int | None = None
    max_attempts: int | None = None
    expires: float | timedelta | datetime | None = None
    visibility_timeout: float | timedelta | None = None
    unique_key: str | None = None
    unique_running: bool = False
    ordering_key: str | None = None
    rate_key: str | None = None
    after: Sequence[int] = ()
    on_parent_failure: str = "cancel"

    def __post_init__(self) -> None:
        if self.delay is not None and self.run_at is not None:
            raise InvalidOptions("give delay or run_at, not both")
        if self.delay is not None:
            object.__setattr__(self, "delay", as_duration(self.delay, "delay"))
        if self.run_at is not None:
            object.__setattr__(self, "run_at", as_utc(self.run_at, "run_at", InvalidOptions))
        _check_priority(self.priority)
        _check_max_attempts(self.max_attempts)
        if isinstance(self.expires, datetime):
            object.__setattr__(self, "expires", as_utc(self.expires, "expires", InvalidOptions))
        elif self.expires is not None:
            object.__setattr__(self, "expires", as_duration(self.expires, "expires", allow_zero=False))
        object.__setattr__(
            self, "visibility_timeout", _optional_duration(self.visibility_timeout, "visibility_timeout")
        )
        check_key(self.unique_key, "unique_key")
        check_key(self.ordering_key, "ordering_key")
        check_key(self.rate_key, "rate_key")
        if not isinstance(self.unique_running, bool):
            raise InvalidOptions(f"unique_running must be a bool, not {type(self.unique_running).__name__}")
        if self.unique_running and self.unique_key is None:
            raise InvalidOptions("unique_running says how long a unique_key holds: give one")
        object.__setattr__(self, "after", check_after(self.after))
        object.__setattr__(self, "on_parent_failure", check_policy(self.on_parent_failure))
        if self.after and self.ordering_key is not None:
            raise InvalidOptions("a job waits on its parents (after) or on its ordering_key, not both")


@dataclass(frozen=True, slots=True)
class ScheduleOpts:
    """Stamps for every job a schedule fires; ``expires`` is relative to each fire instant.

    ``anchor`` (an aware ``datetime``) puts the schedule's boundaries on its phase: every
    ``anchor + k * interval``, whenever the schedule was registered (ADR 034); without one, the
    phase is the registration's.
    """

    priority: int | None = None
    max_attempts: int | None = None
    expires: float | timedelta | None = None
    anchor: datetime | None = None

    def __post_init__(self) -> None:
        _check_priority(self.priority)
        _check_max_attempts(self.max_attempts)
        if self.anchor is not None:
            object.__setattr__(self, "anchor", as_utc(self.anchor, "anchor", InvalidOptions))
        expires: object = self.expires
        if expires is not None:
            if isinstance(expires, datetime):
                raise InvalidOptions("a schedule's expires is relative to each fire (seconds or timedelta)")
            object.__setattr__(self, "expires", as_duration(expires, "expires", allow_zero=False))


@dataclass(frozen=True, slots=True)
class JobStamps:
    """The concrete, resolved stamps a new job is stored with."""

    priority: int
    run_at: datetime
    expires_at: datetime | None
    max_attempts: int
    visibility: timedelta | None = None
    unique_key: str | None = None
    unique_running: bool = False
    ordering_key: str | None = None
    rate_key: str | None = None
    after: tuple[int, ...] = ()
    on_parent_failure: ParentFailure = ParentFailure.CANCEL


#: ``JobStamps(...)`` made by plain assignments (``_assembly``): one per enqueue call, whose frozen ``__init__``
#: set its 11 fields through a setter call each.
_job_stamps: Callable[..., JobStamps] = assembler(JobStamps)

#: The options of an enqueue given none (frozen, so one instance serves every call).
NO_OPTS = EnqueueOpts()


def resolve_enqueue(opts: EnqueueOpts, queue: str, now: datetime, stored: QueueConfig | None = None) -> JobStamps:
    """Resolve ``opts`` over the defaults of ``queue`` (and its ``stored`` config) at the enqueue instant ``now``."""
    return stamp_enqueue(opts, queue_defaults(queue, stored), now)


def stamp_enqueue(opts: EnqueueOpts, defaults: QueueDefaults, now: datetime) -> JobStamps:
    """Resolve ``opts`` over a queue's ``defaults`` (``queue_defaults``'s) at the enqueue instant ``now``.

    ``NO_OPTS`` (an enqueue given none) is stamped at once: it has nothing to resolve or refuse.
    """
    if opts is NO_OPTS:
        return _job_stamps(defaults.priority, now, None, defaults.max_attempts)
    if opts.run_at is not None:
        run_at = opts.run_at
    elif isinstance(opts.delay, timedelta):
        run_at = _shifted(now, opts.delay, "delay")
    else:
        run_at = now
    expires: float | timedelta | datetime | None = opts.expires
    if isinstance(expires, timedelta):
        expires = _shifted(now, expires, "expires")
    stamps = _stamps(defaults, opts.priority, opts.max_attempts, expires, run_at, now)
    visibility = opts.visibility_timeout if isinstance(opts.visibility_timeout, timedelta) else None
    if (
        visibility is None
        and opts.unique_key is None
        and opts.ordering_key is None
        and opts.rate_key is None
        and not opts.after
    ):
        return stamps
    return _job_stamps(
        stamps.priority,
        stamps.run_at,
        stamps.expires_at,
        stamps.max_attempts,
        visibility,
        opts.unique_key,
        opts.unique_running,
        opts.ordering_key,
        opts.rate_key,
        tuple(opts.after),
        ParentFailure(opts.on_parent_failure),
    )


class ScheduleStamps(Protocol):
    """What a schedule says about the jobs it fires: ``ScheduleOpts``, or a stored schedule."""

    @property
    def priority(self) -> int | None: ...

    @property
    def max_attempts(self) -> int | None: ...

    @property
    def expires(self) -> float | timedelta | None: ...


def resolve_schedule(
    schedule: ScheduleStamps, queue: str, now: datetime, stored: QueueConfig | None = None
) -> JobStamps:
    """Resolve a schedule's stamps over its target ``queue``'s defaults for a fire at ``now``."""
    expires = schedule.expires
    expires_at = None if not isinstance(expires, timedelta) else _shifted(now, expires, "expires")
    return _stamps(queue_defaults(queue, stored), schedule.priority, schedule.max_attempts, expires_at, now, now)


def _shifted(now: datetime, by: timedelta, what: str) -> datetime:
    try:
        return now + by
    except OverflowError:
        raise InvalidOptions(f"{what} of {by} from {now.isoformat()} is past the last representable instant") from None


def _stamps(
    defaults: QueueDefaults,
    priority: int | None,
    max_attempts: int | None,
    expires_at: float | timedelta | datetime | None,
    run_at: datetime,
    now: datetime,
) -> JobStamps:
    absolute = expires_at if isinstance(expires_at, datetime) else None
    if absolute is not None:
        if absolute <= now:
            raise InvalidOptions(f"the job would be dead on arrival: it expires ({absolute.isoformat()}) before now")
        if absolute <= run_at:
            raise InvalidOptions(
                f"the job would expire ({absolute.isoformat()}) before it may run ({run_at.isoformat()})"
            )
    return _job_stamps(
        priority=defaults.priority if priority is None else priority,
        run_at=run_at,
        expires_at=absolute,
        max_attempts=defaults.max_attempts if max_attempts is None else max_attempts,
    )
