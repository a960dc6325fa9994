"""Metrics and traces on every engine (ADR 024): what ``alkstore.adapters.otel`` reports, read back
through the OpenTelemetry SDK's in-memory reader and exporter.

The numbers are asserted, not just emitted: counts per queue and task, histogram counts and sums
in the store's (manual) clock, gauge values, and each run span's link to its enqueue's span.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel tests need opentelemetry-sdk (the test extra)")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from alkstore import EnqueueOpts, Job, ManualClock, StopToken, Store, Tasks, Worker, WorkerStats
from alkstore.adapters import otel
from tests.support import PATIENCE, wait_until

from ._engines import EngineTarget
from ._runners import Runner
from ._runtimes import store_of, task_call, worker_of

Attributes = frozenset[tuple[str, Any]]


@dataclass
class Otel:
    """A ``Telemetry`` on SDK providers whose readings the test can take."""

    reader: InMemoryMetricReader
    exporter: InMemorySpanExporter
    tracer_provider: TracerProvider
    telemetry: otel.Telemetry

    def points(self, name: str) -> dict[Attributes, Any]:
        """The data points of metric ``name`` by their attributes (empty if it recorded nothing)."""
        data = self.reader.get_metrics_data()
        found: dict[Attributes, Any] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            found[frozenset((point.attributes or {}).items())] = point
        return found

    def counts(self, name: str) -> dict[Attributes, int]:
        """A counter's (or gauge's) values by attributes."""
        values = {}
        for attributes, point in self.points(name).items():
            assert isinstance(point, NumberDataPoint)
            values[attributes] = int(point.value)
        return values

    def histogram(self, name: str) -> dict[Attributes, tuple[int, float]]:
        """A histogram's (count, sum) by attributes."""
        found = {}
        for attributes, point in self.points(name).items():
            assert isinstance(point, HistogramDataPoint)
            assert tuple(point.explicit_bounds) == otel.SECONDS_BUCKETS
            found[attributes] = (point.count, round(point.sum, 6))
        return found

    def spans(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.exporter.get_finished_spans() if span.name == name]


def of(**attributes: Any) -> Attributes:
    return frozenset(attributes.items())


@pytest.fixture
def telemetry() -> Iterator[Otel]:
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(
        reader,
        exporter,
        tracer_provider,
        otel.Telemetry(meter_provider=meter_provider, tracer_provider=tracer_provider),
    )
    meter_provider.shutdown()
    tracer_provider.shutdown()


@pytest.fixture
def instrumented(engine: EngineTarget, clock: ManualClock, telemetry: Otel) -> Iterator[Store]:
    """A store on ``engine`` reporting to ``telemetry`` (closed, and its storage dropped, after)."""
    with engine.store(clock) as plain, store_of(plain.engine, clock=clock, telemetry=telemetry.telemetry) as store:
        yield store


def test_counters_count_each_event_per_queue_and_task(instrumented: Store, clock: ManualClock, telemetry: Otel) -> None:
    store = instrumented
    tasks = Tasks()

    @tasks.task("report", queue="a")
    def report(**_: Any) -> None: ...

    emails = store.queue("a")
    emails.enqueue(1)
    emails.enqueue(2, EnqueueOpts(max_attempts=1))
    task_call(report.enqueue, store, day=1)
    store.queue("b").enqueue_many([1, 2, 3])
    store.outbox("hooks").enqueue("ping")

    claimed = emails.claim_many("w", 3)
    assert len(claimed) == 3
    by_payload = {repr(job.payload): job for job in claimed}
    by_payload["1"].retry("again")  # attempts left: retried
    by_payload["2"].retry("once only")  # max_attempts=1: buried
    assert store.ack_many([by_payload["{'day': 1}"]]) == []
    first, second = store.queue("b").claim_many("w", 2)
    first.ack()
    second.fail("no")
    store.schedule("beat", "@every 1m", "b")
    clock.advance(timedelta(minutes=1))
    assert len(store.tick()) == 1

    assert telemetry.counts(otel.ENQUEUED) == {
        of(queue="a"): 2,
        of(queue="a", task="report"): 1,
        of(queue="b"): 3,
        of(queue=store.outbox("hooks").queue): 1,
    }
    assert telemetry.counts(otel.CLAIMED) == {of(queue="a"): 2, of(queue="a", task="report"): 1, of(queue="b"): 2}
    assert telemetry.counts(otel.ACKED) == {of(queue="a", task="report"): 1, of(queue="b"): 1}
    assert telemetry.counts(otel.RETRIED) == {of(queue="a"): 1}
    assert telemetry.counts(otel.BURIED) == {of(queue="a"): 1, of(queue="b"): 1}
    assert telemetry.counts(otel.FIRED) == {of(queue="b", schedule="beat"): 1}


def test_a_stale_ack_counts_nothing(instrumented: Store, clock: ManualClock, telemetry: Otel) -> None:
    queue = instrumented.queue("a")
    queue.enqueue(1)
    lapsed = queue.claim("slow")
    assert lapsed is not None
    clock.advance(queue.defaults().visibility_timeout)
    taken = queue.claim("fast")
    assert taken is not None
    assert instrumented.ack_many([lapsed]) == [lapsed]

    assert telemetry.counts(otel.CLAIMED) == {of(queue="a"): 2}
    assert telemetry.points(otel.ACKED) == {}


def test_the_scheduler_loop_counts_its_fires_and_still_calls_on_fire(
    instrumented: Store, clock: ManualClock, telemetry: Otel
) -> None:
    instrumented.schedule("beat", "@every 5s", "b")
    clock.advance(10)
    runner = Runner(instrumented).start()
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # it ticked, and sleeps until the next boundary
    assert runner.finish() is None

    assert len(runner.fires) == 2
    assert telemetry.counts(otel.FIRED) == {of(queue="b", schedule="beat"): 2}


def test_queue_wait_runs_from_a_jobs_due_instant_to_its_claim_in_the_stores_clock(
    instrumented: Store, clock: ManualClock, telemetry: Otel
) -> None:
    queue = instrumented.queue("a")
    queue.enqueue("now")
    queue.enqueue("later", EnqueueOpts(delay=10))
    clock.advance(4)
    assert queue.claim("w") is not None  # due at T0, claimed at T0+4: waited 4 s
    clock.advance(10)
    assert queue.claim("w") is not None  # due at T0+10, claimed at T0+14: waited 4 s

    assert telemetry.histogram(otel.QUEUE_WAIT) == {of(queue="a"): (2, 8.0)}


def test_the_depth_and_lag_gauges_read_each_queue_at_collection(
    instrumented: Store, clock: ManualClock, telemetry: Otel
) -> None:
    queue = instrumented.queue("a")
    queue.enqueue_many([1, 2, 3])
    queue.enqueue(4, EnqueueOpts(delay=60))
    instrumented.queue("b").enqueue(5)
    running, dying = queue.claim_many("w", 2)
    dying.fail("no")
    clock.advance(5)

    assert telemetry.counts(otel.DEPTH) == {
        of(queue="a", state="ready"): 1,
        of(queue="a", state="delayed"): 1,
        of(queue="a", state="running"): 1,
        of(queue="a", state="dead"): 1,
        of(queue="b", state="ready"): 1,
        of(queue="b", state="delayed"): 0,
        of(queue="b", state="running"): 0,
        of(queue="b", state="dead"): 0,
    }
    assert telemetry.counts(otel.LAG) == {of(queue="a"): 5, of(queue="b"): 5}

    running.ack()
    emptied = instrumented.queue("b").claim("w")
    assert emptied is not None
    emptied.ack()  # b holds no job now: its series read zero rather than vanish
    depth = telemetry.counts(otel.DEPTH)
    assert {state: depth[of(queue="b", state=state)] for state in ("ready", "delayed", "running", "dead")} == {
        "ready": 0,
        "delayed": 0,
        "running": 0,
        "dead": 0,
    }
    assert depth[of(queue="a", state="running")] == 0
    assert telemetry.counts(otel.LAG)[of(queue="b")] == 0

    instrumented.close()
    assert telemetry.points(otel.DEPTH) == {}  # a closed store is read no more


def work(worker: Worker, until: Callable[[WorkerStats], bool]) -> None:
    """Run ``worker`` on a thread until its stats satisfy ``until``, then stop it."""
    stop = StopToken()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: until(worker.stats), "the worker to run the jobs")
    finally:
        stop.cancel()
        thread.join(PATIENCE)
    assert not thread.is_alive(), "the worker did not stop"


@pytest.mark.parametrize("ack_delay", [0, 0.02], ids=["acked-at-once", "acked-with-the-next-claim"])
def test_each_run_is_a_consumer_span_linked_to_the_enqueue_span_its_job_carries(
    instrumented: Store, clock: ManualClock, telemetry: Otel, ack_delay: float
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    queue = instrumented.queue("a")
    with tracer.start_as_current_span("request"):
        ok = queue.enqueue("ok")
    failing = queue.enqueue("fail", EnqueueOpts(max_attempts=1))

    def handler(payload: Any, job: Job) -> None:
        with tracer.start_as_current_span("inside"):
            clock.advance(3 if payload == "ok" else 2)
        if payload == "fail":
            raise ValueError("no such customer")

    worker = worker_of(instrumented, handlers={"a": handler}, poll_interval=0.02, ack_delay=ack_delay)
    work(worker, lambda stats: stats.succeeded + stats.buried == 2)

    (request,) = telemetry.spans("request")
    sends = telemetry.spans("send a")
    processes = telemetry.spans("process a")
    assert [span.kind for span in sends] == [SpanKind.PRODUCER] * 2
    assert sends[0].parent is not None
    assert sends[0].parent.span_id == request.context.span_id
    assert sends[1].parent is None
    assert len(processes) == 2
    by_id = {span.attributes["messaging.message.id"]: span for span in processes if span.attributes}
    for job_id, send in zip((ok, failing), sends, strict=True):
        run = by_id[str(job_id)]
        assert run.kind is SpanKind.CONSUMER
        (link,) = run.links
        assert (link.context.trace_id, link.context.span_id) == (send.context.trace_id, send.context.span_id)
        assert run.context.trace_id != send.context.trace_id  # a run is a trace of its own, linked
    assert by_id[str(ok)].status.status_code is StatusCode.UNSET
    failed = by_id[str(failing)]
    assert failed.status.status_code is StatusCode.ERROR
    (event,) = [event for event in failed.events if event.name == "exception"]
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"
    insides = telemetry.spans("inside")
    assert len(insides) == 2
    for inside in insides:  # what the handler traces is part of its run
        assert inside.parent is not None
        assert inside.parent.span_id in {run.context.span_id for run in processes}

    assert telemetry.histogram(otel.RUN_DURATION) == {
        of(queue="a", outcome="ok"): (1, 3.0),
        of(queue="a", outcome="error"): (1, 2.0),
    }
    assert telemetry.counts(otel.ACKED) == {of(queue="a"): 1}
    assert telemetry.counts(otel.BURIED) == {of(queue="a"): 1}


def test_a_batch_enqueue_carries_its_trace_to_every_job_it_writes(instrumented: Store, telemetry: Otel) -> None:
    tasks = Tasks()
    ran: list[int] = []

    @tasks.task("count", queue="a")
    def count(n: int) -> None:
        ran.append(n)

    ids = task_call(count.enqueue_many, instrumented, [{"n": n} for n in range(3)])

    (send,) = telemetry.spans("send a")
    assert send.attributes is not None
    assert send.attributes["messaging.batch.message_count"] == 3
    for job_id in ids:  # the inspection API shows what each job carries
        info = instrumented.get_job(job_id)
        assert info is not None
        assert info.trace is not None
        assert info.trace.split("-")[1:3] == [f"{send.context.trace_id:032x}", f"{send.context.span_id:016x}"]
    assert send.attributes["alkstore.task"] == "count"
    work(worker_of(instrumented, tasks, poll_interval=0.02), lambda stats: stats.succeeded == 3)
    assert sorted(ran) == [0, 1, 2]
    runs = telemetry.spans("process a")
    assert sorted(int(str(span.attributes["messaging.message.id"])) for span in runs if span.attributes) == ids
    for run in runs:
        (link,) = run.links
        assert (link.context.trace_id, link.context.span_id) == (send.context.trace_id, send.context.span_id)
    assert telemetry.counts(otel.ENQUEUED) == {of(queue="a", task="count"): 3}
    assert telemetry.histogram(otel.RUN_DURATION) == {of(queue="a", task="count", outcome="ok"): (3, 0.0)}


def test_a_run_that_cannot_start_is_an_error_span_with_its_reason(instrumented: Store, telemetry: Otel) -> None:
    tasks = Tasks()
    instrumented.queue("a").enqueue({"x": 1}, EnqueueOpts(max_attempts=1))  # no task, no handler for it

    @tasks.task("other", queue="a")
    def other(**_: Any) -> None: ...

    work(worker_of(instrumented, tasks, poll_interval=0.02), lambda stats: stats.buried == 1)
    (run,) = telemetry.spans("process a")
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description is not None
    assert "no handler" in run.status.description
    assert telemetry.histogram(otel.RUN_DURATION) == {of(queue="a", outcome="error"): (1, 0.0)}


def test_an_outbox_message_written_in_a_transaction_is_delivered_in_spans_linked_to_its_enqueue(
    instrumented: Store, clock: ManualClock, telemetry: Otel
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    outbox = instrumented.outbox("hooks")
    with tracer.start_as_current_span("request"), instrumented.transaction() as tx:
        instrumented.outbox_enqueue_tx(tx, "hooks", {"event": "signed-up"})
    attempts: list[Any] = []

    def deliver(payload: Any, job: Job) -> None:
        attempts.append(payload)
        if len(attempts) == 1:
            raise ConnectionError("the webhook timed out")

    assert outbox.run_once("courier", deliver)
    clock.advance(60)  # past the retry's backoff
    assert outbox.run_once("courier", deliver)

    (send,) = telemetry.spans(f"send {outbox.queue}")
    runs = telemetry.spans(f"process {outbox.queue}")
    assert [run.status.status_code for run in runs] == [StatusCode.ERROR, StatusCode.UNSET]
    for run in runs:
        (link,) = run.links
        assert (link.context.trace_id, link.context.span_id) == (send.context.trace_id, send.context.span_id)
    assert [run.attributes["alkstore.attempt"] for run in runs if run.attributes] == [1, 2]
    assert telemetry.counts(otel.RETRIED) == {of(queue=outbox.queue): 1}
    assert telemetry.counts(otel.ACKED) == {of(queue=outbox.queue): 1}
