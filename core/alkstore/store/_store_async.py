"""The store: one alkstore database (or in-memory store), and the calls that are not a handle's.

``AsyncStore`` validates before any I/O, encodes payloads and resolves options through its
kernel (``_kernel_async``); queues, jobs, locks and outboxes are handles of their own modules.
``open_async`` finds the engine for a URL among its runtime's entry points
(``ENGINE_ENTRY_POINTS``). The other runtime's store is generated from this file (ADR 026).

Over 500 lines: one method per public call of the store, each a few lines of validation over the
kernel; the rules they apply live in core's rule modules, the handles in their own.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from functools import partial
from importlib import metadata
from typing import Any

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._acompat import ASYNC
from alkstore.port._engine_async import AsyncEngine
from alkstore.port._records import Fire, JobKey, JobPhase, JobQuery, JobState, NewSchedule, ScheduleRecord
from alkstore.port._time import Clock, StopToken
from alkstore.rules._args import batch, check_callable, check_stop, check_store_options, ids_of, valid_id
from alkstore.rules._codec import Codec, JsonCodec
from alkstore.rules._names import SCHEDULER_LOCK, outbox_queue, validate_label, validate_listed_queue, validate_name
from alkstore.rules._operations import (
    BATCH,
    DEFAULT_PAGE,
    RESULTS_LISTING,
    STATS_CAP,
    as_phase,
    check_cap,
    check_minutes,
    check_page_size,
    containment_probe,
    minute_of,
    read_cursor,
    stats_of,
    write_cursor,
)
from alkstore.rules._options import EnqueueOpts, ScheduleOpts, as_duration
from alkstore.rules._orders import key_of
from alkstore.rules._records import (
    CancelOutcome,
    JobId,
    JobInfo,
    JobPage,
    Leader,
    QueueStats,
    Schedule,
    ScheduleEntry,
    ThroughputInfo,
    WorkerInfo,
    info_of,
    new_schedule,
    schedule_of,
)
from alkstore.rules._results import JobResult, ResultPage, result_of
from alkstore.scheduler import _runner_async as runner
from alkstore.scheduler._runner_async import OnFire
from alkstore.scheduler._tick import DEFAULT_BUDGET
from alkstore.telemetry import Telemetry

from ._kernel_async import AsyncKernel
from ._locks_async import AsyncLock
from ._outbox_async import AsyncOutbox
from ._queue_async import AsyncJob, AsyncQueue

__all__ = ["AsyncStore", "open_async"]

#: Where the engines of this runtime are found, by URL scheme.
ENGINE_ENTRY_POINTS = "alkstore.async_engines" if ASYNC else "alkstore.engines"

#: A libpq connection string: ``key=value`` pairs separated by white space.
_CONNINFO = re.compile(r"\s*[A-Za-z_]+\s*=")
#: How often ``cancel`` tries a job that was running at its cancel and pending just after.
_CANCEL_TRIES = 3


async def open_async(
    url: str,
    *,
    clock: Clock | None = None,
    codec: Codec | None = None,
    telemetry: Telemetry | None = None,
    **options: Any,
) -> AsyncStore:
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
    return AsyncStore(await factory(url, **options), clock=clock, codec=codec, telemetry=telemetry)


class AsyncStore:
    """One alkstore database (or in-memory store): queues, locks, schedules and outboxes.

    Open one with ``open_async(url)`` (the sync runtime: ``open``). Safe to share between the
    tasks (threads) of its runtime; close it (or use it as a context manager) when done.
    ``telemetry`` receives its events (ADR 024; ``alkstore.adapters.otel`` for OpenTelemetry).
    """

    __slots__ = ("_kernel",)

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock | None = None,
        codec: Codec | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        if not isinstance(engine, AsyncEngine):
            raise InvalidArgument(f"engine must be an alkstore.engine.AsyncEngine, not {type(engine).__name__}")
        check_store_options(clock, codec, telemetry)
        self._kernel = AsyncKernel(
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
    def engine(self) -> AsyncEngine:
        """The storage adapter behind this store."""
        return self._kernel.engine

    # -- lifecycle -------------------------------------------------------------------

    async def migrate(self) -> None:
        """Create or upgrade the storage schema (idempotent; a no-op in memory)."""
        await self._kernel.live().migrate()

    async def close(self) -> None:
        """Release connections; later calls raise ``StoreClosed``. Idempotent."""
        kernel = self._kernel
        if kernel.close():
            if kernel.telemetry is not None:
                kernel.telemetry.closed(self)
            await kernel.engine.close()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- queues and jobs -------------------------------------------------------------

    def queue(self, name: str) -> AsyncQueue:
        """A handle on the queue ``name`` (validated; queues need no creation)."""
        validate_name(name, "queue")
        self._kernel.live()
        return AsyncQueue(self._kernel, name)

    def outbox(self, name: str) -> AsyncOutbox:
        """A handle on the outbox ``name`` (validated); its jobs live in a reserved backing queue."""
        validate_name(name, "outbox")
        self._kernel.live()
        return AsyncOutbox(self._kernel, name)

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A transaction for ``enqueue_tx``: Postgres yields a psycopg connection in a transaction; memory its own."""
        return self._kernel.live().transaction()

    async def enqueue_tx(self, tx: Any, queue: str, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Enqueue onto ``queue`` inside the caller's transaction ``tx``: commit publishes, rollback erases."""
        validate_name(queue, "queue")
        return (await self._kernel.enqueue(queue, (payload,), opts, tx, in_caller_tx=True))[0]

    async def enqueue_many_tx(
        self, tx: Any, queue: str, payloads: Iterable[Any], opts: EnqueueOpts | None = None
    ) -> list[JobId]:
        """Enqueue one job per payload onto ``queue`` inside the caller's transaction ``tx``; the ids in order.

        All or nothing: a payload that cannot be encoded, or bad ``opts``, rejects the whole batch
        before any I/O. An empty batch does nothing and returns ``[]``.
        """
        validate_name(queue, "queue")
        return await self._kernel.enqueue(queue, batch(payloads), opts, tx, in_caller_tx=True)

    async def outbox_enqueue_tx(self, tx: Any, outbox: str, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Add a message to ``outbox`` inside the caller's transaction ``tx``."""
        validate_name(outbox, "outbox")
        return (await self._kernel.enqueue(outbox_queue(outbox), (payload,), opts, tx, in_caller_tx=True))[0]

    async def ack_many(self, jobs: Iterable[AsyncJob]) -> list[AsyncJob]:
        """Ack several claimed jobs in one call; return those whose lease was lost (they change nothing).

        The others are done whatever the lost ones are (ADR 014).
        """
        kernel = self._kernel
        held = _held(jobs, kernel)
        if not held:
            return []
        acks = [await kernel.finished(job, None) for job in held]  # kept (result None) where the queue keeps results
        stale = {pair.job_id for pair in await kernel.live().ack(acks)}
        if kernel.telemetry is not None:
            kernel.telemetry.acked([kernel.record_of(job) for job in held if job.id not in stale])
        return [job for job in held if job.id in stale]

    async def get_job(self, job_id: int) -> JobInfo | None:
        """The job's state and stamps; ``None`` once acked ("done and gone") or if it never existed."""
        engine = self._kernel.live()
        if not valid_id(job_id):
            return None
        record = await engine.get_job(job_id)
        if record is None:
            return None
        return info_of(record, self._kernel.decode_lenient(record.payload))

    async def result(self, job_id: int) -> JobResult | None:
        """The kept outcome of the job (its queue's ``keep_results``, ADR 042); ``None`` if it has none:
        not done yet, done while its queue kept no results, or pruned since."""
        engine = self._kernel.live()
        if not valid_id(job_id):
            return None
        record = await engine.get_result(job_id)
        return None if record is None else result_of(record, self._kernel.decode_lenient)

    async def results(self, queue: str, *, limit: int = DEFAULT_PAGE, cursor: str | None = None) -> ResultPage:
        """A page of ``queue``'s kept results, newest first (``finished_at``, then id, descending); pass the
        page's ``cursor`` back for the next (``None`` after the last)."""
        validate_listed_queue(queue)
        size = check_page_size(limit)
        after = read_cursor(cursor, queue, RESULTS_LISTING)
        kernel = self._kernel
        records = await kernel.live().list_results(queue, size + 1, after)
        page = records[:size]
        results = tuple(result_of(record, kernel.decode_lenient) for record in page)
        more = len(records) > size
        last = JobKey(page[-1].id, at=page[-1].finished_at) if more else None
        return ResultPage(results, None if last is None else write_cursor(queue, RESULTS_LISTING, last))

    async def purge_results(self, queue: str | None = None) -> int:
        """Delete the kept results past their ``keep_until`` (of ``queue``, or of every queue); return how many."""
        if queue is not None:
            validate_listed_queue(queue)
        engine = self._kernel.live()
        return await _in_batches(partial(engine.purge_results, queue, self._kernel.clock.now()))

    async def requeue_dead(self, job_id: int) -> bool:
        """Bring a dead job back to its queue with 0 attempts; ``False`` if it is not dead."""
        engine = self._kernel.live()
        if not valid_id(job_id):
            return False
        return bool(await engine.requeue_dead((job_id,), self._kernel.clock.now()))

    # -- locks -----------------------------------------------------------------------

    async def try_lock(self, name: str, owner: str, ttl: float | timedelta) -> AsyncLock | None:
        """Take the lock ``name`` for ``owner`` for ``ttl``; ``None`` while another owner holds it."""
        validate_name(name, "lock")
        validate_label(owner, "lock owner")
        span = as_duration(ttl, "ttl", allow_zero=False)
        now = self._kernel.clock.now()
        record = await self._kernel.live().try_lock(name, owner, now, now + span)
        return None if record is None else AsyncLock(self._kernel, record, span)

    # -- schedules -------------------------------------------------------------------

    async def schedule(
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
        (stored,) = await self._kernel.register((new_schedule(self._kernel.codec, name, spec, queue, payload, opts),))
        return self._schedule(stored)

    async def schedule_many(self, entries: Iterable[ScheduleEntry]) -> list[Schedule]:
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
        return [self._schedule(stored) for stored in await self._kernel.register(records)]

    async def unschedule(self, name: str) -> bool:
        """Remove the schedule ``name``; ``False`` if there was none. Already-fired jobs stay."""
        validate_name(name, "schedule")
        return await self._kernel.live().unschedule(name)

    async def schedules(self) -> list[Schedule]:
        """Every registered schedule, ordered by name."""
        return [self._schedule(record) for record in await self._kernel.live().schedules()]

    async def fire_now(self, name: str) -> JobId | None:
        """Enqueue now the job a fire of schedule ``name`` enqueues (its payload, task, priority, attempts and
        expiry, resolved over its queue's settings as a fire's are), leaving its boundaries as they are; the
        job's id, or ``None`` when there is no such schedule. The job carries no schedule or boundary: no
        boundary was fired (ADR 048).
        """
        validate_name(name, "schedule")
        kernel = self._kernel
        record = next((each for each in await kernel.live().schedules() if each.name == name), None)
        if record is None:
            return None
        opts = EnqueueOpts(priority=record.priority, max_attempts=record.max_attempts, expires=record.expires)
        payload = kernel.decode_lenient(record.payload)
        return (await kernel.enqueue(record.queue, (payload,), opts, task=record.task))[0]

    async def tick(self) -> list[Fire]:
        """Fire every elapsed boundary now, without leadership (safe: the tick locks what it fires).

        A tick too large for one bounded transaction takes several at the same instant; the
        fires come back in the order they were stored.
        """
        kernel = self._kernel
        fires = (await runner.tick_all(kernel.live(), kernel.clock.now(), DEFAULT_BUDGET)).fires
        if kernel.telemetry is not None and fires:
            kernel.telemetry.fired(fires)
        return list(fires)

    async def run_schedules(self, stop: StopToken, on_fire: OnFire | None = None, *, standby: bool = False) -> None:
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
            await runner.serve_schedules(kernel.live(), kernel.clock, stop, on_fire)
        else:
            await runner.run_schedules(kernel.live(), kernel.clock, stop, on_fire)

    def _schedule(self, record: ScheduleRecord) -> Schedule:
        return schedule_of(record, self._kernel.decode_lenient(record.payload))

    # -- inspection and actions (ADR 020) ----------------------------------------------
    # Queue names here may also be an outbox's backing queue, as the listings show them.

    async def queue_stats(self, queue: str | None = None, *, cap: int | None = STATS_CAP) -> list[QueueStats]:
        """Each queue's ready, delayed, running and dead jobs and its lag now, ordered by name.

        Every queue holding a job (live or dead) appears, and every paused queue (an empty one too, so it
        can be seen paused and resumed); with ``queue``, that queue alone.
        Counts stop at ``cap`` (10,000 by default; ``None`` counts everything, at a cost that
        grows with the table), which keeps a call cheap enough to poll every few seconds on
        any table (ADR 020); the lag is exact either way. Reads only.
        """
        if queue is not None:
            validate_listed_queue(queue)
        limit = check_cap(cap)
        engine = self._kernel.live()
        now = self._kernel.clock.now()
        return [stats_of(counts, now, limit) for counts in await engine.queue_counts(now, queue, limit)]

    async def jobs(
        self,
        queue: str,
        phase: JobPhase | str = JobPhase.READY,
        *,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
        contains: Any = None,
        reverse: bool = False,
        task: str | None = None,
    ) -> JobPage:
        """A page of ``queue``'s jobs in ``phase``, payloads decoded as ``get_job`` decodes them.

        Orders: ready jobs as claims take them (priority descending, run_at, id); delayed by
        run_at, id; running by id; dead newest death first. Pass the page's ``cursor`` back
        for the next page (``None`` after the last), with the same ``contains`` and ``task``.

        ``contains`` (a JSON object or array; the JSON codec only) keeps the jobs whose payload
        contains it, as PostgreSQL's ``jsonb @>`` does: ``{"customer": 42}`` matches
        ``{"customer": 42, "total": 9}``. No index serves it: a filtered page reads the phase's
        jobs in order until it has ``limit`` matches, so it is for finding jobs, not for polling.

        ``task`` keeps the jobs of that task (``Task.name``): on PostgreSQL a filtered page reads the
        phase's jobs in order until it has ``limit`` of the task's, as ``contains`` does (ADR 048).

        ``reverse`` pages the same jobs in the order turned round (ready: lowest priority, newest
        first; delayed: latest due; running: newest; dead: oldest death first).
        """
        validate_listed_queue(queue)
        wanted = as_phase(phase)
        size = check_page_size(limit)
        if not isinstance(reverse, bool):
            raise InvalidArgument(f"reverse must be a bool, not {type(reverse).__name__}")
        if task is not None:
            validate_label(task, "task")
        after = read_cursor(cursor, queue, wanted, reverse)
        kernel = self._kernel
        probe = containment_probe(kernel.codec, contains)
        query = JobQuery(queue, wanted, kernel.clock.now(), size + 1, after, probe, reverse, task)
        records = await kernel.live().list_jobs(query)
        page = records[:size]
        jobs = tuple(info_of(record, kernel.decode_lenient(record.payload)) for record in page)
        more = len(records) > size
        return JobPage(jobs, write_cursor(queue, wanted, key_of(page[-1], wanted), reverse) if more else None)

    async def cancel(self, job_id: int) -> CancelOutcome:
        """Cancel the job: a pending one (ready, delayed or waiting) is deleted at once; a running one is
        marked, its worker stops the run at its next look (within seconds) and the job ends cancelled
        whatever the run comes to, or once its lease lapses if its worker died (``CANCELLING``,
        ADR 035). A dead or missing job is reported as such.
        """
        engine = self._kernel.live()
        if not valid_id(job_id):
            return CancelOutcome.MISSING
        for _ in range(_CANCEL_TRIES):
            if await engine.cancel((job_id,)):
                return CancelOutcome.CANCELLED
            if await engine.request_cancel((job_id,)):
                return CancelOutcome.CANCELLING
            record = await engine.get_job(job_id)
            if record is None:
                return CancelOutcome.MISSING
            if record.state is JobState.DEAD:
                return CancelOutcome.DEAD
            # Claimed between the two calls, or pending again since: try once more.
        return CancelOutcome.CANCELLING

    async def requeue_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        """Bring the dead jobs among ``job_ids`` back to their queues with 0 attempts; return those requeued."""
        ids = ids_of(job_ids)
        engine = self._kernel.live()
        now = self._kernel.clock.now()
        requeued: list[int] = []
        for start in range(0, len(ids), BATCH):
            requeued.extend(await engine.requeue_dead(ids[start : start + BATCH], now))
        return requeued

    async def requeue_dead_queue(self, queue: str) -> int:
        """Bring every job that died on ``queue`` so far back with 0 attempts; return how many.

        Works through the dead jobs newest death first, a batch per engine call, so jobs that
        die meanwhile are left for a later call rather than chased.
        """
        validate_listed_queue(queue)
        engine = self._kernel.live()
        now = self._kernel.clock.now()
        after = JobKey(2**63 - 1, at=now)
        requeued = 0
        while True:
            page = await engine.list_jobs(JobQuery(queue, JobPhase.DEAD, now, BATCH, after))
            if page:
                requeued += len(await engine.requeue_dead([record.id for record in page], now))
                after = key_of(page[-1], JobPhase.DEAD)
            if len(page) < BATCH:
                return requeued

    async def purge_dead(self, queue: str, older_than: float | timedelta = 0) -> int:
        """Delete ``queue``'s dead jobs that died at least ``older_than`` ago (default: all); return how many."""
        validate_listed_queue(queue)
        span = as_duration(older_than, "older_than")
        engine = self._kernel.live()
        return await _in_batches(partial(engine.purge_dead, queue, self._kernel.clock.now() - span))

    async def purge_dead_many(self, job_ids: Iterable[int]) -> list[int]:
        """Delete the dead jobs among ``job_ids`` (live ones are never touched); return those deleted, ascending."""
        ids = ids_of(job_ids)
        engine = self._kernel.live()
        purged: list[int] = []
        for start in range(0, len(ids), BATCH):
            purged.extend(await engine.purge_dead_jobs(ids[start : start + BATCH]))
        return purged

    async def leader(self) -> Leader | None:
        """The scheduler's leader (the owner holding its lease) and its lease end; ``None`` when none leads."""
        engine = self._kernel.live()
        lock = await engine.read_lock(SCHEDULER_LOCK)
        if lock is None or lock.expires_at <= self._kernel.clock.now():
            return None
        return Leader(lock.owner, lock.expires_at)

    async def workers(self, within: float | timedelta = 60) -> list[WorkerInfo]:
        """The workers that reported themselves in the last ``within`` (seconds or a timedelta), by id."""
        span = as_duration(within, "within", allow_zero=False)
        engine = self._kernel.live()
        return await engine.workers(self._kernel.clock.now() - span)

    async def throughput(self, minutes: int = 60) -> list[ThroughputInfo]:
        """Runs done and failed per queue and minute over the last ``minutes`` minutes, the current one
        included, oldest minute first, then by queue; a queue-minute with no run ended is absent.

        The workers count their runs and store the counts with their reports (every few seconds
        while busy), so the current minute fills in as it passes; counts are kept a day (ADR 048).
        """
        wanted = check_minutes(minutes)
        engine = self._kernel.live()
        since = minute_of(self._kernel.clock.now()) - timedelta(minutes=wanted - 1)
        return await engine.throughput(since)


def _reporting(telemetry: Telemetry, on_fire: OnFire | None) -> OnFire:
    """``on_fire`` (if any) that also reports each fire to ``telemetry``."""

    def report(fire: Fire) -> object:
        telemetry.fired((fire,))
        return None if on_fire is None else on_fire(fire)

    return report


async def _in_batches(purge: Callable[[int], Awaitable[int]]) -> int:
    """Call ``purge`` with a limit of ``BATCH`` until it deletes fewer; how many it deleted in all."""
    purged = 0
    while True:
        count = await purge(BATCH)
        purged += count
        if count < BATCH:
            return purged


def _held(jobs: Iterable[AsyncJob], kernel: AsyncKernel) -> list[AsyncJob]:
    """``jobs`` as a list of this store's claimed jobs (``InvalidArgument`` for anything else), each claim once."""
    try:
        each = iter(jobs)
    except TypeError:
        raise InvalidArgument(f"expected an iterable of claimed jobs, not {type(jobs).__name__}") from None
    held: dict[tuple[int, int], AsyncJob] = {}
    for job in each:
        if not isinstance(job, AsyncJob):
            raise InvalidArgument(f"expected claimed jobs (alkstore.{AsyncJob.__name__}), not {type(job).__name__}")
        if not kernel.owns(job):
            raise InvalidArgument(f"job {job.id} was claimed from another store")
        held.setdefault((job.id, kernel.record_of(job).fence), job)
    return list(held.values())
