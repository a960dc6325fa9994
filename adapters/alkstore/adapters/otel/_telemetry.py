"""``Telemetry`` on OpenTelemetry: counters, histograms and gauges through a meter, spans through a tracer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

import alkstore
from alkstore import AlkstoreError, Clock, QueueStats
from alkstore import telemetry as port
from alkstore.engine import Fire, JobRecord

if TYPE_CHECKING:
    from alkstore import Store

__all__ = [
    "ACKED",
    "BURIED",
    "CLAIMED",
    "DEPTH",
    "ENQUEUED",
    "FIRED",
    "INSTRUMENTATION",
    "LAG",
    "QUEUE_WAIT",
    "RETRIED",
    "RUN_DURATION",
    "SECONDS_BUCKETS",
    "Telemetry",
]

log = logging.getLogger("alkstore.otel")

#: The instrumentation scope of every meter and tracer.
INSTRUMENTATION = "alkstore"

ENQUEUED = "alkstore.jobs.enqueued"
CLAIMED = "alkstore.jobs.claimed"
ACKED = "alkstore.jobs.acked"
RETRIED = "alkstore.jobs.retried"
BURIED = "alkstore.jobs.buried"
FIRED = "alkstore.schedules.fired"
QUEUE_WAIT = "alkstore.jobs.queue_wait"
RUN_DURATION = "alkstore.jobs.run_duration"
DEPTH = "alkstore.queue.depth"
LAG = "alkstore.queue.lag"

#: Bucket bounds of the two histograms, in seconds: from a few milliseconds to an hour.
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: The phases the depth gauge reports, by their ``state`` attribute.
_PHASES = ("ready", "delayed", "running", "dead")

_PROPAGATOR = TraceContextTextMapPropagator()


class Telemetry(port.Telemetry):
    """Reports a store's jobs to OpenTelemetry: ``alkstore.open(url, telemetry=Telemetry())``.

    ``meter_provider`` and ``tracer_provider`` default to the global ones (as configured by the
    OpenTelemetry SDK or ``opentelemetry-instrument``). With ``queue_depth`` (the default) the
    depth and lag gauges read every open store's queue counts (capped, ADR 020) once per
    collection; turn it off where another process reports them for the same database.
    """

    def __init__(
        self,
        *,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
        queue_depth: bool = True,
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(INSTRUMENTATION, alkstore.__version__)
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(
            INSTRUMENTATION, alkstore.__version__
        )
        self._enqueued = meter.create_counter(ENQUEUED, "{job}", "Jobs enqueued")
        self._claimed = meter.create_counter(CLAIMED, "{job}", "Jobs claimed (leased) by a worker")
        self._acked = meter.create_counter(ACKED, "{job}", "Jobs acked: done and gone")
        self._retried = meter.create_counter(RETRIED, "{job}", "Failed attempts to be retried")
        self._buried = meter.create_counter(BURIED, "{job}", "Jobs made dead by a failure")
        self._fired = meter.create_counter(FIRED, "{fire}", "Schedule boundaries fired")
        self._queue_wait = meter.create_histogram(
            QUEUE_WAIT,
            "s",
            "How long a job waited from when it was due (its run_at) to its claim",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._run_duration = meter.create_histogram(
            RUN_DURATION,
            "s",
            "How long a worker's run of a job took",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._attributes: dict[tuple[str, str | None, str | None], dict[str, str]] = {}
        self._stores: list[Store] = []
        self._lock = threading.Lock()
        self._snapshot: list[QueueStats] | None = None  # the depth gauge's read, for the lag gauge after it
        if queue_depth:
            meter.create_observable_gauge(DEPTH, [self._observe_depth], "{job}", "Jobs per queue and state")
            meter.create_observable_gauge(LAG, [self._observe_lag], "s", "How long the oldest ready job has waited")

    def __repr__(self) -> str:
        return "<alkstore.adapters.otel.Telemetry>"

    def _of(self, queue: str, task: str | None, outcome: str | None = None) -> dict[str, str]:
        """The attributes of a queue's (and task's, and a run's outcome's) measurements: made once, then shared."""
        key = (queue, task, outcome)
        found = self._attributes.get(key)
        if found is None:
            found = {"queue": queue}
            if task is not None:
                found["task"] = task
            if outcome is not None:
                found["outcome"] = outcome
            self._attributes[key] = found
        return found

    # -- the store's events --------------------------------------------------------------

    def opened(self, store: Store) -> None:
        with self._lock:
            self._stores.append(store)

    def closed(self, store: Store) -> None:
        with self._lock:
            self._stores = [each for each in self._stores if each is not store]

    def enqueue(self, queue: str, task: str | None, count: int) -> _Enqueue:
        return _Enqueue(self, queue, task, count)

    def claimed(self, jobs: Sequence[JobRecord], now: datetime) -> None:
        add, record = self._claimed.add, self._queue_wait.record
        for job in jobs:
            attributes = self._of(job.queue, job.task)
            add(1, attributes)
            record(max((now - job.run_at).total_seconds(), 0.0), attributes)

    def acked(self, jobs: Sequence[JobRecord]) -> None:
        _count(self._acked.add, self._of, jobs)

    def retried(self, jobs: Sequence[JobRecord]) -> None:
        _count(self._retried.add, self._of, jobs)

    def buried(self, jobs: Sequence[JobRecord]) -> None:
        _count(self._buried.add, self._of, jobs)

    def fired(self, fires: Sequence[Fire]) -> None:
        for fire in fires:
            self._fired.add(1, {"queue": fire.queue, "schedule": fire.schedule})

    def run(self, job: JobRecord, clock: Clock, call: Callable[[], str | None]) -> str | None:
        span = self._tracer.start_span(
            f"process {job.queue}",
            kind=SpanKind.CONSUMER,
            links=_links(job.trace),
            attributes=_run_attributes(job),
        )
        started = clock.now()
        outcome = "error"
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=True, set_status_on_exception=True):
                reason = call()
            if reason is not None:
                span.set_status(Status(StatusCode.ERROR, reason))
            else:
                outcome = "ok"
            return reason
        finally:
            seconds = max((clock.now() - started).total_seconds(), 0.0)
            self._run_duration.record(seconds, self._of(job.queue, job.task, outcome))
            span.end()

    # -- gauges, at collection time --------------------------------------------------------

    def _read_stats(self) -> list[QueueStats]:
        """Every open store's queue counts now (capped, so cheap on any table; ADR 020)."""
        with self._lock:
            stores = list(self._stores)
        stats: list[QueueStats] = []
        for store in stores:
            try:
                stats.extend(store.queue_stats())
            except AlkstoreError as exc:  # closed meanwhile, an outage: nothing to report this time
                log.warning("queue depths could not be read: %s", exc)
        return stats

    def _observe_depth(self, _: CallbackOptions) -> Iterable[Observation]:
        """The depth gauge: reads the counts, and keeps them for the lag gauge, which a collection asks next."""
        stats = self._read_stats()
        with self._lock:
            self._snapshot = stats
        for each in stats:
            for phase in _PHASES:
                yield Observation(getattr(each, phase), {"queue": each.queue, "state": phase})

    def _observe_lag(self, _: CallbackOptions) -> Iterable[Observation]:
        """The lag gauge: from the depth gauge's read of this collection (one read serves both)."""
        with self._lock:
            stats, self._snapshot = self._snapshot, None
        for each in stats if stats is not None else self._read_stats():
            yield Observation(each.lag.total_seconds(), {"queue": each.queue})


class _Enqueue:
    """An enqueue's producer span: yields its ``traceparent``, counts the jobs when the enqueue succeeded."""

    __slots__ = ("_count", "_queue", "_scope", "_task", "_telemetry")

    def __init__(self, telemetry: Telemetry, queue: str, task: str | None, count: int) -> None:
        self._telemetry = telemetry
        self._queue = queue
        self._task = task
        self._count = count

    def __enter__(self) -> str | None:
        attributes: dict[str, str | int] = {
            "messaging.system": "alkstore",
            "messaging.operation.type": "send",
            "messaging.destination.name": self._queue,
        }
        if self._task is not None:
            attributes["alkstore.task"] = self._task
        if self._count != 1:
            attributes["messaging.batch.message_count"] = self._count
        self._scope = self._telemetry._tracer.start_as_current_span(
            f"send {self._queue}", kind=SpanKind.PRODUCER, attributes=attributes
        )
        return _traceparent(self._scope.__enter__().get_span_context())

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._scope.__exit__(exc_type, exc, tb)
        if exc is None and self._count:
            self._telemetry._enqueued.add(self._count, self._telemetry._of(self._queue, self._task))


def _count(
    add: Callable[[int, Attributes], None],
    attributes_of: Callable[[str, str | None], dict[str, str]],
    jobs: Sequence[JobRecord],
) -> None:
    """Add one per job to a counter, under each job's queue and task."""
    for job in jobs:
        add(1, attributes_of(job.queue, job.task))


def _traceparent(context: SpanContext) -> str | None:
    """The W3C ``traceparent`` of a span (what a job carries), or ``None`` for an invalid span."""
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _links(traceparent: str | None) -> list[Link] | None:
    """A link to the enqueue a job carries the trace context of, if it carries a valid one."""
    if traceparent is None:
        return None
    context = trace.get_current_span(_PROPAGATOR.extract({"traceparent": traceparent})).get_span_context()
    return [Link(context)] if context.is_valid else None


def _run_attributes(job: JobRecord) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {
        "messaging.system": "alkstore",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "alkstore.attempt": job.attempts,
    }
    if job.task is not None:
        attributes["alkstore.task"] = job.task
    if job.schedule is not None:
        attributes["alkstore.schedule"] = job.schedule
    return attributes
