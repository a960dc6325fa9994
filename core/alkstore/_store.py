"""The public facades: ``Store`` and its handles, thin layers over an ``Engine``.

The facades own every rule that must not differ between engines: validation before any
I/O, encoding, option resolution, retry curves and the decision to bury an exhausted job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Protocol, TypeVar

from . import _runner
from ._codec import Codec, JsonCodec
from ._names import outbox_queue, validate_label, validate_name
from ._options import (
    EnqueueOpts,
    QueueDefaults,
    ScheduleOpts,
    as_duration,
    queue_defaults,
    resolve_enqueue,
    retry_delay,
)
from ._spec import parse_spec
from ._time import Clock, StopToken, SystemClock
from .engine import Engine, Fire, JobRecord, JobState, LockRecord, NewJob, ScheduleRecord
from .errors import InvalidOptions, InvalidPayload, StoreClosed

__all__ = ["Delivery", "Job", "JobInfo", "Lock", "Outbox", "Queue", "Schedule", "Store"]

log = logging.getLogger("alkstore")

_MAX_JOB_ID = 2**63 - 1
#: The options of an enqueue given none (frozen, so one instance serves every call).
_DEFAULT_ENQUEUE = EnqueueOpts()


class Delivery(Protocol):
    """An outbox delivery: called with the decoded payload and its ``Job``; raising means failure."""

    def __call__(self, payload: Any, job: Job, /) -> None: ...


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of a stored job, as ``Store.get_job`` returns it (payload decoded)."""

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


class Store:
    """One alkstore database (or in-memory store): queues, locks, schedules and outboxes.

    Open one with ``alkstore.open(url)``. Thread-safe; close it (or use ``with``) when done.
    """

    def __init__(self, engine: Engine, *, clock: Clock | None = None, codec: Codec | None = None) -> None:
        self._engine = engine
        self._clock = clock if clock is not None else SystemClock()
        self._codec = codec if codec is not None else JsonCodec()
        self._closed = False

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
            self._engine.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        return self._enqueue(queue, payload, opts, tx)

    def outbox_enqueue_tx(self, tx: Any, outbox: str, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """Add a message to ``outbox`` inside the caller's transaction ``tx``."""
        validate_name(outbox, "outbox")
        return self._enqueue(outbox_queue(outbox), payload, opts, tx)

    _NO_TX: Any = object()

    def _enqueue(self, queue: str, payload: Any, opts: EnqueueOpts | None, tx: Any = _NO_TX) -> int:
        opts = _DEFAULT_ENQUEUE if opts is None else _check_opts(opts, EnqueueOpts)
        data = self._codec.encode(payload)
        engine = self._live()
        now = self._clock.now()
        job = NewJob(queue, data, resolve_enqueue(opts, queue, now))
        if tx is Store._NO_TX:
            return engine.enqueue(job, now)
        return engine.enqueue_tx(tx, job, now)

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job's state and stamps; ``None`` once acked ("done and gone") or if it never existed."""
        engine = self._live()
        if not _valid_id(job_id):
            return None
        record = engine.get_job(job_id)
        return None if record is None else JobInfo(*_fields(record, self._decode_lenient(record.payload)))

    def requeue_dead(self, job_id: int) -> bool:
        """Bring a dead job back to its queue with 0 attempts; ``False`` if it is not dead."""
        engine = self._live()
        if not _valid_id(job_id):
            return False
        return engine.requeue_dead(job_id, self._clock.now())

    def _decode_lenient(self, data: bytes) -> Any:
        try:
            return self._codec.decode(data)
        except InvalidPayload:
            return bytes(data)

    # -- locks -----------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, ttl: float | timedelta) -> Lock | None:
        """Take the lease ``name`` for ``owner`` for ``ttl``; ``None`` while another owner holds it."""
        validate_name(name, "lock")
        return self._try_lock(name, owner, ttl)

    def _try_lock(self, name: str, owner: str, ttl: float | timedelta) -> Lock | None:
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
        validate_name(name, "schedule")
        every = parse_spec(spec)
        validate_name(queue, "queue")
        opts = _check_opts(opts, ScheduleOpts)
        data = self._codec.encode(payload)
        record = self._live().register_schedule(name, every, queue, data, opts, self._clock.now())
        return self._schedule(record)

    def unschedule(self, name: str) -> bool:
        """Remove the schedule ``name``; ``False`` if there was none. Already-fired jobs stay."""
        validate_name(name, "schedule")
        return self._live().unschedule(name)

    def schedules(self) -> list[Schedule]:
        """Every registered schedule, ordered by name."""
        return [self._schedule(record) for record in self._live().schedules()]

    def tick(self) -> list[Fire]:
        """Fire every elapsed boundary now, without leadership (safe: the tick locks what it fires)."""
        return list(self._live().tick(self._clock.now()).fires)

    def run_schedules(self, stop: StopToken, on_fire: Callable[[Fire], None] | None = None) -> None:
        """Run the scheduler leader loop until ``stop`` is cancelled (see ``alkstore._runner``).

        Raises ``LeadershipLost`` if another runner leads, or when leadership is lost.
        """
        _runner.run_schedules(self._live(), self._clock, stop, on_fire)

    def _schedule(self, record: ScheduleRecord) -> Schedule:
        return Schedule(
            name=record.name,
            spec=record.spec,
            interval=timedelta(seconds=record.interval_s),
            queue=record.queue,
            payload=self._decode_lenient(record.payload),
            opts=record.opts,
            next_boundary=record.next_boundary,
        )


class Queue:
    """A named queue: ``enqueue`` jobs, ``claim`` them; derived defaults in ``defaults``."""

    __slots__ = ("_store", "name")

    def __init__(self, store: Store, name: str) -> None:
        self._store = store
        self.name = name

    def __repr__(self) -> str:
        return f"<alkstore.Queue {self.name!r}>"

    @property
    def defaults(self) -> QueueDefaults:
        """Visibility timeout, attempts and retry curve this queue derives."""
        return queue_defaults(self.name)

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """Store a job now (its own transaction); return its id."""
        return self._store._enqueue(self.name, payload, opts)

    def claim(self, worker_id: str, *, wait: float | None = None, poll_interval: float = 1.0) -> Job | None:
        """Lease the next job to ``worker_id``, or ``None``.

        With ``wait`` (seconds of the store's clock), park until a job arrives or the wait
        ends, re-polling at least every ``poll_interval`` wall seconds (a lost wake-up costs
        at most that).
        """
        validate_label(worker_id, "worker id")
        if wait is None:  # the common, non-blocking claim: no deadline to read the clock for
            return self._claim_once(worker_id)
        span = as_duration(wait, "wait")
        clock = self._store.clock
        deadline = clock.now() + span
        job = self._claim_once(worker_id)
        if job is not None or not span:
            return job
        with self._store._live().waiter(self.name) as waiter:
            while True:
                job = self._claim_once(worker_id)
                if job is not None:
                    return job
                remaining = (deadline - clock.now()).total_seconds()
                if remaining <= 0:
                    return None
                waiter.wait(min(remaining, poll_interval))

    def _claim_once(self, worker_id: str) -> Job | None:
        store = self._store
        engine = store._live()
        visibility = queue_defaults(self.name).visibility_timeout
        while True:
            now = store.clock.now()
            record = engine.claim(self.name, worker_id, now, now + visibility)
            if record is None:
                return None
            try:
                payload = store.codec.decode(record.payload)
            except InvalidPayload as exc:
                log.error("burying job %s of %r: %s", record.id, self.name, exc)
                engine.bury(record.id, record.lease, f"undecodable payload: {exc}", now)
                continue
            return Job(*_fields(record, payload), _store=store, _lease=record.lease)


@dataclass(frozen=True, slots=True)
class Job(JobInfo):
    """A claimed job: its fields, and the fenced calls that finish or extend its lease.

    ``ack``, ``retry``, ``fail`` and ``heartbeat`` raise ``LeaseLost`` (changing nothing)
    if the lease lapsed and another worker claimed the job since.
    """

    _store: Store = field(repr=False, compare=False, kw_only=True)
    _lease: int = field(repr=False, compare=False, kw_only=True)

    def ack(self) -> None:
        """Done: delete the job."""
        self._store._live().ack(self.id, self._lease)

    def retry(self, error: str | BaseException, delay: float | timedelta | None = None) -> None:
        """Failed this attempt: run again after ``delay`` (``None`` = the queue's curve).

        The error is kept as ``last_error``; with no attempts left the job goes dead instead.
        """
        message = _error_text(error)
        wait = retry_delay(queue_defaults(self.queue), self.attempts) if delay is None else as_duration(delay, "delay")
        engine = self._store._live()
        now = self._store.clock.now()
        if self.attempts >= self.max_attempts:
            engine.bury(self.id, self._lease, message, now)
        else:
            engine.retry(self.id, self._lease, message, now + wait)

    def fail(self, error: str | BaseException) -> None:
        """Give up now: the job goes dead with ``error``, whatever attempts are left."""
        message = _error_text(error)
        self._store._live().bury(self.id, self._lease, message, self._store.clock.now())

    def heartbeat(self) -> datetime:
        """Extend the lease by the queue's visibility timeout from now; return the new lease end."""
        lease_until = self._store.clock.now() + queue_defaults(self.queue).visibility_timeout
        self._store._live().heartbeat(self.id, self._lease, lease_until)
        object.__setattr__(self, "lease_until", lease_until)
        return lease_until


class Lock:
    """A held lease on a name. ``token`` grows with every acquisition: use it as a fencing token."""

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
        """Extend the lease by ``ttl`` (default: the acquiring ttl) from now; ``LeaseLost`` if it lapsed."""
        span = self.ttl if ttl is None else as_duration(ttl, "ttl", allow_zero=False)
        now = self._store.clock.now()
        self._record = self._store._live().renew_lock(self._record, now, now + span)

    def release(self) -> bool:
        """Free the lease; ``False`` if it had already been taken over or released."""
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
        """Add a message in its own transaction (60 s lease, 5 attempts, 5 s backoff base)."""
        return self._queue.enqueue(payload, opts)

    def run_once(self, worker_id: str, delivery: Delivery) -> bool:
        """Deliver one message: ack on success, retry on the curve on error; ``False`` when empty.

        No heartbeat runs during ``delivery``; a slow delivery may call ``job.heartbeat()``.
        """
        job = self._queue.claim(worker_id)
        if job is None:
            return False
        try:
            delivery(job.payload, job)
        except Exception as exc:
            log.info("outbox %r: delivery of job %s failed: %s", self.name, job.id, exc)
            job.retry(exc)
        else:
            job.ack()
        return True


def _fields(record: JobRecord, payload: Any) -> tuple[Any, ...]:
    return (
        record.id,
        record.queue,
        payload,
        record.state,
        record.priority,
        record.run_at,
        record.expires_at,
        record.attempts,
        record.max_attempts,
        record.last_error,
        record.schedule,
        record.boundary,
        record.enqueued_at,
        record.worker_id,
        record.lease_until,
        record.died_at,
    )


def _valid_id(job_id: object) -> bool:
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        raise TypeError(f"job id must be an int, not {type(job_id).__name__}")
    return 0 < job_id <= _MAX_JOB_ID


_T = TypeVar("_T", EnqueueOpts, ScheduleOpts)


def _check_opts(opts: _T | None, kind: type[_T]) -> _T:
    if opts is None:
        return kind()
    if not isinstance(opts, kind):
        raise InvalidOptions(f"opts must be {kind.__name__}, not {type(opts).__name__}")
    return opts


def _error_text(error: str | BaseException) -> str:
    if isinstance(error, BaseException):
        return str(error) or type(error).__name__
    if not isinstance(error, str):
        raise TypeError(f"error must be a str or an exception, not {type(error).__name__}")
    return error
