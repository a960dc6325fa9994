"""The public facades: ``Store`` and its handles, thin layers over an ``Engine``.

The facades validate before any I/O, encode payloads and resolve options; every lifecycle
decision (decode-or-bury, retry-or-bury, lease length, how long a waiting claim parks) is
asked of ``alkstore._lifecycle`` and carried out through the engine port.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from operator import attrgetter
from types import TracebackType
from typing import Any, Protocol, TypeVar, Unpack

from . import _runner
from ._codec import Codec, JsonCodec
from ._lifecycle import (
    Decoded,
    Undecodable,
    check_poll_interval,
    check_wait,
    claim_wait,
    decode_claimed,
    failure,
    lease_until,
    on_failure,
)
from ._names import SCHEDULER_LOCK, outbox_queue, validate_label, validate_listed_queue, validate_name
from ._operations import (
    BATCH,
    DEFAULT_PAGE,
    STATS_CAP,
    CancelOutcome,
    JobPage,
    Leader,
    QueueStats,
    WorkerInfo,
    as_phase,
    check_cap,
    check_page_size,
    key_of,
    read_cursor,
    stats_of,
    write_cursor,
)
from ._options import (
    EnqueueOpts,
    JobStamps,
    QueueDefaults,
    QueueSettings,
    ScheduleOpts,
    as_duration,
    check_queue_config,
    queue_defaults,
    resolve_enqueue,
)
from ._spec import parse_spec
from ._tick import DEFAULT_BUDGET
from ._time import Clock, StopToken
from .engine import (
    Burial,
    ClaimRequest,
    Engine,
    Fire,
    Heartbeat,
    Held,
    JobKey,
    JobPhase,
    JobQuery,
    JobRecord,
    JobState,
    LockRecord,
    NewJob,
    NewSchedule,
    QueueConfig,
    Retry,
    ScheduleRecord,
)
from .errors import DatabaseUnavailable, InvalidArgument, InvalidOptions, InvalidPayload, LeaseLost, StoreClosed
from .telemetry import Telemetry

__all__ = ["Delivery", "Job", "JobInfo", "Lock", "Outbox", "Queue", "Schedule", "ScheduleEntry", "Store"]

log = logging.getLogger("alkstore")

_MAX_JOB_ID = 2**63 - 1
#: The options of an enqueue given none (frozen, so one instance serves every call).
_DEFAULT_ENQUEUE = EnqueueOpts()
#: How long a store trusts what it read of a queue's stored config, in seconds of its clock (ADR 016).
CONFIG_TTL = timedelta(seconds=2)
#: The most jobs one claim may take.
MAX_CLAIM = 1000
#: How often ``Store.cancel`` tries a job that was running at its cancel and pending just after.
_CANCEL_TRIES = 3


class Delivery(Protocol):
    """An outbox delivery: called with the decoded payload and its ``Job``; raising means failure."""

    def __call__(self, payload: Any, job: Job, /) -> None: ...


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of a stored job, as ``Store.get_job`` returns it (payload decoded).

    ``task`` names the task the job is for (``None`` for a plain job); ``last_traceback`` is the
    traceback of the failure that left ``last_error``, when that was an exception.
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


#: The fields a ``JobInfo`` copies from a ``JobRecord``, by name, before and after its payload
#: (which is decoded instead): a getter of each run gives them in ``JobInfo``'s order.
_NAMES = [f.name for f in fields(JobInfo)]
_BEFORE_PAYLOAD = attrgetter(*_NAMES[: _NAMES.index("payload")])
_AFTER_PAYLOAD = attrgetter(*_NAMES[_NAMES.index("payload") + 1 :])


def _fields_of(record: JobRecord, payload: Any) -> tuple[Any, ...]:
    """A ``JobInfo``'s fields, in its order, from ``record`` (by name) and the decoded ``payload``."""
    return (*_BEFORE_PAYLOAD(record), payload, *_AFTER_PAYLOAD(record))


def _info(record: JobRecord, payload: Any) -> JobInfo:
    return JobInfo(*_fields_of(record, payload))


@dataclass(frozen=True, slots=True)
class Schedule:
    """A registered schedule, as stored: ``next_boundary`` is the next instant it fires."""

    name: str
    spec: str
    interval: timedelta
    queue: str
    payload: Any
    opts: ScheduleOpts
    next_boundary: datetime
    last_boundary: datetime | None = None  # the last boundary fired (None before the first)


@dataclass(frozen=True, slots=True)
class ScheduleEntry:
    """One schedule of a bulk registration (``Store.schedule_many``): ``Store.schedule``'s arguments."""

    name: str
    spec: str
    queue: str
    payload: Any = None
    opts: ScheduleOpts | None = None


def check_store_options(clock: object, codec: object, telemetry: object) -> None:
    """Refuse a ``clock``, ``codec`` or ``telemetry`` of the wrong kind (``None`` is each one's default)."""
    if clock is not None and not isinstance(clock, Clock):
        raise InvalidOptions(f"clock must be an alkstore.Clock, not {type(clock).__name__}")
    if codec is not None and not isinstance(codec, Codec):
        raise InvalidOptions(f"codec must be an alkstore.Codec, not {type(codec).__name__}")
    if telemetry is not None and not isinstance(telemetry, Telemetry):
        raise InvalidOptions(f"telemetry must be an alkstore.telemetry.Telemetry, not {type(telemetry).__name__}")


class Store:
    """One alkstore database (or in-memory store): queues, locks, schedules and outboxes.

    Open one with ``alkstore.open(url)``. Thread-safe; close it (or use ``with``) when done.
    ``telemetry`` receives its events (ADR 024; ``alkstore.adapters.otel`` for OpenTelemetry).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Clock | None = None,
        codec: Codec | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        if not isinstance(engine, Engine):
            raise InvalidArgument(f"engine must be an alkstore.engine.Engine, not {type(engine).__name__}")
        check_store_options(clock, codec, telemetry)
        self._engine = engine
        self._clock = clock if clock is not None else engine.default_clock()
        self._codec = codec if codec is not None else JsonCodec()
        self._closed = False
        self._configs: dict[str, tuple[datetime, QueueConfig | None, QueueDefaults]] = {}
        self._telemetry = telemetry  # None: no event is reported, at the cost of one check each
        if telemetry is not None:
            telemetry.opened(self)

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<alkstore.Store engine={type(self._engine).__name__}{state}>"

    @property
    def clock(self) -> Clock:
        """The clock every stamp and lease of this store is computed from."""
        return self._clock

    @property
    def codec(self) -> Codec:
        """The payload codec."""
        return self._codec

    @property
    def engine(self) -> Engine:
        """The storage adapter behind this store."""
        return self._engine

    # -- lifecycle -------------------------------------------------------------------

    def _live(self) -> Engine:
        if self._closed:
            raise StoreClosed("this store is closed")
        return self._engine

    def migrate(self) -> None:
        """Create or upgrade the storage schema (idempotent; a no-op in memory)."""
        self._live().migrate()

    def close(self) -> None:
        """Release connections; later calls raise ``StoreClosed``. Idempotent."""
        if not self._closed:
            self._closed = True
            if self._telemetry is not None:
                self._telemetry.closed(self)
            self._engine.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- queue configuration ----------------------------------------------------------

    def _config(self, queue: str, tx: Any = None) -> tuple[datetime, QueueConfig | None, QueueDefaults]:
        """The queue's stored config and the defaults it makes, as read at most ``CONFIG_TTL`` of this
        store's clock ago. ``tx`` (the caller's transaction, as the engine took it) is where to
        read it, if it must be read."""
        now = self._clock.now()
        cached = self._configs.get(queue)
        if cached is not None and now < cached[0]:
            return cached
        config = self._live().queue_config(queue, tx)
        entry = self._configs[queue] = (now + CONFIG_TTL, config, queue_defaults(queue, config))
        return entry

    def _configure(self, queue: str, config: QueueConfig) -> QueueDefaults:
        """Store ``config`` for ``queue`` (all ``None``: remove it) and return the defaults it makes.

        This store sees it at once; others within ``CONFIG_TTL`` of their clocks (ADR 016).
        """
        engine = self._live()
        engine.configure_queue(queue, config)
        stored = None if config == QueueConfig() else config
        defaults = queue_defaults(queue, stored)
        self._configs[queue] = (self._clock.now() + CONFIG_TTL, stored, defaults)
        return defaults

    def _stored_config(self, queue: str, tx: Any = None) -> QueueConfig | None:
        return self._config(queue, tx)[1]

    def _defaults(self, queue: str) -> QueueDefaults:
        return self._config(queue)[2]

    # -- queues and jobs -------------------------------------------------------------

    def queue(self, name: str) -> Queue:
        """A handle on the queue ``name`` (validated; queues need no creation)."""
        validate_name(name, "queue")
        self._live()
        return Queue(self, name)

    def outbox(self, name: str) -> Outbox:
        """A handle on the outbox ``name`` (validated); its jobs live in a reserved backing queue."""
        validate_name(name, "outbox")
        self._live()
        return Outbox(self, name)

    def transaction(self) -> AbstractContextManager[Any]:
        """A transaction for ``enqueue_tx``: Postgres yields a ``psycopg.Connection``; memory its own."""
        return self._live().transaction()

    def enqueue_tx(self, tx: Any, queue: str, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """Enqueue onto ``queue`` inside the caller's transaction ``tx``: commit publishes, rollback erases."""
        validate_name(queue, "queue")
        return self._enqueue(queue, (payload,), opts, tx, in_caller_tx=True)[0]

    def enqueue_many_tx(
        self, tx: Any, queue: str, payloads: Iterable[Any], opts: EnqueueOpts | None = None
    ) -> list[int]:
        """Enqueue one job per payload onto ``queue`` inside the caller's transaction ``tx``; the ids in order.

        All or nothing: a payload that cannot be encoded, or bad ``opts``, rejects the whole batch
        before any I/O. An empty batch does nothing and returns ``[]``.
        """
        validate_name(queue, "queue")
        return self._enqueue(queue, _batch(payloads), opts, tx, in_caller_tx=True)

    def outbox_enqueue_tx(self, tx: Any, outbox: str, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """Add a message to ``outbox`` inside the caller's transaction ``tx``."""
        validate_name(outbox, "outbox")
        return self._enqueue(outbox_queue(outbox), (payload,), opts, tx, in_caller_tx=True)[0]

    def _enqueue(
        self,
        queue: str,
        payloads: Sequence[Any],
        opts: EnqueueOpts | None,
        tx: Any = None,
        *,
        in_caller_tx: bool = False,
        task: str | None = None,
    ) -> list[int]:
        """Enqueue one job per payload, in a transaction of the engine's own or (``in_caller_tx``) in ``tx``.

        ``task`` names the task the jobs are for (the task layer's).
        """
        opts = _DEFAULT_ENQUEUE if opts is None else _check_opts(opts, EnqueueOpts)
        data = [self._codec.encode(payload) for payload in payloads]
        now = self._clock.now()
        stamps = resolve_enqueue(opts, queue, now)  # every check that needs no I/O, before any
        engine = self._live()
        if in_caller_tx:
            tx = engine.caller_transaction(tx)
        stored = self._stored_config(queue, tx)
        if stored is not None:
            stamps = resolve_enqueue(opts, queue, now, stored)
        telemetry = self._telemetry
        if telemetry is None:
            return engine.enqueue(_new_jobs(queue, data, stamps, task, None), now, tx)
        with telemetry.enqueue(queue, task, len(data)) as trace:
            return engine.enqueue(_new_jobs(queue, data, stamps, task, trace), now, tx)

    def ack_many(self, jobs: Iterable[Job]) -> list[Job]:
        """Ack several claimed jobs in one call; return those whose lease was lost (they change nothing).

        The others are done whatever the lost ones are (ADR 014).
        """
        held = _held(jobs, self)
        if not held:
            return []
        stale = {pair.job_id for pair in self._live().ack([Held(job.id, job._record.fence) for job in held])}
        if self._telemetry is not None:
            self._telemetry.acked([job._record for job in held if job.id not in stale])
        return [job for job in held if job.id in stale]

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job's state and stamps; ``None`` once acked ("done and gone") or if it never existed."""
        engine = self._live()
        if not _valid_id(job_id):
            return None
        record = engine.get_job(job_id)
        if record is None:
            return None
        return _info(record, self._decode_lenient(record.payload))

    def requeue_dead(self, job_id: int) -> bool:
        """Bring a dead job back to its queue with 0 attempts; ``False`` if it is not dead."""
        engine = self._live()
        if not _valid_id(job_id):
            return False
        return bool(engine.requeue_dead((job_id,), self._clock.now()))

    def _decode_lenient(self, data: bytes) -> Any:
        try:
            return self._codec.decode(data)
        except InvalidPayload:
            return bytes(data)

    # -- locks -----------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, ttl: float | timedelta) -> Lock | None:
        """Take the lock ``name`` for ``owner`` for ``ttl``; ``None`` while another owner holds it."""
        validate_name(name, "lock")
        validate_label(owner, "lock owner")
        span = as_duration(ttl, "ttl", allow_zero=False)
        now = self._clock.now()
        record = self._live().try_lock(name, owner, now, now + span)
        return None if record is None else Lock(self, record, span)

    # -- schedules -------------------------------------------------------------------

    def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any = None,
        opts: ScheduleOpts | None = None,
    ) -> Schedule:
        """Register (or update) the schedule ``name`` firing ``payload`` onto ``queue`` every ``spec``.

        Re-registering with the same interval keeps the phase and any backlog; a changed
        interval restarts the phase at now + interval. Returns the schedule as stored.
        """
        return self._register(name, spec, queue, payload, opts)

    def schedule_many(self, entries: Iterable[ScheduleEntry]) -> list[Schedule]:
        """Register (or update) several schedules at once, all or none; each as ``schedule`` would.

        One engine call for the lot (Postgres: one transaction, a few statements), so registering
        thousands of schedules at start-up costs about what one costs. Bad input in any entry, or
        two entries with one name, rejects the whole batch before any I/O.
        """
        if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Iterable):
            raise InvalidArgument(f"entries must be an iterable of ScheduleEntry, not {type(entries).__name__}")
        records: list[NewSchedule] = []
        names: set[str] = set()
        for entry in entries:
            if not isinstance(entry, ScheduleEntry):
                raise InvalidArgument(f"each entry must be an alkstore.ScheduleEntry, not {type(entry).__name__}")
            record = self._new_schedule(entry.name, entry.spec, entry.queue, entry.payload, entry.opts)
            if record.name in names:
                raise InvalidOptions(f"schedule {record.name!r} appears twice in one batch")
            names.add(record.name)
            records.append(record)
        if not records:
            self._live()
            return []
        return [self._schedule(stored) for stored in self._live().register_schedules(records, self._clock.now())]

    def _register(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None, task: str | None = None
    ) -> Schedule:
        """Register one schedule (its fires for ``task``, if given)."""
        record = self._new_schedule(name, spec, queue, payload, opts, task)
        (stored,) = self._live().register_schedules((record,), self._clock.now())
        return self._schedule(stored)

    def _new_schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None, task: str | None = None
    ) -> NewSchedule:
        """A schedule to register, every argument checked (before any I/O)."""
        validate_name(name, "schedule")
        every = parse_spec(spec)
        validate_name(queue, "queue")
        opts = _check_opts(opts, ScheduleOpts)
        data = self._codec.encode(payload)
        expires = opts.expires if isinstance(opts.expires, timedelta) else None
        return NewSchedule(
            name, str(every), every.seconds, queue, data, opts.priority, opts.max_attempts, expires, task
        )

    def unschedule(self, name: str) -> bool:
        """Remove the schedule ``name``; ``False`` if there was none. Already-fired jobs stay."""
        validate_name(name, "schedule")
        return self._live().unschedule(name)

    def schedules(self) -> list[Schedule]:
        """Every registered schedule, ordered by name."""
        return [self._schedule(record) for record in self._live().schedules()]

    def tick(self) -> list[Fire]:
        """Fire every elapsed boundary now, without leadership (safe: the tick locks what it fires).

        A tick too large for one bounded transaction takes several at the same instant; the
        fires come back in the order they were stored.
        """
        engine = self._live()
        fires = _runner.tick_all(engine, self._clock.now(), DEFAULT_BUDGET).fires
        if self._telemetry is not None and fires:
            self._telemetry.fired(fires)
        return list(fires)

    def run_schedules(
        self, stop: StopToken, on_fire: Callable[[Fire], None] | None = None, *, standby: bool = False
    ) -> None:
        """Run the scheduler leader loop until ``stop`` is cancelled (see ``alkstore._runner``).

        Raises ``LeadershipLost`` if another runner leads, or when leadership is lost; with
        ``standby``, stands by instead and leads again when it can, until ``stop``.
        """
        if not isinstance(stop, StopToken):
            raise InvalidArgument(f"stop must be an alkstore.StopToken, not {type(stop).__name__}")
        if on_fire is not None and not callable(on_fire):
            raise InvalidArgument(f"on_fire must be callable or None, not {type(on_fire).__name__}")
        if not isinstance(standby, bool):
            raise InvalidArgument(f"standby must be a bool, not {type(standby).__name__}")
        if self._telemetry is not None:
            on_fire = _reporting(self._telemetry, on_fire)
        if standby:
            _runner.serve_schedules(self._live(), self._clock, stop, on_fire)
        else:
            _runner.run_schedules(self._live(), self._clock, stop, on_fire)

    def _schedule(self, record: ScheduleRecord) -> Schedule:
        return Schedule(
            name=record.name,
            spec=record.spec,
            interval=timedelta(seconds=record.interval_s),
            queue=record.queue,
            payload=self._decode_lenient(record.payload),
            opts=ScheduleOpts(priority=record.priority, max_attempts=record.max_attempts, expires=record.expires),
            next_boundary=record.next_boundary,
            last_boundary=record.last_boundary,
        )

    # -- inspection and actions (ADR 020) ----------------------------------------------
    # Queue names here may also be an outbox's backing queue, as the listings show them.

    def queue_stats(self, queue: str | None = None, *, cap: int | None = STATS_CAP) -> list[QueueStats]:
        """Each queue's ready, delayed, running and dead jobs and its lag now, ordered by name.

        Every queue holding a job (live or dead) appears; with ``queue``, that queue alone.
        Counts stop at ``cap`` (10,000 by default; ``None`` counts everything, at a cost that
        grows with the table), which keeps a call cheap enough to poll every few seconds on
        any table (ADR 020); the lag is exact either way. Reads only.
        """
        if queue is not None:
            validate_listed_queue(queue)
        limit = check_cap(cap)
        engine = self._live()
        now = self._clock.now()
        return [stats_of(counts, now, limit) for counts in engine.queue_counts(now, queue, limit)]

    def jobs(
        self,
        queue: str,
        phase: JobPhase | str = JobPhase.READY,
        *,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> JobPage:
        """A page of ``queue``'s jobs in ``phase``, payloads decoded as ``get_job`` decodes them.

        Orders: ready jobs as claims take them (priority descending, run_at, id); delayed by
        run_at, id; running by id; dead newest death first. Pass the page's ``cursor`` back
        for the next page (``None`` after the last).
        """
        validate_listed_queue(queue)
        wanted = as_phase(phase)
        size = check_page_size(limit)
        after = read_cursor(cursor, queue, wanted)
        engine = self._live()
        records = engine.list_jobs(JobQuery(queue, wanted, self._clock.now(), size + 1, after))
        page = records[:size]
        jobs = tuple(_info(record, self._decode_lenient(record.payload)) for record in page)
        more = len(records) > size
        return JobPage(jobs, write_cursor(queue, wanted, key_of(page[-1], wanted)) if more else None)

    def cancel(self, job_id: int) -> CancelOutcome:
        """Delete the job if it is pending (ready or delayed); else say what it was: running, dead or missing.

        A running job is never cancelled (its claim won), and is reported as such.
        """
        engine = self._live()
        if not _valid_id(job_id):
            return CancelOutcome.MISSING
        for _ in range(_CANCEL_TRIES):
            if engine.cancel((job_id,)):
                return CancelOutcome.CANCELLED
            record = engine.get_job(job_id)
            if record is None:
                return CancelOutcome.MISSING
            if record.state is not JobState.PENDING:
                return CancelOutcome(record.state.value)
            # Running at the cancel, pending again since (retried or released): try once more.
        return CancelOutcome.RUNNING

    def requeue_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        """Bring the dead jobs among ``job_ids`` back to their queues with 0 attempts; return those requeued."""
        if isinstance(job_ids, str | bytes | Mapping) or not isinstance(job_ids, Iterable):
            raise InvalidArgument(f"job_ids must be an iterable of job ids, not {type(job_ids).__name__}")
        ids = sorted({job_id for job_id in job_ids if _valid_id(job_id)})
        engine = self._live()
        now = self._clock.now()
        requeued: list[int] = []
        for start in range(0, len(ids), BATCH):
            requeued.extend(engine.requeue_dead(ids[start : start + BATCH], now))
        return requeued

    def requeue_dead_queue(self, queue: str) -> int:
        """Bring every job that died on ``queue`` so far back with 0 attempts; return how many.

        Works through the dead jobs newest death first, a batch per engine call, so jobs that
        die meanwhile are left for a later call rather than chased.
        """
        validate_listed_queue(queue)
        engine = self._live()
        now = self._clock.now()
        after = JobKey(_MAX_JOB_ID, at=now)
        requeued = 0
        while True:
            page = engine.list_jobs(JobQuery(queue, JobPhase.DEAD, now, BATCH, after))
            if page:
                requeued += len(engine.requeue_dead([record.id for record in page], now))
                after = key_of(page[-1], JobPhase.DEAD)
            if len(page) < BATCH:
                return requeued

    def purge_dead(self, queue: str, older_than: float | timedelta = 0) -> int:
        """Delete ``queue``'s dead jobs that died at least ``older_than`` ago (default: all); return how many."""
        validate_listed_queue(queue)
        span = as_duration(older_than, "older_than")
        engine = self._live()
        before = self._clock.now() - span
        purged = 0
        while True:
            count = engine.purge_dead(queue, before, BATCH)
            purged += count
            if count < BATCH:
                return purged

    def leader(self) -> Leader | None:
        """The scheduler's leader (the owner holding its lease) and its lease end; ``None`` when none leads."""
        engine = self._live()
        lock = engine.read_lock(SCHEDULER_LOCK)
        if lock is None or lock.expires_at <= self._clock.now():
            return None
        return Leader(lock.owner, lock.expires_at)

    def workers(self, within: float | timedelta = 60) -> list[WorkerInfo]:
        """The workers that reported themselves in the last ``within`` (seconds or a timedelta), by id."""
        span = as_duration(within, "within", allow_zero=False)
        engine = self._live()
        return engine.workers(self._clock.now() - span)


class Queue:
    """A named queue: ``enqueue`` jobs, ``claim`` them; its defaults in ``defaults``."""

    __slots__ = ("_store", "name")

    def __init__(self, store: Store, name: str) -> None:
        self._store = store
        self.name = name

    def __repr__(self) -> str:
        return f"<alkstore.Queue {self.name!r}>"

    @property
    def defaults(self) -> QueueDefaults:
        """Visibility timeout, attempts, retry curve and priority this queue's jobs get by default."""
        return self._store._defaults(self.name)

    def configure(self, **settings: Unpack[QueueSettings]) -> QueueDefaults:
        """Store this queue's defaults for every process sharing the storage; return the effective ones.

        Replaces what was stored: a ``None`` falls back to the derived default, all ``None`` removes
        the config. Other stores see it within ``CONFIG_TTL`` of their clocks, the scheduler's
        fires at once. Jobs already queued keep their attempts and priority; their next claim,
        retry and heartbeat use the new lease and curve (ADR 016).
        """
        return self._store._configure(self.name, check_queue_config(self.name, **settings))

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """Store a job now (its own transaction); return its id."""
        return self._store._enqueue(self.name, (payload,), opts)[0]

    def enqueue_many(self, payloads: Iterable[Any], opts: EnqueueOpts | None = None) -> list[int]:
        """Store one job per payload, all with ``opts``, in one transaction of their own; the ids in order.

        All or nothing, as ``Store.enqueue_many_tx``: bad input anywhere rejects the batch before I/O.
        """
        return self._store._enqueue(self.name, _batch(payloads), opts)

    def claim(
        self,
        worker_id: str,
        *,
        wait: float | timedelta | None = None,
        poll_interval: float = 1.0,
        stop: StopToken | None = None,
    ) -> Job | None:
        """Lease the next job to ``worker_id``, or ``None``.

        With ``wait`` (seconds of the store's clock), park until a job arrives, the wait ends
        or ``stop`` is cancelled, looking again at least every ``poll_interval`` wall seconds
        (a lost wake-up costs at most that).
        """
        validate_label(worker_id, "worker id")
        if wait is None:  # the common, non-blocking claim: no deadline to read the clock for
            if poll_interval != 1.0:
                check_poll_interval(poll_interval)
            jobs = self._claim(worker_id, 1)
            return jobs[0] if jobs else None
        span = check_wait(wait)
        interval = check_poll_interval(poll_interval)
        if stop is not None and not isinstance(stop, StopToken):
            raise InvalidArgument(f"stop must be an alkstore.StopToken, not {type(stop).__name__}")
        clock = self._store.clock
        deadline = clock.now() + span
        jobs = self._claim(worker_id, 1)
        if jobs or not span:
            return jobs[0] if jobs else None
        with self._store._live().waiter(self.name) as waiter:
            while stop is None or not stop.is_cancelled():
                jobs = self._claim(worker_id, 1)
                if jobs:
                    return jobs[0]
                pause = claim_wait(deadline, clock.now(), interval)
                if pause is None:
                    return None
                waiter.wait(pause, stop)
        return None

    def claim_many(self, worker_id: str, limit: int) -> list[Job]:
        """Lease up to ``limit`` jobs to ``worker_id`` in one round trip, best first; empty when none is ready."""
        validate_label(worker_id, "worker id")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidArgument(f"limit must be an int, not {type(limit).__name__}")
        if not 1 <= limit <= MAX_CLAIM:
            raise InvalidOptions(f"limit must be between 1 and {MAX_CLAIM}, not {limit}")
        return self._claim(worker_id, limit)

    def _claim(self, worker_id: str, limit: int) -> list[Job]:
        """Claim up to ``limit`` jobs, burying the undecodable and handing back what could not be decoded."""
        return self._ack_and_claim((), worker_id, limit)[1]

    def _ack_and_claim(self, acks: Sequence[Held], worker_id: str, limit: int) -> tuple[list[Held], list[Job]]:
        """Ack ``acks`` and claim up to ``limit`` jobs in one engine call (a worker's); the stale acks and the jobs."""
        store = self._store
        engine = store._live()
        lease = store._defaults(self.name).visibility_timeout
        stale: list[Held] = []
        while True:
            now = store.clock.now()
            request = ClaimRequest(self.name, worker_id, now, lease, limit)
            if acks:
                stale, records = engine.ack_and_claim(acks, request)
                acks = ()
            else:
                records = engine.claim(request)
            if store._telemetry is not None and records:
                store._telemetry.claimed(records, now)
            jobs: list[Job] = []
            handed_back: list[BaseException] = []
            for record in records:
                outcome = decode_claimed(record, store.codec)
                if isinstance(outcome, Decoded):
                    jobs.append(Job(*_fields_of(record, outcome.payload), _store=store, _record=record))
                elif isinstance(outcome, Undecodable):
                    log.error("burying job %s of %r: %s", record.id, self.name, outcome.error)
                    lost = engine.bury((Burial(record.id, record.fence, outcome.error),), now)
                    if store._telemetry is not None and not lost:
                        store._telemetry.buried((record,))
                else:
                    log.warning("handing job %s of %r back: decoding failed: %r", record.id, self.name, outcome.cause)
                    engine.release((Held(record.id, record.fence),), now)
                    handed_back.append(outcome.cause)
            if jobs or not records:
                return stale, jobs
            if handed_back:
                raise handed_back[0]
            # Every job claimed was undecodable and is buried now: look for another.


@dataclass(frozen=True, slots=True, eq=False)
class Job(JobInfo):
    """A claimed job: its fields, and the fenced calls that finish or extend its lease.

    ``ack``, ``retry``, ``fail`` and ``heartbeat`` raise ``LeaseLost`` (changing nothing)
    if the lease lapsed and another worker claimed the job since. A ``Job`` is one claim:
    two are equal when they are the same claim of the same job, whatever their lease end.
    """

    _store: Store = field(repr=False, kw_only=True)
    _record: JobRecord = field(repr=False, kw_only=True)
    _stop: StopToken | None = field(default=None, repr=False, kw_only=True)

    @property
    def stop(self) -> StopToken:
        """Cancelled when this claim should end early: its lease was lost, its timeout passed, or its
        worker is stopping at once. Long work checks it and returns; its outcome would not count."""
        if self._stop is None:
            object.__setattr__(self, "_stop", StopToken())
        assert self._stop is not None
        return self._stop

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Job):
            return NotImplemented
        return (self.id, self._record.fence) == (other.id, other._record.fence)

    def __hash__(self) -> int:
        return hash((Job, self.id, self._record.fence))

    def _fenced(self, stale: list[Held]) -> None:
        if stale:
            raise LeaseLost(f"job {self.id} is no longer held under its claim (fence {self._record.fence})")

    def ack(self) -> None:
        """Done: delete the job."""
        store = self._store
        self._fenced(store._live().ack((Held(self.id, self._record.fence),)))
        if store._telemetry is not None:
            store._telemetry.acked((self._record,))

    def retry(self, error: str | BaseException, delay: float | timedelta | None = None) -> None:
        """Failed this attempt: run again after ``delay`` (``None`` = the queue's curve).

        The error is kept as ``last_error`` (an exception's traceback too); with no attempts
        left the job goes dead instead.
        """
        failed = failure(error)
        store = self._store
        now = store.clock.now()
        outcome = on_failure(self._record, failed, store._defaults(self.queue), delay, now)
        engine = store._live()
        if isinstance(outcome, Retry):
            self._fenced(engine.retry((outcome,), now))
        else:
            self._fenced(engine.bury((outcome,), now))
        if store._telemetry is not None:
            (store._telemetry.retried if isinstance(outcome, Retry) else store._telemetry.buried)((self._record,))

    def release(self) -> None:
        """Hand the job back unfinished, as if this claim never took an attempt: another worker may take it
        at once. Used by a worker stopping before the job could finish."""
        store = self._store
        self._fenced(store._live().release((Held(self.id, self._record.fence),), store.clock.now()))

    def fail(self, error: str | BaseException) -> None:
        """Give up now: the job goes dead with ``error``, whatever attempts are left."""
        failed = failure(error)
        burial = Burial(self.id, self._record.fence, failed.error, failed.traceback)
        store = self._store
        self._fenced(store._live().bury((burial,), store.clock.now()))
        if store._telemetry is not None:
            store._telemetry.buried((self._record,))

    def heartbeat(self) -> datetime:
        """Extend the lease by the job's (or its queue's) visibility timeout from now; return the new lease end."""
        store = self._store
        until = lease_until(self._record, store._defaults(self.queue), store.clock.now())
        self._fenced(store._live().heartbeat((Heartbeat(self.id, self._record.fence, until),)))
        object.__setattr__(self, "lease_until", until)
        return until


class Lock:
    """A held lock on a name. ``token`` grows with every acquisition: use it as a fencing token."""

    __slots__ = ("_record", "_store", "ttl")

    def __init__(self, store: Store, record: LockRecord, ttl: timedelta) -> None:
        self._store = store
        self._record = record
        self.ttl = ttl

    def __repr__(self) -> str:
        return f"<alkstore.Lock {self.name!r} owner={self.owner!r} token={self.token}>"

    @property
    def name(self) -> str:
        return self._record.name

    @property
    def owner(self) -> str:
        return self._record.owner

    @property
    def token(self) -> int:
        return self._record.token

    @property
    def expires_at(self) -> datetime:
        return self._record.expires_at

    def renew(self, ttl: float | timedelta | None = None) -> None:
        """Extend the lock by ``ttl`` (default: the acquiring ttl) from now; ``LeaseLost`` if it lapsed."""
        span = self.ttl if ttl is None else as_duration(ttl, "ttl", allow_zero=False)
        now = self._store.clock.now()
        self._record = self._store._live().renew_lock(self._record, now, now + span)

    def release(self) -> bool:
        """Free the lock; ``False`` if it had already been taken over or released."""
        return self._store._live().release_lock(self._record)

    def __enter__(self) -> Lock:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class Outbox:
    """A transactional outbox: messages enqueued with your data, delivered by ``run_once``."""

    __slots__ = ("_queue", "_store", "name")

    def __init__(self, store: Store, name: str) -> None:
        self._store = store
        self.name = name
        self._queue = Queue(store, outbox_queue(name))

    def __repr__(self) -> str:
        return f"<alkstore.Outbox {self.name!r}>"

    @property
    def queue(self) -> str:
        """The reserved backing queue's name (reachable only through this outbox)."""
        return self._queue.name

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """Add a message in its own transaction (60 s lease, 5 attempts, 5 s backoff base, unless configured)."""
        return self._queue.enqueue(payload, opts)

    def configure(self, **settings: Unpack[QueueSettings]) -> QueueDefaults:
        """Configure the backing queue as ``Queue.configure`` does (its derived defaults: 60/5/5)."""
        return self._queue.configure(**settings)

    def run_once(
        self,
        worker_id: str,
        delivery: Delivery,
        *,
        wait: float | timedelta | None = None,
        poll_interval: float = 1.0,
        stop: StopToken | None = None,
    ) -> bool:
        """Deliver one message: ack on success, retry on the curve on error; ``False`` when empty.

        With ``wait``, park until a message arrives, the wait ends or ``stop`` is cancelled (as
        ``Queue.claim`` does). No heartbeat runs during ``delivery``; a slow delivery may call
        ``job.heartbeat()``.
        """
        if not callable(delivery):
            raise InvalidArgument(f"delivery must be callable, not {type(delivery).__name__}")
        job = self._queue.claim(worker_id, wait=wait, poll_interval=poll_interval, stop=stop)
        if job is None:
            return False
        telemetry = self._store._telemetry
        try:
            if telemetry is None:
                delivery(job.payload, job)
            else:
                telemetry.run(job._record, self._store.clock, lambda: delivery(job.payload, job))
        except Exception as exc:
            log.info("outbox %r: delivery of job %s failed: %s", self.name, job.id, failure(exc).error)
            job.retry(exc)
        else:
            job.ack()
        return True

    def run(self, worker_id: str, delivery: Delivery, stop: StopToken, *, poll_interval: float = 1.0) -> int:
        """The courier loop: deliver messages as they come until ``stop`` is cancelled; return how many.

        Parks on the outbox between messages. A transient database failure is logged and
        waited out (it backs off up to ten seconds); a ``LeaseLost`` from a delivery that outlived
        its lease is logged (another courier has the message) and the loop goes on.
        """
        if not isinstance(stop, StopToken):
            raise InvalidArgument(f"stop must be an alkstore.StopToken, not {type(stop).__name__}")
        delivered = 0
        backoff = _Backoff()
        while not stop.is_cancelled():
            try:
                if self.run_once(worker_id, delivery, wait=_COURIER_WAIT, poll_interval=poll_interval, stop=stop):
                    delivered += 1
                backoff.reset()
            except LeaseLost as exc:
                log.warning("outbox %r: %s", self.name, exc)
            except DatabaseUnavailable as exc:
                pause = backoff.next()
                log.warning("outbox %r: database unavailable (%s); retrying in %.1f s", self.name, exc, pause)
                stop.wait(pause)
        return delivered


#: How long one park of the courier loop lasts before it looks again (it also ends with the stop token).
_COURIER_WAIT = timedelta(seconds=60)


class _Backoff:
    """Waits between retries through an outage: 0.1 s doubling to 10 s, back to the start after a success."""

    __slots__ = ("_next",)

    FIRST = 0.1
    LAST = 10.0

    def __init__(self) -> None:
        self._next = self.FIRST

    def next(self) -> float:
        pause, self._next = self._next, min(self._next * 2, self.LAST)
        return pause

    def reset(self) -> None:
        self._next = self.FIRST


def _new_jobs(queue: str, data: list[bytes], stamps: JobStamps, task: str | None, trace: str | None) -> list[NewJob]:
    """The jobs of one enqueue: one per encoded payload, all stamped alike, each carrying ``trace``."""
    return [
        NewJob(
            queue,
            payload,
            stamps.priority,
            stamps.run_at,
            stamps.expires_at,
            stamps.max_attempts,
            stamps.visibility,
            task,
            trace,
        )
        for payload in data
    ]


def _reporting(telemetry: Telemetry, on_fire: Callable[[Fire], None] | None) -> Callable[[Fire], None]:
    """``on_fire`` (if any) that also reports each fire to ``telemetry``."""

    def report(fire: Fire) -> None:
        telemetry.fired((fire,))
        if on_fire is not None:
            on_fire(fire)

    return report


def _batch(payloads: Iterable[Any]) -> list[Any]:
    """The payloads of a batch enqueue as a list; a string, bytes or a mapping is one payload, not a batch."""
    if isinstance(payloads, str | bytes | bytearray | Mapping) or not isinstance(payloads, Iterable):
        raise InvalidArgument(
            f"payloads must be an iterable of payloads (a list, a generator), not {type(payloads).__name__}"
        )
    return list(payloads)


def _held(jobs: Iterable[Job], store: Store) -> list[Job]:
    """``jobs`` as a list of this store's claimed jobs (``InvalidArgument`` for anything else), each claim once."""
    try:
        each = iter(jobs)
    except TypeError:
        raise InvalidArgument(f"expected an iterable of claimed jobs, not {type(jobs).__name__}") from None
    held: dict[tuple[int, int], Job] = {}
    for job in each:
        if not isinstance(job, Job):
            raise InvalidArgument(f"expected claimed jobs (alkstore.Job), not {type(job).__name__}")
        if job._store is not store:
            raise InvalidArgument(f"job {job.id} was claimed from another store")
        held.setdefault((job.id, job._record.fence), job)
    return list(held.values())


def _valid_id(job_id: object) -> bool:
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        raise InvalidArgument(f"job id must be an int, not {type(job_id).__name__}")
    return 0 < job_id <= _MAX_JOB_ID


_T = TypeVar("_T", EnqueueOpts, ScheduleOpts)


def _check_opts(opts: _T | None, kind: type[_T]) -> _T:
    if opts is None:
        return kind()
    if not isinstance(opts, kind):
        raise InvalidOptions(f"opts must be {kind.__name__}, not {type(opts).__name__}")
    return opts
