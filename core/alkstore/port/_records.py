"""The engine port's records: what core and every engine exchange (ADR 014).

Records carry normalised values only: ints, strs, bytes, UTC ``datetime`` and ``timedelta``; no
option class of the public API crosses the port. Both ports' records are here, as one set of
classes for both runtimes: the runtime port's first (jobs, claims, the fenced finishing pairs,
locks; schedules and ticks are in ``_schedule_records``), then the operations port's (phases and
counts, listing keys and queries, workers, throughput, table statistics, kept results). The ports themselves are
``_runtime_port_async`` and ``_operations_port_async`` (``AsyncEngine``, in ``_engine_async``, is
both); engine authors find them, these records and the rules an engine calls in ``alkstore.engine``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ._assembly import assembler
from ._dependency_records import ParentFailure, ParentLink
from ._rates import RateLimit
from ._schedule_records import DueSchedule, Fire, NewSchedule, PlannedFire, ScheduleRecord, TickBudget, TickResult

__all__ = [
    "JOB_EXPIRED_ERROR",
    "LEASE_EXPIRED_ERROR",
    "ActionRecord",
    "Alike",
    "Burial",
    "ClaimRequest",
    "Done",
    "DueSchedule",
    "Existing",
    "Fire",
    "Handed",
    "Heartbeat",
    "Held",
    "JobKey",
    "JobPhase",
    "JobQuery",
    "JobRecord",
    "JobState",
    "LockRecord",
    "NewAction",
    "NewJob",
    "NewSchedule",
    "PlannedFire",
    "QueueConfig",
    "QueueCounts",
    "RateLimit",
    "ResultRecord",
    "Retry",
    "ScheduleRecord",
    "TableStats",
    "TaskFiguresRecord",
    "ThroughputRecord",
    "TickBudget",
    "TickResult",
    "WorkerRecord",
    "job_record",
    "new_job",
]

#: ``last_error`` of a job buried because its lease lapsed on its last allowed attempt.
LEASE_EXPIRED_ERROR = "lease expired on the last attempt"
#: ``last_error`` of a pending job buried because its ``expires_at`` passed (never claimed, or its lease lapsed).
JOB_EXPIRED_ERROR = "expired before it could run"


class JobState(enum.StrEnum):
    """Where a stored job is. A job that was acked is deleted ("done and gone"); with its queue's
    ``keep_results`` its outcome is kept apart, as a ``ResultRecord`` (ADR 042)."""

    PENDING = "pending"
    RUNNING = "running"
    DEAD = "dead"


# -- jobs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to insert, with its stamps resolved by core.

    ``visibility`` is the job's own lease length (``None``: the queue's, at each claim);
    ``task`` names the task it is for (the task layer), ``trace`` the trace context of its
    enqueue (telemetry); both are carried, never interpreted, by the engine. ``unique_key``
    (with ``unique_running``) and ``ordering_key`` are the job's keys (see ``AsyncEngine.enqueue``).
    """

    queue: str
    payload: bytes
    priority: int
    run_at: datetime
    expires_at: datetime | None
    max_attempts: int
    visibility: timedelta | None = None
    task: str | None = None
    trace: str | None = None
    unique_key: str | None = None
    unique_running: bool = False
    ordering_key: str | None = None
    rate_key: str | None = None
    #: Stored jobs it waits on, and earlier jobs of the same ``enqueue`` call (their positions) it waits on.
    after: tuple[int, ...] = ()
    after_batch: tuple[int, ...] = ()
    on_parent_failure: ParentFailure = ParentFailure.CANCEL


#: ``NewJob(...)`` made by plain assignments (``_assembly``): core makes one per job enqueued, whose frozen
#: ``__init__`` (a setter call for each of its 16 fields) cost more than the engine's insert of it.
new_job: Callable[..., NewJob] = assembler(NewJob)


class Alike(list[NewJob]):
    """The jobs of one enqueue made from one set of stamps: they differ in their payloads only.

    Core hands an engine such a batch as ``Alike`` so that the engine may take every other field, and
    the path the batch needs (keys, parents), from its first job instead of comparing every job.
    """

    __slots__ = ()


class Existing(int):
    """The id of a job that already held the unique key an enqueue asked for (none was created)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A stored job (live or dead), exactly as the engine holds it.

    ``attempts`` counts claims against ``max_attempts`` (``requeue_dead`` resets it, and a
    ``release`` gives one back); ``fence`` grows by one with every claim of this job and is
    never reset, so a stale holder can never match a later claim. ``worker_id`` and
    ``lease_until`` are set only while running (they survive a lapse until the next claim's
    sweep); ``died_at`` only once dead. ``schedule``/``boundary`` name the fire that made it.
    ``unique_key`` is set while the job holds it; a ``PENDING`` job is ``waiting`` while an
    earlier job of its ``ordering_key`` is unfinished (it is then not claimable); a ``RUNNING``
    job has ``cancel_requested`` once a cancel asked its worker to stop it.
    """

    id: int
    queue: str
    payload: bytes
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
    fence: int
    visibility: timedelta | None = None
    task: str | None = None
    last_traceback: str | None = None
    trace: str | None = None
    unique_key: str | None = None
    unique_running: bool = False
    ordering_key: str | None = None
    waiting: bool = False
    cancel_requested: bool = False
    #: When its latest claim was (while it runs, the start of the attempt now running); ``None`` before
    #: its first claim, and once dead (ADR 064).
    claimed_at: datetime | None = None
    #: The job's failed attempts as core encoded them (oldest first) when its queue keeps results:
    #: read by ``get_job`` (empty from the other reads, claims included), kept by a dead job (ADR 064).
    attempt_log: tuple[bytes, ...] = ()
    #: The key whose rate limit its starts count against (the queue's ``key_rate``, ADR 070).
    rate_key: str | None = None
    #: Its parents (``after``) and its policy when one dies; ``parents_left`` of them have not finished
    #: (it is ``waiting`` while any has not). ``dependents``: how many jobs wait on it, as read.
    parents: tuple[int, ...] = ()
    parents_left: int = 0
    on_parent_failure: ParentFailure = ParentFailure.CANCEL
    dependents: int = 0
    #: Read by ``get_job`` only (empty elsewhere): each parent as its child sees it, and the jobs waiting on it.
    parent_links: tuple[ParentLink, ...] = ()
    children: tuple[int, ...] = ()


#: ``JobRecord(*values)``, the fields in their order (those left out at their defaults), made by plain assignments
#: (``_assembly``): an engine makes one per job row it reads. About 7,700 instructions for a claimed job's 29
#: values, where the frozen ``__init__`` (or a setter call per slot) cost 38,000.
job_record: Callable[..., JobRecord] = assembler(JobRecord)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A claim of up to ``limit`` jobs of ``queue`` for ``worker_id`` at ``now``.

    Each claimed job is leased for its own ``visibility`` if it has one, else for ``lease``.
    ``concurrency`` says the queue has a global limit (as last read; the engine reads the stored
    one as it claims).
    """

    queue: str
    worker_id: str
    now: datetime
    lease: timedelta
    limit: int = 1
    concurrency: int | None = None
    #: The queue's limit on starts (``QueueConfig.rate``), as last read (ADR 070).
    rate: RateLimit | None = None
    #: The limit on starts of each ``rate_key`` of the queue (``QueueConfig.key_rate``), as last read.
    key_rate: RateLimit | None = None


#: ``ClaimRequest(...)`` made by plain assignments (``_assembly``): core makes one per claim.
claim_request: Callable[..., ClaimRequest] = assembler(ClaimRequest)


@dataclass(frozen=True, slots=True)
class Held:
    """A claimed job as its holder knows it: the id and the fence it was claimed under."""

    job_id: int
    fence: int


@dataclass(frozen=True, slots=True)
class Done(Held):
    """Ack a held job and keep its outcome until ``keep_until`` (ADR 042): the encoded return value,
    when its last attempt started (``None``: unknown) and finished."""

    result: bytes
    started_at: datetime | None
    finished_at: datetime
    keep_until: datetime


@dataclass(frozen=True, slots=True)
class Handed(Held):
    """Ack a held job that has dependents and hand ``result`` (encoded) to them; nothing else is kept.

    A ``Done`` hands its result to the job's dependents the same way (and keeps it as well).
    """

    result: bytes


@dataclass(frozen=True, slots=True)
class Retry(Held):
    """Make a held job pending again at ``run_at``, keeping ``error`` (and its traceback) as its last.

    ``attempt`` (set when its queue keeps results) is the failed attempt as core encoded it, for the
    engine to append to the job's attempt log, which a kept result carries (ADR 042).
    """

    error: str
    run_at: datetime
    traceback: str | None = None
    attempt: bytes | None = None


@dataclass(frozen=True, slots=True)
class Burial(Held):
    """Make a held job dead with ``error`` (and its traceback) as its last.

    ``attempt`` (set when its queue keeps results) is the failed attempt as core encoded it: the
    engine appends it to the job's attempt log, which the dead job keeps (ADR 064).
    """

    error: str
    traceback: str | None = None
    attempt: bytes | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat(Held):
    """Move a held job's lease end to ``lease_until``."""

    lease_until: datetime


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """What a user stored for a queue; ``None`` fields fall back to the queue's derived defaults, and
    ``paused`` says whether its jobs may be claimed."""

    visibility_timeout: timedelta | None = None
    max_attempts: int | None = None
    backoff_base: timedelta | None = None
    backoff_cap: timedelta | None = None
    priority: int | None = None
    concurrency: int | None = None
    #: How long the outcome of a job that succeeded is kept (``None``: not kept, ADR 042).
    keep_results: timedelta | None = None
    #: At most this many starts per period of the queue's jobs, on every worker and host (ADR 070).
    rate: RateLimit | None = None
    #: At most this many starts per period of the queue's jobs of each ``rate_key``.
    key_rate: RateLimit | None = None
    #: Kept apart from the settings: ``configure_queue`` never changes it, ``set_paused`` alone does.
    paused: bool = False


# -- locks -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockRecord:
    """A held lock: ``token`` is unique to this acquisition and increases with every new one."""

    name: str
    owner: str
    token: int
    expires_at: datetime


# -- schedules ---------------------------------------------------------------------------------


class JobPhase(enum.StrEnum):
    """Where a stored job stands for an operator: a pending job is ready (due), delayed (not yet), or
    waiting (behind an earlier job of its ordering key)."""

    READY = "ready"
    DELAYED = "delayed"
    WAITING = "waiting"
    RUNNING = "running"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """One queue's jobs by phase at one instant, the ``run_at`` of its oldest ready job, and whether
    the queue is paused."""

    queue: str
    ready: int
    delayed: int
    running: int
    dead: int
    oldest_ready: datetime | None
    waiting: int = 0
    paused: bool = False


@dataclass(frozen=True, slots=True)
class JobKey:
    """Where a listing resumes: the sort key of the last job of the previous page.

    ``id`` always; ``priority`` and ``at`` (its ``run_at``) for ``READY``; ``at`` (``run_at``)
    for ``DELAYED``; ``at`` (``died_at``) for ``DEAD``; the id alone for ``RUNNING``.
    """

    id: int
    priority: int = 0
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobQuery:
    """A page of jobs to list: ``limit`` jobs of ``queue`` in ``phase`` at ``now``, after ``after``.

    With ``contains`` (the JSON text of an object or array), only the jobs whose payload contains it
    as ``payload_contains`` says (PostgreSQL's ``jsonb @>``). With ``task``, only the jobs of that
    task. With ``reverse``, the phase's order backwards (``listing_order(phase, reverse=True)``),
    ``after`` then a key of that order.
    """

    queue: str
    phase: JobPhase
    now: datetime
    limit: int
    after: JobKey | None = None
    contains: str | None = None
    reverse: bool = False
    task: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A worker process as it last reported itself.

    ``id`` is its worker id (a label, as claims take it); ``queues`` the queues it serves;
    ``concurrency`` how many jobs it runs at once; ``running`` how many it ran when it
    reported; ``processed`` and ``failed`` its totals since ``started_at``; ``seen_at`` the
    instant of the report.
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    started_at: datetime
    seen_at: datetime
    running: int = 0
    processed: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class ThroughputRecord:
    """Runs of ``queue`` that ended in the minute starting at ``minute`` (``minute_of``): ``done`` succeeded,
    ``failed`` failed (to be retried, dead, or given up after their timeout), as the workers counted them."""

    queue: str
    minute: datetime
    done: int
    failed: int


@dataclass(frozen=True, slots=True)
class TaskFiguresRecord:
    """Runs of ``task`` on ``queue`` (``""``: no task) that ended in the minute ``minute``: ``done`` and ``failed``
    as in ``ThroughputRecord``, and their summed run time and pickup latency (claim minus ``run_at``), in ms."""

    queue: str
    task: str
    minute: datetime
    done: int
    failed: int
    run_ms: float
    latency_ms: float


@dataclass(frozen=True, slots=True)
class NewAction:
    """An operator's action to log (ADR 068): when, who (role, client address), what, on what, with what outcome."""

    at: datetime
    role: str
    address: str
    action: str
    target: str
    outcome: str


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """A logged action as stored: a ``NewAction``'s fields and the ``id`` the log gave it (ascending)."""

    id: int
    at: datetime
    role: str
    address: str
    action: str
    target: str
    outcome: str


@dataclass(frozen=True, slots=True)
class TableStats:
    """One of the engine's tables as its storage last counted it: estimated live and dead rows.

    ``autovacuum`` says whether the server reclaims its dead rows on its own (Postgres: the
    server's ``autovacuum`` is on and the table does not opt out); ``vacuumable`` whether this
    engine's role may reclaim them itself with ``vacuum`` (PostgreSQL 15: only the table's owner,
    the database's owner or a superuser may). ``horizon`` names the oldest transaction a vacuum
    would keep dead rows for (Postgres: the oldest ``backend_xmin`` or ``backend_xid`` of the
    database's other sessions, prepared transaction or replication slot, or where none holds one
    the oldest transaction running on the server, as text), to be compared only for equality: while
    it is the same, a vacuum that could not reclaim the rows would find them again. ``None`` where
    the engine cannot tell (memory, SQLite).
    """

    table: str
    live_rows: int
    dead_rows: int
    autovacuum: bool
    vacuumable: bool
    horizon: str | None = None


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """The kept outcome of a job that succeeded (ADR 042), exactly as the engine holds it.

    The job's id, queue, payload, task, attempts and enqueue instant as they were at its ack;
    ``result`` the encoded return value; ``worker_id`` the worker of its last attempt;
    ``attempt_log`` its failed attempts as core encoded them (oldest first); it is kept until
    ``keep_until``.
    """

    id: int
    queue: str
    payload: bytes
    task: str | None
    attempts: int
    max_attempts: int
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime
    keep_until: datetime
    worker_id: str | None
    result: bytes
    attempt_log: tuple[bytes, ...] = ()
