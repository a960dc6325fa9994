"""The internal layer of a runtime: what its store, handles, tasks, worker and maintenance share (ADR 028).

A store is a thin facade over one ``AsyncKernel``: the engine, the clock every stamp is read
from, the payload codec, the telemetry, and the queues' stored configuration as last read. The
other parts of the runtime (``AsyncQueue``, ``AsyncJob``, a task's enqueue, ``AsyncWorker``,
maintenance) reach it through ``kernel_of(store)`` and call only the methods below, never a
store's private attributes. Rules stay in core's pure modules (``_options``, ``_lifecycle``);
the kernel carries out their answers through the engine port.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from alkstore.errors import InvalidArgument, InvalidPayload, LeaseLost, NotOffered, StoreClosed
from alkstore.port._acompat import AThreads
from alkstore.port._engine_async import operations_of
from alkstore.port._operations_port_async import AsyncOperationsPort
from alkstore.port._records import (
    Burial,
    Handed,
    Heartbeat,
    Held,
    JobRecord,
    NewSchedule,
    QueueConfig,
    Retry,
    ScheduleRecord,
    claim_request,
)
from alkstore.port._runtime_port_async import AsyncRuntimePort
from alkstore.port._steps_port_async import steps_of
from alkstore.port._telemetry import TelemetryPort
from alkstore.port._time import Clock
from alkstore.rules._args import check_opts
from alkstore.rules._codec import Codec
from alkstore.rules._lifecycle import (
    Decoded,
    Undecodable,
    burial,
    claimed_late,
    decode_claimed,
    failure,
    lease_until,
    on_failure,
)
from alkstore.rules._options import NO_OPTS, EnqueueOpts, QueueDefaults, queue_defaults, stamp_enqueue
from alkstore.rules._records import JobId, job_ids, new_jobs, values_of
from alkstore.rules._results import done

from ._job_async import AsyncJob, make_job
from ._steps_async import AsyncStepper, Suspension

__all__ = ["CONFIG_TTL", "AsyncKernel", "kernel_of"]

log = logging.getLogger("alkstore")
#: Where no telemetry records an enqueue: the trace it yields is ``None``.
_NO_SPAN = nullcontext(None)

#: How long a store trusts what it read of a queue's stored config, in seconds of its clock (ADR 016).
CONFIG_TTL = timedelta(seconds=2)
#: The store class of this runtime, as errors name it.
_STORE = "AsyncStore"


def kernel_of(store: object) -> AsyncKernel:
    """The kernel behind ``store``: the one door from the rest of the runtime into a store.

    ``InvalidArgument`` for anything but a store of this runtime (a sync ``Store`` handed to an
    async call, or the other way round, included).
    """
    kernel = getattr(store, "_kernel", None)
    if not isinstance(kernel, AsyncKernel):
        raise InvalidArgument(f"expected an alkstore.{_STORE}, not {type(store).__name__}")
    return kernel


class AsyncKernel:
    """One store's engine, clock, codec, telemetry and queue configs, and the calls its parts share."""

    __slots__ = ("_closed", "_configs", "_stepper", "calls", "clock", "codec", "engine", "operations", "telemetry")

    def __init__(self, engine: AsyncRuntimePort, clock: Clock, codec: Codec, telemetry: TelemetryPort | None) -> None:
        self.engine = engine
        #: The engine's operations port; ``None`` when it stops at the runtime port (ADR 062).
        self.operations = operations_of(engine)
        self.clock = clock
        self.codec = codec
        #: ``None``: no event is reported, at the cost of one check each (ADR 024).
        self.telemetry = telemetry
        #: How the runtime calls the caller's code (an outbox delivery): see ``_acompat.AThreads``.
        self.calls = AThreads(0)
        self._closed = False
        self._configs: dict[str, tuple[datetime, QueueConfig | None, QueueDefaults]] = {}
        steps = steps_of(engine)
        self._stepper = None if steps is None else AsyncStepper(engine, steps, clock, codec)

    # -- lifecycle -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def live(self) -> AsyncRuntimePort:
        """The engine, or ``StoreClosed`` once the store is closed."""
        if self._closed:
            raise StoreClosed("this store is closed")
        return self.engine

    def offered(self) -> AsyncOperationsPort | None:
        """The operations port, ``None`` when the engine does not offer it, or ``StoreClosed`` once closed:
        what the worker's own reports and upkeep use, skipping quietly without it."""
        self.live()
        return self.operations

    def ops(self, call: str) -> AsyncOperationsPort:
        """The operations port for ``call`` (named in the error), or ``StoreClosed`` once closed; an engine
        that stops at the runtime port raises ``NotOffered``, before any I/O (ADR 062)."""
        operations = self.offered()
        if operations is None:
            raise NotOffered(
                f"{_STORE}.{call}() needs the engine's operations port, which the {type(self.engine).__name__} engine "
                "does not offer: it implements the runtime port only"
            )
        return operations

    def stepper(self) -> AsyncStepper:
        """Steps, sleeps, waits and emits (ADR 069); ``NotOffered`` on an engine without the steps port."""
        self.live()
        if self._stepper is None:
            raise NotOffered(f"steps, sleeps and events need the steps port, which {type(self.engine).__name__} lacks")
        return self._stepper

    async def suspend(self, job: AsyncJob, signal: BaseException) -> None:
        """Store ``job`` asleep as its run's ``JobSuspended`` asks (nothing if it is stored already); ``LeaseLost``
        if its claim was lost."""
        suspension = getattr(signal, "suspension", None)
        if isinstance(suspension, Suspension):
            await self.stepper().suspend(suspension)

    @staticmethod
    def sleep_asked(job: AsyncJob) -> BaseException | None:
        """The first ``JobSuspended`` of ``job``'s run by a worker, caught or not: a run that asked to sleep
        ends asleep, even one that swallowed it and returned (ADR 069); ``None`` if it asked none."""
        return job._claim.steps.asked

    @staticmethod
    def run_by_worker(job: AsyncJob) -> None:
        """Mark ``job`` as run by a worker: a sleep of its run is stored by the worker as it ends the run."""
        job._claim.steps.by_worker = True

    def stepper_or_none(self) -> AsyncStepper | None:
        """The stepper, ``None`` on an engine without the steps port."""
        return self._stepper

    def close(self) -> bool:
        """Mark the store closed; whether it was open (the caller then closes the engine)."""
        was_open, self._closed = not self._closed, True
        if was_open:
            self.calls.close()
        return was_open

    # -- queue configuration ----------------------------------------------------------

    async def config(
        self, queue: str, tx: Any = None, now: datetime | None = None
    ) -> tuple[QueueConfig | None, QueueDefaults]:
        """The queue's stored config and the defaults it makes, as read at most ``CONFIG_TTL`` of the
        clock ago. ``tx`` (the caller's transaction, as the engine took it) is where to read it, if
        it must be read; ``now``, the clock as the caller just read it."""
        engine = self.live()
        if now is None:
            now = self.clock.now()
        cached = self._configs.get(queue)
        if cached is None or now >= cached[0]:
            config = await engine.queue_config(queue, tx)
            cached = self._configs[queue] = (now + CONFIG_TTL, config, queue_defaults(queue, config))
        return cached[1], cached[2]

    async def defaults(self, queue: str) -> QueueDefaults:
        """What ``queue`` uses when a call does not say (its derived defaults under its stored config)."""
        return (await self.config(queue))[1]

    async def configure(self, queue: str, config: QueueConfig) -> QueueDefaults:
        """Store ``config`` for ``queue`` (all ``None``: remove it) and return the defaults it makes.

        This store sees it at once; others within ``CONFIG_TTL`` of their clocks (ADR 016).
        """
        stored = await self.live().configure_queue(queue, config)
        defaults = queue_defaults(queue, stored)
        self._configs[queue] = (self.clock.now() + CONFIG_TTL, stored, defaults)
        return defaults

    async def set_paused(self, queue: str, paused: bool) -> None:
        """Pause ``queue`` (or resume it): this store sees it at once, others within ``CONFIG_TTL`` (ADR 033)."""
        stored = await self.live().set_paused(queue, paused)
        self._configs[queue] = (self.clock.now() + CONFIG_TTL, stored, queue_defaults(queue, stored))

    # -- jobs ------------------------------------------------------------------------

    async def enqueue(
        self,
        queue: str,
        payloads: Sequence[Any],
        opts: EnqueueOpts | None,
        tx: Any = None,
        *,
        in_caller_tx: bool = False,
        task: str | None = None,
        keys: Callable[[Any], tuple[str | None, bool, str | None, str | None]] | None = None,
    ) -> list[JobId]:
        """Enqueue one job per payload, in a transaction of the engine's own or (``in_caller_tx``) in ``tx``.

        Every check that needs no I/O runs before any; ``task`` names the task the jobs are for, and
        ``keys`` (a task's) gives each payload's unique key, its ``unique_running`` and its ordering
        key where ``opts`` gives none. Each id says whether it was created or found holding its
        unique key (``JobId.created``).
        """
        opts = NO_OPTS if opts is None else check_opts(opts, EnqueueOpts)
        data = list(map(self.codec.encode, payloads))  # no comprehension's frame (an enqueue of one is most)
        now = self.clock.now()
        # Options that could be refused are resolved before any I/O; again below only if a stored config changes them.
        derived = None if opts is NO_OPTS else stamp_enqueue(opts, queue_defaults(queue), now)
        engine = self.live()
        if in_caller_tx:
            tx = await engine.caller_transaction(tx)
        stored, defaults = await self.config(queue, tx, now)
        stamps = derived if derived is not None and stored is None else stamp_enqueue(opts, defaults, now)
        if stamps.after:
            self.dependencies_offered("enqueue(after=…)")
        keyed = None if keys is None else [keys(payload) for payload in payloads]
        telemetry = self.telemetry
        if telemetry is None:
            return job_ids(await engine.enqueue(new_jobs(queue, data, stamps, task, None, keyed), now, tx))
        parents = [] if in_caller_tx or not stamps.after else await self.parent_traces(stamps.after)
        span = (
            telemetry.enqueue(queue, task, len(data), parents) if parents else telemetry.enqueue(queue, task, len(data))
        )
        with span as trace:
            return job_ids(await engine.enqueue(new_jobs(queue, data, stamps, task, trace, keyed), now, tx))

    async def parent_traces(self, parents: Sequence[int]) -> list[str]:
        """The trace contexts ``parents`` carry, for the links of an enqueue's span (ADR 074): read before
        its transaction, so only for an enqueue in one of the engine's own."""
        engine = self.live()
        traces = [None if (record := await engine.get_job(parent)) is None else record.trace for parent in parents]
        return [trace for trace in traces if trace is not None]

    def dependencies_offered(self, call: str) -> None:
        if not self.engine.offers_dependencies:
            raise NotOffered(
                f"{call} needs job dependencies, which the {type(self.engine).__name__} engine does not offer"
            )

    async def parent_results(self, job_id: int) -> dict[int, Any]:
        """The results the parents of ``job_id`` that succeeded handed it, decoded, by parent id (a parent
        that handed nothing, or has not finished, is left out; ADR 073)."""
        record = await self.live().get_job(job_id)
        if record is None:
            return {}
        return {link.id: self.codec.decode(link.result) for link in record.parent_links if link.result is not None}

    async def claim(
        self, queue: str, worker_id: str, limit: int, acks: Sequence[tuple[AsyncJob, Held]] = ()
    ) -> tuple[list[Held], list[AsyncJob]]:
        """Ack ``acks`` (claimed jobs with their acks, ``finished``'s) and claim up to ``limit`` jobs of ``queue``
        in one engine call; the stale acks and the jobs. Telemetry hears of the acks that were not stale.

        Decode-or-bury is core's (``decode_claimed``): an undecodable job is buried and another
        looked for, one that failed to decode for another reason is handed back and its error
        raised once nothing else was claimed.
        """
        engine = self.live()
        now = self.clock.now()  # the first claim's instant, and the config's age by it: one read of the clock
        stored, defaults = await self.config(queue, now=now)
        if stored is not None and stored.paused:  # a paused queue's jobs wait (ADR 033): only the acks go
            return (await self.ack_many(acks) if acks else []), []
        stale: list[Held] = []
        first = True
        while True:
            if not first:
                now = self.clock.now()
            first = False
            request = claim_request(
                queue,
                worker_id,
                now,
                defaults.visibility_timeout,
                limit,
                defaults.concurrency,
                defaults.rate,
                defaults.key_rate,
            )
            if acks:
                stale, records = await engine.ack_and_claim([held for _, held in acks], request)
                self._report_acked(acks, stale)
                acks = ()
            else:
                records = await engine.claim(request)
            if records:
                records = await self._renew_late(records, defaults)
            if self.telemetry is not None and records:
                self.telemetry.claimed(records, now)
            jobs: list[AsyncJob] = []
            handed_back: list[BaseException] = []
            for record in records:
                outcome = decode_claimed(record, self.codec)
                if isinstance(outcome, Decoded):
                    values = values_of(record, outcome.payload)
                    jobs.append(make_job(*values, _kernel=self, _record=record, _claimed_at=now))
                elif isinstance(outcome, Undecodable):
                    log.error("burying job %s of %r: %s", record.id, queue, outcome.error)
                    lost = await engine.bury((Burial(record.id, record.fence, outcome.error),), now)
                    if self.telemetry is not None and not lost:
                        self.telemetry.buried((record,))
                else:
                    log.warning("handing job %s of %r back: decoding failed: %r", record.id, queue, outcome.cause)
                    await engine.release((Held(record.id, record.fence),), now)
                    handed_back.append(outcome.cause)
            if jobs or not records:
                return stale, jobs
            if handed_back:
                raise handed_back[0]
            # Every job claimed was undecodable and is buried now: look for another.

    async def _renew_late(self, records: list[JobRecord], defaults: QueueDefaults) -> list[JobRecord]:
        """The claimed ``records`` with their leases still live: those a late claim returned with a third
        gone are renewed (fenced, as a heartbeat), and any another claim took meanwhile are left to it,
        unrun (ADR 050)."""
        now = self.clock.now()
        for record in records:
            if claimed_late(record, defaults, now):
                break
        else:  # none late (every claim but a stalled one's): no map of them to build
            return records
        late = {
            record.id: lease_until(record, defaults, now) for record in records if claimed_late(record, defaults, now)
        }
        if not late:
            return records
        beats = [Heartbeat(record.id, record.fence, late[record.id]) for record in records if record.id in late]
        taken = {pair.job_id for pair in (await self.live().heartbeat(beats))[0]}
        log.warning(
            "a claim of %r returned late: %d leases renewed before their jobs ran, %d taken by another claim "
            "meanwhile and left to it",
            records[0].queue,
            len(late) - len(taken),
            len(taken),
        )
        return [
            replace(record, lease_until=late[record.id]) if record.id in late else record
            for record in records
            if record.id not in taken
        ]

    async def finished(self, job: AsyncJob, result: Any, started_at: datetime | None = None) -> Held:
        """The ack of ``job`` that succeeded with ``result``: kept as a ``Done`` when its queue keeps results
        (``InvalidPayload`` if ``result`` cannot be encoded), else the plain pair. ``started_at`` defaults
        to the claim's instant."""
        held = Held(job.id, job._record.fence)
        keep = (await self.config(job.queue))[1].keep_results
        if keep is None:
            if job._record.dependents and result is not None:  # its dependents read it (ADR 073)
                return Handed(held.job_id, held.fence, self.codec.encode(result))
            return held
        return done(held, self.codec, result, keep, self.clock.now(), started_at or job._claimed_at)

    # -- the one door that finishes or extends a claim (each job's calls, ADR 062) ---------

    @staticmethod
    def _fenced(job: AsyncJob, stale: Sequence[Held]) -> None:
        if stale:
            raise LeaseLost(f"job {job.id} is no longer held under its claim (fence {job._record.fence})")

    async def ack(self, job: AsyncJob, result: Any = None, held: Held | None = None) -> None:
        """Ack ``job`` (``held``: its ack as ``finished`` made it; by default made of ``result`` here);
        ``LeaseLost`` if its claim was lost."""
        if held is None:
            held = await self.finished(job, result)
        self._fenced(job, await self.live().ack((held,)))
        if self.telemetry is not None:
            self.telemetry.acked((job._record,))

    async def retry(self, job: AsyncJob, error: str | BaseException, delay: float | timedelta | None = None) -> None:
        """``job`` failed this attempt: retried after ``delay`` (the queue's curve if ``None``), or buried
        when it has no attempts left (``on_failure`` decides); ``LeaseLost`` if its claim was lost."""
        failed = failure(error)
        now = self.clock.now()
        outcome = on_failure(job._record, failed, await self.defaults(job.queue), delay, now, job._claimed_at)
        engine = self.live()
        if isinstance(outcome, Retry):
            self._fenced(job, await engine.retry((outcome,), now))
        else:
            self._fenced(job, await engine.bury((outcome,), now))
        if self.telemetry is not None:
            (self.telemetry.retried if isinstance(outcome, Retry) else self.telemetry.buried)((job._record,))

    async def fail(self, job: AsyncJob, error: str | BaseException) -> None:
        """Bury ``job`` with ``error`` whatever attempts it has left; ``LeaseLost`` if its claim was lost."""
        failed = failure(error)
        now = self.clock.now()
        buried = burial(job._record, failed, await self.defaults(job.queue), now, job._claimed_at)
        self._fenced(job, await self.live().bury((buried,), now))
        if self.telemetry is not None:
            self.telemetry.buried((job._record,))

    async def release(self, job: AsyncJob) -> None:
        """Hand ``job`` back unfinished, its attempt not counted; ``LeaseLost`` if its claim was lost."""
        self._fenced(job, await self.live().release((self.held_of(job),), self.clock.now()))

    async def heartbeat(self, job: AsyncJob) -> datetime:
        """Extend ``job``'s lease from now by its visibility timeout and return the new end; a cancel
        requested since cancels its ``stop``. ``LeaseLost`` if its claim was lost."""
        until = lease_until(job._record, await self.defaults(job.queue), self.clock.now())
        stale, asked = await self.live().heartbeat((Heartbeat(job.id, job._record.fence, until),))
        self._fenced(job, stale)
        job._claim.lease_until = until
        if asked:
            job.stop.cancel()
        return until

    # -- the same door, a batch at a time (a worker's) ----------------------------------

    async def ack_many(self, acks: Sequence[tuple[AsyncJob, Held]]) -> list[Held]:
        """Write the acks of claimed jobs (each ``finished``'s) in one call; the stale ones (their claim was
        lost) changed nothing. Telemetry hears of the others."""
        stale = await self.live().ack([held for _, held in acks])
        self._report_acked(acks, stale)
        return stale

    def _report_acked(self, acks: Sequence[tuple[AsyncJob, Held]], stale: Sequence[Held]) -> None:
        if self.telemetry is not None and acks:
            lost = {pair.job_id for pair in stale}
            self.telemetry.acked([job._record for job, _ in acks if job.id not in lost])

    async def heartbeat_many(self, beats: Sequence[tuple[AsyncJob, datetime]]) -> set[int]:
        """Move the leases of claimed jobs to the ends given, in one call; the ids of those whose claim was lost.
        (A cancel requested meanwhile is for the caller to ask, on its own cadence: ``cancel_requested``.)"""
        pairs = [Heartbeat(job.id, job._record.fence, until) for job, until in beats]
        stale = {pair.job_id for pair in (await self.live().heartbeat(pairs))[0]}
        for job, until in beats:
            if job.id not in stale:
                job._claim.lease_until = until
        return stale

    async def release_many(self, jobs: Sequence[AsyncJob]) -> set[int]:
        """Hand claimed jobs back unfinished, their attempts not counted, in one call; the ids of those whose
        claim was lost."""
        return {
            pair.job_id for pair in await self.live().release([self.held_of(job) for job in jobs], self.clock.now())
        }

    @staticmethod
    def record_of(job: AsyncJob) -> JobRecord:
        """The port's record of a claimed job, as it was claimed (its fence included)."""
        return job._record

    @staticmethod
    def held_of(job: AsyncJob) -> Held:
        """A claimed job as the port's fenced calls take it: its id and the fence of its claim."""
        return Held(job.id, job._record.fence)

    def owns(self, job: AsyncJob) -> bool:
        """Whether ``job`` was claimed through this kernel (a store's jobs are only its own)."""
        return job._kernel is self

    def decode_lenient(self, data: bytes) -> Any:
        """A stored payload decoded for a reader; bytes that are not the codec's are shown as they are."""
        try:
            return self.codec.decode(data)
        except InvalidPayload:
            return bytes(data)

    # -- schedules -------------------------------------------------------------------

    async def register(self, schedules: Sequence[NewSchedule]) -> list[ScheduleRecord]:
        """Register (or update) checked schedules, all or none, at the clock's now; as stored, in order."""
        return await self.live().register_schedules(schedules, self.clock.now())
