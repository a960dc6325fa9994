"""``Telemetry`` on OpenTelemetry: counters, histograms and gauges through a meter, spans through a tracer."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TracerProvider

import alkstore
from alkstore import AlkstoreError, AsyncStore, Clock, QueueStats, Store
from alkstore import telemetry as port
from alkstore.engine import Fire, JobRecord

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
#: Measurements a histogram keeps in the process before it hands them to the SDK together (ADR 051).
BATCH = 256
#: The phases the depth gauge reports, by their ``state`` attribute.
_PHASES = ("ready", "delayed", "running", "dead")

#: ``00-`` + 32 + ``-`` + 16 + ``-`` + 2 characters.
_TRACEPARENT_LENGTH = 55


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
        self._tracer_provider = tracer_provider
        #: The tracer spans start on, or ``None`` while no span would record; final once ``_settled``.
        self._tracer: trace.Tracer | None = None
        self._settled = False
        self._spans()
        self._attributes: dict[tuple[str, str | None, str | None], dict[str, str]] = {}
        self._queue_wait = _Histogram(
            meter, QUEUE_WAIT, "How long a job waited from when it was due (its run_at) to its claim"
        )
        self._run_duration = _Histogram(meter, RUN_DURATION, "How long a worker's run of a job took")
        flush = self._flush
        self._enqueued = _Tally(meter, ENQUEUED, "{job}", "Jobs enqueued", self._of, flush)
        self._claimed = _Tally(meter, CLAIMED, "{job}", "Jobs claimed (leased) by a worker", self._of, flush)
        self._acked = _Tally(meter, ACKED, "{job}", "Jobs acked: done and gone", self._of, flush)
        self._retried = _Tally(meter, RETRIED, "{job}", "Failed attempts to be retried", self._of, flush)
        self._buried = _Tally(meter, BURIED, "{job}", "Jobs made dead by a failure", self._of, flush)
        self._fired = _Tally(meter, FIRED, "{fire}", "Schedule boundaries fired", _fire_attributes, flush)
        #: Every open store, with the loop an async store runs on (its counts are read there).
        self._stores: list[tuple[Store | AsyncStore, asyncio.AbstractEventLoop | None]] = []
        self._lock = threading.Lock()
        self._snapshot: list[QueueStats] | None = None  # the depth gauge's read, for the lag gauge after it
        self._seen: dict[str, None] = {}  # every queue a read has shown: one emptied since reads as zeros
        if queue_depth:
            meter.create_observable_gauge(DEPTH, [self._observe_depth], "{job}", "Jobs per queue and state")
            meter.create_observable_gauge(LAG, [self._observe_lag], "s", "How long the oldest ready job has waited")

    def __repr__(self) -> str:
        return "<alkstore.adapters.otel.Telemetry>"

    def _spans(self) -> trace.Tracer | None:
        """The tracer to start spans on, or ``None`` when no span would record: then none is started
        and no attributes are built for one.

        Settled once the provider is known: the given one, or the global one once an SDK has set
        it (before that the API's proxy hands out no-op spans, so none is started meanwhile).
        """
        if self._settled:
            return self._tracer
        provider = self._tracer_provider
        if provider is None or isinstance(provider, trace.ProxyTracerProvider):
            provider = trace.get_tracer_provider()
            if isinstance(provider, trace.ProxyTracerProvider):
                return None
        tracer = provider.get_tracer(INSTRUMENTATION, alkstore.__version__)
        self._tracer = tracer if _may_record(tracer) else None
        self._settled = True
        return self._tracer

    def _flush(self) -> None:
        """Hand every measurement the histograms keep to the SDK: at each collection, before it reads them."""
        self._queue_wait.flush()
        self._run_duration.flush()

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

    def opened(self, store: Store | AsyncStore) -> None:
        loop = None
        if isinstance(store, AsyncStore):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # made outside a loop: its depths cannot be read from another thread
                return
        with self._lock:
            self._stores.append((store, loop))

    def closed(self, store: Store | AsyncStore) -> None:
        with self._lock:
            self._stores = [each for each in self._stores if each[0] is not store]

    def enqueue(self, queue: str, task: str | None, count: int, parents: Sequence[str] = ()) -> _Enqueue:
        return _Enqueue(self, queue, task, count, parents)

    def claimed(self, jobs: Sequence[JobRecord], now: datetime) -> None:
        self._claimed.jobs(jobs)
        record = self._queue_wait.record
        for job in jobs:
            record(max((now - job.run_at).total_seconds(), 0.0), self._of(job.queue, job.task))

    def acked(self, jobs: Sequence[JobRecord]) -> None:
        self._acked.jobs(jobs)

    def retried(self, jobs: Sequence[JobRecord]) -> None:
        self._retried.jobs(jobs)

    def buried(self, jobs: Sequence[JobRecord]) -> None:
        self._buried.jobs(jobs)

    def fired(self, fires: Sequence[Fire]) -> None:
        for fire in fires:
            self._fired.add((fire.queue, fire.schedule), 1)

    def run(self, job: JobRecord, clock: Clock) -> _Run:
        return _Run(self, job, clock)

    # -- gauges, at collection time --------------------------------------------------------

    def _read_stats(self) -> list[QueueStats]:
        """Every open store's queue counts now (capped, so cheap on any table; ADR 020).

        A queue an earlier read showed and that holds no job now is reported with zeros, so its
        series goes to zero instead of vanishing.
        """
        with self._lock:
            stores = list(self._stores)
        stats: list[QueueStats] = []
        for store, loop in stores:
            try:
                stats.extend(_queue_stats(store, loop))
            except AlkstoreError as exc:  # closed meanwhile, an outage: nothing to report this time
                log.warning("queue depths could not be read: %s", exc)
                return []
        with self._lock:
            if not self._stores:
                return []
            shown = {each.queue for each in stats}
            self._seen.update(dict.fromkeys(sorted(shown)))
            empty = [QueueStats(queue, 0, 0, 0, 0, timedelta(0), None) for queue in self._seen if queue not in shown]
        return stats + empty

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


def _queue_stats(store: Store | AsyncStore, loop: asyncio.AbstractEventLoop | None) -> list[QueueStats]:
    """``store``'s queue counts, read from the collecting thread: an async store's on its own loop."""
    if isinstance(store, Store):
        return store.queue_stats()
    assert loop is not None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:  # collected on the store's own loop: waiting for it there would never end
        raise AlkstoreError("the depths of an async store are read from another thread than its loop's")
    try:
        return asyncio.run_coroutine_threadsafe(store.queue_stats(), loop).result(_DEPTH_READ_S)
    except TimeoutError:
        raise AlkstoreError(f"the async store's loop did not answer within {_DEPTH_READ_S} s") from None
    except RuntimeError as exc:  # its loop is closed
        raise AlkstoreError(str(exc)) from exc


#: How long (wall seconds) a collection waits for an async store's loop to read its counts.
_DEPTH_READ_S = 5.0


class _Run(port.RunReport):
    """One run's span and duration: opened as the run starts, ended (with its outcome) as it ends.

    The span is the current one while the run's code runs, also across its awaits (the context
    is the task's).
    """

    __slots__ = ("_clock", "_job", "_reason", "_span", "_started", "_telemetry", "_use")

    def __init__(self, telemetry: Telemetry, job: JobRecord, clock: Clock) -> None:
        self._telemetry = telemetry
        self._job = job
        self._clock = clock
        self._reason: str | None = None
        self._span: Any = None
        self._use: Any = None
        self._started: datetime  # read as the run starts (__enter__), after the span is made

    def __enter__(self) -> _Run:
        telemetry = self._telemetry
        tracer = telemetry._tracer if telemetry._settled else telemetry._spans()
        if tracer is None:  # nothing would record: no span, no attributes, no context to switch
            self._started = self._clock.now()
            return self
        job = self._job
        self._span = tracer.start_span(
            f"process {job.queue}",
            kind=SpanKind.CONSUMER,
            links=_links(job.trace),
            attributes=_run_attributes(job),
        )
        self._started = self._clock.now()
        self._use = trace.use_span(self._span, end_on_exit=False, record_exception=True, set_status_on_exception=True)
        self._use.__enter__()
        return self

    def refused(self, reason: str) -> None:
        self._reason = reason

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        span = self._span
        try:
            if span is not None:
                self._use.__exit__(exc_type, exc, tb)
        finally:
            failed = exc is not None or self._reason is not None
            if span is not None and exc is None and self._reason is not None:
                span.set_status(Status(StatusCode.ERROR, self._reason))
            seconds = max((self._clock.now() - self._started).total_seconds(), 0.0)
            job = self._job
            self._telemetry._run_duration.record(
                seconds, self._telemetry._of(job.queue, job.task, "error" if failed else "ok")
            )
            if span is not None:
                span.end()


class _Enqueue:
    """An enqueue's producer span: yields its ``traceparent``, counts the jobs when the enqueue succeeded."""

    __slots__ = ("_count", "_parents", "_queue", "_span", "_task", "_telemetry")

    def __init__(self, telemetry: Telemetry, queue: str, task: str | None, count: int, parents: Sequence[str]) -> None:
        self._telemetry = telemetry
        self._queue = queue
        self._task = task
        self._count = count
        self._parents = parents
        self._span: trace.Span | None = None

    def __enter__(self) -> str | None:
        telemetry = self._telemetry
        tracer = telemetry._tracer if telemetry._settled else telemetry._spans()
        if tracer is None:  # nothing would record: no span, no attributes, and no context to carry
            self._span = None
            return None
        # Started, not made current: nothing inside the enqueue traces, and attaching a context
        # would cost as much again as the span's attributes.
        attributes: dict[str, str | int] = {"messaging.destination.name": self._queue}
        if self._task is not None:
            attributes["alkstore.task"] = self._task
        if self._count != 1:
            attributes["messaging.batch.message_count"] = self._count
        # Linked to each parent's enqueue (ADR 074): a dependent continues the traces it waited on.
        links = [link for parent in self._parents for link in _links(parent) or ()] or None
        self._span = span = tracer.start_span(
            f"send {self._queue}", kind=SpanKind.PRODUCER, attributes=attributes, links=links
        )
        return _traceparent(span.get_span_context())

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        span = self._span
        if exc is None:
            if self._count:
                self._telemetry._enqueued.add((self._queue, self._task), self._count)
        elif span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        if span is not None:
            span.end()


class _Histogram:
    """A histogram whose measurements are handed to the SDK ``BATCH`` at a time, and all at each collection.

    The SDK's ``record`` costs about 12 µs of CPU in a tight loop and three times that when it runs
    alone between a job's round trips (its code and data gone cold); kept and handed over
    together, a job's measurements cost the former (ADR 051). Each keeps the context it was made
    in, so exemplars are as the SDK would have taken them.
    """

    __slots__ = ("_instrument", "_kept")

    def __init__(self, meter: metrics.Meter, name: str, description: str) -> None:
        self._instrument = meter.create_histogram(
            name, "s", description, explicit_bucket_boundaries_advisory=SECONDS_BUCKETS
        )
        self._kept: deque[tuple[float, dict[str, str], otel_context.Context]] = deque()

    def record(self, seconds: float, attributes: dict[str, str]) -> None:
        kept = self._kept
        kept.append((seconds, attributes, otel_context.get_current()))
        if len(kept) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Hand the measurements kept so far to the SDK (those another thread adds meanwhile stay kept)."""
        kept = self._kept
        record = self._instrument.record
        for _ in range(len(kept)):
            try:
                seconds, attributes, context = kept.popleft()
            except IndexError:  # another thread's flush took the rest
                return
            record(seconds, attributes, context)


class _Tally:
    """A counter kept in the process and reported at collection (an observable counter).

    An event is a dict update under a lock, about a microsecond, where a synchronous SDK counter
    costs ten; the totals are cumulative, which is what an observable counter reports.
    """

    __slots__ = ("_attributes", "_before", "_counts", "_lock")

    def __init__(
        self,
        meter: metrics.Meter,
        name: str,
        unit: str,
        description: str,
        attributes: Callable[[str, str | None], dict[str, str]],
        before: Callable[[], None],
    ) -> None:
        self._counts: dict[tuple[str, str | None], int] = {}
        self._lock = threading.Lock()
        self._attributes = attributes
        self._before = before  # run first at each collection: the histograms' kept measurements
        meter.create_observable_counter(name, [self._observe], unit, description)

    def add(self, key: tuple[str, str | None], count: int) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + count

    def jobs(self, jobs: Sequence[JobRecord]) -> None:
        """One for each of ``jobs``, under its queue and task."""
        counts = self._counts
        with self._lock:
            for job in jobs:
                key = (job.queue, job.task)
                counts[key] = counts.get(key, 0) + 1

    def _observe(self, _: CallbackOptions) -> Iterable[Observation]:
        self._before()
        with self._lock:
            totals = list(self._counts.items())
        for (first, second), total in totals:
            yield Observation(total, self._attributes(first, second))


def _may_record(tracer: trace.Tracer) -> bool:
    """Whether ``tracer`` may record any span: not the API's no-op tracer, nor an SDK tracer whose
    sampler drops every span (``ALWAYS_OFF``; a sampler that decides span by span may record)."""
    if isinstance(tracer, trace.NoOpTracer):
        return False
    sampler = getattr(tracer, "sampler", None)
    return sampler is None or sampler.get_description() != _ALWAYS_OFF


#: How the SDK's ``ALWAYS_OFF`` sampler describes itself (``Sampler.get_description``).
_ALWAYS_OFF = "AlwaysOffSampler"


def _fire_attributes(queue: str, schedule: str | None) -> dict[str, str]:
    return {"queue": queue} if schedule is None else {"queue": queue, "schedule": schedule}


def _traceparent(context: SpanContext) -> str | None:
    """The W3C ``traceparent`` of a span (what a job carries), or ``None`` for an invalid span."""
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _links(traceparent: str | None) -> list[Link] | None:
    """A link to the enqueue a job carries the trace context of, if it carries a valid one.

    Read as W3C Trace Context version 00 reads (``00-<32 hex>-<16 hex>-<2 hex>``), by hand: the
    propagator's parse costs several times as much, on every run.
    """
    if traceparent is None or len(traceparent) != _TRACEPARENT_LENGTH:
        return None
    version, trace_id, span_id, flags = traceparent.split("-") if traceparent.count("-") == 3 else ("", "", "", "")
    if version != "00" or len(trace_id) != 32 or len(span_id) != 16 or len(flags) != 2:
        return None
    try:
        context = SpanContext(int(trace_id, 16), int(span_id, 16), True, TraceFlags(int(flags, 16)))
    except ValueError:
        return None
    return [Link(context)] if context.is_valid else None


def _run_attributes(job: JobRecord) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "alkstore.attempt": job.attempts,
    }
    if job.task is not None:
        attributes["alkstore.task"] = job.task
    if job.schedule is not None:
        attributes["alkstore.schedule"] = job.schedule
    return attributes
