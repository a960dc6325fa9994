# GENERATED FILE, DO NOT EDIT: made from core/alkstore/store/_store_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The store: one alkstore database (or in-memory store), and the calls that are not a handle's.

``Store`` validates before any I/O, encodes payloads and resolves options through its
kernel (``_kernel``); queues, jobs, locks and outboxes are handles of their own modules.
``open`` finds the engine for a URL among its runtime's entry points
(``ENGINE_ENTRY_POINTS``). The other runtime's store is generated from this file (ADR 026).

The calls for operators (inspection, kept results, actions on jobs) are in ``_inspection``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from importlib import metadata
from typing import Any

from alkstore.errors import InvalidArgument, InvalidOptions, NotOffered
from alkstore.port._engine import Engine
from alkstore.port._records import Fire, NewSchedule, ScheduleRecord
from alkstore.port._runtime_port import RuntimePort
from alkstore.port._telemetry import TelemetryPort
from alkstore.port._time import Clock, StopToken
from alkstore.rules._args import batch, check_callable, check_stop, valid_id
from alkstore.rules._codec import Codec, JsonCodec
from alkstore.rules._graphs import Graph
from alkstore.rules._names import outbox_queue, validate_label, validate_name
from alkstore.rules._options import EnqueueOpts, ScheduleOpts, as_duration
from alkstore.rules._records import (
    JobId,
    JobInfo,
    Schedule,
    ScheduleEntry,
    info_of,
    new_schedule,
    schedule_of,
)
from alkstore.rules._steps import DEFAULT_EVENT_KEEP
from alkstore.scheduler import _runner as runner
from alkstore.scheduler._runner import OnFire
from alkstore.scheduler._tick import DEFAULT_BUDGET

from ._graphs import enqueue_graph
from ._inspection import _Inspection
from ._job import Job
from ._kernel import Kernel
from ._locks import Lock
from ._outbox import Outbox
from ._queue import Queue
from ._steps import job_steps

__all__ = ["Store", "open"]

#: Where the engines of this runtime are found, by URL scheme.
ENGINE_ENTRY_POINTS = "alkstore.engines"

#: A libpq connection string: ``key=value`` pairs separated by white space.
_CONNINFO = re.compile(r"\s*[A-Za-z_]+\s*=")


def check_store_options(clock: object, codec: object, telemetry: object) -> None:
    """Refuse a ``clock``, ``codec`` or ``telemetry`` of the wrong kind (``None`` is each one's default)."""
    if clock is not None and not isinstance(clock, Clock):
        raise InvalidOptions(f"clock must be an alkstore.Clock, not {type(clock).__name__}")
    if codec is not None and not isinstance(codec, Codec):
        raise InvalidOptions(f"codec must be an alkstore.Codec, not {type(codec).__name__}")
    if telemetry is not None and not isinstance(telemetry, TelemetryPort):
        raise InvalidOptions(f"telemetry must be an alkstore.telemetry.Telemetry, not {type(telemetry).__name__}")


def open(
    url: str,
    *,
    clock: Clock | None = None,
    codec: Codec | None = None,
    telemetry: TelemetryPort | None = None,
    **options: Any,
) -> Store:
    """Open a store on ``url``: ``memory://`` or ``postgresql://…`` (also ``postgres://…``).

    ``clock`` stamps every job and lease (default: the engine's, which every host sharing the
    storage agrees on: the database server's clock on Postgres); ``codec`` (default: JSON,
    bytes kept as bytes) encodes payloads; ``telemetry`` receives the store's events (ADR 024:
    ``alkstore.adapters.otel.Telemetry`` reports them to OpenTelemetry); other keyword
    ``options`` go to the engine (Postgres: ``schema``, ``min_size``, ``max_size``,
    ``migrate``, …). The engine is found by URL scheme among the engines' entry points, so core
    imports no adapter.
    """
    if isinstance(url, str) and "://" not in url and _CONNINFO.match(url):
        scheme = "postgresql"  # a libpq key=value connection string (host=… dbname=…) is PostgreSQL's
    elif not isinstance(url, str) or "://" not in url:
        raise InvalidOptions(
            f"expected a URL such as 'memory://' or 'postgresql://…', or a libpq 'key=value …' string, not {url!r}"
        )
    else:
        # A SQLAlchemy-style scheme names its driver after a "+" (postgresql+psycopg): the engine is
        # the dialect's, and checks the driver itself.
        scheme = url.split("://", 1)[0].lower().partition("+")[0]
    check_store_options(clock, codec, telemetry)  # before the engine opens anything
    found = metadata.entry_points(group=ENGINE_ENTRY_POINTS, name=scheme)
    if not found:
        known = sorted(ep.name for ep in metadata.entry_points(group=ENGINE_ENTRY_POINTS))
        raise InvalidOptions(f"no alkstore engine for scheme {scheme!r} (installed: {', '.join(known) or 'none'})")
    factory = next(iter(found)).load()
    return Store(factory(url, **options), clock=clock, codec=codec, telemetry=telemetry)


class Store(_Inspection):
    """One alkstore database (or in-memory store): queues, locks, schedules and outboxes.

    Open one with ``open(url)`` (the sync runtime: ``open``). Safe to share between the
    tasks (threads) of its runtime; close it (or use it as a context manager) when done.
    ``telemetry`` receives its events (ADR 024; ``alkstore.adapters.otel`` for OpenTelemetry).
    """

    __slots__ = ("_kernel",)

    def __init__(
        self,
        engine: RuntimePort,
        *,
        clock: Clock | None = None,
        codec: Codec | None = None,
        telemetry: TelemetryPort | None = None,
    ) -> None:
        if not isinstance(engine, RuntimePort):
            raise InvalidArgument(
                f"engine must be an alkstore.engine.Engine (or RuntimePort), not {type(engine).__name__}"
            )
        check_store_options(clock, codec, telemetry)
        self._kernel = Kernel(
            engine,
            clock if clock is not None else engine.default_clock(),
            codec if codec is not None else JsonCodec(),
            telemetry,
        )
        if telemetry is not None:
            telemetry.opened(self)

    def __repr__(self) -> str:
        state = " closed" if self._kernel.closed else ""
        return f"<alkstore.{type(self).__name__} engine={type(self._kernel.engine).__name__}{state}>"

    @property
    def clock(self) -> Clock:
        """The clock every stamp and lease of this store is computed from."""
        return self._kernel.clock

    @property
    def codec(self) -> Codec:
        """The payload codec."""
        return self._kernel.codec

    @property
    def engine(self) -> Engine:
        """The storage adapter behind this store; ``NotOffered`` if it stops at the runtime port (ADR 062)."""
        engine = self._kernel.engine
        if not isinstance(engine, Engine):
            raise NotOffered(
                f"{type(self).__name__}.engine is an Engine, and the {type(engine).__name__} engine "
                "implements the runtime port only"
            )
        return engine

    # -- lifecycle -------------------------------------------------------------------

    def migrate(self) -> None:
        """Create or upgrade the storage schema (idempotent; a no-op in memory)."""
        self._kernel.live().migrate()

    def close(self) -> None:
        """Release connections; later calls raise ``StoreClosed``. Idempotent."""
        kernel = self._kernel
        if kernel.close():
            if kernel.telemetry is not None:
                kernel.telemetry.closed(self)
            kernel.engine.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- queues and jobs -------------------------------------------------------------

    def queue(self, name: str) -> Queue:
        """A handle on the queue ``name`` (validated; queues need no creation)."""
        validate_name(name, "queue")
        self._kernel.live()
        return Queue(self._kernel, name)

    def outbox(self, name: str) -> Outbox:
        """A handle on the outbox ``name`` (validated); its jobs live in a reserved backing queue."""
        validate_name(name, "outbox")
        self._kernel.live()
        return Outbox(self._kernel, name)

    def transaction(self) -> AbstractContextManager[Any]:
        """A transaction for ``enqueue_tx``: Postgres yields a psycopg connection in a transaction; memory its own."""
        return self._kernel.live().transaction()

    def enqueue_tx(self, tx: Any, queue: str, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Enqueue onto ``queue`` inside the caller's transaction ``tx``: commit publishes, rollback erases."""
        validate_name(queue, "queue")
        return (self._kernel.enqueue(queue, (payload,), opts, tx, in_caller_tx=True))[0]

    def enqueue_many_tx(
        self, tx: Any, queue: str, payloads: Iterable[Any], opts: EnqueueOpts | None = None
    ) -> list[JobId]:
        """Enqueue one job per payload onto ``queue`` inside the caller's transaction ``tx``; the ids in order.

        All or nothing: a payload that cannot be encoded, or bad ``opts``, rejects the whole batch
        before any I/O. An empty batch does nothing and returns ``[]``.
        """
        validate_name(queue, "queue")
        return self._kernel.enqueue(queue, batch(payloads), opts, tx, in_caller_tx=True)

    def graph(self) -> Graph:
        """A new, empty ``Graph`` of jobs that wait on each other, for ``enqueue_graph`` (ADR 073)."""
        self._kernel.live()
        return Graph()

    def enqueue_graph(self, graph: Graph) -> dict[str, JobId]:
        """Enqueue every job of ``graph`` in one transaction, parents first; each job's id by its key.

        ``DependencyCycle`` for jobs that wait on each other in a circle and ``UnknownParent`` for an
        ``after`` id of no stored job: nothing is written then.
        """
        return enqueue_graph(self._kernel, graph)

    def enqueue_graph_tx(self, tx: Any, graph: Graph) -> dict[str, JobId]:
        """``enqueue_graph`` inside the caller's transaction ``tx``: commit publishes, rollback erases."""
        return enqueue_graph(self._kernel, graph, tx, in_caller_tx=True)

    def outbox_enqueue_tx(self, tx: Any, outbox: str, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Add a message to ``outbox`` inside the caller's transaction ``tx``."""
        validate_name(outbox, "outbox")
        return (self._kernel.enqueue(outbox_queue(outbox), (payload,), opts, tx, in_caller_tx=True))[0]

    def ack_many(self, jobs: Iterable[Job]) -> list[Job]:
        """Ack several claimed jobs in one call; return those whose lease was lost (they change nothing).

        The others are done whatever the lost ones are (ADR 014).
        """
        kernel = self._kernel
        held = _held(jobs, kernel)
        if not held:
            return []
        acks = [(job, kernel.finished(job, None)) for job in held]  # kept (result None) where results are kept
        stale = {pair.job_id for pair in kernel.ack_many(acks)}
        return [job for job in held if job.id in stale]

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job's state and stamps; ``None`` once acked ("done and gone") or if it never existed."""
        engine = self._kernel.live()
        if not valid_id(job_id):
            return None
        record = engine.get_job(job_id)
        if record is None:
            return None
        info = info_of(record, self._kernel.decode_lenient(record.payload))
        return info if self._kernel.stepper_or_none() is None else job_steps(self._kernel, info)

    # -- events (ADR 069) --------------------------------------------------------------

    def emit(self, name: str, payload: Any = None, keep: float | timedelta = DEFAULT_EVENT_KEEP) -> bool:
        """Emit the event ``name``: every job waiting for it wakes with ``payload``, and one that waits later
        within ``keep`` gets it too. The first emit of a name wins; whether this one was it."""
        return self._kernel.stepper().emit(name, payload, keep)

    def emit_tx(
        self, tx: Any, name: str, payload: Any = None, keep: float | timedelta = DEFAULT_EVENT_KEEP
    ) -> bool:
        """``emit`` inside the caller's transaction ``tx``: its waiters wake once it commits, none if it rolls back."""
        return self._kernel.stepper().emit(name, payload, keep, tx, in_caller_tx=True)

    # -- locks -----------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, ttl: float | timedelta) -> Lock | None:
        """Take the lock ``name`` for ``owner`` for ``ttl``; ``None`` while another owner holds it."""
        validate_name(name, "lock")
        validate_label(owner, "lock owner")
        span = as_duration(ttl, "ttl", allow_zero=False)
        now = self._kernel.clock.now()
        record = self._kernel.live().try_lock(name, owner, now, now + span)
        return None if record is None else Lock(self._kernel, record, span)

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
        (stored,) = self._kernel.register((new_schedule(self._kernel.codec, name, spec, queue, payload, opts),))
        return self._schedule(stored)

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
            record = new_schedule(self._kernel.codec, entry.name, entry.spec, entry.queue, entry.payload, entry.opts)
            if record.name in names:
                raise InvalidOptions(f"schedule {record.name!r} appears twice in one batch")
            names.add(record.name)
            records.append(record)
        if not records:
            self._kernel.live()
            return []
        return [self._schedule(stored) for stored in self._kernel.register(records)]

    def unschedule(self, name: str) -> bool:
        """Remove the schedule ``name``; ``False`` if there was none. Already-fired jobs stay."""
        validate_name(name, "schedule")
        return self._kernel.live().unschedule(name)

    def schedules(self) -> list[Schedule]:
        """Every registered schedule, ordered by name."""
        return [self._schedule(record) for record in self._kernel.live().schedules()]

    def fire_now(self, name: str) -> JobId | None:
        """Enqueue now the job a fire of schedule ``name`` enqueues (its payload, task, priority, attempts and
        expiry, resolved over its queue's settings as a fire's are), leaving its boundaries as they are; the
        job's id, or ``None`` when there is no such schedule. The job carries no schedule or boundary: no
        boundary was fired (ADR 048).
        """
        validate_name(name, "schedule")
        kernel = self._kernel
        record = next((each for each in kernel.live().schedules() if each.name == name), None)
        if record is None:
            return None
        opts = EnqueueOpts(priority=record.priority, max_attempts=record.max_attempts, expires=record.expires)
        payload = kernel.decode_lenient(record.payload)
        return (kernel.enqueue(record.queue, (payload,), opts, task=record.task))[0]

    def tick(self) -> list[Fire]:
        """Fire every elapsed boundary now, without leadership (safe: the tick locks what it fires).

        A tick too large for one bounded transaction takes several at the same instant; the
        fires come back in the order they were stored.
        """
        kernel = self._kernel
        fires = (runner.tick_all(kernel.live(), kernel.clock.now(), DEFAULT_BUDGET)).fires
        if kernel.telemetry is not None and fires:
            kernel.telemetry.fired(fires)
        return list(fires)

    def run_schedules(self, stop: StopToken, on_fire: OnFire | None = None, *, standby: bool = False) -> None:
        """Run the scheduler leader loop until ``stop`` is cancelled (see ``alkstore.scheduler._runner``).

        Raises ``LeadershipLost`` if another runner leads, or when leadership is lost; with
        ``standby``, stands by instead and leads again when it can, until ``stop``.
        """
        check_stop(stop)
        check_callable(on_fire, "on_fire", optional=True)
        if not isinstance(standby, bool):
            raise InvalidArgument(f"standby must be a bool, not {type(standby).__name__}")
        kernel = self._kernel
        if kernel.telemetry is not None:
            on_fire = _reporting(kernel.telemetry, on_fire)
        if standby:
            runner.serve_schedules(kernel.live(), kernel.clock, stop, on_fire)
        else:
            runner.run_schedules(kernel.live(), kernel.clock, stop, on_fire)

    def _schedule(self, record: ScheduleRecord) -> Schedule:
        return schedule_of(record, self._kernel.decode_lenient(record.payload))


def _reporting(telemetry: TelemetryPort, on_fire: OnFire | None) -> OnFire:
    """``on_fire`` (if any) that also reports each fire to ``telemetry``."""

    def report(fire: Fire) -> object:
        telemetry.fired((fire,))
        return None if on_fire is None else on_fire(fire)

    return report


def _held(jobs: Iterable[Job], kernel: Kernel) -> list[Job]:
    """``jobs`` as a list of this store's claimed jobs (``InvalidArgument`` for anything else), each claim once."""
    try:
        each = iter(jobs)
    except TypeError:
        raise InvalidArgument(f"expected an iterable of claimed jobs, not {type(jobs).__name__}") from None
    held: dict[tuple[int, int], Job] = {}
    for job in each:
        if not isinstance(job, Job):
            raise InvalidArgument(f"expected claimed jobs (alkstore.{Job.__name__}), not {type(job).__name__}")
        if not kernel.owns(job):
            raise InvalidArgument(f"job {job.id} was claimed from another store")
        held.setdefault((job.id, kernel.record_of(job).fence), job)
    return list(held.values())
